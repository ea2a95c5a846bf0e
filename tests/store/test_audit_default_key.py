"""The audit chain is keyed by default (SPEC §8): with no key configured, the first gateway
to open a store makes one (``<sqlite file>.audit-key``, else ``toolkeeper-audit.key`` in the
working directory, mode 0600), keys the chain with it from then on, and the store keeps the
key's check value so a gateway with another key, or none, is refused. On SQLite and
PostgreSQL (docs/audit-integrity.md)."""

from __future__ import annotations

import base64
import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import create_engine, delete

from tests.support import audit_attacks as attack
from toolkeeper import opening
from toolkeeper.errors import ConfigError
from toolkeeper.store import Store
from toolkeeper.store.audit_key import AuditKey, default_key_path, read_key_file
from toolkeeper.store.schema import settings

_ENV = ("TOOLKEEPER_AUDIT_KEY", "TOOLKEEPER_AUDIT_KEY_FILE", "TOOLKEEPER_SECRETS_KEY",
        "TOOLKEEPER_SECRETS_KEY_FILE", "TOOLKEEPER_AUDIT_CHECKPOINTS")


@pytest.fixture(autouse=True)
def no_key_configured(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Nothing configured; a PostgreSQL store's key file lands in this test's directory."""
    for name in _ENV:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path))
    yield


def _key_file(url: str) -> Path:
    path = default_key_path(url)
    assert path is not None
    return path


def _verify(url: str, key: bytes | None) -> list[str]:
    store = Store.open(url, audit_key=None if key is None else AuditKey(key))
    try:
        return store.audit.verify("default").problems
    finally:
        store.close()


def test_a_fresh_store_is_keyed_with_a_key_made_on_first_start(db_url: str,
                                                               tmp_path: Path) -> None:
    with attack.open_gateway(db_url) as gw:
        attack.calls(gw, 2)
        assert gw.store.audit.verify("default").ok
    path = _key_file(db_url)
    if db_url.startswith("sqlite"):
        assert path == tmp_path / "toolkeeper.db.audit-key"
    else:
        assert path == tmp_path / "toolkeeper" / "audit.key"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    key = read_key_file(path, "audit key file")
    events = attack.events(db_url)
    assert events and all(e["hash"].startswith("hmac-sha256:") for e in events)
    assert _verify(db_url, key) == []
    wrong = _verify(db_url, attack.OTHER_KEY)
    assert any("audit key differs" in p for p in wrong)
    assert any("no audit key is configured" in p for p in _verify(db_url, None))


def test_tampering_with_a_chain_keyed_by_default_is_detected(db_url: str) -> None:
    with attack.open_gateway(db_url) as gw:
        attack.calls(gw, 3)
    key = read_key_file(_key_file(db_url), "audit key file")
    attack.edit_and_rechain(db_url, 2)  # recomputed with the public algorithm, no key
    assert any("unkeyed event after keyed events" in p for p in _verify(db_url, key))


def test_a_restart_keeps_the_same_key(db_url: str) -> None:
    with attack.open_gateway(db_url) as gw:
        attack.calls(gw, 1)
    first = _key_file(db_url).read_bytes()
    with attack.open_gateway(db_url) as gw:  # a second start finds the key it made
        attack.calls(gw, 1, tag="again-")
        assert gw.store.audit.verify("default").ok
    assert _key_file(db_url).read_bytes() == first
    assert _verify(db_url, read_key_file(_key_file(db_url), "audit key file")) == []


def test_a_keyed_store_whose_key_file_is_gone_is_refused_naming_where_it_looked(
        db_url: str) -> None:
    with attack.open_gateway(db_url) as gw:
        attack.calls(gw, 1)
    path = _key_file(db_url)
    path.rename(path.with_name("elsewhere.key"))
    with pytest.raises(ConfigError, match="audit chains are keyed") as refused:
        attack.open_gateway(db_url)
    assert str(path) in str(refused.value) and "TOOLKEEPER_AUDIT_KEY" in str(refused.value)
    assert not path.exists()  # no new key made for a store already keyed


def test_another_key_is_refused_on_a_store_keyed_by_default(
        db_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    with attack.open_gateway(db_url) as gw:
        attack.calls(gw, 1)
    monkeypatch.setenv("TOOLKEEPER_AUDIT_KEY", base64.b64encode(attack.OTHER_KEY).decode())
    with pytest.raises(ConfigError, match="another audit key"):
        attack.open_gateway(db_url)
    monkeypatch.setenv("TOOLKEEPER_AUDIT_KEY",
                       base64.b64encode(read_key_file(_key_file(db_url), "x")).decode())
    with attack.open_gateway(db_url) as gw:  # its own key, given another way: accepted
        attack.calls(gw, 1, tag="env-")
        assert gw.store.audit.verify("default").ok


def test_a_store_keyed_before_key_checks_refuses_a_key_its_heads_do_not_match(
        db_url: str) -> None:
    with attack.open_gateway(db_url, audit_key=attack.KEY) as gw:
        attack.calls(gw, 1)
    engine = create_engine(db_url)  # as a store keyed before check values were kept
    with engine.begin() as conn:
        conn.execute(delete(settings).where(settings.c.key == "audit_key_check"))
    engine.dispose()
    with pytest.raises(ConfigError, match="another audit key"):
        attack.open_gateway(db_url, audit_key=attack.OTHER_KEY)
    attack.open_gateway(db_url, audit_key=attack.KEY).close()


def test_without_the_check_another_key_would_write_chains_that_fail_to_verify(
        db_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The rule broken (the key check skipped): a gateway with another key opens and writes,
    and verify fails for every reader afterwards — what the refusal above prevents."""
    with attack.open_gateway(db_url) as gw:
        attack.calls(gw, 1)
    key = read_key_file(_key_file(db_url), "audit key file")
    monkeypatch.setattr(opening, "_store_key", lambda store, url, configured: configured)
    with attack.open_gateway(db_url, audit_key=attack.OTHER_KEY) as gw:
        attack.calls(gw, 1, tag="other-")
    assert _verify(db_url, key) != [] and _verify(db_url, attack.OTHER_KEY) != []


def test_a_legacy_unkeyed_store_is_keyed_from_its_first_start_on(db_url: str) -> None:
    with attack.open_gateway(db_url, legacy=True) as gw:  # written before keys by default
        attack.calls(gw, 1)
    assert all(e["hash"].startswith("sha256:") for e in attack.events(db_url))
    with attack.open_gateway(db_url) as gw:  # sealed, then continued keyed
        attack.calls(gw, 1, tag="keyed-")
    events = attack.events(db_url)
    assert events[0]["hash"].startswith("sha256:")
    assert events[-1]["hash"].startswith("hmac-sha256:")
    assert _verify(db_url, read_key_file(_key_file(db_url), "audit key file")) == []


def test_racing_first_starts_end_with_one_key(tmp_path: Path) -> None:
    from toolkeeper.store.audit_key import make_key_file

    path = tmp_path / "race.key"
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        try:
            make_key_file(path)
        finally:
            os._exit(0)
    mine = make_key_file(path)
    os.waitpid(pid, 0)
    assert read_key_file(path, "audit key file") == mine
    assert [p.name for p in tmp_path.iterdir()] == ["race.key"]  # no file left aside


def test_a_key_that_cannot_be_made_is_a_clear_refusal(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    state = tmp_path / "state"
    state.write_text("a file where the state directory should be")
    monkeypatch.setenv("XDG_STATE_HOME", str(state))
    url = f"sqlite:///{tmp_path}/elsewhere.db"
    path = _key_file(url)
    monkeypatch.setattr("toolkeeper.opening.default_key_path",
                        lambda url: state / "toolkeeper" / "audit.key")
    with pytest.raises(ConfigError, match="cannot make the audit key file"):
        attack.open_gateway(url)
    assert not path.exists()

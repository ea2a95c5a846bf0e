"""Tamper evidence that survives a database writer (docs/audit-integrity.md): the chain is
HMAC'd with a key kept outside the database, heads are MAC'd, and signed checkpoints outside
the database catch a rollback to a replayed head. On SQLite and PostgreSQL."""

from __future__ import annotations

import base64
import json
import os
import stat
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import create_engine, text

from tests.support import audit_attacks as attack
from toolkeeper import Gateway
from toolkeeper.errors import ConfigError
from toolkeeper.secrets import generate_key_file
from toolkeeper.store import Store
from toolkeeper.store.audit_checkpoints import Checkpoints
from toolkeeper.store.audit_key import AuditKey, derive, load_master_key

_open = attack.open_gateway
_calls = attack.calls


def _written(url: str, n: int = 3, **kw: Any) -> None:
    """A keyed store with ``n`` calls' worth of events, its gateway closed."""
    with _open(url, audit_key=attack.KEY, **kw) as gw:
        _calls(gw, n)


def _verify(url: str, key: bytes | None = attack.KEY, checkpoints: Path | None = None,
            tenant: str | None = "default") -> Any:
    """Verify as the operator does: the store read with the key, never a gateway."""
    audit_key = None if key is None else AuditKey(key)
    cps = None if checkpoints is None or audit_key is None else Checkpoints(checkpoints,
                                                                              audit_key)
    store = Store.open(url, audit_key=audit_key, checkpoints=cps)
    try:
        return store.audit.verify(tenant)
    finally:
        store.close()


@pytest.mark.parametrize("keep_mac", [False, True], ids=["head-mac-cleared", "head-mac-kept"])
def test_deleting_the_last_event_and_moving_the_head_back_is_detected(
        db_url: str, keep_mac: bool) -> None:
    _written(db_url)
    assert _verify(db_url).ok
    attack.delete_last_event(db_url, keep_mac=keep_mac)
    report = _verify(db_url)
    assert not report.ok
    assert any("chain head" in p for p in report.problems), report.problems


def test_editing_a_middle_event_and_rechaining_with_sha256_is_detected(db_url: str) -> None:
    _written(db_url)
    middle = len(attack.events(db_url)) // 2
    attack.edit_and_rechain(db_url, middle)
    report = _verify(db_url)
    assert not report.ok
    assert any(p.startswith(f"seq {middle}: unkeyed event after keyed") for p in
               report.problems), report.problems
    assert any("chain head" in p for p in report.problems)


def test_editing_an_event_in_place_is_detected(db_url: str) -> None:
    _written(db_url)
    engine = create_engine(db_url)
    with engine.begin() as conn:  # the keyed hashes stay: the links hold, the HMAC does not
        conn.execute(text("UPDATE audit_events SET reason = 'forged' WHERE seq = 2 "
                          "AND tenant_key = 'default'"))
    engine.dispose()
    report = _verify(db_url)
    assert not report.ok
    assert "seq 2: event was altered (or the audit key differs)" in report.problems


def test_replaying_a_saved_head_is_caught_by_the_checkpoint_file(
        db_url: str, tmp_path: Path) -> None:
    cps = tmp_path / "audit.checkpoints"
    with _open(db_url, audit_key=attack.KEY, audit_checkpoint_path=cps) as gw:
        _calls(gw, 2)
        saved = attack.head(db_url)
        _calls(gw, 2, tag="later-")
    assert _verify(db_url, checkpoints=cps).ok
    attack.replay_head(db_url, saved)
    # the head row is genuine, so the key alone cannot tell ...
    assert _verify(db_url).ok
    # ... but the checkpoint written at close records a later head
    report = _verify(db_url, checkpoints=cps)
    assert not report.ok
    assert any("rolled back" in p for p in report.problems), report.problems


def test_checkpoint_lines_are_signed_and_private(db_url: str, tmp_path: Path) -> None:
    cps = tmp_path / "audit.checkpoints"
    _written(db_url, audit_checkpoint_path=cps)
    if os.name == "posix":
        assert stat.S_IMODE(cps.stat().st_mode) == 0o600
    lines = [json.loads(x) for x in cps.read_text().splitlines()]
    assert {"tenant", "seq", "hash", "ts", "mac"} <= set(lines[-1])
    forged = {**lines[-1], "seq": lines[-1]["seq"] - 1}
    with cps.open("a") as f:
        f.write(json.dumps(forged) + "\n")
    report = _verify(db_url, checkpoints=cps)
    assert not report.ok and any("MAC does not match" in p for p in report.problems)


def test_downgrading_the_chain_to_plain_sha256_is_detected_with_the_key(db_url: str) -> None:
    _written(db_url)
    attack.downgrade(db_url)
    assert _verify(db_url, key=None).ok  # without the key it reads as a legacy chain
    report = _verify(db_url)
    assert not report.ok
    assert any("not sealed" in p for p in report.problems), report.problems


def test_a_downgrade_sealed_by_a_later_gateway_is_still_caught_by_checkpoints(
        db_url: str, tmp_path: Path) -> None:
    cps = tmp_path / "audit.checkpoints"
    _written(db_url, audit_checkpoint_path=cps)
    attack.downgrade(db_url)
    with _open(db_url, audit_key=attack.KEY, audit_checkpoint_path=cps) as gw:
        _calls(gw, 1, tag="after-")  # trust on first use: this gateway seals the head
    report = _verify(db_url, checkpoints=cps)
    assert not report.ok
    assert any("differs from checkpoint" in p for p in report.problems), report.problems


def test_untouched_keyed_chains_verify_clean(db_url: str, tmp_path: Path) -> None:
    cps = tmp_path / "audit.checkpoints"
    _written(db_url, audit_checkpoint_path=cps)
    assert all(e["hash"].startswith("hmac-sha256:") for e in attack.events(db_url))
    for tenant in ("default", None):
        report = _verify(db_url, checkpoints=cps, tenant=tenant)
        assert report.ok and report.problems == [] and report.warnings == [], report
    assert _verify(db_url).events == len(attack.events(db_url))


def test_a_legacy_unkeyed_prefix_followed_by_keyed_events_verifies_clean(
        db_url: str, tmp_path: Path) -> None:
    with _open(db_url, legacy=True) as gw:  # before the upgrade: no key
        _calls(gw, 2)
    legacy = attack.events(db_url)
    assert legacy and all(e["hash"].startswith("sha256:") for e in legacy)
    assert attack.head(db_url)["mac"] is None
    cps = tmp_path / "audit.checkpoints"
    with _open(db_url, audit_key=attack.KEY, audit_checkpoint_path=cps) as gw:
        _calls(gw, 2, tag="keyed-")
    after = attack.events(db_url)
    assert after[: len(legacy)] == legacy
    assert all(e["hash"].startswith("hmac-sha256:") for e in after[len(legacy):])
    report = _verify(db_url, checkpoints=cps)
    assert report.ok and report.warnings == [], report
    # and the legacy prefix is now covered: editing it is detected
    attack.edit_and_rechain(db_url, 1)
    assert not _verify(db_url, checkpoints=cps).ok


def test_a_gateway_with_the_key_seals_a_legacy_chain_and_verify_does_not(db_url: str) -> None:
    with _open(db_url, legacy=True) as gw:
        _calls(gw, 1)
    report = _verify(db_url)  # reading with the key seals nothing
    assert not report.ok and any("not sealed" in p for p in report.problems)
    Gateway.open(db_url, audit_key=attack.KEY).close()
    assert _verify(db_url).ok
    attack.edit_and_rechain(db_url, 1, keep_mac=True)
    assert not _verify(db_url).ok


def test_a_legacy_unkeyed_chain_verifies_with_a_warning(db_url: str) -> None:
    with _open(db_url, legacy=True) as gw:
        _calls(gw, 1)
        report = gw.store.audit.verify("default")
    assert report.ok and report.problems == []
    assert any("unkeyed chain" in w for w in report.warnings)


def test_a_keyed_store_needs_the_key_to_write_and_to_verify(db_url: str) -> None:
    _written(db_url, n=1)
    with pytest.raises(ConfigError, match="audit chains are keyed"):
        Gateway.open(db_url)
    report = _verify(db_url, key=None)
    assert not report.ok and any("no audit key is configured" in p for p in report.problems)
    wrong = _verify(db_url, key=attack.OTHER_KEY)
    assert not wrong.ok and any("audit key differs" in p for p in wrong.problems)


def test_the_key_comes_from_the_environment_or_derives_from_the_secrets_master_key(
        db_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TOOLKEEPER_SECRETS_KEY", raising=False)
    master = tmp_path / "secrets.key"
    generate_key_file(master)
    with _open(db_url, secrets="embedded", secrets_key_file=master) as gw:
        _calls(gw, 1)
    derived = derive(load_master_key({}, master))
    assert derived != master.read_bytes()
    assert _verify(db_url, key=derived).ok
    monkeypatch.setenv("TOOLKEEPER_AUDIT_KEY", base64.b64encode(derived).decode())
    with _open(db_url) as gw:  # the same key, given directly
        _calls(gw, 1, tag="env-")
        assert gw.store.audit.verify("default").ok


def test_deleting_a_whole_chain_is_caught_by_the_checkpoint_file(
        db_url: str, tmp_path: Path) -> None:
    cps = tmp_path / "audit.checkpoints"
    _written(db_url, audit_checkpoint_path=cps)
    engine = create_engine(db_url)
    with engine.begin() as conn:
        conn.execute(text("DELETE FROM audit_events WHERE tenant_key = 'default'"))
        conn.execute(text("DELETE FROM audit_heads WHERE tenant_key = 'default'"))
    engine.dispose()
    key = AuditKey(attack.KEY)
    store = Store.open(db_url, audit_key=key, checkpoints=Checkpoints(cps, key))
    try:
        reports = {r.tenant_id: r for r in store.audit.verify_all()}
    finally:
        store.close()
    assert "default" in reports and not reports["default"].ok
    assert any("rolled back" in p for p in reports["default"].problems)

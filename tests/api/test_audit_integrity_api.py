"""``GET /audit/verify`` on a keyed store (docs/audit-integrity.md): a database writer
without the audit key cannot rewrite the chain behind the running server's back."""

from __future__ import annotations

import base64
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.api.exec_fixtures import api_for
from tests.support import audit_attacks as attack
from tests.support.rest import RestClient

INVOICE = {"invoice": "inv-1", "amount": 5}


@pytest.fixture
def keyed(monkeypatch: pytest.MonkeyPatch) -> None:
    """The server's audit key comes from the environment, as an operator would set it."""
    monkeypatch.setenv("TOOLKEEPER_AUDIT_KEY", base64.b64encode(attack.KEY).decode())


def _calls(api: RestClient, n: int = 3) -> None:
    for i in range(n):
        paid = api.execute("bot", "charge", {**INVOICE, "invoice": f"inv-{i}"}).json()
        assert paid["status"] == "succeeded", paid
        added = api.execute("bot", "add", {"a": i, "b": 1}).json()
        assert added["status"] == "succeeded", added
    api.gw.flush()


def _verify(api: RestClient) -> dict[str, Any]:
    resp = api.client.get("/audit/verify", headers=api.auth("operator"))
    assert resp.status_code == 200, resp.text
    body: dict[str, Any] = resp.json()
    return body


@pytest.fixture
def api(db_url: str, keyed: None) -> Iterator[RestClient]:
    with api_for(db_url) as a:
        yield a


def test_deleting_the_last_event_and_moving_the_head_back_fails_verify(
        api: RestClient, db_url: str) -> None:
    _calls(api)
    assert _verify(api)["ok"] is True
    attack.delete_last_event(db_url)
    body = _verify(api)
    assert body["ok"] is False
    assert any("chain head" in p for p in body["problems"]), body


def test_editing_a_middle_event_and_rechaining_fails_verify(api: RestClient, db_url: str) -> None:
    _calls(api)
    attack.edit_and_rechain(db_url, len(attack.events(db_url)) // 2, keep_mac=True)
    body = _verify(api)
    assert body["ok"] is False and body["problems"]


def test_a_downgrade_to_plain_sha256_fails_verify(api: RestClient, db_url: str) -> None:
    _calls(api)
    attack.downgrade(db_url)
    body = _verify(api)
    assert body["ok"] is False
    assert any("not sealed" in p for p in body["problems"]), body


def test_a_replayed_head_fails_verify_through_the_checkpoint_file(
        db_url: str, keyed: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TOOLKEEPER_AUDIT_CHECKPOINTS", str(tmp_path / "audit.checkpoints"))
    with api_for(db_url) as api:
        _calls(api, 2)
        saved = attack.head(db_url)
        _calls(api, 2)
    # between restarts, with the server's checkpoint (written at close) on another disk
    attack.replay_head(db_url, saved)
    with api_for(db_url) as api:
        body = _verify(api)
    assert body["ok"] is False
    assert any("rolled back" in p for p in body["problems"]), body


def test_an_untouched_keyed_chain_verifies_clean(api: RestClient) -> None:
    _calls(api)
    body = _verify(api)
    assert body["ok"] is True and body["problems"] == []
    assert body["events"] > 0


def test_without_a_configured_key_the_chain_is_keyed_by_the_key_made_on_first_start(
        db_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("TOOLKEEPER_AUDIT_KEY", "TOOLKEEPER_AUDIT_KEY_FILE", "TOOLKEEPER_SECRETS_KEY",
                 "TOOLKEEPER_SECRETS_KEY_FILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path))  # where a PostgreSQL store's key goes
    with api_for(db_url) as api:
        _calls(api, 1)
        body = _verify(api)
        assert body["ok"] is True and body["warnings"] == [
            "no checkpoint file configured: a rollback to a saved head row would not be "
            "detected"], body
        assert all(e["hash"].startswith("hmac-sha256:") for e in attack.events(db_url))
        attack.edit_and_rechain(db_url, 2)
        body = _verify(api)
    assert body["ok"] is False and any("unkeyed event after keyed" in p
                                       for p in body["problems"]), body

"""``toolkeeper calls`` (resolving unknown outcomes) and ``toolkeeper audit``."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest
from cli_helpers import Invoke, as_json, new_token
from sqlalchemy import create_engine, text

FLAKY_MODULE = '''
from toolkeeper.errors import ToolError
from toolkeeper.model.enums import Risk, SideEffect
from toolkeeper.providers.base import ToolPolicy
from toolkeeper.providers.native import BaseTool


class FlakyPolicy(ToolPolicy):
    """No guardrails: the tool only loses its connection."""


class FlakySender(BaseTool):
    """Sends a message, then loses the connection before the reply."""

    tool_name = "flaky_send"
    risk_default = Risk.LOW
    side_effect = SideEffect.IRREVERSIBLE
    policy_model = FlakyPolicy
    inline = True

    def execute(self, action, request, context):
        raise ToolError("upstream_error", "connection reset after the request was sent",
                        may_have_executed=True)
'''

FLAKY_CONFIG = '''
version: 1
tools:
  - native: tk_cli_flaky_tool:FlakySender
profiles:
  - name: sender
    autonomy: 3
    activations: [{tool: flaky_send}]
agents:
  - {name: sender-bot, profile: sender}
'''


@pytest.fixture
def unknown_call(cli: Invoke, tmp_path: Path, admin_token: str) -> str:
    """A call whose outcome is ``unknown``: the tool may have run, then failed."""
    (tmp_path / "tk_cli_flaky_tool.py").write_text(textwrap.dedent(FLAKY_MODULE))
    (tmp_path / "flaky.yaml").write_text(FLAKY_CONFIG)
    applied = cli("apply", "-f", str(tmp_path / "flaky.yaml"))
    assert applied.exit_code == 0, applied.output
    res = cli("call", "flaky_send", "--agent", "sender-bot", "--json")
    assert res.exit_code == 1
    body = as_json(res)
    assert body["status"] == "unknown"
    call_id = body["call_id"]
    assert isinstance(call_id, str)
    return call_id


def test_unknown_outcome_is_listed_and_resolved_by_an_operator(
        cli: Invoke, unknown_call: str, admin_token: str) -> None:
    listed = as_json(cli("calls", "list", "--status", "unknown", "--json"))
    assert [c["call_id"] for c in listed] == [unknown_call]
    retry = as_json(cli("call", "flaky_send", "--agent", "sender-bot", "--json",
                        "--idempotency-key", "k1"))
    assert retry["status"] == "unknown"  # a fresh key runs; the unknown one never re-runs
    anonymous = cli("calls", "resolve", unknown_call, "--status", "succeeded")
    assert anonymous.exit_code == 1 and "unauthenticated" in anonymous.stderr
    operator = new_token(cli, admin_token, "operator")
    res = cli("calls", "resolve", unknown_call, "--status", "succeeded", "--output-json",
              '{"delivered": true}', "--note", "checked the mail log", "--token", operator,
              "--json")
    assert res.exit_code == 0, res.output
    rec = json.loads(res.stdout)
    assert rec["state"] == "succeeded"
    assert rec["result"]["output"] == {"delivered": True}
    remaining = as_json(cli("calls", "list", "--status", "unknown", "--json"))
    assert [c["call_id"] for c in remaining] == [retry["call_id"]]
    again = cli("calls", "resolve", unknown_call, "--status", "failed", "--token", operator)
    assert again.exit_code == 1 and "invalid_state" in again.stderr


def test_resolve_status_must_be_succeeded_or_failed(cli: Invoke, unknown_call: str) -> None:
    res = cli("calls", "resolve", unknown_call, "--status", "maybe")
    assert res.exit_code == 2


def test_audit_verify_is_clean_then_detects_a_tampered_row(
        cli: Invoke, db_url: str, demo_store: str) -> None:
    cli("call", "lookup_invoice", "--agent", "billing-bot", "--arg", "invoice_id=INV-1001")
    clean = cli("audit", "verify")
    assert clean.exit_code == 0, clean.output
    assert "verified" in clean.stdout
    engine = create_engine(db_url)
    with engine.begin() as conn:
        changed = conn.execute(text("UPDATE audit_events SET data='{}' WHERE seq=2")).rowcount
    engine.dispose()
    assert changed >= 1
    broken = cli("audit", "verify")
    assert broken.exit_code == 1
    assert "seq 2: event was altered" in broken.stderr
    report = as_json(cli("audit", "verify", "--json"))
    assert report["ok"] is False


def test_audit_tail_filters_and_limits(cli: Invoke, demo_store: str) -> None:
    for invoice in ("INV-1001", "INV-1002", "INV-404"):
        cli("call", "lookup_invoice", "--agent", "billing-bot", "--arg", f"invoice_id={invoice}")
    events = as_json(cli("audit", "tail", "--agent", "billing-bot", "--json"))
    assert [e["type"] for e in events] == ["call.succeeded", "call.succeeded", "call.failed"]
    assert [e["seq"] for e in events] == sorted(e["seq"] for e in events)
    last = as_json(cli("audit", "tail", "-n", "1", "--type", "call.failed", "--json"))
    assert [e["reason"] for e in last] == ["invoice_not_found"]
    table = cli("audit", "tail", "--tool", "lookup_invoice")
    assert table.exit_code == 0 and "call.failed" in table.stdout


def test_audit_follow_stops_at_its_timeout(cli: Invoke, demo_store: str) -> None:
    cli("call", "lookup_invoice", "--agent", "billing-bot", "--arg", "invoice_id=INV-1001")
    res = cli("audit", "tail", "--follow", "--timeout", "0.2", "--json",
              "--agent", "billing-bot")
    assert res.exit_code == 0, res.output
    lines = [json.loads(line) for line in res.stdout.splitlines()]
    assert [e["type"] for e in lines] == ["call.succeeded"]

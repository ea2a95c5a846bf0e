"""Every listing has ``--json`` (machine-readable, nothing else on stdout) and every
command has ``--help``."""

from __future__ import annotations

import json

import pytest
from cli_helpers import Invoke, as_json

COMMANDS = [
    ("init",), ("check",), ("apply",), ("call",), ("demo",), ("approvals", "list"),
    ("approvals", "approve"), ("approvals", "deny"), ("calls", "list"), ("calls", "resolve"),
    ("audit", "tail"), ("audit", "verify"), ("tools", "list"), ("tools", "show"),
    ("tools", "publish"), ("tools", "version"),
    ("tokens", "create"), ("tokens", "revoke"), ("tokens", "list"), ("db", "upgrade"),
]


@pytest.mark.parametrize("command", COMMANDS, ids=" ".join)
def test_every_command_has_help(cli: Invoke, command: tuple[str, ...]) -> None:
    res = cli(*command, "--help")
    assert res.exit_code == 0, res.output
    assert "Usage" in res.stdout
    doc_line = res.stdout.split("Usage", 1)[1].splitlines()
    assert any(line.strip() for line in doc_line[1:])


def test_listings_print_parseable_json(cli: Invoke, demo_store: str) -> None:
    cli("call", "pay_invoice", "--agent", "billing-bot", "--arg", "invoice_id=INV-1002",
        "--arg", "amount=480", "--turn-group", "t")
    approvals = as_json(cli("approvals", "list", "--json"))
    assert [(a["tool"], a["kind"], a["status"]) for a in approvals] == [
        ("pay_invoice", "confirm", "pending")]
    assert as_json(cli("approvals", "list", "--status", "all", "--json"))[0]["id"] == \
        approvals[0]["id"]
    tools = {t["name"]: t for t in as_json(cli("tools", "list", "--json"))}
    assert {"calculate", "datetime_utils", "pay_invoice", "send_email"} <= set(tools)
    assert tools["pay_invoice"]["side_effect"] == "compensatable"
    builtins = as_json(cli("tools", "list", "--type", "built_in", "--json"))
    assert sorted(t["name"] for t in builtins) == ["calculate", "datetime_utils"]
    assert as_json(cli("calls", "list", "--json")) == []
    assert [t["role"] for t in as_json(cli("tokens", "list", "--json"))] == ["admin"]
    assert as_json(cli("audit", "tail", "--json"))


def test_tools_show_lists_actions_with_risk_and_compensation(
        cli: Invoke, demo_store: str) -> None:
    shown = as_json(cli("tools", "show", "pay_invoice", "--json"))
    [action] = shown["actions"]
    assert (action["risk"], action["side_effect"], action["compensation"]) == (
        "high", "compensatable", "refund_invoice.run")
    assert [v["version"] for v in shown["versions"]] == ["1.0.0"]
    table = cli("tools", "show", "pay_invoice")
    assert table.exit_code == 0 and "refund_invoice.run" in table.stdout
    missing = cli("tools", "show", "nope", "--json")
    assert missing.exit_code == 1 and missing.stdout == ""
    assert "not_found" in missing.stderr


def test_other_tenants_see_nothing(cli: Invoke, demo_store: str) -> None:
    res = cli("--tenant", "acme", "tools", "list", "--json")
    names = [t["name"] for t in json.loads(res.stdout)]
    assert names == ["calculate", "datetime_utils"]  # global built-ins only
    called = cli("--tenant", "acme", "call", "lookup_invoice", "--agent", "billing-bot",
                 "--arg", "invoice_id=INV-1001", "--json")
    assert as_json(called)["status"] == "denied"


def test_tools_publish_and_version_follow_the_lifecycle(
        cli: Invoke, db_url: str, admin_token: str) -> None:
    from toolkeeper import Gateway, ToolDefinition

    with Gateway.open(db_url) as gw:  # a draft of the default tenant
        gw.registry.create(ToolDefinition(name="memo", tenant_id="default",
                                          implementation_type="http",
                                          implementation={"url": "https://example.com/m"}))
    assert cli("tools", "publish", "memo").exit_code == 1  # no token: unauthenticated
    done = cli("tools", "publish", "memo", "--token", admin_token, "--json")
    assert done.exit_code == 0, done.output
    assert (as_json(done)["status"], as_json(done)["version"]) == ("published", "1.0.0")
    lower = cli("tools", "version", "memo", "0.9.0", "--token", admin_token)
    assert lower.exit_code == 1 and "invalid_version" in lower.stderr
    bumped = as_json(cli("tools", "version", "memo", "1.1.0", "--token", admin_token, "--json"))
    assert (bumped["status"], bumped["version"]) == ("published", "1.1.0")
    shown = as_json(cli("tools", "show", "memo", "--json"))
    assert [v["version"] for v in shown["versions"]] == ["1.0.0", "1.1.0"]
    missing = cli("tools", "publish", "nope", "--token", admin_token)
    assert missing.exit_code == 1 and "not_found" in missing.stderr


@pytest.mark.parametrize("command", [("publish", "calculate"),
                                     ("version", "calculate", "9.0.0")])
def test_a_tenant_admin_cannot_change_a_global_tool(
        cli: Invoke, db_url: str, demo_store: str, command: tuple[str, ...]) -> None:
    """The registry's rule, as over REST (403 ``forbidden``): global tools come from the
    operator's code and configuration; the library refuses the same way."""
    from toolkeeper import Gateway
    from toolkeeper.errors import OperationRefused

    res = cli("tools", *command, "--token", demo_store)
    assert res.exit_code == 1
    assert "forbidden" in res.stderr and "global tool" in res.stderr, res.stderr
    with Gateway.open(db_url) as gw, pytest.raises(OperationRefused) as refused:
        gw.registry.publish("calculate", "default")
    assert refused.value.reason == "forbidden"

"""The demo's native tools keep their own guardrails (policy models), through the CLI."""

from __future__ import annotations

from pathlib import Path

from cli_helpers import DEMO_YAML, Invoke, as_json


def test_email_outside_the_allowed_domains_is_refused_at_preview(
        cli: Invoke, demo_store: str) -> None:
    res = cli("call", "send_email", "--agent", "billing-bot", "--arg", "to=boss@evil.test",
              "--arg", "subject=s", "--arg", "body=b", "--json")
    assert res.exit_code == 1
    body = as_json(res)
    assert (body["status"], body["reason"]) == ("denied", "recipient_not_allowed")


def test_unknown_invoice_fails_with_the_tools_reason(cli: Invoke, demo_store: str) -> None:
    res = as_json(cli("call", "lookup_invoice", "--agent", "billing-bot", "--arg",
                      "invoice_id=INV-9", "--json"))
    assert (res["status"], res["reason"]) == ("failed", "invoice_not_found")


def test_profile_policy_values_reach_the_tool(cli: Invoke, tmp_path: Path) -> None:
    text = DEMO_YAML.read_text().replace(
        "      - {tool: lookup_invoice}",
        "      - {tool: lookup_invoice, policy: {show_email: false}}")
    config = tmp_path / "demo.yaml"
    config.write_text(text)
    assert cli("apply", "-f", str(config)).exit_code == 0
    out = as_json(cli("call", "lookup_invoice", "--agent", "billing-bot", "--arg",
                      "invoice_id=INV-1001", "--json"))["output"]
    assert out["customer"] == "Acme Corp" and "email" not in out


def test_apply_prune_removes_agents_the_file_dropped(cli: Invoke, tmp_path: Path) -> None:
    assert cli("apply", "-f", str(DEMO_YAML)).exit_code == 0
    text = DEMO_YAML.read_text().replace(
        "  - {name: janitor-bot, profile: repo-janitor, tenant_id: default}\n", "")
    config = tmp_path / "demo.yaml"
    config.write_text(text)
    kept = as_json(cli("apply", "-f", str(config), "--json"))
    assert kept["pruned"] == []
    pruned = as_json(cli("apply", "-f", str(config), "--prune", "--json"))
    assert pruned["pruned"] == ["agent:default/janitor-bot"]
    gone = as_json(cli("call", "delete_repository", "--agent", "janitor-bot", "--arg",
                       "name=legacy-reports", "--json"))
    assert (gone["status"], gone["reason"]) == ("denied", "unauthenticated")

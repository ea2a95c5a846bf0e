"""``toolkeeper call`` and ``toolkeeper approvals``: a gated call, decided by a person."""

from __future__ import annotations

import json

from cli_helpers import Invoke, as_json, new_token

BIG_PAYMENT = ("call", "pay_invoice", "--agent", "billing-bot", "--arg", "invoice_id=INV-1003",
               "--arg", "amount=4200", "--turn-group", "t1")


def test_call_json_returns_status_and_reason(cli: Invoke, demo_store: str) -> None:
    res = cli("call", "delete_repository", "--agent", "billing-bot", "--arg", "name=x",
              "--json")
    assert res.exit_code == 1
    body = json.loads(res.stdout)
    assert (body["status"], body["reason"]) == ("denied", "tool_not_enabled")
    assert res.stderr == ""


def test_call_values_parse_as_json_when_they_can(cli: Invoke, demo_store: str) -> None:
    # "4200" must arrive as a number: the schema wants one, and the adjuster compares it
    res = cli(*BIG_PAYMENT, "--json")
    assert res.exit_code == 3, res.output
    body = as_json(res)
    assert (body["status"], body["risk"], body["gate"]) == (
        "approval_required", "critical", "approve")
    as_string = cli("call", "pay_invoice", "--agent", "billing-bot", "--args-json",
                    '{"invoice_id": "INV-1003", "amount": "4200"}', "--json")
    assert as_json(as_string)["reason"] == "invalid_arguments"


def test_bad_args_json_is_a_usage_error(cli: Invoke, demo_store: str) -> None:
    res = cli("call", "lookup_invoice", "--agent", "billing-bot", "--args-json", "{nope")
    assert res.exit_code == 2
    assert "invalid_arguments" in res.stderr


def test_preview_then_resubmit_with_the_token(cli: Invoke, demo_store: str) -> None:
    mail = ("call", "send_email", "--agent", "billing-bot", "--arg", "to=ap@acme.example",
            "--arg", "subject=Hello", "--arg", "body=Your invoice", "--json")
    first = cli(*mail)
    assert first.exit_code == 3
    body = as_json(first)
    assert body["status"] == "preview_required"
    assert body["preview"]["data"]["to"] == "ap@acme.example"
    sent = cli(*mail, "--preview-token", body["preview_token"])
    assert sent.exit_code == 0, sent.output
    assert as_json(sent)["output"]["to"] == "ap@acme.example"


def test_approve_without_a_token_is_unauthenticated(cli: Invoke, demo_store: str) -> None:
    approval_id = as_json(cli(*BIG_PAYMENT, "--json"))["approval_id"]
    res = cli("approvals", "approve", approval_id)
    assert res.exit_code == 1
    assert "unauthenticated" in res.stderr
    bogus = cli("approvals", "approve", approval_id, "--token", "tk_not-a-token")
    assert bogus.exit_code == 1 and "unauthenticated" in bogus.stderr
    still = as_json(cli("approvals", "list", "--json"))
    assert [a["id"] for a in still] == [approval_id]


def test_the_agent_cannot_approve_its_own_call(cli: Invoke, demo_store: str) -> None:
    approval_id = as_json(cli(*BIG_PAYMENT, "--json"))["approval_id"]
    agent_token = new_token(cli, demo_store, "agent", agent="billing-bot")
    res = cli("approvals", "approve", approval_id, "--token", agent_token)
    assert res.exit_code == 1
    assert "approver_not_allowed" in res.stderr


def test_approver_approves_and_the_resubmitted_call_runs(cli: Invoke, demo_store: str) -> None:
    approval_id = as_json(cli(*BIG_PAYMENT, "--json"))["approval_id"]
    approver = new_token(cli, demo_store, "approver")
    res = cli("approvals", "approve", approval_id, "--note", "PO 42", "--json",
              env={"TOOLKEEPER_TOKEN": approver})
    assert res.exit_code == 0, res.output
    decided = json.loads(res.stdout)
    assert (decided["status"], decided["note"]) == ("approved", "PO 42")
    assert as_json(cli("approvals", "list", "--json")) == []
    paid = cli(*BIG_PAYMENT, "--approval-id", approval_id, "--json")
    assert paid.exit_code == 0, paid.output
    assert as_json(paid)["output"]["amount_paid"] == 4200


def test_denied_approval_stops_the_call(cli: Invoke, demo_store: str) -> None:
    approval_id = as_json(cli(*BIG_PAYMENT, "--json"))["approval_id"]
    approver = new_token(cli, demo_store, "approver")
    res = cli("approvals", "deny", approval_id, "--note", "no PO", "--token", approver)
    assert res.exit_code == 0, res.output
    again = cli(*BIG_PAYMENT, "--approval-id", approval_id, "--json")
    assert again.exit_code == 1
    assert as_json(again)["reason"] == "approval_denied"
    twice = cli("approvals", "deny", approval_id, "--token", approver)
    assert twice.exit_code == 1 and "invalid_state" in twice.stderr


def test_approve_with_edited_arguments_binds_the_edit(cli: Invoke, demo_store: str) -> None:
    approval_id = as_json(cli(*BIG_PAYMENT, "--json"))["approval_id"]
    approver = new_token(cli, demo_store, "approver")
    edited = '{"invoice_id": "INV-1003", "amount": 4000}'
    res = cli("approvals", "approve", approval_id, "--edit-args-json", edited,
              "--token", approver)
    assert res.exit_code == 0, res.output
    original = cli(*BIG_PAYMENT, "--approval-id", approval_id, "--json")
    assert as_json(original)["reason"] == "approval_mismatch"
    with_edit = cli("call", "pay_invoice", "--agent", "billing-bot", "--args-json", edited,
                    "--turn-group", "t2", "--approval-id", approval_id, "--json")
    assert with_edit.exit_code == 0, with_edit.output

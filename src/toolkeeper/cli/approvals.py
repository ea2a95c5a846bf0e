"""``toolkeeper approvals list|approve|deny``: the approver's inbox (SPEC §3)."""

from __future__ import annotations

from typing import Annotated

import typer

from toolkeeper.cli._common import (
    JsonFlag,
    TokenOption,
    fields_table,
    gateway,
    parse_json,
    person,
    print_json,
    state,
    table,
)
from toolkeeper.services.approvals import approval_json
from toolkeeper.store.records import ApprovalRecord

app = typer.Typer(help="List and decide approvals and confirmations.", no_args_is_help=True)

NoteOption = Annotated[str | None, typer.Option("--note", help="Why (kept in the record).")]


def _row(rec: ApprovalRecord) -> list[object]:
    return [rec.id, rec.kind, rec.agent, f"{rec.tool}.{rec.action}", rec.risk,
            rec.status.value, rec.summary, rec.arguments, rec.expires_at.isoformat("T", "seconds")]


def _show(rec: ApprovalRecord, json_out: bool) -> None:
    if json_out:  # the one rendering: what REST answers and the client reads
        print_json(approval_json(rec))
        return
    fields_table(f"approval {rec.id}", [
        ("status", rec.status.value), ("kind", rec.kind), ("agent", rec.agent),
        ("call", f"{rec.tool}.{rec.action} v{rec.tool_version}"), ("risk", rec.risk),
        ("gate", rec.gate), ("decided_by", rec.decided_by),
        ("decided_by_subject", rec.decided_by_subject),
        ("decided_by_issuer", rec.decided_by_issuer), ("note", rec.note),
        ("edited_arguments", rec.edited_arguments), ("arguments", rec.arguments)])


@app.command("list")
def list_(
    ctx: typer.Context,
    status: Annotated[str, typer.Option(
        "--status", help="pending, approved, denied, consumed, expired, or all.")] = "pending",
    limit: Annotated[int, typer.Option("--limit", min=1, max=1000)] = 100,
    json_out: JsonFlag = False,
) -> None:
    """List approvals waiting for a decision (or in another --status)."""
    with gateway(ctx) as gw:
        recs = gw.approvals.list(state(ctx).tenant, status=None if status == "all" else status,
                                 limit=limit)
    if json_out:
        print_json([approval_json(r) for r in recs])
        return
    table(f"approvals ({status})",
          ["id", "kind", "agent", "call", "risk", "status", "summary", "arguments", "expires"],
          [_row(r) for r in recs], empty=f"no {status} approvals")


@app.command("approve")
def approve(
    ctx: typer.Context,
    approval_id: Annotated[str, typer.Argument(help="The approval id (ap_…).")],
    edit_args_json: Annotated[str | None, typer.Option(
        "--edit-args-json", help="Approve these arguments instead (JSON object); the agent "
        "must re-submit the call with them.")] = None,
    note: NoteOption = None,
    token: TokenOption = None,
    json_out: JsonFlag = False,
) -> None:
    """Approve a pending approval (approver role; never the requesting agent)."""
    edited = parse_json(edit_args_json, "--edit-args-json")
    with gateway(ctx) as gw:
        by = person(gw, token)
        rec = gw.approvals.approve(approval_id, by, edited_arguments=edited, note=note)
    _show(rec, json_out)


@app.command("deny")
def deny(
    ctx: typer.Context,
    approval_id: Annotated[str, typer.Argument(help="The approval id (ap_…).")],
    note: NoteOption = None,
    token: TokenOption = None,
    json_out: JsonFlag = False,
) -> None:
    """Deny a pending approval; the call can then never run with it."""
    with gateway(ctx) as gw:
        by = person(gw, token)
        rec = gw.approvals.deny(approval_id, by, note=note)
    _show(rec, json_out)

"""``toolkeeper calls list|resolve``: recorded outcomes, and resolving ``unknown`` ones
(SPEC §4)."""

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
    plain,
    print_json,
    state,
    table,
)
from toolkeeper.store.records import OutcomeRecord

app = typer.Typer(help="List recorded calls and resolve unknown outcomes.", no_args_is_help=True)


def _row(rec: OutcomeRecord) -> list[object]:
    return [rec.call_id, rec.agent, f"{rec.tool}.{rec.action}", rec.side_effect,
            rec.state.value, rec.reason, rec.turn_group_id,
            rec.updated_at.isoformat("T", "seconds")]


@app.command("list")
def list_(
    ctx: typer.Context,
    status: Annotated[str | None, typer.Option(
        "--status", help="in_progress, succeeded, failed or unknown.")] = None,
    limit: Annotated[int, typer.Option("--limit", min=1, max=1000)] = 100,
    json_out: JsonFlag = False,
) -> None:
    """List calls with a recorded outcome (non-pure calls, or calls with a key)."""
    with gateway(ctx) as gw:
        recs = gw.calls.list(state(ctx).tenant, status=status, limit=limit)
    if json_out:
        print_json([plain(r) for r in recs])
        return
    table("calls" + (f" ({status})" if status else ""),
          ["call_id", "agent", "call", "side_effect", "state", "reason", "turn_group",
           "updated"], [_row(r) for r in recs], empty="no recorded calls")


@app.command("resolve")
def resolve(
    ctx: typer.Context,
    call_id: Annotated[str, typer.Argument(help="The call id of an unknown outcome.")],
    status: Annotated[str, typer.Option(
        "--status", help="What really happened: succeeded or failed.")],
    output_json: Annotated[str | None, typer.Option(
        "--output-json", help="The tool's real output, as JSON.")] = None,
    note: Annotated[str | None, typer.Option("--note", help="How you found out.")] = None,
    token: TokenOption = None,
    json_out: JsonFlag = False,
) -> None:
    """Record the real outcome of an unknown call (operator, approver or admin)."""
    if status not in ("succeeded", "failed"):
        raise typer.BadParameter("must be succeeded or failed", param_hint="--status")
    output = parse_json(output_json, "--output-json")
    with gateway(ctx) as gw:
        by = person(gw, token)
        rec = gw.calls.resolve(call_id, by, status=status, output=output, note=note)
    if json_out:
        print_json(rec)
        return
    fields_table(f"call {rec.call_id}", [
        ("state", rec.state.value), ("call", f"{rec.tool}.{rec.action}"),
        ("agent", rec.agent), ("resolved_by", rec.resolved_by), ("result", rec.result)])

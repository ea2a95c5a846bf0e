"""``toolkeeper audit tail|verify``: read and check the hash-chained audit log (SPEC §8, §9)."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Annotated, Any

import typer

from toolkeeper.cli._common import (
    EXIT_REFUSED,
    JsonFlag,
    err,
    gateway,
    out,
    plain,
    print_json,
    refusals,
    state,
    table,
)
from toolkeeper.gateway import Gateway
from toolkeeper.opening import AUTO, CHECKPOINTS_ENV, audit_options
from toolkeeper.secrets.embedded import demo_key_file
from toolkeeper.store import Store
from toolkeeper.store.records import AuditEvent, VerifyReport

app = typer.Typer(help="Tail and verify the audit log.", no_args_is_help=True)

POLL_S = 1.0
"""Follow-mode poll interval: bounded, so Ctrl-C and --timeout are honoured promptly."""
_PAGE = 1000
_COLUMNS = ["seq", "ts", "type", "agent", "call", "risk", "gate", "reason", "call_id"]


def _tenant(value: str) -> str | None:
    """``global`` (or ``*``) names the chain of global system events."""
    return None if value in ("global", "*") else value


def _row(ev: AuditEvent) -> list[object]:
    call = f"{ev.tool}.{ev.action}" if ev.action else ev.tool
    return [ev.seq, ev.ts.strftime("%m-%d %H:%M:%S"), ev.type, ev.agent_id, call, ev.risk,
            ev.gate, ev.reason, ev.call_id]


def _print(events: list[AuditEvent], json_out: bool, *, lines: bool = False) -> None:
    if json_out and lines:  # follow mode: one JSON object per line
        for ev in events:
            print_json_line(ev)
    elif json_out:
        print_json([ev.to_dict() for ev in events])
    elif events:
        table(None, _COLUMNS, [_row(ev) for ev in events])


def print_json_line(ev: AuditEvent) -> None:
    """One event as a single JSON line (``--follow --json``)."""
    typer.echo(json.dumps(plain(ev.to_dict()), sort_keys=True, default=str))


@app.command("tail")
def tail(
    ctx: typer.Context,
    n: Annotated[int, typer.Option("-n", "--lines", min=1, max=10_000,
                                   help="How many of the newest events.")] = 20,
    call_id: Annotated[str | None, typer.Option("--call", help="Only this call.")] = None,
    agent: Annotated[str | None, typer.Option("--agent", help="Only this agent.")] = None,
    tool: Annotated[str | None, typer.Option("--tool", help="Only this tool.")] = None,
    types: Annotated[list[str] | None, typer.Option(
        "--type", help="Only this event type (repeatable), e.g. approval.created.")] = None,
    follow: Annotated[bool, typer.Option("--follow", "-f",
                                         help="Keep printing new events (Ctrl-C stops).")] = False,
    timeout: Annotated[float | None, typer.Option(
        "--timeout", min=0, help="With --follow: stop after this many seconds.")] = None,
    json_out: JsonFlag = False,
) -> None:
    """Show the newest audit events of the tenant (``--tenant global`` for system events)."""
    tenant = _tenant(state(ctx).tenant)
    filters: dict[str, Any] = {"call_id": call_id, "agent": agent, "tool": tool,
                               "types": types or None}
    with gateway(ctx) as gw:
        events = gw.store.audit.list(tenant, limit=n, newest_first=True, **filters)
        events.reverse()
        _print(events, json_out, lines=follow)
        if follow:
            last = events[-1].seq if events else _head(gw, tenant)
            _follow(gw, tenant, last, filters, json_out, timeout)


def _head(gw: Gateway, tenant: str | None) -> int:
    newest = gw.store.audit.list(tenant, limit=1, newest_first=True)
    return newest[0].seq if newest else 0


def _follow(gw: Gateway, tenant: str | None, last: int, filters: dict[str, Any],
            json_out: bool, timeout: float | None) -> None:
    deadline = None if timeout is None else time.monotonic() + timeout
    try:
        while deadline is None or time.monotonic() < deadline:
            left = POLL_S if deadline is None else deadline - time.monotonic()
            time.sleep(max(0.0, min(POLL_S, left)))
            newest = _head(gw, tenant)
            if newest <= last:
                continue
            fresh = gw.store.audit.list(tenant, after_seq=last, limit=_PAGE, **filters)
            _print(fresh, json_out, lines=True)
            # a full page may have more behind it; otherwise skip past filtered-out events
            last = fresh[-1].seq if len(fresh) == _PAGE else newest
    except KeyboardInterrupt:
        err().print("[dim]stopped[/]")


@app.command("verify")
def verify(
    ctx: typer.Context,
    audit_key_file: Annotated[Path | None, typer.Option(
        "--audit-key-file", help="Audit key file [env TOOLKEEPER_AUDIT_KEY_FILE; "
        "TOOLKEEPER_AUDIT_KEY wins].")] = None,
    secrets_key_file: Annotated[Path | None, typer.Option(
        "--secrets-key-file", help="Secrets master key file the audit key is derived from "
        "[env TOOLKEEPER_SECRETS_KEY_FILE; TOOLKEEPER_SECRETS_KEY wins].")] = None,
    checkpoints: Annotated[str | None, typer.Option(
        "--checkpoints", help="Audit checkpoint file [env TOOLKEEPER_AUDIT_CHECKPOINTS; "
        "default <sqlite file>.audit-checkpoints when it exists].")] = None,
    json_out: JsonFlag = False,
) -> None:
    """Recompute every tenant's hash chain; exit 1 if any event was edited or deleted,
    a head moved, or a checkpoint is no longer in the chain. Only reads the store."""
    url = state(ctx).db
    with refusals():
        key, cps = audit_options(url, key_file=audit_key_file,
                                 secrets_key_file=secrets_key_file or demo_key_file(),
                                 checkpoint_path=checkpoints or AUTO)
        if checkpoints is None and cps is not None and not cps.path.exists() \
                and not os.environ.get(CHECKPOINTS_ENV):
            cps = None  # the default file: only when a server has written one
        store = Store.open(url, audit_key=key, checkpoints=cps)
    try:
        reports = store.audit.verify_all()
    finally:
        store.close()
    broken = [r for r in reports if not r.ok]
    if json_out:
        print_json({"ok": not broken, "chains": [plain(r) for r in reports]})
    else:
        _verify_table(reports)
    for rep in reports:
        for warning in rep.warnings:
            err().print(f"[yellow]tenant {rep.tenant_id or 'global'}[/]: warning: {warning}",
                        highlight=False)
    if broken:
        for rep in broken:
            for problem in rep.problems:
                err().print(f"[red]tenant {rep.tenant_id or 'global'}[/]: {problem}",
                            highlight=False)
        raise typer.Exit(EXIT_REFUSED)


def _verify_table(reports: list[VerifyReport]) -> None:
    table("audit chains", ["tenant", "events", "ok", "problems", "warnings", "first seq"],
          [[r.tenant_id or "global", r.events, "yes" if r.ok else "NO", len(r.problems),
            len(r.warnings), r.first_seq]
           for r in reports], empty="no audit events yet")
    if reports and all(r.ok for r in reports):
        out().print("[green]audit chains verified[/]")

"""``toolkeeper call TOOL [ACTION]``: run one call through the whole pipeline, as an agent."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer

from toolkeeper.cli._common import (
    EXIT_OK,
    EXIT_REFUSED,
    EXIT_STOPPED,
    EXIT_USAGE,
    JsonFlag,
    fail,
    fields_table,
    gateway,
    parse_json,
    print_json,
    state,
)
from toolkeeper.model.call import CallResult
from toolkeeper.model.enums import CallStatus
from toolkeeper.model.reasons import Reason

_STOPPED = {CallStatus.APPROVAL_REQUIRED, CallStatus.CONFIRMATION_REQUIRED,
            CallStatus.PREVIEW_REQUIRED}


def parse_args(pairs: list[str], args_json: str | None) -> dict[str, Any]:
    """``--args-json`` first, then each ``--arg k=v`` (value parsed as JSON when it parses,
    else taken as a string: ``--arg amount=12.5 --arg note=hello``)."""
    base = parse_json(args_json, "--args-json")
    if base is None:
        base = {}
    if not isinstance(base, dict):
        fail(Reason.INVALID_ARGUMENTS, "--args-json must be a JSON object", EXIT_USAGE)
    for pair in pairs:
        key, sep, raw = pair.partition("=")
        if not sep or not key:
            fail(Reason.INVALID_ARGUMENTS, f"--arg {pair!r} must look like key=value",
                 EXIT_USAGE)
        try:
            base[key] = json.loads(raw)
        except ValueError:
            base[key] = raw
    return base


def exit_code(res: CallResult) -> int:
    """0 succeeded, 3 waiting for approval/confirmation/preview, 1 anything else."""
    if res.status is CallStatus.SUCCEEDED:
        return EXIT_OK
    return EXIT_STOPPED if res.status in _STOPPED else EXIT_REFUSED


def render(res: CallResult) -> None:
    """The result as a table a person can act on."""
    fields_table(f"{res.tool}.{res.action or '?'}", [
        ("status", res.status.value), ("reason", res.reason), ("message", res.message),
        ("risk", res.risk), ("gate", res.gate), ("deduped", res.deduped),
        ("output", res.output), ("approval_id", res.approval_id), ("preview", res.preview),
        ("preview_token", res.preview_token), ("retry_after", res.retry_after),
        ("details", res.details), ("side_effect_id", res.side_effect_id),
        ("idempotency_key", res.idempotency_key), ("call_id", res.call_id),
        ("duration_ms", round(res.duration_ms, 2))])


def call(
    ctx: typer.Context,
    tool: Annotated[str, typer.Argument(help="Tool name.")],
    agent: Annotated[str, typer.Option("--agent", help="The agent to call as.")],
    action: Annotated[str | None, typer.Argument(
        help="Action (omit for a single-action tool).")] = None,
    arg: Annotated[list[str] | None, typer.Option(
        "--arg", help="key=value (repeatable); the value is JSON when it parses.")] = None,
    args_json: Annotated[str | None, typer.Option(
        "--args-json", help="All arguments as one JSON object.")] = None,
    idempotency_key: Annotated[str | None, typer.Option(
        "--idempotency-key", help="Your key: the same key never runs twice.")] = None,
    turn_group: Annotated[str | None, typer.Option(
        "--turn-group", help="Turn group id (part of the default idempotency key).")] = None,
    approval_id: Annotated[str | None, typer.Option(
        "--approval-id", help="Re-submit with this approval/confirmation.")] = None,
    preview_token: Annotated[str | None, typer.Option(
        "--preview-token", help="Re-submit with this preview token.")] = None,
    config: Annotated[Path | None, typer.Option(
        "--config", "-c", help="toolkeeper.yaml to sync first: its settings (tenant_bounds, "
        "…), functions and secrets apply, as for `serve` [env TOOLKEEPER_CONFIG].",
        envvar="TOOLKEEPER_CONFIG")] = None,
    json_out: JsonFlag = False,
) -> None:
    """Call TOOL [ACTION] as --agent through the governed pipeline.

    Exit 0 succeeded, 3 stopped for approval/confirmation/preview, 1 otherwise.
    """
    arguments = parse_args(arg or [], args_json)
    with gateway(ctx, config=str(config) if config else None) as gw:
        res = gw.call_sync(tool, action, arguments, agent=agent, tenant_id=state(ctx).tenant,
                           idempotency_key=idempotency_key, turn_group_id=turn_group,
                           approval_id=approval_id, preview_token=preview_token)
    if json_out:
        print_json(res.to_dict())
    else:
        render(res)
    raise typer.Exit(exit_code(res))

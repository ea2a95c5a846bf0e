"""What a crash-chaos run (tests/support/chaos.py) must leave behind: every torn call
``unknown`` until an operator resolves it through the API, one line in the execution file
per ``succeeded`` outcome (no double execution, nothing lost), every completed call with
its audit events, and every tenant's audit chain verifying."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import httpx

from tests.support.chaos import AGENT, FINAL, TOOL, TOOL_TIMEOUT_S, Figures, Fleet
from tests.support.waiting import wait_until
from toolkeeper import Gateway
from toolkeeper.model.events import EventType
from toolkeeper.store.records import OutcomeRecord

TENANT = "default"
TERMINAL = {"succeeded": EventType.CALL_SUCCEEDED.value, "failed": EventType.CALL_FAILED.value}


def _post(f: Fleet, path: str, who: str, body: Any, key: str | None = None) -> httpx.Response:
    headers = {"Authorization": f"Bearer {f.tokens[who]}"}
    if key is not None:
        headers["Idempotency-Key"] = key
    return httpx.post(f.replicas[0].url + path, json=body, headers=headers, timeout=30)


def _no_torn_in_progress(gw: Gateway) -> bool:
    gw.calls.recover()
    return not gw.store.outcomes.list(TENANT, state="in_progress", limit=1)


def _resolve_unknown(f: Fleet, i: int, rec: OutcomeRecord, lines: Counter[str],
                     sink: Path, figures: Figures) -> str:
    """Checks ``rec`` stays ``unknown`` (a retry executes nothing), resolves it through
    ``POST /calls/{id}/resolve`` from the execution file, and returns the new status."""
    figures.unknowns += 1
    mark, before = f"chaos-{i}", sink.read_text().count("\n")
    body = {"tool": TOOL, "arguments": {"mark": mark, "path": str(sink)}}
    again = _post(f, "/tools/execute", "agent", body, key=mark).json()
    if again.get("status") != "unknown" or sink.read_text().count("\n") != before:
        figures.problems.append(f"{mark}: retry of an unknown call answered {again}")
    status = "succeeded" if lines[mark] else "failed"
    resolved = _post(f, f"/calls/{rec.call_id}/resolve", "operator",
                     {"status": status, "note": "chaos: from the execution file"})
    if resolved.status_code != 200:
        figures.problems.append(f"{mark}: resolve answered {resolved.status_code}")
    after = _post(f, "/tools/execute", "agent", body, key=mark).json()
    if after.get("status") != status or not after.get("deduped"):
        figures.problems.append(f"{mark}: after resolving {status}, a retry answered {after}")
    setattr(figures, f"resolved_{status}", getattr(figures, f"resolved_{status}") + 1)
    return status


def _audit_complete(gw: Gateway, rec: OutcomeRecord, unknown: bool) -> bool:
    types = {e.type for e in gw.store.audit.list(TENANT, call_id=rec.call_id, limit=100)}
    if unknown:
        return {EventType.CALL_UNKNOWN.value,
                EventType.CALL_RESOLVED_MANUALLY.value} <= types
    return {EventType.CALL_ATTEMPTED.value, TERMINAL.get(rec.status, "?")} <= types


def verify_run(f: Fleet, answers: list[tuple[str, int]], sink: Path, figures: Figures) -> None:
    """Every check of a finished run; findings go to ``figures`` (``problems``,
    ``double_executions``, ``lost``)."""
    lines = Counter(sink.read_text().splitlines())
    figures.lines = sum(lines.values())
    figures.double_executions = sum(n - 1 for n in lines.values() if n > 1)
    with Gateway.open(f.db) as gw:
        wait_until(lambda: _no_torn_in_progress(gw), timeout=TOOL_TIMEOUT_S + 60,
                   what="torn in_progress calls become unknown", interval=0.5)
        for i, (said, _) in enumerate(answers):
            _check_call(f, gw, i, said, lines, sink, figures)
        reports = gw.store.audit.verify_all()
    figures.problems += [f"audit chain of {r.tenant_id!r} does not verify"
                         for r in reports if not r.ok]
    over_rest = httpx.get(f.replicas[0].url + "/audit/verify", timeout=60, headers={
        "Authorization": f"Bearer {f.tokens['admin']}"}).json()
    if not over_rest.get("ok"):
        figures.problems.append(f"GET /audit/verify: {over_rest}")


def _check_call(f: Fleet, gw: Gateway, i: int, said: str, lines: Counter[str], sink: Path,
                figures: Figures) -> None:
    mark = f"chaos-{i}"
    rec = gw.store.outcomes.by_key(TENANT, AGENT, f"k:{mark}")
    if rec is None:
        if lines[mark] or said in FINAL:
            figures.lost += 1
            figures.problems.append(f"{mark}: client saw {said}, executed {lines[mark]}x, "
                                    "but no outcome is recorded")
        return
    unknown = rec.state.value == "unknown"
    status = _resolve_unknown(f, i, rec, lines, sink, figures) if unknown else rec.status
    if status == "succeeded":
        figures.succeeded_outcomes += 1
    if (status == "succeeded") != bool(lines[mark]) or (said == "succeeded" and not unknown
                                                          and status != "succeeded"):
        figures.lost += 1
        figures.problems.append(f"{mark}: outcome {status}, client saw {said}, "
                                f"executed {lines[mark]}x")
    if not _audit_complete(gw, rec, unknown):
        figures.problems.append(f"{mark}: call {rec.call_id} ({status}) lacks audit events")

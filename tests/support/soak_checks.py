"""What a soak (``tests.support.soak_load``) must leave behind: the audit chain verifies;
every irreversible execution is one line of its file and one ``succeeded`` outcome and
event (none twice); every approved gated call ran exactly once and consumed its approval;
keys reused past their TTL ran once per expiry; outcomes and audit events agree."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import httpx
from sqlalchemy import text

from tests.support.chaos import Fleet
from tests.support.soak import Done
from tests.support.soak_load import Run
from toolkeeper.model.events import EventType
from toolkeeper.store.db import Database

SUCCEEDED, DEDUPED = EventType.CALL_SUCCEEDED.value, EventType.CALL_DEDUPED.value
CONSUMED = EventType.APPROVAL_CONSUMED.value
BAD_EVENTS = (EventType.CALL_FAILED.value, EventType.CALL_UNKNOWN.value)


@dataclass
class Checked:
    lines: int = 0
    gated_lines: int = 0
    double_executions: int = 0
    events: dict[str, int] = field(default_factory=dict)
    outcomes: dict[str, int] = field(default_factory=dict)
    approvals: dict[str, int] = field(default_factory=dict)
    audit_verified: bool = False
    problems: list[str] = field(default_factory=list)

    def table(self) -> str:
        rows = {k: v for k, v in vars(self).items() if k != "problems"}
        return "\n".join(f"  {k:<20} {v}" for k, v in rows.items())

    def expect(self, what: str, got: object, want: object) -> None:
        if got != want:
            self.problems.append(f"{what}: {got} != {want}")


def _executed(run: Run, kind: str) -> list[Done]:
    return [d for d in run.done if d.kind == kind and d.executed]


def _files(run: Run, work: Path, out: Checked) -> None:
    """One line per execution the client saw, and no other line."""
    lines = Counter((work / "executions.txt").read_text().splitlines())
    released = Counter((work / "released.txt").read_text().splitlines())
    out.lines, out.gated_lines = sum(lines.values()), sum(released.values())
    irr = {d.mark for d in _executed(run, "irreversible")}
    out.double_executions = sum(n - 1 for m, n in lines.items() if m in irr) + sum(
        n - 1 for n in released.values())
    out.expect("irreversible marks in the file", {m for m in lines if m.startswith("irr-")}, irr)
    ttl = Counter(d.mark for d in _executed(run, "ttl"))
    out.expect("ttl executions per key (file, client)",
               {m: n for m, n in lines.items() if m.startswith("ttl-")}, dict(ttl))
    gated = {d.mark for d in _executed(run, "gated")}
    out.expect("gated marks in the file", set(released), gated)


def _store(run: Run, db: Database, out: Checked) -> None:
    """Audit events and outcome rows against what the client saw and the files hold."""
    with db.read() as conn:
        events = {f"{t}/{k}": n for t, k, n in conn.execute(text(
            "SELECT tool, type, count(*) FROM audit_events WHERE tool IS NOT NULL "
            "GROUP BY tool, type"))}
        out.outcomes = {f"{t}/{s}": n for t, s, n in conn.execute(text(
            "SELECT tool, state, count(*) FROM outcomes GROUP BY tool, state"))}
        out.approvals = dict(conn.execute(text(
            "SELECT status, count(*) FROM approvals GROUP BY status")).all())
        orphans = conn.execute(text(
            "SELECT count(*) FROM outcomes o WHERE NOT EXISTS (SELECT 1 FROM audit_events e "
            f"WHERE e.call_id = o.call_id AND e.type = '{SUCCEEDED}')")).scalar_one()
    out.events = {k: v for k, v in events.items() if k.split("/")[1] in (
        SUCCEEDED, DEDUPED, CONSUMED, *BAD_EVENTS)}
    out.expect("append succeeded events == lines", events.get(f"append/{SUCCEEDED}", 0),
               out.lines)
    out.expect("release succeeded events == lines", events.get(f"release/{SUCCEEDED}", 0),
               out.gated_lines)
    out.expect("approvals consumed (events) == gated lines",
               events.get(f"release/{CONSUMED}", 0), out.gated_lines)
    out.expect("add succeeded events == pure and MCP successes",
               events.get(f"add/{SUCCEEDED}", 0),
               len(_executed(run, "pure")) + len(_executed(run, "mcp")))
    out.expect("append deduped events == deduped ttl answers",
               events.get(f"append/{DEDUPED}", 0),
               sum(d.deduped for d in run.done))
    out.expect("failed or unknown events", sum(v for k, v in events.items()
                                                 if k.split("/")[1] in BAD_EVENTS), 0)
    out.expect("outcome rows", out.outcomes, {
        k: v for k, v in {
            "append/succeeded": len(_executed(run, "irreversible"))
            + len({d.mark for d in _executed(run, "ttl")}),
            "release/succeeded": len(_executed(run, "gated"))}.items() if v})
    out.expect("outcomes without their succeeded event", orphans, 0)
    out.expect("approvals", out.approvals,
               {"consumed": out.gated_lines} if out.gated_lines else {})


def verify_soak(f: Fleet, run: Run, work: Path) -> Checked:
    out = Checked()
    _files(run, work, out)
    verify = httpx.get(f.replicas[0].url + "/audit/verify", timeout=120,
                       headers={"Authorization": f"Bearer {f.tokens['admin']}"})
    out.audit_verified = verify.status_code == 200 and verify.json().get("ok") is True
    if not out.audit_verified:
        out.problems.append(f"GET /audit/verify: {verify.status_code} {verify.text[:500]}")
    db = Database(f.db)
    try:
        _store(run, db, out)
    finally:
        db.dispose()
    return out

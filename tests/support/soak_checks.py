"""What a soak (``tests.support.soak_load``) must leave behind: the audit chain verifies;
every irreversible execution is one line of its file (none twice); every approved gated call
ran exactly once; keys reused past their TTL ran once per expiry; in what retention keeps,
outcomes and audit events agree with what the client saw, and retention kept up (nothing
older than its retention and a sweep is left, nothing younger is gone)."""

from __future__ import annotations

import re
import time
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import httpx
from sqlalchemy import text

from tests.support.chaos import Fleet
from tests.support.soak import (
    AUDIT_RETENTION_S,
    OUTCOME_RETENTION_S,
    OUTCOME_TTL_S,
    Done,
)
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
    pruned_events: int = 0
    """The default chain's base: events audit retention deleted from its start."""
    oldest_event_age_s: float = 0.0
    oldest_outcome_expiry_age_s: float = 0.0
    """How long ago the oldest kept outcome expired (negative: none has expired yet)."""
    sweeps: int = 0
    """Retention sweeps the server ran (``toolkeeper_retention_sweeps_total``)."""
    sweep_max_s: float = 0.0
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


SLACK_S = 30.0
"""How late a retention sweep may be (a sweep every few seconds, on a loaded machine)."""
WINDOW_MARGIN_S = 2.0
"""Client and server clocks are the same, but a call's events commit before its answer."""


def _executions(run: Run, *kinds: str) -> dict[str, Done]:
    return {d.call_id: d for d in run.done if d.kind in kinds and d.executed and d.call_id}


def _store(run: Run, db: Database, out: Checked) -> None:
    """Audit events and outcome rows against what the client saw, in what retention keeps:
    every execution finished after the first kept event has its ``call.succeeded`` event,
    and no event names an execution the client did not see; what retention deleted is old
    enough, and what is old enough went."""
    now = time.time()
    with db.read() as conn:
        events = {(t, k, c) for t, k, c in conn.execute(text(
            "SELECT tool, type, call_id FROM audit_events WHERE tenant_key = 'default' "
            "AND tool IS NOT NULL"))}
        first_ts = conn.execute(text(
            "SELECT min(ts) FROM audit_events WHERE tenant_key = 'default'")).scalar_one()
        out.pruned_events = int(conn.execute(text(
            "SELECT base_seq FROM audit_heads WHERE tenant_key = 'default'")).scalar_one())
        rows = conn.execute(text("SELECT call_id, tool, state, expires_at FROM outcomes")).all()
        out.approvals = dict(conn.execute(text(
            "SELECT status, count(*) FROM approvals GROUP BY status")).all())
        oldest_approval = conn.execute(text("SELECT min(expires_at) FROM approvals")).scalar_one()
        orphans = conn.execute(text(
            "SELECT count(*) FROM outcomes o WHERE NOT EXISTS (SELECT 1 FROM audit_events e "
            f"WHERE e.call_id = o.call_id AND e.type = '{SUCCEEDED}')")).scalar_one()
    kept_from = _epoch(first_ts) if first_ts is not None else now
    out.oldest_event_age_s = round(now - kept_from, 1)
    succeeded = {(t, c) for t, k, c in events if k == SUCCEEDED}
    counts = Counter(f"{t}/{k}" for t, k, _ in events)
    out.events = {k: v for k, v in counts.items() if k.split("/")[1] in (
        SUCCEEDED, DEDUPED, CONSUMED, *BAD_EVENTS)}
    tools = {"pure": "add", "irreversible": "append", "ttl": "append", "gated": "release"}
    seen = {kind: _executions(run, kind) for kind in tools}
    missing = [f"{kind} {cid}" for kind, ids in seen.items() for cid, d in ids.items()
               if d.ended > kept_from + WINDOW_MARGIN_S and (tools[kind], cid) not in succeeded]
    out.expect("executions after the first kept event without their succeeded event",
               missing[:5], [])
    recorded = {cid for kind in ("irreversible", "ttl", "gated") for cid in seen[kind]}
    out.expect("succeeded append/release events of no execution the client saw",
               sorted(c for t, c in succeeded if t in ("append", "release")
                      and c not in recorded)[:5], [])
    consumed = sum(v for k, v in counts.items() if k == f"release/{CONSUMED}")
    out.expect("consumed approvals (events) <= gated executions",
               consumed <= len(seen["gated"]), True)
    out.expect("failed or unknown events", sum(v for k, v in counts.items()
                                                 if k.split("/")[1] in BAD_EVENTS), 0)
    out.expect("outcomes without their succeeded event", orphans, 0)
    out.outcomes = dict(Counter(f"{t}/{s}" for _, t, s, _ in rows))
    out.expect("outcome states", set(out.outcomes) <= {"append/succeeded",
                                                        "release/succeeded"}, True)
    out.expect("outcomes of no execution the client saw",
               sorted(c for c, *_ in rows if c not in recorded)[:5], [])
    kept = {c for c, *_ in rows}
    young = now - OUTCOME_TTL_S - OUTCOME_RETENTION_S + WINDOW_MARGIN_S
    out.expect("outcomes deleted before their TTL and retention ended", sorted(
        cid for kind in ("irreversible", "gated") for cid, d in seen[kind].items()
        if d.ended > young and cid not in kept)[:5], [])
    oldest = min((_epoch(e) for *_, e in rows), default=now)
    out.oldest_outcome_expiry_age_s = round(now - oldest, 1)
    out.expect("an expired outcome outlived its retention and a sweep",
               out.oldest_outcome_expiry_age_s <= OUTCOME_RETENTION_S + SLACK_S, True)
    out.expect("audit events outlived their retention and a sweep",
               out.oldest_event_age_s <= AUDIT_RETENTION_S + SLACK_S, True)
    if oldest_approval is not None:
        out.expect("an expired approval outlived its retention and a sweep",
                   now - _epoch(oldest_approval) <= OUTCOME_RETENTION_S + SLACK_S, True)
    out.expect("approvals", set(out.approvals) <= {"consumed"}, True)


def _epoch(ts: datetime | str) -> float:
    """A stored timestamp (naive UTC on SQLite, aware on PostgreSQL) as ``time.time``."""
    if isinstance(ts, str):
        ts = datetime.fromisoformat(ts)
    return (ts if ts.tzinfo else ts.replace(tzinfo=UTC)).timestamp()


def _sweeps(f: Fleet, out: Checked) -> None:
    """The server's retention sweeps (its metrics): how many ran, and the longest."""
    resp = httpx.get(f.replicas[0].url + "/metrics", timeout=30,
                     headers={"Authorization": f"Bearer {f.tokens['admin']}"})
    found = dict(re.findall(r"^(toolkeeper_retention_sweep\w+) ([0-9.e+]+)$", resp.text,
                            flags=re.MULTILINE))
    out.sweeps = int(float(found.get("toolkeeper_retention_sweeps_total", "0")))
    out.sweep_max_s = round(float(found.get("toolkeeper_retention_sweep_max_seconds", "0")), 3)


def verify_soak(f: Fleet, run: Run, work: Path) -> Checked:
    out = Checked()
    _files(run, work, out)
    verify = httpx.get(f.replicas[0].url + "/audit/verify", timeout=120,
                       headers={"Authorization": f"Bearer {f.tokens['admin']}"})
    out.audit_verified = verify.status_code == 200 and verify.json().get("ok") is True
    if not out.audit_verified:
        out.problems.append(f"GET /audit/verify: {verify.status_code} {verify.text[:500]}")
    _sweeps(f, out)
    db = Database(f.db)
    try:
        _store(run, db, out)
    finally:
        db.dispose()
    return out

"""Audit tamper attack suite: every variant of edit, delete, reorder and truncate an attacker
with database write access (but not the audit key or the checkpoint file) can make is detected
by verify — 100% of variants, on SQLite and PostgreSQL. The chain is written once; each
variant starts from a restored copy of the untouched rows (a control row proves the restore)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from sqlalchemy import create_engine, delete, insert, update

from tests.attacks.table import ProbeTable
from tests.support import audit_attacks as attack
from toolkeeper.store import Store
from toolkeeper.store.audit_checkpoints import Checkpoints
from toolkeeper.store.audit_key import AuditKey
from toolkeeper.store.schema import audit_events, audit_heads

Tamper = Callable[[Any, list[dict[str, Any]], dict[str, Any]], None]
EV, HD = audit_events.c, audit_heads.c


def _restore(url: str, rows: list[dict[str, Any]], heads: list[dict[str, Any]]) -> None:
    engine = create_engine(url)
    with engine.begin() as conn:
        conn.execute(delete(audit_events))
        conn.execute(delete(audit_heads))
        conn.execute(insert(audit_events), rows)
        conn.execute(insert(audit_heads), heads)
    engine.dispose()


def _verify(url: str, cps: Path) -> tuple[bool, str]:
    key = AuditKey(attack.KEY)
    store = Store.open(url, audit_key=key, checkpoints=Checkpoints(cps, key))
    try:
        reports = {r.tenant_id: r for r in store.audit.verify_all()}
    finally:
        store.close()
    report = reports.get("default")
    if report is None:
        return False, "tenant missing from verify"
    return report.ok, (report.problems[0][:40] if report.problems else "ok")


def _at(seq: int) -> Any:
    return (EV.tenant_key == "default") & (EV.seq == seq)


def _edit(column: str, value: Any) -> Tamper:
    def run(conn: Any, rows: list[dict[str, Any]], saved: dict[str, Any]) -> None:
        conn.execute(update(audit_events).where(_at(rows[len(rows) // 2]["seq"]))
                     .values({column: value}))
    return run


def _delete(which: str) -> Tamper:
    def run(conn: Any, rows: list[dict[str, Any]], saved: dict[str, Any]) -> None:
        seq = {"first": rows[0]["seq"], "middle": rows[len(rows) // 2]["seq"],
               "last": rows[-1]["seq"]}[which]
        conn.execute(delete(audit_events).where(_at(seq)))
    return run


def _swap(conn: Any, rows: list[dict[str, Any]], saved: dict[str, Any]) -> None:
    """Reorder: two neighbours trade places (every column but the chain position)."""
    a, b = rows[1], rows[2]
    for src, dst in ((a, b["seq"]), (b, a["seq"])):
        values = {k: v for k, v in src.items() if k not in ("tenant_key", "seq")}
        conn.execute(update(audit_events).where(_at(dst)).values(values))


def _swap_rechained(conn: Any, rows: list[dict[str, Any]], saved: dict[str, Any]) -> None:
    _swap(conn, rows, saved)
    attack._rechain(conn, "default", 1, keep_mac=True)


def _truncate(move_head: str) -> Tamper:
    def run(conn: Any, rows: list[dict[str, Any]], saved: dict[str, Any]) -> None:
        conn.execute(delete(audit_events).where(
            (EV.tenant_key == "default") & (EV.seq > saved["seq"])))
        if move_head == "replayed":  # a genuine earlier head row, MAC and all
            conn.execute(update(audit_heads).where(HD.tenant_key == "default").values(
                seq=saved["seq"], hash=saved["hash"], mac=saved["mac"]))
        elif move_head == "forged":
            conn.execute(update(audit_heads).where(HD.tenant_key == "default").values(
                seq=saved["seq"], hash=saved["hash"], mac=None))
    return run


def _fake_retention(mac: str) -> Tamper:
    """Delete the chain's start and move the base after it, as retention would."""
    def run(conn: Any, rows: list[dict[str, Any]], saved: dict[str, Any]) -> None:
        cut = rows[2]
        conn.execute(delete(audit_events).where(
            (EV.tenant_key == "default") & (EV.seq <= cut["seq"])))
        values: dict[str, Any] = {"base_seq": cut["seq"], "base_hash": cut["hash"]}
        if mac == "cleared":
            values["mac"] = None
        conn.execute(update(audit_heads).where(HD.tenant_key == "default").values(values))
    return run


def _base_forged(conn: Any, rows: list[dict[str, Any]], saved: dict[str, Any]) -> None:
    """After genuine retention: the base (and first kept link) rewritten to hide more."""
    first = rows[0]
    conn.execute(delete(audit_events).where(_at(first["seq"])))
    conn.execute(update(audit_heads).where(HD.tenant_key == "default").values(
        base_seq=first["seq"], base_hash=first["hash"]))


def _wipe(conn: Any, rows: list[dict[str, Any]], saved: dict[str, Any]) -> None:
    conn.execute(delete(audit_events).where(EV.tenant_key == "default"))
    conn.execute(delete(audit_heads).where(HD.tenant_key == "default"))


def _rechained_edit(conn: Any, rows: list[dict[str, Any]], saved: dict[str, Any]) -> None:
    conn.execute(update(audit_events).where(_at(len(rows) // 2)).values(reason="forged"))
    attack._rechain(conn, "default", len(rows) // 2, keep_mac=True)


VARIANTS: dict[str, Tamper] = {
    "edit reason": _edit("reason", "forged"), "edit type": _edit("type", "call.denied"),
    "edit tool": _edit("tool", "other"), "edit agent": _edit("agent_id", "mallory"),
    "edit data": _edit("data", {"forged": True}), "edit call_id": _edit("call_id", "c-x"),
    "edit hash": _edit("hash", "0" * 64), "edit prev_hash": _edit("prev_hash", "0" * 64),
    "edit + rechain (sha256)": _rechained_edit,
    "delete first": _delete("first"), "delete middle": _delete("middle"),
    "delete last (head kept)": _delete("last"),
    "reorder two events": _swap, "reorder + rechain": _swap_rechained,
    "truncate tail (head kept)": _truncate("kept"),
    "truncate tail (head forged)": _truncate("forged"),
    "truncate tail (saved head replayed)": _truncate("replayed"),
    "delete the whole chain": _wipe,
    "delete the start, base moved (head MAC kept)": _fake_retention("kept"),
    "delete the start, base moved (head MAC cleared)": _fake_retention("cleared"),
}
PRUNED: dict[str, Tamper] = {
    "after retention: delete the first kept event, base moved": _base_forged,
    "after retention: edit a kept event": _edit("reason", "forged"),
    "after retention: delete a kept event": _delete("middle"),
}
"""Variants tried on a chain audit retention really pruned (its rows as it left them)."""


def test_every_tamper_variant_is_detected(db_url: str, tmp_path: Path) -> None:
    cps = tmp_path / "audit.checkpoints"
    with attack.open_gateway(db_url, audit_key=attack.KEY, audit_checkpoint_path=cps) as gw:
        attack.calls(gw, 2)
        saved = attack.head(db_url)
        attack.calls(gw, 2, tag="later-")
    rows, heads = attack.events(db_url), [attack.head(db_url)]
    assert len(rows) > saved["seq"] > 2
    table = ProbeTable(f"audit tamper ({db_url.split(':')[0]})")
    ok, observed = _verify(db_url, cps)
    table.add("control: untouched chain", "verifies", observed, ok)
    for name, tamper in VARIANTS.items():
        engine = create_engine(db_url)
        with engine.begin() as conn:
            tamper(conn, rows, saved)
        engine.dispose()
        ok, observed = _verify(db_url, cps)
        table.add(name, "detected", observed, not ok)
        _restore(db_url, rows, heads)
        ok, observed = _verify(db_url, cps)
        table.add(f"  restored after {name}", "verifies", observed, ok)
    _pruned_variants(db_url, cps, table)
    detected = sum(1 for r in table.rows if r[1] == "detected" and r[3])
    print(f"\ndetected {detected}/{len(VARIANTS) + len(PRUNED)} tamper variants")
    table.check()




def _pruned_variants(db_url: str, cps: Path, table: ProbeTable) -> None:
    """Retention deletes the chain's start for real; the chain still verifies, and
    tampering with what it kept is still detected."""
    key = AuditKey(attack.KEY)
    store = Store.open(db_url, audit_key=key, checkpoints=Checkpoints(cps, key))
    try:
        events = attack.events(db_url)
        cut = events[len(events) // 3]["ts"]
        pruned = [r for r in store.audit.prune(_aware(cut)) if r.tenant_id == "default"]
    finally:
        store.close()
    rows, heads = attack.events(db_url), [attack.head(db_url)]
    ok, observed = _verify(db_url, cps)
    table.add("control: chain pruned by retention", "verifies", observed,
              ok and bool(pruned) and pruned[0].deleted > 0)
    for name, tamper in PRUNED.items():
        engine = create_engine(db_url)
        with engine.begin() as conn:
            tamper(conn, rows, heads[0])
        engine.dispose()
        ok, observed = _verify(db_url, cps)
        table.add(name, "detected", observed, not ok)
        _restore(db_url, rows, heads)


def _aware(ts: datetime) -> datetime:
    """A stored timestamp (naive UTC on SQLite) as an aware one."""
    return ts if ts.tzinfo else ts.replace(tzinfo=UTC)

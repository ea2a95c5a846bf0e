"""What a database writer without the audit key can do to the audit chain (shared by the
store, REST and CLI tests): plain SQL, and the public chain algorithm recomputed with plain
SHA-256 (toolkeeper is open source, so an attacker knows it; only the key is secret)."""

from __future__ import annotations

from typing import Any

from sqlalchemy import Engine, create_engine, delete, func, select, update

from toolkeeper import Activation, Agent, Gateway, Profile, Risk, SideEffect, tool
from toolkeeper.store import Store
from toolkeeper.store.audit_chain import GENESIS, chain_hash, event_body
from toolkeeper.store.schema import audit_events, audit_heads

KEY = bytes(range(32))
"""The audit key the tests configure (the attacker never sees it)."""
OTHER_KEY = bytes(range(1, 33))


@tool(side_effect=SideEffect.IRREVERSIBLE, risk=Risk.LOW)
def pay(invoice: str) -> dict[str, Any]:
    """Pay an invoice (recorded: its audit events commit with the outcome)."""
    return {"paid": invoice}


@tool(side_effect=SideEffect.PURE, inline=True, risk=Risk.LOW)
def echo(text: str) -> str:
    """Echo (not recorded: its events go through the background writer)."""
    return text


def open_gateway(url: str, *, legacy: bool = False, **kw: Any) -> Gateway:
    """A gateway (``Gateway.open`` options ``kw``) with ``pay`` and ``echo`` for ``bot``.
    ``legacy``: over a store opened without any audit key, as every gateway without a
    configured key wrote before keys were made on first start (plain SHA-256 chains)."""
    if legacy:
        assert all(v is None for v in kw.values()), "a legacy gateway takes no options"
        gw = Gateway(Store.open(url))
    else:
        gw = Gateway.open(url, **kw)
    for t in (pay, echo):
        gw.registry.register(t)
    gw.registry.put_profile(Profile(name="p", autonomy=3, activations=(
        Activation(tool="pay"), Activation(tool="echo"))))
    gw.registry.put_agent(Agent(name="bot", profile="p"))
    return gw


def calls(gw: Gateway, n: int, tag: str = "") -> None:
    """``n`` recorded and ``n`` unrecorded calls, their events written."""
    for i in range(n):
        assert gw.call_sync("pay", arguments={"invoice": f"{tag}{i}"}, agent="bot").ok
        assert gw.call_sync("echo", arguments={"text": f"{tag}{i}"}, agent="bot").ok
    gw.flush()


def _engine(url: str) -> Engine:
    return create_engine(url)


def events(url: str, tenant: str = "default") -> list[dict[str, Any]]:
    engine = _engine(url)
    try:
        with engine.connect() as conn:
            return [dict(r._mapping) for r in conn.execute(
                select(audit_events).where(audit_events.c.tenant_key == tenant)
                .order_by(audit_events.c.seq))]
    finally:
        engine.dispose()


def head(url: str, tenant: str = "default") -> dict[str, Any]:
    engine = _engine(url)
    try:
        with engine.connect() as conn:
            row = conn.execute(select(audit_heads).where(
                audit_heads.c.tenant_key == tenant)).one()
            return dict(row._mapping)
    finally:
        engine.dispose()


def _set_head(conn: Any, tenant: str, seq: int, hash_: str, mac: str | None) -> None:
    conn.execute(update(audit_heads).where(audit_heads.c.tenant_key == tenant)
                 .values(seq=seq, hash=hash_, mac=mac))


def _rechain(conn: Any, tenant: str, from_seq: int, keep_mac: bool) -> None:
    """Recompute every hash from ``from_seq`` with plain SHA-256 and move the head onto
    the result (keeping the old head MAC, or clearing it: both are all one can do)."""
    rows = [dict(r._mapping) for r in conn.execute(
        select(audit_events).where(audit_events.c.tenant_key == tenant)
        .order_by(audit_events.c.seq))]
    prev = GENESIS
    for row in rows:
        if row["seq"] >= from_seq:
            new = chain_hash(row["seq"], prev, event_body(row))
            conn.execute(update(audit_events).where(
                audit_events.c.tenant_key == tenant, audit_events.c.seq == row["seq"])
                .values(prev_hash=prev, hash=new))
            row["hash"] = new
        prev = row["hash"]
    old = conn.execute(select(audit_heads.c.mac).where(
        audit_heads.c.tenant_key == tenant)).scalar()
    _set_head(conn, tenant, rows[-1]["seq"], prev, old if keep_mac else None)


def delete_last_event(url: str, tenant: str = "default", *, keep_mac: bool = False) -> int:
    """Delete the newest event and move the head back onto its predecessor."""
    engine = _engine(url)
    try:
        with engine.begin() as conn:
            last = conn.execute(select(func.max(audit_events.c.seq)).where(
                audit_events.c.tenant_key == tenant)).scalar()
            conn.execute(delete(audit_events).where(
                audit_events.c.tenant_key == tenant, audit_events.c.seq == last))
            prev = conn.execute(select(audit_events.c.hash).where(
                audit_events.c.tenant_key == tenant, audit_events.c.seq == last - 1)).scalar()
            old = conn.execute(select(audit_heads.c.mac).where(
                audit_heads.c.tenant_key == tenant)).scalar()
            _set_head(conn, tenant, last - 1, prev, old if keep_mac else None)
        return int(last)
    finally:
        engine.dispose()


def edit_and_rechain(url: str, seq: int, tenant: str = "default", *,
                     keep_mac: bool = False) -> None:
    """Change event ``seq`` and recompute it and every later hash, and the head."""
    engine = _engine(url)
    try:
        with engine.begin() as conn:
            conn.execute(update(audit_events).where(
                audit_events.c.tenant_key == tenant, audit_events.c.seq == seq)
                .values(reason="forged"))
            _rechain(conn, tenant, seq, keep_mac)
    finally:
        engine.dispose()


def downgrade(url: str, tenant: str = "default") -> None:
    """Rewrite the whole chain as plain SHA-256 with an unsealed head."""
    engine = _engine(url)
    try:
        with engine.begin() as conn:
            _rechain(conn, tenant, 1, keep_mac=False)
    finally:
        engine.dispose()


def replay_head(url: str, saved: dict[str, Any], tenant: str = "default") -> None:
    """Delete every event after a saved head row and put that row back (MAC and all)."""
    engine = _engine(url)
    try:
        with engine.begin() as conn:
            conn.execute(delete(audit_events).where(
                audit_events.c.tenant_key == tenant, audit_events.c.seq > saved["seq"]))
            _set_head(conn, tenant, saved["seq"], saved["hash"], saved["mac"])
    finally:
        engine.dispose()

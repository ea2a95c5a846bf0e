"""The audit chain itself: event bodies and hashes, linking events onto a tenant's head,
and appending them in a write transaction (SQLite and PostgreSQL alike).

:mod:`toolkeeper.store.audit` reads, verifies and prunes what is written here;
:mod:`toolkeeper.store.pg_batch` links onto the heads remembered here in one statement.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from datetime import datetime
from typing import Any, TypeVar

import orjson

from toolkeeper.canonical import canonical_bytes
from toolkeeper.errors import ConfigError
from toolkeeper.store.audit_key import AuditKey
from toolkeeper.store.db import as_utc
from toolkeeper.store.raw import RawTxn
from toolkeeper.store.records import AuditDraft
from toolkeeper.store.schema import GLOBAL_TENANT

GENESIS = "sha256:" + "0" * 64
EVENT_FIELDS = (
    "agent_id", "call_id", "trace_id", "task_id", "step_id", "turn_group_id", "tool",
    "action", "tool_version", "risk", "gate", "reason", "duration_ms",
)
"""An event's optional columns, in the order its hash body lists them."""


def _ts_text(ts: datetime) -> str:
    utc = as_utc(ts)
    assert utc is not None
    return utc.replace(tzinfo=None).isoformat(timespec="microseconds")


_BODY = ("event_id", "type", "tenant_key", *EVENT_FIELDS)


def event_body(row: dict[str, Any]) -> bytes:
    """Everything an event's hash covers except its chain position (``seq``, ``prev_hash``).

    A JSON array in the fixed order ``_BODY`` + ``ts`` (UTC text) + the RFC 8785 canonical
    ``data``: fixed positions need no key sorting. Computed before the write transaction
    opens, so the chain's lock is held only for the final hash.
    """
    body = [row[k] for k in _BODY]
    body.append(_ts_text(row["ts"]))
    body.append(canonical_bytes(row["data"] or {}).decode())
    return orjson.dumps(body)


def chain_hash(seq: int, prev_hash: str, body: bytes) -> str:
    """``sha256(seq | prev_hash | body)``: links the event to its predecessor."""
    return "sha256:" + hashlib.sha256(f"{seq}|{prev_hash}|".encode() + body).hexdigest()


def event_hash(row: dict[str, Any]) -> str:
    """Hash of one stored event (for verification)."""
    return chain_hash(row["seq"], row["prev_hash"], event_body(row))


Prepared = list[tuple[str, dict[str, Any], bytes]]
KEY_NEEDED = ("this store's audit chains are keyed: configure the audit key "
              "(TOOLKEEPER_AUDIT_KEY, an audit key file, the secrets master key it is "
              "derived from, or the default key file made on its first start)")


def prepare(drafts: Sequence[AuditDraft]) -> Prepared:
    """Rows and hash bodies of ``drafts``, ready to be chained (no database needed)."""
    out: Prepared = []
    for d in drafts:
        tenant_key = d.tenant_id or GLOBAL_TENANT
        row: dict[str, Any] = {"tenant_key": tenant_key, "event_id": d.event_id, "ts": d.ts,
                               "type": d.type, "data": d.data}
        for name in EVENT_FIELDS:
            row[name] = getattr(d, name)
        out.append((tenant_key, row, event_body(row)))
    return out


_V = TypeVar("_V")
Head = tuple[int, str, str | None, int, str | None]
"""A chain head as written: ``(seq, hash, mac, base_seq, base_hash)``."""
HEADS_KEPT = 10_000
"""At most this many tenants' heads remembered (beyond, forgotten all at once: each
tenant's next batch then takes the usual path once, ``store/pg_batch.py``)."""


def remember(heads: dict[str, _V], tenant_key: str, head: _V) -> None:
    if len(heads) >= HEADS_KEPT and tenant_key not in heads:
        heads.clear()
    heads[tenant_key] = head


def by_tenant(prepared: Prepared) -> list[tuple[str, list[tuple[dict[str, Any], bytes]]]]:
    """The events of each tenant's chain, in order; the tenants sorted (the order their
    heads are locked in: no lock-order deadlocks)."""
    out: dict[str, list[tuple[dict[str, Any], bytes]]] = {}
    for tenant_key, row, body in prepared:
        out.setdefault(tenant_key, []).append((row, body))
    return sorted(out.items())


def link(items: list[tuple[dict[str, Any], bytes]], seq: int, prev: str,
         key: AuditKey | None, rows: list[dict[str, Any]]) -> tuple[int, str]:
    """Chain ``items`` onto the head ``(seq, prev)``, appending their rows to ``rows``:
    the new head."""
    for row, body in items:
        seq += 1
        row["seq"], row["prev_hash"] = seq, prev
        row["hash"] = prev = (chain_hash(seq, prev, body) if key is None
                              else key.event(seq, prev, body))
        rows.append(row)
    return seq, prev


def link_onto(tenant_key: str, head: Head, items: list[tuple[dict[str, Any], bytes]],
              key: AuditKey | None, rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Chain ``items`` onto a remembered ``head``, appending their rows to ``rows``: the
    head's move, what it must still be (``seq0``, ``hash0``, ``mac0``) and what it becomes
    (``seq``, ``hash``, ``mac``, the base unchanged)."""
    seq0, hash0, mac0, base_seq, base_hash = head
    seq, prev = link(items, seq0, hash0, key, rows)
    mac = None if key is None else key.head(tenant_key, seq, prev, base_seq, base_hash)
    return {"k": tenant_key, "seq0": seq0, "hash0": hash0, "mac0": mac0,
            "base_seq": base_seq, "base_hash": base_hash, "seq": seq, "hash": prev, "mac": mac}


class Heads(dict[str, Head]):
    """Where this process last left each tenant's chain head, and the tenants whose head
    it found moved lately (``cold``: how many more transactions read it rather than
    guess, so that processes writing one chain in turn do not each miss every time)."""

    __slots__ = ("cold",)

    def __init__(self) -> None:
        super().__init__()
        self.cold: dict[str, int] = {}


COLD_AFTER_MISS = 32
"""Transactions that read a tenant's head after a remembered one was found moved."""


def _move_remembered(txn: RawTxn, tenant_key: str, items: list[tuple[dict[str, Any], bytes]],
                     key: AuditKey | None, heads: Heads, rows: list[dict[str, Any]]) -> bool:
    """SQLite: chain ``items`` onto the head this process last left for the tenant and move
    it in one statement that matches only if the head is still exactly there (else
    nothing is written: ``False``, the usual path reads the head). Saves the head's read
    in each transaction of a process that is the chain's only writer."""
    head = heads.get(tenant_key)
    if head is None or (key is None and head[2] is not None):
        return False
    cold = heads.cold
    if cold and tenant_key in cold:
        left = cold.pop(tenant_key) - 1
        if left:
            cold[tenant_key] = left
        return False
    n = len(rows)
    move = link_onto(tenant_key, head, items, key, rows)
    if txn.execute("head_move", move) != 1:
        del rows[n:]
        remember(cold, tenant_key, COLD_AFTER_MISS)
        return False
    remember(heads, tenant_key, (move["seq"], move["hash"], move["mac"], head[3], head[4]))
    return True


def append_chained(txn: RawTxn, prepared: Prepared, key: AuditKey | None = None,
                   heads: Heads | None = None) -> None:
    """Lock each tenant's chain head, link the events onto it, insert them, move the head.

    With ``key``: one HMAC per event and one for the head. Without it, a keyed chain is
    refused rather than continued unkeyed (that would read as a downgrade forever).
    ``heads`` is told where each head now is (a hint for :mod:`pg_batch` and, on SQLite,
    for :func:`_move_remembered`, which check it: kept even if this transaction then
    rolls back)."""
    rows: list[dict[str, Any]] = []
    for tenant_key, items in by_tenant(prepared):
        if heads is not None and not txn.pg and _move_remembered(
                txn, tenant_key, items, key, heads, rows):
            continue
        head = txn.fetchone("head", {"k": tenant_key})
        if head is None:
            txn.execute("head_new", {"k": tenant_key, "h": GENESIS})
            head = txn.fetchone("head", {"k": tenant_key})
        if key is None and head[2] is not None:
            raise ConfigError(KEY_NEEDED)
        seq, prev = link(items, int(head[0]), str(head[1]), key, rows)
        mac = None if key is None else key.head(tenant_key, seq, prev, int(head[3]), head[4])
        txn.execute("head_set", {"k": tenant_key, "seq": seq, "hash": prev, "mac": mac})
        if heads is not None:
            remember(heads, tenant_key, (seq, prev, mac, int(head[3]), head[4]))
    txn.executemany("event", rows)

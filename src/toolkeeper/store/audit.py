"""The audit log: append-only, hash-chained per tenant, verifiable (SPEC §8, §9).

Each event's hash covers its fields and the previous event's hash in the same tenant's
chain. The chain head (last seq and hash) lives in ``audit_heads`` and is locked while a
batch is appended, so replicas never fork a chain; ``(tenant_key, seq)`` is unique as a
second line of defence. With an audit key (``store/audit_key.py``) the hashes are HMACs and
the head carries a MAC, so a database writer without the key cannot rewrite the chain.
"""

from __future__ import annotations

import builtins
import time
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, and_, delete, select, update

from toolkeeper.store.audit_chain import (
    EVENT_FIELDS,
    GENESIS,
    Heads,
    append_chained,
    event_body,
    event_hash,
    prepare,
)
from toolkeeper.store.audit_checkpoints import Checkpoints
from toolkeeper.store.audit_export import ExportCursors
from toolkeeper.store.audit_key import AuditKey
from toolkeeper.store.audit_verify import ChainWalk
from toolkeeper.store.db import Database, as_utc, utcnow
from toolkeeper.store.raw import RawTxn, raw_of, raw_write
from toolkeeper.store.records import AuditDraft, AuditEvent, PruneReport, VerifyReport
from toolkeeper.store.schema import GLOBAL_TENANT, audit_events, audit_heads


class AuditRepo:
    def __init__(self, db: Database, key: AuditKey | None = None,
                 checkpoints: Checkpoints | None = None) -> None:
        self._db = db
        self.key = key
        """The audit key (``None``: the chain is written and checked as plain SHA-256)."""
        self.checkpoints = checkpoints
        self.keyed_now: AuditKey | None = None
        """The key, when this opening keyed the store's chains for the first time."""
        self.heads = Heads()
        """Where this process last left each tenant's chain head: a hint (checked) for the
        one-statement batches on PostgreSQL (``store/pg_batch.py``) and SQLite's appends."""

    def append(self, drafts: Sequence[AuditDraft], conn: Connection | RawTxn | None = None) -> None:
        """Chain and insert events, in order, inside ``conn``'s transaction (or a new one)."""
        if not drafts:
            return
        prepared = prepare(drafts)
        if conn is None:
            with raw_write(self._db) as txn:
                append_chained(txn, prepared, self.key, self.heads)
        else:
            append_chained(conn if isinstance(conn, RawTxn) else raw_of(conn), prepared,
                           self.key, self.heads)

    def list(
        self, tenant_id: str | None, *, call_id: str | None = None, agent: str | None = None,
        tool: str | None = None, types: Sequence[str] | None = None,
        since: datetime | None = None, until: datetime | None = None,
        after_seq: int = 0, limit: int = 100, newest_first: bool = False,
    ) -> builtins.list[AuditEvent]:
        t = audit_events.c
        conds = [t.tenant_key == (tenant_id or GLOBAL_TENANT)]
        if call_id:
            conds.append(t.call_id == call_id)
        if agent:
            conds.append(t.agent_id == agent)
        if tool:
            conds.append(t.tool == tool)
        if types:
            conds.append(t.type.in_(list(types)))
        if since:
            conds.append(t.ts >= since)
        if until:
            conds.append(t.ts < until)
        if after_seq and not newest_first:
            conds.append(t.seq > after_seq)
        if after_seq and newest_first:
            conds.append(t.seq < after_seq)
        order = t.seq.desc() if newest_first else t.seq.asc()
        q = select(audit_events).where(and_(*conds)).order_by(order).limit(limit)
        with self._db.read() as conn:
            return [_event(r._mapping) for r in conn.execute(q)]

    def verify(self, tenant_id: str | None, batch: int = 5000) -> VerifyReport:
        """Recompute the chain: finds edited, deleted, reordered or truncated events, a
        moved head, a downgrade to unkeyed hashes, and a rollback behind a checkpoint.

        One snapshot throughout (PostgreSQL: repeatable read; SQLite: one read
        transaction), so appends and retention running meanwhile are never seen half-done.
        """
        tenant_key = tenant_id or GLOBAL_TENANT
        walk = ChainWalk(tenant_key=tenant_key, key=self.key, genesis=GENESIS,
                         report=VerifyReport(tenant_id=tenant_id, ok=True, events=0))
        walk.load_checkpoints(self.checkpoints)
        with self._db.read() as conn:
            if conn.dialect.name == "postgresql":
                conn.execution_options(isolation_level="REPEATABLE READ")
            head = conn.execute(
                select(audit_heads).where(audit_heads.c.tenant_key == tenant_key)).first()
            if head is not None:
                walk.start(head.base_seq, head.base_hash)
            last = walk.last
            while True:
                rows = conn.execute(
                    select(audit_events).where(
                        audit_events.c.tenant_key == tenant_key, audit_events.c.seq > last)
                    .order_by(audit_events.c.seq).limit(batch)
                ).all()
                for r in rows:
                    walk.event(dict(r._mapping), event_hash, event_body)
                    last = r.seq
                if len(rows) < batch:
                    break
        return walk.finish(head)

    def prune(self, before: datetime, chunk: int = 200, stop: Callable[[], bool] = lambda: False,
              pause_s: float = 0.02) -> builtins.list[PruneReport]:
        """Audit retention: delete each chain's events older than ``before``, oldest first.

        Only a chain's start goes (the longest prefix older than ``before``), in
        transactions of at most ``chunk`` events, ``pause_s`` apart. Each chunk is verified
        from a read snapshot first; its transaction holds the chain's head (on SQLite: the
        writer lock) only for the delete, and the head then records the new base, re-MAC'd
        with the key. A chain whose chunk or head fails is left whole (reported,
        ``refused``): retention never erases the evidence of an edit.
        Between chunks ``stop()`` may end it early (the gateway is closing). Events an
        active audit sink has not accepted yet are kept (``store/audit_export.py``).
        """
        out = []
        floors = ExportCursors(self._db).floors(time.time())
        with self._db.read() as conn:
            keys = conn.execute(select(audit_heads.c.tenant_key).where(
                audit_heads.c.seq > audit_heads.c.base_seq)).scalars().all()
        for tenant_key in sorted(keys):
            rep = PruneReport(tenant_id=None if tenant_key == GLOBAL_TENANT else tenant_key)
            while not stop():
                n = self._prune_chunk(tenant_key, before, chunk, rep,
                                      floors.get(tenant_key))
                if n < chunk or rep.refused:
                    break
                time.sleep(pause_s)  # the writers (one at a time on SQLite) go first
            if rep.deleted or rep.refused:
                out.append(rep)
        return out

    def _prune_chunk(self, tenant_key: str, before: datetime, chunk: int,
                     rep: PruneReport, floor: int | None = None) -> int:
        """Verify the next chunk from a read snapshot (no lock held), then, holding the
        writer lock only for it, delete it and move the base — if the base did not move
        meanwhile and the head still checks."""
        key, h, e = self.key, audit_heads.c, audit_events.c
        with self._db.read() as conn:
            head = conn.execute(select(audit_heads).where(h.tenant_key == tenant_key)).first()
            if head is None or head.seq <= head.base_seq:
                return 0
            rows = conn.execute(select(audit_events).where(
                e.tenant_key == tenant_key, e.seq > head.base_seq).order_by(e.seq)
                .limit(chunk)).all()
        if not self._head_checks(tenant_key, head):
            rep.refused = ("the chain head's MAC does not check (or the chain is keyed and "
                           "no audit key is configured, or not yet sealed)")
            return 0
        walk = ChainWalk(tenant_key=tenant_key, key=key, genesis=GENESIS,
                         report=VerifyReport(tenant_id=rep.tenant_id, ok=True, events=0))
        walk.start(head.base_seq, head.base_hash)
        cut = None
        for r in rows:
            if as_utc(r.ts) >= before or (  # type: ignore[operator]
                    floor is not None and r.seq > floor):
                break
            walk.event(dict(r._mapping), event_hash, event_body)
            cut = r
        if cut is None:
            return 0
        if walk.report.problems:
            rep.refused = "; ".join(walk.report.problems[:3])
            return 0
        with self._db.write() as conn:
            now = conn.execute(select(audit_heads).where(h.tenant_key == tenant_key)
                               .with_for_update()).first()
            if now is None or (now.base_seq, now.base_hash) != (head.base_seq,
                                                                  head.base_hash):
                return 0  # another process pruned meanwhile: the next sweep goes on
            if not self._head_checks(tenant_key, now):
                rep.refused = "the chain head's MAC does not check"
                return 0
            deleted = conn.execute(delete(audit_events).where(
                e.tenant_key == tenant_key, e.seq > head.base_seq,
                e.seq <= cut.seq)).rowcount
            mac = None if key is None else key.head(tenant_key, now.seq, now.hash,
                                                    cut.seq, cut.hash)
            conn.execute(update(audit_heads).where(h.tenant_key == tenant_key).values(
                base_seq=cut.seq, base_hash=cut.hash, mac=mac))
        rep.deleted += deleted
        rep.through_seq = cut.seq
        return int(deleted)

    def _head_checks(self, tenant_key: str, head: Any) -> bool:
        """Whether ``head`` may be re-sealed: its MAC checks with this store's key (or
        neither has one)."""
        key = self.key
        if key is None or head.mac is None:
            return key is None and head.mac is None
        return AuditKey.matches(key.head(tenant_key, head.seq, head.hash, head.base_seq,
                                         head.base_hash), head.mac)

    def verify_all(self) -> builtins.list[VerifyReport]:
        """Every chain: those with a head, with events, or named by a checkpoint."""
        keys = {GLOBAL_TENANT if t is None else t for t in self.tenants()}
        with self._db.read() as conn:
            keys.update(conn.execute(select(audit_events.c.tenant_key).distinct()).scalars())
        if self.checkpoints is not None:
            keys.update(self.checkpoints.tenants())
        return [self.verify(None if k == GLOBAL_TENANT else k) for k in sorted(keys)]

    def keyed(self) -> bool:
        """Whether any chain head carries a MAC (the store was written with a key)."""
        with self._db.read() as conn:
            return conn.execute(select(audit_heads.c.tenant_key)
                                .where(audit_heads.c.mac.is_not(None)).limit(1)).first() \
                is not None

    def fits(self, key: AuditKey, sample: int = 100) -> bool:
        """Whether the chain heads are sealed with ``key`` (true when none is sealed yet):
        one of the first ``sample`` sealed heads checking suffices (the others may be
        tampered with; verify says so)."""
        h = audit_heads.c
        with self._db.read() as conn:
            heads = conn.execute(select(h.tenant_key, h.seq, h.hash, h.mac, h.base_seq,
                                        h.base_hash).where(h.mac.is_not(None))
                                 .limit(sample)).all()
        return not heads or any(AuditKey.matches(key.head(k, seq, hash_, base_seq, base_hash),
                                                 mac)
                                for k, seq, hash_, mac, base_seq, base_hash in heads)

    def seal(self) -> int:
        """MAC the heads of chains written before the key was configured (trust on first
        use: their unkeyed events are then covered by the head). Verify never seals."""
        key = self.key
        if key is None:
            return 0
        sealed = 0
        with self._db.write() as conn:
            h = audit_heads.c
            for k, seq, hash_, base_seq, base_hash in conn.execute(select(
                    h.tenant_key, h.seq, h.hash, h.base_seq, h.base_hash)
                    .where(h.mac.is_(None), h.seq > 0).with_for_update()).all():
                sealed += conn.execute(audit_heads.update().where(
                    h.tenant_key == k, h.seq == seq, h.mac.is_(None)).values(
                    mac=key.head(k, seq, hash_, base_seq, base_hash))).rowcount
        return sealed

    def checkpoint(self, force: bool = False) -> int:
        """Append the heads that moved to the checkpoint file (when configured and due).
        A head whose MAC does not verify is not checkpointed: verify will report it."""
        cps, key = self.checkpoints, self.key
        if cps is None or key is None or not (force or cps.due()):
            return 0
        with self._db.read() as conn:
            heads = conn.execute(select(
                audit_heads.c.tenant_key, audit_heads.c.seq, audit_heads.c.hash,
                audit_heads.c.mac, audit_heads.c.base_seq, audit_heads.c.base_hash)).all()
        good = [(k, seq, h) for k, seq, h, mac, base_seq, base_hash in heads
                if seq and AuditKey.matches(key.head(k, seq, h, base_seq, base_hash), mac)]
        return cps.write(good, utcnow())

    def tenants(self) -> builtins.list[str | None]:
        with self._db.read() as conn:
            keys = conn.execute(select(audit_heads.c.tenant_key)).scalars().all()
        return [None if k == GLOBAL_TENANT else k for k in keys]


def _event(m: Any) -> AuditEvent:
    tenant_key = m["tenant_key"]
    return AuditEvent(
        seq=m["seq"], event_id=m["event_id"], ts=as_utc(m["ts"]),  # type: ignore[arg-type]
        type=m["type"], tenant_id=None if tenant_key == GLOBAL_TENANT else tenant_key,
        data=m["data"] or {}, prev_hash=m["prev_hash"], hash=m["hash"],
        **{name: m[name] for name in EVENT_FIELDS},
    )

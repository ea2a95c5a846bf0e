"""Outcomes (exactly-once under an idempotency key) and side-effect records (SPEC §2, §4).

``claim`` inserts an ``in_progress`` row guarded by the unique key ``(tenant, agent, key)``:
whatever the number of processes or replicas, exactly one insert wins; the others read the
row that won.
"""

from __future__ import annotations

import builtins
from collections.abc import Callable, Sequence
from dataclasses import fields
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, and_, insert, select, update

from toolkeeper.model.enums import OutcomeState
from toolkeeper.store.audit import AuditRepo
from toolkeeper.store.audit_chain import Prepared, append_chained, prepare
from toolkeeper.store.db import Database, as_utc, delete_chunked, utcnow
from toolkeeper.store.group_commit import GroupCommit, Pending
from toolkeeper.store.pg_batch import Fallback, apply_once
from toolkeeper.store.raw import RawTxn, group_write
from toolkeeper.store.records import AuditDraft, OutcomeRecord, SideEffectRecord
from toolkeeper.store.schema import outcomes, side_effects

_TIMES = ("created_at", "updated_at", "expires_at", "stale_after")
_OUTCOME_FIELDS = tuple(f.name for f in fields(OutcomeRecord))
_EFFECT_FIELDS = tuple(f.name for f in fields(SideEffectRecord))


def key_expired(rec: OutcomeRecord, now: datetime) -> bool:
    """Past its TTL, a finished outcome no longer holds its key; ``in_progress`` and
    ``unknown`` ones never expire by themselves (an operator resolves them, SPEC §4)."""
    return rec.expires_at <= now and rec.state in (OutcomeState.SUCCEEDED, OutcomeState.FAILED)


def _row(rec: object, names: tuple[str, ...]) -> dict[str, Any]:
    """A shallow row dict (``dataclasses.asdict`` deep-copies: too slow for the hot path)."""
    return {n: getattr(rec, n) for n in names}


def _outcome(m: Any) -> OutcomeRecord:
    data = dict(m)
    for k in _TIMES:
        data[k] = as_utc(data[k])
    data["state"] = OutcomeState(data["state"])
    return OutcomeRecord(**data)


def _effect(m: Any) -> SideEffectRecord:
    data = dict(m)
    data["created_at"] = as_utc(data["created_at"])
    return SideEffectRecord(**data)


_FINISHED = (OutcomeState.SUCCEEDED.value, OutcomeState.FAILED.value)

GROUP_WAIT_MARGIN_S = 30.0
"""How much longer than the database's busy timeout a caller waits for its batch."""


class _Claim:
    __slots__ = ("prepared", "row")

    def __init__(self, row: dict[str, Any], prepared: Prepared) -> None:
        self.row = row
        self.prepared = prepared


class _Finish:
    __slots__ = ("effect", "params", "prepared")

    def __init__(self, params: dict[str, Any], effect: dict[str, Any] | None,
                 prepared: Prepared) -> None:
        self.params = params
        self.effect = effect
        self.prepared = prepared


def _claim_row(rec: OutcomeRecord) -> dict[str, Any]:
    row = _row(rec, _OUTCOME_FIELDS)
    row["state"] = rec.state.value
    return row


def _finish_params(call_id: str, state: OutcomeState, status: str, reason: str | None,
                   result: dict[str, Any] | None) -> dict[str, Any]:
    return {"call_id": call_id, "state": state.value, "status": status, "reason": reason,
            "result": result, "updated_at": utcnow()}


def _finish_work(call_id: str, state: OutcomeState, status: str, reason: str | None,
                 result: dict[str, Any] | None, events: Sequence[AuditDraft],
                 side_effect: SideEffectRecord | None) -> _Finish:
    """A finish as the group commit takes it (event bodies hashed before the writer lock)."""
    effect = _row(side_effect, _EFFECT_FIELDS) if side_effect is not None else None
    return _Finish(_finish_params(call_id, state, status, reason, result), effect,
                   prepare(events))


def _claim_order(m: Pending) -> tuple[str, str, str]:
    row = m.work.row
    return row["tenant_id"], row["agent"], row["key"]


class OutcomeRepo:
    def __init__(self, db: Database, audit: AuditRepo) -> None:
        self._db = db
        self._audit = audit
        self._group = GroupCommit(
            lambda: group_write(db), self._apply,
            wait_timeout_s=db.busy_timeout_s + GROUP_WAIT_MARGIN_S)
        self.fallback = Fallback()
        """Why batches could not be one statement on PostgreSQL (:mod:`pg_batch`)."""

    @property
    def group(self) -> GroupCommit:
        """The group commit shared by this process's claims and finishes."""
        return self._group

    def commit_stats(self) -> tuple[int, int, dict[str, int], int]:
        """For the metrics: the group commit's transactions and writes so far; on
        PostgreSQL, one-statement batches refused or not tried, by why (:mod:`pg_batch`),
        and the batches that then ran the usual transaction."""
        txns, writes = self._group.counts()
        return txns, writes, dict(self.fallback.counts), self.fallback.usual

    def _apply(self, txn: RawTxn, batch: builtins.list[Pending]) -> None:
        """A batch's statements in one transaction: the claims in key order (two batches
        never wait on each other's keys in opposite orders), the finishes, then every
        event that is to be written, in arrival order, chained once (each tenant's head
        locked once, in sorted order). On PostgreSQL first as one statement
        (:mod:`pg_batch`), which writes nothing unless every claim wins and every head is
        where this process left it."""
        claims = sorted((m for m in batch if type(m.work) is _Claim), key=_claim_order)
        if txn.oneshot:
            if not self.fallback.off and self._apply_once(txn, batch, claims):
                return
            txn.begin()
        for m in claims:
            m.result = txn.execute("claim", m.work.row) == 1
        prepared: Prepared = []
        for m in batch:
            work = m.work
            if type(work) is _Finish:
                m.result = txn.execute("finish", work.params) == 1
                if work.effect is not None and m.result:
                    txn.execute("effect", work.effect)
                prepared += work.prepared
            elif m.result:  # a claim's events are written only if it won
                prepared += work.prepared
        if prepared:
            append_chained(txn, prepared, self._audit.key, self._audit.heads)

    def _apply_once(self, txn: RawTxn, batch: builtins.list[Pending],
                    claims: builtins.list[Pending]) -> bool:
        prepared: Prepared = []
        finishes = []
        for m in batch:
            prepared += m.work.prepared  # every claim is to win: all the events
            if type(m.work) is _Finish:
                finishes.append(m)
        done = apply_once(txn, [m.work.row for m in claims],
                          [dict(m.work.params, effect=m.work.effect) for m in finishes],
                          prepared, self._audit.key, self._audit.heads, self.fallback)
        if done is None:
            return False
        for m in claims:
            m.result = True
        for m, ok in zip(finishes, done, strict=True):
            m.result = ok
        return True

    def claim(self, rec: OutcomeRecord, events: Sequence[AuditDraft] = ()) -> OutcomeRecord | None:
        """Insert ``rec`` as in_progress. ``None`` if we won; else the existing record.

        Concurrent claims and finishes share one transaction (:mod:`group_commit`); each
        claim still learns whether its own insert won. An expired record (past its TTL)
        is replaced, so keys do not block forever.
        """
        row = _claim_row(rec)
        # hashing bodies before the writer lock is taken
        if self._group.submit(_Claim(row, prepare(events))):
            return None
        return self._claim_contended(rec, row, events)

    async def claim_async(self, rec: OutcomeRecord, events: Sequence[AuditDraft] = (), *,
                          offload: bool = False) -> OutcomeRecord | None:
        """:meth:`claim` for a coroutine; with ``offload`` (other calls share its loop) it
        waits for the group's commit without blocking the loop (:meth:`GroupCommit.
        submit_async`), so those calls' writes join the same transactions; a key already
        taken is then read (or an expired one taken over) off the loop as well."""
        row = _claim_row(rec)
        if await self._group.submit_async(_Claim(row, prepare(events)), offload=offload):
            return None
        if offload:  # rare: the key was taken; its transaction too waits off the loop
            found: OutcomeRecord | None = await self._group.off_loop(
                self._claim_contended, rec, row, events)
            return found
        return self._claim_contended(rec, row, events)

    def _claim_contended(self, rec: OutcomeRecord, row: dict[str, Any],
                         events: Sequence[AuditDraft]) -> OutcomeRecord | None:
        """The key is taken: return its record, or take over an expired one."""
        with self._db.write() as conn:
            existing = self._by_key(conn, rec.tenant_id, rec.agent, rec.key, lock=True)
            if existing is None:  # deleted between insert and read: retry once
                conn.execute(insert(outcomes).values(**row))
                self._audit.append(events, conn)
                return None
            now = as_utc(rec.created_at)
            assert now is not None
            if key_expired(existing, now):
                conn.execute(update(outcomes).where(outcomes.c.call_id == existing.call_id)
                             .values(**row))
                self._audit.append(events, conn)
                return None
            return existing

    def finish(
        self, call_id: str, *, state: OutcomeState, status: str, reason: str | None,
        result: dict[str, Any] | None, events: Sequence[AuditDraft] = (),
        side_effect: SideEffectRecord | None = None, only_if_in_progress: bool = True,
    ) -> bool:
        """Record the final state, the side effect and the audit events in one transaction."""
        if not only_if_in_progress:
            return self._finish_any(_finish_params(call_id, state, status, reason, result),
                                    events)
        done: bool = self._group.submit(
            _finish_work(call_id, state, status, reason, result, events, side_effect))
        return done

    async def finish_async(
        self, call_id: str, *, state: OutcomeState, status: str, reason: str | None,
        result: dict[str, Any] | None, events: Sequence[AuditDraft] = (),
        side_effect: SideEffectRecord | None = None, offload: bool = False,
    ) -> bool:
        """:meth:`finish` (of an ``in_progress`` outcome) for a coroutine, as
        :meth:`claim_async` is :meth:`claim`'s."""
        done: bool = await self._group.submit_async(
            _finish_work(call_id, state, status, reason, result, events, side_effect),
            offload=offload)
        return done

    def _finish_any(self, params: dict[str, Any], events: Sequence[AuditDraft]) -> bool:
        call_id = params.pop("call_id")
        with self._db.write() as conn:
            res = conn.execute(update(outcomes).where(outcomes.c.call_id == call_id)
                               .values(**params))
            self._audit.append(events, conn)
            return res.rowcount == 1

    def release(self, call_id: str) -> bool:
        """A failed outcome stops holding its key now (its row stays until purged): the
        round of a call that only asked for input (``input_required``), whose retry with
        the answers must run, not be answered from this round."""
        with self._db.write() as conn:
            res = conn.execute(update(outcomes).where(
                outcomes.c.call_id == call_id,
                outcomes.c.state == OutcomeState.FAILED.value).values(expires_at=utcnow()))
            return res.rowcount == 1

    def resolve(self, call_id: str, *, state: OutcomeState, status: str, result: dict[str, Any],
                resolved_by: str, events: Sequence[AuditDraft]) -> bool:
        """Operator resolution of an ``unknown`` (or stuck ``in_progress``) outcome."""
        with self._db.write() as conn:
            res = conn.execute(
                update(outcomes).where(
                    outcomes.c.call_id == call_id,
                    outcomes.c.state.in_([OutcomeState.UNKNOWN.value,
                                          OutcomeState.IN_PROGRESS.value]))
                .values(state=state.value, status=status, result=result,
                        reason=result.get("reason"), resolved_by=resolved_by,
                        updated_at=utcnow()))
            if res.rowcount == 1:
                self._audit.append(events, conn)
            return res.rowcount == 1

    def mark_stale_unknown(self, now: datetime, make_events: Any) -> list[OutcomeRecord]:
        """``in_progress`` rows past ``stale_after`` become ``unknown`` (crash recovery)."""
        with self._db.write() as conn:
            rows = conn.execute(select(outcomes).where(
                outcomes.c.state == OutcomeState.IN_PROGRESS.value,
                outcomes.c.stale_after <= now)).all()
            stale = [_outcome(r._mapping) for r in rows]
            for rec in stale:
                conn.execute(update(outcomes).where(
                    outcomes.c.call_id == rec.call_id,
                    outcomes.c.state == OutcomeState.IN_PROGRESS.value).values(
                    state=OutcomeState.UNKNOWN.value, status="unknown", reason="outcome_unknown",
                    updated_at=now))
                rec.state, rec.status = OutcomeState.UNKNOWN, "unknown"
                rec.reason = "outcome_unknown"
            if stale:
                self._audit.append(make_events(stale), conn)
            return stale

    def purge_expired(self, before: datetime, chunk: int = 200,
                      stop: Callable[[], bool] = lambda: False) -> int:
        """Delete finished outcomes whose TTL ended before ``before``. ``in_progress`` and
        ``unknown`` ones stay until resolved; a row taken over by a new claim meanwhile is
        no longer finished and stays too."""
        o = outcomes.c
        return delete_chunked(self._db, outcomes, o.call_id,
                              (o.state.in_(_FINISHED), o.expires_at <= before), chunk, stop)

    def purge_side_effects(self, before: datetime, chunk: int = 200,
                           stop: Callable[[], bool] = lambda: False) -> int:
        """Delete side-effect records created before ``before`` (with audit retention:
        they are the same history; a deleted one can no longer be compensated)."""
        return delete_chunked(self._db, side_effects, side_effects.c.id,
                              (side_effects.c.created_at < before,), chunk, stop)

    def get(self, call_id: str) -> OutcomeRecord | None:
        with self._db.read() as conn:
            row = conn.execute(select(outcomes).where(outcomes.c.call_id == call_id)).first()
        return _outcome(row._mapping) if row else None

    def by_key(self, tenant_id: str, agent: str, key: str) -> OutcomeRecord | None:
        with self._db.read() as conn:
            return self._by_key(conn, tenant_id, agent, key)

    @staticmethod
    def _by_key(conn: Connection, tenant_id: str, agent: str, key: str,
                lock: bool = False) -> OutcomeRecord | None:
        q = select(outcomes).where(and_(outcomes.c.tenant_id == tenant_id,
                                        outcomes.c.agent == agent, outcomes.c.key == key))
        if lock and conn.dialect.name == "postgresql":
            q = q.with_for_update()
        row = conn.execute(q).first()
        return _outcome(row._mapping) if row else None

    def list(self, tenant_id: str, *, state: str | None = None, status: str | None = None,
             limit: int = 100, offset: int = 0) -> builtins.list[OutcomeRecord]:
        q = select(outcomes).where(outcomes.c.tenant_id == tenant_id)
        if state:
            q = q.where(outcomes.c.state == state)
        if status:
            q = q.where(outcomes.c.status == status)
        q = q.order_by(outcomes.c.created_at.desc()).limit(limit).offset(offset)
        with self._db.read() as conn:
            return [_outcome(r._mapping) for r in conn.execute(q)]

    # side effects -------------------------------------------------------------------------

    def side_effect(self, effect_id: str) -> SideEffectRecord | None:
        with self._db.read() as conn:
            row = conn.execute(select(side_effects).where(side_effects.c.id == effect_id)).first()
        return None if row is None else _effect(row._mapping)

    def side_effects(self, tenant_id: str, *, turn_group_id: str | None = None,
                     limit: int = 100) -> builtins.list[SideEffectRecord]:
        q = select(side_effects).where(side_effects.c.tenant_id == tenant_id)
        if turn_group_id:
            q = q.where(side_effects.c.turn_group_id == turn_group_id)
        with self._db.read() as conn:
            rows = conn.execute(q.order_by(side_effects.c.created_at.desc()).limit(limit)).all()
        return [_effect(r._mapping) for r in rows]

    def side_effects_of_call(self, tenant_id: str,
                             call_id: str) -> builtins.list[SideEffectRecord]:
        """The side effects one call recorded, oldest first."""
        q = select(side_effects).where(side_effects.c.tenant_id == tenant_id,
                                       side_effects.c.call_id == call_id)
        with self._db.read() as conn:
            rows = conn.execute(q.order_by(side_effects.c.created_at).limit(50)).all()
        return [_effect(r._mapping) for r in rows]

    def mark_compensated(self, effect_id: str, compensation_call_id: str,
                         events: Sequence[AuditDraft]) -> bool:
        """Atomically flip an executed side effect to compensated (at most once)."""
        with self._db.write() as conn:
            res = conn.execute(update(side_effects).where(
                side_effects.c.id == effect_id, side_effects.c.status == "executed").values(
                status="compensated", compensation_call_id=compensation_call_id))
            if res.rowcount == 1:
                self._audit.append(events, conn)
            return res.rowcount == 1

"""Approvals and preview tokens: bound to one call digest, single-use, expiring (SPEC §3)."""

from __future__ import annotations

import builtins
from collections.abc import Callable, Sequence
from dataclasses import asdict
from datetime import datetime
from typing import Any

from sqlalchemy import func, insert, select, update

from toolkeeper.model.enums import ApprovalStatus
from toolkeeper.store.audit import AuditRepo
from toolkeeper.store.db import Database, as_utc, delete_chunked, utcnow
from toolkeeper.store.records import ApprovalRecord, AuditDraft
from toolkeeper.store.schema import approvals


def _approval(m: Any) -> ApprovalRecord:
    data = dict(m)
    for k in ("created_at", "expires_at", "decided_at"):
        data[k] = as_utc(data[k])
    data["status"] = ApprovalStatus(data["status"])
    return ApprovalRecord(**data)


class ApprovalRepo:
    def __init__(self, db: Database, audit: AuditRepo) -> None:
        self._db = db
        self._audit = audit

    def create(self, rec: ApprovalRecord, events: Sequence[AuditDraft] = ()) -> None:
        row = asdict(rec)
        row["status"] = rec.status.value
        with self._db.write() as conn:
            conn.execute(insert(approvals).values(**row))
            self._audit.append(events, conn)

    def purge_expired(self, before: datetime, chunk: int = 200,
                      stop: Callable[[], bool] = lambda: False) -> int:
        """Delete approvals (whatever their status) that expired before ``before``: past
        its expiry an approval can no longer be decided or consumed."""
        return delete_chunked(self._db, approvals, approvals.c.id,
                              (approvals.c.expires_at < before,), chunk, stop)

    def get(self, approval_id: str) -> ApprovalRecord | None:
        with self._db.read() as conn:
            row = conn.execute(select(approvals).where(approvals.c.id == approval_id)).first()
        return _approval(row._mapping) if row else None

    def list(self, tenant_id: str, *, status: str | None = None, kind: str | None = None,
             limit: int = 100, now: datetime | None = None) -> builtins.list[ApprovalRecord]:
        """Newest first; with ``now``, a pending approval past its expiry counts as
        ``expired`` for the ``status`` filter (its stored status stays pending)."""
        a = approvals.c
        q = select(approvals).where(a.tenant_id == tenant_id)
        pending = ApprovalStatus.PENDING.value
        if status and now is not None and status == pending:
            q = q.where(a.status == pending, a.expires_at > now)
        elif status and now is not None and status == ApprovalStatus.EXPIRED.value:
            q = q.where((a.status == status) | ((a.status == pending) & (a.expires_at <= now)))
        elif status:
            q = q.where(a.status == status)
        if kind:
            q = q.where(approvals.c.kind == kind)
        with self._db.read() as conn:
            rows = conn.execute(q.order_by(approvals.c.created_at.desc()).limit(limit)).all()
        return [_approval(r._mapping) for r in rows]

    def for_call(self, tenant_id: str, agent: str, tool: str, action: str,
                 digest: str) -> builtins.list[ApprovalRecord]:
        """Open (pending or approved) approvals bound to this exact call, newest first."""
        a = approvals.c
        q = select(approvals).where(
            a.tenant_id == tenant_id, a.agent == agent, a.tool == tool, a.action == action,
            a.status.in_([ApprovalStatus.PENDING.value, ApprovalStatus.APPROVED.value]),
            a.kind != "preview",
            (a.args_digest == digest) | (a.edited_digest == digest),
        ).order_by(a.created_at.desc()).limit(20)
        with self._db.read() as conn:
            return [_approval(r._mapping) for r in conn.execute(q)]

    def of_call(self, tenant_id: str, call_id: str) -> builtins.list[ApprovalRecord]:
        """The approvals a call asked for or consumed (``call_id`` or ``consumed_by``),
        oldest first; previews included (the caller decides what to show)."""
        a = approvals.c
        q = select(approvals).where(a.tenant_id == tenant_id,
                                    (a.call_id == call_id) | (a.consumed_by == call_id))
        with self._db.read() as conn:
            rows = conn.execute(q.order_by(a.created_at).limit(50)).all()
        return [_approval(r._mapping) for r in rows]

    def pending_of_agent(self, tenant_id: str, agent: str, now: datetime) -> int:
        """How many approvals ``agent`` has waiting for a human (unexpired, not previews)."""
        a = approvals.c
        q = select(func.count()).select_from(approvals).where(
            a.tenant_id == tenant_id, a.status == ApprovalStatus.PENDING.value,
            a.agent == agent, a.kind != "preview", a.expires_at > now)
        with self._db.read() as conn:
            return int(conn.execute(q).scalar_one())

    def count_pending(self, now: datetime) -> int:
        return sum(self.pending_by_tenant(now).values())

    def pending_by_tenant(self, now: datetime, tenant_id: str | None = None) -> dict[str, int]:
        """Approvals waiting for a human, per tenant (only ``tenant_id``'s when given)."""
        a = approvals.c
        q = select(a.tenant_id, func.count()).where(
            a.status == ApprovalStatus.PENDING.value, a.kind != "preview",
            a.expires_at > now).group_by(a.tenant_id)
        if tenant_id is not None:
            q = q.where(a.tenant_id == tenant_id)
        with self._db.read() as conn:
            return {str(t): int(n) for t, n in conn.execute(q)}

    def decide(self, approval_id: str, *, status: ApprovalStatus, by: str, note: str | None,
               edited_digest: str | None = None, edited_arguments: Any = None,
               events: Sequence[AuditDraft] = (), by_subject: str | None = None,
               by_issuer: str | None = None) -> bool:
        """pending → approved/denied, once. ``False`` if it was not pending any more."""
        now = utcnow()
        with self._db.write() as conn:
            res = conn.execute(update(approvals).where(
                approvals.c.id == approval_id,
                approvals.c.status == ApprovalStatus.PENDING.value,
                approvals.c.expires_at > now).values(
                status=status.value, decided_by=by, decided_by_subject=by_subject,
                decided_by_issuer=by_issuer, decided_at=now, note=note,
                edited_digest=edited_digest, edited_arguments=edited_arguments))
            if res.rowcount == 1:
                self._audit.append(events, conn)
            return res.rowcount == 1

    def consume(self, approval_id: str, call_id: str, events: Sequence[AuditDraft] = ()) -> bool:
        """approved → consumed by exactly one call (atomic compare-and-set)."""
        now = utcnow()
        with self._db.write() as conn:
            res = conn.execute(update(approvals).where(
                approvals.c.id == approval_id,
                approvals.c.status == ApprovalStatus.APPROVED.value,
                approvals.c.expires_at > now).values(
                status=ApprovalStatus.CONSUMED.value, consumed_by=call_id))
            if res.rowcount == 1:
                self._audit.append(events, conn)
            return res.rowcount == 1

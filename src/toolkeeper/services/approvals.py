"""Resolving approvals: approve (optionally with edited arguments), deny, confirm (SPEC §3)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

from toolkeeper.canonical import NotCanonicalizable, digest
from toolkeeper.errors import OperationRefused
from toolkeeper.identity.upstream_person import PersonTokens
from toolkeeper.model.call import Principal
from toolkeeper.model.enums import ApprovalStatus, Role
from toolkeeper.model.events import EventType
from toolkeeper.model.reasons import Reason
from toolkeeper.model.wire import Approval, ApprovalPreview
from toolkeeper.pipeline.catalog import Catalog
from toolkeeper.pipeline.coercions import coerce
from toolkeeper.pipeline.validate import errors_text, schema_errors
from toolkeeper.secrets.redact import Redactor
from toolkeeper.services.events import system_event
from toolkeeper.store import Store
from toolkeeper.store.db import utcnow
from toolkeeper.store.records import ApprovalRecord


class ApprovalService:
    """Approvals in ``store``; edited arguments are checked against the action's schema
    (``catalog``: the gateway's current one) and stored redacted (``redactor``: likewise)."""

    def __init__(self, store: Store, *, redactor: Callable[[], Redactor],
                 catalog: Callable[[], Catalog], people: PersonTokens | None = None) -> None:
        self._store = store
        self._people = people
        """Approvers' token sets: a signed-in person's is bound to what they approve."""
        self._redactor = redactor
        self._catalog = catalog

    def _check_edit(self, rec: ApprovalRecord, edited: Any) -> None:
        """Edited arguments must fit the action's schema (of the version the call asked
        for), as the resubmitted call will be validated: refused now, not at run time."""
        tool = self._catalog().runnable(rec.tenant_id, rec.tool, rec.tool_version)
        if tool is None:  # gone since: the resubmitted call is refused when resolved
            return
        args = coerce(edited, tool.coercions(rec.action))
        errors = schema_errors(tool.validator(rec.action), args)
        if errors:
            raise OperationRefused(Reason.INVALID_ARGUMENTS,
                                   "edited arguments: " + errors_text(errors))

    def list(self, tenant_id: str, *, status: str | None = "pending",
             limit: int = 100) -> list[ApprovalRecord]:
        """Approvals for a human (preview tokens are not listed), as of now: a pending
        one past its expiry reads (and filters as) ``expired``."""
        now = utcnow()
        recs = self._store.approvals.list(tenant_id, status=status, limit=limit, now=now)
        return [as_of(rec, now) for rec in recs if rec.kind != "preview"]

    def get(self, approval_id: str, tenant_id: str) -> ApprovalRecord:
        rec = self._store.approvals.get(approval_id)
        if rec is None or rec.tenant_id != tenant_id or rec.kind == "preview":
            raise OperationRefused(Reason.NOT_FOUND, f"no approval {approval_id!r}")
        return as_of(rec, utcnow())

    def approve(self, approval_id: str, by: Principal, *, edited_arguments: Any = None,
                note: str | None = None) -> ApprovalRecord:
        """Approve; with ``edited_arguments`` the approval binds those instead."""
        rec = self._decidable(approval_id, by)
        edited_digest = None
        if edited_arguments is not None:
            self._check_edit(rec, edited_arguments)
            try:
                edited_digest = digest(edited_arguments)
            except NotCanonicalizable as exc:
                raise OperationRefused(Reason.INVALID_ARGUMENTS, str(exc)) from exc
        ev = system_event(EventType.APPROVAL_GRANTED, rec.tenant_id, tool=rec.tool,
                          agent=rec.agent, call_id=rec.call_id, approval_id=rec.id,
                          by=by.name, by_subject=by.subject, by_issuer=by.issuer,
                          edited=edited_digest is not None)
        safe_edit = self._redactor().redact(edited_arguments)
        bound = self._people is not None and \
            self._people.bind(rec.tenant_id, by.issuer, by.subject, rec.id)
        if not self._store.approvals.decide(
                rec.id, status=ApprovalStatus.APPROVED, by=by.name, note=note,
                by_subject=by.subject, by_issuer=by.issuer,
                edited_digest=edited_digest, edited_arguments=safe_edit, events=[ev]):
            if bound:
                self._people.take(rec.tenant_id, rec.id)  # type: ignore[union-attr]
            raise OperationRefused(Reason.INVALID_STATE, "the approval is no longer pending")
        return self.get(rec.id, rec.tenant_id)

    def confirm(self, approval_id: str, by: Principal) -> ApprovalRecord:
        """Resolve a ``confirm`` gate: the requesting agent's own user may do this."""
        rec = self.get(approval_id, by.tenant_id)
        if rec.kind != "confirm":
            raise OperationRefused(Reason.APPROVER_NOT_ALLOWED,
                                   "this call needs an approver, not a confirmation")
        return self.approve(approval_id, by)

    def deny(self, approval_id: str, by: Principal, *, note: str | None = None) -> ApprovalRecord:
        rec = self._decidable(approval_id, by)
        ev = system_event(EventType.APPROVAL_DENIED, rec.tenant_id, tool=rec.tool,
                          agent=rec.agent, call_id=rec.call_id, approval_id=rec.id, by=by.name,
                          by_subject=by.subject, by_issuer=by.issuer)
        if not self._store.approvals.decide(rec.id, status=ApprovalStatus.DENIED,
                                               by=by.name, note=note, events=[ev],
                                               by_subject=by.subject, by_issuer=by.issuer):
            raise OperationRefused(Reason.INVALID_STATE, "the approval is no longer pending")
        return self.get(rec.id, rec.tenant_id)

    def _decidable(self, approval_id: str, by: Principal) -> ApprovalRecord:
        rec = self.get(approval_id, by.tenant_id)
        is_approver = by.has_role(Role.APPROVER)
        own_call = by.agent is not None and by.agent == rec.agent
        if rec.kind == "approve" and (own_call or not is_approver):
            raise OperationRefused(Reason.APPROVER_NOT_ALLOWED,
                                   "an approve gate needs an approver other than the agent")
        if rec.kind == "confirm" and not (is_approver or own_call):
            raise OperationRefused(Reason.APPROVER_NOT_ALLOWED,
                                   "only the requesting agent's user or an approver may confirm")
        if rec.status is ApprovalStatus.EXPIRED:
            raise OperationRefused(Reason.APPROVAL_EXPIRED, "the approval expired")
        if rec.status is not ApprovalStatus.PENDING:
            raise OperationRefused(Reason.INVALID_STATE, f"the approval is {rec.status.value}")
        return rec


def as_of(rec: ApprovalRecord, now: datetime) -> ApprovalRecord:
    """The one home of lazy expiry: a pending approval past ``expires_at`` is ``expired``
    (marked on read, not stored; the store's decide/consume refuse it by time as well)."""
    if rec.status is ApprovalStatus.PENDING and rec.expires_at <= now:
        rec.status = ApprovalStatus.EXPIRED
    return rec


def approval_wire(rec: ApprovalRecord) -> Approval:
    """The one rendering of an approval (``model/wire.py``): what REST answers
    (``ApprovalOut``), what a webhook delivery carries as its ``approval``, what the CLI's
    ``--json`` prints and what the client reads. Every field of the wire model is read from
    the record by name (a field added to both needs nothing here), the preview excepted."""
    fields = {name: getattr(rec, name) for name in Approval.model_fields if name != "preview"}
    status = rec.status.value
    return Approval(**{**fields, "status": status}, preview=_preview(rec))


def approval_json(rec: ApprovalRecord) -> dict[str, Any]:
    """:func:`approval_wire` as JSON."""
    return approval_wire(rec).model_dump(mode="json")


def _preview(rec: ApprovalRecord) -> ApprovalPreview | None:
    """The tool's preview of the effect (SPEC §3), when the gate ran one."""
    if rec.preview is None:
        return None
    return ApprovalPreview(summary=rec.summary, data=rec.preview)

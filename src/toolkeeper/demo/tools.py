"""The demo's native tools: a small billing back-office and a repository host, kept in memory.

Every tool works on one :class:`DemoWorld` (invoices, payments, sent mail, repositories), so a
payment, its refund and the look-up that follows all see the same ledger. The runner hands
the same world to every tool; a tool loaded from config on its own gets a fresh world.

=================  =============  ========  ================================================
tool               side effect    risk      behaviour
=================  =============  ========  ================================================
lookup_invoice     pure           low       read one invoice
send_email         irreversible   medium    queue a mail; ``preview`` shows it, sends nothing
pay_invoice        compensatable  high      pay an open invoice; undone by ``refund_invoice``
refund_invoice     idempotent     low       refund a payment (once, whatever the retries)
delete_repository  irreversible   critical  delete a repository for good
=================  =============  ========  ================================================
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Any, ClassVar

from pydantic import Field

from toolkeeper.model.call import PreviewResult
from toolkeeper.model.enums import Risk, SideEffect
from toolkeeper.model.tool import ActionSpec, Compensation, ExecutionMeta
from toolkeeper.providers.base import ToolContext, ToolPolicy
from toolkeeper.providers.native import BaseTool

_ID = {"type": "string", "pattern": "^[A-Za-z0-9_-]{1,40}$"}


def _schema(properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {"type": "object", "properties": properties, "required": required,
            "additionalProperties": False}


@dataclass(slots=True)
class Invoice:
    """One invoice of the ledger."""

    id: str
    customer: str
    email: str
    amount: float
    paid: float = 0.0

    @property
    def status(self) -> str:
        """``paid`` once fully paid, else ``open``."""
        return "paid" if self.paid >= self.amount else "open"

    def as_dict(self) -> dict[str, Any]:
        """The invoice as a tool returns it."""
        return {"id": self.id, "customer": self.customer, "email": self.email,
                "amount": self.amount, "paid": self.paid, "status": self.status}


@dataclass(slots=True)
class DemoWorld:
    """The in-memory state every demo tool acts on."""

    invoices: dict[str, Invoice] = field(default_factory=dict)
    payments: dict[str, dict[str, Any]] = field(default_factory=dict)
    """payment id → {invoice_id, amount, refunded}: the payment ledger."""
    outbox: list[dict[str, str]] = field(default_factory=list)
    repositories: set[str] = field(default_factory=set)
    _ids: itertools.count[int] = field(default_factory=lambda: itertools.count(1))

    @classmethod
    def sample(cls) -> DemoWorld:
        """Three invoices and two repositories, always the same."""
        world = cls(repositories={"billing-service", "legacy-reports"})
        for inv in (Invoice("INV-1001", "Acme Corp", "ap@acme.example", 250.0),
                    Invoice("INV-1002", "Globex", "billing@globex.example", 480.0),
                    Invoice("INV-1003", "Initech", "finance@initech.example", 4200.0)):
            world.invoices[inv.id] = inv
        return world

    def next_id(self, prefix: str) -> str:
        """A fresh, predictable id (``PAY-0001``)."""
        return f"{prefix}-{next(self._ids):04d}"


class _DemoTool(BaseTool):
    """Shared construction: every demo tool holds the world it acts on."""

    inline = True  # microseconds of dict work: no worker thread

    def __init__(self, world: DemoWorld | None = None) -> None:
        self.world = world if world is not None else DemoWorld.sample()

    def invoice(self, invoice_id: str, ctx: ToolContext) -> Invoice:
        """The invoice, or the call fails with ``invoice_not_found``."""
        inv = self.world.invoices.get(invoice_id)
        if inv is None:
            ctx.fail("invoice_not_found", f"no invoice {invoice_id!r}")
        return inv


class LookupPolicy(ToolPolicy):
    """What a look-up may reveal."""

    show_email: bool = True
    """``False`` leaves the customer's email address out of the result."""


class LookupInvoice(_DemoTool):
    """Read one invoice: amount, what was paid, status."""

    tool_name = "lookup_invoice"
    policy_model = LookupPolicy
    scopes_required = ("invoices:read",)
    risk_default = Risk.LOW
    side_effect = SideEffect.PURE
    execution = ExecutionMeta(is_pure=True, timeout_s=5)
    actions: ClassVar[dict[str, ActionSpec]] = {"run": ActionSpec(
        description="Look an invoice up by id.",
        input_schema=_schema({"invoice_id": _ID}, ["invoice_id"]))}

    def execute(self, action: str, request: dict[str, Any], context: ToolContext) -> Any:
        """Return the invoice (without the email when the policy says so)."""
        policy = context.policy
        assert isinstance(policy, LookupPolicy)
        data = self.invoice(request["invoice_id"], context).as_dict()
        if not policy.show_email:
            del data["email"]
        return data


class EmailPolicy(ToolPolicy):
    """Where the assistant may send mail."""

    allowed_domains: tuple[str, ...] = ("example",)
    """Recipient domains (suffix match); anything else is ``recipient_not_allowed``."""


class SendEmail(_DemoTool):
    """Send an email to a customer. It cannot be unsent."""

    tool_name = "send_email"
    scopes_required = ("email:send",)
    risk_default = Risk.MEDIUM
    side_effect = SideEffect.IRREVERSIBLE
    policy_model = EmailPolicy
    execution = ExecutionMeta(timeout_s=5)
    actions: ClassVar[dict[str, ActionSpec]] = {"run": ActionSpec(
        description="Send one plain-text email.",
        input_schema=_schema({"to": {"type": "string", "maxLength": 200},
                              "subject": {"type": "string", "maxLength": 200},
                              "body": {"type": "string", "maxLength": 10_000}},
                             ["to", "subject", "body"]))}

    def _checked(self, request: dict[str, Any], ctx: ToolContext) -> dict[str, str]:
        policy = ctx.policy
        assert isinstance(policy, EmailPolicy)
        domain = request["to"].rpartition("@")[2].lower()
        if not any(domain == d or domain.endswith("." + d) for d in policy.allowed_domains):
            ctx.deny("recipient_not_allowed", f"{domain!r} is not an allowed domain")
        return {"to": request["to"], "subject": request["subject"], "body": request["body"]}

    def preview(self, action: str, request: dict[str, Any],
                context: ToolContext) -> PreviewResult | None:
        """The email exactly as it would be sent; nothing is sent."""
        mail = self._checked(request, context)
        return PreviewResult(summary=f"email to {mail['to']}: {mail['subject']!r}", data=mail)

    def execute(self, action: str, request: dict[str, Any], context: ToolContext) -> Any:
        """Put the email in the outbox."""
        mail = self._checked(request, context)
        message_id = self.world.next_id("MSG")
        self.world.outbox.append({**mail, "message_id": message_id})
        return {"message_id": message_id, "to": mail["to"]}


class PaymentPolicy(ToolPolicy):
    """Guardrails of payments."""

    max_amount: float = Field(default=10_000.0, gt=0)
    """Single payments above this are ``amount_over_limit``, whoever approves them."""


class PayInvoice(_DemoTool):
    """Pay (part of) an open invoice. Undone by ``refund_invoice``."""

    tool_name = "pay_invoice"
    scopes_required = ("invoices:write",)
    risk_default = Risk.HIGH
    side_effect = SideEffect.COMPENSATABLE
    policy_model = PaymentPolicy
    execution = ExecutionMeta(timeout_s=5)
    compensation: ClassVar[dict[str, Compensation]] = {"run": Compensation(
        tool="refund_invoice", action="run",
        arguments={"payment_id": "result.payment_id", "invoice_id": "arguments.invoice_id",
                   "amount": "result.amount_paid"})}
    actions: ClassVar[dict[str, ActionSpec]] = {"run": ActionSpec(
        description="Pay an amount towards an invoice.",
        input_schema=_schema({"invoice_id": _ID,
                              "amount": {"type": "number", "exclusiveMinimum": 0}},
                             ["invoice_id", "amount"]))}

    def execute(self, action: str, request: dict[str, Any], context: ToolContext) -> Any:
        """Record the payment against the invoice."""
        policy = context.policy
        assert isinstance(policy, PaymentPolicy)
        amount = float(request["amount"])
        if amount > policy.max_amount:
            context.deny("amount_over_limit", f"{amount} exceeds {policy.max_amount}")
        inv = self.invoice(request["invoice_id"], context)
        if amount > inv.amount - inv.paid + 1e-9:
            context.fail("overpayment", f"{inv.id} has only {inv.amount - inv.paid} open")
        inv.paid += amount
        payment_id = self.world.next_id("PAY")
        self.world.payments[payment_id] = {"invoice_id": inv.id, "amount": amount,
                                           "refunded": False}
        return {"payment_id": payment_id, "invoice_id": inv.id, "amount_paid": amount,
                "invoice_status": inv.status}


class RefundPolicy(ToolPolicy):
    """Guardrails of refunds."""

    max_refund: float = Field(default=10_000.0, gt=0)
    """Refunds above this are ``refund_over_limit``."""


class RefundInvoice(_DemoTool):
    """Refund one payment. Refunding it again changes nothing."""

    tool_name = "refund_invoice"
    policy_model = RefundPolicy
    scopes_required = ("invoices:write",)
    risk_default = Risk.LOW
    side_effect = SideEffect.IDEMPOTENT
    execution = ExecutionMeta(timeout_s=5)
    actions: ClassVar[dict[str, ActionSpec]] = {"run": ActionSpec(
        description="Refund a payment of an invoice.",
        input_schema=_schema({"payment_id": _ID, "invoice_id": _ID,
                              "amount": {"type": "number", "exclusiveMinimum": 0}},
                             ["payment_id", "invoice_id", "amount"]))}

    def execute(self, action: str, request: dict[str, Any], context: ToolContext) -> Any:
        """Refund the payment once; repeating it changes nothing."""
        policy = context.policy
        assert isinstance(policy, RefundPolicy)
        if float(request["amount"]) > policy.max_refund:
            context.deny("refund_over_limit", f"{request['amount']} exceeds "
                         f"{policy.max_refund}")
        payment = self.world.payments.get(request["payment_id"])
        if payment is None or payment["invoice_id"] != request["invoice_id"]:
            context.fail("payment_not_found", f"no payment {request['payment_id']!r} "
                         f"for {request['invoice_id']!r}")
        if float(request["amount"]) != payment["amount"]:
            context.fail("amount_mismatch", "a refund returns the whole payment")
        if not payment["refunded"]:
            payment["refunded"] = True
            self.invoice(payment["invoice_id"], context).paid -= payment["amount"]
        return {"payment_id": request["payment_id"], "refunded": payment["amount"]}


class RepositoryPolicy(ToolPolicy):
    """Repositories no agent may delete, whoever approves."""

    protected: tuple[str, ...] = ("billing-service",)
    """Deleting one of these is ``repository_protected``."""


class DeleteRepository(_DemoTool):
    """Delete a source repository and its history, for good."""

    tool_name = "delete_repository"
    policy_model = RepositoryPolicy
    scopes_required = ("repos:admin",)
    risk_default = Risk.CRITICAL
    side_effect = SideEffect.IRREVERSIBLE
    execution = ExecutionMeta(timeout_s=5)
    actions: ClassVar[dict[str, ActionSpec]] = {"run": ActionSpec(
        description="Delete a repository.",
        input_schema=_schema({"name": _ID}, ["name"]))}

    def execute(self, action: str, request: dict[str, Any], context: ToolContext) -> Any:
        """Delete the repository unless the policy protects it."""
        name = request["name"]
        policy = context.policy
        assert isinstance(policy, RepositoryPolicy)
        if name in policy.protected:
            context.deny("repository_protected", f"{name!r} is protected by policy")
        if name not in self.world.repositories:
            context.fail("repository_not_found", f"no repository {name!r}")
        self.world.repositories.discard(name)
        return {"deleted": name}


DEMO_TOOLS: tuple[type[_DemoTool], ...] = (
    LookupInvoice, SendEmail, PayInvoice, RefundInvoice, DeleteRepository)
"""Every demo tool, in the order the demo introduces them."""


def natives(world: DemoWorld) -> dict[str, BaseTool]:
    """Entry point → tool instance, all acting on ``world`` (for ``Gateway(natives=…)``)."""
    return {f"{cls.__module__}:{cls.__qualname__}": cls(world) for cls in DEMO_TOOLS}

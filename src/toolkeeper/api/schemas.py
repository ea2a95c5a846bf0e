"""Request and response bodies of the REST face (unknown fields are refused)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from toolkeeper.model.call import CallRequest, CallResult
from toolkeeper.model.turns import SupersedeAction


class Body(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ExecuteBody(Body):
    """``POST /tools/execute``: one call (SPEC §7)."""

    tool: str = Field(max_length=200)
    action: str | None = Field(default=None, max_length=200)
    arguments: Any = Field(default_factory=dict)
    idempotency_key: str | None = Field(default=None, max_length=255)
    turn_group_id: str | None = Field(default=None, max_length=200)
    task_id: str | None = Field(default=None, max_length=200)
    step_id: str | None = Field(default=None, max_length=200)
    trace_id: str | None = Field(default=None, max_length=200)
    approval_id: str | None = Field(default=None, max_length=200)
    preview_token: str | None = Field(default=None, max_length=200)
    scopes: list[str] | None = Field(default=None, max_length=200)
    agent: str | None = Field(default=None, max_length=200)
    """For admin/operator tokens: the agent this call is made for."""

    def request(self, idempotency_header: str | None) -> CallRequest:
        return CallRequest(
            tool=self.tool, action=self.action, arguments=self.arguments,
            idempotency_key=self.idempotency_key or idempotency_header,
            turn_group_id=self.turn_group_id, task_id=self.task_id, step_id=self.step_id,
            trace_id=self.trace_id, approval_id=self.approval_id,
            preview_token=self.preview_token, scopes=self.scopes)


class CheckOut(BaseModel):
    """``POST /tools/check``: whether the gate lets the call run now, else its result."""

    allowed: bool
    result: CallResult | None = None


class BatchCallBody(ExecuteBody):
    """One call of ``POST /tools/execute-batch``."""

    critical: bool | None = None
    """In a sequential batch, a failure of this call stops the batch and rolls back the
    completed compensatable calls (SPEC §5); unset: when its risk is critical."""

    def request(self, idempotency_header: str | None) -> CallRequest:
        return replace(super().request(idempotency_header), critical=self.critical)


class BatchBody(Body):
    calls: list[BatchCallBody] = Field(min_length=1, max_length=100)
    mode: Literal["sequential", "parallel_safe"] = "sequential"
    agent: str | None = Field(default=None, max_length=200)


class ResolveBody(Body):
    status: Literal["succeeded", "failed"]
    output: Any = None
    note: str | None = Field(default=None, max_length=2000)


class ApproveBody(Body):
    arguments: dict[str, Any] | None = None
    """Edited arguments: the approval then binds these, and the call must carry them."""
    note: str | None = Field(default=None, max_length=2000)


class DenyBody(Body):
    note: str | None = Field(default=None, max_length=2000)


class TurnDecisionBody(Body):
    """``POST /turns/{turn_group_id}/decisions``: what the runtime decided before an
    irreversible call while new user messages were pending (seed 004 §10)."""

    decision: SupersedeAction
    tool: str | None = Field(default=None, max_length=200)
    """The planned irreversible call the decision was asked about."""
    action: str | None = Field(default=None, max_length=200)
    continued_as: str | None = Field(default=None, max_length=200)
    """``queue`` only: the new turn group the calls go on in."""
    pending: int | None = Field(default=None, ge=0, le=1_000_000)
    """How many user messages were pending."""
    note: str | None = Field(default=None, max_length=2000)


class ErrorInfo(BaseModel):
    """What was refused and why."""

    reason: str = Field(description="A stable reason code (e.g. unauthenticated, not_found, "
                        "invalid_arguments): match on this, never on the message.")
    message: str = Field(description="A human-readable explanation; its wording may change.")
    details: dict[str, Any] = Field(
        default_factory=dict, description="Reason-specific data, e.g. errors: "
        "[{pointer, message, type}] for invalid_arguments.")


class ErrorOut(BaseModel):
    """Every error of the REST face: {"error": {"reason", "message", "details"}}, with the
    HTTP status the reason maps to."""

    error: ErrorInfo

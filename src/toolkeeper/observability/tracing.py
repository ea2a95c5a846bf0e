"""OpenTelemetry: one span ``execute_tool {tool}`` per call, GenAI semantic conventions.

Spans are made only when the gateway is given a tracer (``Gateway(tracer=…)``, or
``tracer_from_global()`` when an SDK tracer provider is installed), so the hot path pays
nothing when tracing is off.
"""

from __future__ import annotations

from typing import Any

from opentelemetry import trace
from opentelemetry.trace import Status, StatusCode

from toolkeeper.model.call import CallResult
from toolkeeper.model.enums import CallStatus


def tracer_from_global() -> trace.Tracer | None:
    """The global tracer, unless no SDK provider is installed (then ``None``)."""
    provider = trace.get_tracer_provider()
    if isinstance(provider, trace.ProxyTracerProvider | trace.NoOpTracerProvider):
        return None
    return provider.get_tracer("toolkeeper")


def record_span(tracer: trace.Tracer, res: CallResult, tenant_id: str | None,
                agent: str | None, start_ns: int, end_ns: int) -> None:
    """Emit the finished call as one span (start and end times from the call itself)."""
    attrs: dict[str, Any] = {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": res.tool,
        "gen_ai.tool.call.id": res.call_id,
        "gen_ai.tool.type": "function",
        "toolkeeper.status": res.status.value,
        "toolkeeper.deduped": res.deduped,
    }
    optional = {"toolkeeper.action": res.action, "toolkeeper.reason": res.reason,
                "toolkeeper.risk": res.risk, "toolkeeper.gate": res.gate,
                "toolkeeper.tool_version": res.tool_version, "toolkeeper.tenant": tenant_id,
                "gen_ai.agent.name": agent}
    attrs.update({k: str(v) for k, v in optional.items() if v is not None})
    span = tracer.start_span(f"execute_tool {res.tool}", kind=trace.SpanKind.INTERNAL,
                             attributes=attrs, start_time=start_ns)
    if res.status in (CallStatus.FAILED, CallStatus.UNKNOWN):
        span.set_status(Status(StatusCode.ERROR, str(res.reason)))
        span.set_attribute("error.type", str(res.reason))
    span.end(end_time=end_ns)

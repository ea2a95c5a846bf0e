"""The two ways ``agent_call`` reaches an agent: plain HTTP JSON and the A2A protocol.

Both go through one ``NetGuard`` (every connection and redirect hop checked) and carry the
call chain: the header ``Toolkeeper-Agent-Chain: a,b`` (the agents the call passed
through, caller last) on every request, plus ``chain``/``depth`` in the HTTP JSON body or
``toolkeeper_chain``/``toolkeeper_depth`` in the A2A message metadata.

What the callee answers decides the result: a reply it sent (``status``, ``output``,
``error``…, an A2A task in any state) is a result, also when its status says it failed;
no usable reply (cannot connect, HTTP 4xx/5xx, an A2A protocol error, a timeout, a reply
above the size cap) is a ``ToolError`` with a stable reason.
"""

from __future__ import annotations

import json
import re
import uuid
from dataclasses import dataclass
from typing import Any

import httpx

from toolkeeper.errors import ToolError
from toolkeeper.model.reasons import Reason
from toolkeeper.netguard import NetGuard, request_error
from toolkeeper.providers.http import decode_body, http_timeout, read_capped, status_error

CHAIN_HEADER = "Toolkeeper-Agent-Chain"
"""The header carrying an agent_call chain, out to a callee and in on ``POST
/tools/execute`` (comma-separated agent names, oldest first)."""
MAX_CHAIN = 64
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}$")
_A2A_STATES = {
    "TASK_STATE_COMPLETED": "completed", "TASK_STATE_FAILED": "failed",
    "TASK_STATE_CANCELED": "canceled", "TASK_STATE_REJECTED": "rejected",
    "TASK_STATE_INPUT_REQUIRED": "input_required", "TASK_STATE_AUTH_REQUIRED":
    "auth_required", "TASK_STATE_WORKING": "working", "TASK_STATE_SUBMITTED": "submitted",
}
_FAILED = frozenset({"failed", "canceled", "rejected"})
_SHOWN = 300


def parse_chain(text: str | None) -> tuple[str, ...]:
    """The agents of a ``Toolkeeper-Agent-Chain`` header; ``ValueError`` when an entry is
    not an agent name or there are more than ``MAX_CHAIN``."""
    if text is None or not text.strip():
        return ()
    names = tuple(part.strip() for part in text.split(","))
    if len(names) > MAX_CHAIN:
        raise ValueError(f"{CHAIN_HEADER} lists more than {MAX_CHAIN} agents")
    bad = next((n for n in names if not _NAME.match(n)), None)
    if bad is not None:
        raise ValueError(f"{CHAIN_HEADER}: {bad[:_SHOWN]!r} is not an agent name")
    return names


@dataclass(frozen=True, slots=True, kw_only=True)
class Outbound:
    """One request to a callee agent."""

    url: str
    headers: dict[str, str]
    """Resolved (secrets filled in); never shown."""
    input: Any
    messages: list[Any] | None
    context: Any
    chain: tuple[str, ...]
    """The agents this call passed through, the caller last."""
    timeout_s: float
    max_bytes: int


@dataclass(frozen=True, slots=True, kw_only=True)
class Reply:
    run_id: str | None
    status: str
    output: Any = None
    context: Any = None
    error: Any = None


def _headers(out: Outbound) -> dict[str, str]:
    return {**out.headers, CHAIN_HEADER: ",".join(out.chain)}


def _too_large(out: Outbound) -> ToolError:
    return ToolError(Reason.OUTPUT_TOO_LARGE, f"the agent's reply exceeds {out.max_bytes} "
                     "bytes", may_have_executed=True)


async def send_http(guard: NetGuard, out: Outbound) -> Reply:
    """POST ``{input, messages, context, chain, depth}``; the JSON object answered is the
    reply (``status`` defaults to ``completed``)."""
    body = {"input": out.input, "messages": out.messages, "context": out.context,
            "chain": list(out.chain), "depth": len(out.chain)}
    request = httpx.Request("POST", out.url, json=body, headers=_headers(out),
                            extensions={"timeout": http_timeout(out.timeout_s).as_dict()})
    async with guard.client(timeout=http_timeout(out.timeout_s)) as client:
        response = await guard.send(client, request, sensitive_headers=out.headers)
        try:
            data, truncated = await read_capped(response, out.max_bytes)
        finally:
            await response.aclose()
    if truncated:
        raise _too_large(out)
    answer = decode_body(response, data)
    if response.status_code >= 400:
        raise status_error(response, answer)
    if not isinstance(answer, dict):
        return Reply(run_id=None, status="completed", output=answer)
    status = answer.get("status")
    run_id = answer.get("run_id")
    return Reply(run_id=None if run_id is None else str(run_id)[:_SHOWN],
                 status=str(status)[:64] if status else "completed",
                 output=answer.get("output"), context=answer.get("context"),
                 error=answer.get("error"))


async def send_a2a(guard: NetGuard, out: Outbound) -> Reply:
    """One A2A ``message/send`` (JSON-RPC, not streamed) through the ``a2a-sdk`` client."""
    try:
        from a2a.client import (
            A2AClientError,
            A2AClientTimeoutError,
            ClientConfig,
            ClientFactory,
            minimal_agent_card,
        )
        from a2a.types.a2a_pb2 import SendMessageRequest
    except ImportError:
        raise ToolError(Reason.PROVIDER_UNAVAILABLE, "the A2A transport needs the a2a-sdk "
                        "package: pip install 'toolkeeper[a2a]'") from None

    client = guard.client(timeout=http_timeout(out.timeout_s))
    client.headers.update(_headers(out))
    agent = ClientFactory(ClientConfig(httpx_client=client, streaming=False)).create(
        minimal_agent_card(out.url, ["JSONRPC"]))
    try:
        async with client:
            events = [event async for event in agent.send_message(
                SendMessageRequest(message=_a2a_message(out)))]
    except A2AClientTimeoutError:
        raise ToolError(Reason.TIMEOUT, f"the agent did not answer within {out.timeout_s}s",
                        retryable=True, may_have_executed=True) from None
    except A2AClientError as exc:
        if isinstance(exc.__cause__, httpx.RequestError):  # cannot connect: did not run
            raise request_error(exc.__cause__, sent=False) from None
        raise ToolError(Reason.UPSTREAM_ERROR, f"A2A call failed: {str(exc)[:_SHOWN]}",
                        may_have_executed=True) from None
    if not events:
        raise ToolError(Reason.UPSTREAM_ERROR, "the A2A agent sent no reply",
                        may_have_executed=True)
    reply = _a2a_reply(events[-1])
    size = len(json.dumps([reply.output, reply.context, reply.error], default=str))
    if size > out.max_bytes:
        raise _too_large(out)
    return reply


def _a2a_message(out: Outbound) -> Any:
    from a2a.helpers.proto_helpers import new_data_part, new_text_part
    from a2a.types.a2a_pb2 import Message, Role

    parts = []
    if out.input is not None:
        parts.append(new_text_part(out.input) if isinstance(out.input, str)
                     else new_data_part({"input": out.input}))
    if out.messages is not None:
        parts.append(new_data_part({"messages": out.messages}))
    message = Message(role=Role.ROLE_USER, message_id=str(uuid.uuid4()), parts=parts)
    meta: dict[str, Any] = {"toolkeeper_chain": list(out.chain),
                            "toolkeeper_depth": len(out.chain)}
    if out.context is not None:
        meta["context"] = out.context
    message.metadata.update(meta)
    return message


def _parts(parts: Any) -> Any:
    """The text of the parts (joined), or their one data value, or a list of both kinds."""
    from a2a.helpers.proto_helpers import get_data_parts, get_text_parts

    texts, data = get_text_parts(parts), get_data_parts(parts)
    if texts and not data:
        return "\n".join(texts)
    if data and not texts:
        return data[0] if len(data) == 1 else data
    return [*texts, *data] or None


def _a2a_reply(event: Any) -> Reply:
    from google.protobuf.json_format import MessageToDict  # type: ignore[import-untyped]

    if event.HasField("message"):
        msg = event.message
        meta = MessageToDict(msg.metadata) if msg.HasField("metadata") else {}
        return Reply(run_id=msg.task_id or msg.message_id, status="completed",
                     output=_parts(msg.parts), context=meta.get("context"))
    from a2a.types.a2a_pb2 import TaskState

    task = event.task
    state = _A2A_STATES.get(TaskState.Name(task.status.state), "unknown")
    outputs = [_parts(a.parts) for a in task.artifacts]
    said = _parts(task.status.message.parts) if task.status.HasField("message") else None
    output = (outputs[0] if len(outputs) == 1 else outputs) if outputs else None
    if state in _FAILED:
        return Reply(run_id=task.id, status=state, output=output,
                     error=said or f"the agent's task ended {state}")
    meta = MessageToDict(task.metadata) if task.HasField("metadata") else {}
    return Reply(run_id=task.id, status=state, output=output if outputs else said,
                 context=meta.get("context"))

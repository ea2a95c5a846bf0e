"""In-band questions of ``tools/call``: a ``confirm`` gate's confirmation, and an upstream
tool's own questions relayed to the agent — in the agent's protocol era.

- 2026-07-28 (stateless): the answer is an ``InputRequiredResult``; its ``requestState`` is
  toolkeeper's sealed, bound, single-use envelope (:mod:`toolkeeper.mcp.request_state`),
  wrapping the approval id (confirmation) or the upstream's own state. The agent's retry is
  verified and taken (used once) before anything runs; it is a new governed call.
- 2025-11-25 on a session that can answer: the question is sent in the middle of the call
  (``elicitation/create``, ``sampling/createMessage``, ``roots/list``; bounded wait) and the
  call goes on with the answer.

An upstream question travels through the downstream context's ``ask``: the ``mcp`` provider
asks, and either gets the agent's answers (2025 in-band) or stops the call with
``input_required`` (the pipeline records a failed round that does not hold its idempotency
key); this module then relays the captured questions to the agent.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from dataclasses import replace
from typing import TYPE_CHECKING, Any, cast

import anyio
import mcp_types as types
import orjson
from mcp.server.context import ServerRequestContext
from mcp.shared.exceptions import MCPError
from mcp.shared.message import ServerMessageMetadata
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import TypeAdapter, ValidationError

from toolkeeper.mcp import results
from toolkeeper.mcp.protocol import refuse_missing
from toolkeeper.mcp.request_state import Opened, RequestStates, StateRefused, call_digest
from toolkeeper.model.call import CallRequest, CallResult, Principal
from toolkeeper.model.enums import CallStatus
from toolkeeper.model.reasons import Reason
from toolkeeper.upstream import asking
from toolkeeper.upstream.downstream import DOWNSTREAM, Downstream

if TYPE_CHECKING:
    from toolkeeper.gateway import Gateway

log = logging.getLogger("toolkeeper.mcp")
Ctx = ServerRequestContext[Any, Any]
CONFIRM_SCHEMA = {"type": "object", "required": ["confirm"], "properties": {
    "confirm": {"type": "boolean", "title": "Run this exact call?"}}}
MAX_RESPONSES_CHARS = 256 * 1024
"""The agent's ``inputResponses`` relayed upstream, at most (JSON bytes)."""
Park = Callable[[CallResult], Awaitable[Any]]
Escalate = Callable[[dict[str, Any]], Awaitable[Any]]
_REQUEST = TypeAdapter[Any](types.InputRequest)
_RESULT_TYPE: dict[str, Any] = {"elicitation/create": types.ElicitResult,
                                "sampling/createMessage": types.CreateMessageResult,
                                "roots/list": types.ListRootsResult}


def capabilities(ctx: Ctx) -> set[str]:
    """Which of ``elicitation``, ``sampling``, ``roots`` the agent declared."""
    try:
        have = ctx.session.client_capabilities
    except Exception:  # no client capabilities known
        return set()
    if have is None:
        return set()
    return {name for name in asking.CAPABILITY.values() if getattr(have, name) is not None}


def can_answer(conn: Any) -> bool:
    """Whether a 2025-11-25 session's client can answer an upstream's sampling or roots
    request (such a session is the SDK's, not the lean path's)."""
    have = conn.client_capabilities
    return have is not None and (have.sampling is not None or have.roots is not None)


class Rounds:
    """The ``tools/call`` of one MCP face, questions included."""

    def __init__(self, gw: Gateway, *, timeout_s: float) -> None:
        self.gw = gw
        self.timeout_s = timeout_s
        """How long a question in the middle of a call (2025-11-25) waits for its answer."""
        self.states = RequestStates(gw)

    async def call(self, ctx: Ctx, who: Principal, name: str, request: CallRequest,
                   params: types.CallToolRequestParams, *, park: Park | None = None,
                   escalate: Escalate | None = None
                   ) -> types.CallToolResult | types.InputRequiredResult:
        """``park``: what a first round that stopped for a human becomes instead (a task,
        ``toolkeeper.mcp.tasks``), if anything; ``escalate``: what a retry answering an
        upstream's questions becomes instead (a task, ``toolkeeper.mcp.task_asks``)."""
        modern = ctx.protocol_version in MODERN_PROTOCOL_VERSIONS
        call = call_digest(request.tool, request.action or "", request.arguments)
        opened, resume = await self._resume(ctx, who, call, params, modern)
        if opened is not None and opened.kind == "confirm":
            answer = (params.input_responses or {}).get("confirm")
            done = await self._after_confirm(ctx, who, request, opened.carried, answer)
            return await self._reply(ctx, who, name, request, call, *done)
        if resume is not None and escalate is not None \
                and (task := await escalate(resume)) is not None:
            return cast(types.CallToolResult, task)
        result, asked = await self.run(ctx, who, request, resume, modern=modern)
        if park is not None and (task := await park(result)) is not None:
            return cast(types.CallToolResult, task)
        return await self._reply(ctx, who, name, request, call, result, asked)

    async def prompt(self, ctx: Ctx, who: Principal, params: types.GetPromptRequestParams,
                     get: Callable[[Principal, Any], Awaitable[Any]]) -> Any:
        """``prompts/get`` of an upstream prompt (``get``), its questions relayed as for a
        tool: a prompt asks in a round of its own too (SEP-2322)."""
        modern = ctx.protocol_version in MODERN_PROTOCOL_VERSIONS
        call = call_digest(params.name, "get", dict(params.arguments or {}))
        opened, resume = await self._resume(ctx, who, call, params, modern)
        if opened is not None and opened.kind != "upstream":
            raise StateRefused("call", "issued for a tool call, not this prompt").wire()
        with self._asking(ctx, resume, modern) as asked:
            try:
                return await get(who, params)
            except MCPError as exc:
                if not asked or (exc.error.data or {}).get("reason") != Reason.INPUT_REQUIRED:
                    raise
        return self.relay(capabilities(ctx), who, call, asked)

    async def _resume(self, ctx: Ctx, who: Principal, call: str, params: Any, modern: bool
                      ) -> tuple[Opened | None, dict[str, Any] | None]:
        """A 2026-07-28 retry: its state taken (verified, used once) and what goes back
        upstream (an upstream's state unwrapped, with the agent's answers)."""
        if not modern:
            return None, None
        if params.request_state is None:  # answers to a stateless upstream question
            given = params.input_responses
            return None, None if given is None else {"inputResponses": responses(given)}
        try:
            opened = await self.states.take(params.request_state, who, call)
        except StateRefused as exc:
            log.info("requestState refused (%s): %s", exc.detail, exc)
            raise exc.wire() from None
        return opened, {"inputResponses": responses(params.input_responses),
                        **({"requestState": opened.carried} if opened.carried else {})}

    @contextmanager
    def _asking(self, ctx: Ctx | None, resume: dict[str, Any] | None,
                modern: bool) -> Iterator[dict[str, Any]]:
        """An upstream's questions in this block go to this agent (``ctx``; ``None``: the
        lean path's agent, who declared no capability); those a 2026-07-28 agent answers
        in a retry are gathered in the dict yielded."""
        asked: dict[str, Any] = {}

        async def ask(requests: dict[str, Any], state: str | None,
                      now: bool) -> dict[str, Any] | None:
            if not modern:
                return await self._ask_in_band(ctx, requests) if ctx is not None else None
            if not now:
                asked.update(requests=requests, state=state)
            return None  # the agent answers in its retry (or cannot be asked now)

        base = DOWNSTREAM.get()
        caps = (base.client_capabilities if base is not None else None) or (
            {c: {} for c in sorted(capabilities(ctx))} if ctx is not None else {})
        # the lean path has no downstream yet: one built outright, not a replaced default
        token = DOWNSTREAM.set(
            Downstream(client_capabilities=caps, ask=ask, resume=resume) if base is None
            else replace(base, ask=ask, resume=resume, client_capabilities=caps))
        try:
            yield asked
        finally:
            DOWNSTREAM.reset(token)

    async def run(self, ctx: Ctx | None, who: Principal, request: CallRequest,
                  resume: dict[str, Any] | None = None, *, modern: bool
                  ) -> tuple[CallResult, dict[str, Any] | None]:
        """The governed call, with an upstream's questions going to this agent; the
        questions it stopped on (``input_required``) for a 2026-07-28 agent to answer in a
        retry."""
        with self._asking(ctx, resume, modern) as asked:
            ds = DOWNSTREAM.get()
            result = await self.gw.call_served(request, who)
        if ds is not None:  # the upstream's -32021 is the agent's (toolkeeper.mcp.protocol)
            refuse_missing(ds)
        return result, (asked if result.reason == Reason.INPUT_REQUIRED and asked else None)

    async def _reply(self, ctx: Ctx, who: Principal, name: str, request: CallRequest,
                     call: str, result: CallResult, asked: dict[str, Any] | None
                     ) -> types.CallToolResult | types.InputRequiredResult:
        modern = ctx.protocol_version in MODERN_PROTOCOL_VERSIONS
        if asked is not None:
            return self.relay(capabilities(ctx), who, call, asked)
        if result.status is CallStatus.CONFIRMATION_REQUIRED and result.approval_id:
            can = "elicitation" in capabilities(ctx)
            if modern and can:
                question = self.question(name, result, request.arguments)
                state = self.states.seal(who, call, "confirm", result.approval_id,
                                         expires_at=await self._expiry(who, result))
                return types.InputRequiredResult(
                    input_requests={"confirm": types.ElicitRequest(
                        params=types.ElicitRequestFormParams(
                            message=question, requested_schema=CONFIRM_SCHEMA))},
                    request_state=state)
            if not modern and can and ctx.session.can_send_request:
                question = self.question(name, result, request.arguments)
                answer = await self._elicit(ctx, question)
                result, _ = await self._after_confirm(ctx, who, request, result.approval_id,
                                                      answer)
        return results.wire(result)

    def relay(self, caps: set[str], who: Principal, call: str, asked: dict[str, Any]
              ) -> types.InputRequiredResult:
        """The upstream's questions to a 2026-07-28 agent that declared ``caps``, under a
        state of ours; ``-32021`` if it cannot answer them all."""
        requests: dict[str, Any] = asked["requests"]
        missing = asking.needed(requests) - caps
        if missing:
            raise MCPError(code=types.MISSING_REQUIRED_CLIENT_CAPABILITY,
                           message="the tool asks for input this client did not declare it "
                                   f"can give: {', '.join(sorted(missing))}",
                           data={"requiredCapabilities": {m: {} for m in sorted(missing)}})
        state = self.states.seal(who, call, "upstream", asked["state"] or "")
        return types.InputRequiredResult.model_validate(
            {"resultType": "input_required", "inputRequests": requests,
             "requestState": state})

    async def _expiry(self, who: Principal, result: CallResult) -> float | None:
        """When the confirmation's approval expires (epoch seconds)."""
        assert result.approval_id is not None
        try:
            rec = await anyio.to_thread.run_sync(self.gw.approvals.get, result.approval_id,
                                                 who.tenant_id)
        except Exception:  # gone already: the state lives no longer than the default
            return None
        return float(rec.expires_at.timestamp())

    def question(self, name: str, result: CallResult, arguments: Any) -> str:
        """What the user is asked: the exact call under the name the client lists
        (arguments redacted, cut at 1,000 chars)."""
        shown = orjson.dumps(self.gw.runtime.redactor.redact(arguments)).decode()
        if len(shown) > 1000:
            shown = shown[:1000] + "…"
        return f"Run {name} {shown}? (approval {result.approval_id})"

    async def _elicit(self, ctx: Ctx, question: str) -> types.ElicitResult | None:
        """2025-11-25: ask the user in the middle of ``tools/call`` (bounded wait)."""
        try:
            with anyio.fail_after(self.timeout_s):
                return await ctx.session.elicit_form(question, CONFIRM_SCHEMA,
                                                     related_request_id=ctx.request_id)
        except (TimeoutError, MCPError) as exc:
            log.info("in-band confirmation got no answer: %s", exc)
            return None

    async def _after_confirm(self, ctx: Ctx, who: Principal, request: CallRequest,
                             approval_id: str, answer: Any
                             ) -> tuple[CallResult, dict[str, Any] | None]:
        """Resolve the confirmation as the user answered, then run the call again with it:
        the pipeline checks the approval's binding to this exact call."""
        confirmed = (isinstance(answer, types.ElicitResult) and answer.action == "accept"
                     and (answer.content or {}).get("confirm") is True)
        declined = isinstance(answer, types.ElicitResult) and not confirmed

        def decide() -> None:
            if confirmed:
                self.gw.approvals.confirm(approval_id, who)
            elif declined:
                self.gw.approvals.deny(approval_id, who, note="declined in-band (MCP)")

        if confirmed or declined:
            try:
                await anyio.to_thread.run_sync(decide)
            except Exception as exc:  # e.g. expired, or another tenant's id: the call says
                log.info("in-band decision on %s refused: %s", approval_id, exc)
        return await self.run(ctx, who, replace(request, approval_id=approval_id),
                              modern=ctx.protocol_version in MODERN_PROTOCOL_VERSIONS)

    async def _ask_in_band(self, ctx: Ctx, requests: dict[str, Any]
                           ) -> dict[str, Any] | None:
        """2025-11-25: each upstream question sent to the agent now (bounded wait);
        ``None`` if it cannot be asked or gave no answer (the call stops)."""
        if not ctx.session.can_send_request or asking.needed(requests) - capabilities(ctx):
            return None
        answers: dict[str, Any] = {}
        try:
            with anyio.fail_after(self.timeout_s):
                for key, req in requests.items():
                    typed = _REQUEST.validate_python(req)
                    got = await ctx.session.send_request(
                        typed, _RESULT_TYPE[req["method"]],
                        metadata=ServerMessageMetadata(related_request_id=ctx.request_id))
                    answers[key] = got.model_dump(mode="json", by_alias=True,
                                                  exclude_none=True)
        except (TimeoutError, MCPError, ValidationError) as exc:
            log.info("an upstream's in-band question got no answer: %s", exc)
            return None
        return answers


def responses(given: Any) -> dict[str, Any]:
    """The agent's ``inputResponses`` as wire dicts, bounded."""
    out = {k: v.model_dump(mode="json", by_alias=True, exclude_none=True)
           if hasattr(v, "model_dump") else v for k, v in (given or {}).items()}
    if len(out) > asking.MAX_REQUESTS * 4 or len(orjson.dumps(out)) > MAX_RESPONSES_CHARS:
        raise MCPError(code=types.INVALID_PARAMS,
                       message=f"inputResponses exceed {MAX_RESPONSES_CHARS} bytes",
                       data={"reason": str(Reason.PAYLOAD_TOO_LARGE)})
    return out


__all__ = ["CONFIRM_SCHEMA", "Rounds", "capabilities", "responses"]

"""Built-in ``http_request`` tool: one HTTP request chosen by the agent, under a policy.

The agent picks method, URL, headers, query and body; ``HttpRequestPolicy`` decides what
may be sent where. Every connection and redirect hop passes the SSRF guard (``NetGuard``):
public addresses only unless ``allowed_networks`` lists a private range, and only the
``allowed_hosts`` when that list is non-empty.

Result: ``{status, headers: {content-type, content-length}, body, truncated}`` where
``body`` is parsed JSON for JSON responses, else text. 4xx responses are results (the agent
can read a 404); 429 and 5xx are ``upstream_error`` (retryable). A body above
``max_response_bytes`` is truncated (``truncated: true``) or, with
``on_oversize: fail``, refused as ``output_too_large``.

Side effect ``irreversible`` and risk ``medium`` because the default definition cannot know
which methods a profile allows; a deployment whose policy admits only GET/HEAD may register
the tool with ``side_effect: pure`` (``HttpRequestTool.definition(side_effect=…)``).
"""

from __future__ import annotations

import asyncio
import re
from collections import OrderedDict
from typing import Annotated, Any, ClassVar, Literal

import httpx
from pydantic import Field, field_validator

from toolkeeper.bounds import AtMost, Subset
from toolkeeper.builtins._net_policy import NetworkPolicy
from toolkeeper.errors import ToolError, UpstreamError
from toolkeeper.model.call import PreviewResult
from toolkeeper.model.enums import Risk, SideEffect
from toolkeeper.model.reasons import Reason
from toolkeeper.model.tool import ActionSpec, ExecutionMeta
from toolkeeper.netguard import NetGuard, Resolver
from toolkeeper.providers.base import ToolContext
from toolkeeper.providers.http import decode_body, http_timeout, read_capped, status_error
from toolkeeper.providers.native import BaseTool

METHODS = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS")
# Set by the transport, or able to smuggle a second request / reroute the first.
FORBIDDEN_HEADERS = frozenset({
    "host", "content-length", "transfer-encoding", "connection", "keep-alive", "upgrade",
    "te", "trailer", "expect", "proxy-authorization", "proxy-connection",
})
_TOKEN = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")
_BAD_VALUE = re.compile(r"[\r\n\x00]")
_SCALAR: dict[str, Any] = {"type": ["string", "number", "integer", "boolean"]}
INPUT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "method": {"type": "string", "enum": list(METHODS), "default": "GET"},
        "url": {"type": "string", "minLength": 1, "maxLength": 8192,
                "description": "Absolute http(s) URL."},
        "headers": {"type": "object", "additionalProperties": {"type": "string"}},
        "query": {"type": "object", "additionalProperties": {
            "anyOf": [_SCALAR, {"type": "array", "items": _SCALAR}]}},
        "body": {"description": "JSON value (sent as JSON) or string (sent as text)."},
    },
    "required": ["url"],
    "additionalProperties": False,
}
OUTPUT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "status": {"type": "integer"},
        "headers": {"type": "object", "additionalProperties": {"type": "string"}},
        "body": {},
        "truncated": {"type": "boolean"},
    },
    "required": ["status", "headers", "body", "truncated"],
}
_KEPT_HEADERS = ("content-type", "content-length")


def same_method(item: object, theirs: object) -> bool:
    """Methods compare as the policy stores them, upper case."""
    return isinstance(item, str) and isinstance(theirs, str) and item.upper() == theirs.upper()


class HttpRequestPolicy(NetworkPolicy):
    """What ``http_request`` may send where; the defaults are read-only, public hosts."""

    allowed_methods: Annotated[tuple[str, ...], Subset(covered=same_method)] = (
        "GET", "HEAD")
    """Other methods are refused with ``method_not_allowed``."""
    max_response_bytes: Annotated[int, AtMost()] = Field(default=1 << 20, ge=1, le=64 << 20)
    timeout_s: Annotated[float, AtMost()] = Field(default=10.0, gt=0, le=300)
    """Deadline of the whole exchange, redirects and body included."""
    max_redirects: Annotated[int, AtMost()] = Field(default=5, ge=0, le=20)
    on_oversize: Literal["truncate", "fail"] = "truncate"
    """Over ``max_response_bytes``: cut and mark ``truncated``, or fail ``output_too_large``."""

    @field_validator("allowed_methods")
    @classmethod
    def _upper(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        return tuple(m.upper() for m in value)


class HttpRequestTool(BaseTool):
    """Send one HTTP request to an allow-listed public (or explicitly allowed) address."""

    tool_name = "http_request"
    description = "Send an HTTP request (method, URL, headers, query, body) and get the response."
    capabilities = ("network",)
    actions: ClassVar[dict[str, ActionSpec]] = {
        "run": ActionSpec(description=description, input_schema=INPUT_SCHEMA,
                          output_schema=OUTPUT_SCHEMA, supports_preview=True),
    }
    risk_default = Risk.MEDIUM
    side_effect = SideEffect.IRREVERSIBLE
    execution = ExecutionMeta(timeout_s=60.0)
    policy_model = HttpRequestPolicy
    max_clients: ClassVar[int] = 32
    """Distinct policies kept warm; each has its own pool so connections never cross them."""

    def __init__(self, *, resolver: Resolver | None = None, verify: bool | str = True) -> None:
        self._resolver = resolver
        self._verify = verify
        self._clients: OrderedDict[tuple[Any, ...], tuple[NetGuard, httpx.AsyncClient]] = (
            OrderedDict()
        )

    async def execute(self, action: str, request: dict[str, Any], context: ToolContext) -> Any:
        """Check the request against the policy, send it through the guard, shape the reply."""
        policy = _policy(context)
        outgoing = _build(request, policy, context)
        guard, client = await self._client_for(policy)
        try:
            async with asyncio.timeout(policy.timeout_s):
                response = await guard.send(client, outgoing)
                try:
                    data, truncated = await read_capped(response, policy.max_response_bytes)
                finally:
                    await response.aclose()
        except TimeoutError:
            raise ToolError(Reason.TIMEOUT, f"no complete response within {policy.timeout_s}s",
                            retryable=True, may_have_executed=True) from None
        if truncated and policy.on_oversize == "fail":
            raise ToolError(Reason.OUTPUT_TOO_LARGE,
                            f"response exceeds {policy.max_response_bytes} bytes",
                            may_have_executed=True)
        body = decode_body(response, data)
        if response.status_code == 429 or response.status_code >= 500:
            error = status_error(response, body)
            assert isinstance(error, UpstreamError)
            raise error
        headers = {k: response.headers[k] for k in _KEPT_HEADERS if k in response.headers}
        return {"status": response.status_code, "headers": headers, "body": body,
                "truncated": truncated}

    async def preview(  # type: ignore[override]
        self, action: str, request: dict[str, Any], context: ToolContext
    ) -> PreviewResult:
        """The request as it would be sent, after the policy checks; nothing is sent."""
        outgoing = _build(request, _policy(context), context)
        body = request.get("body")
        return PreviewResult(
            summary=f"{outgoing.method} {outgoing.url}",
            data={"method": outgoing.method, "url": str(outgoing.url),
                  "headers": dict(request.get("headers") or {}), "body": body},
        )

    async def aclose(self) -> None:
        """Close every pooled client."""
        clients, self._clients = list(self._clients.values()), OrderedDict()
        for _, client in clients:
            await client.aclose()

    async def _client_for(self, policy: HttpRequestPolicy) -> tuple[NetGuard, httpx.AsyncClient]:
        key = (policy.allowed_hosts, policy.allowed_networks, policy.allowed_ports,
               policy.max_redirects)
        if key in self._clients:
            self._clients.move_to_end(key)
            return self._clients[key]
        guard = NetGuard(allowed_hosts=policy.allowed_hosts,
                         allowed_networks=policy.allowed_networks,
                         allowed_ports=policy.allowed_ports,
                         max_redirects=policy.max_redirects, resolver=self._resolver)
        entry = (guard, guard.client(verify=self._verify))
        self._clients[key] = entry
        if len(self._clients) > self.max_clients:
            # A call still using the evicted pool fails as upstream_error; with at most one
            # pool per distinct policy this needs more live policies than ``max_clients``.
            _, (_, old) = self._clients.popitem(last=False)
            await old.aclose()
        return entry


def _policy(ctx: ToolContext) -> HttpRequestPolicy:
    policy = ctx.policy
    if isinstance(policy, HttpRequestPolicy):
        return policy
    # Activations may hand over the base model; re-read its values under ours.
    return HttpRequestPolicy.model_validate(policy.model_dump(exclude_unset=True))


def _build(request: dict[str, Any], policy: HttpRequestPolicy, ctx: ToolContext) -> httpx.Request:
    """The outgoing request, or a denial: method, URL and host are checked before DNS."""
    method = str(request.get("method") or "GET").upper()
    if method not in policy.allowed_methods:
        ctx.deny(Reason.METHOD_NOT_ALLOWED, f"method {method} is not allowed",
                 allowed=list(policy.allowed_methods))
    headers = dict(request.get("headers") or {})
    bad = sorted(name for name in headers if name.lower() in FORBIDDEN_HEADERS)
    if bad:
        ctx.deny(Reason.INVALID_ARGUMENTS, f"headers not allowed: {', '.join(bad)}")
    malformed = sorted(repr(n) for n, v in headers.items()
                       if not _TOKEN.fullmatch(n) or _BAD_VALUE.search(str(v)))
    if malformed:  # refused here, not by the HTTP client mid-send (an ``unknown`` outcome)
        ctx.deny(Reason.INVALID_ARGUMENTS, "header names must be tokens and values hold no "
                 f"CR, LF or NUL: {', '.join(malformed)[:300]}")
    body = request.get("body")
    if body is not None and method in ("GET", "HEAD"):
        ctx.deny(Reason.INVALID_ARGUMENTS, f"a {method} request carries no body")
    guard = NetGuard(allowed_hosts=policy.allowed_hosts, allowed_networks=policy.allowed_networks,
                     allowed_ports=policy.allowed_ports)
    url = guard.check_url(str(request.get("url", "")))
    extensions = {"timeout": http_timeout(policy.timeout_s).as_dict()}
    query = request.get("query") or None  # httpx drops the URL's own query on an empty merge
    try:
        if isinstance(body, str):
            headers.setdefault("Content-Type", "text/plain; charset=utf-8")
            return httpx.Request(method, url, params=query, headers=headers,
                                 content=body.encode("utf-8"), extensions=extensions)
        return httpx.Request(method, url, params=query, headers=headers,
                             json=body, extensions=extensions)
    except (TypeError, ValueError) as exc:
        ctx.deny(Reason.INVALID_ARGUMENTS, f"cannot build the request: {exc}")

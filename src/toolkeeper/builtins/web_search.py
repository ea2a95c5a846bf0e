"""Built-in ``web_search``: a web search through a provider, Serper first (SPEC §11).

The agent sends ``{query, num?}``; the answer is ``{query, provider, num, results,
truncated}`` with each result ``{title, url, snippet, position}``. ``num`` defaults to the
policy's ``default_results`` and is capped at ``max_results``; results are dropped from the
end (``truncated: true``) until the answer fits ``max_output_chars``.

The provider key is found as seed 002 says (:mod:`toolkeeper.builtins._search_keys`:
``implementation.api_key`` → ``credentials_ref`` → the tenant's credential → the
environment); none anywhere is ``credential_missing``. The key travels only in the request
header and is redacted from everything the call returns, logs or audits.

The endpoint (``https://google.serper.dev/search`` unless a credential or the implementation
names another) passes the SSRF guard of ``http_request`` (:mod:`toolkeeper.netguard`) under
the policy's ``allowed_hosts``/``allowed_networks``; redirects are not followed.

Upstream verdicts: 401/403 → ``credential_rejected``; 429 and 5xx → ``upstream_error``
(retryable); other statuses and answers without results → ``upstream_error``; no answer
within ``timeout_s`` → ``timeout``. Side effect ``pure``, risk ``low``.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from typing import Annotated, Any, ClassVar, Protocol, TypedDict

import httpx
from pydantic import Field

from toolkeeper.bounds import AtMost, Subset, host_covered
from toolkeeper.builtins._net_policy import NetworkPolicy, provider_guard
from toolkeeper.builtins._search_keys import find_key
from toolkeeper.errors import ToolError, UpstreamError
from toolkeeper.model.enums import Risk, SideEffect
from toolkeeper.model.reasons import Reason
from toolkeeper.model.tool import ActionSpec, ExecutionMeta
from toolkeeper.netguard import NetGuard, Resolver
from toolkeeper.providers.base import ToolContext
from toolkeeper.providers.http import decode_body, http_timeout, read_capped, status_error
from toolkeeper.providers.native import BaseTool

INPUT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "query": {"type": "string", "minLength": 1, "maxLength": 2048,
                  "description": "What to search the web for."},
        "num": {"type": "integer", "minimum": 1, "maximum": 100,
                "description": "How many results (capped by the policy)."},
    },
    "required": ["query"],
    "additionalProperties": False,
}
_RESULT: dict[str, Any] = {
    "type": "object",
    "properties": {"title": {"type": "string"}, "url": {"type": "string"},
                   "snippet": {"type": "string"}, "position": {"type": "integer"}},
    "required": ["title", "url", "snippet", "position"],
}
OUTPUT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "query": {"type": "string"}, "provider": {"type": "string"},
        "num": {"type": "integer"}, "results": {"type": "array", "items": _RESULT},
        "truncated": {"type": "boolean"},
    },
    "required": ["query", "provider", "num", "results", "truncated"],
}


class SearchResult(TypedDict):
    """One result, whatever the provider."""

    title: str
    url: str
    snippet: str
    position: int


Send = Callable[[httpx.Request], Awaitable[Any]]
"""Sends a request through the guard and answers the parsed body of a 2xx response."""


class SearchProvider(Protocol):
    """A web search service: builds its request, reads its answer."""

    name: str
    default_endpoint: str

    async def search(self, query: str, num: int, *, key: str, endpoint: str,
                     send: Send) -> list[SearchResult]: ...


class SerperProvider:
    """Serper (serper.dev): ``POST {q, num}`` with ``X-API-KEY``; results in ``organic``."""

    name = "serper"
    default_endpoint = "https://google.serper.dev/search"

    async def search(self, query: str, num: int, *, key: str, endpoint: str,
                     send: Send) -> list[SearchResult]:
        request = httpx.Request("POST", endpoint, headers={"X-API-KEY": key},
                                json={"q": query, "num": num})
        body = await send(request)
        organic = body.get("organic") if isinstance(body, dict) else None
        if not isinstance(organic, list):
            raise UpstreamError("serper answered without an 'organic' result list",
                                retryable=False, may_have_executed=True)
        results: list[SearchResult] = []
        for index, item in enumerate(organic, start=1):
            if not isinstance(item, dict) or not isinstance(item.get("link"), str):
                continue
            position = item.get("position")
            results.append(SearchResult(
                title=str(item.get("title") or ""), url=item["link"],
                snippet=str(item.get("snippet") or ""),
                position=position if isinstance(position, int) else index))
        return results


PROVIDERS: dict[str, SearchProvider] = {"serper": SerperProvider()}
"""Provider name (``implementation.provider``, default ``serper``) → provider."""


class WebSearchPolicy(NetworkPolicy):
    """How many results, how long a query, where the search request may go."""

    default_results: Annotated[int, AtMost()] = Field(default=5, ge=1, le=100)
    """Results when the agent does not say ``num`` (capped by ``max_results`` too)."""
    max_results: Annotated[int, AtMost()] = Field(default=10, ge=1, le=100)
    """A larger ``num`` is capped to this."""
    max_query_chars: Annotated[int, AtMost()] = Field(default=400, ge=1, le=2048)
    """A longer query is refused (``invalid_arguments``)."""
    max_output_chars: Annotated[int, AtMost()] = Field(default=20_000, ge=100)
    """Results are dropped from the end until the answer fits (``truncated: true``)."""
    allowed_hosts: Annotated[tuple[str, ...], Subset(open="empty", covered=host_covered)] = (
        "google.serper.dev",)
    """Hosts the search request may go to (exact or ``*.suffix``); empty admits any public
    host. An endpoint from a credential or the implementation must be listed here."""
    timeout_s: Annotated[float, AtMost()] = Field(default=10.0, gt=0, le=120)
    """Deadline of one search request, body included."""
    max_response_bytes: Annotated[int, AtMost()] = Field(default=1 << 20, ge=1024, le=16 << 20)
    """A larger answer is refused (``output_too_large``)."""


class WebSearchTool(BaseTool):
    """Search the web through a provider (Serper) under a policy."""

    tool_name = "web_search"
    description = "Search the web; results have title, url, snippet and position."
    capabilities = ("network",)
    actions: ClassVar[dict[str, ActionSpec]] = {
        "run": ActionSpec(description=description, input_schema=INPUT_SCHEMA,
                          output_schema=OUTPUT_SCHEMA, side_effect=SideEffect.PURE),
    }
    risk_default = Risk.LOW
    side_effect = SideEffect.PURE
    execution = ExecutionMeta(timeout_s=60.0, is_pure=True)
    policy_model = WebSearchPolicy

    def __init__(self, *, resolver: Resolver | None = None, verify: bool | str = True) -> None:
        self._resolver = resolver
        self._verify = verify

    async def execute(self, action: str, request: dict[str, Any], context: ToolContext) -> Any:
        """Check the query, find the key, search, shape and cap the answer."""
        policy = self.checked_policy(action, context, WebSearchPolicy)
        query = str(request.get("query") or "").strip()
        if not query:
            context.deny(Reason.INVALID_ARGUMENTS, "query must not be empty")
        if len(query) > policy.max_query_chars:
            context.deny(Reason.INVALID_ARGUMENTS,
                         f"query longer than {policy.max_query_chars} characters",
                         max_query_chars=policy.max_query_chars)
        num = min(int(request.get("num") or policy.default_results), policy.max_results)
        provider = _provider(context)
        key = await find_key(context, provider.name, provider.default_endpoint)
        guard = provider_guard(policy, self._resolver)
        guard.check_url(key.endpoint)  # refused before any key leaves the gateway
        async with guard.client(verify=self._verify) as client:
            results = await provider.search(
                query, num, key=key.value, endpoint=key.endpoint,
                send=lambda req: _send(guard, client, req, policy))
        return _capped({"query": query, "provider": provider.name, "num": num,
                        "results": results[:num], "truncated": False},
                       policy.max_output_chars)


def _provider(ctx: ToolContext) -> SearchProvider:
    name = str(ctx.config.get("provider") or "serper")
    provider = PROVIDERS.get(name)
    if provider is None:
        ctx.fail(Reason.PROVIDER_UNAVAILABLE,
                 f"no search provider {name!r}; known: {', '.join(sorted(PROVIDERS))}")
    return provider


async def _send(guard: NetGuard, client: httpx.AsyncClient, request: httpx.Request,
                policy: WebSearchPolicy) -> Any:
    """One guarded exchange under the policy's deadline and size cap; the parsed body."""
    request.extensions["timeout"] = http_timeout(policy.timeout_s).as_dict()
    try:
        async with asyncio.timeout(policy.timeout_s):
            response = await guard.send(client, request, sensitive_headers=("x-api-key",))
            try:
                data, truncated = await read_capped(response, policy.max_response_bytes)
            finally:
                await response.aclose()
    except TimeoutError:
        raise ToolError(Reason.TIMEOUT, f"no answer from the search provider within "
                        f"{policy.timeout_s}s", retryable=True,
                        may_have_executed=True) from None
    if truncated:
        raise ToolError(Reason.OUTPUT_TOO_LARGE,
                        f"search answer exceeds {policy.max_response_bytes} bytes",
                        may_have_executed=True)
    body = decode_body(response, data)
    if response.status_code in (401, 403):
        raise ToolError(Reason.CREDENTIAL_REJECTED,
                        f"the search provider refused the key (HTTP {response.status_code})",
                        status=response.status_code)
    if response.status_code >= 300:
        raise status_error(response, body)
    return body


def _capped(answer: dict[str, Any], limit: int) -> dict[str, Any]:
    """``answer`` with results dropped from the end until its JSON fits ``limit`` chars."""
    results: list[SearchResult] = answer["results"]
    while results and len(json.dumps(answer, ensure_ascii=False)) > limit:
        results.pop()
        answer["truncated"] = True
    return answer

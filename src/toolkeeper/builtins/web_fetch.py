"""Built-in ``web_fetch`` tool: GET one URL and return its readable text.

HTML becomes ``{title, text, links}`` (main text by trafilatura; see ``_web_page``); plain
text and JSON pass through as text; any other content type is refused
(``unsupported_content_type``) before its body is read. The SSRF guard of ``http_request``
(``NetGuard``) checks the URL, every resolved address and every redirect hop: public
addresses only unless ``allowed_networks`` lists a private range, only ``allowed_hosts``
when that list is non-empty, never ``denied_hosts``.

Caps: ``max_bytes`` of (decompressed) body read — reading stops there; ``max_redirects``;
``timeout_s`` for the whole exchange; ``max_text_chars`` of text (an agent may ask for
fewer with ``max_chars``). The base policy's ``max_output_chars`` (the pipeline's cap on the
whole result) is kept too: text, then links, are cut so the result stays whole JSON within
it. A cut body, text or link list is marked ``truncated: true``. A 4xx page is a
result (the agent can read a 404); 429 and 5xx are ``upstream_error`` (retryable).

Side effect ``pure`` and risk ``low``: only GET is ever sent.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from typing import Annotated, Any, ClassVar

import httpx
from pydantic import Field

from toolkeeper.bounds import AtMost, Superset
from toolkeeper.builtins._net_policy import NetworkPolicy
from toolkeeper.errors import ToolError
from toolkeeper.model.enums import Risk, SideEffect
from toolkeeper.model.reasons import Reason
from toolkeeper.model.tool import ActionSpec, ExecutionMeta
from toolkeeper.netguard import NetGuard, Resolver
from toolkeeper.providers.base import ToolContext
from toolkeeper.providers.http import http_timeout, read_capped, status_error
from toolkeeper.providers.native import BaseTool

HTML_TYPES = frozenset({"text/html", "application/xhtml+xml"})
TEXT_TYPES = frozenset({"text/plain", "text/markdown", "text/csv"})
ACCEPT = ("text/html,application/xhtml+xml,text/plain;q=0.9,application/json;q=0.9,"
          "text/markdown;q=0.9,text/csv;q=0.8")
INPUT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "url": {"type": "string", "minLength": 1, "maxLength": 8192,
                "description": "Absolute http(s) URL to GET."},
        "max_chars": {"type": "integer", "minimum": 1,
                      "description": "Return at most this many characters of text (never "
                                     "more than the policy's max_text_chars)."},
    },
    "required": ["url"],
    "additionalProperties": False,
}
OUTPUT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "url": {"type": "string"},
        "final_url": {"type": "string"},
        "status": {"type": "integer"},
        "content_type": {"type": "string"},
        "encoding": {"type": "string"},
        "title": {"type": ["string", "null"]},
        "text": {"type": "string"},
        "links": {"type": "array", "items": {
            "type": "object", "properties": {"text": {"type": "string"},
                                             "href": {"type": "string"}}}},
        "truncated": {"type": "boolean"},
    },
    "required": ["url", "final_url", "status", "content_type", "title", "text", "links",
                 "truncated"],
}


class WebFetchPolicy(NetworkPolicy):
    """Where ``web_fetch`` may go and how much it may bring back."""

    denied_hosts: Annotated[tuple[str, ...], Superset()] = ()
    """Exact host names or ``*.suffix`` never fetched, also as a redirect target; a denial
    wins over ``allowed_hosts``."""
    max_bytes: Annotated[int, AtMost()] = Field(default=2 << 20, ge=1, le=64 << 20)
    """Body bytes read (after decompression); reading stops there and marks ``truncated``."""
    max_redirects: Annotated[int, AtMost()] = Field(default=5, ge=0, le=20)
    timeout_s: Annotated[float, AtMost()] = Field(default=15.0, gt=0, le=300)
    """Deadline of the whole exchange, redirects and body included."""
    max_text_chars: Annotated[int, AtMost()] = Field(default=50_000, ge=1, le=5_000_000)
    """Characters of text returned; the rest is cut and marked ``truncated``."""
    max_links: Annotated[int, AtMost()] = Field(default=100, ge=0, le=2_000)


@dataclass(frozen=True)
class _Fetched:
    status: int
    final_url: str
    mime: str | None
    charset: str | None
    data: bytes
    truncated: bool


class WebFetchTool(BaseTool):
    """GET a public (or explicitly allowed) page and return its readable text."""

    tool_name = "web_fetch"
    description = ("Fetch a web page (GET) and return its readable text, title and links; "
                   "plain text and JSON are returned as they are.")
    capabilities = ("network",)
    actions: ClassVar[dict[str, ActionSpec]] = {
        "run": ActionSpec(description=description, input_schema=INPUT_SCHEMA,
                          output_schema=OUTPUT_SCHEMA, side_effect=SideEffect.PURE,
                          supports_preview=False),
    }
    risk_default = Risk.LOW
    side_effect = SideEffect.PURE
    execution = ExecutionMeta(timeout_s=60.0)
    policy_model = WebFetchPolicy

    def __init__(self, *, resolver: Resolver | None = None, verify: bool | str = True) -> None:
        self._resolver = resolver
        self._verify = verify

    async def execute(self, action: str, request: dict[str, Any], context: ToolContext) -> Any:
        """Check the URL, fetch it through the guard, and shape its text."""
        policy = _policy(context)
        guard = NetGuard(allowed_hosts=policy.allowed_hosts, denied_hosts=policy.denied_hosts,
                         allowed_networks=policy.allowed_networks,
                         allowed_ports=policy.allowed_ports,
                         max_redirects=policy.max_redirects, resolver=self._resolver)
        url = guard.check_url(str(request.get("url", "")))
        fetched = await self._fetch(guard, url, policy)
        kind = _kind(fetched.mime) if fetched.mime else _sniff(fetched.data)
        if kind is None:
            raise _unsupported(fetched.mime or "unknown")
        # the page reader (lxml, charset_normalizer, trafilatura) loads with the first page
        from toolkeeper.builtins._web_page import Page, decode, read_html

        text, encoding = decode(fetched.data, fetched.charset, html=kind == "text/html")
        page = (await asyncio.to_thread(read_html, text, fetched.final_url,
                                        max_links=policy.max_links)
                if kind == "text/html" else Page(title=None, text=text, links=()))
        limit = min(int(request.get("max_chars") or policy.max_text_chars),
                    policy.max_text_chars)
        result = {
            "url": str(url), "final_url": fetched.final_url, "status": fetched.status,
            "content_type": fetched.mime or kind, "encoding": encoding, "title": page.title,
            "text": page.text[:limit],
            "links": [{"text": link.text, "href": link.href} for link in page.links],
            "truncated": fetched.truncated or len(page.text) > limit,
        }
        return _fit(result, policy.max_output_chars)

    async def _fetch(self, guard: NetGuard, url: httpx.URL, policy: WebFetchPolicy) -> _Fetched:
        """The final response's status, type and up to ``max_bytes`` of its body."""
        outgoing = httpx.Request("GET", url, headers={"Accept": ACCEPT}, extensions={
            "timeout": http_timeout(policy.timeout_s).as_dict()})
        async with guard.client(verify=self._verify) as client:
            try:
                async with asyncio.timeout(policy.timeout_s):
                    response = await guard.send(client, outgoing)
                    try:
                        if response.status_code == 429 or response.status_code >= 500:
                            snippet, _ = await read_capped(response, min(policy.max_bytes, 512))
                            raise status_error(response, snippet.decode("utf-8", "replace"))
                        mime, charset = _content_type(response)
                        if mime is not None and _kind(mime) is None:
                            raise _unsupported(mime)  # refused before its body is read
                        data, truncated = await read_capped(response, policy.max_bytes)
                    finally:
                        await response.aclose()
            except TimeoutError:
                raise ToolError(Reason.TIMEOUT, f"no complete response within "
                                f"{policy.timeout_s}s", retryable=True) from None
        return _Fetched(status=response.status_code, final_url=str(response.url), mime=mime,
                        charset=charset, data=data, truncated=truncated)


def _policy(ctx: ToolContext) -> WebFetchPolicy:
    policy = ctx.policy
    if isinstance(policy, WebFetchPolicy):
        return policy
    # Activations may hand over the base model; re-read its values under ours.
    return WebFetchPolicy.model_validate(policy.model_dump(exclude_unset=True))


def _fit(result: dict[str, Any], cap: int | None) -> dict[str, Any]:
    """``result`` with text, then links, cut until its JSON is at most ``cap`` characters."""
    if cap is None:
        return result
    for _ in range(4):
        excess = len(json.dumps(result, ensure_ascii=False)) - cap
        if excess <= 0:
            return result
        result["truncated"] = True
        text = result["text"]
        if text:
            result["text"] = text[:max(0, len(text) - excess)]
        elif result["links"]:
            result["links"] = result["links"][:len(result["links"]) // 2]
        else:
            break
    return result


def _content_type(response: httpx.Response) -> tuple[str | None, str | None]:
    """``(mime type, charset)`` of the ``Content-Type`` header; ``None`` where absent."""
    header = response.headers.get("content-type", "")
    mime, _, params = header.partition(";")
    charset = None
    for param in params.split(";"):
        name, _, value = param.partition("=")
        if name.strip().lower() == "charset":
            charset = value.strip().strip("\"'") or None
    return mime.strip().lower() or None, charset


def _kind(mime: str) -> str | None:
    """How a content type is handled: ``text/html``, ``text/plain`` or ``application/json``."""
    if mime in HTML_TYPES:
        return "text/html"
    if mime in TEXT_TYPES:
        return "text/plain"
    if mime == "application/json" or (mime.startswith("application/") and
                                      mime.endswith("+json")):
        return "application/json"
    return None


def _sniff(data: bytes) -> str | None:
    """The kind of a body sent without a ``Content-Type``: markup, text, or neither."""
    head = data[:1024].lstrip().lower()
    if head.startswith((b"<!doctype html", b"<html")):
        return "text/html"
    if b"\x00" in head:
        return None
    return "text/plain"


def _unsupported(mime: str) -> ToolError:
    return ToolError(Reason.UNSUPPORTED_CONTENT_TYPE,
                     f"content type {mime[:100]} is not HTML, plain text or JSON",
                     content_type=mime[:100])

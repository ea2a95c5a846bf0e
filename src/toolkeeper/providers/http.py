"""The ``http`` provider: a tool whose action is one request to a configured endpoint.

Implementation config (``config_schema.implementation``)::

    url: https://api.example.com/v1/orders
    method: POST                      # default POST
    headers: {Authorization: "Bearer ${secret:crm/token}"}
    timeout_s: 30
    max_response_bytes: 1048576
    allowed_hosts: []                 # empty = any public host (redirects included)
    allowed_networks: []              # CIDRs reachable even though private
    oauth: {token_endpoint: …, client_id: …, client_secret: "${secret:idp/client}"}
                                      # OAuth bearer token (docs/identity-upstreams.md)

Arguments are sent as the JSON body, or as query parameters for GET, HEAD, DELETE and
OPTIONS. Secret references in header values are resolved through ``ctx.secret`` only when
the request is built, never for a preview, and the resolved values are masked in the result.

Outcome mapping: 2xx → the parsed JSON (or text; ``None`` when empty); 429/5xx →
``UpstreamError`` (retryable); other statuses → ``ToolError("upstream_error")``; a body above
``max_response_bytes`` → ``output_too_large``. Connection failures are retryable and did not
execute; timeouts and failures after sending report ``may_have_executed=True``. With
``oauth``, a 401 renews the token once and sends the request once more (the upstream refused
it before running it); a second 401 → ``upstream_unauthorized``.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping
from functools import partial
from typing import Annotated, Any

import httpx
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from toolkeeper.bounds import HostNetworks
from toolkeeper.errors import ConfigError, ToolDenied, ToolError, UpstreamError
from toolkeeper.model.call import PreviewResult
from toolkeeper.model.reasons import Reason
from toolkeeper.netguard import NetGuard, Resolver, request_error
from toolkeeper.providers.base import ToolContext, ToolPolicy
from toolkeeper.secrets.base import SECRET_REF_RE, has_ref
from toolkeeper.secrets.redact import MASK, Redactor
from toolkeeper.upstream.servers import UpstreamOAuth

QUERY_METHODS = frozenset({"GET", "HEAD", "DELETE", "OPTIONS"})
"""Methods whose arguments travel as query parameters rather than a JSON body."""
_SNIPPET_CHARS = 200


class HttpEndpointConfig(BaseModel):
    """The ``implementation`` block of an ``http`` tool."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    url: str
    """The endpoint; fixed by the tool author, never chosen by the agent."""
    type: str | None = None
    """Tolerated so the block can carry ``type: http``."""
    method: str = "POST"
    headers: dict[str, str] = Field(default_factory=dict)
    """Header values may contain ``${secret:connector/key}`` references."""
    timeout_s: float = Field(default=30.0, gt=0, le=3600)
    """Deadline of the whole exchange, redirects and body included."""
    max_response_bytes: int = Field(default=1 << 20, ge=1)
    allowed_hosts: tuple[str, ...] = ()
    allowed_networks: Annotated[tuple[str, ...], HostNetworks()] = ()
    """On a tenant's tool (origin ``api``): only within the operator's ceiling."""
    allowed_ports: tuple[int, ...] | None = None
    max_redirects: int = Field(default=5, ge=0, le=20)
    oauth: UpstreamOAuth | None = None
    """Get an OAuth access token and send it as ``Authorization: Bearer`` (at execute only;
    a 401 renews it once and sends the request once more)."""

    @model_validator(mode="after")
    def _one_authorization(self) -> HttpEndpointConfig:
        if self.oauth is not None and any(n.lower() == "authorization" for n in self.headers):
            raise ValueError("give either `oauth` or an Authorization header, not both")
        return self


def http_timeout(timeout_s: float) -> httpx.Timeout:
    """Per-operation limits inside a ``timeout_s`` deadline.

    Connecting gets half the budget so a dead host is reported as a connect timeout (did not
    execute) before the overall deadline (may have executed) can fire.
    """
    return httpx.Timeout(timeout_s, connect=timeout_s / 2)


async def read_capped(response: httpx.Response, limit: int) -> tuple[bytes, bool]:
    """Up to ``limit`` decoded body bytes and whether more were sent (stops reading there)."""
    chunks: list[bytes] = []
    size = 0
    try:
        async for chunk in response.aiter_bytes():
            if size + len(chunk) > limit:
                chunks.append(chunk[: limit - size])
                return b"".join(chunks), True
            chunks.append(chunk)
            size += len(chunk)
    except httpx.RequestError as exc:
        raise request_error(exc, sent=True) from exc
    return b"".join(chunks), False


def decode_body(response: httpx.Response, data: bytes) -> Any:
    """Parsed JSON for a JSON content type (text if it does not parse), else text."""
    if not data:
        return None
    text = data.decode(response.encoding or "utf-8", errors="replace")
    ctype = response.headers.get("content-type", "").split(";")[0].strip().lower()
    if ctype == "application/json" or ctype.endswith("+json"):
        try:
            return json.loads(text)
        except ValueError:
            return text
    return text


def status_error(response: httpx.Response, body: Any) -> ToolError:
    """The error for a non-success status: 429/5xx retryable, other statuses final."""
    status = response.status_code
    snippet = body if isinstance(body, str) else json.dumps(body, default=str)
    message = f"HTTP {status}: {(snippet or response.reason_phrase)[:_SNIPPET_CHARS]}"
    if status == 429 or status >= 500:
        # 429 and 503 say "not processed"; other 5xx may fail after acting.
        executed = status not in (429, 503)
        retry_after = response.headers.get("retry-after")
        return UpstreamError(message, may_have_executed=executed, status=status,
                             retry_after=retry_after)
    return ToolError("upstream_error", message, status=status)


def query_params(arguments: Mapping[str, Any]) -> tuple[tuple[str, str], ...]:
    """Arguments as query parameters: lists repeat, objects are sent as JSON text."""
    params: list[tuple[str, str]] = []
    for name, value in arguments.items():
        for item in value if isinstance(value, list) else [value]:
            if item is None:
                continue
            if isinstance(item, bool):
                params.append((name, "true" if item else "false"))
            elif isinstance(item, str | int | float):
                params.append((name, str(item)))
            else:
                params.append((name, json.dumps(item, separators=(",", ":"), default=str)))
    return tuple(params)


class HttpProvider:
    """Runs an ``http`` tool: one guarded request per call, one pooled client per tool."""

    policy_model: type[ToolPolicy] = ToolPolicy

    def __init__(
        self,
        config: Mapping[str, Any],
        *,
        resolver: Resolver | None = None,
        verify: bool | str = True,
    ) -> None:
        try:
            self.config = HttpEndpointConfig.model_validate(dict(config))
        except ValidationError as exc:
            raise ConfigError(f"http implementation: {exc}") from None
        self.method = self.config.method.upper()
        self.guard = NetGuard(
            allowed_hosts=self.config.allowed_hosts,
            allowed_networks=self.config.allowed_networks,
            allowed_ports=self.config.allowed_ports,
            max_redirects=self.config.max_redirects,
            resolver=resolver,
        )
        try:  # a URL the guard can never admit is a configuration error, found at load
            self.guard.check_url(self.config.url)
        except ToolDenied as exc:
            raise ConfigError(f"http implementation url: {exc.message}") from None
        self._verify = verify
        self._token_guard = NetGuard(allowed_networks=self.config.allowed_networks,
                                     resolver=resolver, max_redirects=0)
        """Where an ``oauth`` tool's token endpoint may be: public hosts, or its networks."""
        self._client: httpx.AsyncClient | None = None
        self._own_tokens: Any = None
        self._secret_header_names = [n for n, v in self.config.headers.items() if has_ref(v)]

    def supports_preview(self, action: str) -> bool:
        """Every action can be previewed: the preview is the request, not its effect."""
        return True

    async def preview(
        self, action: str, arguments: dict[str, Any], ctx: ToolContext
    ) -> PreviewResult:
        """The request that would be sent, secrets shown as ``***``; nothing is sent."""
        request = self._build(arguments, self._masked_headers())
        data = {
            "method": self.method,
            "url": str(request.url),
            "headers": self._masked_headers(),
            "body": None if self.method in QUERY_METHODS else arguments,
        }
        return PreviewResult(summary=f"{self.method} {request.url}", data=data)

    async def execute(self, action: str, arguments: dict[str, Any], ctx: ToolContext) -> Any:
        """Send the request and map the response (see the module docstring)."""
        headers, secrets = await self._resolved_headers(ctx)
        bearer = self._bearer(ctx)
        token = None if bearer is None else await bearer.current()
        renewing = False  # a deadline while renewing: the 401 ran nothing, nothing else sent
        try:
            async with asyncio.timeout(self.config.timeout_s):
                response, data, truncated = await self._send(arguments, headers, token)
                if response.status_code == 401 and bearer is not None and token is not None:
                    # refused before it ran: renew once, send once more
                    renewing = True
                    token = await bearer.renew(token)
                    renewing = False
                    response, data, truncated = await self._send(arguments, headers, token)
                    if response.status_code == 401:
                        raise ToolError(Reason.UPSTREAM_UNAUTHORIZED, "the upstream refused "
                                        "the renewed OAuth token (HTTP 401)")
        except TimeoutError:
            raise ToolError("timeout", f"no complete response within {self.config.timeout_s}s",
                            retryable=True, may_have_executed=not renewing) from None
        if truncated:
            raise ToolError("output_too_large",
                            f"response exceeds {self.config.max_response_bytes} bytes",
                            may_have_executed=True)
        body = Redactor(secrets).union(ctx._resolved_secrets).redact(
            decode_body(response, data))
        if not response.is_success:
            raise status_error(response, body)
        return body

    async def _send(self, arguments: dict[str, Any], headers: dict[str, str],
                    token: str | None) -> tuple[httpx.Response, bytes, bool]:
        if token is not None:
            headers = {**headers, "Authorization": f"Bearer {token}"}
        request = self._build(arguments, headers)
        response = await self.guard.send(self._get_client(), request,
                                         sensitive_headers=self._secret_header_names)
        try:
            data, truncated = await read_capped(response, self.config.max_response_bytes)
        finally:
            await response.aclose()
        return response, data, truncated

    def _bearer(self, ctx: ToolContext) -> Any:
        """The token source of an ``oauth`` tool (``None`` without one): the gateway's token
        manager; the client secret resolves in the scope of the tool's writer, the token
        endpoint is reached under the tool's network rules (public hosts, or its
        ``allowed_networks``)."""
        oauth = self.config.oauth
        if oauth is None:
            return None
        from toolkeeper.identity.upstream import CALL_SHARE, UpstreamTokens
        from toolkeeper.identity.upstream_subject import subject_for

        tokens = getattr(ctx.upstreams, "tokens", None)
        if tokens is None:  # a gateway without upstreams: this tool's own (memory only)
            tokens = self._own_tokens = self._own_tokens or UpstreamTokens()

        async def secret(connector: str | None, key: str) -> str:
            return await ctx.secret(key, connector)

        subject = subject_for(ctx.tenant_id, ctx.agent) if oauth.subject == "agent" else None
        return tokens.bearer(oauth, tenant_id=ctx.tenant_id, upstream=f"tool:{ctx.tool}",
                             secret=secret, subject=subject, on_token=ctx.mark_secret,
                             within_s=ctx.timeout_s * CALL_SHARE,
                             transport=partial(self._token_guard.transport, verify=self._verify))

    async def aclose(self) -> None:
        """Close the pooled client (idempotent)."""
        if self._client is not None:
            client, self._client = self._client, None
            await client.aclose()

    def _get_client(self) -> httpx.AsyncClient:
        if self._client is None:
            self._client = self.guard.client(
                timeout=http_timeout(self.config.timeout_s), verify=self._verify
            )
        return self._client

    def _build(self, arguments: Mapping[str, Any], headers: dict[str, str]) -> httpx.Request:
        timeout = http_timeout(self.config.timeout_s)
        extensions = {"timeout": timeout.as_dict()}
        if self.method in QUERY_METHODS:
            url, params = httpx.URL(self.config.url), query_params(arguments)
            if params:  # an empty merge would drop the URL's own query string
                url = url.copy_merge_params(params)
            return httpx.Request(self.method, url, headers=headers, extensions=extensions)
        return httpx.Request(self.method, self.config.url, headers=headers,
                             json=arguments, extensions=extensions)

    def _masked_headers(self) -> dict[str, str]:
        return {name: SECRET_REF_RE.sub(MASK, v) for name, v in self.config.headers.items()}

    async def _resolved_headers(self, ctx: ToolContext) -> tuple[dict[str, str], list[str]]:
        headers: dict[str, str] = {}
        secrets: list[str] = []
        for name, value in self.config.headers.items():
            if not has_ref(value):
                headers[name] = value
                continue
            parts: list[str] = []
            last = 0
            for match in SECRET_REF_RE.finditer(value):
                secret = await ctx.secret(match.group(2), match.group(1))
                secrets.append(secret)
                parts += [value[last : match.start()], secret]
                last = match.end()
            headers[name] = "".join([*parts, value[last:]])
        return headers, secrets

"""Built-in ``composio``: runs a Composio tool (seed 004's third provider, beside HTTP and
internal tools) through the official ``composio`` SDK (``pip install 'toolkeeper[composio]'``).

The agent sends ``{tool, arguments, user_id?}``: ``tool`` a Composio tool slug the policy's
``allowed_tools`` lists (an empty list admits none), ``user_id`` the Composio user whose
connected account runs it (default the policy's ``user_id``, else the calling tenant's id;
others only from ``allowed_users``). With the operator's key (the environment) the user is
always the calling tenant's id: that key reaches every user of the operator's project. The
answer is Composio's ``{data, successful, error}``; an unsuccessful execution is
``upstream_error`` with Composio's message.

The project API key is found like ``web_search``'s (:mod:`toolkeeper.builtins._search_keys`):
``implementation.api_key`` → ``implementation.credentials_ref`` → the calling tenant's own
credential ``composio/api_key`` → the environment variable ``COMPOSIO_API_KEY`` (sent only
to ``COMPOSIO_ENDPOINT`` or Composio's own backend). A credential's value is the key or a
JSON object ``{api_key, endpoint?}``. The key is redacted from everything the call returns,
logs or audits. ``implementation.toolkit_versions`` pins each toolkit's version (Composio
refuses ``latest`` without it: ``config_invalid``).

The backend URL passes the SSRF guard (``allowed_hosts``, default Composio's backend) before
the key leaves the gateway; the SDK's client follows no redirects and does not retry (an
execution is a write: a silent retry could run it twice); the SDK's telemetry is off.
A slug or user the policy does not admit is ``argument_not_allowed``. Verdicts: 401/403 →
``credential_rejected``; 429 and 5xx → ``upstream_error`` (retryable); other refusals (an
unknown slug) → ``upstream_error``; no answer within ``timeout_s`` → ``timeout``. Side effect
``irreversible`` (a Composio tool sends mail, opens issues, pays), risk ``medium``.
"""

from __future__ import annotations

import asyncio
import json
from typing import Annotated, Any, ClassVar

import httpx
from pydantic import Field

from toolkeeper.bounds import AtMost, Pinned, Subset, host_covered
from toolkeeper.builtins._net_policy import NetworkPolicy, provider_guard
from toolkeeper.builtins._search_keys import find_key
from toolkeeper.errors import ToolError, UpstreamError
from toolkeeper.model.enums import Risk, SideEffect
from toolkeeper.model.reasons import Reason
from toolkeeper.model.tool import ActionSpec, ExecutionMeta
from toolkeeper.netguard import Resolver
from toolkeeper.providers.base import ToolContext
from toolkeeper.providers.native import BaseTool

DEFAULT_BASE_URL = "https://backend.composio.dev"
INPUT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "tool": {"type": "string", "minLength": 1, "maxLength": 200,
                 "description": "The Composio tool slug, e.g. GITHUB_CREATE_AN_ISSUE."},
        "arguments": {"type": "object", "description": "The tool's arguments."},
        "user_id": {"type": "string", "minLength": 1, "maxLength": 200,
                    "description": "The Composio user whose connected account runs it."},
    },
    "required": ["tool"],
    "additionalProperties": False,
}
OUTPUT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"tool": {"type": "string"}, "data": {"type": "object"},
                   "successful": {"type": "boolean"}},
    "required": ["tool", "data", "successful"],
}


class ComposioPolicy(NetworkPolicy):
    """Which Composio tools, for which user, where the request may go."""

    allowed_tools: Annotated[tuple[str, ...], Subset(open="none")] = ()
    """Tool slugs the agent may run; empty admits none."""
    user_id: Annotated[str | None, Pinned()] = Field(default=None, min_length=1,
                                                     max_length=200)
    """The Composio user when the agent names none (``None``: the calling tenant's id)."""
    allowed_users: Annotated[tuple[str, ...] | None, Subset(open="none")] = None
    """Users the agent may name (``None``: only ``user_id``)."""
    allowed_hosts: Annotated[tuple[str, ...], Subset(open="empty", covered=host_covered)] = (
        "backend.composio.dev",)
    """Hosts the backend URL may name (exact or ``*.suffix``)."""
    timeout_s: Annotated[float, AtMost()] = Field(default=30.0, gt=0, le=300)
    """Deadline of one execution, schema look-up included."""
    max_output_chars: Annotated[int, AtMost()] = Field(default=50_000, ge=100)
    """A larger answer is refused (``output_too_large``)."""


class ComposioTool(BaseTool):
    """Run a Composio tool under a policy, with the tenant's Composio key."""

    tool_name = "composio"
    description = "Run a Composio tool (by slug) for a Composio user's connected account."
    capabilities = ("network",)
    actions: ClassVar[dict[str, ActionSpec]] = {
        "run": ActionSpec(description=description, input_schema=INPUT_SCHEMA,
                          output_schema=OUTPUT_SCHEMA, side_effect=SideEffect.IRREVERSIBLE),
    }
    risk_default = Risk.MEDIUM
    side_effect = SideEffect.IRREVERSIBLE
    execution = ExecutionMeta(timeout_s=120.0)
    policy_model = ComposioPolicy

    def __init__(self, *, resolver: Resolver | None = None, verify: bool | str = True) -> None:
        self._resolver = resolver
        self._verify = verify

    async def execute(self, action: str, request: dict[str, Any], context: ToolContext) -> Any:
        policy = self.checked_policy(action, context, ComposioPolicy)
        slug = str(request.get("tool") or "")
        if slug not in policy.allowed_tools:
            context.deny(Reason.ARGUMENT_NOT_ALLOWED, f"composio tool {slug!r} is not in "
                         "the policy's allowed_tools", allowed_tools=list(policy.allowed_tools))
        default_user = policy.user_id or context.tenant_id
        user = str(request.get("user_id") or default_user)
        if user != default_user and user not in (policy.allowed_users or ()):
            context.deny(Reason.ARGUMENT_NOT_ALLOWED, f"composio user {user!r} is not the "
                         "policy's user_id nor in its allowed_users")
        versions = context.config.get("toolkit_versions")
        if not isinstance(versions, dict) or not versions:
            context.fail(Reason.CONFIG_INVALID, "composio needs implementation."
                         "toolkit_versions (toolkit -> version): Composio refuses 'latest'")
        key = await find_key(context, "composio", DEFAULT_BASE_URL, family="composio")
        if key.source == "environment" and user != context.tenant_id:
            # the operator's key reaches every user of the operator's Composio project:
            # with it a tenant runs as itself only, never as another tenant's user
            context.deny(Reason.ARGUMENT_NOT_ALLOWED, f"with the operator's Composio key the "
                         f"user is the tenant itself ({context.tenant_id!r}), not {user!r}: "
                         "use the tenant's own key (credential composio/api_key) for others")
        guard = provider_guard(policy, self._resolver)
        guard.check_url(key.endpoint)  # refused before any key leaves the gateway
        try:
            async with asyncio.timeout(policy.timeout_s):
                answer = await asyncio.to_thread(
                    _run, slug, request.get("arguments") or {}, user, key.value,
                    key.endpoint, {str(k): str(v) for k, v in versions.items()},
                    policy.timeout_s, self._verify)
        except TimeoutError:
            raise ToolError(Reason.TIMEOUT, f"no answer from Composio within "
                            f"{policy.timeout_s}s", retryable=False,
                            may_have_executed=True) from None
        out = {"tool": slug, "data": answer.get("data") or {},
               "successful": bool(answer.get("successful"))}
        if not out["successful"]:
            raise UpstreamError(f"composio {slug}: {answer.get('error') or 'not successful'}",
                                retryable=False, may_have_executed=True)
        if len(json.dumps(out, ensure_ascii=False, default=str)) > policy.max_output_chars:
            raise ToolError(Reason.OUTPUT_TOO_LARGE, f"the composio answer exceeds "
                            f"{policy.max_output_chars} characters", may_have_executed=True)
        return out


def _run(slug: str, arguments: dict[str, Any], user: str, key: str, base_url: str,
         versions: dict[str, str], timeout_s: float, verify: bool | str) -> dict[str, Any]:
    """One execution through the SDK (blocking: run on a thread)."""
    try:
        from composio import Composio
        from composio_client import APIConnectionError, APIStatusError, APITimeoutError
    except ModuleNotFoundError as exc:
        raise ToolError(Reason.PROVIDER_UNAVAILABLE, "the composio SDK is not installed: "
                        "pip install 'toolkeeper[composio]'") from exc
    with httpx.Client(timeout=timeout_s, follow_redirects=False, verify=verify) as http:
        sdk = Composio(api_key=key, base_url=base_url, toolkit_versions=versions,
                       allow_tracking=False, max_retries=0, http_client=http)
        try:
            answer = dict(sdk.tools.execute(slug, arguments, user_id=user))
        except APIStatusError as exc:
            raise _status(exc.status_code, str(exc)) from None
        except APITimeoutError:
            raise ToolError(Reason.TIMEOUT, "Composio did not answer in time",
                            may_have_executed=True) from None
        except APIConnectionError as exc:
            raise UpstreamError(f"Composio unreachable: {exc}", retryable=True,
                                may_have_executed=False) from None
        except Exception as exc:  # the SDK's own refusals (a tool it cannot find, …)
            name = type(exc).__name__  # its classes move between versions: by name
            raise UpstreamError(f"composio: {name}: {exc}", retryable=False,
                                may_have_executed=True) from None
    return answer


def _status(status: int, text: str) -> ToolError:
    if status in (401, 403):
        return ToolError(Reason.CREDENTIAL_REJECTED,
                         f"Composio refused the key (HTTP {status})", status=status)
    retry = status == 429 or status >= 500
    return UpstreamError(f"Composio answered HTTP {status}: {text[:200]}", retryable=retry,
                         may_have_executed=status >= 500)

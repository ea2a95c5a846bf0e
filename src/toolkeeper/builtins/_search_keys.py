"""Where ``web_search`` finds its provider key: seed 002's "Web Search Credential Resolution".

The first place that holds a key wins, in this order:

1. ``implementation.api_key``: the tool's own key, a ``${secret:connector/key}`` reference
   resolved at use (a literal only from library code: config files and REST refuse it with
   ``secret_literal_refused``).
2. ``implementation.credentials_ref``: a credential linked to the tool,
   ``${secret:connector/key}`` (or ``connector/key``), resolved like any secret reference: a
   tenant's tool reaches only its own credentials.
3. The calling tenant's own credential ``web_search/serper`` (provider key ``web_search``,
   variant ``serper``), else ``serper/api_key`` (provider key ``serper``).
4. The environment variable ``SERPER_API_KEY`` (the operator's platform default).

A credential's value (places 2 and 3) is the key itself or a JSON object with ``api_key``
(preferred) or ``token`` and an optional ``endpoint``. A configured reference that does not
resolve is an error (``secret_not_found``), never a silent fall-through to the next place.

Endpoint: a credential's own ``endpoint`` goes with its key; otherwise the implementation's
``endpoint``; otherwise the provider's default. The environment key is the operator's, so it
is sent only to ``SERPER_ENDPOINT`` (also the operator's) or the default, never to an
endpoint a tool or tenant wrote. Every key found is registered for redaction.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from toolkeeper.errors import ToolError
from toolkeeper.model.reasons import Reason
from toolkeeper.providers.base import ToolContext
from toolkeeper.secrets.base import parse_ref


@dataclass(frozen=True, slots=True)
class SearchKey:
    """A provider key, the endpoint it is for, and the place it came from."""

    value: str
    endpoint: str
    source: str


def places(provider: str, family: str = "web_search") -> str:
    """The four places, as the ``credential_missing`` message names them."""
    own = f"{family}/{provider} (or {provider}/api_key)" if family != provider \
        else f"{provider}/api_key"
    return (f"implementation.api_key, implementation.credentials_ref, a tenant credential "
            f"{own}, or the environment variable {provider.upper()}_API_KEY")


async def find_key(ctx: ToolContext, provider: str, default_endpoint: str,
                   environ: Mapping[str, str] | None = None, *,
                   family: str = "web_search") -> SearchKey:
    """The key for this call (see the module docstring), or ``credential_missing``;
    ``family``: the provider key of the tenant credential tried first (``composio`` uses
    its own name: only ``composio/api_key``)."""
    config = ctx.config
    endpoint = str(config.get("endpoint") or default_endpoint)
    api_key = config.get("api_key")
    if isinstance(api_key, str) and api_key.strip():
        value = await _resolved(ctx, api_key.strip())
        ctx.mark_secret(value)
        return SearchKey(value, endpoint, "implementation.api_key")
    ref = config.get("credentials_ref")
    if isinstance(ref, str) and ref.strip():
        connector, key = _ref_name(ref.strip())
        payload = await ctx.secret(key, connector)
        return _from_payload(ctx, payload, endpoint, "credentials_ref", ref.strip())
    tenant_places = ((family, provider), (provider, "api_key")) if family != provider \
        else ((provider, "api_key"),)
    for connector, key in tenant_places:
        own = await ctx.credential(connector, key)
        if own is not None and own.strip():
            return _from_payload(ctx, own, endpoint, "tenant_credential", f"{connector}/{key}")
    env = os.environ if environ is None else environ
    value = env.get(f"{provider.upper()}_API_KEY", "").strip()
    if value:
        ctx.mark_secret(value)
        own = env.get(f"{provider.upper()}_ENDPOINT", "").strip()
        return SearchKey(value, own or default_endpoint, "environment")
    raise ToolError(Reason.CREDENTIAL_MISSING,
                    f"no {provider} key: set {places(provider, family)}", provider=provider)


async def _resolved(ctx: ToolContext, text: str) -> str:
    """A ``${secret:…}`` reference resolved now; a literal as it is."""
    ref = parse_ref(text)
    if ref is None:
        return text
    return await ctx.secret(ref[1], ref[0])


def _ref_name(ref: str) -> tuple[str | None, str]:
    parsed = parse_ref(ref)
    if parsed is not None:
        return parsed
    connector, sep, key = ref.partition("/")
    return (connector, key) if sep and connector and key else (None, ref)


def _from_payload(ctx: ToolContext, payload: str, endpoint: str, source: str,
                  name: str) -> SearchKey:
    """The key (and endpoint) a credential value holds: the key itself or a JSON object."""
    text = payload.strip()
    data: Any = None
    if text.startswith("{"):
        try:
            data = json.loads(text)
        except ValueError:
            data = None
    if not isinstance(data, dict):
        ctx.mark_secret(text)
        return SearchKey(text, endpoint, source)
    key = data.get("api_key") or data.get("token")
    if not isinstance(key, str) or not key.strip():
        raise ToolError(Reason.CREDENTIAL_INVALID,
                        f"credential {name} holds a JSON object without api_key or token")
    ctx.mark_secret(key.strip())
    own = data.get("endpoint")
    if own is not None and (not isinstance(own, str) or not own.strip()):
        raise ToolError(Reason.CREDENTIAL_INVALID,
                        f"credential {name}: endpoint must be a non-empty string")
    return SearchKey(key.strip(), own.strip() if isinstance(own, str) else endpoint, source)

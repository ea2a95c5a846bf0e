"""A REST app over a real SQLite gateway for the registry and discovery API tests.

Tenant ``acme`` has published tools covering every ``why_unavailable``, a draft, a
disabled and a deprecated tool; the built-in ``calculate`` is installed as a global tool;
tenant ``globex`` has its own tool and agent. Spoken to through
:class:`tests.support.rest.RestClient` (unqualified tool names are ``acme``'s)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, ClassVar

from fastapi.testclient import TestClient

from tests.support.rest import RestClient
from toolkeeper import (
    ActionSpec,
    Activation,
    Agent,
    BaseTool,
    Gateway,
    Profile,
    Risk,
    SideEffect,
    ToolContext,
    tool,
)
from toolkeeper.api import create_app
from toolkeeper.builtins import definition
from toolkeeper.model.enums import Health, ToolStatus


@tool(side_effect=SideEffect.PURE, risk=Risk.LOW)
def lookup(key: str) -> str:
    """Look a key up."""
    return key.upper()


@tool(side_effect=SideEffect.PURE, risk=Risk.LOW)
def notes(text: str) -> str:
    """Take a note (not enabled for the agents' profile)."""
    return text


@tool(side_effect=SideEffect.PURE, risk=Risk.LOW)
def flaky(x: int) -> int:
    """Enabled, but its circuit is open."""
    return x


@tool(side_effect=SideEffect.PURE, risk=Risk.LOW)
def pinned(x: int) -> int:
    """The profile pins a version that was never published."""
    return x


@tool(side_effect=SideEffect.PURE, risk=Risk.LOW, scopes=("vault:read",))
def guarded(x: int) -> int:
    """Needs a scope the profile lacks."""
    return x


@tool(side_effect=SideEffect.PURE, risk=Risk.LOW)
def quar(x: int) -> int:
    """Quarantined after publishing."""
    return x


@tool(side_effect=SideEffect.PURE, risk=Risk.LOW)
def old(x: int) -> int:
    """Deprecated, still callable."""
    return x


@tool(side_effect=SideEffect.PURE, risk=Risk.LOW)
def off(x: int) -> int:
    """Disabled: not tenant-available."""
    return x


@tool(side_effect=SideEffect.PURE, risk=Risk.LOW)
def private(x: int) -> int:
    """Belongs to globex."""
    return x


_ANY = {"type": "object"}


class Repo(BaseTool):
    """read needs repo:read (granted), write needs repo:write (not granted)."""

    tool_name = "repo"
    actions: ClassVar[dict[str, ActionSpec]] = {
        "read": ActionSpec(input_schema=_ANY, side_effect=SideEffect.PURE,
                           scopes_required=("repo:read",)),
        "write": ActionSpec(input_schema=_ANY, scopes_required=("repo:write",))}
    risk_default = Risk.LOW

    async def execute(self, action: str, request: dict[str, Any], context: ToolContext) -> Any:
        return action


ACME_TOOLS: tuple[Any, ...] = (lookup, notes, flaky, pinned, guarded, quar, old, off, Repo)
ENABLED = ("calculate", "lookup", "old", "repo")
WHY = {"flaky": "unhealthy", "guarded": "scope_missing", "notes": "disabled_for_agent",
       "pinned": "not_published", "quar": "quarantined"}
_TOKENS = {"admin": ("acme", "admin", None), "operator": ("acme", "operator", None),
           "approver": ("acme", "approver", None), "bot": ("acme", "agent", "bot"),
           "other-bot": ("acme", "agent", "other-bot"), "g_admin": ("globex", "admin", None),
           "g_bot": ("globex", "agent", "gbot")}


def build_gateway(url: str, mode: str = "production") -> Gateway:
    """The gateway described in the module docstring."""
    gw = Gateway.open(url, mode=mode)
    gw.registry.register(definition("calculate"), tenant_id=None)
    for t in ACME_TOOLS:
        gw.registry.register(t, tenant_id="acme")
    gw.registry.register(private, tenant_id="globex")
    gw.registry.set_status("quar", "acme", ToolStatus.QUARANTINED)
    gw.registry.set_status("old", "acme", ToolStatus.DEPRECATED)
    gw.registry.set_status("off", "acme", ToolStatus.DISABLED)
    sketch = lookup.definition(tenant_id="acme").model_copy(update={"name": "sketch"})
    gw.registry.save(sketch)  # a draft
    acts = [Activation(tool=n) for n in ("calculate", "lookup", "old", "repo", "flaky",
                                         "guarded", "quar", "sketch", "off")]
    acts.append(Activation(tool="pinned", version="9.9.9"))
    gw.registry.put_profile(Profile(name="main", tenant_id="acme", autonomy=3,
                                    scopes=("repo:read",), activations=tuple(acts)))
    for name in ("bot", "other-bot"):
        gw.registry.put_agent(Agent(name=name, profile="main", tenant_id="acme"))
    gw.registry.put_agent(Agent(name="orphan", profile="missing", tenant_id="acme"))
    gw.registry.put_profile(Profile(name="g", tenant_id="globex", autonomy=3,
                                    activations=(Activation(tool="private"),)))
    gw.registry.put_agent(Agent(name="gbot", profile="g", tenant_id="globex"))
    gw.runtime.health.set("acme:flaky", Health.UNAVAILABLE, retry_after_s=600)
    return gw


@contextmanager
def api_for(where: Path | str, mode: str = "production") -> Iterator[RestClient]:
    """The app over a fresh gateway: ``where`` is a database URL, or a directory for
    ``sqlite:///{where}/tk.db``; closed on exit."""
    gw = build_gateway((where if isinstance(where, str) else f"sqlite:///{where}/tk.db"), mode)
    try:
        tokens = {who: gw.store.tokens.create(tenant_id=t, role=r, agent=a)[1]
                  for who, (t, r, a) in _TOKENS.items()}
        with TestClient(create_app(gw), raise_server_exceptions=False) as client:
            yield RestClient(gw=gw, client=client, tokens=tokens, tenant="acme")
    finally:
        gw.close()

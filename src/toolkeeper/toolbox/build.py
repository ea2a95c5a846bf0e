"""``build_tools`` (seed 001): the one entry point that hands an agent framework its tools.

Each framework has an adapter module ``toolkeeper.adapters.<framework>`` exposing
``build(toolbox, **options)``, installed with an optional extra. The adapter is found by
name (a plugin lookup: the adapters sit in the layer above the Toolbox), so a framework that
is not installed costs nothing until it is asked for.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from toolkeeper.errors import UserError
from toolkeeper.toolbox.toolbox import Toolbox

if TYPE_CHECKING:
    from toolkeeper.gateway import Gateway


@dataclass(frozen=True, slots=True)
class Framework:
    """An adapter: the extra that installs its framework and the modules it imports."""

    extra: str
    modules: tuple[str, ...]
    distribution: str = "toolkeeper"
    """Whose extra it is: Strands' only the client's (it cannot sit beside the server)."""


FRAMEWORKS: dict[str, Framework] = {
    "pydantic_ai": Framework("pydantic-ai", ("pydantic_ai",)),
    "openai_agents": Framework("openai-agents", ("agents",)),
    "langchain": Framework("langchain", ("langchain_core", "langgraph")),
    "google_adk": Framework("google-adk", ("google.adk",)),
    # every strands-agents release requires mcp<2.2, the server mcp 2.3: the client's extra
    "strands": Framework("strands", ("strands",), "toolkeeper-client"),
}
"""Framework name → its extra (``pip install '<distribution>[<extra>]'``); read-only."""

NOT_YET: dict[str, str] = {}
"""Frameworks asked for that have no adapter yet, and why; read-only."""


def build_tools(target: Toolbox | Gateway | Any, *, framework: str, agent: str | None = None,
                tenant_id: str = "default", **options: Any) -> Any:
    """The tools of ``agent`` for ``framework`` (``pydantic_ai``, ``openai_agents``,
    ``langchain``, ``google_adk``, ``strands``) over ``target``: a
    :class:`Toolbox`, a :class:`Gateway` (in-process) or a ``toolkeeper.client`` client
    (``Client``/``AsyncClient``; the client sits in the layer above, so it is recognised
    by its ``toolbox_backend()`` method, and its token fixes the tenant). ``options`` go to
    the adapter's ``build``; what it returns is the framework's own (a toolset, a list of
    tools…)."""
    toolbox = _toolbox(target, agent, tenant_id)
    spec = FRAMEWORKS.get(framework)
    if framework in NOT_YET:
        raise UserError(f"no {framework} adapter yet: {NOT_YET[framework]}")
    if spec is None:
        known = ", ".join(sorted(FRAMEWORKS))
        raise UserError(f"unknown framework {framework!r}; known: {known}")
    adapter = _adapter(framework, spec)
    built: Any = adapter.build(toolbox, **options)
    return built


def _toolbox(target: Any, agent: str | None, tenant_id: str) -> Toolbox:
    if isinstance(target, Toolbox):
        if agent is not None and agent != target.agent:
            raise UserError(f"the toolbox is agent {target.agent!r}'s, not {agent!r}'s")
        return target
    if agent is None:
        raise UserError("build_tools needs agent= (the agent whose tools to build)")
    # a Gateway exists only once its module is loaded; the client distribution has none
    gateway = sys.modules.get("toolkeeper.gateway")
    if gateway is not None and isinstance(target, gateway.Gateway):
        from toolkeeper.toolbox.inprocess import InProcessBackend

        return Toolbox(InProcessBackend(target), agent=agent, tenant_id=tenant_id)
    backend = getattr(target, "toolbox_backend", None)
    if callable(backend):  # a toolkeeper.client client
        return Toolbox(backend(), agent=agent, tenant_id=tenant_id)
    raise UserError("build_tools takes a Toolbox, a Gateway or a toolkeeper client, not a "
                    f"{type(target).__name__}")


def _missing(spec: Framework) -> UserError:
    # where the server is absent this is toolkeeper-client: its own extra is the one to add
    slim = importlib.util.find_spec("toolkeeper.gateway") is None
    return UserError(f"this adapter needs its optional dependencies: "
                     f"pip install '{'toolkeeper-client' if slim else spec.distribution}"
                     f"[{spec.extra}]'")


def _adapter(framework: str, spec: Framework) -> Any:
    for module in spec.modules:
        try:
            found = importlib.util.find_spec(module)
        except ModuleNotFoundError:  # a dotted name (google.adk) whose parent is missing
            found = None
        if found is None:
            raise _missing(spec)
    try:
        return importlib.import_module(f"toolkeeper.adapters.{framework}")
    except ImportError as exc:  # a dependency of the framework itself is missing
        root = (exc.name or "").partition(".")[0]
        if root and not root.startswith("toolkeeper"):
            raise _missing(spec) from exc
        raise

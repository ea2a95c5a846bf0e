"""Builds the provider for a tool definition: the one place implementations are chosen.

Python code comes only from the operator. A tool a tenant defined through the API
(``origin == "api"``) runs a ``native`` entry point only if the operator registered it
(``natives``: config ``tools:``, ``Gateway.open(natives=…)``, ``registry.register``) — the
factory never imports a module for it — and gets no constructor arguments (``init``) and
no ``artifact``. The registry refuses such definitions when they are written; this holds
for a row that reached the database some other way (an older version wrote it).
"""

from __future__ import annotations

import importlib
import logging
from collections.abc import Callable, Container, Mapping
from types import MappingProxyType
from typing import Any

from pydantic import BaseModel

from toolkeeper.errors import OperationRefused, ToolkeeperError, ToolSignal, UserError
from toolkeeper.model.reasons import Reason
from toolkeeper.model.tool import ToolDefinition
from toolkeeper.providers.artifacts import ArtifactLibrary
from toolkeeper.providers.base import Provider, ToolPolicy
from toolkeeper.providers.function import FunctionProvider, UsesFunctions
from toolkeeper.providers.native import BaseTool, NativeProvider


def load_entry_point(ref: str) -> Any:
    """``module.path:Name`` → the object (a BaseTool class or a ``@tool`` function)."""
    module, sep, attr = ref.partition(":")
    if not sep or not module or not attr:
        raise UserError(f"entry point {ref!r} must look like 'module.path:Name'")
    try:
        obj: Any = importlib.import_module(module)
        for part in attr.split("."):
            obj = getattr(obj, part)
    except (ImportError, AttributeError) as exc:
        raise UserError(f"cannot load {ref!r}: {exc}") from exc
    return obj


def as_tool_instance(obj: Any, config: Mapping[str, Any] | None = None,
                     ref: str = "the entry point") -> BaseTool:
    if isinstance(obj, BaseTool):
        return obj
    if isinstance(obj, type) and issubclass(obj, BaseTool):
        return obj(**(config or {})) if config else obj()
    # the type, never the object: its repr may be anything (``os:environ`` is the server's
    # whole environment)
    raise UserError(f"{ref} is a {type(obj).__name__}, not a BaseTool (class, instance, "
                    "or @tool function)")


class EntryPointNotAllowed(UserError):
    """A tool defined through the API names code the operator did not register."""

    reason = Reason.ENTRY_POINT_NOT_ALLOWED


class ProviderUnavailable(UserError):
    """A tool's provider cannot be built here: its entry point or function is gone, its
    implementation config is invalid, or its implementation type has no provider."""

    reason = Reason.PROVIDER_UNAVAILABLE


def server_problem(tool: ToolDefinition, servers: Container[str]) -> str | None:
    """Why an ``mcp`` tool cannot reach its upstream server (not among ``servers``)."""
    if tool.implementation_type not in ("mcp", "mcp_prompt", "mcp_resources"):
        return None
    server = str(tool.implementation.get("server", ""))[:200]
    if server in servers:
        return None
    return f"{tool.name}: provider unavailable: no upstream MCP server {server!r} is configured"


def _why(exc: Exception) -> str:
    """A build failure in words: ours say what is wrong; anything else only its type (its
    text may hold anything the constructor saw)."""
    if isinstance(exc, ToolSignal):
        return exc.message
    if isinstance(exc, ToolkeeperError):
        return str(exc)
    return f"building it raised {type(exc).__name__}"


def tenant_code_problem(tool: ToolDefinition) -> tuple[str, str] | None:
    """Why an API-defined ``tool`` would run code the operator did not offer, whatever its
    entry point: ``(message, pointer into the REST body)``, or ``None``. One rule for the
    registry's write-time check and this factory's build."""
    if "init" in tool.implementation:
        return ("a tool defined here takes no constructor arguments",
                "/implementation_config/init")
    if tool.implementation_type == "artifact":
        return "a tool defined here cannot run an artifact", "/implementation_type"
    return None


def _refuse_tenant_code(tool: ToolDefinition) -> None:
    problem = tenant_code_problem(tool)
    if problem is not None:
        raise EntryPointNotAllowed(f"{tool.name}: {problem[0]}")


def implementation_model(kind: str) -> type[BaseModel] | None:
    """The model of an implementation block, when toolkeeper defines one (its host-touching
    fields are marked there, see ``toolkeeper.bounds``)."""
    if kind == "http":
        from toolkeeper.providers.http import HttpEndpointConfig

        return HttpEndpointConfig
    if kind == "artifact":
        from toolkeeper.providers.artifact import ArtifactConfig

        return ArtifactConfig
    return None


class ProviderFactory:
    """Maps an implementation type to a provider; unknown types are refused, never stubbed."""

    def __init__(self, *, natives: Mapping[str, Any] | None = None,
                 functions: Mapping[str, Callable[..., Any]] | None = None,
                 builtins: Mapping[str, type[BaseTool] | BaseTool] | None = None,
                 extra: Mapping[str, Callable[[ToolDefinition], Provider]] | None = None,
                 allow_imports: bool = True, artifacts: ArtifactLibrary | None = None,
                 ) -> None:
        self.natives: dict[str, Any] = dict(natives or {})
        self.functions = dict(functions or {})
        self.builtins = dict(builtins or {})
        self.extra = dict(extra or {})
        self.allow_imports = allow_imports
        self.artifacts = artifacts or ArtifactLibrary(None)
        """The operator's installed artifacts (``artifact`` tools of config and code)."""
        self.on_artifact_drift: Callable[[ToolDefinition, str], None] | None = None
        """Called when an artifact no longer has the hash its tool pinned (the gateway
        quarantines the tool)."""

    def policy_model(self, tool: ToolDefinition) -> type[ToolPolicy]:
        """The policy model ``tool`` runs with, found without importing anything: a native
        entry point not registered here answers the base model (the call-time check, which
        sees the loaded provider's model, still bounds it)."""
        obj: Any = None
        if tool.implementation_type == "builtin":
            obj = self.builtins.get(tool.builtin_key or str(tool.implementation.get(
                "builtin_key", "")))
        elif tool.implementation_type == "native":
            obj = self.natives.get(str(tool.implementation.get("entry_point", "")))
        elif tool.implementation_type == "agent_call":
            obj = self.builtins.get("agent_call")
        elif tool.implementation_type == "rag_retrieval":
            from toolkeeper.providers.retrieval import RagRetrievalPolicy

            return RagRetrievalPolicy
        elif tool.implementation_type == "mcp_resources":
            from toolkeeper.providers.mcp_relay import ResourcesPolicy

            return ResourcesPolicy
        cls = obj if isinstance(obj, type) else type(obj)
        return cls.policy_model if issubclass(cls, BaseTool) else ToolPolicy

    def __call__(self, tool: ToolDefinition) -> Provider:
        """The provider of ``tool``; ``ProviderUnavailable`` when it cannot be built
        (``EntryPointNotAllowed`` when a tenant's tool names code it may not run)."""
        try:
            return self._build(tool)
        except EntryPointNotAllowed:
            raise
        except Exception as exc:
            why = _why(exc).removeprefix(f"{tool.name}: ")
            logging.getLogger("toolkeeper").warning("provider of %s cannot be built: %s",
                                                    tool.name, why)
            raise ProviderUnavailable(f"{tool.name}: provider unavailable: {why}") from None

    def check(self, tool: ToolDefinition, servers: Container[str]) -> None:
        """Refuse to publish ``tool`` (``provider_unavailable``) when its provider cannot be
        built here or its upstream MCP server is not among ``servers``. A tenant's tool
        naming code it may not run was refused when written (``entry_point_not_allowed``)
        and is stopped when called."""
        problem = server_problem(tool, servers)
        try:
            self(tool)
        except EntryPointNotAllowed:
            pass
        except ProviderUnavailable as exc:
            problem = str(exc)
        if problem is not None:
            raise OperationRefused(Reason.PROVIDER_UNAVAILABLE, problem)

    def pin(self, tool: ToolDefinition) -> ToolDefinition:
        """``tool`` with its artifact's current hash pinned (``implementation.artifact_hash``)
        when it is an ``artifact`` tool; other tools as they are. Called on publish."""
        if tool.implementation_type != "artifact" or tool.origin == "api":
            return tool
        try:
            found = self.artifacts.snapshot(tool.artifact_id, tool.artifact_version).hash
        except UserError as exc:
            raise OperationRefused(Reason.PROVIDER_UNAVAILABLE,
                                   f"{tool.name}: provider unavailable: {exc}") from None
        return tool.model_copy(update={"implementation": {**tool.implementation,
                                                          "artifact_hash": found}})

    def _build(self, tool: ToolDefinition) -> Provider:
        kind = tool.implementation_type
        impl = tool.implementation
        if tool.origin == "api":
            _refuse_tenant_code(tool)
        if kind in self.extra:
            return self.extra[kind](tool)
        if kind == "native":
            ref = str(impl.get("entry_point", ""))[:200]
            return NativeProvider(as_tool_instance(self._native(tool, ref), impl.get("init"),
                                                   ref))
        if kind == "builtin":
            key = tool.builtin_key or str(impl.get("builtin_key", ""))
            if key not in self.builtins:
                raise UserError(f"no built-in tool {key!r}")
            cls = self.builtins[key]
            # a live, read-only view of the allow-list
            if isinstance(cls, type) and issubclass(cls, UsesFunctions):
                return NativeProvider(cls(functions=MappingProxyType(self.functions)))
            return NativeProvider(as_tool_instance(cls, impl.get("init")))
        if kind == "agent_call":  # the agent_call built-in, its target fixed by the tool
            agent_call = self.builtins.get("agent_call")
            if not isinstance(agent_call, type):
                raise UserError("the agent_call built-in is not installed here")
            target = {k: impl[k] for k in ("target_agent_id", "target_agent_slug",
                                           "timeout_s") if k in impl}
            return NativeProvider(agent_call(**{"target": target}))
        if kind == "function":
            return FunctionProvider(str(impl.get("function_name", "")), self.functions)
        if kind == "http":
            from toolkeeper.providers.http import HttpProvider

            return HttpProvider(impl)
        if kind == "mcp":
            if tool.origin == "api":  # the servers and their credentials are the operator's
                raise UserError(f"{tool.name}: tools defined through the API cannot reach "
                                "upstream MCP servers; configure them under `servers:`")
            from toolkeeper.providers.mcp import McpProvider

            return McpProvider(impl)
        if kind in ("mcp_prompt", "mcp_resources"):  # upstream prompts and resources
            if tool.origin == "api":
                raise UserError(f"{tool.name}: tools defined through the API cannot reach "
                                "upstream MCP servers; configure them under `servers:`")
            from toolkeeper.providers.mcp_relay import relayed_provider

            return relayed_provider(kind, impl)
        if kind == "artifact":
            from toolkeeper.providers.artifact import ArtifactProvider

            return ArtifactProvider(tool, self.artifacts, self._drifted)
        raise UserError(f"{tool.name}: implementation type {kind!r} is not available here")

    def _drifted(self, tool: ToolDefinition, found: str) -> None:
        if self.on_artifact_drift is not None:
            self.on_artifact_drift(tool, found)

    def _native(self, tool: ToolDefinition, ref: str) -> Any:
        """The registered object, else (operator tools only) the imported one."""
        obj = self.natives.get(ref)
        if obj is not None:
            return obj
        if tool.origin == "api":
            raise EntryPointNotAllowed(f"{tool.name}: native tool {ref!r} is not registered "
                                       "by the operator")
        if not self.allow_imports:
            raise UserError(f"native tool {ref!r} is not registered")
        return load_entry_point(ref)

"""Native tools: the seed's ``BaseTool`` contract, and ``@tool`` for typed functions."""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable
from typing import Any, ClassVar, TypeVar, get_type_hints

from pydantic import BaseModel, ConfigDict, ValidationError, create_model

from toolkeeper.errors import ToolError, UserError
from toolkeeper.model.call import PreviewResult
from toolkeeper.model.enums import Risk, SideEffect
from toolkeeper.model.tool import ActionSpec, Compensation, ExecutionMeta, ToolDefinition
from toolkeeper.providers.base import ToolContext, ToolPolicy

P = TypeVar("P", bound=ToolPolicy)


class BaseTool:
    """Subclass to write a native tool (seed: BaseTool).

    Declare the tool as class attributes, implement ``execute`` (sync or async) and, when the
    tool can show what it would do without doing it, ``preview``. Sync methods run in a worker
    thread unless ``inline = True`` (for CPU-trivial tools).
    """

    tool_name: ClassVar[str]
    description: ClassVar[str] = ""
    version: ClassVar[str] = "1.0.0"
    capabilities: ClassVar[tuple[str, ...]] = ()
    scopes_required: ClassVar[tuple[str, ...]] = ()
    actions: ClassVar[dict[str, ActionSpec]] = {"run": ActionSpec()}
    risk_default: ClassVar[Risk] = Risk.MEDIUM
    risk_map: ClassVar[dict[str, Risk]] = {}
    side_effect: ClassVar[SideEffect] = SideEffect.IRREVERSIBLE
    idempotency_key_fields: ClassVar[tuple[str, ...]] = ()
    compensation: ClassVar[dict[str, Compensation]] = {}
    execution: ClassVar[ExecutionMeta] = ExecutionMeta()
    requires_confirmation: ClassVar[bool] = False
    policy_model: ClassVar[type[ToolPolicy]] = ToolPolicy
    inline: ClassVar[bool] = False

    def execute(self, action: str, request: dict[str, Any], context: ToolContext) -> Any:
        raise NotImplementedError

    def checked_policy(self, action: str, context: ToolContext, model: type[P], *,
                       label: str = "action") -> P:
        """The call's policy as ``model``, after the checks every built-in makes: the
        policy has that type (``tool_error``), the action exists (``action_not_found``)
        and the policy allows it (``action_not_allowed``)."""
        policy = context.policy
        if not isinstance(policy, model):
            context.fail("tool_error", f"{self.tool_name} needs a {model.__name__}")
        if action not in self.actions:
            context.fail("action_not_found", f"{self.tool_name} has no action {action!r}")
        if policy.allowed_actions is not None and action not in policy.allowed_actions:
            context.deny("action_not_allowed", f"{label} {action!r} is not allowed")
        return policy

    def preview(
        self, action: str, request: dict[str, Any], context: ToolContext
    ) -> PreviewResult | None:
        """``None`` = no preview support (a ``preview`` gate then escalates to ``confirm``)."""
        return None

    @classmethod
    def definition(cls, **overrides: Any) -> ToolDefinition:
        """The tool's registry definition, derived from its class attributes."""
        fields: dict[str, Any] = {
            "name": cls.tool_name,
            "description": cls.description or (inspect.getdoc(cls) or "").split("\n")[0],
            "version": cls.version,
            "capabilities": cls.capabilities,
            "scopes_required": cls.scopes_required,
            "actions": cls.actions,
            "risk_default": cls.risk_default,
            "risk_map": cls.risk_map,
            "side_effect": cls.side_effect,
            "idempotency_key_fields": cls.idempotency_key_fields,
            "compensation": cls.compensation,
            "execution": cls.execution,
            "requires_confirmation": cls.requires_confirmation,
            "implementation_type": "native",
            "implementation": {"entry_point": f"{cls.__module__}:{cls.__qualname__}"},
        }
        fields.update(overrides)
        return ToolDefinition(**fields)


def _overrides_preview(obj: BaseTool) -> bool:
    return type(obj).preview is not BaseTool.preview


class NativeProvider:
    """Runs a ``BaseTool`` instance for the execute step."""

    def __init__(self, tool: BaseTool) -> None:
        self.tool = tool
        self.policy_model = type(tool).policy_model
        self._has_preview = _overrides_preview(tool)
        self._async_exec = inspect.iscoroutinefunction(tool.execute)
        self._async_preview = inspect.iscoroutinefunction(tool.preview)
        self._inline = type(tool).inline
        self.sync_execute: Callable[[str, dict[str, Any], ToolContext], Any] | None = None
        """Set for inline tools: the pipeline calls it directly (no coroutine, no timer —
        an inline tool cannot be interrupted, so keep inline tools CPU-trivial)."""
        self.needs_context = True
        """``False`` for ``@tool`` functions without a ``ToolContext`` parameter."""
        if isinstance(tool, _FunctionTool):
            self.sync_execute = tool.inline_call()
            self.needs_context = tool.ctx_param is not None
        elif self._inline and not self._async_exec:
            self.sync_execute = tool.execute

    def supports_preview(self, action: str) -> bool:
        return self._has_preview

    async def preview(
        self, action: str, arguments: dict[str, Any], ctx: ToolContext
    ) -> PreviewResult | None:
        if not self._has_preview:
            return None
        if self._async_preview:
            result = await self.tool.preview(action, arguments, ctx)  # type: ignore[misc]
        elif self._inline:
            result = self.tool.preview(action, arguments, ctx)
        else:
            result = await asyncio.to_thread(self.tool.preview, action, arguments, ctx)
        return _as_preview(result)

    async def execute(self, action: str, arguments: dict[str, Any], ctx: ToolContext) -> Any:
        if self._async_exec:
            return await self.tool.execute(action, arguments, ctx)
        if self._inline:
            return self.tool.execute(action, arguments, ctx)
        return await asyncio.to_thread(self.tool.execute, action, arguments, ctx)


def _as_preview(value: Any) -> PreviewResult | None:
    if value is None or isinstance(value, PreviewResult):
        return value
    return PreviewResult(summary=str(value)[:200], data=value)


class _FunctionTool(BaseTool):
    """A ``BaseTool`` built by ``@tool`` around one typed function (action ``run``)."""

    fn: Callable[..., Any]
    args_model: type[BaseModel]
    ctx_param: str | None
    json_native: bool = False
    """Every parameter is a plain JSON type without defaults to fill: skip pydantic."""
    preview_fn: Callable[..., Any] | None = None

    async def execute(
        self, action: str, request: dict[str, Any], context: ToolContext
    ) -> Any:
        kwargs = self._kwargs(request, context)
        if inspect.iscoroutinefunction(self.fn):
            return await self.fn(**kwargs)
        if self.inline:
            return self.fn(**kwargs)
        return await asyncio.to_thread(self.fn, **kwargs)

    async def preview(  # type: ignore[override]
        self, action: str, request: dict[str, Any], context: ToolContext
    ) -> PreviewResult | None:
        if self.preview_fn is None:
            return None
        result = self.preview_fn(**self._kwargs(request, context))
        if inspect.isawaitable(result):
            result = await result
        return _as_preview(result)

    def inline_call(self) -> Callable[[str, dict[str, Any], ToolContext], Any] | None:
        """A direct synchronous entry for ``inline=True`` sync functions, else ``None``."""
        if not self.inline or inspect.iscoroutinefunction(self.fn):
            return None
        fn, to_kwargs = self.fn, self._kwargs
        if self.json_native and not self.ctx_param:  # _kwargs would return the request
            return lambda action, request, context: fn(**request)
        return lambda action, request, context: fn(**to_kwargs(request, context))

    def _kwargs(self, request: dict[str, Any], context: ToolContext) -> dict[str, Any]:
        if self.json_native:  # the pipeline's JSON Schema check already proved the types
            if self.ctx_param:
                return {**request, self.ctx_param: context}
            return request
        try:
            parsed = self.args_model.model_validate(request)
        except ValidationError as exc:  # schema passed; a stricter type (e.g. date) did not
            raise ToolError("invalid_arguments", str(exc).splitlines()[0]) from exc
        kwargs = {name: getattr(parsed, name) for name in type(parsed).model_fields}
        if self.ctx_param:
            kwargs[self.ctx_param] = context
        return kwargs


_JSON_NATIVE = frozenset({str, int, bool, dict, list, Any})


def tool(
    fn: Callable[..., Any] | None = None,
    *,
    name: str | None = None,
    description: str | None = None,
    side_effect: SideEffect = SideEffect.IRREVERSIBLE,
    risk: Risk = Risk.MEDIUM,
    scopes: tuple[str, ...] = (),
    capabilities: tuple[str, ...] = (),
    idempotency_key_fields: tuple[str, ...] = (),
    requires_confirmation: bool = False,
    inline: bool = False,
    timeout_s: float = 30.0,
    policy_model: type[ToolPolicy] = ToolPolicy,
    preview: Callable[..., Any] | None = None,
) -> Any:
    """Turn a typed function into a one-action native tool; its JSON Schema comes from the
    signature. A parameter annotated ``ToolContext`` receives the call context.

    Sync functions run in a worker thread unless ``inline=True``.
    """

    def wrap(func: Callable[..., Any]) -> type[BaseTool]:
        hints = get_type_hints(func)
        sig = inspect.signature(func)
        fields: dict[str, Any] = {}
        ctx_param = None
        for pname, param in sig.parameters.items():
            ann = hints.get(pname, Any)
            if ann is ToolContext:
                ctx_param = pname
                continue
            if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
                raise UserError(f"@tool {func.__name__}: *args/**kwargs cannot be described")
            default = ... if param.default is param.empty else param.default
            fields[pname] = (ann, default)
        json_native = all(ann in _JSON_NATIVE and default is ...
                          for ann, default in fields.values())
        model = create_model(
            f"{func.__name__}_args", __config__=ConfigDict(extra="forbid"), **fields
        )
        schema = model.model_json_schema()
        schema.pop("title", None)
        schema["additionalProperties"] = False
        doc = (inspect.getdoc(func) or "").split("\n")[0]
        attrs: dict[str, Any] = {
            "tool_name": name or func.__name__,
            "description": description if description is not None else doc,
            "actions": {"run": ActionSpec(input_schema=schema, side_effect=side_effect)},
            "risk_default": risk,
            "side_effect": side_effect,
            "scopes_required": tuple(scopes),
            "capabilities": tuple(capabilities),
            "idempotency_key_fields": tuple(idempotency_key_fields),
            "requires_confirmation": requires_confirmation,
            "execution": ExecutionMeta(is_pure=side_effect is SideEffect.PURE, timeout_s=timeout_s),
            "policy_model": policy_model,
            "inline": inline,
            "fn": staticmethod(func),
            "args_model": model,
            "ctx_param": ctx_param,
            "json_native": json_native,
            "preview_fn": staticmethod(preview) if preview else None,
            "__module__": func.__module__,
            "__qualname__": func.__qualname__,
            "__doc__": func.__doc__,
        }
        cls = type(func.__name__, (_FunctionTool,), attrs)
        if preview is None:
            setattr(cls, "preview", BaseTool.preview)  # noqa: B010 - no preview support
        return cls

    return wrap(fn) if fn is not None else wrap

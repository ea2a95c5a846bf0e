"""From config entries to runnable things: tool definitions, native objects, functions.

Shared by ``check`` (which reports what cannot be resolved) and ``apply`` (which refuses
to write anything then). Entry points are imported with the config file's directory on
``sys.path``, so ``myapp.tools:PayInvoice`` next to ``toolkeeper.yaml`` just works.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager, suppress
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from toolkeeper import builtins
from toolkeeper.config.model import BuiltinEntry, ConfigFile, DefinitionEntry, NativeEntry
from toolkeeper.errors import UserError
from toolkeeper.model.tool import DEFAULT_INPUT_SCHEMA, ToolDefinition
from toolkeeper.providers.artifacts import ArtifactLibrary
from toolkeeper.providers.base import ToolPolicy
from toolkeeper.providers.factory import load_entry_point
from toolkeeper.providers.native import BaseTool, _FunctionTool

Entry = BuiltinEntry | NativeEntry | DefinitionEntry


@dataclass(frozen=True, slots=True, kw_only=True)
class ResolvedTool:
    """One ``tools:`` entry, resolved as far as possible."""

    index: int
    """Position in ``tools:``."""
    entry: Entry
    """The entry as written."""
    definition: ToolDefinition | None = None
    """The definition to register; ``None`` when it could not be built."""
    policy_model: type[ToolPolicy] | None = None
    """The tool's policy model (``ToolPolicy`` for providers without one)."""
    native: Any = None
    """The imported BaseTool class/instance of a ``native`` entry."""
    problem: tuple[str, str] | None = None
    """``(rule, message)`` when resolution failed."""

    @property
    def tenant(self) -> str | None:
        """Owning tenant (``None``: global)."""
        return self.entry.tenant

    @property
    def path(self) -> tuple[str | int, ...]:
        """The entry's node path in the file."""
        return ("tools", self.index)

    @property
    def is_function_tool(self) -> bool:
        """Whether the native object was made by ``@tool`` (not a BaseTool subclass)."""
        cls = self.native if isinstance(self.native, type) else type(self.native)
        return isinstance(cls, type) and issubclass(cls, _FunctionTool)


@contextmanager
def importable_from(base_dir: Path) -> Iterator[None]:
    """Temporarily put ``base_dir`` first on ``sys.path`` (process-wide: keep it short)."""
    entry = str(base_dir.resolve())
    added = entry not in sys.path
    if added:
        sys.path.insert(0, entry)
    try:
        yield
    finally:
        if added:
            with suppress(ValueError):
                sys.path.remove(entry)


def importable_elsewhere(ref: str) -> bool:
    """Whether ``module:Name``'s top-level module is found on this process's own path
    (``sys.path`` and the import hooks of installed packages, not the modules already
    imported): what a server or CLI run without the config file can load."""
    top = ref.partition(":")[0].split(".")[0]
    for finder in sys.meta_path:
        find = getattr(finder, "find_spec", None)
        try:
            if find is not None and find(top, None) is not None:
                return True
        except (ImportError, ValueError):
            continue
    return False


def import_object(ref: str, base_dir: Path) -> Any:
    """``module:Name`` imported with ``base_dir`` on the path; raises ``UserError``."""
    with importable_from(base_dir):
        try:
            return load_entry_point(ref)
        except UserError:
            raise
        except Exception as exc:  # the module itself failed to import
            raise UserError(f"cannot load {ref!r}: {type(exc).__name__}: {exc}") from exc


def tool_class(obj: Any) -> type[BaseTool] | None:
    """The BaseTool class of a native object (class, ``@tool`` function or instance)."""
    cls = obj if isinstance(obj, type) else type(obj)
    return cls if issubclass(cls, BaseTool) else None


def _policy(entry: BuiltinEntry | NativeEntry) -> dict[str, Any]:
    return {**entry.overrides.get("policy", {}), **entry.policy}


def resolve_entry(index: int, entry: Entry, base_dir: Path) -> ResolvedTool:
    """Build the definition of one entry; failures become a ``problem``."""
    try:
        if isinstance(entry, BuiltinEntry):
            definition = builtins.definition(entry.builtin, **{
                **entry.overrides, "policy": _policy(entry)})
            model = builtins.BUILTINS[entry.builtin].policy_model
            return ResolvedTool(index=index, entry=entry, definition=definition,
                                policy_model=model)
        if isinstance(entry, NativeEntry):
            return _resolve_native(index, entry, base_dir)
        definition = entry.to_definition()
        return ResolvedTool(index=index, entry=entry, definition=definition,
                            policy_model=policy_model_for(definition, {}, base_dir))
    except (ValidationError, UserError, TypeError) as exc:
        return ResolvedTool(index=index, entry=entry,
                            problem=("invalid_definition", _first_line(exc)))


def _resolve_native(index: int, entry: NativeEntry, base_dir: Path) -> ResolvedTool:
    try:
        obj = import_object(entry.native, base_dir)
    except UserError as exc:
        return ResolvedTool(index=index, entry=entry, problem=("native_invalid", str(exc)))
    cls = tool_class(obj)
    if cls is None:
        return ResolvedTool(index=index, entry=entry, native=obj, problem=(
            "native_invalid", f"{entry.native} is not a BaseTool class or @tool function"))
    definition = cls.definition(tenant_id=entry.tenant, **{
        **entry.overrides, "policy": _policy(entry)})
    return ResolvedTool(index=index, entry=entry, definition=definition,
                        policy_model=cls.policy_model, native=obj)


def resolve_tools(config: ConfigFile, base_dir: Path) -> list[ResolvedTool]:
    """Every ``tools:`` entry, in file order."""
    library = ArtifactLibrary(None if config.artifacts is None
                              else base_dir / config.artifacts.dir)
    return [_with_artifact(resolve_entry(i, entry, base_dir), library)
            for i, entry in enumerate(config.tools)]


def _with_artifact(rt: ResolvedTool, library: ArtifactLibrary) -> ResolvedTool:
    """An ``artifact`` tool's artifact must be installed; its declared inputs (and outputs,
    description) are the tool's schemas unless the entry writes its own."""
    d = rt.definition
    if d is None or d.implementation_type != "artifact":
        return rt
    try:
        manifest = library.snapshot(d.artifact_id, d.artifact_version).manifest
    except UserError as exc:
        return replace(rt, definition=None, problem=("artifact_not_installed", str(exc)))
    update: dict[str, Any] = {}
    if d.input_schema == DEFAULT_INPUT_SCHEMA:
        update["input_schema"] = manifest.input_schema()
    if d.output_schema is None and manifest.outputs is not None:
        update["output_schema"] = manifest.outputs
    if not d.description and manifest.description:
        update["description"] = manifest.description[:4000]
    return replace(rt, definition=d.model_copy(update=update))


def policy_model_for(definition: ToolDefinition, natives: Mapping[str, Any],
                     base_dir: Path) -> type[ToolPolicy] | None:
    """The policy model a definition runs with (``None``: its native cannot be loaded)."""
    key = definition.builtin_key or definition.implementation.get("builtin_key")
    if definition.implementation_type == "builtin" and key in builtins.BUILTINS:
        return builtins.BUILTINS[str(key)].policy_model
    if definition.implementation_type == "native":
        ref = str(definition.implementation.get("entry_point", ""))
        try:
            obj = natives[ref] if ref in natives else import_object(ref, base_dir)
        except UserError:
            return None
        cls = tool_class(obj)
        return cls.policy_model if cls is not None else None
    return ToolPolicy


def load_functions(config: ConfigFile, base_dir: Path
                   ) -> tuple[dict[str, Callable[..., Any]], dict[str, str]]:
    """The ``functions:`` allow-list imported: ``(callables, {name: problem})``."""
    loaded: dict[str, Callable[..., Any]] = {}
    problems: dict[str, str] = {}
    for name, ref in config.functions.items():
        try:
            obj = import_object(ref, base_dir)
        except UserError as exc:
            problems[name] = str(exc)
            continue
        if not callable(obj):
            problems[name] = f"{ref} is not callable"
            continue
        loaded[name] = obj
    return loaded, problems


def _first_line(exc: Exception) -> str:
    if isinstance(exc, ValidationError):
        err = exc.errors()[0]
        where = ".".join(str(p) for p in err["loc"])
        return f"{where}: {err['msg']}" if where else str(err["msg"])
    return str(exc).splitlines()[0] if str(exc) else type(exc).__name__

"""An immutable, in-memory snapshot of definitions, compiled for the hot path.

Built from the store (tools, published snapshots, profiles, agents, tenant policy) and
swapped atomically on change; providers, validators and policy instances are created
lazily once per snapshot.
"""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, overload

import jsonschema_rs
from pydantic import ValidationError

from toolkeeper.bounds import TenantBounds
from toolkeeper.canonical import digest
from toolkeeper.errors import ConfigError, UserError
from toolkeeper.model.enums import Mode, Risk, ToolStatus
from toolkeeper.model.gates import GateMatrix, loosening, strictest
from toolkeeper.model.profile import Activation, Adjuster, Agent, Condition, Limits, Profile
from toolkeeper.model.tool import ToolDefinition
from toolkeeper.pipeline.coercions import Coercions
from toolkeeper.providers.base import Provider, ToolPolicy
from toolkeeper.store.registry import RegistryRepo, StoredProfile, StoredTool, parse_profile
from toolkeeper.upstream.link import SERVERS_SETTING, servers_from

ProviderFactory = Callable[[ToolDefinition], Provider]
SnapshotLoader = Callable[[str], list[ToolDefinition]]


_Record = tuple[str, ToolDefinition, Sequence[ToolDefinition]]
"""A tool's record id, its working definition and its published snapshots."""


class _Unparsed:
    """A stored tool not looked up yet (10,000 definitions need not be parsed to start)."""

    __slots__ = ("snaps", "stored")

    def __init__(self, stored: StoredTool, snaps: Sequence[ToolDefinition]) -> None:
        self.stored, self.snaps = stored, snaps


class LazySnapshots(Sequence[ToolDefinition]):
    """A tool's published snapshots, read from the store the first time they are needed
    (a catalog of 10,000 tools need not parse 10,000 snapshots to start)."""

    __slots__ = ("_items", "_load", "_record_id")
    _lock = threading.Lock()
    """One for all: loads are rare, and 10,000 locks cost a noticeable part of start-up."""

    def __init__(self, record_id: str, load: SnapshotLoader) -> None:
        self._record_id, self._load = record_id, load
        self._items: list[ToolDefinition] | None = None

    def _get(self) -> list[ToolDefinition]:
        items = self._items
        if items is None:
            with LazySnapshots._lock:
                if self._items is None:
                    self._items = self._load(self._record_id)
                items = self._items
        return items

    @overload
    def __getitem__(self, i: int) -> ToolDefinition: ...

    @overload
    def __getitem__(self, i: slice) -> Sequence[ToolDefinition]: ...

    def __getitem__(self, i: int | slice) -> ToolDefinition | Sequence[ToolDefinition]:
        return self._get()[i]

    def __len__(self) -> int:
        return len(self._get())


@dataclass(slots=True)
class TenantPolicy:
    """Tenant-wide policy: gate matrix overrides, adjusters, limits."""

    gates: dict[str, dict[str, str]] = field(default_factory=dict)
    adjusters: tuple[Adjuster, ...] = ()
    limits: Limits = field(default_factory=Limits)

    @classmethod
    def from_setting(cls, value: dict[str, Any]) -> TenantPolicy:
        """The policy as stored in the ``tenant_policies`` setting."""
        try:
            return cls(gates=value.get("gates") or {},
                       adjusters=tuple(Adjuster.model_validate(a)
                                       for a in value.get("adjusters") or ()),
                       limits=Limits.model_validate(value.get("limits") or {}))
        except ValueError as exc:
            raise ConfigError(f"stored tenant policy is invalid: {exc}") from exc


class CompiledTool:
    """One runnable version of a tool: definition, provider, validators."""

    __slots__ = ("_coercions", "_scopes", "_validators", "definition", "provider", "record_id",
                 "status")

    def __init__(self, record_id: str, definition: ToolDefinition, status: ToolStatus,
                 provider: Provider) -> None:
        self.record_id = record_id
        self.definition = definition
        self.status = status
        self.provider = provider
        self._validators: dict[str, Any] = {}
        self._coercions: dict[str, Any] = {}
        self._scopes: dict[str, frozenset[str]] = {}

    def scopes(self, action: str) -> frozenset[str]:
        """The scopes ``action`` requires (the tool's and the action's own)."""
        found = self._scopes.get(action)
        if found is None:
            found = self._scopes[action] = self.definition.action_scopes(action)
        return found

    def coercions(self, action: str) -> Any:
        """The documented coercions this action's schema allows (see ``validate``)."""
        c = self._coercions.get(action)
        if c is None:
            c = self._coercions[action] = Coercions.of(
                self.definition.action_input_schema(action))
        return c

    def validator(self, action: str) -> Any:
        v = self._validators.get(action)
        if v is None:
            schema = self.definition.action_input_schema(action)
            v = self._validators[action] = jsonschema_rs.Draft202012Validator(schema)
        return v


class CompiledProfile:
    """A profile with its gate matrix, activations and adjusters ready to evaluate."""

    __slots__ = ("_policies", "_version", "activations", "adjusters", "limits", "matrix",
                 "profile", "scopes")

    def __init__(self, profile: Profile, tenant: TenantPolicy, *, stored: bool = False) -> None:
        """``stored``: compile a profile read back from the store, where a ``gates`` cell
        looser than the tenant's (the tenant tightened it later) is a no-op; a profile
        being written with one is refused (``ConfigError``), since it could not apply."""
        self.profile = profile
        self.scopes = frozenset(profile.scopes)
        """The scopes the profile grants."""
        self.matrix = GateMatrix(tenant.gates, profile.gates)
        looser = loosening(self.matrix, profile.gates)
        if looser and not stored:
            raise ConfigError(
                f"profile {profile.name!r}: {'; '.join(looser)}. Profiles and activations "
                "may only make a gate stricter; loosen it in the tenant's gates instead")
        self.activations = merged_activations(profile)
        self.adjusters = tuple(compile_adjuster(a) for a in (*tenant.adjusters,
                                                              *profile.adjusters))
        self.limits = (tenant.limits, profile.limits)
        self._version: str | None = None
        self._policies: dict[tuple[str, str], ToolPolicy] = {}

    @property
    def version(self) -> str:
        """Digest of the profile (bound into approvals); computed on first use."""
        if self._version is None:
            self._version = digest(self.profile.model_dump(mode="json"))[:23]
        return self._version

    def policy_for(self, tool: CompiledTool) -> ToolPolicy:
        """The tool's policy model filled from tool defaults ⊕ this profile's activation."""
        key = (tool.definition.name, tool.definition.version)
        pol = self._policies.get(key)
        if pol is None:
            act = self.activations.get(tool.definition.name)
            values = {**tool.definition.policy, **(act.policy if act else {})}
            try:
                pol = tool.provider.policy_model.model_validate(values)
            except ValidationError as exc:
                raise ConfigError(f"profile {self.profile.name!r}: policy for "
                                  f"{tool.definition.name!r} is invalid: {exc}") from exc
            self._policies[key] = pol
        return pol


ProfileKey = tuple[str, str]
"""A profile's tenant and name."""


class CompiledProfiles(Mapping[ProfileKey, CompiledProfile]):
    """The snapshot's profiles by tenant and name, each parsed and compiled the first time
    it is looked up (1,000 profiles need not be compiled to start). One that does not
    compile is logged then and is absent: its agents get nothing, the rest still works."""

    __slots__ = ("_compiled", "_pending", "_tenants")

    def __init__(self, tenants: Mapping[str, TenantPolicy]) -> None:
        self._tenants = tenants
        self._pending: dict[ProfileKey, Profile | StoredProfile] = {}
        self._compiled: dict[ProfileKey, CompiledProfile | None] = {}

    def add(self, item: Profile | StoredProfile) -> None:
        self._pending[(item.tenant_id, item.name)] = item

    def get(self, key: ProfileKey,  # type: ignore[override]
            default: CompiledProfile | None = None) -> CompiledProfile | None:
        found = self._compiled.get(key, _MISSING)
        if found is _MISSING:
            found = self._compile(key)
        return default if found is None else found

    def __getitem__(self, key: ProfileKey) -> CompiledProfile:
        found = self.get(key)
        if found is None:
            raise KeyError(key)
        return found

    def __contains__(self, key: object) -> bool:
        return isinstance(key, tuple) and self.get(key) is not None

    def __iter__(self) -> Iterator[ProfileKey]:
        return iter([key for key in list(self._pending) if self.get(key) is not None])

    def __len__(self) -> int:
        return sum(1 for _ in self)

    def _compile(self, key: ProfileKey) -> CompiledProfile | None:
        # concurrent first lookups may both compile: equal results, the last one stays
        item = self._pending.get(key)
        if item is None:
            return None  # no such profile (not remembered: any name can be asked for)
        compiled = None
        try:
            profile = (parse_profile(item.definition_json) if isinstance(item, StoredProfile)
                       else item)
            compiled = CompiledProfile(profile, self._tenants.get(key[0], TenantPolicy()),
                                       stored=True)
        except (ConfigError, ValidationError):  # fail closed, for this profile only
            logging.getLogger("toolkeeper").exception(
                "profile %s/%s is invalid and was not loaded", key[0], key[1])
        self._compiled[key] = compiled
        return compiled


_MISSING: Any = object()


def merged_activations(profile: Profile) -> dict[str, Activation]:
    """The profile's enabled activations by tool. A tool activated more than once gets the
    strictest of their gate statements (whatever their order); they must agree otherwise."""
    by_tool: dict[str, Activation] = {}
    for act in profile.activations:
        seen = by_tool.get(act.tool)
        by_tool[act.tool] = act if seen is None else _merge(profile.name, seen, act)
    return {tool: act for tool, act in by_tool.items() if act.enabled}


_MUST_AGREE = ("enabled", "actions", "policy", "version", "limits")


def _merge(profile: str, a: Activation, b: Activation) -> Activation:
    differ = [f for f in _MUST_AGREE if getattr(a, f) != getattr(b, f)]
    if differ:
        raise ConfigError(f"profile {profile!r} activates {a.tool!r} twice with different "
                          f"{', '.join(differ)}: write one activation per tool")
    gates = {action: strictest(g for g in (a.gates.get(action), b.gates.get(action)) if g)
             for action in a.gates.keys() | b.gates.keys()}
    confirms = [c for c in (a.requires_confirmation, b.requires_confirmation) if c is not None]
    return a.model_copy(update={"gates": dict(sorted(gates.items())),
                                "requires_confirmation": any(confirms) if confirms else None})


AdjusterFn = Callable[[dict[str, Any], dict[str, Any]], "Risk | int | None"]


@dataclass(frozen=True, slots=True)
class CompiledAdjuster:
    adjuster: Adjuster
    tests: tuple[Callable[[dict[str, Any], dict[str, Any]], bool], ...]

    def applies(self, tool: str, action: str) -> bool:
        a = self.adjuster
        return (not a.tools or tool in a.tools) and (not a.actions or action in a.actions)

    def holds(self, args: dict[str, Any], ctx: dict[str, Any]) -> bool:
        return all(t(args, ctx) for t in self.tests)


_MISSING = object()


def _lookup(args: Any, path: str) -> Any:
    cur = args
    for part in path.split("."):
        if not isinstance(cur, dict) or part not in cur:
            return _MISSING
        cur = cur[part]
    return cur


def _compare(op: str, value: Any, expected: Any, pattern: re.Pattern[str] | None) -> bool:
    if op == "exists":
        return value is not _MISSING
    if value is _MISSING:
        return False
    try:
        match op:
            case "eq":
                return bool(value == expected)
            case "ne":
                return bool(value != expected)
            case "gt":
                return bool(value > expected)
            case "gte":
                return bool(value >= expected)
            case "lt":
                return bool(value < expected)
            case "lte":
                return bool(value <= expected)
            case "in":
                return value in expected
            case "not_in":
                return value not in expected
            case "matches":
                return isinstance(value, str) and pattern is not None and bool(
                    pattern.search(value))
    except TypeError:  # comparing "abc" > 1000: the condition does not hold
        return False
    return False


def compile_condition(cond: Condition) -> Callable[[dict[str, Any], dict[str, Any]], bool]:
    pattern = re.compile(str(cond.value)) if cond.op == "matches" else None
    if cond.arg is not None:
        path = cond.arg
        return lambda args, ctx: _compare(cond.op, _lookup(args, path), cond.value, pattern)
    name = cond.context or "tool"
    return lambda args, ctx: _compare(cond.op, ctx.get(name, _MISSING), cond.value, pattern)


def compile_adjuster(adj: Adjuster) -> CompiledAdjuster:
    if adj.raise_to is None and adj.raise_by == 0:
        raise ConfigError(f"adjuster {adj.name or '?'} raises nothing: set raise_to or raise_by")
    return CompiledAdjuster(adj, tuple(compile_condition(c) for c in adj.when))


class Catalog:
    """Lookup tables for one snapshot of the definitions."""

    def __init__(self, *, mode: Mode, provider_factory: ProviderFactory) -> None:
        self.mode = mode
        self._factory = provider_factory
        self._records: dict[tuple[str, str], _Record | _Unparsed] = {}
        self._runnable: dict[tuple[str, str, str | None], CompiledTool | None] = {}
        self.profiles = CompiledProfiles({})
        self.agents: dict[tuple[str, str], Agent] = {}
        self.tenants: dict[str, TenantPolicy] = {}
        self._visible: dict[str, list[ToolDefinition]] = {}
        self.mcp_servers: dict[str, Any] = {}
        """Upstream MCP servers by name (``ServerConfig``; config ``servers:``)."""
        self.tenant_bounds = TenantBounds()
        """The operator's ceiling on host-touching policy (``Settings.tenant_bounds``), so
        discovery lists as callable only what the resolve step lets run."""

    def load(self, tools: Iterable[tuple[str, ToolDefinition] | StoredTool],
             versions: dict[str, list[ToolDefinition]] | SnapshotLoader,
             profiles: Iterable[Profile | StoredProfile], agents: Iterable[Agent],
             tenants: dict[str, TenantPolicy]) -> None:
        """``versions``: every tool's snapshots, or a loader called once per tool on use.
        A ``StoredTool``'s JSON is parsed when the tool is first looked up or listed, a
        profile when it is first looked up."""
        self.tenants = tenants
        for item in tools:
            record_id = item.record_id if isinstance(item, StoredTool) else item[0]
            snaps: Sequence[ToolDefinition] = (
                versions.get(record_id, []) if isinstance(versions, dict)
                else LazySnapshots(record_id, versions))
            if isinstance(item, StoredTool):
                self._records[(item.tenant_key, item.name)] = _Unparsed(item, snaps)
            else:
                tool = item[1]
                self._records[(tool.tenant_id or "*", tool.name)] = (record_id, tool, snaps)
        self.profiles = CompiledProfiles(tenants)
        for p in profiles:
            self.profiles.add(p)
        for a in agents:
            self.agents[(a.tenant_id, a.name)] = a

    def record(self, tenant_id: str, name: str) -> tuple[str, ToolDefinition,
                                                         Sequence[ToolDefinition]] | None:
        """The tenant's own tool of that name, else the global one."""
        key = (tenant_id, name) if (tenant_id, name) in self._records else ("*", name)
        rec = self._records.get(key)
        return rec if rec is None or isinstance(rec, tuple) else self._parse(key, rec)

    def _parse(self, key: tuple[str, str], pending: _Unparsed) -> _Record:
        # concurrent first lookups may both parse: equal results, the last one stays
        stored = pending.stored
        rec = (stored.record_id, ToolDefinition.model_validate_json(stored.definition_json),
               pending.snaps)
        self._records[key] = rec
        return rec

    def _tool(self, key: tuple[str, str]) -> ToolDefinition:
        rec = self._records[key]
        return (rec if isinstance(rec, tuple) else self._parse(key, rec))[1]

    def visible(self, tenant_id: str) -> list[ToolDefinition]:
        """The tenant's tools and global ones (its own win a name clash), by name.

        The snapshot never changes, so each tenant's list is built once (callers must not
        modify it)."""
        cached = self._visible.get(tenant_id)
        if cached is not None:
            return cached
        out: dict[str, tuple[str, str]] = {}
        for key in list(self._records):
            if key[0] == tenant_id or (key[0] == "*" and key[1] not in out):
                out[key[1]] = key
        listed = self._visible[tenant_id] = [self._tool(out[n]) for n in sorted(out)]
        return listed

    def all_tools(self) -> list[ToolDefinition]:
        return [self._tool(key) for key in list(self._records)]

    def artifact_tools(self) -> list[ToolDefinition]:
        """The tools implemented by an artifact; stored JSON without the word ``"artifact"``
        cannot be one, so it is skipped unparsed."""
        return [tool for key, rec in list(self._records.items())
                if isinstance(rec, tuple) or '"artifact"' in rec.stored.definition_json
                if (tool := self._tool(key)).implementation_type == "artifact"]

    def runnable(self, tenant_id: str, name: str, pin: str | None) -> CompiledTool | None:
        """The version that runs for this tenant in this mode (``None``: no such version)."""
        key = (tenant_id, name, pin)
        if key in self._runnable:
            return self._runnable[key]
        rec = self.record(tenant_id, name)
        compiled = None
        if rec is not None:
            record_id, working, snapshots = rec
            chosen = _choose_version(working, snapshots, pin, self.mode)
            if chosen is not None:
                try:
                    provider = self._factory(chosen)
                except UserError:
                    raise
                compiled = CompiledTool(record_id, chosen, working.status, provider)
        self._runnable[key] = compiled
        return compiled


def _choose_version(working: ToolDefinition, snapshots: Sequence[ToolDefinition],
                    pin: str | None, mode: Mode) -> ToolDefinition | None:
    if pin is not None:
        for snap in snapshots:
            if snap.version == pin:
                return snap
        return working if mode is Mode.DEBUG and working.version == pin else None
    if mode is Mode.DEBUG and working.status is ToolStatus.DRAFT:
        return working
    return snapshots[-1] if snapshots else None


def snapshot(reg: RegistryRepo, *, mode: Mode, factory: ProviderFactory,
             bounds: TenantBounds) -> Catalog:
    """A new snapshot of every definition in the store: tools and their versions,
    profiles, agents, tenant policies and upstream servers."""
    tenants = {key: TenantPolicy.from_setting(value)
               for key, value in (reg.get_setting("tenant_policies") or {}).items()}
    catalog = Catalog(mode=mode, provider_factory=factory)
    catalog.tenant_bounds = bounds
    catalog.mcp_servers = servers_from(reg.get_setting(SERVERS_SETTING))
    catalog.load(reg.stored_tools(), reg.versions, reg.stored_profiles(), reg.agents(),
                 tenants)
    return catalog

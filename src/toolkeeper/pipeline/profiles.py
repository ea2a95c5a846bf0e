"""Profiles and tenant policy compiled for the hot path: gate matrices, merged
activations, adjusters with their conditions. A snapshot's profiles compile on first lookup
(:class:`CompiledProfiles`), so start-up with thousands of them parses none."""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from toolkeeper.canonical import digest
from toolkeeper.errors import ConfigError
from toolkeeper.model.enums import Risk
from toolkeeper.model.gates import GateMatrix, loosening, strictest
from toolkeeper.model.profile import Activation, Adjuster, Condition, Limits, Profile
from toolkeeper.model.tool import ToolDefinition
from toolkeeper.providers.base import Provider, ToolPolicy
from toolkeeper.store.registry import StoredProfile, parse_profile


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


class CompiledProfile:
    """A profile with its gate matrix, activations and adjusters ready to evaluate."""

    __slots__ = ("_policies", "_version", "activations", "adjusters", "limits", "matrix",
                 "memo", "profile", "scopes")

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
        self.memo: dict[Any, Any] = {}
        """What the hot path derived from this profile and its snapshot (what a tool
        resolves to, its limits, its gates), kept for the snapshot's life: both are
        immutable, and a new snapshot compiles new profiles."""

    @property
    def version(self) -> str:
        """Digest of the profile (bound into approvals); computed on first use."""
        if self._version is None:
            self._version = digest(self.profile.model_dump(mode="json"))[:23]
        return self._version

    def policy_for(self, definition: ToolDefinition, provider: Provider) -> ToolPolicy:
        """The tool's policy model (its provider's) filled from the definition's defaults ⊕
        this profile's activation."""
        key = (definition.name, definition.version)
        pol = self._policies.get(key)
        if pol is None:
            act = self.activations.get(definition.name)
            values = {**definition.policy, **(act.policy if act else {})}
            try:
                pol = provider.policy_model.model_validate(values)
            except ValidationError as exc:
                raise ConfigError(f"profile {self.profile.name!r}: policy for "
                                  f"{definition.name!r} is invalid: {exc}") from exc
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

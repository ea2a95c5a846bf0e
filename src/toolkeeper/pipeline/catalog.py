"""An immutable, in-memory snapshot of definitions, compiled for the hot path.

Built from the store (tools, published snapshots, profiles, agents, tenant policy) and
swapped atomically on change; providers, validators and policy instances are created
lazily once per snapshot.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable, Iterable, Sequence
from typing import Any, overload

import jsonschema_rs

from toolkeeper.bounds import TenantBounds
from toolkeeper.errors import UserError
from toolkeeper.model.enums import Mode, ToolStatus
from toolkeeper.model.profile import Agent, Profile
from toolkeeper.model.tool import ToolDefinition
from toolkeeper.pipeline.coercions import Coercions
from toolkeeper.pipeline.profiles import CompiledProfiles, TenantPolicy
from toolkeeper.providers.base import Provider
from toolkeeper.store.registry import RegistryRepo, StoredProfile, StoredTool, parse_tool
from toolkeeper.upstream.link import SERVERS_SETTING, servers_from

_SERIALS = itertools.count(1)

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


class Catalog:
    """Lookup tables for one snapshot of the definitions."""

    def __init__(self, *, mode: Mode, provider_factory: ProviderFactory) -> None:
        self.serial = next(_SERIALS)
        """This snapshot among every one this process made (what remembers it by number
        holds no reference to it: a replaced snapshot is freed at once)."""
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
        rec = (stored.record_id, parse_tool(stored.definition_json),
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

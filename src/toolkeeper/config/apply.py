"""``toolkeeper apply``: sync a config into a gateway's store, idempotently.

The whole file is checked and every tool change is planned *before* anything is written,
so a refused file leaves the store as it was. Re-applying an unchanged file writes no
definition (the report shows 0 changes); each apply records one ``config.applied`` audit
event with the file's digest.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field, replace
from datetime import timedelta
from functools import partial
from pathlib import Path
from typing import Any, Protocol, TypeVar

from toolkeeper.canonical import digest
from toolkeeper.config.check import Rule, check
from toolkeeper.config.loader import load_file
from toolkeeper.config.model import ConfigFile, DefinitionEntry, NativeEntry, render_path
from toolkeeper.config.resolve import ResolvedTool, load_functions, resolve_tools
from toolkeeper.config.retrieval import read_documents, sync_pipelines
from toolkeeper.errors import ConfigError, OperationRefused
from toolkeeper.model.enums import ToolStatus
from toolkeeper.model.events import EventType
from toolkeeper.model.profile import Agent, Profile
from toolkeeper.pipeline.catalog import Catalog
from toolkeeper.providers.factory import ProviderFactory
from toolkeeper.secrets.base import BlobStore, SecretsStore
from toolkeeper.services.events import system_event
from toolkeeper.services.identities import IdentityService
from toolkeeper.services.registry import (
    RegistryService,
    content_hash,
    normalized,
    semver_key,
)
from toolkeeper.services.retrieval import RetrievalService
from toolkeeper.store import Store
from toolkeeper.upstream.link import SERVERS_SETTING

ADVISORY_RULES = frozenset({Rule.UNGATED_HIGH_RISK, Rule.POLICY_MODEL_MISSING,
                            Rule.TESTS_MISSING, Rule.ONLY_BESIDE_CONFIG})
"""Governance findings ``check`` reports (CI fails on them) that do not block an apply."""
_LIVE = (ToolStatus.PUBLISHED, ToolStatus.DEPRECATED)
R = TypeVar("R", Profile, Agent)


class ConfigTarget(Protocol):
    """What an apply writes through: a ``Gateway`` (config sits below it, so it names
    only what it uses)."""

    @property
    def store(self) -> Store: ...
    @property
    def factory(self) -> ProviderFactory: ...
    @property
    def registry(self) -> RegistryService: ...
    @property
    def identities(self) -> IdentityService: ...
    @property
    def catalog(self) -> Catalog: ...
    @property
    def retrieval(self) -> RetrievalService: ...
    def changes_batch(self) -> AbstractContextManager[None]: ...
    def definitions_changed(self) -> None: ...
    def sync_servers(self, names: Sequence[str] | None = None) -> dict[str, Any]: ...


@dataclass(slots=True)
class ApplyReport:
    """What an apply did, by ``kind:tenant/name``."""

    created: list[str] = field(default_factory=list)
    """Records that did not exist before."""
    updated: list[str] = field(default_factory=list)
    """Records whose content (or publish state) changed."""
    unchanged: list[str] = field(default_factory=list)
    """Records already as the file says."""
    pruned: list[str] = field(default_factory=list)
    """Profiles and agents deleted because the file no longer has them (``prune``)."""

    @property
    def changes(self) -> int:
        """How many records were written or deleted."""
        return len(self.created) + len(self.updated) + len(self.pruned)


@dataclass(frozen=True, slots=True)
class _ToolPlan:
    resolved: ResolvedTool
    label: str
    op: str
    """``create``, ``update``, ``publish`` or ``keep``."""


def apply_file(gw: ConfigTarget, path: str | Path, *, prune: bool = False) -> ApplyReport:
    """Load the config at ``path`` and apply it (relative paths resolve next to it)."""
    config = load_file(path)
    return apply_config(gw, config, base_dir=Path(path).resolve().parent, prune=prune)


def apply_config(gw: ConfigTarget, config: ConfigFile, *, base_dir: Path,
                 prune: bool = False) -> ApplyReport:
    """Sync upstream MCP servers (connecting to each to import its tools), tools, the
    function allow-list, tenant policy, profiles and agents to ``gw``."""
    _sync_servers(gw, config)
    _refuse_violations(gw, config, base_dir)
    functions, _problems = load_functions(config, base_dir)
    gw.factory.functions.update(functions)
    plans = [_plan(gw, config, rt) for rt in resolve_tools(config, base_dir)]
    documents = read_documents(config, base_dir)
    report = ApplyReport()
    with gw.changes_batch():  # one catalog reload for the whole file
        for label in sync_pipelines(gw.retrieval, config, documents):
            _record(report, label[0], label[1])
        for plan in plans:
            _apply_tool(gw, config, plan)
            _record(report, plan.op, plan.label)
        for tenant, tc in config.tenants.items():
            _sync_tenant(gw, report, tenant, tc.model_dump(mode="json"))
        _sync_profiles(gw, config, report)
        if prune:
            _prune(gw, config, report)
            gw.definitions_changed()
    gw.store.audit.append([system_event(
        EventType.CONFIG_APPLIED, None, digest=digest(config.model_dump(mode="json")),
        path=config.source, changes=report.changes)])
    return report


def _sync_servers(gw: ConfigTarget, config: ConfigFile) -> None:
    """Store the servers (every replica reads them), then list each and import its tools.
    An unreachable server is logged and keeps its imported tools as they were."""
    wanted = [s.model_dump(mode="json") for s in config.servers]
    reg = gw.store.registry
    if (reg.get_setting(SERVERS_SETTING) or []) != wanted:
        reg.put_setting(SERVERS_SETTING, wanted)
        gw.definitions_changed()
    if config.servers:
        gw.sync_servers([s.name for s in config.servers])


def _refuse_violations(gw: ConfigTarget, config: ConfigFile, base_dir: Path) -> None:
    found = [v for v in check(config, base_dir=base_dir, known_tools=gw.catalog.all_tools(),
                              known_functions=gw.factory.functions, natives=gw.factory.natives)
             if v.rule not in ADVISORY_RULES]
    if found:
        first = found[0]
        more = f" (and {len(found) - 1} more)" if len(found) > 1 else ""
        raise ConfigError(f"[{first.rule}] {first.path}: {first.message}{more}",
                          path=config.source, line=first.line, column=first.column,
                          problems=[str(v) for v in found])


def _plan(gw: ConfigTarget, config: ConfigFile, rt: ResolvedTool) -> _ToolPlan:
    d = rt.definition
    assert d is not None  # unresolvable entries were refused by the check
    label = f"tool:{d.tenant_id + '/' if d.tenant_id else ''}{d.name}"
    rec = gw.store.registry.tool(d.name, d.tenant_id)
    if rec is None or rec[1].tenant_id != d.tenant_id:
        return _ToolPlan(rt, label, "create")
    tool_id, current = rec
    if d.implementation_type == "artifact":
        # the pin is the registry's (set on publish); a drifted artifact's tool stays
        # quarantined until an admin publishes it again
        if current.status is ToolStatus.QUARANTINED:
            return _ToolPlan(rt, label, "keep")
        pin = current.implementation.get("artifact_hash")
        if pin is not None and "artifact_hash" not in d.implementation:
            d = d.model_copy(update={"implementation": {**d.implementation,
                                                        "artifact_hash": pin}})
            rt = replace(rt, definition=d)
    d = normalized(d)  # as the registry stores it
    same = content_hash(current) == content_hash(d)
    snapshots = gw.store.registry.versions(tool_id)
    clash = [s for s in snapshots if s.version == d.version and content_hash(s) != content_hash(d)]
    if clash or (not same and snapshots and rt.entry.publish and
                 _older(d.version, snapshots[-1].version)):
        pos = config.position(rt.path)
        latest = snapshots[-1].version
        raise ConfigError(
            f"{render_path(rt.path)}: tool {d.name!r} changed but version {d.version} is "
            f"already published (latest {latest}): bump `version` to publish the change",
            path=config.source, line=pos[0] if pos else None, column=pos[1] if pos else None)
    if not same:
        return _ToolPlan(rt, label, "update")
    if rt.entry.publish and current.status not in _LIVE:
        return _ToolPlan(rt, label, "publish")
    return _ToolPlan(rt, label, "keep")


def _older(version: str, latest: str) -> bool:
    try:
        return semver_key(version) <= semver_key(latest)
    except OperationRefused:
        return False  # not semver: the registry's publish refuses it with its own reason


def _apply_tool(gw: ConfigTarget, config: ConfigFile, plan: _ToolPlan) -> None:
    rt, d = plan.resolved, plan.resolved.definition
    assert d is not None
    if rt.native is not None:
        gw.factory.natives[str(d.implementation["entry_point"])] = rt.native
    if plan.op == "keep":
        return
    publish = rt.entry.publish
    try:
        if plan.op == "publish":
            gw.registry.publish(d.name, d.tenant_id)
        elif isinstance(rt.entry, DefinitionEntry):
            gw.registry.save(d)
            if publish:
                gw.registry.publish(d.name, d.tenant_id)
        elif isinstance(rt.entry, NativeEntry):
            overrides = {**rt.entry.overrides, "policy": d.policy}
            gw.registry.register(rt.native, tenant_id=d.tenant_id, publish=publish,
                                 replace=True, **overrides)
        else:
            gw.registry.register(d, tenant_id=None, publish=publish, replace=True)
    except OperationRefused as exc:
        pos = config.position(rt.path)
        raise ConfigError(f"{render_path(rt.path)}: {d.name}: {exc.message} ({exc.reason})",
                          path=config.source, line=pos[0] if pos else None,
                          column=pos[1] if pos else None) from exc


def _record(report: ApplyReport, op: str, label: str) -> None:
    {"create": report.created, "keep": report.unchanged}.get(op, report.updated).append(label)


def _sync_tenant(gw: ConfigTarget, report: ApplyReport, tenant: str,
                 wanted: dict[str, Any]) -> None:
    label = f"tenant:{tenant}"
    stored = (gw.store.registry.get_setting("tenant_policies") or {}).get(tenant)
    if stored is not None and digest(stored) == digest(wanted):
        report.unchanged.append(label)
        return
    gw.store.registry.ensure_tenant(tenant)
    gw.registry.set_tenant_policy(tenant, gates=wanted["gates"], adjusters=wanted["adjusters"],
                                  limits=wanted["limits"])
    (report.updated if stored is not None else report.created).append(label)


def _sync_profiles(gw: ConfigTarget, config: ConfigFile, report: ApplyReport) -> None:
    wanted = [p.model_copy(update={"origin": "config"}) for p in config.profiles]
    _sync_named(report, "profile", wanted, gw.store.registry.profiles(),
                partial(gw.registry.put_profile, replace=True))
    agents = [a if a.endpoint is None else a.model_copy(update={
        "endpoint": a.endpoint.model_copy(update={"origin": "config"})}) for a in config.agents]
    _sync_named(report, "agent", agents, gw.store.registry.agents(),
                partial(gw.registry.put_agent, replace=True))


def _sync_named(report: ApplyReport, kind: str, wanted: Sequence[R], stored: Iterable[R],
                put: Callable[[R], None]) -> None:
    """Write each wanted profile/agent that differs from the stored one of its name."""
    current = {(r.tenant_id, r.name): r for r in stored}
    for record in wanted:
        label = f"{kind}:{record.tenant_id}/{record.name}"
        existing = current.get((record.tenant_id, record.name))
        if existing == record:
            report.unchanged.append(label)
            continue
        put(record)
        (report.created if existing is None else report.updated).append(label)


def mentioned_tenants(config: ConfigFile) -> set[str]:
    """Tenants the file speaks for (prune only touches these)."""
    found = set(config.tenants) | {p.tenant_id for p in config.profiles}
    found |= {a.tenant_id for a in config.agents}
    found |= {e.tenant for e in config.tools if e.tenant is not None}
    return found


def _prune(gw: ConfigTarget, config: ConfigFile, report: ApplyReport) -> None:
    reg = gw.store.registry
    for tenant in sorted(mentioned_tenants(config)):
        keep_agents = {a.name for a in config.agents if a.tenant_id == tenant}
        keep_profiles = {p.name for p in config.profiles if p.tenant_id == tenant}
        gone = sorted(f"agent:{tenant}/{a.name}" for a in reg.agents()
                      if a.tenant_id == tenant and a.name not in keep_agents)
        gone += sorted(f"profile:{tenant}/{p.name}" for p in reg.profiles()
                       if p.tenant_id == tenant and p.name not in keep_profiles)
        for agent in [a for a in reg.agents() if a.tenant_id == tenant]:
            if agent.name not in keep_agents:  # its tokens are revoked, as on every face
                gw.identities.drop_agent(tenant, agent.name)
        reg.delete_missing("profiles", tenant, keep_profiles)
        report.pruned += gone


def config_settings(config: ConfigFile) -> dict[str, Any]:
    """Keyword arguments for ``Settings`` from the file's ``mode`` and ``settings``
    (only what the file sets, so the caller's defaults stay)."""
    s = config.settings
    out: dict[str, Any] = {} if config.mode is None else {"mode": config.mode}
    for name in ("approval_ttl", "outcome_ttl", "stale_grace", "outcome_retention",
                 "audit_retention"):
        value = getattr(s, f"{name}_s")
        if value is not None:
            out[name] = timedelta(seconds=value)
    for name in ("max_payload_bytes", "audit_level", "audit_arguments", "audit_durability",
                 "mcp_resync_s", "tenant_bounds", "recent_calls_max",
                 "max_pending_approvals", "retention_every_s", "call_stats"):
        if getattr(s, name) is not None:
            out[name] = getattr(s, name)
    for name in ("max_top_k", "max_document_chars", "max_batch_documents"):
        if getattr(config.retrieval, name) is not None:
            out[f"retrieval_{name}"] = getattr(config.retrieval, name)
    return out


def secrets_store(config: ConfigFile, base_dir: Path,
                  blobs: BlobStore | None = None) -> SecretsStore | None:
    """The secrets backend the file configures (``None`` when it configures none).

    ``embedded`` keeps ciphertexts in ``blobs`` (a gateway's ``store.blobs``).
    """
    from toolkeeper.secrets import open_backend

    sc = config.secrets
    if sc is None:
        return None
    key_file = None if sc.key_file is None else base_dir / sc.key_file
    vault = None if sc.vault is None else sc.vault.relative_to(base_dir)
    return open_backend(sc.backend, blobs, key_file=key_file, source=config.source,
                        vault=vault)

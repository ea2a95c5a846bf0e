"""The tool lifecycle (SPEC §6): drafts, publish with immutable snapshots, semver versions;
profiles, agents and tenant policy. Every change reloads the gateway's snapshot."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from typing import Any

from toolkeeper.builtins.agent_call import refuse_endpoint
from toolkeeper.canonical import digest
from toolkeeper.errors import ConfigError, OperationRefused, UserError
from toolkeeper.model.enums import ToolStatus
from toolkeeper.model.events import EventType
from toolkeeper.model.mcp_names import check_names, mcp_names
from toolkeeper.model.profile import Agent, Profile
from toolkeeper.model.reasons import Reason
from toolkeeper.model.tool import ToolDefinition
from toolkeeper.pipeline.catalog import Catalog
from toolkeeper.pipeline.profiles import CompiledProfile, TenantPolicy
from toolkeeper.pipeline.runtime import Settings
from toolkeeper.providers.ceiling import check_tool
from toolkeeper.providers.factory import ProviderFactory
from toolkeeper.providers.native import BaseTool
from toolkeeper.services.events import system_event
from toolkeeper.services.retrieval import RetrievalService
from toolkeeper.services.tool_code import (
    check_tenant_code,
    keeps_operator_wiring,
    refuse_literal_secrets,
)
from toolkeeper.store import Store
from toolkeeper.store.db import utcnow
from toolkeeper.store.registry import ToolRow, definition_hash

SEMVER = re.compile(r"^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(?:-([0-9A-Za-z.-]+))?"
                    r"(?:\+[0-9A-Za-z.-]+)?$")
_VOLATILE = {"status", "published_at", "definition_hash", "is_active"}


def semver_key(version: str) -> tuple[int, int, int, int, str]:
    m = SEMVER.match(version)
    if m is None:
        raise OperationRefused(Reason.INVALID_VERSION, f"{version!r} is not semver X.Y.Z")
    pre = m.group(4)
    return int(m.group(1)), int(m.group(2)), int(m.group(3)), 0 if pre else 1, pre or ""


def content_hash(tool: ToolDefinition) -> str:
    return digest(tool.model_dump(mode="json", exclude=_VOLATILE))


def with_query(schema: dict[str, Any] | None) -> dict[str, Any]:
    """``schema`` as an object schema whose ``query`` property is a required string."""
    out = dict(schema or {})
    out["type"] = "object"
    props = out.get("properties")
    props = dict(props) if isinstance(props, dict) else {}
    query = props.get("query")
    props["query"] = {**query, "type": "string"} if isinstance(query, dict) else {
        "type": "string"}
    required = out.get("required")
    rest = [r for r in required if r != "query"] if isinstance(required, list) else []
    out["properties"], out["required"] = props, ["query", *rest]
    return out


def normalized(tool: ToolDefinition) -> ToolDefinition:
    """A ``rag_retrieval`` tool with ``query`` a required string in its input and output
    schemas (seed 002); other tools as they are."""
    if tool.implementation_type != "rag_retrieval":
        return tool
    actions = {name: spec if spec.input_schema is None else spec.model_copy(
        update={"input_schema": with_query(spec.input_schema)})
        for name, spec in tool.actions.items()}
    return tool.model_copy(update={"input_schema": with_query(tool.input_schema),
                                   "output_schema": with_query(tool.output_schema),
                                   "actions": actions})


def visible_to(tool: ToolDefinition | None, tenant_id: str | None, what: str) -> ToolDefinition:
    """``tool`` if ``tenant_id`` may see it: its own tools and the global ones. Another
    tenant's tool is ``not_found``, exactly like one that does not exist (``what`` names
    the tool asked for)."""
    if tool is None or tool.tenant_id not in (tenant_id, None):
        raise OperationRefused(Reason.NOT_FOUND, f"no tool {what!r}")
    return tool


def owned_by(tool: ToolDefinition | None, tenant_id: str | None, what: str) -> ToolDefinition:
    """``tool`` if ``tenant_id`` may change it: ``not_found`` as :func:`visible_to`, and
    ``forbidden`` for a global tool (they come from the operator's code and config)."""
    tool = visible_to(tool, tenant_id, what)
    if tool.tenant_id != tenant_id:
        raise OperationRefused(Reason.FORBIDDEN, f"{tool.name} is a global tool: no tenant "
                               "may change it")
    return tool


def _comparable(tool: ToolDefinition) -> str:
    """``tool``'s content without what publishing adds (status, hashes, the pinned
    artifact hash)."""
    impl = {k: v for k, v in tool.implementation.items() if k != "artifact_hash"}
    return content_hash(tool.model_copy(update={"implementation": impl}))


def refuse_existing(kind: str, name: str, tenant_id: str | None) -> None:
    where = f" in tenant {tenant_id!r}" if tenant_id else ""
    raise OperationRefused(Reason.ALREADY_EXISTS,
                           f"a different {kind} {name!r} already exists{where}; pass "
                           "replace=True to replace it", kind=kind, name=name)


def same_or_refuse(kind: str, record: Profile | Agent,
                   stored: Iterable[Profile | Agent]) -> None:
    """Refuse ``record`` if a stored one of its tenant and name has other content."""
    for old in stored:
        if (old.tenant_id, old.name) == (record.tenant_id, record.name) and \
                old.model_dump(mode="json") != record.model_dump(mode="json"):
            refuse_existing(kind, record.name, record.tenant_id)


class RegistryService:
    """Writes definitions to ``store``; ``changed`` is called after each write (the
    gateway reloads its snapshot, ``catalog``, and tells the other processes)."""

    def __init__(self, store: Store, *, factory: ProviderFactory, settings: Settings,
                 catalog: Callable[[], Catalog], changed: Callable[[], None],
                 retrieval: RetrievalService | None = None) -> None:
        self._store = store
        self._retrieval = retrieval or RetrievalService(store.retrieval, settings)
        self._factory = factory
        self._settings = settings
        self._catalog = catalog
        self._changed = changed

    def register(self, obj: Any, *, tenant_id: str | None = None, publish: bool = True,
                 replace: bool = False, **overrides: Any) -> ToolDefinition:
        """Register a BaseTool (class/instance), a ``@tool`` function or a definition. A
        tool of that name with other content is refused (``already_exists``) unless
        ``replace``; registering the identical definition again changes nothing."""
        if isinstance(obj, ToolDefinition):
            definition = obj.model_copy(update={"tenant_id": tenant_id, **overrides})
        else:
            cls = obj if isinstance(obj, type) else type(obj)
            if not (isinstance(cls, type) and issubclass(cls, BaseTool)):
                raise OperationRefused(Reason.INVALID_ARGUMENTS,
                                       f"a {type(obj).__name__} is not a tool")
            definition = cls.definition(tenant_id=tenant_id, **overrides)
        if not replace:
            self._refuse_other_tool(definition)
        if not isinstance(obj, ToolDefinition):
            self._factory.natives[definition.implementation["entry_point"]] = obj
        self.save(definition)
        if publish:
            definition = self.publish(definition.name, tenant_id)
        return definition

    def _refuse_other_tool(self, tool: ToolDefinition) -> None:
        rec = self._store.registry.tool(tool.name, tool.tenant_id)
        if rec is None or rec[1].tenant_id != tool.tenant_id:
            return
        if _comparable(rec[1]) != _comparable(self.check_retrieval(tool)):
            refuse_existing("tool", tool.name, tool.tenant_id)

    def save(self, tool: ToolDefinition) -> ToolDefinition:
        """Create or update the working copy. Publishing is only via :meth:`publish`."""
        tool = self.check_retrieval(tool)
        existing = self._store.registry.tool(tool.name, tool.tenant_id)
        current = existing[1] if existing and existing[1].tenant_id == tool.tenant_id else None
        if current is None or mcp_names(current) != mcp_names(tool):
            check_names(tool, self._listed_with(tool.tenant_id))
        if tool.status is ToolStatus.PUBLISHED and (
                current is None or current.status is not ToolStatus.PUBLISHED):
            raise OperationRefused(Reason.PUBLISH_VIA_ENDPOINT,
                                   "publish a tool with publish(), not by setting its status")
        if current is not None and tool.status is ToolStatus.DRAFT and \
                current.status in (ToolStatus.PUBLISHED, ToolStatus.DEPRECATED):
            # editing a published tool keeps it published; the new content runs only
            # once published under a new version
            tool = tool.model_copy(update={"status": current.status,
                                           "published_at": current.published_at})
        self._store.registry.upsert_tool(tool)
        self._changed()
        return tool

    def _listed_with(self, tenant_id: str | None) -> Callable[[str], ToolDefinition | None]:
        """Finds a tool sharing MCP listings with the tenant's tools (globals for global)."""
        def lookup(name: str) -> ToolDefinition | None:
            found = self._store.registry.tool(name, tenant_id)
            return found[1] if found else None
        return lookup

    def publish(self, name: str, tenant_id: str | None) -> ToolDefinition:
        """Snapshot the working copy as an immutable version and mark it published."""
        rec = self._own(name, tenant_id)
        tool_id, tool = rec
        semver_key(tool.version)
        self.check_retrieval(tool)
        self._factory.check(tool, self._catalog().mcp_servers)
        tool = self._factory.pin(tool)  # an artifact's hash, recorded now
        snapshots = self._store.registry.versions(tool_id)
        same = [s for s in snapshots if s.version == tool.version]
        if same and content_hash(same[0]) != content_hash(tool):
            raise OperationRefused(Reason.INVALID_VERSION, f"{name} {tool.version} is already "
                                   "published with other content; create a new version")
        published = tool.model_copy(update={
            "status": ToolStatus.PUBLISHED, "published_at": tool.published_at or utcnow(),
            "definition_hash": definition_hash(tool)})
        if not same:
            if snapshots and semver_key(tool.version) <= semver_key(snapshots[-1].version):
                raise OperationRefused(Reason.INVALID_VERSION,
                                       f"{tool.version} must be greater than "
                                       f"{snapshots[-1].version}")
            self._store.registry.add_version(tool_id, published)
        self._store.registry.upsert_tool(published)
        self._store.audit.append([system_event(
            EventType.TOOL_PUBLISHED, tenant_id, tool=name, version=tool.version,
            definition_hash=published.definition_hash)])
        self._changed()
        return published

    def new_version(self, name: str, version: str, tenant_id: str | None) -> ToolDefinition:
        """``POST /tools/{id}/version``: bump the version (must increase) and snapshot it."""
        _tool_id, tool = self._own(name, tenant_id)
        if semver_key(version) <= semver_key(tool.version):
            raise OperationRefused(Reason.INVALID_VERSION,
                                   f"{version} must be greater than {tool.version}")
        self._store.registry.upsert_tool(tool.model_copy(update={"version": version}))
        return self.publish(name, tenant_id)

    def set_status(self, name: str, tenant_id: str | None, status: ToolStatus) -> ToolDefinition:
        if status is ToolStatus.PUBLISHED:
            raise OperationRefused(Reason.PUBLISH_VIA_ENDPOINT, "use publish()")
        _tool_id, tool = self._own(name, tenant_id)
        updated = tool.model_copy(update={"status": status})
        self._store.registry.upsert_tool(updated)
        if status is ToolStatus.QUARANTINED:
            self._store.audit.append([system_event(EventType.TOOL_QUARANTINED, tenant_id,
                                                      tool=name)])
        self._changed()
        return updated

    def quarantine_artifact(self, tool: ToolDefinition, found_hash: str) -> None:
        """The artifact of ``tool`` no longer has the hash pinned at publish: quarantine
        the tool (calls stop with ``tool_quarantined`` until an admin publishes it again,
        under a new version, which pins the new hash) — as a drifted upstream MCP tool."""
        rec = self._store.registry.tool(tool.name, tool.tenant_id)
        if rec is None or rec[1].tenant_id != tool.tenant_id or \
                rec[1].status is ToolStatus.QUARANTINED:
            return
        self._store.registry.upsert_tool(rec[1].model_copy(
            update={"status": ToolStatus.QUARANTINED}))
        self._store.audit.append([system_event(
            EventType.TOOL_QUARANTINED, tool.tenant_id, tool=tool.name, version=tool.version,
            artifact_id=tool.artifact_id, artifact_version=tool.artifact_version,
            pinned_hash=tool.implementation.get("artifact_hash"), artifact_hash=found_hash)])
        self._changed()

    def check_artifacts(self) -> list[str]:
        """Quarantine every live ``artifact`` tool whose artifact changed since it was
        published (at start-up; calls check it again). Returns the quarantined names. An
        artifact no longer installed is left to the call (``artifact_not_installed``)."""
        drifted = []
        for tool in self._catalog().artifact_tools():
            pinned = tool.implementation.get("artifact_hash")
            if pinned is None or \
                    tool.status not in (ToolStatus.PUBLISHED, ToolStatus.DEPRECATED):
                continue
            try:
                found = self._factory.artifacts.snapshot(tool.artifact_id,
                                                         tool.artifact_version).hash
            except UserError:
                continue
            if found != pinned:
                self.quarantine_artifact(tool, found)
                drifted.append(tool.name)
        return drifted

    def create(self, tool: ToolDefinition) -> ToolDefinition:
        """Create a tenant tool; creation is draft only and names are unique (SPEC §6)."""
        if tool.tenant_id is None:
            raise OperationRefused(Reason.FORBIDDEN, "global tools are not created by a tenant")
        if tool.status is ToolStatus.PUBLISHED:
            raise OperationRefused(Reason.PUBLISH_VIA_ENDPOINT,
                                   "create the tool as a draft, then publish it")
        if tool.status is not ToolStatus.DRAFT:
            raise OperationRefused(Reason.INVALID_ARGUMENTS, "a tool is created as a draft")
        semver_key(tool.version)
        tool = tool.model_copy(update={"origin": "api"})
        check_tenant_code(tool, None, self._factory.functions)
        refuse_literal_secrets(tool)
        check_tool(tool, self._factory, self._settings.tenant_bounds)
        taken = self._store.registry.tool(tool.name, tool.tenant_id)
        if taken is not None:
            where = "this tenant" if taken[1].tenant_id else "a global tool"
            raise OperationRefused(Reason.CONFLICT, f"the name {tool.name!r} is taken by {where}")
        return self.save(tool)

    def update(self, tool: ToolDefinition) -> ToolDefinition:
        """Replace the working copy of an existing tenant tool; published snapshots stay.
        It becomes the tenant's definition (origin ``api``) unless it is the operator's and
        only its governance changed (:func:`keeps_operator_wiring`)."""
        _tool_id, current = self._own(tool.name, tool.tenant_id)
        if keeps_operator_wiring(tool, current):
            tool = tool.model_copy(update={"origin": current.origin})
        else:
            tool = tool.model_copy(update={"origin": "api"})  # now the tenant's definition
            check_tenant_code(tool, current, self._factory.functions)
        refuse_literal_secrets(tool)
        check_tool(tool, self._factory, self._settings.tenant_bounds)
        if tool.status is ToolStatus.DRAFT and current.published_at is not None:
            raise OperationRefused(Reason.INVALID_STATE, f"{tool.name} was published: it can "
                                   "be deprecated or disabled, not returned to draft")
        return self.save(tool)

    def retrieval_pipelines(self, tenant_id: str) -> list[str]:
        """The names of the tenant's retrieval pipelines (``rag_retrieval`` tools name one,
        by id or name; ``toolkeeper.services.retrieval`` manages them)."""
        return [p.name for p in self._retrieval.pipelines(tenant_id)]

    def add_retrieval_pipeline(self, tenant_id: str, pipeline_id: str) -> None:
        """Create the tenant's retrieval pipeline named ``pipeline_id`` (idempotent)."""
        self._retrieval.ensure(tenant_id, pipeline_id)

    def check_retrieval(self, tool: ToolDefinition) -> ToolDefinition:
        """A ``rag_retrieval`` tool names a pipeline its tenant owns; its schemas are
        normalised so ``query`` (string) is present and required. Other tools pass as-is."""
        if tool.implementation_type != "rag_retrieval":
            return tool
        pipeline = tool.implementation.get("pipeline_id")
        if not isinstance(pipeline, str) or not pipeline:
            raise OperationRefused(Reason.INVALID_ARGUMENTS,
                                   "a rag_retrieval tool needs implementation.pipeline_id")
        if tool.tenant_id is None or self._store.retrieval.get(tool.tenant_id,
                                                                pipeline) is None:
            raise OperationRefused(Reason.INVALID_ARGUMENTS,
                                   f"no retrieval pipeline {pipeline!r} in this tenant",
                                   pipeline_id=pipeline)
        return normalized(tool)

    def visible_row(self, tenant_id: str, tool_id: str) -> ToolRow:
        """The stored tool ``tool_id`` if the tenant may see it (:func:`visible_to`)."""
        row = self._store.registry.tool_by_id(tool_id)
        visible_to(row.definition if row else None, tenant_id, tool_id)
        assert row is not None
        return row

    def own_row(self, tenant_id: str, tool_id: str) -> ToolRow:
        """The stored tool ``tool_id`` if the tenant may change it (:func:`owned_by`)."""
        row = self._store.registry.tool_by_id(tool_id)
        owned_by(row.definition if row else None, tenant_id, tool_id)
        assert row is not None
        return row

    def _own(self, name: str, tenant_id: str | None) -> tuple[str, ToolDefinition]:
        """The tool ``name`` as ``tenant_id`` may change it (:func:`owned_by`)."""
        rec = self._store.registry.tool(name, tenant_id)
        owned_by(rec[1] if rec else None, tenant_id, name)
        assert rec is not None
        return rec

    def put_profile(self, profile: Profile, *, replace: bool = False) -> None:
        """Store a profile after compiling it (gates, adjusters), so a bad one is refused
        here rather than breaking every later reload. Another profile of that name is
        refused (``already_exists``) unless ``replace``; the identical one is a no-op."""
        if not replace:
            same_or_refuse("profile", profile, self._store.registry.profiles())
        try:
            CompiledProfile(profile, self._catalog().tenants.get(profile.tenant_id,
                                                                  TenantPolicy()))
        except (ConfigError, ValueError) as exc:
            raise OperationRefused(Reason.CONFIG_INVALID, str(exc)) from exc
        self._store.registry.ensure_tenant(profile.tenant_id)
        self._store.registry.upsert_profile(profile)
        self._changed()

    def put_agent(self, agent: Agent, *, replace: bool = False) -> None:
        """Store an agent; an endpoint with a literal credential in a header, a non-http(s)
        URL or a bad network is refused (``refuse_endpoint``). Another agent of that name
        is refused (``already_exists``) unless ``replace``; the identical one is a no-op."""
        if not replace:
            same_or_refuse("agent", agent, self._store.registry.agents())
        if agent.endpoint is not None:
            refuse_endpoint(agent.endpoint)
        self._store.registry.ensure_tenant(agent.tenant_id)
        self._store.registry.upsert_agent(agent)
        self._changed()

    def set_tenant_policy(self, tenant_id: str, *, gates: dict[str, Any] | None = None,
                          adjusters: list[dict[str, Any]] | None = None,
                          limits: dict[str, Any] | None = None) -> None:
        reg = self._store.registry
        policies = dict(reg.get_setting("tenant_policies") or {})
        policies[tenant_id] = {"gates": gates or {}, "adjusters": adjusters or [],
                               "limits": limits or {}}
        reg.put_setting("tenant_policies", policies)
        self._changed()

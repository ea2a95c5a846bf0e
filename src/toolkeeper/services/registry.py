"""The tool lifecycle (SPEC §6): drafts, publish with immutable snapshots, semver versions;
profiles, agents and tenant policy. Every change reloads the gateway's snapshot."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from toolkeeper.canonical import digest
from toolkeeper.errors import OperationRefused
from toolkeeper.model.enums import ToolStatus
from toolkeeper.model.events import EventType
from toolkeeper.model.profile import Agent, Profile
from toolkeeper.model.reasons import Reason
from toolkeeper.model.tool import ToolDefinition
from toolkeeper.providers.native import BaseTool
from toolkeeper.services.events import system_event
from toolkeeper.store.db import utcnow
from toolkeeper.store.registry import definition_hash

if TYPE_CHECKING:
    from toolkeeper.gateway import Gateway

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


class RegistryService:
    def __init__(self, gw: Gateway) -> None:
        self._gw = gw

    def register(self, obj: Any, *, tenant_id: str | None = None, publish: bool = True,
                 **overrides: Any) -> ToolDefinition:
        """Register a BaseTool (class/instance), a ``@tool`` function or a definition."""
        if isinstance(obj, ToolDefinition):
            definition = obj.model_copy(update={"tenant_id": tenant_id, **overrides})
        else:
            cls = obj if isinstance(obj, type) else type(obj)
            if not (isinstance(cls, type) and issubclass(cls, BaseTool)):
                raise OperationRefused(Reason.INVALID_ARGUMENTS, f"{obj!r} is not a tool")
            definition = cls.definition(tenant_id=tenant_id, **overrides)
            self._gw.factory.natives[definition.implementation["entry_point"]] = obj
        self.save(definition)
        if publish:
            definition = self.publish(definition.name, tenant_id)
        return definition

    def save(self, tool: ToolDefinition) -> ToolDefinition:
        """Create or update the working copy. Publishing is only via :meth:`publish`."""
        existing = self._gw.store.registry.tool(tool.name, tool.tenant_id)
        current = existing[1] if existing and existing[1].tenant_id == tool.tenant_id else None
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
        self._gw.store.registry.upsert_tool(tool)
        self._gw.reload()
        return tool

    def publish(self, name: str, tenant_id: str | None) -> ToolDefinition:
        """Snapshot the working copy as an immutable version and mark it published."""
        rec = self._own(name, tenant_id)
        tool_id, tool = rec
        semver_key(tool.version)
        snapshots = self._gw.store.registry.versions(tool_id)
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
            self._gw.store.registry.add_version(tool_id, published)
        self._gw.store.registry.upsert_tool(published)
        self._gw.store.audit.append([system_event(
            EventType.TOOL_PUBLISHED, tenant_id, tool=name, version=tool.version,
            definition_hash=published.definition_hash)])
        self._gw.reload()
        return published

    def new_version(self, name: str, version: str, tenant_id: str | None) -> ToolDefinition:
        """``POST /tools/{id}/version``: bump the version (must increase) and snapshot it."""
        _tool_id, tool = self._own(name, tenant_id)
        if semver_key(version) <= semver_key(tool.version):
            raise OperationRefused(Reason.INVALID_VERSION,
                                   f"{version} must be greater than {tool.version}")
        self._gw.store.registry.upsert_tool(tool.model_copy(update={"version": version}))
        return self.publish(name, tenant_id)

    def set_status(self, name: str, tenant_id: str | None, status: ToolStatus) -> ToolDefinition:
        if status is ToolStatus.PUBLISHED:
            raise OperationRefused(Reason.PUBLISH_VIA_ENDPOINT, "use publish()")
        _tool_id, tool = self._own(name, tenant_id)
        updated = tool.model_copy(update={"status": status})
        self._gw.store.registry.upsert_tool(updated)
        if status is ToolStatus.QUARANTINED:
            self._gw.store.audit.append([system_event(EventType.TOOL_QUARANTINED, tenant_id,
                                                      tool=name)])
        self._gw.reload()
        return updated

    def _own(self, name: str, tenant_id: str | None) -> tuple[str, ToolDefinition]:
        rec = self._gw.store.registry.tool(name, tenant_id)
        if rec is None or rec[1].tenant_id != tenant_id:
            raise OperationRefused(Reason.NOT_FOUND, f"no tool {name!r} in this tenant")
        return rec

    def put_profile(self, profile: Profile) -> None:
        self._gw.store.registry.ensure_tenant(profile.tenant_id)
        self._gw.store.registry.upsert_profile(profile)
        self._gw.reload()

    def put_agent(self, agent: Agent) -> None:
        self._gw.store.registry.ensure_tenant(agent.tenant_id)
        self._gw.store.registry.upsert_agent(agent)
        self._gw.reload()

    def set_tenant_policy(self, tenant_id: str, *, gates: dict[str, Any] | None = None,
                          adjusters: list[dict[str, Any]] | None = None,
                          limits: dict[str, Any] | None = None) -> None:
        reg = self._gw.store.registry
        policies = dict(reg.get_setting("tenant_policies") or {})
        policies[tenant_id] = {"gates": gates or {}, "adjusters": adjusters or [],
                               "limits": limits or {}}
        reg.put_setting("tenant_policies", policies)
        self._gw.reload()

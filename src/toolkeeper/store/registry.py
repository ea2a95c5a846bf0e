"""Definitions: tools and their immutable version snapshots, profiles, agents, tenants."""

from __future__ import annotations

import uuid
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from typing import Any, NamedTuple

import orjson
from pydantic import ValidationError
from sqlalchemy import Connection, Text, cast, delete, insert, select, update
from sqlalchemy.exc import IntegrityError

from toolkeeper.canonical import digest
from toolkeeper.model.profile import Agent, Profile
from toolkeeper.model.tool import ToolDefinition
from toolkeeper.store.changes import bump, version
from toolkeeper.store.db import Database, as_utc, utcnow
from toolkeeper.store.schema import (
    GLOBAL_TENANT,
    agents,
    profiles,
    settings,
    tenants,
    tool_versions,
    tools,
)

HASHED_FIELDS = ("name", "description", "actions", "input_schema", "output_schema")


def definition_hash(tool: ToolDefinition) -> str:
    """What pinning protects: name, description, schemas (SPEC §7 MCP, §8)."""
    return digest(tool.model_dump(mode="json", include=set(HASHED_FIELDS)))


class StoredTool(NamedTuple):
    """One tool row as stored: ``tenant_key`` is the tenant or ``GLOBAL_TENANT``."""

    record_id: str
    tenant_key: str
    name: str
    definition_json: str


class StoredProfile(NamedTuple):
    """One profile row as stored, its definition unparsed (see :func:`parse_profile`)."""

    tenant_id: str
    name: str
    definition_json: str


class RegistryRepo:
    def __init__(self, db: Database) -> None:
        self._db = db

    @contextmanager
    def _changing(self) -> Iterator[Connection]:
        """A write transaction that also moves the ``definitions`` change counter."""
        with self._db.write() as conn:
            yield conn
            bump(conn, "definitions")

    def definitions_version(self) -> int:
        """The change counter (0 before any definition was written)."""
        return version(self._db, "definitions")

    # tools -------------------------------------------------------------------------------

    def upsert_tool(self, tool: ToolDefinition) -> str:
        """Insert or replace the working copy of a tool; returns its id."""
        now = utcnow()
        key = tool.tenant_id or GLOBAL_TENANT
        values: dict[str, Any] = {
            "version": tool.version, "status": tool.status.value, "is_active": tool.is_active,
            "definition": tool.model_dump(mode="json"), "definition_hash": definition_hash(tool),
            "published_at": tool.published_at, "updated_at": now,
        }
        with self._changing() as conn:
            existing = conn.execute(select(tools.c.id).where(
                tools.c.tenant_key == key, tools.c.name == tool.name)).scalar()
            if existing:
                conn.execute(update(tools).where(tools.c.id == existing).values(**values))
                return str(existing)
            tool_id = str(uuid.uuid4())
            conn.execute(insert(tools).values(id=tool_id, tenant_key=key, name=tool.name,
                                              created_at=now, **values))
            return tool_id

    def tools(self, tenant_id: str | None = None, *, include_global: bool = True,
              all_tenants: bool = False) -> list[tuple[str, ToolDefinition]]:
        # the JSON arrives as text and is parsed by pydantic-core in one pass (several
        # times faster than json.loads + model_validate at catalog scale)
        q = select(tools.c.id, cast(tools.c.definition, Text))
        if not all_tenants:
            keys = [tenant_id or GLOBAL_TENANT] + ([GLOBAL_TENANT] if include_global else [])
            q = q.where(tools.c.tenant_key.in_(keys))
        with self._db.read() as conn:
            rows = conn.execute(q.order_by(tools.c.name)).all()
        return [(r[0], parse_tool(r[1])) for r in rows]

    def stored_tools(self) -> list[StoredTool]:
        """Every tenant's tools with their definitions as stored JSON text, unparsed: the
        catalog parses each on first use (they were validated when written)."""
        q = select(tools.c.id, tools.c.tenant_key, tools.c.name, cast(tools.c.definition, Text))
        with self._db.read() as conn:
            return [StoredTool(*r) for r in conn.execute(q.order_by(tools.c.name)).all()]

    def tool(self, name: str, tenant_id: str | None) -> tuple[str, ToolDefinition] | None:
        with self._db.read() as conn:
            row = conn.execute(select(tools.c.id, tools.c.definition).where(
                tools.c.name == name,
                tools.c.tenant_key.in_([tenant_id or GLOBAL_TENANT, GLOBAL_TENANT]))
                .order_by(tools.c.tenant_key.desc())).first()
        return (row.id, parse_tool(row.definition)) if row else None

    def add_version(self, tool_id: str, tool: ToolDefinition) -> bool:
        """Write an immutable snapshot; ``False`` if that version already exists."""
        with self._changing() as conn:
            exists = conn.execute(select(tool_versions.c.id).where(
                tool_versions.c.tool_id == tool_id,
                tool_versions.c.version == tool.version)).first()
            if exists:
                return False
            conn.execute(insert(tool_versions).values(
                id=str(uuid.uuid4()), tool_id=tool_id, version=tool.version,
                snapshot=tool.model_dump(mode="json"), definition_hash=definition_hash(tool),
                created_at=utcnow()))
            return True

    def versions(self, tool_id: str) -> list[ToolDefinition]:
        with self._db.read() as conn:
            rows = conn.execute(select(tool_versions.c.snapshot).where(
                tool_versions.c.tool_id == tool_id).order_by(tool_versions.c.created_at)).all()
        return [parse_tool(r.snapshot) for r in rows]

    def tool_rows(self, tenant_id: str) -> list[ToolRow]:
        """The tenant's tools and the global ones, with their timestamps, by name."""
        q = select(tools).where(tools.c.tenant_key.in_([tenant_id, GLOBAL_TENANT]))
        with self._db.read() as conn:
            rows = conn.execute(q.order_by(tools.c.name, tools.c.tenant_key)).all()
        return [_tool_row(r) for r in rows]

    def tool_by_id(self, tool_id: str) -> ToolRow | None:
        """One stored tool by its id, whatever its tenant (callers check ownership)."""
        with self._db.read() as conn:
            row = conn.execute(select(tools).where(tools.c.id == tool_id)).first()
        return _tool_row(row) if row else None

    def version_rows(self, tool_id: str) -> list[tuple[ToolDefinition, datetime]]:
        """The tool's published snapshots with the time each was written, oldest first."""
        with self._db.read() as conn:
            rows = conn.execute(select(tool_versions.c.snapshot, tool_versions.c.created_at)
                                .where(tool_versions.c.tool_id == tool_id)
                                .order_by(tool_versions.c.created_at)).all()
        return [(parse_tool(r.snapshot), _utc(r.created_at)) for r in rows]

    # profiles, agents, tenants, settings -----------------------------------------------

    def upsert_profile(self, profile: Profile) -> None:
        self._upsert(profiles, {"tenant_id": profile.tenant_id, "name": profile.name},
                     {"definition": profile.model_dump(mode="json")})

    def upsert_agent(self, agent: Agent) -> None:
        self._upsert(agents, {"tenant_id": agent.tenant_id, "name": agent.name},
                     {"profile": agent.profile, "definition": agent.model_dump(mode="json")})

    def profiles(self) -> list[Profile]:
        return [parse_profile(p.definition_json) for p in self.stored_profiles()]

    def stored_profiles(self) -> list[StoredProfile]:
        """Every tenant's profiles with their definitions as stored JSON text, unparsed:
        the catalog parses each on first use."""
        q = select(profiles.c.tenant_id, profiles.c.name, cast(profiles.c.definition, Text))
        with self._db.read() as conn:
            return [StoredProfile(*r) for r in conn.execute(q).all()]

    def agents(self) -> list[Agent]:
        with self._db.read() as conn:
            rows = conn.execute(select(cast(agents.c.definition, Text))).all()
        return [parse_agent(r[0]) for r in rows]

    def delete_missing(self, table: str, tenant_id: str, keep: set[str]) -> int:
        target = {"profiles": profiles, "agents": agents}[table]
        with self._changing() as conn:
            res = conn.execute(delete(target).where(
                target.c.tenant_id == tenant_id, target.c.name.not_in(keep or {""})))
            return res.rowcount

    def delete_named(self, table: str, tenant_id: str, name: str) -> bool:
        """Delete one profile or agent (``table`` ``profiles``/``agents``); ``False`` if absent."""
        target = {"profiles": profiles, "agents": agents}[table]
        with self._changing() as conn:
            res = conn.execute(delete(target).where(
                target.c.tenant_id == tenant_id, target.c.name == name))
            return res.rowcount == 1

    def ensure_tenant(self, tenant_id: str, name: str | None = None) -> None:
        with self._changing() as conn:
            if conn.execute(select(tenants.c.id).where(tenants.c.id == tenant_id)).first():
                return
            conn.execute(insert(tenants).values(id=tenant_id, name=name or tenant_id,
                                                settings={}, created_at=utcnow()))

    def tenants(self) -> list[str]:
        with self._db.read() as conn:
            return list(conn.execute(select(tenants.c.id).order_by(tenants.c.id)).scalars())

    def tenant_names(self) -> list[tuple[str, str]]:
        """Every tenant as ``(id, name)``, in id order."""
        with self._db.read() as conn:
            rows = conn.execute(select(tenants.c.id, tenants.c.name).order_by(tenants.c.id))
            return [(row.id, row.name) for row in rows]

    def get_setting(self, key: str) -> Any:
        with self._db.read() as conn:
            row = conn.execute(select(settings.c.value).where(settings.c.key == key)).first()
        return row.value if row else None

    def put_setting(self, key: str, value: Any) -> None:
        self._upsert(settings, {"key": key}, {"value": value})

    def first_setting(self, key: str, value: Any) -> Any:
        """Store ``value`` under ``key`` unless one is there; the stored value either way.
        Processes racing to create it all end up with the same one (the primary key
        decides), e.g. a key every replica must share."""
        found = self.get_setting(key)
        if found is not None:
            return found
        try:
            with self._db.write() as conn:
                conn.execute(insert(settings).values(key=key, value=value,
                                                     updated_at=utcnow()))
        except IntegrityError:
            pass  # another process was first
        return self.get_setting(key)

    def _upsert(self, table: Any, keys: dict[str, Any], values: dict[str, Any]) -> None:
        values = {**values, "updated_at": utcnow()}
        with self._changing() as conn:
            cond = [table.c[k] == v for k, v in keys.items()]
            if conn.execute(select(*[table.c[k] for k in keys]).where(*cond)).first():
                conn.execute(update(table).where(*cond).values(**values))
            else:
                conn.execute(insert(table).values(**keys, **values))


@dataclass(frozen=True, slots=True)
class ToolRow:
    """A stored tool (working copy) with its record id and timestamps."""

    id: str
    definition: ToolDefinition
    created_at: datetime
    updated_at: datetime


def parse_profile(text: str) -> Profile:
    """A stored profile's definition."""
    profile = Profile.model_validate_json(text)
    if "origin" not in profile.model_fields_set:
        # stored before profiles recorded who wrote them: trusted no more than a tenant's
        # (config apply and ``put_profile`` write the operator's own again, with an origin)
        profile = profile.model_copy(update={"origin": "api"})
    return profile


def parse_tool(stored: str | Mapping[str, Any]) -> ToolDefinition:
    """A stored tool definition (working copy or snapshot; JSON text or parsed). One stored
    before tools recorded who wrote them (no ``origin``, or ``null``) is trusted no more
    than a tenant's (``api``): never with the operator's platform secrets. Config apply and
    registering code write the operator's own again, with an origin."""
    if isinstance(stored, str):
        try:
            tool = ToolDefinition.model_validate_json(stored)
        except ValidationError:  # e.g. ``"origin": null``: read the slow way
            return parse_tool(orjson.loads(stored))
    else:
        tool = ToolDefinition.model_validate(_origin_or_none(stored))
    if "origin" not in tool.model_fields_set:
        tool = tool.model_copy(update={"origin": "api"})
    return tool


def parse_agent(text: str) -> Agent:
    """A stored agent; an endpoint stored without an ``origin`` (or ``null``) counts as a
    tenant's (``api``), as tools and profiles do."""
    try:
        agent = Agent.model_validate_json(text)
    except ValidationError:
        data = orjson.loads(text)
        if isinstance(data.get("endpoint"), dict):
            data["endpoint"] = _origin_or_none(data["endpoint"])
        agent = Agent.model_validate(data)
    endpoint = agent.endpoint
    if endpoint is not None and "origin" not in endpoint.model_fields_set:
        agent = agent.model_copy(update={
            "endpoint": endpoint.model_copy(update={"origin": "api"})})
    return agent


def _origin_or_none(data: Mapping[str, Any]) -> dict[str, Any]:
    """``data`` without an ``origin`` that is ``null`` (read as never written)."""
    return {k: v for k, v in data.items() if k != "origin" or v is not None}


def _tool_row(row: Any) -> ToolRow:
    return ToolRow(id=row.id, definition=parse_tool(row.definition),
                   created_at=_utc(row.created_at), updated_at=_utc(row.updated_at))


def _utc(value: datetime) -> datetime:
    out = as_utc(value)
    assert out is not None  # the columns are NOT NULL
    return out

"""``settings.tenant_bounds``: the operator's ceiling for what tenants write (default: none)."""

from __future__ import annotations

import re
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from toolkeeper.bounds._markers import SHOWN, HostField, parse_network

_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,127}")
_FIELD_NAME = re.compile(r"[a-z][a-z0-9_]{0,63}")


class CommandBound(BaseModel):
    """The most a tenant's rule for one program may admit (a ``shell`` ``CommandRule``):
    its own rule for ``path`` must keep within each of these fields (subset of patterns,
    ``max_args`` at most)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    path: str = Field(description="Absolute path of the program.")
    subcommands: tuple[str, ...] | None = None
    flags: tuple[str, ...] = ()
    positional: tuple[str, ...] = ()
    max_args: int = Field(default=16, ge=0, le=256)
    dashless_options: bool = False

    @field_validator("path")
    @classmethod
    def _absolute(cls, value: str) -> str:
        if not value.startswith("/"):
            raise ValueError("a command's path must be absolute")
        return value

    @field_validator("flags", "positional")
    @classmethod
    def _patterns(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for pattern in value:
            try:
                re.compile(pattern)
            except re.error as exc:
                raise ValueError(f"not a regular expression: {pattern[:SHOWN]!r} ({exc})"
                                 ) from None
        return value


class TenantBounds(BaseModel):
    """The operator's ceiling for host-touching and permission-widening values a tenant
    writes (default: none)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    paths: tuple[str, ...] = Field(default=(), description=(
        "Host directories a tenant may point a path field at (that directory or below)."))
    networks: tuple[str, ...] = Field(default=(), description=(
        "CIDRs a tenant may allow-list, or subnets of them. Loopback, link-local and metadata\n"
        "ranges only when listed by themselves (``127.0.0.0/8``), never through ``0.0.0.0/0``."))
    commands: tuple[str | CommandBound, ...] = Field(default=(), description=(
        "Programs a tenant's ``shell`` rules may name, each with the most its arguments may\n"
        "admit; a bare path (the earlier format) admits the program with no arguments."))
    permissions: tuple[str, ...] = Field(default=(), description=(
        "Switches a tenant may turn on, in its own tools and over the operator's\n"
        "(``allow_write``, ``allow_delete``, ``allow_push``, ``allow_worktree_dirty``)."))
    env: dict[str, str | None] = Field(default_factory=dict, description=(
        "Environment variables a tenant may set besides the safe ones (``LANG``, ``LC_*``,\n"
        "``TZ``…): name -> the only value allowed, or null for any value."))

    @field_validator("paths")
    @classmethod
    def _not_empty(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        if any(not v.strip() for v in value):
            raise ValueError("empty entry: name a directory or a command")
        return value

    @field_validator("networks")
    @classmethod
    def _networks(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        bad = [v for v in value if parse_network(v) is None]
        if bad:
            raise ValueError(f"not a network: {', '.join(repr(b[:SHOWN]) for b in bad)}")
        return value

    @field_validator("commands")
    @classmethod
    def _commands(cls, value: tuple[str | CommandBound, ...]) -> tuple[str | CommandBound, ...]:
        for v in value:
            if isinstance(v, str) and not v.strip():
                raise ValueError("empty entry: name a directory or a command")
            if isinstance(v, str) and not v.startswith("/"):
                raise ValueError(f"a command's path must be absolute: {v[:SHOWN]!r}")
        return value

    @property
    def command_rules(self) -> tuple[CommandBound, ...]:
        """``commands``, each bare path as the rule it stands for (no arguments)."""
        return tuple(CommandBound(path=c) if isinstance(c, str) else c for c in self.commands)

    @field_validator("permissions")
    @classmethod
    def _permissions(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        bad = [v for v in value if not _FIELD_NAME.fullmatch(v)]
        if bad:
            raise ValueError(f"not a field name: {bad[0][:SHOWN]!r}")
        return value

    @field_validator("env")
    @classmethod
    def _env(cls, value: dict[str, str | None]) -> dict[str, str | None]:
        bad = [v for v in value if not _ENV_NAME.fullmatch(v)]
        if bad:
            raise ValueError(f"not an environment variable name: {bad[0][:SHOWN]!r}")
        return value

    def ceiling(self, marker: HostField) -> tuple[str, ...]:
        """The operator's values for fields marked like ``marker``."""
        if marker.kind == "commands":
            return tuple(c.path for c in self.command_rules)
        values: tuple[str, ...] = getattr(self, marker.kind)
        return values

    def entries(self, table: str) -> tuple[dict[str, Any], ...]:
        """The ceiling's entries for a table field of that name (``commands``)."""
        if table == "commands":
            return tuple(c.model_dump() for c in self.command_rules)
        return ()

"""Operator ceilings for the policy fields that touch the host (SPEC §8).

Some policy values reach outside the gateway's process: a repository or filesystem root, a
command, a network allow-list. Such a field is declared once, on its model, with a marker
(``repo_root: Annotated[str | None, HostPath()]``); the write-time checks of every face and
the call-time check of the pipeline find it here (whole tool definitions are checked by
``toolkeeper.providers.ceiling``, which knows each implementation's model).

Who wrote a value decides whether it is bounded. The operator (config files and library
code: tools and profiles of origin ``code``/``config``) sets anything. A tenant (whatever was
written through REST: origin ``api``) may only narrow within the ceiling, which is the
operator's ``tenant_bounds`` setting plus, on a tool the operator defined, that tool's own
value of the field:

- path: resolved (symlinks, ``..``, relative to the working directory, as the tools resolve
  it) and equal to or below a ceiling path, also resolved;
- network: a subnet of a ceiling network; and where it reaches loopback (``127/8``,
  ``0/8``, ``::1``, IPv4-compatible or mapped IPv6, NAT64), link-local or a cloud metadata
  endpoint, that part must lie in a ceiling network which itself lies inside that special
  range — an operator's ``0.0.0.0/0`` never grants ``127.0.0.1``: ``127.0.0.0/8`` must be
  listed by itself;
- command: exactly one of the ceiling's commands.

The empty ceiling (the default) lets a tenant widen nothing.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Literal, get_args, get_origin

from pydantic import BaseModel, ConfigDict, Field, field_validator

from toolkeeper.errors import OperationRefused
from toolkeeper.model.reasons import Reason
from toolkeeper.netguard import METADATA_NETWORKS, IPNetwork

if TYPE_CHECKING:
    from toolkeeper.model.tool import ToolDefinition

Kind = Literal["paths", "networks", "commands"]
_net = ipaddress.ip_network
SPECIAL_NETWORKS: tuple[IPNetwork, ...] = (
    _net("127.0.0.0/8"), _net("0.0.0.0/8"),  # loopback; 0.0.0.0 reaches it too on Linux
    _net("::1/128"), _net("::/96"), _net("::ffff:0:0/96"), _net("64:ff9b::/96"),
    _net("169.254.0.0/16"), _net("fe80::/10"), *METADATA_NETWORKS,
)
"""Ranges no wider operator network grants: each must be allowed by a network inside it."""
_SHOWN = 200


class HostField:
    """Marks a policy field whose value touches the host (see the module docstring)."""

    __slots__ = ()
    kind: ClassVar[Kind]

    def outside(self, item: str, ceiling: Sequence[str]) -> str | None:
        """Why ``item`` is not within ``ceiling``, or ``None`` when it is."""
        raise NotImplementedError


class HostPath(HostField):
    """A directory or file on the server host (a repository root, a filesystem root)."""

    __slots__ = ()
    kind = "paths"

    def outside(self, item: str, ceiling: Sequence[str]) -> str | None:
        try:
            target = Path(item).resolve()
            roots = [Path(root).resolve() for root in ceiling]
        except (OSError, ValueError):
            return f"path {item[:_SHOWN]!r} is not a valid path"
        if any(target.is_relative_to(root) for root in roots):
            return None
        return f"path {item[:_SHOWN]!r} is outside the directories the operator allows"


class HostNetworks(HostField):
    """CIDRs a tool may reach although private (an SSRF allow-list)."""

    __slots__ = ()
    kind = "networks"

    def outside(self, item: str, ceiling: Sequence[str]) -> str | None:
        try:
            net = _net(item, strict=False)
        except ValueError:
            return f"{item[:_SHOWN]!r} is not a network"
        allowed = [n for n in (_parse(c) for c in ceiling) if n is not None]
        if not any(_subnet(net, n) for n in allowed):
            return f"network {net} is outside the networks the operator allows"
        for special in SPECIAL_NETWORKS:
            if net.version != special.version or not net.overlaps(special):
                continue
            part = net if _subnet(net, special) else special
            if not any(_subnet(part, n) and _subnet(n, special) for n in allowed):
                return (f"network {net} reaches {special}, which the operator does not "
                        "allow tenants by itself")
        return None


class HostCommand(HostField):
    """A program run on the server host."""

    __slots__ = ()
    kind = "commands"

    def outside(self, item: str, ceiling: Sequence[str]) -> str | None:
        if item in ceiling:
            return None
        return f"command {item[:_SHOWN]!r} is not one the operator allows"


def _parse(value: str) -> IPNetwork | None:
    try:
        return _net(value, strict=False)
    except ValueError:
        return None


def _subnet(a: IPNetwork, b: IPNetwork) -> bool:
    if isinstance(a, ipaddress.IPv4Network):
        return isinstance(b, ipaddress.IPv4Network) and a.subnet_of(b)
    return isinstance(b, ipaddress.IPv6Network) and a.subnet_of(b)


class TenantBounds(BaseModel):
    """The operator's ceiling for host-touching values a tenant writes (default: none)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    paths: tuple[str, ...] = Field(default=(), description=(
        "Host directories a tenant may point a path field at (that directory or below)."))
    networks: tuple[str, ...] = Field(default=(), description=(
        "CIDRs a tenant may allow-list, or subnets of them. Loopback, link-local and metadata\n"
        "ranges only when listed by themselves (``127.0.0.0/8``), never through ``0.0.0.0/0``."))
    commands: tuple[str, ...] = Field(default=(), description="Commands a tenant may name.")

    @field_validator("paths", "commands")
    @classmethod
    def _not_empty(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        if any(not v.strip() for v in value):
            raise ValueError("empty entry: name a directory or a command")
        return value

    @field_validator("networks")
    @classmethod
    def _networks(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        bad = [v for v in value if _parse(v) is None]
        if bad:
            raise ValueError(f"not a network: {', '.join(repr(b[:_SHOWN]) for b in bad)}")
        return value

    def ceiling(self, marker: HostField) -> tuple[str, ...]:
        """The operator's values for fields marked like ``marker``."""
        values: tuple[str, ...] = getattr(self, marker.kind)
        return values


@dataclass(frozen=True, slots=True)
class Excess:
    """One tenant value beyond the ceiling: where (JSON pointer) and why."""

    pointer: str
    message: str


def host_fields(model: type[BaseModel]) -> dict[str, HostField]:
    """The host-touching fields of ``model``, by name."""
    return {name: marker for name, info in model.model_fields.items()
            for marker in info.metadata if isinstance(marker, HostField)}


def table_fields(model: type[BaseModel]) -> dict[str, type[BaseModel]]:
    """The fields of ``model`` that are tables (``dict[str, Entry]``) of a model with
    host-touching fields (the shell's ``commands: {name: {path: …}}``), by name."""
    found: dict[str, type[BaseModel]] = {}
    for name, info in model.model_fields.items():
        args = get_args(info.annotation) if get_origin(info.annotation) is dict else ()
        entry = args[1] if len(args) == 2 else None
        if isinstance(entry, type) and issubclass(entry, BaseModel) and host_fields(entry):
            found[name] = entry
    return found


def _table_excess(model: type[BaseModel], values: Mapping[str, Any], bounds: TenantBounds,
                  operator: Mapping[str, Any], at: str) -> list[Excess]:
    """``excess`` of each entry of each table field; the operator's entries, all of them,
    add their values to the ceiling."""
    found: list[Excess] = []
    for name, entry_model in table_fields(model).items():
        table, theirs = values.get(name), operator.get(name)
        if not isinstance(table, Mapping):
            continue
        entries = [e for e in theirs.values() if isinstance(e, Mapping)] if isinstance(
            theirs, Mapping) else []
        pooled = {f: [e.get(f) for e in entries] for f in host_fields(entry_model)}
        for key, entry in table.items():
            if isinstance(entry, Mapping):
                pointer = f"{at}/{name}/{str(key).replace('~', '~0').replace('/', '~1')}"
                found += excess(entry_model, entry, bounds, operator=pooled, at=pointer)
    return found


def excess(model: type[BaseModel], values: Mapping[str, Any], bounds: TenantBounds, *,
           operator: Mapping[str, Any] | None = None, at: str = "") -> list[Excess]:
    """Each value a tenant wrote in ``values`` for a host-touching field of ``model`` (or of
    an entry of a table field, see ``table_fields``) that lies outside the ceiling:
    ``bounds`` plus ``operator``'s own value of that field."""
    found = _table_excess(model, values, bounds, operator or {}, at)
    for name, marker in host_fields(model).items():
        value = values.get(name)
        if value is None:
            continue
        ceiling = (*bounds.ceiling(marker), *_strings((operator or {}).get(name)))
        items = [(f"{at}/{name}", value)] if isinstance(value, str) else (
            [(f"{at}/{name}/{i}", v) for i, v in enumerate(value)]
            if isinstance(value, list | tuple) else [(f"{at}/{name}", value)])
        for pointer, item in items:
            problem = (marker.outside(item, ceiling) if isinstance(item, str)
                       else "must be a string")
            if problem is not None:
                found.append(Excess(pointer, f"{name}: {problem}"))
    return found


def _strings(value: Any) -> tuple[str, ...]:
    if isinstance(value, str):
        return (value,)
    if isinstance(value, list | tuple):
        return tuple(v for v in value if isinstance(v, str))
    return ()


def activation_excess(policy: Mapping[str, Any], tool: ToolDefinition,
                      policy_model: type[BaseModel], bounds: TenantBounds, *,
                      at: str = "/policy") -> list[Excess]:
    """What a tenant's activation policy sets beyond the ceiling (an operator's tool adds
    its own values to the ceiling)."""
    operator = {} if tool.origin == "api" else tool.policy
    return excess(policy_model, policy, bounds, operator=operator, at=at)


def refuse(found: Sequence[Excess], what: str = "the policy") -> None:
    """Raise ``policy_exceeds_bounds`` (422 over REST) listing ``found``, if any."""
    if found:
        more = f" (and {len(found) - 1} more)" if len(found) > 1 else ""
        raise OperationRefused(
            Reason.POLICY_EXCEEDS_BOUNDS, f"{what} exceeds what the operator allows: "
            f"{found[0].message}{more}",
            errors=[{"pointer": e.pointer, "message": e.message} for e in found])

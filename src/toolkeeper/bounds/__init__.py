"""Operator ceilings for the policy fields a tenant writes (SPEC §8).

Some policy values reach outside the gateway's process (a repository or filesystem root, a
command and its arguments, a network allow-list, a process environment); others widen what
a tool may do (``allow_write``, ``allow_push``, an action or remote allow-list, a timeout).
Each such field is declared once, on its model, with a marker
(``repo_root: Annotated[str | None, HostPath()]``, ``allow_push: Annotated[bool,
Permission()]``); the write-time checks of every face and the call-time check of the
pipeline find it here (whole tool definitions are checked by ``toolkeeper.providers.ceiling``,
which knows each implementation's model). A field with no marker must be in the reviewed
list of harmless fields (``tests/test_bounds_fields.py``), so a new field cannot go unbounded
by oversight.

Who wrote a value decides whether it is bounded. The operator (config files and library
code: tools and profiles of origin ``code``/``config``) sets anything. A tenant (whatever was
written through REST: origin ``api``) may only narrow within the ceiling, which is the
operator's ``tenant_bounds`` setting plus, on a tool the operator defined, that tool's own
value of the field (its default where the tool does not set it):

- ``HostPath``: resolved (symlinks, ``..``, relative to the working directory, as the tools
  resolve it) and equal to or below a ceiling path, also resolved;
- ``HostNetworks``: a subnet of a ceiling network; and where it reaches loopback (``127/8``,
  ``0/8``, ``::1``, IPv4-compatible or mapped IPv6, NAT64), link-local or a cloud metadata
  endpoint, that part must lie in a ceiling network which itself lies inside that special
  range — an operator's ``0.0.0.0/0`` never grants ``127.0.0.1``: ``127.0.0.0/8`` must be
  listed by itself;
- ``HostCommand``: exactly one of the ceiling's commands; a table of such entries (the
  shell's ``commands``) is bounded entry by entry: each tenant entry must lie, field by
  field, within one operator entry (or ``tenant_bounds.commands`` entry) for the same path;
- ``Permission`` (a switch that widens when on): on only where the operator's is on or
  ``tenant_bounds.permissions`` names it; ``Safeguard`` (a switch that protects when on):
  off only where the operator's is off;
- ``Subset``/``Superset``/``AtMost``/``Prefix``/``Pinned``: within the operator's tool's
  value (an allow-list's subset, a deny-list's superset, a number at most, a prefix that
  starts with it, a fixed choice kept); a tenant's own tool has no operator value there, and
  its model's own limits apply;
- ``EnvAllowList``: an allow-list of variables (``_markers.SAFE_ENV``, the operator tool's
  own with their values, ``tenant_bounds.env``).

The empty ceiling (the default) lets a tenant widen nothing.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, get_args, get_origin

from pydantic import BaseModel

from toolkeeper.bounds._ceiling import CommandBound, TenantBounds
from toolkeeper.bounds._markers import (
    ABSENT,
    SAFE_ENV,
    SPECIAL_NETWORKS,
    AtMost,
    Bound,
    EnvAllowList,
    Excess,
    HostCommand,
    HostField,
    HostNetworks,
    HostPath,
    Kind,
    Permission,
    Pinned,
    Prefix,
    Safeguard,
    Subset,
    Superset,
    host_covered,
    tool_covered,
)
from toolkeeper.canonical import escape_pointer
from toolkeeper.errors import OperationRefused
from toolkeeper.model.reasons import Reason

if TYPE_CHECKING:
    from toolkeeper.model.tool import ToolDefinition

_NO_BOUNDS = TenantBounds()


@functools.cache  # models are classes, fixed once defined; every call reads these
def bound_fields(model: type[BaseModel]) -> dict[str, Bound]:
    """The fields of ``model`` a tenant may only narrow, by name, with their markers."""
    return {name: marker for name, info in model.model_fields.items()
            for marker in info.metadata if isinstance(marker, Bound)}


def host_fields(model: type[BaseModel]) -> dict[str, HostField]:
    """The host-touching fields of ``model``, by name."""
    return {name: m for name, m in bound_fields(model).items() if isinstance(m, HostField)}


@functools.cache
def table_fields(model: type[BaseModel]) -> dict[str, type[BaseModel]]:
    """The fields of ``model`` that are tables (``dict[str, Entry]``) of a model with
    bounded fields (the shell's ``commands: {name: {path: …}}``), by name."""
    found: dict[str, type[BaseModel]] = {}
    for name, info in model.model_fields.items():
        args = get_args(info.annotation) if get_origin(info.annotation) is dict else ()
        entry = args[1] if len(args) == 2 else None
        if isinstance(entry, type) and issubclass(entry, BaseModel) and bound_fields(entry):
            found[name] = entry
    return found


@functools.cache
def _defaults(model: type[BaseModel]) -> Mapping[str, Any]:
    return MappingProxyType({name: info.get_default(call_default_factory=True)
                             for name, info in model.model_fields.items()
                             if not info.is_required()})


def filled(model: type[BaseModel], values: Mapping[str, Any]) -> dict[str, Any]:
    """``values`` with each field they omit at its default (what the model would use; only
    read, never changed, so one copy of the defaults serves every call)."""
    return {**_defaults(model), **values}


def _entry_excess(entry_model: type[BaseModel], entry: Mapping[str, Any],
                  candidates: Sequence[Mapping[str, Any]], at: str) -> list[Excess]:
    """An entry is within the ceiling when it lies within one candidate of its own
    ``HostCommand`` (same path): the problems of the closest such candidate otherwise."""
    mine = filled(entry_model, entry)
    hosts = host_fields(entry_model)
    best: list[Excess] | None = None
    for theirs in candidates:
        if any(mine.get(h) != theirs.get(h) for h in hosts):
            continue
        found = excess(entry_model, mine, _NO_BOUNDS, operator=filled(entry_model, theirs),
                       at=at)
        if best is None or len(found) < len(best):
            best = found
    if best is None:  # no candidate for this program: say so, as a lone host field would
        return excess(entry_model, {h: mine.get(h) for h in hosts}, _NO_BOUNDS, at=at) or [
            Excess(at, "no entry of the operator's admits it")]
    return best


def _table_excess(model: type[BaseModel], values: Mapping[str, Any], bounds: TenantBounds,
                  operator: Mapping[str, Any], at: str) -> list[Excess]:
    """Each entry of each table field, against the operator's entries and the ceiling's."""
    found: list[Excess] = []
    for name, entry_model in table_fields(model).items():
        table, theirs = values.get(name), operator.get(name)
        if table is None:
            continue
        if not isinstance(table, Mapping):
            found.append(Excess(f"{at}/{name}", f"{name}: must be an object"))
            continue
        mine = [e for e in theirs.values() if isinstance(e, Mapping)] if isinstance(
            theirs, Mapping) else []
        candidates = [*mine, *bounds.entries(name)]
        for key, entry in table.items():
            pointer = f"{at}/{name}/{escape_pointer(str(key))}"
            if not isinstance(entry, Mapping):
                found.append(Excess(pointer, f"{name}: an entry must be an object"))
                continue
            found += _entry_excess(entry_model, entry, candidates, pointer)
    return found


def excess(model: type[BaseModel], values: Mapping[str, Any], bounds: TenantBounds, *,
           operator: Mapping[str, Any] | None = None, at: str = "") -> list[Excess]:
    """Each value a tenant wrote in ``values`` for a bounded field of ``model`` (or of an
    entry of a table field, see ``table_fields``) that lies beyond the ceiling: ``bounds``
    plus ``operator``'s own value of that field (``None``: no operator tool)."""
    theirs = operator if operator is not None else {}
    found = _table_excess(model, values, bounds, theirs, at)
    for name, marker in bound_fields(model).items():
        if name not in values or (values[name] is None and isinstance(marker, HostField)):
            continue
        found += marker.excess(name, values[name], theirs.get(name, ABSENT), bounds,
                               f"{at}/{name}")
    return found


def operator_values(policy_model: type[BaseModel], policy: Mapping[str, Any]
                    ) -> dict[str, Any]:
    """The operator's tool policy as the tool runs it: what it sets, the defaults for the
    rest (an operator tool that leaves ``allow_write`` out has it off, and so must a
    tenant). Read as written, not validated: the markers compare values as the model
    would keep them (``allowed_methods`` in any case), and it is on every call's path."""
    return filled(policy_model, policy)


def activation_excess(policy: Mapping[str, Any], tool: ToolDefinition,
                      policy_model: type[BaseModel], bounds: TenantBounds, *,
                      at: str = "/policy") -> list[Excess]:
    """What a tenant's activation policy sets beyond the ceiling (an operator's tool adds
    its own values to the ceiling)."""
    operator = None if tool.origin == "api" else operator_values(policy_model, tool.policy)
    return excess(policy_model, policy, bounds, operator=operator, at=at)


def refuse(found: Sequence[Excess], what: str = "the policy") -> None:
    """Raise ``policy_exceeds_bounds`` (422 over REST) listing ``found``, if any."""
    if found:
        more = f" (and {len(found) - 1} more)" if len(found) > 1 else ""
        raise OperationRefused(
            Reason.POLICY_EXCEEDS_BOUNDS, f"{what} exceeds what the operator allows: "
            f"{found[0].message}{more}",
            errors=[{"pointer": e.pointer, "message": e.message} for e in found])


__all__ = [
    "ABSENT", "SAFE_ENV", "SPECIAL_NETWORKS", "AtMost", "Bound", "CommandBound",
    "EnvAllowList", "Excess", "HostCommand", "HostField", "HostNetworks", "HostPath", "Kind",
    "Permission", "Pinned", "Prefix", "Safeguard", "Subset", "Superset", "TenantBounds",
    "activation_excess", "bound_fields", "excess", "filled", "host_covered", "host_fields",
    "operator_values", "refuse", "table_fields", "tool_covered",
]

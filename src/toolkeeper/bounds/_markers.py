"""The markers a policy field carries (``Annotated[…, Marker()]``) and what each means for a
value a tenant wrote: how it may narrow the ceiling (see the package docstring).

Every marker answers one question, ``excess(name, value, operator, bounds, at)``: which parts
of ``value`` lie beyond the ceiling, where ``operator`` is the operator's own value of the
field (``ABSENT`` when no operator tool carries it: a tenant's own tool) and ``bounds`` the
``tenant_bounds`` setting.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Literal

from toolkeeper.canonical import escape_pointer
from toolkeeper.netguard import METADATA_NETWORKS, IPNetwork

if TYPE_CHECKING:
    from toolkeeper.bounds._ceiling import TenantBounds

Kind = Literal["paths", "networks", "commands"]
_net = ipaddress.ip_network
SPECIAL_NETWORKS: tuple[IPNetwork, ...] = (
    _net("127.0.0.0/8"), _net("0.0.0.0/8"),  # loopback; 0.0.0.0 reaches it too on Linux
    _net("::1/128"), _net("::/96"), _net("::ffff:0:0/96"), _net("64:ff9b::/96"),
    _net("169.254.0.0/16"), _net("fe80::/10"), *METADATA_NETWORKS,
)
"""Ranges no wider operator network grants: each must be allowed by a network inside it."""
SHOWN = 200


class _Absent:
    __slots__ = ()

    def __repr__(self) -> str:
        return "ABSENT"


ABSENT: Any = _Absent()
"""The operator has no value for the field (the tool is a tenant's own)."""

SAFE_ENV = re.compile(r"LANG|LANGUAGE|LC_[A-Z]{1,20}|TZ|NO_COLOR|COLUMNS|LINES")
"""Environment variables anyone may set, with a ``SAFE_ENV_VALUE``: they change how a
program formats its output, never which program or file it uses."""
SAFE_ENV_VALUE = re.compile(r"(?!.*\.\.)[A-Za-z0-9_@:+,=-][A-Za-z0-9_.@:+,=/-]{0,63}")
"""A locale, zone or width: no leading ``/`` (glibc reads a locale or zone from a path) and
no ``..``."""


@dataclass(frozen=True, slots=True)
class Excess:
    """One tenant value beyond the ceiling: where (JSON pointer) and why."""

    pointer: str
    message: str


class Bound:
    """Marks a policy field a tenant may only narrow (see the module docstring)."""

    __slots__ = ()

    def excess(self, name: str, value: Any, operator: Any, bounds: TenantBounds,
               at: str) -> list[Excess]:
        raise NotImplementedError


class HostField(Bound):
    """Marks a field whose value touches the host: each item must lie within the ceiling,
    the operator's ``tenant_bounds`` of the marker's ``kind`` plus the operator's value."""

    __slots__ = ()
    kind: ClassVar[Kind]

    def outside(self, item: str, ceiling: Sequence[str]) -> str | None:
        """Why ``item`` is not within ``ceiling``, or ``None`` when it is."""
        raise NotImplementedError

    def excess(self, name: str, value: Any, operator: Any, bounds: TenantBounds,
               at: str) -> list[Excess]:
        ceiling = (*bounds.ceiling(self), *_strings(operator))
        items = [(at, value)] if isinstance(value, str) else (
            [(f"{at}/{i}", v) for i, v in enumerate(value)]
            if isinstance(value, list | tuple) else [(at, value)])
        found: list[Excess] = []
        for pointer, item in items:
            problem = (self.outside(item, ceiling) if isinstance(item, str)
                       else "must be a string")
            if problem is not None:
                found.append(Excess(pointer, f"{name}: {problem}"))
        return found


class HostPath(HostField):
    """A directory or file on the server host (a repository root, a filesystem root)."""

    __slots__ = ()
    kind = "paths"

    def outside(self, item: str, ceiling: Sequence[str]) -> str | None:
        try:
            target = Path(item).resolve()
            roots = [Path(root).resolve() for root in ceiling]
        except (OSError, ValueError):
            return f"path {item[:SHOWN]!r} is not a valid path"
        if any(target.is_relative_to(root) for root in roots):
            return None
        return f"path {item[:SHOWN]!r} is outside the directories the operator allows"


class HostNetworks(HostField):
    """CIDRs a tool may reach although private (an SSRF allow-list)."""

    __slots__ = ()
    kind = "networks"

    def outside(self, item: str, ceiling: Sequence[str]) -> str | None:
        try:
            net = _net(item, strict=False)
        except ValueError:
            return f"{item[:SHOWN]!r} is not a network"
        allowed = [n for n in (parse_network(c) for c in ceiling) if n is not None]
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
        return f"command {item[:SHOWN]!r} is not one the operator allows"


class Permission(Bound):
    """A switch that widens when ``true`` (``allow_write``, ``allow_push``): a tenant may
    turn it on only where the operator's tool has it on, or ``tenant_bounds.permissions``
    names the field."""

    __slots__ = ()

    def excess(self, name: str, value: Any, operator: Any, bounds: TenantBounds,
               at: str) -> list[Excess]:
        if not isinstance(value, bool):
            return [Excess(at, f"{name}: must be true or false")]
        if not value or operator is True or name in bounds.permissions:
            return []
        return [Excess(at, f"{name}: the operator does not let tenants turn it on")]


class Safeguard(Bound):
    """A switch that protects when ``true`` (a shell rule's ``dashless_options``): a tenant
    may turn it off only where the operator's is off."""

    __slots__ = ()

    def excess(self, name: str, value: Any, operator: Any, bounds: TenantBounds,
               at: str) -> list[Excess]:
        if not isinstance(value, bool):
            return [Excess(at, f"{name}: must be true or false")]
        if value or operator is not True:
            return []
        return [Excess(at, f"{name}: the operator's rule keeps it on")]


def _same(item: Any, theirs: Any) -> bool:
    return bool(item == theirs)


def host_covered(item: Any, theirs: Any) -> bool:
    """``item`` is the host ``theirs`` or under its ``*.suffix``."""
    if not isinstance(item, str) or not isinstance(theirs, str):
        return False
    return item == theirs or (theirs.startswith("*.") and item.endswith(theirs[1:]))


def tool_covered(item: Any, theirs: Any) -> bool:
    """``item`` (``server/tool``) is ``theirs`` or under its ``server/*``."""
    if not isinstance(item, str) or not isinstance(theirs, str):
        return False
    return item == theirs or (theirs.endswith("/*") and item.startswith(theirs[:-1]))


@dataclass(frozen=True, slots=True)
class Subset(Bound):
    """An allow-list (actions, remotes, flag patterns): each item one of the operator's.
    ``open`` says which value admits everything (``None`` for ``allowed_actions``, the
    empty list for ``allowed_hosts``); it is widening unless the operator's is as open.
    Without ``open``, ``None`` is a value of its own (``subcommands``: unset lets the
    patterns decide), kept only where the operator's is ``None`` too. Patterns are compared
    as strings: whether one regular expression admits less than another is not decided."""

    open: Literal["none", "empty"] | None = None
    covered: Callable[[Any, Any], bool] = _same

    def _open(self, value: Any) -> bool:
        return (value is None and self.open == "none") or (
            self.open == "empty" and isinstance(value, list | tuple) and not value)

    def excess(self, name: str, value: Any, operator: Any, bounds: TenantBounds,
               at: str) -> list[Excess]:
        if operator is ABSENT or self._open(operator):
            return []
        if self._open(value):
            return [Excess(at, f"{name}: may not admit everything where the operator lists "
                           "what it admits")]
        if value is None or operator is None:
            return [] if value is None and operator is None else [
                Excess(at, f"{name}: must be {'null' if operator is None else 'a list'} "
                       "like the operator's")]
        if not isinstance(value, list | tuple) or not isinstance(operator, list | tuple):
            return [Excess(at, f"{name}: must be a list")]
        return [Excess(f"{at}/{i}", f"{name}: {str(item)[:SHOWN]!r} is not one the "
                       "operator allows") for i, item in enumerate(value)
                if not any(self.covered(item, theirs) for theirs in operator)]


@dataclass(frozen=True, slots=True)
class Superset(Bound):
    """A deny-list (``denied_hosts``): it keeps every entry of the operator's."""

    def excess(self, name: str, value: Any, operator: Any, bounds: TenantBounds,
               at: str) -> list[Excess]:
        if operator is ABSENT or not isinstance(operator, list | tuple):
            return []
        kept = value if isinstance(value, list | tuple) else ()
        dropped = [o for o in operator if o not in kept]
        if not dropped:
            return []
        return [Excess(at, f"{name}: drops the operator's {str(dropped[0])[:SHOWN]!r}")]


@dataclass(frozen=True, slots=True)
class AtMost(Bound):
    """A numeric limit (timeouts, byte caps, ``max_args``): at most the operator's.
    ``none_is_unlimited``: ``None`` lifts the limit."""

    none_is_unlimited: bool = False

    def excess(self, name: str, value: Any, operator: Any, bounds: TenantBounds,
               at: str) -> list[Excess]:
        if operator is ABSENT or (operator is None and self.none_is_unlimited):
            return []
        if not _number(operator):
            return []
        if not _number(value) or value > operator:
            return [Excess(at, f"{name}: above the operator's {operator}")]
        return []


@dataclass(frozen=True, slots=True)
class Prefix(Bound):
    """A name prefix that confines (``managed_branch_prefix``): it starts with the
    operator's."""

    def excess(self, name: str, value: Any, operator: Any, bounds: TenantBounds,
               at: str) -> list[Excess]:
        if not isinstance(operator, str):
            return []
        if isinstance(value, str) and value.startswith(operator):
            return []
        return [Excess(at, f"{name}: must start with the operator's {operator[:SHOWN]!r}")]


@dataclass(frozen=True, slots=True)
class Pinned(Bound):
    """A choice the operator may fix (``pipeline_id``): ``None`` leaves it open, anything
    else must stay as the operator set it."""

    def excess(self, name: str, value: Any, operator: Any, bounds: TenantBounds,
               at: str) -> list[Excess]:
        if operator is ABSENT or operator is None or value == operator:
            return []
        return [Excess(at, f"{name}: the operator fixed it to {str(operator)[:SHOWN]!r}")]


@dataclass(frozen=True, slots=True)
class EnvAllowList(Bound):
    """Environment variables of a process: an allow-list. A tenant sets a ``SAFE_ENV`` name
    with a ``SAFE_ENV_VALUE``, or a name the operator's tool sets with the same value, or a
    name of ``tenant_bounds.env`` (with its value, or any value where that is ``null``); and
    it keeps every variable the operator's tool sets, with its value."""

    def excess(self, name: str, value: Any, operator: Any, bounds: TenantBounds,
               at: str) -> list[Excess]:
        if not isinstance(value, Mapping):
            return [Excess(at, f"{name}: must be an object")]
        theirs = operator if isinstance(operator, Mapping) else {}
        found: list[Excess] = []
        for var, text in value.items():
            if _env_allowed(str(var), text, theirs, bounds.env):
                continue
            found.append(Excess(f"{at}/{escape_pointer(str(var))}", f"{name}: {str(var)[:SHOWN]!r}"
                                " is not a variable the operator lets tenants set"))
        # the operator's own variables may be what keeps a program tame: kept, as they are
        dropped = [var for var, text in theirs.items() if value.get(var) != text]
        if dropped:
            found.append(Excess(at, f"{name}: drops or changes the operator's "
                                f"{str(dropped[0])[:SHOWN]!r}"))
        return found


def _env_allowed(var: str, text: Any, theirs: Mapping[str, Any],
                 ceiling: Mapping[str, str | None]) -> bool:
    if not isinstance(text, str):
        return False
    if SAFE_ENV.fullmatch(var) and SAFE_ENV_VALUE.fullmatch(text):
        return True
    if var in theirs and theirs[var] == text:
        return True
    return var in ceiling and ceiling[var] in (None, text)


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _strings(value: Any) -> tuple[str, ...]:
    if isinstance(value, str):
        return (value,)
    if isinstance(value, list | tuple):
        return tuple(v for v in value if isinstance(v, str))
    return ()


def parse_network(value: str) -> IPNetwork | None:
    try:
        return _net(value, strict=False)
    except ValueError:
        return None


def _subnet(a: IPNetwork, b: IPNetwork) -> bool:
    if isinstance(a, ipaddress.IPv4Network):
        return isinstance(b, ipaddress.IPv4Network) and a.subnet_of(b)
    return isinstance(b, ipaddress.IPv6Network) and a.subnet_of(b)


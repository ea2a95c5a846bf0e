"""Every field of every policy model a tenant can write is bounded (``toolkeeper.bounds``):
it carries a marker, or it is in the reviewed list below with the reason it is harmless. And
for each marked field the walk builds one widening value (more than the operator's) and one
equal value: the check must refuse the first and admit the second. A marker whose check is
broken (monkeypatched to admit everything) makes the walk fail: see the last tests."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel

from toolkeeper.bounds import (
    AtMost,
    Bound,
    EnvAllowList,
    HostCommand,
    HostNetworks,
    HostPath,
    Permission,
    Pinned,
    Prefix,
    Safeguard,
    Subset,
    Superset,
    TenantBounds,
    bound_fields,
    excess,
    table_fields,
)
from toolkeeper.builtins import BUILTINS
from toolkeeper.providers.artifact import ArtifactConfig
from toolkeeper.providers.base import ToolPolicy
from toolkeeper.providers.http import HttpEndpointConfig
from toolkeeper.providers.retrieval import RagRetrievalPolicy

_OWN_TOOL = ("implementation of a tenant's own http tool: there is no operator value to "
             "narrow; it reaches public addresses only (netguard) unless allowed_networks, "
             "which is bounded")
_OPERATOR_ONLY = "artifact tools are the operator's only: a REST tool names no artifact"
REVIEWED: dict[tuple[str, str], str] = {
    ("HttpRequestPolicy", "on_oversize"): "cut or fail a big answer: what the agent sees",
    **{("HttpEndpointConfig", f): _OWN_TOOL for f in (
        "url", "type", "method", "headers", "timeout_s", "max_response_bytes",
        "allowed_hosts", "allowed_ports", "max_redirects")},
    ("HttpEndpointConfig", "oauth"): (
        "the tenant's own tool's OAuth client: its client secret resolves in the writer's "
        "scope (the tenant's own credentials), its token endpoint is reached under the "
        "tool's own network rules (public addresses unless allowed_networks, bounded)"),
    **{("ArtifactConfig", f): _OPERATOR_ONLY for f in (
        "artifact_hash", "memory_mb", "cpu_s", "max_output_bytes")},
}
"""Fields without a marker, each reviewed: why a tenant's value cannot widen anything."""


def models() -> list[type[BaseModel]]:
    """Every policy model of every built-in and provider, the implementation blocks a
    tenant's tool may carry, and the entries of their tables."""
    found: list[type[BaseModel]] = [ToolPolicy, RagRetrievalPolicy, HttpEndpointConfig,
                                    ArtifactConfig]
    found += [cls.policy_model for cls in BUILTINS.values()]
    found += [entry for m in list(found) for entry in table_fields(m).values()]
    return list(dict.fromkeys(found))


def test_every_field_a_tenant_writes_is_bounded_or_reviewed() -> None:
    unbounded = [f"{m.__name__}.{name}" for m in models() for name in m.model_fields
                 if name not in bound_fields(m) and name not in table_fields(m)
                 and (m.__name__, name) not in REVIEWED]
    assert unbounded == [], ("mark these fields (toolkeeper.bounds) or review them into "
                             "REVIEWED with the reason they cannot widen anything")
    stale = [k for k in REVIEWED if not any(
        m.__name__ == k[0] and k[1] in m.model_fields for m in models())]
    assert stale == []


def test_the_ceilings_command_rules_carry_every_bounded_field_of_a_shell_rule() -> None:
    from toolkeeper.bounds import CommandBound
    from toolkeeper.builtins.shell import CommandRule

    assert set(bound_fields(CommandRule)) <= set(CommandBound.model_fields)


def _pair(marker: Bound) -> tuple[Any, Any]:
    """``(operator's value, a tenant's wider value)`` for a field marked ``marker``."""
    if isinstance(marker, Permission):
        return False, True
    if isinstance(marker, Safeguard):
        return True, False
    if isinstance(marker, Subset):
        if marker.open == "none":
            return ["a.example"], None
        if marker.open == "empty":
            return ["a.example"], []
        return ["a.example"], ["a.example", "b.example"]
    pairs: dict[type[Bound], tuple[Any, Any]] = {
        Superset: (["a.example"], []), AtMost: (5, 6), Prefix: ("agent/", "ag"),
        Pinned: ("p", "q"), EnvAllowList: ({}, {"TAR_OPTIONS": "-I sh"}),
        HostPath: ("/srv/a", "/srv"), HostNetworks: (["10.0.0.0/8"], ["0.0.0.0/0"]),
        HostCommand: ("/usr/bin/ls", "/bin/sh"),
    }
    return pairs[type(marker)]


def _table_pair(entry: type[BaseModel], name: str, marker: Bound) -> tuple[Any, Any]:
    theirs, mine = _pair(marker)
    path = "/usr/bin/ls"
    if name in entry.model_fields and isinstance(marker, HostCommand):
        return {"x": {name: theirs}}, {"x": {name: mine}}
    return {"x": {"path": path, name: theirs}}, {"x": {"path": path, name: mine}}


def cases() -> list[tuple[type[BaseModel], str, dict[str, Any], dict[str, Any]]]:
    """``(model, field, operator's values, a tenant's wider values)`` for every marked
    field of every model, through its table where it is an entry's."""
    found = []
    for model in models():
        for name, marker in bound_fields(model).items():
            theirs, mine = _pair(marker)
            found.append((model, name, {name: theirs}, {name: mine}))
        for table, entry in table_fields(model).items():
            for name, marker in bound_fields(entry).items():
                theirs, mine = _table_pair(entry, name, marker)
                found.append((model, f"{table}.{name}", {table: theirs}, {table: mine}))
    return found


def missed_widenings() -> list[str]:
    """The fields whose check admits a wider value than the operator's, or refuses the
    operator's own value."""
    missed = []
    for model, name, theirs, mine in cases():
        if not excess(model, mine, TenantBounds(), operator=theirs):
            missed.append(f"{model.__name__}.{name} admits {mine}")
        if excess(model, theirs, TenantBounds(), operator=theirs):
            missed.append(f"{model.__name__}.{name} refuses the operator's own {theirs}")
    return missed


def test_each_bounded_field_refuses_a_wider_value_and_admits_the_operators() -> None:
    assert len(cases()) > 60  # every built-in's fields, not a few
    assert missed_widenings() == []


@pytest.mark.parametrize("marker", [Permission, Subset, AtMost, EnvAllowList, HostPath])
def test_a_marker_whose_check_admits_everything_is_caught_by_the_walk(
        monkeypatch: pytest.MonkeyPatch, marker: type[Bound]) -> None:
    monkeypatch.setattr(marker, "excess", lambda *_a, **_k: [])
    missed = missed_widenings()
    assert missed, f"the walk did not notice {marker.__name__} admitting everything"
    expected = {Permission: "FilesystemPolicy.allow_write", Subset: "ShellPolicy.commands.flags",
                AtMost: "GitPolicy.max_files", EnvAllowList: "ShellPolicy.env",
                HostPath: "GitPolicy.repo_root"}[marker]
    assert any(m.startswith(expected + " ") for m in missed), missed


def test_an_unmarked_new_field_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    from toolkeeper.builtins.filesystem import FilesystemPolicy

    class Wider(FilesystemPolicy):
        follow_links: bool = False

    monkeypatch.setitem(BUILTINS, "wider", type("WiderTool", (), {"policy_model": Wider}))
    with pytest.raises(AssertionError, match="mark these fields"):
        test_every_field_a_tenant_writes_is_bounded_or_reviewed()

"""The listed ⇔ callable property (``test_listed_iff_callable``) cannot silently become
vacuous: against each deliberately broken rule below (monkeypatched, on the listing's side
or the call's), its checker finds a counterexample within a few derandomized examples.
Rules named in issue 26 and others besides (lifecycle, is_active, action and policy
allow-lists, version pins, tenants, global tools' activation, autonomy, tenant and profile
gates, the agent's name and arguments in adjusters, deprecated tools, the half-open
breaker), and one rule each of the REST and MCP listings, searched through that face. The
control (every rule intact, the same worlds) is ``test_listed_iff_callable``'s library test."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import mcp_types
import pytest
from fastapi.testclient import TestClient

import toolkeeper.api.routes.discovery as discovery_route
import toolkeeper.mcp.views as views
import toolkeeper.pipeline.limits as limits_step
import toolkeeper.pipeline.resolve as resolve_step
import toolkeeper.pipeline.risk as risk_step
import toolkeeper.pipeline.scope as scope_step
import toolkeeper.services.discovery as discovery
from tests.pipeline.listed_world import (
    WORLDS,
    Counterexample,
    Face,
    LibraryFace,
    McpFace,
    RestFace,
    run_property,
)
from toolkeeper import Activation, Gate, Gateway, Risk, ToolStatus
from toolkeeper.api import ApiSettings, create_app
from toolkeeper.model.enums import Autonomy, Health
from toolkeeper.model.gates import GateMatrix, stricter
from toolkeeper.pipeline.catalog import CompiledTool
from toolkeeper.pipeline.gate import gate_for, static_gate
from toolkeeper.pipeline.health import HealthBoard
from toolkeeper.pipeline.resolve import RUNNABLE
from toolkeeper.services.discovery import agent_enabled

pytestmark = pytest.mark.property
EXAMPLES = WORLDS
"""At most this many worlds per broken rule (the search stops at the first counterexample):
the worlds ``test_listed_iff_callable`` checks with every rule intact (the control)."""
FACE_EXAMPLES = 4
"""The same through REST or MCP (slower per world)."""


@pytest.fixture(scope="module")
def gw(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gateway]:
    path: Path = tmp_path_factory.mktemp("mutants") / "listed.db"
    gateway = Gateway.open(f"sqlite:///{path}")
    yield gateway
    gateway.close()


def _no_gate_filter(mp: pytest.MonkeyPatch) -> None:
    mp.setattr(discovery, "static_gate", lambda *a, **k: Gate.ALLOW)


def _listing_ignores_activation_gates(mp: pytest.MonkeyPatch) -> None:
    def static_gate(profile: Any, tool: Any, action: str, **_: Any) -> Gate:
        act = profile.activations.get(tool.definition.name)
        gate = gate_for(profile, tool, action, tool.definition.action_risk(action))
        if act is not None and act.gates.get(action) is Gate.DENY:  # undo the override
            base = profile.matrix.gate(tool.definition.action_risk(action),
                                       profile.profile.autonomy)
            return base if base is not Gate.DENY else stricter(base, Gate.APPROVE)
        return gate
    mp.setattr(discovery, "static_gate", static_gate)


def _listing_ignores_health(mp: pytest.MonkeyPatch) -> None:
    mp.setattr(HealthBoard, "blocked", lambda self, tool: None)


def _listing_hides_every_unavailable_breaker(mp: pytest.MonkeyPatch) -> None:
    """The rule before issue 26: an open breaker hides the tool even once half-open."""
    def blocked(self: HealthBoard, tool: str) -> float | None:
        return 1.0 if self.get(tool).status is Health.UNAVAILABLE else None
    mp.setattr(HealthBoard, "blocked", blocked)


def _listing_ignores_scopes(mp: pytest.MonkeyPatch) -> None:
    mp.setattr(discovery, "missing_scopes", lambda *a: frozenset())


def _call_ignores_adjusters(mp: pytest.MonkeyPatch) -> None:
    mp.setattr(risk_step, "adjusted", lambda level, *a, **k: level)


def _listing_ignores_adjusters(mp: pytest.MonkeyPatch) -> None:
    mp.setattr(discovery, "static_gate", lambda profile, tool, action, **_: gate_for(
        profile, tool, action, tool.definition.action_risk(action)))


def _listing_predicts_argument_adjusters(mp: pytest.MonkeyPatch) -> None:
    """An adjuster over arguments taken as holding: the listing hides what runs."""
    def mutant(profile: Any, tool: Any, action: str, **k: Any) -> Gate:
        for adj in profile.adjusters:
            if adj.applies(tool.definition.name, action) and any(
                    c.arg is not None for c in adj.adjuster.when):
                return Gate.DENY
        return static_gate(profile, tool, action, **k)
    mp.setattr(discovery, "static_gate", mutant)


def _listing_ignores_action_lists(mp: pytest.MonkeyPatch) -> None:
    mp.setattr(discovery, "activation_allows", lambda activation, action: True)


def _resolve_anyway(mp: pytest.MonkeyPatch, reasons: tuple[str, ...],
                    owner: Callable[[str], str]) -> None:
    """``resolve_tool`` that, refused for one of ``reasons``, runs the activated version of
    the tool of that name owned by ``owner(tenant_id)`` all the same."""
    real = resolve_step.resolve_tool

    def resolve_tool(catalog: Any, profile: Any, tenant_id: str, name: str) -> Any:
        found = real(catalog, profile, tenant_id, name)
        if isinstance(found, resolve_step.Refusal) and found.reason.value in reasons:
            act = profile.activations.get(name)
            tool = catalog.runnable(owner(tenant_id), name, act.version if act else None)
            if act is not None and tool is not None:
                return tool, act
        return found
    mp.setattr(resolve_step, "resolve_tool", resolve_tool)


def _call_ignores_lifecycle(mp: pytest.MonkeyPatch) -> None:
    """The call runs deprecated-or-not, disabled and inactive tools' published versions."""
    _resolve_anyway(mp, ("tool_disabled", "tool_quarantined"), lambda tenant_id: tenant_id)


def _call_crosses_tenants(mp: pytest.MonkeyPatch) -> None:
    """The call finds another tenant's tool of that name (the listing does not)."""
    _resolve_anyway(mp, ("tool_not_found",),
                    lambda tenant_id: f"{tenant_id}x")  # the world's foreign tenant


def _breaker_stuck_half_open(mp: pytest.MonkeyPatch) -> None:
    """A probe that ends without a verdict keeps the probe taken (the rule before 26)."""
    mp.setattr(HealthBoard, "end_probe", lambda self, tool: None)


def _call_ignores_open_breaker(mp: pytest.MonkeyPatch) -> None:
    mp.setattr(HealthBoard, "admit_call", lambda self, tool: (None, False))


def _listing_ignores_policy_allowed_actions(mp: pytest.MonkeyPatch) -> None:
    mp.setattr(discovery, "policy_allows", lambda policy, action: True)


def _listing_ignores_the_version_pin(mp: pytest.MonkeyPatch) -> None:
    """The listing judges the newest published version, whatever the activation pins."""
    def resolve_tool(catalog: Any, profile: Any, tenant_id: str, name: str) -> Any:
        found = resolve_step.resolve_tool(catalog, profile, tenant_id, name)
        act = profile.activations.get(name)
        newest = catalog.runnable(tenant_id, name, None) if act is not None else None
        if newest is not None and (isinstance(found, tuple) or found.reason.value
                                   == "tool_not_published"):
            return newest, act
        return found
    mp.setattr(discovery, "resolve_tool", resolve_tool)


def _call_ignores_is_active(mp: pytest.MonkeyPatch) -> None:
    """The call runs a deactivated (``is_active: false``) tool's published version."""
    real = resolve_step.resolve_tool

    def resolve_tool(catalog: Any, profile: Any, tenant_id: str, name: str) -> Any:
        found = real(catalog, profile, tenant_id, name)
        record = catalog.record(tenant_id, name)
        act = profile.activations.get(name)
        if (isinstance(found, resolve_step.Refusal) and record is not None
                and not record[1].is_active and act is not None):
            tool = catalog.runnable(tenant_id, name, act.version)
            if tool is not None:
                return tool, act
        return found
    mp.setattr(resolve_step, "resolve_tool", resolve_tool)


Cell = Callable[[GateMatrix, Any, Risk, Autonomy], Gate]
"""A mutant's reading of a cell: (the profile's real matrix, the profile, risk, autonomy)."""


@dataclass
class _Matrix:
    real: GateMatrix
    profile: Any
    cell: Cell

    def gate(self, risk: Risk, autonomy: Autonomy) -> Gate:
        return self.cell(self.real, self.profile, risk, autonomy)


def _listing_reads_matrix(mp: pytest.MonkeyPatch, cell: Cell) -> None:
    """The listing's static gate judged with the matrix read through ``cell`` (the call's
    gate step reads the profile's own)."""
    def mutant(profile: Any, tool: Any, action: str, **k: Any) -> Gate:
        matrix = profile.matrix
        profile.matrix = _Matrix(matrix, profile, cell)
        try:
            return static_gate(profile, tool, action, **k)
        finally:
            profile.matrix = matrix
    mp.setattr(discovery, "static_gate", mutant)


def _listing_at_a_fixed_autonomy(mp: pytest.MonkeyPatch) -> None:
    _listing_reads_matrix(mp, lambda m, p, risk, autonomy: m.gate(risk, Autonomy(3)))


def _listing_ignores_profile_gates(mp: pytest.MonkeyPatch) -> None:
    _listing_reads_matrix(mp, lambda m, p, risk, autonomy: m.tenant_gate(risk, autonomy))


def _listing_ignores_tenant_gates(mp: pytest.MonkeyPatch) -> None:
    """The default matrix and the profile's cells, without the tenant's layer."""
    _listing_reads_matrix(mp, lambda m, p, risk, autonomy: GateMatrix(
        {}, p.profile.gates).gate(risk, autonomy))


def _listing_hides_deprecated_tools(mp: pytest.MonkeyPatch) -> None:
    mp.setattr(discovery, "RUNNABLE", {m: s - {ToolStatus.DEPRECATED}
                                        for m, s in RUNNABLE.items()})


def _listing_forgets_the_agent(mp: pytest.MonkeyPatch) -> None:
    """Adjusters over the agent's name not judged by the listing."""
    mp.setattr(discovery, "static_gate", lambda profile, tool, action, **k: static_gate(
        profile, tool, action, tenant=k.get("tenant")))


def _listing_offers_unactivated_global_tools(mp: pytest.MonkeyPatch) -> None:
    """A global tool counts as activated for every profile, in the listing only."""
    def resolve_tool(catalog: Any, profile: Any, tenant_id: str, name: str) -> Any:
        found = resolve_step.resolve_tool(catalog, profile, tenant_id, name)
        if isinstance(found, resolve_step.Refusal) and found.reason.value == "tool_not_enabled":
            record = catalog.record(tenant_id, name)
            tool = catalog.runnable(tenant_id, name, None)
            if record is not None and record[1].tenant_id is None and tool is not None:
                return tool, Activation(tool=name)
        return found
    mp.setattr(discovery, "resolve_tool", resolve_tool)


def _call_ignores_scopes(mp: pytest.MonkeyPatch) -> None:
    mp.setattr(scope_step, "missing_scopes", lambda *a: frozenset())


def _rest_listing_ignores_health(mp: pytest.MonkeyPatch) -> None:
    """``GET /discovery/agents/{agent}/enabled`` judged with every tool healthy."""
    mp.setattr(discovery_route, "agent_enabled",
               lambda snap, health, tenant, agent, scopes=None: agent_enabled(
                   snap, HealthBoard(), tenant, agent, scopes))


def _mcp_lists_open_breakers(mp: pytest.MonkeyPatch) -> None:
    """MCP's ``tools/list`` keeps the tools whose circuit is open."""
    real = views.build_listing

    def build_listing(gw: Gateway, catalog: Any, key: Any) -> Any:
        found = real(gw, catalog, key)
        entries = tuple(found.callable_names[n] for n in sorted(found.callable_names))
        wire = [e.wire() for e in entries]
        return replace(found, entries=entries, by_name=dict(found.callable_names), wire=wire,
                       result=mcp_types.ListToolsResult(
                           tools=[mcp_types.Tool.model_validate(x) for x in wire]))
    mp.setattr(views, "build_listing", build_listing)


def _listing_ignores_tenant_adjusters(mp: pytest.MonkeyPatch) -> None:
    """Only the profile's own adjusters judged by the listing (the call reads both)."""
    def mutant(profile: Any, tool: Any, action: str, **k: Any) -> Gate:
        every = profile.adjusters
        profile.adjusters = tuple(a for a in every if a.adjuster in profile.profile.adjusters)
        try:
            return static_gate(profile, tool, action, **k)
        finally:
            profile.adjusters = every
    mp.setattr(discovery, "static_gate", mutant)


def _listing_reads_the_tools_side_effect(mp: pytest.MonkeyPatch) -> None:
    """Adjusters over the side effect judged with the tool's default, not the action's."""
    def mutant(profile: Any, tool: Any, action: str, **k: Any) -> Gate:
        definition = tool.definition
        actions = {a: spec.model_copy(update={"side_effect": None})
                   for a, spec in definition.actions.items()}
        plain = definition.model_copy(update={"actions": actions})
        return static_gate(profile, CompiledTool(tool.record_id, plain, tool.status,
                                                 tool.provider), action, **k)
    mp.setattr(discovery, "static_gate", mutant)


def _mcp_listing_cached_across_health(mp: pytest.MonkeyPatch) -> None:
    """MCP's per-agent listing kept after a tool's health changed."""
    mp.setattr(views.Listings, "_stale", lambda self, found: False)


MUTANTS: dict[str, Callable[[pytest.MonkeyPatch], None]] = {
    "listing without its gate filter": _no_gate_filter,
    "listing ignores activation gates": _listing_ignores_activation_gates,
    "listing ignores health": _listing_ignores_health,
    "listing hides half-open breakers": _listing_hides_every_unavailable_breaker,
    "listing ignores scopes": _listing_ignores_scopes,
    "call ignores adjusters": _call_ignores_adjusters,
    "listing ignores adjusters": _listing_ignores_adjusters,
    "listing predicts argument adjusters": _listing_predicts_argument_adjusters,
    "listing ignores activation action lists": _listing_ignores_action_lists,
    "call ignores lifecycle": _call_ignores_lifecycle,
    "call crosses tenants": _call_crosses_tenants,
    "breaker stuck half-open": _breaker_stuck_half_open,
    "call ignores an open breaker": _call_ignores_open_breaker,
    "listing ignores the policy's allowed_actions": _listing_ignores_policy_allowed_actions,
    "listing ignores the version pin": _listing_ignores_the_version_pin,
    "call ignores is_active": _call_ignores_is_active,
    "listing at a fixed autonomy": _listing_at_a_fixed_autonomy,
    "listing ignores profile gates": _listing_ignores_profile_gates,
    "listing ignores tenant gates": _listing_ignores_tenant_gates,
    "listing hides deprecated tools": _listing_hides_deprecated_tools,
    "listing forgets the agent for adjusters": _listing_forgets_the_agent,
    "listing offers unactivated global tools": _listing_offers_unactivated_global_tools,
    "call ignores scopes": _call_ignores_scopes,
    "listing ignores tenant adjusters": _listing_ignores_tenant_adjusters,
    "listing reads the tool's side effect": _listing_reads_the_tools_side_effect,
}
FACE_MUTANTS: dict[str, tuple[str, Callable[[pytest.MonkeyPatch], None]]] = {
    "REST listing ignores health": ("rest", _rest_listing_ignores_health),
    "MCP lists open breakers": ("mcp", _mcp_lists_open_breakers),
    "MCP listing cached across health changes": ("mcp", _mcp_listing_cached_across_health),
}
"""Rules of one face only: searched through that face."""
assert limits_step  # the limits step reads HealthBoard.admit_call at call time


@pytest.mark.parametrize("mutant", list(MUTANTS))
def test_the_property_finds_a_counterexample_against(mutant: str, gw: Gateway,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    MUTANTS[mutant](monkeypatch)
    with pytest.raises(Counterexample) as found:
        run_property(gw, LibraryFace(), examples=EXAMPLES, shrink=False)
    print(f"\n{mutant}: {found.value}")


@pytest.fixture(scope="module")
def faces(gw: Gateway) -> Iterator[dict[str, Face]]:
    with TestClient(create_app(gw, ApiSettings())) as client:
        yield {"rest": RestFace(client), "mcp": McpFace(client)}


@pytest.mark.parametrize("mutant", list(FACE_MUTANTS))
def test_each_face_finds_a_counterexample_against(mutant: str, gw: Gateway,
                                                  faces: dict[str, Face],
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    face, breaks = FACE_MUTANTS[mutant]
    breaks(monkeypatch)
    with pytest.raises(Counterexample) as found:
        run_property(gw, faces[face], examples=FACE_EXAMPLES, shrink=False)
    print(f"\n{mutant}: {found.value}")


def test_the_oauth_worlds_find_a_listing_that_ignores_the_token_scopes(
        gw: Gateway, monkeypatch: pytest.MonkeyPatch) -> None:
    """The listing judged with the profile's scopes alone while the call narrows them by
    the OAuth token's (``Principal.scopes``): found in the worlds that call with tokens."""
    monkeypatch.setattr(discovery, "granted_scopes", lambda profile, token: profile)
    with pytest.raises(Counterexample) as found:
        run_property(gw, LibraryFace(), examples=EXAMPLES, shrink=False,
                     mint=lambda tenant, agent, scopes: "")
    print(f"\nlisting ignores the token's scopes: {found.value}")

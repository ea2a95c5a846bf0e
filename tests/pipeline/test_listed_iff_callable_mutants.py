"""The listed ⇔ callable property (``test_listed_iff_callable``) cannot silently become
vacuous: against each deliberately broken rule below (monkeypatched, on the listing's side
or the call's), its checker finds a counterexample within a few derandomized examples.
Rules named in issue 26 and others besides (lifecycle, action allow-lists, tenants,
argument-dependent adjusters, the half-open breaker)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import toolkeeper.pipeline.limits as limits_step
import toolkeeper.pipeline.resolve as resolve_step
import toolkeeper.pipeline.risk as risk_step
import toolkeeper.services.discovery as discovery
from tests.pipeline.listed_world import Counterexample, LibraryFace, run_property
from toolkeeper import Gate, Gateway
from toolkeeper.model.enums import Health
from toolkeeper.model.gates import stricter
from toolkeeper.pipeline.gate import gate_for
from toolkeeper.pipeline.health import HealthBoard

pytestmark = pytest.mark.property
EXAMPLES = 60
"""At most this many worlds per broken rule (the search stops at the first counterexample)."""


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
    real = discovery.static_gate

    def static_gate(profile: Any, tool: Any, action: str, **k: Any) -> Gate:
        for adj in profile.adjusters:
            if adj.applies(tool.definition.name, action) and any(
                    c.arg is not None for c in adj.adjuster.when):
                return Gate.DENY
        return real(profile, tool, action, **k)
    mp.setattr(discovery, "static_gate", static_gate)


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
}
assert limits_step  # the limits step reads HealthBoard.admit_call at call time


@pytest.mark.parametrize("mutant", list(MUTANTS))
def test_the_property_finds_a_counterexample_against(mutant: str, gw: Gateway,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    MUTANTS[mutant](monkeypatch)
    with pytest.raises(Counterexample) as found:
        run_property(gw, LibraryFace(), examples=EXAMPLES, shrink=False)
    print(f"\n{mutant}: {found.value}")


def test_and_none_without_a_broken_rule(gw: Gateway) -> None:
    """The same search with every rule intact finds nothing (the control)."""
    run_property(gw, LibraryFace(), examples=EXAMPLES, shrink=False)

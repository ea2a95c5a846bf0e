"""The deny-wins / order-free property (:mod:`tests.pipeline.gate_order_free`) finds a
counterexample when a gate rule is broken on purpose, so it can never silently become
vacuous again. Each rule is monkeypatched broken for one fixed (derandomized, unshrunk)
run, which must fail; the same run passes on the real rules."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from tests.pipeline.gate_order_free import gateway_at, order_free_property
from toolkeeper import Autonomy, Gate, Gateway, Risk
from toolkeeper.model import gates as model_gates
from toolkeeper.model.gates import GateMatrix
from toolkeeper.pipeline import gate as gate_step
from toolkeeper.pipeline import profiles

EXAMPLES = 40
FOUND = r"a decision|a write refused"
"""The property's own assertions (not a crash of the run)."""


@pytest.fixture(scope="module")
def gw(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gateway]:
    yield from gateway_at(tmp_path_factory.mktemp("mutants") / "order.db")


def _run(gw: Gateway) -> Counter[str]:
    seen: Counter[str] = Counter()
    order_free_property(gw, seen, max_examples=EXAMPLES, derandomize=True, shrink=False)()
    return seen


def _a_later_allow_overrides(mp: pytest.MonkeyPatch) -> None:
    """Deny does not win: an ``allow`` combined after a stricter gate replaces it."""
    real = model_gates.stricter

    def broken(a: Gate, b: Gate) -> Gate:
        return b if b is Gate.ALLOW else real(a, b)
    mp.setattr(model_gates, "stricter", broken)
    mp.setattr(gate_step, "stricter", broken)


def _the_last_activation_wins(mp: pytest.MonkeyPatch) -> None:
    """Order-dependent: of two activations of one tool, the one written last counts."""
    mp.setattr(profiles, "_merge", lambda profile, a, b: b)


def _the_profile_layer_is_ignored(mp: pytest.MonkeyPatch) -> None:
    """Only the first layer (default and tenant) counts: the profile's cells never tighten."""
    real = model_gates.combine
    mp.setattr(model_gates, "combine", lambda tenant, *below: real(tenant))


def _gate_for_mapping(mp: pytest.MonkeyPatch, was: Gate, now: Gate) -> None:
    real = gate_step.gate_for

    def broken(*args: Any) -> Gate:
        found = real(*args)
        return now if found is was else found
    mp.setattr(gate_step, "gate_for", broken)


def _confirm_is_allow(mp: pytest.MonkeyPatch) -> None:
    _gate_for_mapping(mp, Gate.CONFIRM, Gate.ALLOW)


def _approve_is_confirm(mp: pytest.MonkeyPatch) -> None:
    _gate_for_mapping(mp, Gate.APPROVE, Gate.CONFIRM)


def _autonomy_off_by_one(mp: pytest.MonkeyPatch) -> None:
    """The matrix read one autonomy level up (capped at 3)."""
    real = GateMatrix.gate

    def broken(self: GateMatrix, risk: Risk, autonomy: Autonomy) -> Gate:
        return real(self, risk, Autonomy(min(3, int(autonomy) + 1)))
    mp.setattr(GateMatrix, "gate", broken)


def _requires_confirmation_ignored(mp: pytest.MonkeyPatch) -> None:
    """An activation's ``requires_confirmation`` no longer raises allow/preview."""
    real = profiles.merged_activations

    def broken(profile: Any) -> Any:
        return {t: a.model_copy(update={"requires_confirmation": None})
                for t, a in real(profile).items()}
    mp.setattr(profiles, "merged_activations", broken)


MUTANTS: dict[str, Callable[[pytest.MonkeyPatch], None]] = {
    "a later allow overrides a deny": _a_later_allow_overrides,
    "the last activation written wins": _the_last_activation_wins,
    "the profile layer is ignored": _the_profile_layer_is_ignored,
    "confirm is treated as allow": _confirm_is_allow,
    "approve is downgraded to confirm": _approve_is_confirm,
    "autonomy is read off by one": _autonomy_off_by_one,
    "requires_confirmation is ignored": _requires_confirmation_ignored,
}


@pytest.mark.property
def test_the_fixed_run_passes_on_the_real_rules(gw: Gateway) -> None:
    seen = _run(gw)
    assert all(seen[k] for k in ("allow", "preview", "confirm", "approve", "deny")), seen


@pytest.mark.property
@pytest.mark.parametrize("mutant", list(MUTANTS))
def test_the_property_finds_a_counterexample_to_a_broken_rule(
        gw: Gateway, monkeypatch: pytest.MonkeyPatch, mutant: str) -> None:
    MUTANTS[mutant](monkeypatch)
    with pytest.raises(AssertionError, match=FOUND):
        _run(gw)

"""The deny-wins / order-free property of SPEC §2 ("explicit deny anywhere wins over any
allow; order of policy statements does not matter"), run end to end through a real
gateway: shared by ``test_gate_order_free.py`` (the property) and
``test_gate_order_free_mutants.py`` (the property against deliberately broken rules).

Each example writes a tenant's gate cells, a profile's cells and autonomy, and one to
three activations of each tool to two tenants — the second with every layer's statements
in another order — then calls every action of two tools (one with a preview, one
without) in both tenants. The decision each call reaches (read from its answer, not from
the gateway's own ``gate`` field) must be the same in both tenants and the one an
independent model of the rules predicts: the default matrix, the tenant's cells
replacing it, the profile's only tightening it (a looser one refuses the write), the
activations' ``requires_confirmation`` raising ``allow``/``preview`` to ``confirm`` and
their gates tightening, ``preview`` without preview support escalating to ``confirm``.
"""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, ClassVar

from hypothesis import HealthCheck, Phase, event, given, settings
from hypothesis import strategies as st

from tests.pipeline.sample_tools import Payments
from toolkeeper import (
    ActionSpec,
    Activation,
    Agent,
    BaseTool,
    Gateway,
    PreviewResult,
    Profile,
    Risk,
    ToolContext,
)
from toolkeeper.errors import OperationRefused

KINDS = ("allow", "preview", "confirm", "approve", "deny")
"""The decisions a gate reaches, loosest first (the model's own copy of the order)."""
_RANK = {k: i for i, k in enumerate(KINDS)}
_DEFAULT = {  # SPEC §2's default matrix, written out again: the model must not share code
    "low": ("confirm", "allow", "allow", "allow"),
    "medium": ("confirm", "preview", "allow", "allow"),
    "high": ("approve", "confirm", "preview", "allow"),
    "critical": ("deny", "approve", "approve", "confirm"),
}
_SCHEMA = {"type": "object", "additionalProperties": False, "required": ["invoice", "amount"],
           "properties": {"invoice": {"type": "string"}, "amount": {"type": "integer"}}}


class Vault(BaseTool):
    """One action at each risk, all with a preview (so ``preview`` can be reached)."""

    tool_name = "vault"
    actions: ClassVar[dict[str, ActionSpec]] = {
        a: ActionSpec(input_schema=_SCHEMA) for a in ("read", "move", "pay", "wire")}
    risk_default = Risk.LOW
    risk_map: ClassVar[dict[str, Risk]] = {"move": Risk.MEDIUM, "pay": Risk.HIGH,
                                           "wire": Risk.CRITICAL}

    async def execute(self, action: str, request: dict[str, Any], context: ToolContext) -> Any:
        return {"done": action}

    def preview(self, action: str, request: dict[str, Any],
                context: ToolContext) -> PreviewResult:
        return PreviewResult(summary=f"{action} {request['invoice']}", data=dict(request))


CALLS = (("vault", "read", "low", True), ("vault", "move", "medium", True),
         ("vault", "pay", "high", True), ("vault", "wire", "critical", True),
         ("payments", "pay", "high", False), ("payments", "refund", "low", False))
"""(tool, action, its risk, whether it has a preview): every call each example makes."""
ACTIONS = {"vault": ("read", "move", "pay", "wire"), "payments": ("pay", "refund")}
TENANTS = ("ta", "tb")

# -- generators: statements as (risk, autonomy, gate) cells, activations per tool ----------

_gates = st.sampled_from(KINDS)
_loose = st.sampled_from(("allow", "allow", "preview", "preview", "preview", "confirm", "approve",
                         "deny"))
"""The tenant's cells lean loose (only they can loosen), so ``allow`` and ``preview`` are
reached as often as the stricter gates."""
cells = st.tuples(st.sampled_from(tuple(_DEFAULT)), st.integers(0, 3), _loose)
layer = st.lists(cells, max_size=6)
below = st.lists(st.tuples(st.sampled_from(tuple(_DEFAULT)), st.integers(0, 3),
                          st.sampled_from(("allow", "preview", "confirm", "approve", "deny",
                                           "deny"))), max_size=3)
"""A profile's cells: fewer and leaning strict, so that most writes are not refused for a
looser cell (a quarter of them still are)."""


def _activation(tool: str) -> st.SearchStrategy[dict[str, Any]]:
    return st.fixed_dictionaries({
        "tool": st.just(tool),
        "gates": st.dictionaries(st.sampled_from(ACTIONS[tool]), _gates, max_size=1),
        "requires_confirmation": st.sampled_from([None, None, None, None, None, False, True])})


activations = st.tuples(st.lists(_activation("vault"), min_size=1, max_size=2),
                        st.lists(_activation("payments"), min_size=1, max_size=2))


def nested(statements: list[tuple[str, int, str]]) -> dict[str, dict[str, str]]:
    """A layer as config writes it (one statement per cell: the first one)."""
    out: dict[str, dict[str, str]] = {}
    for risk, autonomy, gate in statements:
        out.setdefault(risk, {}).setdefault(str(autonomy), gate)
    return out


def reordered(layer: dict[str, dict[str, str]]) -> dict[str, dict[str, str]]:
    return {r: dict(reversed(row.items())) for r, row in reversed(layer.items())}


# -- the model --------------------------------------------------------------------------


def _max(*kinds: str) -> str:
    return max(kinds, key=_RANK.__getitem__)


def refused(autonomy: int, tenant: dict[str, dict[str, str]],
            profile: dict[str, dict[str, str]]) -> bool:
    """Whether the profile write is refused: one of its cells is looser than the tenant's."""
    return any(_RANK[g] < _RANK[tenant.get(r, {}).get(a, _DEFAULT[r][int(a)])]
               for r, row in profile.items() for a, g in row.items())


def expected(autonomy: int, tenant: dict[str, dict[str, str]],
             profile: dict[str, dict[str, str]], acts: list[dict[str, Any]],
             tool: str, action: str, risk: str, has_preview: bool) -> str:
    """The decision SPEC §2 gives ``tool.action`` (at ``risk``)."""
    a = str(autonomy)
    gate = tenant.get(risk, {}).get(a, _DEFAULT[risk][autonomy])
    gate = _max(gate, profile.get(risk, {}).get(a, "allow"))
    mine = [x for x in acts if x["tool"] == tool]
    if any(x["requires_confirmation"] for x in mine) and gate in ("allow", "preview"):
        gate = "confirm"
    gate = _max(gate, *(x["gates"].get(action, "allow") for x in mine))
    return "confirm" if gate == "preview" and not has_preview else gate


def explicit_deny(autonomy: int, tenant: dict[str, dict[str, str]],
                  profile: dict[str, dict[str, str]], acts: list[dict[str, Any]],
                  tool: str, action: str, risk: str) -> bool:
    """Whether a layer states ``deny`` for this call: then nothing may let it through."""
    a = str(autonomy)
    return "deny" in (tenant.get(risk, {}).get(a), profile.get(risk, {}).get(a)) or any(
        x["tool"] == tool and x["gates"].get(action) == "deny" for x in acts)


# -- the gateway ------------------------------------------------------------------------



def open_gateway(path: Path) -> Gateway:
    """A gateway with both tools global (each tenant sees them) and agent ``bot`` in each
    tenant."""
    gw = Gateway.open(f"sqlite:///{path}")
    gw.registry.register(Payments)
    gw.registry.register(Vault)
    for tenant in TENANTS:
        gw.registry.put_profile(Profile(name="p", tenant_id=tenant))
        gw.registry.put_agent(Agent(name="bot", profile="p", tenant_id=tenant))
    return gw


def _write(gw: Gateway, tenant: str, autonomy: int, tenant_gates: dict[str, Any],
           profile_gates: dict[str, Any], acts: list[Activation]) -> str | None:
    gw.registry.set_tenant_policy(tenant, gates=tenant_gates)
    try:
        gw.registry.put_profile(Profile.model_validate({
            "name": "p", "tenant_id": tenant, "autonomy": autonomy, "scopes": ["payments"],
            "gates": profile_gates, "activations": acts}), replace=True)
    except OperationRefused as exc:
        return str(exc.reason)
    return None


_STATUS = {"succeeded": "allow", "preview_required": "preview",
           "confirmation_required": "confirm", "approval_required": "approve"}


def decision(status: str, reason: str | None) -> str:
    """The decision a call reached, as its caller reads it from the answer."""
    if reason == "gate_denied":
        return "deny"
    return _STATUS.get(status, f"{status}:{reason}")


_fresh = itertools.count()


def _decisions(gw: Gateway, tenant: str) -> list[str]:
    out = []
    for tool, action, _, _ in CALLS:
        # fresh arguments: no exact repeat is answered from an earlier outcome, no pending
        # approval reused
        args = {"invoice": f"inv-{next(_fresh)}", "amount": 5}
        res = gw.call_sync(tool, action, args, agent="bot", tenant_id=tenant)
        out.append(decision(res.status.value, None if res.reason is None else str(res.reason)))
    return out


Check = Callable[[], None]


def order_free_property(gw: Gateway, seen: Counter[str], *, max_examples: int,
                        derandomize: bool = False, shrink: bool = True) -> Check:
    """The property as a runnable hypothesis test over ``gw``; each decision reached is
    labelled with ``event()`` and counted in ``seen`` (``refused``: a write the model and
    the gateway both refused). ``derandomize`` and no ``shrink``: the mutation tests'
    fixed, quick run."""
    phases = tuple(Phase) if shrink else (Phase.explicit, Phase.generate)

    @settings(max_examples=max_examples, deadline=None, derandomize=derandomize,
              database=None, phases=phases, suppress_health_check=[HealthCheck.too_slow])
    @given(autonomy=st.integers(0, 3), tenant=layer, profile=below, acts=activations,
           data=st.data())
    def check(autonomy: int, tenant: list[Any], profile: list[Any],
              acts: tuple[list[dict[str, Any]], list[dict[str, Any]]],
              data: st.DataObject) -> None:
        written = [*acts[0], *acts[1]]
        permuted = [{**a, "gates": dict(reversed(a["gates"].items()))}
                    for a in data.draw(st.permutations(written))]
        t_gates, p_gates = nested(tenant), nested(profile)
        refused_a = _write(gw, "ta", autonomy, t_gates, p_gates,
                           [Activation(**a) for a in written])
        refused_b = _write(gw, "tb", autonomy, reordered(t_gates), reordered(p_gates),
                           [Activation(**a) for a in permuted])
        model_refuses = refused(autonomy, t_gates, p_gates)
        assert refused_a == refused_b == ("config_invalid" if model_refuses else None), \
            ("a write refused other than the rules say", refused_a, refused_b, model_refuses)
        if model_refuses:
            event("refused")
            seen["refused"] += 1
            return
        want = [expected(autonomy, t_gates, p_gates, written, tool, action, risk, preview)
                for tool, action, risk, preview in CALLS]
        got_a, got_b = _decisions(gw, "ta"), _decisions(gw, "tb")
        for kind in got_a:
            event(f"decision: {kind}")
            seen[kind] += 1
        assert got_a == got_b, ("order of statements changed a decision", got_a, got_b)
        denied = [explicit_deny(autonomy, t_gates, p_gates, written, tool, action, risk)
                  for tool, action, risk, _ in CALLS]
        assert all(g == "deny" for g, d in zip(got_a, denied, strict=True) if d), \
            ("an explicit deny did not win: a decision is not deny", got_a, denied)
        assert got_a == want, ("a decision is not the rules'", got_a, want)

    return check


def distribution(seen: Counter[str]) -> str:
    total = sum(seen[k] for k in KINDS) or 1
    return ", ".join(f"{k} {seen[k]} ({seen[k] / total:.0%})" for k in (*KINDS, "refused"))


def gateway_at(path: Path) -> Iterator[Gateway]:
    gw = open_gateway(path)
    try:
        yield gw
    finally:
        gw.close()

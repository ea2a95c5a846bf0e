"""The gate matrix (SPEC §2 step 7) and how its layers combine.

Layers, from the top: the product's default matrix; the tenant's cells, each replacing the
default's (a tenant may loosen or tighten); below the tenant, profiles and activations,
which may only make a gate stricter (``allow < preview < confirm < approve < deny``).
Every combination is a maximum over strictness, so a ``deny`` at any layer wins and the
order statements are written in — across layers or within one — never matters.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from toolkeeper.model.enums import Autonomy, Gate, Risk

A, P, C, AP, D = Gate.ALLOW, Gate.PREVIEW, Gate.CONFIRM, Gate.APPROVE, Gate.DENY

DEFAULT_MATRIX: Mapping[Risk, Mapping[Autonomy, Gate]] = {
    Risk.LOW: {Autonomy(0): C, Autonomy(1): A, Autonomy(2): A, Autonomy(3): A},
    Risk.MEDIUM: {Autonomy(0): C, Autonomy(1): P, Autonomy(2): A, Autonomy(3): A},
    Risk.HIGH: {Autonomy(0): AP, Autonomy(1): C, Autonomy(2): P, Autonomy(3): A},
    Risk.CRITICAL: {Autonomy(0): D, Autonomy(1): AP, Autonomy(2): AP, Autonomy(3): C},
}

GATE_STRICTNESS = {Gate.ALLOW: 0, Gate.PREVIEW: 1, Gate.CONFIRM: 2, Gate.APPROVE: 3, Gate.DENY: 4}

Cell = tuple[Risk, Autonomy]
Statement = tuple[Risk, Autonomy, Gate]
"""One override of one layer: this cell gets (at least) this gate."""


def stricter(a: Gate, b: Gate) -> Gate:
    """The stricter of two gates: an explicit deny anywhere wins."""
    return a if GATE_STRICTNESS[a] >= GATE_STRICTNESS[b] else b


def strictest(gates: Iterable[Gate], floor: Gate = Gate.ALLOW) -> Gate:
    """The strictest of ``gates`` and ``floor`` (a maximum, so order-free)."""
    out = floor
    for g in gates:
        out = stricter(out, g)
    return out


def statements(layer: Mapping[Any, Mapping[Any, Any]]) -> Iterator[Statement]:
    """A layer written as ``risk -> autonomy -> gate`` (config and JSON give strings)."""
    for risk, row in layer.items():
        for autonomy, gate in row.items():
            yield Risk(risk), Autonomy(int(autonomy)), Gate(gate)


def combine(tenant: Iterable[Statement], *below: Iterable[Statement]) -> dict[Cell, Gate]:
    """Every cell of the matrix after the layers: the tenant's statements replace the default
    cell (several for one cell: the strictest), every statement below only tightens."""
    replaced: dict[Cell, list[Gate]] = {}
    for risk, autonomy, gate in tenant:
        replaced.setdefault((risk, autonomy), []).append(gate)
    cells = {(r, a): strictest(replaced[(r, a)]) if (r, a) in replaced else g
             for r, row in DEFAULT_MATRIX.items() for a, g in row.items()}
    for layer in below:
        for risk, autonomy, gate in layer:
            cells[(risk, autonomy)] = stricter(cells[(risk, autonomy)], gate)
    return cells


class GateMatrix:
    """Risk x autonomy → gate: the default matrix, the tenant's cells replacing it, and
    every further layer (a profile's ``gates``) only tightening it."""

    __slots__ = ("_cells", "_tenant")

    def __init__(self, tenant: Mapping[Any, Mapping[Any, Any]] | None = None,
                 *below: Mapping[Any, Mapping[Any, Any]]) -> None:
        self._tenant = combine(statements(tenant or {}))
        self._cells = combine(statements(tenant or {}), *(statements(b) for b in below))

    def gate(self, risk: Risk, autonomy: Autonomy) -> Gate:
        return self._cells[(risk, autonomy)]

    def tenant_gate(self, risk: Risk, autonomy: Autonomy) -> Gate:
        """The cell as the default and the tenant's layer alone make it."""
        return self._tenant[(risk, autonomy)]

    def rows(self) -> dict[str, dict[int, str]]:
        out: dict[str, dict[int, str]] = {}
        for (risk, autonomy), gate in self._cells.items():
            out.setdefault(risk.value, {})[int(autonomy)] = gate.value
        return out


def loosening(matrix: GateMatrix, layer: Mapping[Any, Mapping[Any, Any]]) -> list[str]:
    """The statements of ``layer`` (below the tenant) that ask for a gate looser than the
    tenant's: they cannot take effect, so a write that contains them is refused."""
    out = []
    for risk, autonomy, gate in statements(layer):
        floor = matrix.tenant_gate(risk, autonomy)
        if stricter(gate, floor) is not gate:
            out.append(f"gates.{risk.value}.{int(autonomy)} = {gate.value} is looser than "
                       f"{floor.value}, the tenant's matrix there")
    return out

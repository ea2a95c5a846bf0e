"""The gate matrix (SPEC §2 step 7) and its overrides."""

from __future__ import annotations

from collections.abc import Mapping

from toolkeeper.model.enums import Autonomy, Gate, Risk

A, P, C, AP, D = Gate.ALLOW, Gate.PREVIEW, Gate.CONFIRM, Gate.APPROVE, Gate.DENY

DEFAULT_MATRIX: Mapping[Risk, Mapping[Autonomy, Gate]] = {
    Risk.LOW: {Autonomy(0): C, Autonomy(1): A, Autonomy(2): A, Autonomy(3): A},
    Risk.MEDIUM: {Autonomy(0): C, Autonomy(1): P, Autonomy(2): A, Autonomy(3): A},
    Risk.HIGH: {Autonomy(0): AP, Autonomy(1): C, Autonomy(2): P, Autonomy(3): A},
    Risk.CRITICAL: {Autonomy(0): D, Autonomy(1): AP, Autonomy(2): AP, Autonomy(3): C},
}

GATE_STRICTNESS = {Gate.ALLOW: 0, Gate.PREVIEW: 1, Gate.CONFIRM: 2, Gate.APPROVE: 3, Gate.DENY: 4}


def stricter(a: Gate, b: Gate) -> Gate:
    """The stricter of two gates: an explicit deny anywhere wins."""
    return a if GATE_STRICTNESS[a] >= GATE_STRICTNESS[b] else b


class GateMatrix:
    """Risk x autonomy → gate, the default matrix with tenant/profile overrides layered on."""

    __slots__ = ("_cells",)

    def __init__(self, *layers: Mapping[Risk, Mapping[Autonomy, Gate]]) -> None:
        cells = {(r, a): g for r, row in DEFAULT_MATRIX.items() for a, g in row.items()}
        for layer in layers:
            for risk, row in layer.items():
                for autonomy, gate in row.items():
                    cells[(Risk(risk), Autonomy(int(autonomy)))] = Gate(gate)
        self._cells = cells

    def gate(self, risk: Risk, autonomy: Autonomy) -> Gate:
        return self._cells[(risk, autonomy)]

    def rows(self) -> dict[str, dict[int, str]]:
        out: dict[str, dict[int, str]] = {}
        for (risk, autonomy), gate in self._cells.items():
            out.setdefault(risk.value, {})[int(autonomy)] = gate.value
        return out

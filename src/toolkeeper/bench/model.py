"""What a benchmark returns: result rows, optional targets, and the sizes it ran with."""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

SUMMARY_LINE = re.compile(r"^\S+ -?[\d.]+ \S+ target (<=|>=)[\d.]+ (PASS|FAIL)$")
"""The shape of every summary line (``pure_overhead_p50 18.2 us target <=25 PASS``); a
difference may be negative (a governed side faster than direct within the noise)."""


class BenchError(RuntimeError):
    """The benchmark could not measure what it claims (a call failed, a worker died)."""


@dataclass(frozen=True, kw_only=True)
class Target:
    """A SPEC §10 bound: ``value <= bound`` or ``value >= bound``."""

    op: Literal["<=", ">="]
    bound: float

    def met(self, value: float) -> bool:
        return value <= self.bound if self.op == "<=" else value >= self.bound

    def __str__(self) -> str:
        return f"{self.op}{self.bound:g}"


@dataclass(frozen=True, kw_only=True)
class Row:
    """One figure. Rows with a ``target`` also become summary lines."""

    metric: str
    """Stable, space-free name (``pure_overhead_p50``)."""
    value: float
    unit: str
    target: Target | None = None
    decimals: int = 1
    """Digits after the point when printed (0 for counts and rates)."""

    @property
    def shown(self) -> str:
        return f"{self.value:.{self.decimals}f}"

    @property
    def passed(self) -> bool | None:
        # judged on the printed figure, so a line never reads "3000 … >=3000 FAIL"
        return None if self.target is None else self.target.met(round(self.value, self.decimals))

    def summary_line(self) -> str:
        """``<metric> <value> <unit> target <target> <PASS|FAIL>``; only for targeted rows."""
        if self.target is None:
            raise ValueError(f"{self.metric} has no target")
        verdict = "PASS" if self.passed else "FAIL"
        return f"{self.metric} {self.shown} {self.unit} target {self.target} {verdict}"

    def to_dict(self) -> dict[str, Any]:
        return {"metric": self.metric, "value": self.value, "unit": self.unit,
                "target": None if self.target is None else str(self.target),
                "passed": self.passed}


@dataclass(kw_only=True)
class BenchResult:
    """Everything one benchmark function measured."""

    name: str
    title: str
    rows: list[Row] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    """How it was measured (sizes, workers) and anything that cut it short."""

    def summary_lines(self) -> list[str]:
        return [r.summary_line() for r in self.rows if r.target is not None]

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "title": self.title, "notes": list(self.notes),
                "rows": [r.to_dict() for r in self.rows]}


@dataclass(frozen=True, kw_only=True)
class Sizes:
    """How much to measure. Every loop is bounded by these counts and by ``budget_s``."""

    warmup: int = 1000
    """Calls of each kind before any sample is kept."""
    blocks: int = 20
    """Alternating direct/governed blocks, so machine noise hits both sides."""
    block_calls: int = 500
    duration_s: float = 5.0
    """Measured time of each throughput worker."""
    workers: int | None = None
    """Throughput processes; ``None`` means ``os.cpu_count()``."""
    budget_s: float = 120.0
    """Wall-time cap of one latency benchmark; blocks stop early (and say so) past it."""
    idle_sessions: int = 10_000
    """Idle MCP sessions the idle-sessions benchmark holds open beside its callers."""

    @classmethod
    def quick(cls) -> Sizes:
        """For CI smoke runs: seconds, not minutes; figures are rough."""
        return cls(warmup=200, blocks=6, block_calls=200, duration_s=1.0, budget_s=30.0,
                   idle_sessions=300)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def percentile(sorted_samples: Sequence[float], q: float) -> float:
    """Nearest-rank percentile of already sorted samples (``q`` in 0..100)."""
    if not sorted_samples:
        raise ValueError("no samples")
    rank = max(1, math.ceil(q / 100.0 * len(sorted_samples)))
    return float(sorted_samples[min(rank, len(sorted_samples)) - 1])


def latency_rows(prefix: str, direct_ns: list[int], governed_ns: list[int],
                 overhead_p50_target: Target | None, *, direct: str = "direct") -> list[Row]:
    """Direct/governed p50 and p99 and their differences, in microseconds (``direct``
    names the other side: ``floor`` when it is one)."""
    d, g = sorted(direct_ns), sorted(governed_ns)
    figures = {q: (percentile(d, q) / 1000.0, percentile(g, q) / 1000.0) for q in (50, 99)}
    rows = [Row(metric=f"{prefix}_{direct}_p{q}", value=d_us, unit="us", decimals=2)
            for q, (d_us, _) in figures.items()]
    rows += [Row(metric=f"{prefix}_governed_p{q}", value=g_us, unit="us")
             for q, (_, g_us) in figures.items()]
    for q, (other, governed) in figures.items():
        target = overhead_p50_target if q == 50 else None
        rows.append(Row(metric=f"{prefix}_overhead_p{q}", value=governed - other, unit="us",
                        target=target))
    return rows


def ratio_row(metric: str, value: float, floor: float, target: Target | None) -> Row:
    """``value`` as a multiple of ``floor``, measured in the same run (SPEC §10: targets
    are ratios; the absolute figures are printed beside them as information)."""
    if floor <= 0:
        raise BenchError(f"{metric}: the floor measured {floor}, nothing to compare with")
    return Row(metric=metric, value=value / floor, unit="x", target=target, decimals=2)

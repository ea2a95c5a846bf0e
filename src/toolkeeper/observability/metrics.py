"""Prometheus metrics of SPEC §9, in a registry owned by the gateway (no globals).

The hot path only bumps plain counters under a lock; a custom collector turns them into
Prometheus families when scraped. prometheus-client's labelled children cost several
microseconds per call, a fifth of the whole pipeline's budget.
"""

from __future__ import annotations

import threading
from bisect import bisect_left
from collections.abc import Callable, Iterator

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector

BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30)


class Metrics(Collector):
    """The gateway's counters; register-once, scrape with :meth:`render`."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        self._lock = threading.Lock()
        self._calls: dict[tuple[str, str, str], list[float]] = {}
        self._hits: dict[tuple[str, str], int] = {}
        self._effects: dict[str, int] = {}
        self._gates: dict[str, int] = {}
        self._denials: dict[str, int] = {}
        self._pending: Callable[[], float] | None = None
        self.registry.register(self)

    def call(self, tenant: str, tool: str, status: str, seconds: float) -> None:
        """One finished call: counts, duration sum and histogram bucket."""
        key = (tenant, tool, status)
        with self._lock:
            row = self._calls.get(key)
            if row is None:
                row = self._calls[key] = [0.0] * (len(BUCKETS) + 3)  # count, sum, buckets, +Inf
            row[0] += 1
            row[1] += seconds
            row[2 + bisect_left(BUCKETS, seconds)] += 1

    def _bump(self, table: dict[str, int], key: str) -> None:
        with self._lock:
            table[key] = table.get(key, 0) + 1

    def gate(self, gate: str) -> None:
        self._bump(self._gates, gate)

    def denial(self, reason: str) -> None:
        self._bump(self._denials, reason)

    def side_effect(self, policy: str) -> None:
        self._bump(self._effects, policy)

    def cache_hit(self, tenant: str, tool: str) -> None:
        with self._lock:
            self._hits[(tenant, tool)] = self._hits.get((tenant, tool), 0) + 1

    def pending_from(self, fn: Callable[[], float]) -> None:
        self._pending = fn

    def collect(self) -> Iterator[Metric]:
        with self._lock:
            calls = {k: list(v) for k, v in self._calls.items()}
            hits, effects = dict(self._hits), dict(self._effects)
            gates, denials = dict(self._gates), dict(self._denials)
        labels = ["tenant", "tool", "status"]
        hist = HistogramMetricFamily("tool_execution_duration_seconds", "Tool call duration",
                                     labels=labels)
        total = CounterMetricFamily("tool_execution_total", "Tool calls by final status",
                                    labels=labels)
        for key, row in sorted(calls.items()):
            cumulative, buckets = 0.0, []
            for bound, n in zip((*BUCKETS, float("inf")), row[2:], strict=False):
                cumulative += n
                buckets.append((_bound(bound), cumulative))
            hist.add_metric(list(key), buckets, row[1])
            total.add_metric(list(key), row[0])
        yield hist
        yield total
        yield _counter("tool_idempotency_cache_hits_total", "Calls answered from a stored "
                       "outcome", ["tenant", "tool"], {k: v for k, v in hits.items()})
        yield _counter("tool_side_effect_total", "Recorded side effects", ["policy"],
                       {(k,): v for k, v in effects.items()})
        yield _counter("tool_gate_decisions_total", "Gate decisions", ["gate"],
                       {(k,): v for k, v in gates.items()})
        yield _counter("tool_denials_total", "Stopped calls by reason", ["reason"],
                       {(k,): v for k, v in denials.items()})
        pending = GaugeMetricFamily("approvals_pending", "Approvals waiting for a human")
        pending.add_metric([], float(self._pending()) if self._pending else 0.0)
        yield pending

    def render(self) -> bytes:
        return generate_latest(self.registry)


def _bound(bound: float) -> str:
    return "+Inf" if bound == float("inf") else repr(float(bound))


def _counter(name: str, doc: str, labels: list[str],
             values: dict[tuple[str, ...], int]) -> CounterMetricFamily:
    fam = CounterMetricFamily(name, doc, labels=labels)
    for key, n in sorted(values.items()):
        fam.add_metric(list(key), n)
    return fam

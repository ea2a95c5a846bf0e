"""Prometheus metrics of SPEC §9, in a registry owned by the gateway (no globals)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30)


class Metrics:
    """Counters and histograms with cached label children (hot-path cheap)."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        r = self.registry
        self._duration = Histogram("tool_execution_duration_seconds", "Tool call duration",
                                   ["tenant", "tool", "status"], buckets=BUCKETS, registry=r)
        self._total = Counter("tool_execution_total", "Tool calls by final status",
                              ["tenant", "tool", "status"], registry=r)
        self._hits = Counter("tool_idempotency_cache_hits_total", "Calls answered from a stored "
                             "outcome", ["tenant", "tool"], registry=r)
        self._effects = Counter("tool_side_effect_total", "Recorded side effects", ["policy"],
                                registry=r)
        self._gates = Counter("tool_gate_decisions_total", "Gate decisions", ["gate"],
                              registry=r)
        self._denials = Counter("tool_denials_total", "Stopped calls by reason", ["reason"],
                                registry=r)
        self._pending = Gauge("approvals_pending", "Approvals waiting for a human", registry=r)
        self._children: dict[tuple[Any, ...], Any] = {}

    def _child(self, metric: Any, *labels: str) -> Any:
        key = (id(metric), *labels)
        child = self._children.get(key)
        if child is None:
            child = self._children[key] = metric.labels(*labels)
        return child

    def call(self, tenant: str, tool: str, status: str, seconds: float) -> None:
        self._child(self._total, tenant, tool, status).inc()
        self._child(self._duration, tenant, tool, status).observe(seconds)

    def gate(self, gate: str) -> None:
        self._child(self._gates, gate).inc()

    def denial(self, reason: str) -> None:
        self._child(self._denials, reason).inc()

    def cache_hit(self, tenant: str, tool: str) -> None:
        self._child(self._hits, tenant, tool).inc()

    def side_effect(self, policy: str) -> None:
        self._child(self._effects, policy).inc()

    def pending_from(self, fn: Callable[[], float]) -> None:
        self._pending.set_function(fn)

    def render(self) -> bytes:
        return generate_latest(self.registry)

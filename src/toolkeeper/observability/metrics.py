"""Prometheus metrics of SPEC §9, in a registry owned by the gateway (no globals).

The hot path queues each finished call without a lock and bumps plain counters under one
(the queue folded in at a scrape or every ``FOLD_AT`` calls); a custom collector turns them into
Prometheus families when scraped. prometheus-client's labelled children cost several
microseconds per call, a fifth of the whole pipeline's budget.

Every sample carries a ``tenant`` label (``""`` for calls no tenant was known for), so
:meth:`Metrics.render` can show one tenant only its own samples: the rows are filtered by
their key before any family is built, so a tenant's scrape costs no more than its share.
"""

from __future__ import annotations

import threading
from bisect import bisect_left
from collections.abc import Callable, Iterator, Mapping
from typing import TypeVar

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector

_K = TypeVar("_K", bound=tuple[str, ...])
_V = TypeVar("_V")
FOLD_AT = 1024
"""Finished calls queued before the caller that queues the last folds them into the
counters: the queue's memory is bounded, and a scrape folds whatever is queued first."""
BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30)


class Metrics(Collector):
    """The gateway's counters; register-once, scrape with :meth:`render`."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        self._lock = threading.Lock()
        self._calls: dict[tuple[str, str, str], list[float]] = {}
        self._queued: list[tuple[str, str, str, float, str | None]] = []
        self._hits: dict[tuple[str, str], int] = {}
        self._budget_warnings: dict[tuple[str, str], int] = {}
        self._effects: dict[tuple[str, str], int] = {}
        self._gates: dict[tuple[str, str], int] = {}
        self._denials: dict[tuple[str, str], int] = {}
        self._recent_dropped: dict[tuple[str], int] = {}
        self._redis_fallbacks: dict[tuple[str], int] = {}
        self._sdk_fallbacks: dict[tuple[str, str], int] = {}
        self._retention: dict[tuple[str], int] = {}
        self._sweeps = 0
        self._sweep_max_s = 0.0
        self._pending: Callable[[str | None], Mapping[str, int]] | None = None
        self._audit_queue: Callable[[], int] | None = None
        self._commits: Callable[[], tuple[int, int, Mapping[str, int], int]] | None = None
        self.registry.register(self)

    def call(self, tenant: str, tool: str, status: str, seconds: float,
             gate: str | None = None) -> None:
        """One finished call: counts, duration sum and histogram bucket, and the gate it
        passed. Queued without a lock (``list.append`` is one step under the GIL; a lock
        was a fifth of this on the hot path) and folded into the counters at a scrape or
        every :data:`FOLD_AT` calls."""
        queued = self._queued
        queued.append((tenant, tool, status, seconds, gate))
        if len(queued) >= FOLD_AT:
            self._fold()

    def _fold(self) -> None:
        """Move the queued calls into the counters (under the lock: a scrape, or the caller
        that queued the :data:`FOLD_AT`-th; others keep appending meanwhile)."""
        with self._lock:
            queued = self._queued
            items = queued[:len(queued)]
            del queued[:len(items)]  # the first ones only: what was appended since stays
            calls, gates, width = self._calls, self._gates, len(BUCKETS) + 3
            for tenant, tool, status, seconds, gate in items:
                key = (tenant, tool, status)
                row = calls.get(key)
                if row is None:
                    row = calls[key] = [0.0] * width  # count, sum, buckets, +Inf
                row[0] += 1
                row[1] += seconds
                row[2 + bisect_left(BUCKETS, seconds)] += 1
                if gate is not None:
                    gates[tenant, gate] = gates.get((tenant, gate), 0) + 1

    def _bump(self, table: dict[tuple[str, str], int], key: tuple[str, str]) -> None:
        with self._lock:
            table[key] = table.get(key, 0) + 1

    def gate(self, tenant: str, gate: str) -> None:
        self._bump(self._gates, (tenant, gate))

    def denial(self, tenant: str, reason: str) -> None:
        self._bump(self._denials, (tenant, reason))

    def side_effect(self, tenant: str, policy: str) -> None:
        self._bump(self._effects, (tenant, policy))

    def cache_hit(self, tenant: str, tool: str) -> None:
        self._bump(self._hits, (tenant, tool))

    def budget_warning(self, tenant: str, budget: str) -> None:
        """A budget reached its warning threshold (once a period)."""
        self._bump(self._budget_warnings, (tenant, budget))

    def recent_dropped(self, tenant: str) -> None:
        """One call the recent-calls log could not keep (its queue full, a failed write)."""
        with self._lock:
            self._recent_dropped[(tenant,)] = self._recent_dropped.get((tenant,), 0) + 1

    def redis_fallback(self, use: str = "rate_limit") -> None:
        """One piece of work done without Redis (unreachable): ``rate_limit``, a hit counted
        in the database or in process; ``change_announce``, a definition change left to the
        database's change counter; ``change_listen``, this process's subscription lost (other
        processes' changes reach it through the database's change counter until it is back)."""
        with self._lock:
            self._redis_fallbacks[(use,)] = self._redis_fallbacks.get((use,), 0) + 1

    def upstream_fallback(self, server: str, reason: str) -> None:
        """One upstream MCP server served by the SDK's client: the lean client could not
        handshake with it (``reason``: ``HandshakeRefused.code``)."""
        self._bump(self._sdk_fallbacks, (server, reason))

    def retention_deleted(self, table: str, n: int) -> None:
        """``n`` rows of ``table`` (``outcomes``, ``audit_events``) deleted by retention."""
        with self._lock:
            self._retention[(table,)] = self._retention.get((table,), 0) + n

    def retention_sweep(self, seconds: float) -> None:
        """One retention sweep finished, taking ``seconds``."""
        with self._lock:
            self._sweeps += 1
            self._sweep_max_s = max(self._sweep_max_s, seconds)

    def queues_from(self, audit: Callable[[], int],
                    commits: Callable[[], tuple[int, int, Mapping[str, int], int]]) -> None:
        """``audit()``: finished calls and events this process has queued for its audit
        writer; ``commits()``: the group commit's ``(transactions, writes)`` so far, its
        PostgreSQL one-statement batches refused or not tried by reason, and the batches
        that then took the usual transaction (``OutcomeRepo.commit_stats``)."""
        self._audit_queue = audit
        self._commits = commits

    def pending_from(self, fn: Callable[[str | None], Mapping[str, int]]) -> None:
        """``fn(tenant)``: pending approvals by tenant (every tenant's for ``None``)."""
        self._pending = fn

    def collect(self) -> Iterator[Metric]:
        return self.families(None)

    def families(self, tenant: str | None) -> Iterator[Metric]:
        """The families, with only ``tenant``'s samples unless ``tenant`` is ``None``."""
        self._fold()
        with self._lock:
            calls = {k: list(v) for k, v in _of(tenant, self._calls).items()}
            hits, effects = _of(tenant, self._hits), _of(tenant, self._effects)
            gates, denials = _of(tenant, self._gates), _of(tenant, self._denials)
            dropped = _of(tenant, self._recent_dropped)
            warned = _of(tenant, self._budget_warnings)
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
                       "outcome", ["tenant", "tool"], hits)
        yield _counter("tool_side_effect_total", "Recorded side effects", ["tenant", "policy"],
                       effects)
        yield _counter("tool_gate_decisions_total", "Gate decisions", ["tenant", "gate"], gates)
        yield _counter("tool_denials_total", "Stopped calls by reason", ["tenant", "reason"],
                       denials)
        yield _counter("tool_recent_calls_dropped_total", "Calls the recent-calls log could "
                       "not keep", ["tenant"], dropped)
        yield _counter("tool_budget_warnings_total", "Budgets that reached their warning "
                       "threshold", ["tenant", "budget"], warned)
        if tenant is None:  # the process's, not a tenant's
            yield _counter("toolkeeper_redis_fallbacks_total", "Work done without Redis "
                           "(unreachable), by use", ["use"], dict(self._redis_fallbacks))
            yield _counter("toolkeeper_upstream_sdk_fallbacks_total", "Upstream MCP servers "
                           "served by the SDK's client (the lean client's handshake failed)",
                           ["server", "reason"], dict(self._sdk_fallbacks))
            yield _counter("toolkeeper_retention_deleted_total", "Rows deleted by the "
                           "retention sweeps, by table", ["table"], dict(self._retention))
            yield _counter("toolkeeper_retention_sweeps_total", "Retention sweeps run",
                           [], {(): self._sweeps})
            longest = GaugeMetricFamily("toolkeeper_retention_sweep_max_seconds",
                                        "The longest retention sweep so far")
            longest.add_metric([], self._sweep_max_s)
            yield longest
            queued = GaugeMetricFamily("toolkeeper_audit_queue", "Finished calls and events "
                                       "queued for this process's audit writer (its lag)")
            queued.add_metric([], float(self._audit_queue() if self._audit_queue else 0))
            yield queued
            stats = self._commits() if self._commits else (0, 0, {}, 0)
            txns, writes, refused, usual = stats
            yield _counter("toolkeeper_store_group_commits_total", "Transactions the store's "
                           "group commit began for outcome claims and finishes", [], {(): txns})
            yield _counter("toolkeeper_store_group_commit_writes_total", "Outcome claims and "
                           "finishes those transactions committed (÷ commits: the mean batch)",
                           [], {(): writes})
            yield _counter("toolkeeper_store_batch_refusals_total", "PostgreSQL group-commit "
                           "batches not done as one statement: refused (head_moved, "
                           "claim_lost) or not tried (head_unknown, a SQLSTATE)", ["reason"],
                           {(k,): v for k, v in refused.items()})
            yield _counter("toolkeeper_store_batch_usual_total", "PostgreSQL group-commit "
                           "batches that then ran as the usual locking transaction", [],
                           {(): usual})
        pending = GaugeMetricFamily("approvals_pending", "Approvals waiting for a human",
                                    labels=["tenant"])
        counts = dict(self._pending(tenant)) if self._pending else {}
        if tenant is not None:
            counts = {tenant: counts.get(tenant, 0)}  # a tenant always sees its own zero
        for name, n in sorted(counts.items()):
            pending.add_metric([name], float(n))
        yield pending

    def render(self, tenant: str | None = None) -> bytes:
        """The text exposition: everything, or only the samples of ``tenant``."""
        if tenant is None:
            return generate_latest(self.registry)
        view = CollectorRegistry(auto_describe=False)
        view.register(_TenantView(self, tenant))
        return generate_latest(view)


class _TenantView(Collector):
    """One tenant's samples of a :class:`Metrics` (built per scrape, then dropped)."""

    def __init__(self, metrics: Metrics, tenant: str) -> None:
        self._metrics, self._tenant = metrics, tenant

    def collect(self) -> Iterator[Metric]:
        return self._metrics.families(self._tenant)


def _of(tenant: str | None, table: dict[_K, _V]) -> dict[_K, _V]:
    """The rows of ``table`` (keyed by tenant first) of ``tenant``; all for ``None``."""
    if tenant is None:
        return dict(table)
    return {k: v for k, v in table.items() if k[0] == tenant}


def _bound(bound: float) -> str:
    return "+Inf" if bound == float("inf") else repr(float(bound))


def _counter(name: str, doc: str, labels: list[str],
             values: Mapping[_K, int]) -> CounterMetricFamily:
    fam = CounterMetricFamily(name, doc, labels=labels)
    for key, n in sorted(values.items()):
        fam.add_metric(list(key), n)
    return fam

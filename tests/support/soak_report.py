"""The soak's figures (``tests.support.soak_load.Run``): a row per time window (operations,
p50/p99/max latency, 5xx, RSS, file descriptors, table sizes, outcome-TTL takeovers) and a
summary the test asserts its bounds on."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from statistics import median

from tests.support.soak import AUDIT_RETENTION_S, RECENT_CALLS_MAX, RETENTION_EVERY_S
from tests.support.soak_load import Run, Sample, percentile, takeovers

WARM_UP_FRACTION = 0.1
"""The first tenth of the soak (at least one window) is warm-up: RSS, descriptors and the
early p99 are measured from its end. ``p99_early_ms``/``p99_late_ms``: the median of the
window p99s of the first and the last third of the windows after it."""

@dataclass(frozen=True, slots=True)
class Window:
    start_s: float
    ops: int
    p50_ms: float
    p99_ms: float
    max_ms: float
    http_5xx: int
    problems: int
    takeovers: int
    rss_mib: float
    fds: int
    threads: int
    rows: dict[str, int]
    load: float
    cpu_ms_per_op: float
    """Server CPU per operation finished in the window."""
    cpu_share: float
    """Server CPU seconds per second (below what it needs: the machine starved it)."""
    client_share: float
    """The client's CPU seconds per second (near 1: the client is the bottleneck)."""

    def line(self) -> str:
        r = self.rows
        return (f"  {self.start_s:7.0f} {self.ops:6d} {self.p50_ms:7.1f} {self.p99_ms:7.1f} "
                f"{self.max_ms:7.1f} {self.http_5xx:4d} {self.problems:4d} {self.takeovers:5d} "
                f"{self.rss_mib:7.1f} {self.fds:4d} {self.threads:4d} {r.get('outcomes', 0):8d} "
                f"{r.get('audit_events', 0):8d} {r.get('pruned', 0):8d} {r.get('approvals', 0):5d} "
                f"{r.get('recent_calls', 0):6d} {self.load:5.1f} "
                f"{self.cpu_ms_per_op:6.2f} {self.cpu_share:5.2f} {self.client_share:5.2f}")


HEADER = ("  start_s    ops  p50_ms  p99_ms  max_ms  5xx prob ttl_x rss_mib  fds thrd outcomes "
          "   audit   pruned appr. recent  load cpu/op   cpu  ccpu")


@dataclass
class Summary:
    capacity_per_s: float
    rate_per_s: float
    ops: dict[str, int]
    http_5xx: int
    rss_warm_mib: float
    rss_end_mib: float
    fds_before: int
    fds_max: int
    fds_after: int
    threads_before: int
    threads_max: int
    threads_after: int
    p99_early_ms: float
    p99_late_ms: float
    worst_window_p99_ms: float
    cpu_ms_per_op_early: float
    cpu_ms_per_op_late: float
    takeovers: int
    windows_with_takeovers: int
    recent_calls_max_rows: int
    approved: int
    pruned_events: int
    """Audit events retention deleted by the end (the chains' bases)."""
    windows_pruning: int
    """Windows (of those starting once events were old enough) in which that number grew."""
    windows_prunable: int
    windows: list[Window] = field(default_factory=list)

    @property
    def rss_growth_mib(self) -> float:
        return self.rss_end_mib - self.rss_warm_mib

    def table(self) -> str:
        rows = [HEADER, *(w.line() for w in self.windows), "", "summary:"]
        for k, v in vars(self).items():
            if k != "windows":
                rows.append(f"  {k:<24} {round(v, 1) if isinstance(v, float) else v}")
        rows.append(f"  {'rss_growth_mib':<24} {self.rss_growth_mib:.1f}")
        rows.append(f"  {'recent_calls_max (kept)':<24} {RECENT_CALLS_MAX}")
        return "\n".join(rows)


def _window(run: Run, start: float, end: float, moved: set[int]) -> Window:
    done = [d for d in run.done if start <= d.due < end]
    ms = [d.latency_s * 1000 for d in done]
    samples = [s for s in run.samples if start <= s.at < end] or run.samples[-1:]
    return Window(
        start_s=start - run.soak_from, ops=len(done), p50_ms=percentile(ms, 0.5),
        p99_ms=percentile(ms, 0.99), max_ms=max(ms, default=0.0),
        http_5xx=sum(d.http >= 500 for d in done), problems=sum(bool(d.problem) for d in done),
        takeovers=sum(id(d) in moved for d in done),
        rss_mib=max(s.rss_mib for s in samples), fds=max(s.fds for s in samples),
        threads=max(s.threads for s in samples),
        rows=samples[-1].rows, load=max(s.load for s in samples), **_cpu(run, start, end))


def _cpu(run: Run, start: float, end: float) -> dict[str, float]:
    """CPU per operation and CPU share between the last samples before and in the window."""
    before = [s for s in run.samples if s.at < start] or run.samples[:1]
    inside = [s for s in run.samples if start <= s.at < end] or run.samples[-1:]
    a, b = before[-1], inside[-1]
    finished = sum(a.at <= d.due + d.latency_s < b.at for d in run.done)
    used, span = b.cpu_s - a.cpu_s, b.at - a.at
    return {"cpu_ms_per_op": 1000 * used / finished if finished else 0.0,
            "cpu_share": used / span if span > 0 else 0.0,
            "client_share": (b.client_cpu_s - a.client_cpu_s) / span if span > 0 else 0.0}


def _typical_p99_ms(windows: list[Window]) -> float:
    """The median of these windows' p99: one window a neighbour slowed does not decide."""
    return median(w.p99_ms for w in windows) if windows else 0.0


def _rss(samples: list[Sample]) -> float:
    return median(s.rss_mib for s in samples) if samples else 0.0


def summarise(run: Run, window_s: float) -> Summary:
    """The windows of the open-loop phase and the summary over them."""
    span = run.soak_until - run.soak_from
    edges = [run.soak_from + i * window_s for i in range(int(span // window_s) + 1)]
    moved = {id(d) for d in takeovers(run.done)}
    windows = [_window(run, a, a + window_s, moved) for a in edges if a < run.soak_until]
    warm = run.soak_from + max(window_s, span * WARM_UP_FRACTION)
    warmed = [w for w in windows if run.soak_from + w.start_s >= warm - 1e-6]
    third = max(1, len(warmed) // 3)
    soak_samples = [s for s in run.samples if s.at >= run.soak_from]
    warm_samples = [s for s in soak_samples if warm <= s.at < warm + window_s]
    return Summary(
        capacity_per_s=run.capacity_per_s, rate_per_s=run.rate_per_s,
        ops=dict(Counter(d.kind for d in run.done if d.due >= run.soak_from)),
        http_5xx=sum(d.http >= 500 for d in run.done),
        rss_warm_mib=_rss(warm_samples),
        rss_end_mib=_rss(soak_samples[-3:]),
        fds_before=run.fds_before, fds_max=max((s.fds for s in soak_samples), default=0),
        fds_after=run.fds_after, threads_before=run.threads_before,
        threads_max=max((s.threads for s in soak_samples), default=0),
        threads_after=run.threads_after,
        p99_early_ms=_typical_p99_ms(warmed[:third]),
        p99_late_ms=_typical_p99_ms(warmed[-third:]),
        worst_window_p99_ms=max((w.p99_ms for w in windows), default=0.0),
        cpu_ms_per_op_early=median(w.cpu_ms_per_op for w in warmed[:third]),
        cpu_ms_per_op_late=median(w.cpu_ms_per_op for w in warmed[-third:]),
        takeovers=len(moved), windows_with_takeovers=sum(w.takeovers > 0 for w in windows),
        recent_calls_max_rows=max((s.rows["recent_calls"] for s in soak_samples), default=0),
        approved=run.approved, windows=windows, **_pruning(run, windows))


def _pruning(run: Run, windows: list[Window]) -> dict[str, int]:
    """Whether audit retention kept running: the windows that start once the first events
    are older than the retention plus two sweeps should each delete some."""
    first = run.samples[0].at if run.samples else run.soak_from
    due = first + AUDIT_RETENTION_S + 2 * RETENTION_EVERY_S
    prunable, pruning, before = 0, 0, None
    for w in windows:
        pruned = w.rows.get("pruned", 0)
        if run.soak_from + w.start_s >= due and before is not None:
            prunable += 1
            pruning += pruned > before
        before = pruned
    last = run.samples[-1].rows.get("pruned", 0) if run.samples else 0
    return {"pruned_events": last, "windows_pruning": pruning, "windows_prunable": prunable}

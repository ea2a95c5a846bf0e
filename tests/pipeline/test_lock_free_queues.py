"""The call path's three lock-free queues lose nothing under threads: the metrics' finished
calls (folded into the counters at a scrape or every ``FOLD_AT`` calls), the recent-calls
log's entries and the audit writer's queued calls. Each is appended to without a lock while
another thread takes its first entries. The queues here pause inside each take (after
copying, before deleting), so producers append in that gap every time: a take that dropped
what was appended meanwhile (a ``clear()`` instead of deleting the entries it copied) loses
entries here."""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from tests.pipeline.test_audit_sink_backlog import _Call
from toolkeeper.model.call import CallResult
from toolkeeper.model.enums import CallStatus
from toolkeeper.observability import metrics as metrics_mod
from toolkeeper.observability.metrics import Metrics
from toolkeeper.pipeline.audit_sink import AuditSink
from toolkeeper.pipeline.recent_calls import RecentCallsLog

THREADS = 6
PER_THREAD = 4_000
JOIN_S = 60.0
"""Bound on a producer thread (never reached when the code is right)."""


@pytest.fixture(autouse=True)
def _interleave() -> Iterator[None]:
    """Switch threads every microsecond: the producers and the taker interleave often."""
    before = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        yield
    finally:
        sys.setswitchinterval(before)


class SlowTake(list[Any]):
    """A queue whose take of its first entries pauses after copying them."""

    def __getitem__(self, index: Any) -> Any:
        got = super().__getitem__(index)
        if isinstance(index, slice):
            time.sleep(0.0005)  # the producers run here
        return got


def _race(produce: Callable[[int], object], take: Callable[[], object]) -> None:
    """``THREADS`` producers of ``PER_THREAD`` items each, while ``take`` runs in a loop."""
    stop = threading.Event()

    def taker() -> None:
        while not stop.is_set():
            take()

    def producer(t: int) -> None:
        for i in range(PER_THREAD):
            produce(t * PER_THREAD + i)

    taking = threading.Thread(target=taker)
    taking.start()
    producers = [threading.Thread(target=producer, args=(t,)) for t in range(THREADS)]
    for p in producers:
        p.start()
    for p in producers:
        p.join(JOIN_S)
        assert not p.is_alive(), "a producer did not finish"
    stop.set()
    taking.join(JOIN_S)
    take()


def _total(m: Metrics) -> float:
    for family in m.families(None):
        if family.name == "tool_execution":  # the counter's name without "_total"
            return sum(s.value for s in family.samples if s.name.endswith("_total"))
    raise AssertionError("no tool_execution_total family")


def test_no_finished_call_is_lost_from_the_metrics(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(metrics_mod, "FOLD_AT", 64)  # producers fold often too
    m = Metrics()
    m._queued = SlowTake()
    _race(lambda n: m.call("t", "tool", "succeeded", 0.001, "auto"), lambda: _total(m))
    assert _total(m) == THREADS * PER_THREAD
    gates = [s for f in m.families(None) if f.name == "tool_gate_decisions" for s in f.samples]
    assert sum(s.value for s in gates) == THREADS * PER_THREAD
    assert len(m._queued) == 0


class _Repo:
    def __init__(self) -> None:
        self.seen: list[Any] = []

    def append(self, rows: list[Any], *_: Any) -> None:
        self.seen.extend(rows)


def test_no_entry_is_lost_from_the_recent_calls_log() -> None:
    repo = _Repo()
    log = RecentCallsLog(repo, 10**9, Metrics(), max_delay_s=60,  # type: ignore[arg-type]
                         max_pending=10**9)
    log._pending = SlowTake()
    try:
        _race(lambda n: log.record(CallResult(call_id=str(n), status=CallStatus.SUCCEEDED,
                                              tool="t"), "t", "a", None), log.flush)
    finally:
        log.close()
    assert sorted(int(r.call_id) for r in repo.seen) == list(range(THREADS * PER_THREAD))


def test_a_record_racing_the_close_is_still_written() -> None:
    """A call finishing while the log closes: the close runs between the call's look at
    the log (open) and its append, so the close's last flush missed the entry; the call
    sees the log closed after appending and writes it itself."""
    repo = _Repo()
    log = RecentCallsLog(repo, 10, Metrics(), max_delay_s=60)  # type: ignore[arg-type]

    class ClosingList(list[Any]):
        def append(self, item: Any) -> None:
            log.close()
            super().append(item)

    log._pending = ClosingList()
    log.record(CallResult(call_id="late", status=CallStatus.SUCCEEDED, tool="t"), "t", "a",
               None)
    assert [r.call_id for r in repo.seen] == ["late"]


def test_no_call_is_lost_from_the_audit_writers_queue() -> None:
    repo = _Repo()
    sink = AuditSink(repo, max_delay_s=60, batch=500)  # type: ignore[arg-type]
    sink._pending = SlowTake()
    try:
        _race(lambda n: sink.submit_later(_Call(n)), sink.flush)
    finally:
        sink.close()
    assert sorted(repo.seen) == list(range(THREADS * PER_THREAD))

"""A backlog of calls queued for the audit writer: written in bounded batches, in order, and
each queued call small (a queued call once held a 4 KiB orjson buffer: 36,000 queued calls
took an in-process gateway from 86 to 590 MB)."""

from __future__ import annotations

import asyncio
import gc
import threading
import time
import tracemalloc
from typing import Any

import pytest

from toolkeeper import heap
from toolkeeper.bench.tools import AGENT, open_gateway
from toolkeeper.pipeline.audit_sink import TRIM_AFTER_BACKLOG, AuditSink

WAIT_S = 10.0
"""Bound on waiting for the writer thread (never reached when the code is right)."""


def _until(done: Any) -> None:
    deadline = time.monotonic() + WAIT_S
    while not done():
        assert time.monotonic() < deadline, "the audit writer did not get there"
        time.sleep(0.005)


class _Repo:
    def __init__(self) -> None:
        self.batches: list[list[Any]] = []

    def append(self, batch: list[Any]) -> None:
        self.batches.append(list(batch))


class _Call:
    def __init__(self, n: int) -> None:
        self.n = n

    def drafts(self) -> list[Any]:
        return [self.n]


def test_a_backlog_is_flushed_in_bounded_batches_in_order() -> None:
    repo = _Repo()
    sink = AuditSink(repo, max_delay_s=60, batch=3)  # type: ignore[arg-type]
    try:
        with sink._write_lock:  # the writer thread cannot drain meanwhile
            for n in range(10):
                sink.submit_later(_Call(n))  # type: ignore[arg-type]
        sink.flush()
        assert [len(b) for b in repo.batches] == [3, 3, 3, 1]
        assert [n for b in repo.batches for n in b] == list(range(10))
        assert sink.pending == 0
    finally:
        sink.close()


def test_a_full_queue_makes_the_caller_wait_for_the_writer_and_loses_nothing() -> None:
    repo = _Repo()
    sink = AuditSink(repo, max_delay_s=60, batch=100, max_pending=5)  # type: ignore[arg-type]
    try:
        with sink._write_lock:  # the writer cannot drain meanwhile
            for n in range(5):
                sink.submit_later(_Call(n))  # type: ignore[arg-type]
            late = threading.Thread(target=sink.submit_later, args=(_Call(5),))
            late.start()
            late.join(0.2)
            assert late.is_alive(), "a sixth call was queued past the bound"
        late.join(30)  # the writer drains the queue, then takes it
        assert not late.is_alive()
        sink.flush()
        assert [n for b in repo.batches for n in b] == list(range(6))
    finally:
        sink.close()


def test_memory_is_trimmed_once_after_a_long_backlog_is_written(
        monkeypatch: pytest.MonkeyPatch) -> None:
    trims: list[int] = []

    def trim() -> bool:
        trims.append(1)
        return True

    monkeypatch.setattr(heap, "trim", trim)
    repo = _Repo()
    sink = AuditSink(repo, max_delay_s=0.01, batch=500)  # type: ignore[arg-type]
    try:
        with sink._write_lock:  # a burst queues up
            for n in range(TRIM_AFTER_BACKLOG):
                sink.submit_later(_Call(n))  # type: ignore[arg-type]
        _until(lambda: sink.trims == 1)
        assert sink.pending == 0 and len(trims) == 1
        for n in range(10):  # a trickle afterwards: nothing to give back
            sink.submit_later(_Call(n))  # type: ignore[arg-type]
        _until(lambda: sink.pending == 0)
        time.sleep(0.05)
        assert len(trims) == 1
    finally:
        sink.close()


def test_trimming_the_heap_is_safe_to_call_anywhere() -> None:
    assert heap.trim() in (True, False)  # glibc: done; elsewhere: nothing to do


def _of_calls(snapshot: tracemalloc.Snapshot) -> tracemalloc.Snapshot:
    """What the calls allocated (``Gateway.call`` on the stack), not what other threads
    (the recent-calls writer, a retention sweep) allocated meanwhile."""
    return snapshot.filter_traces([tracemalloc.Filter(True, "*/toolkeeper/gateway.py",
                                                      all_frames=True)])


def test_a_queued_call_holds_little_memory(tmp_path: Any) -> None:
    with open_gateway(f"sqlite:///{tmp_path}/tk.db") as gw:
        sink = gw.runtime.sink

        async def calls(n: int) -> None:
            for i in range(n):
                res = await gw.call("add", arguments={"a": 1, "b": i}, agent=AGENT)
                assert res.ok
        with sink._write_lock:  # keep every call queued
            asyncio.run(calls(200))
            gc.collect()
            tracemalloc.start(16)
            try:
                before = _of_calls(tracemalloc.take_snapshot())
                asyncio.run(calls(1000))
                gc.collect()
                after = _of_calls(tracemalloc.take_snapshot())
            finally:
                tracemalloc.stop()
            assert sink.pending >= 1200
        grown = sum(stat.size_diff for stat in after.compare_to(before, "filename"))
        per_call = grown / 1000
        assert 0 < per_call < 2500, f"{per_call:.0f} bytes per queued call"


def _gauge(gw: Any) -> float:
    for line in gw.metrics.render().decode().splitlines():
        if line.startswith("toolkeeper_audit_queue "):
            return float(line.split()[1])
    raise AssertionError("no toolkeeper_audit_queue on /metrics")


def test_the_audit_queue_is_on_the_metrics(tmp_path: Any) -> None:
    with open_gateway(f"sqlite:///{tmp_path}/tk.db") as gw:
        sink = gw.runtime.sink
        gw.flush()
        assert _gauge(gw) == 0

        async def calls(n: int) -> None:
            for i in range(n):
                assert (await gw.call("add", arguments={"a": 1, "b": i}, agent=AGENT)).ok
        with sink._write_lock:
            asyncio.run(calls(25))
            assert _gauge(gw) == sink.pending >= 25
        gw.flush()
        assert _gauge(gw) == 0

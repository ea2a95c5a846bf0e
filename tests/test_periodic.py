"""services/periodic.py: the background job the housekeeping starts when due — on its own
thread, never two at once, a failure logged and the next turn run anyway."""

from __future__ import annotations

import logging
import threading
import time

import pytest

from toolkeeper.services.periodic import Periodic

BOUND_S = 5.0


def test_a_job_starts_only_when_due_and_never_twice_at_once() -> None:
    release, started, runs = threading.Event(), threading.Semaphore(0), []

    def job() -> None:
        runs.append(threading.current_thread().name)
        started.release()
        release.wait(BOUND_S)

    job_every = Periodic("test-periodic", 0.05, job, what="test job")
    job_every.tick()  # not due yet: constructed just now
    assert runs == []
    time.sleep(0.06)
    job_every.tick()
    assert started.acquire(timeout=BOUND_S)
    assert runs == ["test-periodic"]  # on a thread of its own
    time.sleep(0.06)
    job_every.tick()  # due again, but the first run goes on: skipped
    assert not job_every.wait_idle(0.05)
    assert runs == ["test-periodic"]
    release.set()
    assert job_every.wait_idle(BOUND_S)
    time.sleep(0.06)
    job_every.tick()
    assert started.acquire(timeout=BOUND_S)
    assert len(runs) == 2
    assert job_every.wait_idle(BOUND_S)


def test_a_failing_job_is_logged_and_runs_again_next_turn(
        caplog: pytest.LogCaptureFixture) -> None:
    calls = threading.Semaphore(0)

    def job() -> None:
        calls.release()
        raise RuntimeError("database gone")

    job_every = Periodic("test-periodic", 0.02, job, what="test job")
    with caplog.at_level(logging.ERROR, logger="toolkeeper"):
        for _ in range(2):
            time.sleep(0.03)
            job_every.tick()
            assert calls.acquire(timeout=BOUND_S)
            assert job_every.wait_idle(BOUND_S)
    failures = [r for r in caplog.records if r.getMessage() == "test job failed"]
    assert len(failures) == 2 and failures[0].exc_info is not None


def test_holding_the_lock_runs_the_job_inline_and_holds_the_thread_back() -> None:
    runs: list[str] = []
    job_every = Periodic("test-periodic", 0.0, lambda: runs.append("thread"), what="test job")
    with job_every.lock:
        job_every.tick()  # due, but a run (inline, by the lock holder) goes on: skipped
        runs.append("inline")
    assert job_every.wait_idle(BOUND_S)
    assert runs == ["inline"]

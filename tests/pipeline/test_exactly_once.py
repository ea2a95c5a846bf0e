"""SPEC §2 step 9 and §10: at most one execution per idempotency key, whatever the
concurrency — threads in one process and separate processes, on SQLite and PostgreSQL."""

from __future__ import annotations

import concurrent.futures as cf
import multiprocessing as mp
import os
import signal
import time
from collections import Counter
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from tests.pipeline.gw_helpers import build_gateway
from tests.pipeline.sample_tools import LEDGER, charge, file_charge, hang_charge
from tests.pipeline.workers import call_and_hang, call_many, open_gateway
from tests.support.waiting import wait_until
from toolkeeper import CallStatus, OutcomeState, Principal, Reason, Role

ALLOWED = {("succeeded", None), ("in_progress", "idempotency_in_progress")}


def _check_outcomes(results: list[tuple[str, str | None, bool]]) -> None:
    kinds = Counter((status, reason) for status, reason, _ in results)
    assert set(kinds) <= ALLOWED, kinds
    fresh = [r for r in results if r[0] == "succeeded" and not r[2]]
    assert len(fresh) == 1, results  # exactly one caller saw its own execution


def test_100_threads_one_execution(db_url: str) -> None:
    gw = build_gateway(db_url, tools=[charge])
    try:
        with cf.ThreadPoolExecutor(100) as pool:
            futs = [pool.submit(gw.call_sync, "charge", arguments={"invoice": "i1", "amount": 9},
                                agent="bot", idempotency_key="pay-i1") for _ in range(100)]
            results = [f.result(timeout=120) for f in futs]
        assert LEDGER["runs"] == 1
        _check_outcomes([(r.status.value, None if r.reason is None else str(r.reason), r.deduped)
                         for r in results])
        again = gw.call_sync("charge", arguments={"invoice": "i1", "amount": 9}, agent="bot",
                             idempotency_key="pay-i1")
        assert again.deduped and again.output == {"charged": "i1", "amount": 9}
        assert LEDGER["runs"] == 1
        gw.flush()
        assert gw.store.audit.verify("default").ok
    finally:
        gw.close()


@pytest.mark.slow
def test_100_calls_from_separate_processes_one_execution(db_url: str, tmp_path: Path) -> None:
    setup = build_gateway(db_url, tools=[file_charge])
    setup.close()
    sink = tmp_path / "executions.txt"
    args = {"invoice": "inv-7", "path": str(sink)}
    ctx = mp.get_context("spawn")
    with ctx.Manager() as manager, cf.ProcessPoolExecutor(4, mp_context=ctx) as pool:
        start = manager.Barrier(5)  # the four children with their gateways open, and us
        futs = [pool.submit(call_many, db_url, "file_charge", args, "key-inv-7", 25, start)
                for _ in range(4)]
        start.wait(timeout=120)  # all released together
        results = [r for f in futs for r in f.result(timeout=300)]
    assert len(results) == 100
    assert sink.read_text().count("inv-7") == 1
    _check_outcomes(results)


@pytest.mark.slow
def test_sigkill_mid_call_leaves_unknown_and_no_reexecution(db_url: str, tmp_path: Path) -> None:
    setup = build_gateway(db_url, tools=[hang_charge])
    setup.close()
    marker = tmp_path / "started.txt"
    ctx = mp.get_context("spawn")
    child = ctx.Process(target=call_and_hang, args=(db_url, str(marker), "k-hang"))
    child.start()
    # the tool's line, not just the file: open("a") creates it before the line is written
    wait_until(lambda: marker.exists() and "inv-9" in marker.read_text(), timeout=60,
               what="the child started the tool")
    os.kill(child.pid, signal.SIGKILL)  # type: ignore[arg-type]
    child.join(timeout=30)

    # no background recovery (its first round is an hour away): this test recovers by hand
    gw = open_gateway(db_url, stale_grace=timedelta(0), recovery_every_s=3600)
    try:
        # the in_progress record turns stale once the tool's timeout (2 s) has passed since
        # it started; the services read the wall clock (none to inject), so poll recovery
        recovered = wait_until(gw.calls.recover, timeout=30,
                               what="the killed call's record is stale and recovered")
        assert [r.state for r in recovered] == [OutcomeState.UNKNOWN]
        call_id = recovered[0].call_id
        retry = gw.call_sync("hang_charge", arguments={"invoice": "inv-9", "marker": str(marker)},
                             agent="bot", idempotency_key="k-hang")
        assert (retry.status, retry.reason) == (CallStatus.UNKNOWN, Reason.OUTCOME_UNKNOWN)
        assert marker.read_text().count("inv-9") == 1  # not executed again

        operator = Principal(name="ops", tenant_id="default", roles=frozenset({Role.OPERATOR}))
        gw.calls.resolve(call_id, operator, status="succeeded", output={"charged": "inv-9"},
                         note="checked with the bank")
        after = gw.call_sync("hang_charge", arguments={"invoice": "inv-9", "marker": str(marker)},
                             agent="bot", idempotency_key="k-hang")
        assert after.deduped and after.status is CallStatus.SUCCEEDED
        assert after.output == {"charged": "inv-9"}
        assert marker.read_text().count("inv-9") == 1
        gw.flush()
        types = [e.type for e in gw.store.audit.list("default", call_id=call_id)]
        assert "call.attempted" in types and "call.unknown" in types
        assert "call.resolved_manually" in types
        assert gw.store.audit.verify("default").ok
    finally:
        gw.close()


def test_key_reuse_with_other_arguments_is_refused(db_url: str) -> None:
    gw = build_gateway(db_url, tools=[charge])
    try:
        first = gw.call_sync("charge", arguments={"invoice": "a", "amount": 1}, agent="bot",
                             idempotency_key="k1")
        assert first.ok
        other = gw.call_sync("charge", arguments={"invoice": "b", "amount": 1}, agent="bot",
                             idempotency_key="k1")
        assert other.reason == Reason.IDEMPOTENCY_KEY_REUSED
        assert LEDGER["runs"] == 1
    finally:
        gw.close()


def test_default_key_is_scoped_to_the_turn_group_and_agent(db_url: str) -> None:
    gw = build_gateway(db_url, tools=[charge])
    try:
        args = {"invoice": "x", "amount": 1}
        a = gw.call_sync("charge", arguments=args, agent="bot", turn_group_id="t1")
        b = gw.call_sync("charge", arguments=args, agent="bot", turn_group_id="t1")
        c = gw.call_sync("charge", arguments=args, agent="bot", turn_group_id="t2")
        d = gw.call_sync("charge", arguments=args, agent="other-bot", turn_group_id="t1")
        assert (a.deduped, b.deduped, c.deduped, d.deduped) == (False, True, False, False)
        assert LEDGER["runs"] == 3
        e = gw.call_sync("charge", arguments=args, agent="bot")  # no key, no turn: fresh
        f = gw.call_sync("charge", arguments=args, agent="bot")
        assert not e.deduped and not f.deduped and LEDGER["runs"] == 5
    finally:
        gw.close()


def test_pure_calls_record_no_outcome_unless_keyed(make_gateway: Any) -> None:
    from tests.pipeline.sample_tools import add

    gw = make_gateway(tools=[add])
    gw.call_sync("add", arguments={"a": 1, "b": 1}, agent="bot", turn_group_id="t")
    assert gw.store.outcomes.list("default") == []
    keyed = gw.call_sync("add", arguments={"a": 1, "b": 1}, agent="bot", idempotency_key="k")
    assert keyed.ok and len(gw.store.outcomes.list("default")) == 1
    again = gw.call_sync("add", arguments={"a": 1, "b": 1}, agent="bot", idempotency_key="k")
    assert again.deduped and again.output == 2


def test_the_wal_is_checkpointed_in_the_background(tmp_path: Path) -> None:
    import sqlite3

    url = f"sqlite:///{tmp_path}/wal.db"
    gw = build_gateway(url, tools=[charge])
    try:
        for i in range(300):
            gw.call_sync("charge", arguments={"invoice": f"i{i}", "amount": 1}, agent="bot",
                         idempotency_key=f"k{i}")
        gw.store.db.checkpoint()
        conn = sqlite3.connect(tmp_path / "wal.db")
        busy, log_frames, done = conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
        conn.close()
        assert busy == 0 and done == log_frames  # everything already folded back
    finally:
        gw.close()


def test_the_gateway_checkpoints_the_wal_several_times_a_second(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """On the audit writer thread, every ``SQLITE_CHECKPOINT_EVERY_S`` (not only with the
    once-a-second housekeeping): a WAL written without pause is restarted once it holds
    ``SQLITE_WAL_RESTART_BYTES`` (see ``Database.checkpoint``), not seconds later."""
    from toolkeeper.store.db import SQLITE_CHECKPOINT_EVERY_S, Database

    runs: list[float] = []
    checkpoint = Database.checkpoint

    def counted(self: Database) -> None:
        runs.append(time.monotonic())
        checkpoint(self)

    monkeypatch.setattr(Database, "checkpoint", counted)
    gw = build_gateway(f"sqlite:///{tmp_path}/wal.db", tools=[charge])
    try:
        assert SQLITE_CHECKPOINT_EVERY_S <= 0.1
        wait_until(lambda: len(runs) >= 5, timeout=3.0, what="five checkpoints")
        assert runs[-1] - runs[0] < 1.0  # five in well under a second
    finally:
        gw.close()


def test_a_result_carries_the_callers_own_idempotency_key(make_gateway: Any) -> None:
    """Stored as ``k:<key>``, answered as the caller wrote it (the result is built inline
    on the hot path: see ``CallState.result_as_is``), by the first call and by a
    deduplicated repeat alike (the idempotency step's replay)."""
    gw = make_gateway(tools=[charge])
    args = {"invoice": "inv-key", "amount": 1}
    first = gw.call_sync("charge", arguments=args, agent="bot", idempotency_key="order-7")
    assert first.ok and first.idempotency_key == "order-7"
    again = gw.call_sync("charge", arguments=args, agent="bot", idempotency_key="order-7")
    assert again.deduped and again.idempotency_key == "order-7"

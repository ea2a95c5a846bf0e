"""The store on SQLite and a real PostgreSQL: the same code, the same guarantees."""

from __future__ import annotations

import concurrent.futures as cf
import sqlite3
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from toolkeeper import ApprovalStatus, Risk, SideEffect, ToolDefinition
from toolkeeper.store import Store
from toolkeeper.store import db as dbmod
from toolkeeper.store.migrate import alembic_config, current, head, upgrade
from toolkeeper.store.records import ApprovalRecord, AuditDraft


@pytest.fixture
def store(db_url: str) -> Iterator[Store]:
    s = Store.open(db_url)
    yield s
    s.close()


@pytest.mark.empty_database
def test_migrations_reach_head_and_are_idempotent(db_url: str) -> None:
    Store.open(db_url).close()
    Store.open(db_url).close()
    assert current(db_url) == head()


def test_head_is_the_newest_migration() -> None:
    """``Store.open`` skips alembic on a database at ``head()``, read from the files' names."""
    from alembic.script import ScriptDirectory

    assert ScriptDirectory.from_config(alembic_config("sqlite://")).get_current_head() == head()


@pytest.mark.empty_database
def test_open_migrates_a_database_behind_head(db_url: str) -> None:
    upgrade(db_url, "0006")
    assert current(db_url) == "0006"
    Store.open(db_url).close()
    assert current(db_url) == head()


def test_tokens_are_hashed_revocable_and_random(store: Store) -> None:
    rec, token = store.tokens.create(tenant_id="t1", role="approver", label="alice")
    assert len(token) >= 40 and token.startswith("tk_")
    found = store.tokens.find(token)
    assert found is not None and found.id == rec.id and found.role == "approver"
    from sqlalchemy import text

    with store.db.engine.connect() as conn:
        stored = conn.execute(text("SELECT hash FROM tokens")).scalars().all()
    assert token not in stored and all(len(h) == 64 for h in stored)
    assert store.tokens.revoke(rec.id) and not store.tokens.revoke(rec.id)
    assert store.tokens.find(token) is None
    other = {store.tokens.create(tenant_id="t1", role="agent")[1] for _ in range(20)}
    assert len(other) == 20


def test_shared_rate_counter_counts_and_resets(store: Store) -> None:
    results = [store.rates.hit("k", limit=3, window_s=60) for _ in range(5)]
    assert results[:3] == [None, None, None]
    assert all(r is not None and 0 < r <= 60 for r in results[3:])
    assert store.rates.hit("fresh", limit=1, window_s=0.01) is None
    import time

    # time must pass: the counter reads the wall clock (none to inject); 2x the window
    time.sleep(0.02)
    assert store.rates.hit("fresh", limit=1, window_s=0.01) is None  # the window rolled over


def test_shared_rate_counter_is_exact_under_concurrency(store: Store) -> None:
    with cf.ThreadPoolExecutor(16) as pool:
        results = list(pool.map(lambda _: store.rates.hit("c", limit=25, window_s=60),
                                range(80)))
    assert sum(r is None for r in results) == 25


def _approval(ident: str, **kw: Any) -> ApprovalRecord:
    now = datetime.now(UTC)
    fields: dict[str, Any] = dict(
        id=ident, tenant_id="t1", agent="bot", kind="approve", tool="pay", action="run",
        tool_version="1.0.0", args_digest="sha256:a", arguments={"a": 1}, risk="high",
        gate="approve", policy_version="p", status=ApprovalStatus.PENDING, created_at=now,
        expires_at=now + timedelta(hours=1))
    fields.update(kw)
    return ApprovalRecord(**fields)


def test_approval_transitions_happen_once(store: Store) -> None:
    store.approvals.create(_approval("ap1"))
    assert store.approvals.consume("ap1", "c0") is False  # pending cannot be consumed
    assert store.approvals.decide("ap1", status=ApprovalStatus.APPROVED, by="alice", note=None)
    assert not store.approvals.decide("ap1", status=ApprovalStatus.DENIED, by="bob", note=None)
    with cf.ThreadPoolExecutor(8) as pool:
        won = list(pool.map(lambda i: store.approvals.consume("ap1", f"c{i}"), range(8)))
    assert won.count(True) == 1
    rec = store.approvals.get("ap1")
    assert rec is not None and rec.status is ApprovalStatus.CONSUMED and rec.consumed_by


def test_expired_approvals_cannot_be_decided(store: Store) -> None:
    past = datetime.now(UTC) - timedelta(hours=2)
    store.approvals.create(_approval("old", created_at=past, expires_at=past))
    assert not store.approvals.decide("old", status=ApprovalStatus.APPROVED, by="a", note=None)
    assert store.approvals.count_pending(datetime.now(UTC)) == 0


def test_supersede_is_per_tenant(store: Store) -> None:
    assert store.turns.supersede("t1", "turn") and not store.turns.supersede("t1", "turn")
    assert store.turns.is_superseded("t1", "turn")
    assert not store.turns.is_superseded("t2", "turn")


def test_tool_versions_are_immutable_snapshots(store: Store) -> None:
    tool = ToolDefinition(name="pay", risk_default=Risk.HIGH, side_effect=SideEffect.IDEMPOTENT)
    tool_id = store.registry.upsert_tool(tool)
    assert store.registry.add_version(tool_id, tool)
    assert not store.registry.add_version(tool_id, tool.model_copy(update={"description": "x"}))
    assert [v.description for v in store.registry.versions(tool_id)] == [""]
    global_tool = ToolDefinition(name="pay", tenant_id=None, description="global")
    tenant_tool = ToolDefinition(name="pay", tenant_id="t1", description="mine")
    store.registry.upsert_tool(tenant_tool)
    found = store.registry.tool("pay", "t1")
    assert found is not None and found[1].description == "mine"
    found = store.registry.tool("pay", "t2")
    assert found is not None and found[1].tenant_id is None
    assert global_tool.tenant_id is None


def test_audit_pagination_and_filters(store: Store) -> None:
    now = datetime.now(UTC)
    drafts = [AuditDraft(type="call.succeeded" if i % 2 else "call.failed", tenant_id="t1",
                         event_id=f"e{i}", ts=now, call_id=f"c{i % 3}", tool="pay",
                         duration_ms=1.5, data={"i": i}) for i in range(10)]
    store.audit.append(drafts)
    first = store.audit.list("t1", limit=4)
    rest = store.audit.list("t1", after_seq=first[-1].seq, limit=100)
    assert [e.seq for e in first + rest] == list(range(1, 11))
    assert {e.type for e in store.audit.list("t1", types=["call.failed"])} == {"call.failed"}
    assert len(store.audit.list("t1", call_id="c1")) == 3
    assert store.audit.list("t2") == []
    assert store.audit.verify("t1").ok and store.audit.verify("t2").events == 0


def test_concurrent_appends_never_fork_a_chain(store: Store) -> None:
    now = datetime.now(UTC)

    def append(i: int) -> None:
        store.audit.append([AuditDraft(type="call.succeeded", tenant_id="t1",
                                       event_id=f"x{i}-{j}", ts=now, data={}) for j in range(3)])

    with cf.ThreadPoolExecutor(8) as pool:
        list(pool.map(append, range(40)))
    report = store.audit.verify("t1")
    assert report.ok and report.events == 120


def test_a_sqlite_wal_grown_past_its_limit_is_truncated_when_it_restarts(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    limit = 256 * 1024
    monkeypatch.setattr(dbmod, "SQLITE_WAL_LIMIT_BYTES", limit)
    path = tmp_path / "wal.db"
    database = dbmod.Database(f"sqlite:///{path}")
    wal = tmp_path / "wal.db-wal"
    try:
        with database.write() as conn:
            conn.exec_driver_sql("CREATE TABLE t (v BLOB)")
        reader = sqlite3.connect(path, isolation_level=None)
        reader.execute("BEGIN")
        reader.execute("SELECT count(*) FROM t").fetchall()  # holds a snapshot: no restart
        for _ in range(64):
            with database.write() as conn:
                conn.exec_driver_sql("INSERT INTO t VALUES (randomblob(16384))")
            database.checkpoint()
        grown = wal.stat().st_size
        assert grown > 4 * limit
        reader.execute("COMMIT")
        reader.close()
        database.checkpoint()  # now complete: the next writer restarts the WAL
        with database.write() as conn:
            conn.exec_driver_sql("INSERT INTO t VALUES (randomblob(100))")
        assert wal.stat().st_size <= limit < grown
    finally:
        database.dispose()


def _wal_frames(path: Path) -> int:
    """The frames the WAL holds (``wal_checkpoint`` reports them; -1 while another
    checkpoint runs)."""
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        frames = -1
        while frames < 0:
            frames = conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()[1]
        return int(frames)
    finally:
        conn.close()


def test_a_sqlite_wal_written_without_pause_is_restarted_by_the_checkpoint(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Writers that never pause leave a passive checkpoint always behind, so SQLite never
    restarts the WAL by itself; past ``SQLITE_WAL_RESTART_BYTES`` the checkpoint does."""
    monkeypatch.setattr(dbmod, "SQLITE_WAL_RESTART_BYTES", 256 * 1024)
    path = tmp_path / "wal.db"
    database = dbmod.Database(f"sqlite:///{path}")
    with database.write() as conn:
        conn.exec_driver_sql("CREATE TABLE t (v BLOB)")
    stop = threading.Event()
    written = [0]

    def write() -> None:
        while not stop.is_set():
            with database.write() as conn:
                conn.exec_driver_sql("INSERT INTO t VALUES (randomblob(3000))")
            written[0] += 1

    writer = threading.Thread(target=write)
    writer.start()
    try:
        deadline = time.monotonic() + 30
        while written[0] < 3000 and time.monotonic() < deadline:
            database.checkpoint()
            time.sleep(0.005)
    finally:
        stop.set()
        writer.join()
    try:
        assert written[0] >= 3000
        # 3000 transactions of 2+ pages each: ~12 MB of frames had it never restarted
        frames = _wal_frames(path)
        assert frames * dbmod.SQLITE_PAGE_SIZE < 4 * 1024 * 1024, frames
    finally:
        database.dispose()


def test_a_wal_restart_held_off_by_a_reader_is_not_retried_at_once(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A restart waits for the readers while it holds the write lock: one kept from
    finishing by a long read is not tried again for ``SQLITE_WAL_RESTART_BACKOFF_S``
    (writers would be held up at every checkpoint), twice as long after the next, and
    the back-off starts over once one finishes."""
    monkeypatch.setattr(dbmod, "SQLITE_WAL_RESTART_BYTES", 64 * 1024)
    path = tmp_path / "wal.db"
    database = dbmod.Database(f"sqlite:///{path}")
    tries: list[float] = []
    restart = dbmod.Database._restart_wal

    def counted(self: dbmod.Database, driver: Any) -> None:
        tries.append(time.monotonic())
        restart(self, driver)

    monkeypatch.setattr(dbmod.Database, "_restart_wal", counted)
    try:
        with database.write() as conn:
            conn.exec_driver_sql("CREATE TABLE t (v BLOB)")
        reader = sqlite3.connect(path, isolation_level=None)
        reader.execute("BEGIN")
        reader.execute("SELECT count(*) FROM t").fetchall()  # an old snapshot, kept
        for _ in range(5):
            with database.write() as conn:
                conn.exec_driver_sql("INSERT INTO t VALUES (randomblob(30000))")
            database.checkpoint()
        assert len(tries) == 1  # held off once, then left alone
        database._wal_restart_after = 0.0  # the back-off is over: held off again
        database.checkpoint()
        assert len(tries) == 2
        assert database._wal_restart_after - time.monotonic() > 1.5  # twice as long now
        database._wal_restart_after = 0.0
        reader.execute("COMMIT")
        reader.close()
        database.checkpoint()
        assert len(tries) == 3 and database._wal_restart_backoff == 1.0  # reset
        with database.write() as conn:  # the next writer starts the WAL over
            conn.exec_driver_sql("INSERT INTO t VALUES (randomblob(100))")
        assert _wal_frames(path) <= 2
    finally:
        database.dispose()


def test_checkpoint_is_a_no_op_on_postgresql(pg_url: str) -> None:
    database = dbmod.Database(pg_url)
    try:
        database.checkpoint()
        assert database._wal_restart_after == 0.0
    finally:
        database.dispose()

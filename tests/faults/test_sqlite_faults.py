"""A SQLite database that turns read-only or fills up under a running gateway: recorded
calls stop with ``store_unavailable`` (a stopped CallResult, never an exception or a
hang), nothing is left half-written (no ``succeeded`` outcome without its audit events,
no execution without an outcome), and once the fault is lifted the file is intact, the
audit chain verifies and calls succeed again without reopening the gateway.

The faults are injected with SQLite's own per-connection limits (``PRAGMA query_only``,
``PRAGMA max_page_count``) on every connection the store writes through, and at the file
level with the immutable attribute (``chattr +i``) on the database and its WAL: root ignores
file permissions, so a ``chmod 0444`` would not make the file read-only in CI, but not the
immutable attribute. (The ``-shm`` index stays writable: SQLite maps it into memory, and a
write to a mapping of an immutable file kills any SQLite process with SIGBUS.)"""

from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import event

from tests.api.exec_fixtures import api_for
from tests.support.rest import assert_error
from toolkeeper import Gateway, Risk, SideEffect, tool

CONFIG = ("version: 1\ntools:\n  - native: tests.faults.test_sqlite_faults:append_line\n"
          "profiles:\n  - {name: p, autonomy: 3, activations: [{tool: append_line}]}\n"
          "agents:\n  - {name: bot, profile: p}\n")


@tool(side_effect=SideEffect.IRREVERSIBLE, risk=Risk.LOW)
def append_line(path: str, text: str) -> int:
    """Append one line to a file (irreversible): one line per execution."""
    with open(path, "a", encoding="utf-8") as out:
        out.write(text + "\n")
    return len(text)


@contextmanager
def _fault(gw: Gateway, pragma: Callable[[Any], None]) -> Iterator[None]:
    """Apply ``pragma`` to every connection the store writes through (the dedicated
    writer and each pooled one, present or future); lifted on exit."""
    db = gw.store.db
    engine = db.engine

    def on_connect(dbapi_conn: Any, _rec: Any) -> None:
        pragma(dbapi_conn)

    event.listen(engine, "connect", on_connect)
    engine.dispose()  # pooled connections reopen through the listener
    pragma(db.sqlite_writer())
    try:
        yield
    finally:
        event.remove(engine, "connect", on_connect)
        engine.dispose()
        writer = db.sqlite_writer()
        writer.execute("PRAGMA query_only=0")
        writer.execute("PRAGMA max_page_count=1073741823")


@contextmanager
def _immutable(gw: Gateway) -> Iterator[None]:
    """The database file and its WAL made immutable (``chattr +i``; lifted on exit)."""
    db = Path(gw.store.db.url.removeprefix("sqlite:///"))
    files = [str(f) for f in (db, db.with_name(db.name + "-wal")) if f.exists()]
    _chattr("+i", files)
    try:
        yield
    finally:
        _chattr("-i", files)


def _chattr(flag: str, files: list[str]) -> None:
    if shutil.which("chattr") is None:
        _unavailable("chattr is not installed (e2fsprogs)")
    done = subprocess.run(["chattr", flag, *files], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        _unavailable(f"chattr {flag} failed: {done.stderr.strip()} (needs root and a file "
                     "system with the immutable attribute, e.g. ext4)")


def _unavailable(why: str) -> None:
    if os.environ.get("CI") in ("true", "1"):
        pytest.fail(f"the immutable-file fault cannot be injected in CI: {why}")
    pytest.skip(f"LOUD SKIP: the immutable-file fault cannot be injected here: {why}")


def _read_only(conn: Any) -> None:
    conn.execute("PRAGMA query_only=1")


def _full(conn: Any) -> None:
    pages = conn.execute("PRAGMA page_count").fetchone()[0]
    conn.execute(f"PRAGMA max_page_count={pages + 2}")


FAULTS: dict[str, Callable[[Gateway], Any]] = {
    "read_only": lambda gw: _fault(gw, _read_only),
    "disk_full": lambda gw: _fault(gw, _full),
    "immutable_file": _immutable,
}


@pytest.fixture
def opened(tmp_path: Path) -> Iterator[tuple[Gateway, Path, Path]]:
    (tmp_path / "toolkeeper.yaml").write_text(CONFIG, encoding="utf-8")
    db_path = tmp_path / "tk.db"
    with Gateway.open(f"sqlite:///{db_path}", config=tmp_path / "toolkeeper.yaml") as gw:
        yield gw, db_path, tmp_path / "lines.txt"


def _call(gw: Gateway, lines: Path, key: str, text: str = "x" * 400) -> Any:
    return gw.call_sync("append_line", arguments={"path": str(lines), "text": text},
                        agent="bot", idempotency_key=key)


def _lines(lines: Path) -> int:
    return len(lines.read_text(encoding="utf-8").splitlines()) if lines.exists() else 0


def _assert_consistent(gw: Gateway, db_path: Path, lines: Path) -> None:
    """Every execution has an outcome; every succeeded one has its audit events; the
    file and the chain are intact."""
    outcomes = gw.calls.list("default")
    succeeded = [o for o in outcomes if o.status == "succeeded"]
    # an outcome whose end could not be written stays in_progress until recovery turns
    # it unknown (it is never lost, never claimed again)
    open_ = [o for o in outcomes if o.status in ("unknown", "in_progress")]
    assert len(succeeded) <= _lines(lines) <= len(succeeded) + len(open_), (
        _lines(lines), [(o.call_id, o.status) for o in outcomes])
    gw.flush()
    for o in succeeded:
        types = {e.type for e in gw.store.audit.list("default", call_id=o.call_id)}
        assert "call.completed" in types or "call.succeeded" in types, (o.call_id, types)
    report = gw.store.audit.verify("default")
    assert report.ok, report.problems
    with sqlite3.connect(db_path) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"


@pytest.mark.parametrize("fault", list(FAULTS))
def test_a_sqlite_store_that_cannot_write_stops_calls_cleanly_and_recovers(
        opened: tuple[Gateway, Path, Path], fault: str,
        caplog: pytest.LogCaptureFixture) -> None:
    gw, db_path, lines = opened
    first = _call(gw, lines, "before")
    assert first.status == "succeeded", (first.reason, first.message)
    stopped = []
    with FAULTS[fault](gw):
        for i in range(20):  # a full database fills within a few calls
            result = _call(gw, lines, f"during-{i}")
            if result.status != "succeeded":
                stopped.append(result)
    assert stopped, "no call was refused while the store could not write"
    # the log names the database's own error, not a failed ROLLBACK of a transaction
    # SQLite had already rolled back itself
    logged = [str(r.exc_info[1]) for r in caplog.records if r.exc_info and r.exc_info[1]]
    assert logged and not [m for m in logged if "cannot rollback" in m], logged
    for result in stopped:
        assert result.reason == "store_unavailable", (result.status, result.reason,
                                                      result.message)
        assert "Error" in (result.message or "") and "sqlite" not in (result.message or "")
    _assert_consistent(gw, db_path, lines)
    # whoever's tool ran without a recorded end was told so: unknown, never failed
    executed = {o.call_id for o in gw.calls.list("default") if o.status == "in_progress"}
    assert all(r.status == "unknown" for r in stopped if r.call_id in executed), [
        (r.call_id, r.status) for r in stopped]
    assert all(r.status == "failed" for r in stopped if r.call_id not in executed), [
        (r.call_id, r.status) for r in stopped]
    ran = _lines(lines)
    for call_id in executed:  # a retry with its key does not run it again
        again = _call(gw, lines, gw.calls.get(call_id, "default").key.removeprefix("k:"))
        assert again.status == "in_progress", (again.status, again.reason)
    assert _lines(lines) == ran
    after = _call(gw, lines, "after")
    assert after.status == "succeeded", (after.reason, after.message)
    _assert_consistent(gw, db_path, lines)


@pytest.mark.parametrize("fault", list(FAULTS))
def test_over_rest_a_store_that_cannot_write_answers_503_store_unavailable(
        tmp_path: Path, fault: str) -> None:
    with api_for(tmp_path) as api:
        def charge(key: str) -> Any:
            return api.execute("bot", "charge", {"invoice": "x" * 300, "amount": 1},
                               headers={"Idempotency-Key": key})

        assert charge("before").status_code == 200
        with FAULTS[fault](api.gw):
            answers = [charge(f"during-{i}") for i in range(20)]
        refused = [r for r in answers if r.status_code != 200]
        assert refused, "no call was refused while the store could not write"
        for resp in refused:
            assert_error(resp, 503, "store_unavailable")
            assert int(resp.headers["Retry-After"]) >= 1
        assert api.gw.store.audit.verify("default").ok
        assert charge("after").json()["status"] == "succeeded"
        with sqlite3.connect(tmp_path / "tk.db") as conn:
            assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"

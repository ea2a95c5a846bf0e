"""Floors: what a governed call cannot avoid, measured in the same run on the same machine.

Absolute microseconds do not transfer between machines or days (the same commit measured
2-4x apart); a ratio to a floor measured side by side does (SPEC §10). Each floor is the
bare minimum the measured path has to do:

- the pure path: a bare call of the same function after one JSON Schema validation of its
  arguments (the validator the gateway uses, ``jsonschema_rs``);
- the durable path: the two commits it cannot avoid (claim and outcome), as bare
  ``INSERT`` + ``COMMIT`` pairs on the same SQLite file (same pragmas as the store) or on
  the same PostgreSQL database, with the store's driver;
- start-up: a fresh interpreter importing the third-party packages the server imports,
  alone, then exiting.
"""

from __future__ import annotations

import functools
import multiprocessing as mp
import queue
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import jsonschema_rs
from sqlalchemy import create_engine, text
from sqlalchemy.engine import Connection
from sqlalchemy.pool import NullPool

from toolkeeper.bench.model import BenchError, Row, Target, ratio_row
from toolkeeper.bench.sampling import BlockFn
from toolkeeper.bench.tools import add

TABLE = "toolkeeper_bench_floor"
COMMITS_PER_CALL = 2
"""Claim and outcome: the commits a durable call cannot avoid."""
READY_TIMEOUT_S = 60.0
MAX_CALLS_PER_S = 100_000
IMPORT_TIMEOUT_S = 120.0


def validated_add_block() -> BlockFn:
    """``add``'s arguments validated once against its input schema, then the bare call."""
    schema = add.definition().actions["run"].input_schema
    is_valid = jsonschema_rs.Draft202012Validator(schema).is_valid
    fn = add.fn

    async def block(first: int, count: int) -> list[int]:
        clock = time.perf_counter_ns
        samples = []
        for i in range(first, first + count):
            t0 = clock()
            args = {"a": 1, "b": i}
            if not is_valid(args):
                raise BenchError(f"the floor's arguments are invalid: {args}")
            fn(**args)
            samples.append(clock() - t0)
        return samples

    return block


@contextmanager
def bare_commits(url: str, *, drop: bool = True) -> Iterator[Callable[[int], None]]:
    """``commit(n)``: one durable call's bare commits on the database of ``url`` (a table
    of its own, dropped on exit unless ``drop`` is false: a worker's table is its
    parent's), through SQLAlchemy's driver connection with the store's SQLite pragmas
    (WAL, ``synchronous=NORMAL``)."""
    engine = create_engine(url, poolclass=NullPool)
    try:
        with engine.connect() as conn:
            _prepare(conn)
            yield _committer(conn)
            if drop:
                conn.execute(text(f"DROP TABLE IF EXISTS {TABLE}"))
                conn.commit()
    finally:
        engine.dispose()


def _prepare(conn: Connection) -> None:
    if conn.dialect.name == "sqlite":
        for pragma in ("journal_mode=WAL", "synchronous=NORMAL", "busy_timeout=10000"):
            conn.exec_driver_sql(f"PRAGMA {pragma}")
    conn.execute(text(f"CREATE TABLE IF NOT EXISTS {TABLE} (n BIGINT, step INTEGER)"))
    conn.commit()


def _committer(conn: Connection) -> Callable[[int], None]:
    raw: Any = conn.connection.driver_connection
    sql = f"INSERT INTO {TABLE} (n, step) VALUES " + (
        "(?, ?)" if conn.dialect.name == "sqlite" else "(%s, %s)")

    def commit(n: int) -> None:
        cur = raw.cursor()
        try:
            for step in range(COMMITS_PER_CALL):
                cur.execute(sql, (n, step))
                raw.commit()
        finally:
            cur.close()

    return commit


def bare_commit_block(commit: Callable[[int], None]) -> BlockFn:
    async def block(first: int, count: int) -> list[int]:
        clock = time.perf_counter_ns
        samples = []
        for i in range(first, first + count):
            t0 = clock()
            commit(i)
            samples.append(clock() - t0)
        return samples

    return block


def bare_commit_throughput(url: str, workers: int, duration_s: float) -> float:
    """Calls per second of ``workers`` spawned processes, each committing a call's bare
    commits in a loop for ``duration_s`` on the same database (started together)."""
    with bare_commits(url):  # the table, made before and dropped after every worker
        return _commit_throughput(url, workers, duration_s)


def _commit_throughput(url: str, workers: int, duration_s: float) -> float:
    ctx = mp.get_context("spawn")
    ready, results = ctx.Queue(), ctx.Queue()
    start = ctx.Event()
    procs = [ctx.Process(target=_commit_worker, daemon=True,
                         args=(url, duration_s, ready, start, results))
             for _ in range(workers)]
    for p in procs:
        p.start()
    try:
        for _ in range(workers):
            ready.get(timeout=READY_TIMEOUT_S)
        start.set()
        reports = [results.get(timeout=duration_s + READY_TIMEOUT_S) for _ in range(workers)]
    except queue.Empty:
        raise BenchError("a bare-commit worker did not report in time") from None
    finally:
        start.set()
        for p in procs:
            p.join(timeout=10.0)
            if p.is_alive():
                p.terminate()
                p.join(timeout=5.0)
    errors = [r for r in reports if isinstance(r, str)]
    if errors:
        raise BenchError(f"bare-commit worker failed: {errors[0]}")
    calls: int = sum(r[0] for r in reports)
    elapsed: float = max(r[1] for r in reports)
    return calls / elapsed


def _commit_worker(url: str, duration_s: float, ready: Any, start: Any,
                   results: Any) -> None:
    """Process entry point: ``(calls, elapsed_s)`` or an error string on ``results``."""
    try:
        with bare_commits(url, drop=False) as commit:
            base = mp.current_process().pid or 0
            for i in range(100):  # warm-up
                commit(-i)
            ready.put(True)
            if not start.wait(READY_TIMEOUT_S):
                raise BenchError("start signal never came")
            n, limit = 0, int(duration_s * MAX_CALLS_PER_S)
            t0 = time.perf_counter()
            deadline = t0 + duration_s
            while n < limit and time.perf_counter() < deadline:
                commit(base * MAX_CALLS_PER_S * 100 + n)
                n += 1
            results.put((n, time.perf_counter() - t0))
    except BaseException as exc:  # the parent must hear about it rather than wait
        ready.put(False)
        results.put(f"{type(exc).__name__}: {exc}")


SERVER_MODULES = ("toolkeeper.api", "toolkeeper.cli.serve", "toolkeeper.bench.rest_app",
                  "uvicorn", "uvloop", "httptools")
"""What the measured servers import to start (the uvicorn app factories and ``serve``)."""


def server_dependencies() -> list[str]:
    """The third-party modules a server process has imported once its own modules are
    loaded (not toolkeeper's, not the standard library's), in the order they were imported,
    found in a fresh interpreter."""
    probe = ("import importlib, sys\n"
             f"for m in {SERVER_MODULES!r}: importlib.import_module(m)\n"
             "std = set(sys.stdlib_module_names) | set(sys.builtin_module_names)\n"
             "print(' '.join(n for n in list(sys.modules) if n.split('.')[0] not in std "
             "and not n.startswith('_') and n.split('.')[0] != 'toolkeeper'))\n")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                         timeout=IMPORT_TIMEOUT_S, check=True)
    return out.stdout.split()


def import_seconds(modules: list[str], rounds: int = 3) -> float:
    """The fastest of ``rounds`` fresh interpreters importing ``modules`` and exiting:
    the start-up floor (the least a server using them could take)."""
    code = ("import importlib\n"
            f"for m in {modules!r}:\n"
            "    try:\n        importlib.import_module(m)\n"
            "    except Exception:\n        pass\n")
    best = float("inf")
    for _ in range(rounds):
        t0 = time.monotonic()
        subprocess.run([sys.executable, "-c", code], check=True, timeout=IMPORT_TIMEOUT_S,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        best = min(best, time.monotonic() - t0)
    return best


STARTUP_VS_IMPORTS = Target(op="<=", bound=2)
"""SPEC §10: a server's start-up to ``/healthz`` at most twice importing its dependencies."""


@functools.cache
def import_floor_s() -> float:
    """The start-up floor, measured once per bench run (REST and catalog share it)."""
    return import_seconds(server_dependencies())


def startup_rows(prefix: str, startup_s: float) -> list[Row]:
    """Start-up beside its floor: the ratio is the target, the seconds information."""
    floor = import_floor_s()
    return [Row(metric=f"{prefix}_startup", value=startup_s, unit="s", decimals=2),
            Row(metric=f"{prefix}_startup_import_floor", value=floor, unit="s", decimals=2),
            ratio_row(f"{prefix}_startup_vs_imports", startup_s, floor, STARTUP_VS_IMPORTS)]

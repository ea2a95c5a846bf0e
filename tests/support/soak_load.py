"""Drives the soak's operations (``tests.support.soak``): a few seconds closed-loop to
measure capacity, then an open-loop mixed load at a fraction of it, while the ``serve``
process's RSS and open file descriptors and the store's table sizes are sampled. Then
cuts the run into windows (p50/p99 latency, 5xx, resources, TTL takeovers) for the table."""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import time
from collections import Counter
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

import httpx
from sqlalchemy import text

from tests.support.soak import MIX, REQUEST_TIMEOUT_S, Done, Ops
from toolkeeper.store.db import Database

CLOSED_LOOP_WORKERS = 16
SAMPLE_EVERY_S = 2.0
MAX_IN_FLIGHT = 2000
"""More operations outstanding than this means the server fell far behind: counted as
problems instead of piling up more tasks."""
TABLES = ("outcomes", "audit_events", "recent_calls")


@dataclass(frozen=True, slots=True)
class Sample:
    at: float
    rss_mib: float
    fds: int
    files: int
    """Descriptors that are not sockets (database, WAL, log, pipes): flat once warm."""
    rows: dict[str, int]


@dataclass
class Run:
    """Everything one soak measured; ``done`` holds both phases (``soak_from`` splits)."""

    capacity_per_s: float = 0.0
    rate_per_s: float = 0.0
    soak_from: float = 0.0
    soak_until: float = 0.0
    done: list[Done] = field(default_factory=list)
    samples: list[Sample] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    fds_before: int = 0
    fds_after: int = 0
    sockets_before: int = 0
    sockets_after: int = 0
    approved: int = 0


def resources(pid: int) -> tuple[float, int, int]:
    """(RSS in MiB, open file descriptors, those of them not sockets) of process ``pid``,
    from ``/proc``."""
    status = Path(f"/proc/{pid}/status").read_text()
    rss_kib = next(int(line.split()[1]) for line in status.splitlines()
                   if line.startswith("VmRSS:"))
    links = []
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            links.append(os.readlink(f"/proc/{pid}/fd/{fd}"))
        except FileNotFoundError:  # closed while listed
            continue
    return rss_kib / 1024, len(links), sum(not x.startswith("socket:") for x in links)


def row_counts(db: Database) -> dict[str, int]:
    with db.read() as conn:
        return {t: int(conn.execute(text(f"SELECT count(*) FROM {t}")).scalar_one())
                for t in TABLES}


async def _sampler(pid: int, db: Database, run: Run, stop: asyncio.Event) -> None:
    while not stop.is_set():
        rss, fds, files = resources(pid)
        rows = await asyncio.to_thread(row_counts, db)
        run.samples.append(Sample(time.monotonic(), rss, fds, files, rows))
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), timeout=SAMPLE_EVERY_S)


def _kinds(rng: random.Random, n: int, *, gated: bool = True) -> list[str]:
    mix = {k: w for k, w in MIX.items() if gated or k != "gated"}
    return rng.choices(list(mix), weights=list(mix.values()), k=n)


async def _closed_loop(ops: Ops, seconds: float, run: Run) -> float:
    """Operations per second :data:`CLOSED_LOOP_WORKERS` workers complete back to back."""
    until = time.monotonic() + seconds
    count = 0

    async def worker(seed: int) -> None:
        nonlocal count
        rng = random.Random(seed)
        while time.monotonic() < until:
            run.done.append(await ops.run(_kinds(rng, 1, gated=False)[0], time.monotonic()))
            count += 1
    started = time.monotonic()
    await asyncio.gather(*(worker(i) for i in range(CLOSED_LOOP_WORKERS)))
    return count / (time.monotonic() - started)


def _finished(pending: set[asyncio.Task[Done]], done: list[Done],
              task: asyncio.Task[Done]) -> None:
    pending.discard(task)
    done.append(task.result())


async def _open_loop(ops: Ops, rate: float, seconds: float, run: Run, seed: int) -> None:
    """Operation ``i`` is due at ``start + i / rate`` whatever the earlier ones are doing."""
    n = int(rate * seconds)
    kinds = _kinds(random.Random(seed), n)
    pending: set[asyncio.Task[Done]] = set()
    start = time.monotonic()
    run.soak_from = start
    for i, kind in enumerate(kinds):
        due = start + i / rate
        if (delay := due - time.monotonic()) > 0:
            await asyncio.sleep(delay)
        if len(pending) >= MAX_IN_FLIGHT:
            run.problems.append(f"{kind} due at {due - start:.1f} s: {len(pending)} in flight")
            continue
        task = asyncio.create_task(ops.run(kind, due))
        pending.add(task)
        task.add_done_callback(partial(_finished, pending, run.done))
    run.soak_until = start + seconds
    if pending:
        await asyncio.wait(pending, timeout=REQUEST_TIMEOUT_S * 3)
    run.problems += [f"{len(pending)} operations still running at the end"] if pending else []


async def _drive(url: str, tokens: dict[str, str], work: Path, pid: int, db: Database, *,
                 seconds: float, capacity_s: float, fraction: float, seed: int) -> Run:
    run = Run()
    limits = httpx.Limits(max_connections=64, max_keepalive_connections=64)
    async with httpx.AsyncClient(timeout=REQUEST_TIMEOUT_S, limits=limits) as client:
        ops = Ops(url, tokens, work / "executions.txt", work / "released.txt", client,
                  random.Random(seed))
        stop = asyncio.Event()
        sampling = asyncio.create_task(_sampler(pid, db, run, stop))
        approving = asyncio.create_task(ops.approver(stop, run.problems))
        try:
            run.capacity_per_s = await _closed_loop(ops, capacity_s, run)
            run.rate_per_s = run.capacity_per_s * fraction
            await _open_loop(ops, run.rate_per_s, seconds, run, seed)
        finally:
            stop.set()
            await asyncio.wait_for(asyncio.gather(sampling, approving), timeout=60)
        run.approved = ops.approved
    return run


def soak(url: str, tokens: dict[str, str], work: Path, pid: int, db_url: str, *,
         seconds: float, capacity_s: float = 5.0, fraction: float = 0.5,
         seed: int = 13) -> Run:
    """Capacity for ``capacity_s`` seconds, then ``seconds`` of open-loop load at
    ``fraction`` of it; file descriptors counted before and (settled) after."""
    db = Database(db_url)
    try:
        before = resources(pid)
        run = asyncio.run(_drive(url, tokens, work, pid, db, seconds=seconds,
                                 capacity_s=capacity_s, fraction=fraction, seed=seed))
        time.sleep(2.0)  # the server closes the client's connections
        after = resources(pid)
        run.fds_before, run.fds_after = before[1], after[1]
        run.sockets_before, run.sockets_after = before[1] - before[2], after[1] - after[2]
        return run
    finally:
        db.dispose()


def percentile(values: list[float], q: float) -> float:
    """The nearest-rank ``q`` percentile (0 < q <= 1) of ``values`` (0.0 if empty)."""
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[max(0, min(len(ordered) - 1, round(q * len(ordered) + 0.5) - 1))]


def takeovers(done: list[Done]) -> list[Done]:
    """``ttl`` executions after a key's first: each ran because the key's outcome expired."""
    seen: Counter[str] = Counter()
    later = []
    for d in sorted((d for d in done if d.kind == "ttl" and d.executed), key=lambda d: d.due):
        seen[d.mark] += 1
        if seen[d.mark] > 1:
            later.append(d)
    return later

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

from tests.support.soak import (
    AGENT_CONNECTIONS,
    MIX,
    REQUEST_TIMEOUT_S,
    TTL_PER_S,
    Clients,
    Done,
    Ops,
)
from toolkeeper.store.db import Database

CLOSED_LOOP_WORKERS = 16
SAMPLE_EVERY_S = 2.0
MAX_IN_FLIGHT = 2000
"""More operations outstanding than this means the server fell far behind: counted as
problems instead of piling up more tasks."""
WAITING_CONNECTIONS = 256
"""Gated operations waiting for their decision at once (each long poll holds one)."""
TABLES = ("outcomes", "audit_events", "recent_calls", "approvals")


@dataclass(frozen=True, slots=True)
class Sample:
    at: float
    rss_mib: float
    fds: int
    threads: int
    rows: dict[str, int]
    load: float
    """The machine's 1-minute load average (the soak shares it: latency is read with it)."""
    cpu_s: float
    """CPU seconds (user and system) the server has used so far: its work per operation
    does not depend on what else the machine runs."""
    client_cpu_s: float
    """CPU seconds this (client) process has used so far: near one per second, the client,
    not the server, is what falls behind."""


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
    threads_before: int = 0
    threads_after: int = 0
    approved: int = 0


def cpu_seconds(pid: int) -> float:
    """User and system CPU seconds of process ``pid`` so far (``/proc/<pid>/stat``)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def resources(pid: int) -> tuple[float, int, int]:
    """(RSS in MiB, open file descriptors, threads) of process ``pid``, from ``/proc``."""
    status = dict(line.split(":", 1) for line in
                  Path(f"/proc/{pid}/status").read_text().splitlines() if ":" in line)
    rss_kib, threads = int(status["VmRSS"].split()[0]), int(status["Threads"])
    return rss_kib / 1024, len(os.listdir(f"/proc/{pid}/fd")), threads


def row_counts(db: Database) -> dict[str, int]:
    """Each table's rows, and ``pruned``: the audit events retention deleted so far (the
    chains' bases)."""
    with db.read() as conn:
        rows = {t: int(conn.execute(text(f"SELECT count(*) FROM {t}")).scalar_one())
                for t in TABLES}
        rows["pruned"] = int(conn.execute(text(
            "SELECT coalesce(sum(base_seq), 0) FROM audit_heads")).scalar_one())
    return rows


async def _sampler(pid: int, db: Database, run: Run, stop: asyncio.Event) -> None:
    while not stop.is_set():
        rss, fds, threads = resources(pid)
        rows = await asyncio.to_thread(row_counts, db)
        load = float(Path("/proc/loadavg").read_text().split()[0])
        run.samples.append(Sample(time.monotonic(), rss, fds, threads, rows, load,
                                  cpu_seconds(pid), time.process_time()))
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), timeout=SAMPLE_EVERY_S)


def _kinds(rng: random.Random, n: int) -> list[str]:
    return rng.choices(list(MIX), weights=list(MIX.values()), k=n)


async def _closed_loop(ops: Ops, seconds: float, run: Run) -> float:
    """Operations per second :data:`CLOSED_LOOP_WORKERS` workers complete back to back (the
    same mix: a gated operation holds its worker through its approval, as it would)."""
    until = time.monotonic() + seconds
    count = 0

    async def worker(seed: int) -> None:
        nonlocal count
        rng = random.Random(seed)
        while time.monotonic() < until:
            run.done.append(await ops.run(_kinds(rng, 1)[0], time.monotonic()))
            count += 1
    started = time.monotonic()
    await asyncio.gather(*(worker(i) for i in range(CLOSED_LOOP_WORKERS)))
    return count / (time.monotonic() - started)


def _finished(pending: set[asyncio.Task[Done]], done: list[Done],
              task: asyncio.Task[Done]) -> None:
    pending.discard(task)
    done.append(task.result())


def _schedule(rate: float, seconds: float, seed: int) -> list[tuple[float, str]]:
    """(offset, kind): the mix at ``rate`` per second, and ``ttl`` at :data:`TTL_PER_S`
    whatever the rate (so keys expire and are taken over in every window)."""
    mix = _kinds(random.Random(seed), int(rate * seconds))
    ttl = [(j / TTL_PER_S, "ttl") for j in range(int(TTL_PER_S * seconds))]
    return sorted([(i / rate, kind) for i, kind in enumerate(mix)] + ttl)


async def _open_loop(ops: Ops, rate: float, seconds: float, run: Run, seed: int) -> None:
    """Each operation starts when it is due, whatever the earlier ones are doing."""
    pending: set[asyncio.Task[Done]] = set()
    start = time.monotonic()
    run.soak_from = start
    for offset, kind in _schedule(rate, seconds, seed):
        due = start + offset
        if (delay := due - time.monotonic()) > 0:
            await asyncio.sleep(delay)
        if len(pending) >= MAX_IN_FLIGHT:
            run.problems.append(f"{kind} due at {offset:.1f} s: {len(pending)} in flight")
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
    # idle connections are dropped before the server's keep-alive timeout (5 s) closes them:
    # at the same 5 s, a request sent as the server closes reads nothing (ReadError)
    def pool(size: int) -> httpx.AsyncClient:
        return httpx.AsyncClient(timeout=REQUEST_TIMEOUT_S, limits=httpx.Limits(
            max_connections=size, max_keepalive_connections=size, keepalive_expiry=2.0))

    agents, waiters = Clients(partial(pool, 1), AGENT_CONNECTIONS), Clients(
        partial(pool, 1), WAITING_CONNECTIONS)
    async with pool(1) as approver:
        ops = Ops(url, tokens, work / "executions.txt", work / "released.txt", agents,
                  waiters, approver, random.Random(seed))
        stop = asyncio.Event()
        sampling = asyncio.create_task(_sampler(pid, db, run, stop))
        approving = asyncio.create_task(ops.approver(stop, run.problems))
        try:
            for kind in (*MIX, "ttl"):  # first calls load what each path imports lazily
                run.done.append(await ops.run(kind, time.monotonic()))
            run.capacity_per_s = await _closed_loop(ops, capacity_s, run)
            run.rate_per_s = run.capacity_per_s * fraction
            await _open_loop(ops, run.rate_per_s, seconds, run, seed)
        finally:
            stop.set()
            await asyncio.wait_for(asyncio.gather(sampling, approving), timeout=60)
            await agents.aclose()
            await waiters.aclose()
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
        run.threads_before, run.threads_after = before[2], after[2]
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

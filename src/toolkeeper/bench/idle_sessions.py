"""Many idle clients (issue 32): one ``serve`` worker holding ``N`` idle 2025-11-25 MCP
sessions, each with its GET stream open (default 10,000), while 16 clients call a tool.

Side by side in one run: the 16 clients' call latency (p50, p99) without the idle
sessions, then with them; the server's memory per idle session (its RSS with them open
minus before, over N); and the cap: the server runs with ``TOOLKEEPER_MCP_MAX_SESSIONS``
just above what the scenario opens, and after the measurement one more session at a time
is opened until one is refused, which must be a 503 with ``Retry-After`` at the cap, never
a failure of the process. The idle sessions come from a process of their own
(:mod:`toolkeeper.bench.idle_clients`); the 16 callers are the official SDK's clients in the
2025-11-25 session mode, as deployed clients are.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

from toolkeeper.bench.idle_clients import OPENING_AT_ONCE
from toolkeeper.bench.model import BenchError, BenchResult, Row, Sizes, Target, percentile
from toolkeeper.bench.procs import serving
from toolkeeper.bench.rest import _rss_mb

NAME = "idle_sessions"
CALLERS = 16
SPARE = 4
"""Sessions the cap leaves above the idle ones and the callers'."""
P99_RATIO = Target(op="<=", bound=1.5)
"""SPEC §10: the callers' p99 with the idle sessions open within 1.5x of without (idle
clients cost memory, not the active clients' latency)."""
KIB_PER_SESSION = Target(op="<=", bound=256)
REFUSED = Target(op=">=", bound=1)
NONE = Target(op="<=", bound=0)
CONFIG = """version: 1
tools:
  - native: toolkeeper.bench.tools:add
profiles:
  - {name: p, autonomy: 3, activations: [{tool: add}]}
agents:
  - {name: bench-agent, profile: p}
"""


def bench_idle_sessions(sizes: Sizes) -> BenchResult:
    result = BenchResult(name=NAME, title="MCP: 16 callers beside idle 2025-11-25 sessions "
                                          "with GET streams open, one serve worker")
    n = _fds_allow(sizes.idle_sessions, result)
    cap = n + CALLERS + SPARE
    with tempfile.TemporaryDirectory(prefix="toolkeeper-idle-") as tmp:
        cfg = Path(tmp) / "toolkeeper.yaml"
        cfg.write_text(CONFIG, encoding="utf-8")
        db = f"sqlite:///{tmp}/bench.db"
        token = _token(db, cfg)
        env = {**os.environ, "TOOLKEEPER_MCP_MAX_SESSIONS": str(cap),
               "TOOLKEEPER_MAX_CONNECTIONS": str(cap + 4 * CALLERS)}
        cmd = [sys.executable, "-m", "toolkeeper.cli", "--db", db, "serve", "--port",
               "{port}", "--config", str(cfg), "--log-level", "warning", "--workers", "1"]
        with serving(cmd, env) as server:
            quiet = asyncio.run(_callers(server.base, token, sizes.duration_s))
            before = _rss_mb(server.pid)
            started = time.monotonic()
            with _idle(server.base, token, n) as idle:
                opened_s = time.monotonic() - started
                after = _rss_mb(server.pid)
                loaded = asyncio.run(_callers(server.base, token, sizes.duration_s))
                with _idle(server.base, token, cap, until_refused=True) as extra:
                    pass
    result.rows += _rows(n, idle, before, after, quiet, loaded, extra)
    result.notes.append(
        f"{n} idle sessions opened in {opened_s:.1f} s by one process (h11, {OPENING_AT_ONCE} at "
        f"once), each: initialize, initialized, GET stream held; {CALLERS} SDK clients "
        f"(2025-11-25 sessions) calling `add` in turn for {sizes.duration_s:g} s, first "
        f"without, then with them; serve with TOOLKEEPER_MCP_MAX_SESSIONS={cap} and "
        f"TOOLKEEPER_MAX_CONNECTIONS={cap + 4 * CALLERS}; then sessions opened one at a time "
        f"until one is refused (opened {extra['opened']} more, Retry-After "
        f"{extra['retry_after']})")
    return result


def _rows(n: int, idle: dict[str, Any], before: float, after: float,
          quiet: list[float], loaded: list[float], extra: dict[str, Any]) -> list[Row]:
    q, lo = sorted(quiet), sorted(loaded)
    per_kib = (after - before) * 1024 / max(idle["opened"], 1)
    return [
        Row(metric=f"{NAME}_opened", value=idle["opened"], unit="sessions", decimals=0),
        Row(metric=f"{NAME}_open_failures", value=idle["refused"] + idle["error_count"],
            unit="sessions", target=NONE, decimals=0),
        Row(metric=f"{NAME}_rss_before", value=before, unit="MiB", decimals=1),
        Row(metric=f"{NAME}_rss_with_idle", value=after, unit="MiB", decimals=1),
        Row(metric=f"{NAME}_memory_per_idle_session", value=per_kib, unit="KiB",
            target=KIB_PER_SESSION, decimals=1),
        Row(metric=f"{NAME}_callers_p50_without", value=percentile(q, 50), unit="ms",
            decimals=2),
        Row(metric=f"{NAME}_callers_p50_with", value=percentile(lo, 50), unit="ms",
            decimals=2),
        Row(metric=f"{NAME}_callers_p99_without", value=percentile(q, 99), unit="ms",
            decimals=2),
        Row(metric=f"{NAME}_callers_p99_with", value=percentile(lo, 99), unit="ms",
            decimals=2),
        Row(metric=f"{NAME}_callers_p99_with_vs_without",
            value=percentile(lo, 99) / percentile(q, 99), unit="x", target=P99_RATIO,
            decimals=2),
        Row(metric=f"{NAME}_callers_calls", value=len(lo), unit="calls", decimals=0),
        Row(metric=f"{NAME}_past_cap_refused_503", value=extra["refused"], unit="sessions",
            target=REFUSED, decimals=0),
        Row(metric=f"{NAME}_past_cap_errors", value=extra["error_count"], unit="sessions",
            target=NONE, decimals=0),
    ]


def _fds_allow(n: int, result: BenchResult) -> int:
    """Raise this process's open-files limit to its hard limit (the server and the idle
    clients inherit it) and return how many idle sessions it allows."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    room = hard - 4 * CALLERS - 200  # the server's own files, the callers, the spares
    if room < n:
        result.notes.append(f"the open-files hard limit ({hard}) allows {room} idle sessions, "
                            f"not {n}: raise it (ulimit -Hn) for the full scenario")
        return max(room, 1)
    return n


def _token(db: str, cfg: Path) -> str:
    from toolkeeper.gateway import Gateway

    with Gateway.open(db, config=cfg) as gw:
        return gw.store.tokens.create(tenant_id="default", role="agent",
                                      agent="bench-agent")[1]


@contextlib.contextmanager
def _idle(base: str, token: str, n: int, *, until_refused: bool = False
          ) -> Iterator[dict[str, Any]]:
    """The idle clients' process, its sessions open (or refused) for the block."""
    cmd = [sys.executable, "-m", "toolkeeper.bench.idle_clients", base, token, str(n)]
    with tempfile.TemporaryFile() as errors:  # a file: a pipe nobody reads could fill
        proc = subprocess.Popen(cmd + (["--until-refused"] if until_refused else []),
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=errors, text=True)
        yield from _reported(proc, n, errors)


def _reported(proc: subprocess.Popen[str], n: int, errors: IO[bytes]
              ) -> Iterator[dict[str, Any]]:
    try:
        line = _first_line(proc, timeout_s=60 + n / 50, errors=errors)
        report: dict[str, Any] = json.loads(line)
        yield report
    finally:
        assert proc.stdin is not None
        proc.stdin.close()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=5)


def _first_line(proc: subprocess.Popen[str], timeout_s: float, errors: IO[bytes]) -> str:
    import selectors

    assert proc.stdout is not None
    with selectors.DefaultSelector() as sel:
        sel.register(proc.stdout, selectors.EVENT_READ)
        if not sel.select(timeout_s):
            proc.kill()
            raise BenchError(f"the idle clients did not report within {timeout_s:g} s")
    line = proc.stdout.readline()
    if not line:
        errors.seek(0)
        err = errors.read().decode(errors="replace")[-2000:]
        raise BenchError(f"the idle clients exited without a report: {err}")
    return line


async def _callers(base: str, token: str, seconds: float) -> list[float]:
    """``CALLERS`` SDK clients (2025-11-25 sessions) calling ``add`` in turn for
    ``seconds``: every call's latency in ms (after a warm-up each)."""
    import httpx2
    from mcp.client.streamable_http import streamable_http_client

    from mcp import Client

    out: list[float] = []
    stop, warmed = 0.0, 0

    async def caller() -> None:
        async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}) as http, \
                Client(streamable_http_client(f"{base}/mcp", http_client=http),
                       mode="legacy", cache=None) as client:
            nonlocal warmed
            for _ in range(20):
                await client.call_tool("add", {"a": 1, "b": 2})
            warmed += 1
            await ready.wait()
            while time.monotonic() < stop:
                t0 = time.perf_counter_ns()
                r = await client.call_tool("add", {"a": 1, "b": 2})
                out.append((time.perf_counter_ns() - t0) / 1e6)
                if r.is_error:
                    raise BenchError(f"a caller's call failed: {r.content}")

    ready = asyncio.Event()
    tasks = [asyncio.create_task(caller()) for _ in range(CALLERS)]

    async def start() -> None:
        nonlocal stop
        while warmed < CALLERS:  # every caller warmed up (bounded by the wait_for below)
            await asyncio.sleep(0.05)
        stop = time.monotonic() + seconds
        ready.set()

    await asyncio.wait_for(asyncio.gather(start(), *tasks), seconds + 90)
    if not out:
        raise BenchError("the callers made no call")
    return out

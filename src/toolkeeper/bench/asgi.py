"""Issue 12 item 1: which ASGI server ``toolkeeper serve`` runs on, chosen by measurement.

The same app (:mod:`toolkeeper.bench.rest_app`: the REST face with ``/mcp`` mounted, one
process, one SQLite store) is served in turn by uvicorn (uvloop + httptools, what ``serve``
runs), granian and hypercorn, each with its own event-loop choice at its fastest; the
in-repo load generator drives the two hot requests — REST ``POST /tools/execute`` and a
stateless 2026-07-28 MCP ``tools/call`` (the lean path) — closed loop over 16 keep-alive
connections. The order of the servers rotates per round so machine drift hits all three.
Rows: requests/s, p50/p99 and CPU per request of the server process. A server whose package
is missing is a note, not a failure (``pip install -e '.[dev]'`` brings both).
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager

from toolkeeper.bench.model import BenchResult, Row, Sizes, percentile
from toolkeeper.bench.proc_cpu import cpu_seconds
from toolkeeper.bench.procs import Served, serving
from toolkeeper.bench.rest import load, wait_ready
from toolkeeper.bench.tools import AGENT, open_gateway, sqlite_url

NAME = "asgi"
APP = "toolkeeper.bench.rest_app:app"
SERVERS = ("uvicorn", "granian", "hypercorn")
CONNECTIONS = 16
V = "2026-07-28"
META = {"io.modelcontextprotocol/protocolVersion": V,
        "io.modelcontextprotocol/clientCapabilities": {}}
REQUESTS: dict[str, tuple[str, dict[str, object], dict[str, str]]] = {
    "rest": ("/tools/execute", {"tool": "add", "arguments": {"a": 1, "b": 2}}, {}),
    "mcp": ("/mcp", {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                     "params": {"_meta": META, "name": "add", "arguments": {"a": 1, "b": 2}}},
            {"Accept": "application/json, text/event-stream", "MCP-Protocol-Version": V,
             "Mcp-Method": "tools/call", "Mcp-Name": "add"}),
}


def _argv(server: str) -> list[str]:
    py, where = sys.executable, "127.0.0.1"
    if server == "uvicorn":
        return [py, "-m", "uvicorn", "--factory", APP, "--host", where, "--port", "{port}",
                "--loop", "uvloop", "--http", "httptools", "--no-access-log",
                "--log-level", "warning"]
    if server == "granian":
        return [py, "-m", "granian", "--interface", "asgi", "--factory", "--loop", "uvloop",
                "--host", where, "--port", "{port}", "--workers", "1", "--no-ws",
                "--log-level", "warning", APP]
    return [py, "-m", "hypercorn", "-b", f"{where}:{{port}}", "-k", "uvloop",
            "--log-level", "warning", f"{APP}()"]


def _installed(server: str) -> bool:
    return importlib.util.find_spec(server) is not None


@contextmanager
def _served(server: str, url: str) -> Iterator[Served]:
    with serving(_argv(server), {**os.environ, "TOOLKEEPER_BENCH_URL": url}) as served:
        wait_ready(served.base)
        yield served


def bench_asgi(sizes: Sizes) -> BenchResult:
    result = BenchResult(name=NAME, title="ASGI server for serve: uvicorn vs granian vs "
                                          "hypercorn, same app (issue 12 item 1)")
    servers = [s for s in SERVERS if _installed(s)]
    result.notes += [f"{s} NOT MEASURED: not installed (pip install -e '.[dev]')"
                     for s in SERVERS if s not in servers]
    seconds = max(1.0, sizes.duration_s / 2)
    rounds = 1 if sizes.duration_s < 2 else 3
    figures: dict[tuple[str, str], list[tuple[float, list[float], float]]] = {}
    with tempfile.TemporaryDirectory(prefix="toolkeeper-asgi-") as tmp:
        url = sqlite_url(tmp)
        with open_gateway(url) as gw:
            token = gw.store.tokens.create(tenant_id="default", role="agent", agent=AGENT)[1]
        for r in range(rounds):
            for server in servers[r % len(servers):] + servers[:r % len(servers)]:
                with _served(server, url) as served:
                    for kind, (path, body, headers) in REQUESTS.items():
                        target = served.base + path
                        load(target, token, 0.5, body=body, headers=headers,
                             connections=CONNECTIONS)  # warm-up
                        cpu0 = cpu_seconds(served.pid)
                        doc = load(target, token, seconds, body=body, headers=headers,
                                   connections=CONNECTIONS)
                        cpu = cpu_seconds(served.pid) - cpu0
                        figures.setdefault((server, kind), []).append(
                            (doc["rate"], doc["latencies_ms"], cpu / max(doc["requests"], 1)))
    for (server, kind), runs in figures.items():
        result.rows += _rows(server, kind, runs)
    result.notes.append(_verdict(figures))
    result.notes.append(f"one process each, {rounds} round(s) of {seconds:g} s per request "
                        f"kind, order rotating; loadgen -c{CONNECTIONS} closed loop; CPU of "
                        "the server process only")
    return result


def _rows(server: str, kind: str,
          runs: list[tuple[float, list[float], float]]) -> list[Row]:
    lat = sorted(x for _, samples, _ in runs for x in samples)
    rate = sorted(r for r, _, _ in runs)[len(runs) // 2]
    cpu_us = sorted(c for _, _, c in runs)[len(runs) // 2] * 1e6
    prefix = f"asgi_{server}_{kind}"
    return [Row(metric=f"{prefix}_rps", value=rate, unit="req/s", decimals=0),
            Row(metric=f"{prefix}_p50", value=percentile(lat, 50), unit="ms", decimals=2),
            Row(metric=f"{prefix}_p99", value=percentile(lat, 99), unit="ms", decimals=2),
            Row(metric=f"{prefix}_cpu_per_request", value=cpu_us, unit="us", decimals=0)]


def _verdict(figures: dict[tuple[str, str], list[tuple[float, list[float], float]]]) -> str:
    """Which server passed the most requests per second on each path (median of rounds)."""
    best = {}
    for kind in REQUESTS:
        rates = {s: sorted(r for r, _, _ in runs)[len(runs) // 2]
                 for (s, k), runs in figures.items() if k == kind}
        if rates:
            best[kind] = max(rates, key=lambda s: rates[s])
    return "fastest by requests/s: " + json.dumps(best) + " (serve runs uvicorn)"


"""MCP as deployed today (issue 32): an upstream FastMCP server of the 1.x SDK
(``mcp==1.30.0``, stateful sessions, answers as SSE: its defaults) with one tool ``pure``,
called directly and through ``toolkeeper serve`` (1 and 2 workers, SQLite, autonomy 3) by
the 1.x SDK's client (a 2025-11-25 session) and by the 2.x SDK's client in both eras.

Per client, era and worker count, in the same run: added p50 (sequential calls in blocks,
the sides' order rotating), the throughput ratio at 16 in flight (through toolkeeper over
direct) and the gateway's CPU per call over the upstream's own (each side's processes'
CPU time over its throughput window / its calls). The 1.x SDK and the upstream run with the
interpreter of ``.venv-handshake-peers/mcp1`` (``make handshake-peers``; or
``TOOLKEEPER_BENCH_SDK1_PYTHON``); without it the rows are not measured, and say so.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from toolkeeper.bench import sdk1_client, sdk1_peer
from toolkeeper.bench.mcp import (
    ADDED_P50_MS,
    CONFIG,
    CPU_VS_UPSTREAM,
    ERAS,
    IN_FLIGHT,
    PASSTHROUGH_NOTE,
    RATIO,
    _agent_token,
    _measure,
    passthrough,
    venv_python,
)
from toolkeeper.bench.model import BenchError, BenchResult, Row, Sizes, percentile
from toolkeeper.bench.procs import Served, serving

NAME = "mcp_sdk1"
SDK1_PYTHON = "TOOLKEEPER_BENCH_SDK1_PYTHON"
WORKERS = (1, 2)
TOOLS = {"direct": "pure", "governed": "up_pure", "passthrough": "pure"}
ARGUMENTS = {"x": 1}


def bench_mcp_sdk1(sizes: Sizes) -> BenchResult:
    result = BenchResult(name=NAME, title="MCP as deployed: FastMCP on the 1.x SDK (SSE) "
                                          "upstream, 1.x and 2.x SDK clients, 1 and 2 workers")
    python = venv_python(SDK1_PYTHON, ".venv-handshake-peers/mcp1/bin/python")
    if python is None:
        result.notes.append(f"NOT MEASURED: no 1.x SDK venv (make handshake-peers creates "
                            f".venv-handshake-peers/mcp1; or set {SDK1_PYTHON})")
        return result
    clean = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    with tempfile.TemporaryDirectory(prefix="toolkeeper-mcp-sdk1-") as tmp, \
            contextlib.ExitStack() as stack:
        up = stack.enter_context(
            serving([python, "-P", str(sdk1_peer.__file__), "{port}"], clean))
        cfg = Path(tmp) / "toolkeeper.yaml"
        cfg.write_text(CONFIG.format(url=f"{up.base}/mcp", tool=TOOLS["governed"]),
                       encoding="utf-8")
        db = f"sqlite:///{tmp}/bench.db"
        token = _agent_token(db, cfg, "up_pure")
        forwarder = stack.enter_context(passthrough(f"{up.base}/mcp"))
        for workers in WORKERS:
            serve = [sys.executable, "-m", "toolkeeper.cli", "--db", db, "serve", "--port",
                     "{port}", "--config", str(cfg), "--log-level", "warning",
                     "--workers", str(workers)]
            with serving(serve) as gov:
                sides = {"direct": up, "governed": gov}
                if workers == 1:  # the passthrough has no workers: measured once
                    sides["passthrough"] = forwarder
                measured = {"_sdk1_2025": _sdk1(python, sides, token, sizes, clean)}
                for era, mode in ERAS.items():  # the upstream speaks 2025-11-25 only
                    modes = {"direct": "legacy", "governed": mode, "passthrough": "legacy"}
                    measured[f"_sdk2{era or '_2026'}"] = asyncio.run(_measure(
                        sides, token, sizes, modes, tools=TOOLS, arguments=ARGUMENTS))
            for suffix, figures in measured.items():
                result.rows += _rows(f"{suffix}_{workers}w", figures)
    result.notes.append(
        f"upstream: FastMCP (mcp==1.30.0 defaults: sessions, SSE answers); clients: the 1.x "
        f"SDK's ClientSession (rows *_sdk1_2025_*), the 2.x SDK's Client in mode legacy "
        f"(*_sdk2_2025_*) and auto (*_sdk2_2026_*: 2026-07-28 to toolkeeper, a 2025 session "
        f"to the upstream, which speaks nothing newer); sequential calls in blocks, order "
        f"rotating; throughput {IN_FLIGHT} in flight on one session for {sizes.duration_s:g} "
        f"s per side; CPU per call: serve's processes (workers included) over the "
        f"upstream's own in its direct run; suffix _1w/_2w: serve --workers")
    result.notes.append(PASSTHROUGH_NOTE + " (rows *_passthrough_*, with the 1-worker runs; "
                        "the 2.x client speaks 2025-11-25 to it in both runs, as the upstream "
                        "speaks nothing newer)")
    return result


def _rows(suffix: str, figures: dict[str, list[float]]) -> list[Row]:
    gov, base = sorted(figures["governed"]), sorted(figures["direct"])
    cpu, up_cpu = figures["governed_cpu"][0], figures["direct_cpu"][0]
    passthrough = (_vs_direct(f"{NAME}_passthrough", "passthrough", suffix, figures)
                   if "passthrough" in figures else [])
    return [
        *passthrough,
        Row(metric=f"{NAME}_direct_p50{suffix}", value=percentile(base, 50), unit="ms",
            decimals=2),
        Row(metric=f"{NAME}_governed_p50{suffix}", value=percentile(gov, 50), unit="ms",
            decimals=2),
        *_vs_direct(NAME, "governed", suffix, figures, targeted=True),
        Row(metric=f"{NAME}_governed_cpu_per_call{suffix}", value=cpu, unit="ms",
            decimals=2),
        Row(metric=f"{NAME}_upstream_cpu_per_call{suffix}", value=up_cpu, unit="ms",
            decimals=2),
    ]


def _vs_direct(prefix: str, side: str, suffix: str, figures: dict[str, list[float]],
               targeted: bool = False) -> list[Row]:
    """``side``'s added p50, throughput ratio and CPU over the upstream's, against the
    direct run; with SPEC's targets (toolkeeper) or as information (the passthrough)."""
    base = percentile(sorted(figures["direct"]), 50)
    d_rate, up_cpu = figures["direct_rate"][0], figures["direct_cpu"][0]
    rate, cpu = figures[f"{side}_rate"][0], figures[f"{side}_cpu"][0]
    return [
        Row(metric=f"{prefix}_added_p50{suffix}",
            value=percentile(sorted(figures[side]), 50) - base, unit="ms",
            target=ADDED_P50_MS if targeted else None, decimals=2),
        Row(metric=f"{prefix}_throughput_ratio{suffix}", value=rate / d_rate if d_rate else 0.0,
            unit="x", target=RATIO if targeted else None, decimals=2),
        Row(metric=f"{prefix}_cpu_vs_upstream{suffix}", value=cpu / up_cpu if up_cpu else 0.0,
            unit="x", target=CPU_VS_UPSTREAM if targeted else None, decimals=2),
    ]


def _sdk1(python: str, sides: dict[str, Served], token: str, sizes: Sizes,
          env: dict[str, str]) -> dict[str, list[float]]:
    """The 1.x SDK's client, in its venv, measuring both sides; figures as ``_measure``'s."""
    spec = {"sides": {name: {"url": f"{s.base}/mcp", "tool": TOOLS[name],
                             "token": token if name == "governed" else None,
                             "pids": [s.pid]} for name, s in sides.items()},
            "blocks": sizes.blocks, "per_block": max(10, sizes.block_calls // 5),
            "warmup": max(20, sizes.warmup // 20), "seconds": sizes.duration_s,
            "in_flight": IN_FLIGHT, "budget_s": sizes.budget_s}
    timeout = sizes.budget_s + 4 * sizes.duration_s + 120
    try:
        out = subprocess.run([python, "-P", str(sdk1_client.__file__), json.dumps(spec)],
                             capture_output=True, text=True, timeout=timeout, env=env)
    except subprocess.TimeoutExpired:
        raise BenchError(f"the 1.x SDK client did not finish within {timeout:g} s") from None
    if out.returncode != 0:
        raise BenchError(f"the 1.x SDK client failed:\n{out.stderr[-2000:]}")
    doc: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    figures: dict[str, list[float]] = {}
    for name, side in doc.items():
        figures[name] = side["latencies_ms"]
        figures[f"{name}_rate"] = [side["rate"]]
        figures[f"{name}_cpu"] = [side["cpu_ms_per_call"]]
    return figures



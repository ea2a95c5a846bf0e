"""The client users run today, for the MCP benchmark's ``mcp_sdk1`` rows: the 1.x SDK's
``ClientSession`` over streamable HTTP (a 2025-11-25 session), calling one tool directly
and through toolkeeper in the same run.

``python -P sdk1_client.py SPEC`` with the interpreter of ``.venv-handshake-peers/mcp1``;
SPEC is JSON: ``{"sides": {name: {"url", "tool", "token", "pids"}}, "blocks", "per_block",
"warmup", "seconds", "in_flight", "budget_s"}``. Prints one JSON line: per side its
sequential latencies (ms, blocks in rotating order), its calls/s with ``in_flight`` calls in
flight for ``seconds``, and the CPU seconds its ``pids`` (and their descendants) spent in
that window. Imports nothing of toolkeeper; every wait bounded.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

CALL_TIMEOUT_S = 30.0


def _cpu_reader() -> Callable[..., float]:
    """``toolkeeper.bench.proc_cpu.cpu_seconds``, loaded by its path beside this file."""
    spec = importlib.util.spec_from_file_location("proc_cpu",
                                                  Path(__file__).with_name("proc_cpu.py"))
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    reader: Callable[..., float] = module.cpu_seconds
    return reader


cpu_seconds = _cpu_reader()


async def _call(session: Any, tool: str, x: int) -> None:
    result = await asyncio.wait_for(session.call_tool(tool, {"x": x}), CALL_TIMEOUT_S)
    if result.isError or result.content[0].text != f"pure {x}":
        raise RuntimeError(f"{tool} answered {result.content}")


async def _rate(session: Any, tool: str, seconds: float, in_flight: int) -> tuple[float, int]:
    done, stop = 0, time.monotonic() + seconds

    async def worker() -> None:
        nonlocal done
        while time.monotonic() < stop:
            await _call(session, tool, done)
            done += 1

    started = time.monotonic()
    await asyncio.wait_for(asyncio.gather(*(worker() for _ in range(in_flight))),
                           seconds + 60)
    return done / (time.monotonic() - started), done


async def main(spec: dict[str, Any]) -> dict[str, Any]:
    from mcp.client.streamable_http import streamablehttp_client

    from mcp import ClientSession

    sides: dict[str, Any] = spec["sides"]
    out: dict[str, Any] = {}
    async with contextlib.AsyncExitStack() as stack:
        sessions = {}
        for name, side in sides.items():
            headers = {"Authorization": f"Bearer {side['token']}"} if side["token"] else None
            read, write, _ = await stack.enter_async_context(
                streamablehttp_client(side["url"], headers=headers))
            session = await stack.enter_async_context(ClientSession(read, write))
            await asyncio.wait_for(session.initialize(), CALL_TIMEOUT_S)
            sessions[name] = session
            for i in range(spec["warmup"]):
                await _call(session, side["tool"], i)
            out[name] = {"latencies_ms": []}
        order = list(sessions)
        deadline = time.monotonic() + spec["budget_s"]
        for block in range(spec["blocks"]):
            shift = block % len(order)
            for name in order[shift:] + order[:shift]:
                for i in range(spec["per_block"]):
                    t0 = time.perf_counter_ns()
                    await _call(sessions[name], sides[name]["tool"], i)
                    out[name]["latencies_ms"].append((time.perf_counter_ns() - t0) / 1e6)
            if time.monotonic() > deadline:
                break
        for name, session in sessions.items():
            cpu0 = cpu_seconds(*sides[name]["pids"])
            rate, calls = await _rate(session, sides[name]["tool"], spec["seconds"],
                                      spec["in_flight"])
            out[name]["rate"] = rate
            out[name]["cpu_ms_per_call"] = (
                (cpu_seconds(*sides[name]["pids"]) - cpu0) * 1000 / max(calls, 1))
    return out


if __name__ == "__main__":
    print(json.dumps(asyncio.run(main(json.loads(sys.argv[1])))), flush=True)

"""Issue 26: the start-up cost of the OS sandbox, per command.

``/usr/bin/true`` started three ways in the same run, in interleaved blocks (the order
rotating each round, so machine noise hits every side): ``direct`` (a bare
``asyncio.create_subprocess_exec``), ``unsandboxed`` (the ``shell`` built-in's runner with
the operator's opt-out, as where no sandbox exists) and ``sandboxed`` (the same runner in
bubblewrap, as shipped). The ratios are sandboxed over direct and over unsandboxed.
"""

from __future__ import annotations

import asyncio
import logging
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

from toolkeeper.bench.model import BenchError, BenchResult, Row, Sizes, percentile
from toolkeeper.builtins._shell_process import Plan, run
from toolkeeper.sandbox import BWRAP, Sandbox, probe

NAME = "sandbox"
_TRUE = "/usr/bin/true"
_SIDES = ("direct", "unsandboxed", "sandboxed")
Start = Callable[[], Awaitable[None]]


def bench_sandbox(sizes: Sizes) -> BenchResult:
    """Per-command start-up: direct vs the shell runner unsandboxed vs sandboxed."""
    why = probe(BWRAP)
    if why is not None:
        raise BenchError(f"no sandbox to measure: {why}")
    calls = max(10, sizes.block_calls // 10)  # a command costs ms, not µs like a call
    with tempfile.TemporaryDirectory(prefix="toolkeeper-bench-") as tmp:
        starts = _starts(Path(tmp))
        quiet = logging.getLogger("toolkeeper.sandbox")
        was, quiet.disabled = quiet.disabled, True  # the opt-out warns on every command
        try:
            samples, rounds = asyncio.run(_measure(starts, sizes, calls))
        finally:
            quiet.disabled = was
    rows: list[Row] = []
    p50 = {}
    for side in _SIDES:
        ordered = sorted(samples[side])
        p50[side] = percentile(ordered, 50) / 1e6
        rows += [Row(metric=f"sandbox_{side}_p50", value=p50[side], unit="ms", decimals=2),
                 Row(metric=f"sandbox_{side}_p95", value=percentile(ordered, 95) / 1e6,
                     unit="ms", decimals=2)]
    rows += [Row(metric="sandbox_ratio_to_direct_p50",
                 value=p50["sandboxed"] / p50["direct"], unit="x", decimals=2),
             Row(metric="sandbox_ratio_to_unsandboxed_p50",
                 value=p50["sandboxed"] / p50["unsandboxed"], unit="x", decimals=2)]
    notes = [f"{rounds} rounds x 3 blocks of {calls} starts of {_TRUE}, order rotated each "
             "round; warm-up one block each",
             "unsandboxed: the shell runner with TOOLKEEPER_UNSAFE_NO_SANDBOX's behaviour; "
             "sandboxed: bwrap + prlimit around the same program (toolkeeper.sandbox)"]
    return BenchResult(name=NAME, title="sandbox start-up cost per command (issue 26)",
                       rows=rows, notes=notes)


def _starts(root: Path) -> dict[str, Start]:
    plan = Plan(argv=(_TRUE,), cwd=root, env={"PATH": "/usr/bin:/bin"}, writable=False)
    off, on = Sandbox(bwrap="/nonexistent/bwrap", unsafe_off=True), Sandbox()

    async def direct() -> None:
        proc = await asyncio.create_subprocess_exec(_TRUE, cwd=root, env=plan.env,
                                                    start_new_session=True)
        if await proc.wait() != 0:
            raise BenchError(f"{_TRUE} failed")

    def runner(sandbox: Sandbox) -> Start:
        async def start() -> None:
            done = await run(plan, timeout_s=30, stdout_cap=1024, stderr_cap=1024,
                             sandbox=sandbox)
            if done.exit_code != 0:
                raise BenchError(f"{_TRUE} failed: {done.stderr[:200]!r}")
        return start
    return {"direct": direct, "unsandboxed": runner(off), "sandboxed": runner(on)}


async def _measure(starts: dict[str, Start], sizes: Sizes,
                   calls: int) -> tuple[dict[str, list[int]], int]:
    samples: dict[str, list[int]] = {side: [] for side in _SIDES}
    for side in _SIDES:
        await _block(starts[side], calls)
    deadline = time.perf_counter() + sizes.budget_s
    rounds = 0
    for round_no in range(sizes.blocks):
        order = _SIDES[round_no % 3:] + _SIDES[:round_no % 3]
        for side in order:
            samples[side] += await _block(starts[side], calls)
        rounds += 1
        if time.perf_counter() > deadline:
            break
    return samples, rounds


async def _block(start: Start, calls: int) -> list[int]:
    clock = time.perf_counter_ns
    out = []
    for _ in range(calls):
        t0 = clock()
        await start()
        out.append(clock() - t0)
    return out

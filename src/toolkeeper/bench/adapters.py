"""Issue 9: the per-call overhead each framework adapter adds over the bare library call.

The same pure tool (``add``) on the embedded SQLite store, in-process, audit on: the bare
``await gw.call(...)`` beside each adapter's own tool invocation path — the framework tool
object called directly, not a whole agent loop, so the figure is the adapter's cost (and the
framework's tool plumbing it runs through), not a model's. Every call carries the key scheme
the adapters use (``{framework}:{run}:{tool call id}``) and the run as its turn group; the
bare side gets the same shape of key. Blocks of every side alternate in one run, the order
rotated each round, so machine noise lands on all of them. SPEC §10 names no bound here:
figures only. A framework that is not installed is a row saying which extra to install.
"""

from __future__ import annotations

import asyncio
import json
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field, replace
from typing import Any

from toolkeeper.bench.model import BenchError, BenchResult, Row, Sizes, percentile
from toolkeeper.bench.sampling import BlockFn
from toolkeeper.bench.tools import AGENT, open_gateway, sqlite_url
from toolkeeper.gateway import Gateway
from toolkeeper.toolbox import InProcessBackend, Toolbox

NAME = "adapters"
TOOL = "add"
RUN = "bench-run"
"""The run / conversation / thread every adapter call belongs to (and its turn group)."""

BlockMaker = Callable[[Toolbox], Awaitable[BlockFn]]


@dataclass(frozen=True, kw_only=True)
class Side:
    """One adapter's invocation path under measurement."""

    name: str
    """Metric part (``adapters_{name}_p50``)."""
    extra: str
    """The ``toolkeeper[…]`` extra that installs its framework."""
    path: str
    """What one measured call does, for the notes."""
    make: BlockMaker


@dataclass(kw_only=True)
class Interleaved:
    samples: dict[str, list[int]] = field(default_factory=dict)
    flush_ns: int = 0
    rounds: int = 0
    truncated: bool = False


def bench_adapters(sizes: Sizes) -> BenchResult:
    """``gw.call`` vs each installed adapter's tool invocation, one run, interleaved."""
    with tempfile.TemporaryDirectory(prefix="toolkeeper-bench-") as tmp, \
            open_gateway(sqlite_url(tmp)) as gw:
        blocks, skipped, measured = asyncio.run(_measure(gw, sizes))
    rows = _rows(measured, skipped)
    notes = [f"{measured.rounds} rounds x {len(blocks)} blocks of {sizes.block_calls} calls "
             f"(bare + each adapter), order rotated each round; warm-up {sizes.warmup} calls "
             f"each; audit flush after each block: {measured.flush_ns / 1e6:.1f} ms in total",
             "bare: await gw.call('add', …) with key bare:{run}:{call id} and the run as "
             "turn group; the adapters send {framework}:{run}:{call id}"]
    notes += [f"{s.name}: {s.path}" for s in SIDES if s.name in blocks]
    notes += [f"{s.name}: skipped: install toolkeeper[{s.extra}]" for s in SIDES
              if s.name in skipped]
    notes.append("added = adapter - bare at the same percentile; ratio = adapter / bare")
    if measured.truncated:
        notes.append(f"TRUNCATED: time budget {sizes.budget_s:g} s ran out after "
                     f"{measured.rounds} of {sizes.blocks} rounds")
    return BenchResult(name=NAME, title="Adapter overhead over the bare gw.call (issue 9)",
                       rows=rows, notes=notes)


async def _measure(gw: Gateway,
                   sizes: Sizes) -> tuple[dict[str, BlockFn], dict[str, str], Interleaved]:
    blocks, skipped = await _blocks(gw)
    return blocks, skipped, await interleave(blocks, gw.flush, sizes)


async def _blocks(gw: Gateway) -> tuple[dict[str, BlockFn], dict[str, str]]:
    """The bare block and one per installed adapter; ``skipped``: side name -> extra."""
    toolbox = Toolbox(InProcessBackend(gw), agent=AGENT)
    blocks: dict[str, BlockFn] = {"bare": _bare(gw)}
    skipped: dict[str, str] = {}
    for side in SIDES:
        try:
            blocks[side.name] = await side.make(toolbox)
        except ImportError:
            skipped[side.name] = side.extra
    return blocks, skipped


async def interleave(blocks: dict[str, BlockFn], flush: Callable[[], None],
                     sizes: Sizes) -> Interleaved:
    """Warm every side up, then ``sizes.blocks`` rounds of one block per side, the order
    rotated each round; flush audit after each block (not inside any sample)."""
    out = Interleaved(samples={name: [] for name in blocks})
    names = list(blocks)
    for name in names:
        await blocks[name](0, sizes.warmup)
    flush()
    index = sizes.warmup
    deadline = time.perf_counter() + sizes.budget_s
    for round_no in range(sizes.blocks):
        shift = round_no % len(names)
        for name in names[shift:] + names[:shift]:
            out.samples[name].extend(await blocks[name](index, sizes.block_calls))
            t0 = time.perf_counter_ns()
            flush()
            out.flush_ns += time.perf_counter_ns() - t0
        index += sizes.block_calls  # every side sees the same call ids, under its own keys
        out.rounds += 1
        if time.perf_counter() > deadline and round_no + 1 < sizes.blocks:
            out.truncated = True
            break
    return out


def _rows(measured: Interleaved, skipped: dict[str, str]) -> list[Row]:
    p = {name: {q: percentile(sorted(ns), q) / 1000.0 for q in (50, 99)}
         for name, ns in measured.samples.items()}
    bare = p["bare"]
    rows = [Row(metric=f"adapters_bare_p{q}", value=bare[q], unit="us") for q in (50, 99)]
    for side in SIDES:
        if side.name in skipped:
            rows.append(Row(metric=f"adapters_{side.name}_skipped", value=1, decimals=0,
                            unit=f"skipped: install toolkeeper[{side.extra}]"))
            continue
        mine = p[side.name]
        rows += [Row(metric=f"adapters_{side.name}_p{q}", value=mine[q], unit="us")
                 for q in (50, 99)]
        rows += [Row(metric=f"adapters_{side.name}_added_p{q}", value=mine[q] - bare[q],
                     unit="us") for q in (50, 99)]
        rows.append(Row(metric=f"adapters_{side.name}_ratio_p50", value=mine[50] / bare[50],
                        unit="x", decimals=2))
    return rows


def _check(name: str, got: Any, want: int) -> None:
    if got != want:
        raise BenchError(f"{name}: add returned {str(got)[:200]}, expected {want}")


# -- the sides ------------------------------------------------------------------------


def _bare(gw: Gateway) -> BlockFn:
    call = gw.call

    async def block(first: int, count: int) -> list[int]:
        clock = time.perf_counter_ns
        samples = []
        res = None
        for i in range(first, first + count):
            t0 = clock()
            res = await call(TOOL, arguments={"a": 1, "b": i}, agent=AGENT,
                             idempotency_key=f"bare:{RUN}:call-{i}", turn_group_id=RUN)
            samples.append(clock() - t0)
        if res is not None:
            _check("bare", res.output if res.ok else res.to_dict(), first + count)
        return samples

    return block


async def _pydantic_ai(toolbox: Toolbox) -> BlockFn:
    from pydantic_ai import RunContext
    from pydantic_ai.models.test import TestModel
    from pydantic_ai.usage import RunUsage

    from toolkeeper.adapters import pydantic_ai as pai

    toolset = pai.build(toolbox)
    base = RunContext(deps=None, model=TestModel(), usage=RunUsage(), run_id=RUN,
                      conversation_id=RUN, tool_name=TOOL)
    tool = (await toolset.get_tools(base))[TOOL]

    async def block(first: int, count: int) -> list[int]:
        clock = time.perf_counter_ns
        samples = []
        out = None
        for i in range(first, first + count):
            ctx = replace(base, tool_call_id=f"call-{i}")  # the framework's part, untimed
            t0 = clock()
            args = tool.args_validator.validate_python({"a": 1, "b": i})
            out = await toolset.call_tool(TOOL, args, ctx, tool)
            samples.append(clock() - t0)
        _check("pydantic_ai", out, first + count)
        return samples

    return block


async def _openai_agents(toolbox: Toolbox, *, gate: bool) -> BlockFn:
    from agents.tool_context import ToolContext

    from toolkeeper.adapters import openai_agents as oai

    tool = next(t for t in await oai.build_async(toolbox) if t.name == TOOL)
    needs_approval = tool.needs_approval
    if not callable(needs_approval):
        raise BenchError("the OpenAI Agents tool has no needs_approval callable")
    context: dict[str, Any] = {oai.CONTEXT_KEY: {"run_id": RUN, "pending": {}}}

    async def block(first: int, count: int) -> list[int]:
        clock = time.perf_counter_ns
        samples = []
        out = None
        for i in range(first, first + count):
            args = {"a": 1, "b": i}
            args_json = json.dumps(args)  # what the model sent, untimed
            ctx = ToolContext(context, tool_name=TOOL, tool_call_id=f"call-{i}",
                              tool_arguments=args_json)
            t0 = clock()
            if gate and await needs_approval(ctx, args, f"call-{i}"):
                raise BenchError("the pure add was gated")
            out = await tool.on_invoke_tool(ctx, args_json)
            samples.append(clock() - t0)
        _check("openai_agents", json.loads(str(out)), first + count)
        return samples

    return block


async def _openai_agents_gated(toolbox: Toolbox) -> BlockFn:
    return await _openai_agents(toolbox, gate=True)


async def _openai_agents_invoke(toolbox: Toolbox) -> BlockFn:
    return await _openai_agents(toolbox, gate=False)


async def _langchain(toolbox: Toolbox) -> BlockFn:
    from langchain_core.runnables import RunnableConfig

    from toolkeeper.adapters import langchain as lc

    tool = next(t for t in await lc.abuild(toolbox) if t.name == TOOL)
    config = RunnableConfig(configurable={"thread_id": RUN, "turn_group_id": RUN})

    async def block(first: int, count: int) -> list[int]:
        clock = time.perf_counter_ns
        samples = []
        out = None
        for i in range(first, first + count):
            call = {"name": TOOL, "args": {"a": 1, "b": i}, "id": f"call-{i}",
                    "type": "tool_call"}
            t0 = clock()
            out = await tool.ainvoke(call, config)
            samples.append(clock() - t0)
        _check("langchain", json.loads(str(getattr(out, "content", out))), first + count)
        return samples

    return block


SIDES = (
    Side(name="pydantic_ai", extra="pydantic-ai", make=_pydantic_ai,
         path="toolset args_validator.validate_python + call_tool(name, args, ctx, tool)"),
    Side(name="openai_agents", extra="openai-agents", make=_openai_agents_gated,
         path="needs_approval(ctx, args, call_id) + on_invoke_tool(ctx, args_json): what the "
              "SDK runs per call (the gate check submits the call, the invocation re-reads "
              "it under the same key)"),
    Side(name="openai_agents_invoke", extra="openai-agents", make=_openai_agents_invoke,
         path="FunctionTool.on_invoke_tool(ctx, args_json) alone"),
    Side(name="langchain", extra="langchain", make=_langchain,
         path="tool.ainvoke(tool_call, config) (LangChain's callback plumbing included)"),
)

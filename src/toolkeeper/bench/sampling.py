"""Side-by-side sampling: direct and governed blocks alternate within one run and one loop,
so whatever the machine does meanwhile lands on both sides."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from toolkeeper.bench.model import Sizes

BlockFn = Callable[[int, int], Awaitable[list[int]]]
"""``(first_index, count) -> per-call latencies in ns``; index makes arguments unique."""


@dataclass(kw_only=True)
class SideBySide:
    direct_ns: list[int] = field(default_factory=list)
    governed_ns: list[int] = field(default_factory=list)
    governed_wall_ns: int = 0
    """Wall time of the governed blocks including each block's audit flush."""
    flush_ns: int = 0
    rounds: int = 0
    truncated: bool = False
    """The time budget ran out before every round was measured."""
    next_index: int = 0

    @property
    def governed_calls_per_s(self) -> float:
        return len(self.governed_ns) / (self.governed_wall_ns / 1e9)


async def side_by_side(direct: BlockFn, governed: BlockFn, flush: Callable[[], None],
                       sizes: Sizes) -> SideBySide:
    """Warm both sides up, then run ``sizes.blocks`` rounds of one direct and one governed
    block each, swapping which goes first every round; flush audit after governed blocks."""
    out = SideBySide()
    await direct(0, sizes.warmup)
    await governed(0, sizes.warmup)
    flush()
    index = sizes.warmup
    deadline = time.perf_counter() + sizes.budget_s
    for round_no in range(sizes.blocks):
        governed_first = round_no % 2 == 1
        for is_governed in (governed_first, not governed_first):
            if is_governed:
                await _governed_block(out, governed, flush, index, sizes.block_calls)
            else:
                out.direct_ns.extend(await direct(index, sizes.block_calls))
            index += sizes.block_calls
        out.rounds += 1
        if time.perf_counter() > deadline and round_no + 1 < sizes.blocks:
            out.truncated = True
            break
    out.next_index = index
    return out


async def _governed_block(out: SideBySide, governed: BlockFn, flush: Callable[[], None],
                          index: int, count: int) -> None:
    clock = time.perf_counter_ns
    t0 = clock()
    out.governed_ns.extend(await governed(index, count))
    t1 = clock()
    flush()
    t2 = clock()
    out.governed_wall_ns += t2 - t0
    out.flush_ns += t2 - t1


def notes_for(result: SideBySide, sizes: Sizes) -> list[str]:
    notes = [f"{result.rounds} rounds x (direct + governed) blocks of {sizes.block_calls} calls, "
             f"order swapped each round; warm-up {sizes.warmup} calls each side",
             f"audit flush after each governed block: {result.flush_ns / 1e6:.1f} ms in total"]
    if result.truncated:
        notes.append(f"TRUNCATED: time budget {sizes.budget_s:g} s ran out after "
                     f"{result.rounds} of {sizes.blocks} rounds")
    return notes

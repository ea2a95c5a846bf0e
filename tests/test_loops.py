"""The per-thread event loops of the blocking entry points (``toolkeeper.loops``)."""

from __future__ import annotations

import asyncio

from toolkeeper.loops import ThreadLoops


def test_closing_a_threads_loop_cancels_what_it_left_running() -> None:
    """A call can leave work on its thread's loop (an upstream's SSE answer read to the end
    in the background); closing the loop cancels it rather than destroying it pending."""
    loops = ThreadLoops()
    loop = loops.get()

    async def leave() -> asyncio.Task[bool]:
        return asyncio.get_running_loop().create_task(asyncio.Event().wait())

    task = loop.run_until_complete(leave())
    loops.close_current()
    assert loop.is_closed() and task.cancelled()

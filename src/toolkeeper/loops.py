"""One event loop per calling thread, for the gateway's blocking entry points."""

from __future__ import annotations

import asyncio
import threading

from toolkeeper.errors import UserError


class ThreadLoops:
    """Each thread that calls a blocking entry point gets its own loop, reused across calls."""

    def __init__(self) -> None:
        self._local = threading.local()

    def get(self) -> asyncio.AbstractEventLoop:
        """This thread's loop; refused inside a running loop (``await`` the call there)."""
        loop: asyncio.AbstractEventLoop | None = getattr(self._local, "loop", None)
        if loop is None or loop.is_closed():
            try:
                asyncio.get_running_loop()
            except RuntimeError:
                pass
            else:
                raise UserError("call_sync() inside a running event loop: await call() instead")
            loop = self._local.loop = asyncio.new_event_loop()
        return loop

    def close_current(self) -> None:
        """Close this thread's loop if it is idle (on gateway close), its leftover tasks
        cancelled first (an upstream answer still being read in the background: closed
        unfinished, they would be destroyed pending)."""
        loop: asyncio.AbstractEventLoop | None = getattr(self._local, "loop", None)
        if loop is not None and not loop.is_running() and not loop.is_closed():
            left = asyncio.all_tasks(loop)
            for task in left:
                task.cancel()
            if left:  # bounded: a task that swallows its cancellation does not hold close
                loop.run_until_complete(asyncio.wait(left, timeout=2.0))
            loop.close()

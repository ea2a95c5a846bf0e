"""Open 2025-11-25 sessions kept out of the cyclic collector's full collections.

An open session holds a few hundred container objects (its tasks, streams, connection) for
as long as it lives, often hours. CPython's full collection walks every such object each
time: with ten thousand idle sessions, millions of objects and pauses of seconds, during
which no call is served. As ``toolkeeper serve`` does at start-up with what lives as long
as the process, every :data:`FREEZE_EVERY` sessions opened in this process the survivors
are moved to the permanent generation (``gc.freeze()``: the collector no longer walks
them; reference counting still frees what is dropped). What a session leaves behind in
cycles when it ends would stay there, so once the sessions ended since the last thaw reach
a quarter of those open (CPython's own rule for its full collections), everything is given
back to the collector (``gc.unfreeze()``), and no freeze comes before its next full
collection has freed them. (The thaw gives back what start-up froze as well; the next
freeze takes it again.)
"""

from __future__ import annotations

import gc
import logging

log = logging.getLogger("toolkeeper.mcp")
FREEZE_EVERY = 256
"""Sessions opened between two freezes (and the least number of ended sessions that
thaws): a freeze costs a young collection, a few milliseconds."""


class SessionGc:
    """Counts sessions opened and ended in this process and freezes or thaws accordingly."""

    def __init__(self, every: int | None = None) -> None:
        self.every = every or FREEZE_EVERY
        self._opened = 0
        self._ended = 0
        self._thawed_at: int | None = None
        """Full collections done when last thawed, until the next one is done."""

    def opened(self) -> None:
        self._opened += 1
        if self._opened < self.every:
            return
        if self._thawed_at is not None:
            if _full_collections() == self._thawed_at:
                return  # what ended sessions left is not freed yet: not frozen again
            self._thawed_at = None
        self._opened = 0
        gc.collect(1)  # the young generations' garbage is freed, not frozen
        gc.freeze()

    def ended(self, still_open: int) -> None:
        self._ended += 1
        if self._ended >= max(self.every, still_open // 4) and self._thawed_at is None:
            log.debug("%d sessions ended, %d open: thawed for the collector",
                      self._ended, still_open)
            self._ended = 0
            self._thawed_at = _full_collections()
            gc.unfreeze()


def _full_collections() -> int:
    return int(gc.get_stats()[-1]["collections"])

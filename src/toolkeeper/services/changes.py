"""Definition changes: after a write, reload this process's snapshot and tell the others;
many writes in a batch (a config apply, an upstream listing) reload once."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager


class DefinitionChanges:
    """``changed()`` after each definition write; ``batch()`` around many of them. The
    batch is per thread: another thread's writes (an upstream server's re-listing) reload
    as usual."""

    def __init__(self, reload: Callable[[], None], publish: Callable[[], None]) -> None:
        self._reload = reload
        self._publish = publish
        self._local = threading.local()  # per thread: {depth, dirty}

    def changed(self) -> None:
        if getattr(self._local, "depth", 0):
            self._local.dirty = True
            return
        self._reload()
        self._publish()

    @contextmanager
    def batch(self) -> Iterator[None]:
        local = self._local
        local.depth = getattr(local, "depth", 0) + 1
        try:
            yield
        finally:
            local.depth -= 1
            if not local.depth and getattr(local, "dirty", False):
                local.dirty = False
                self.changed()

"""A background job the audit writer's housekeeping starts when it is due: each run on a
thread of its own (a run can take seconds; the housekeeping must not wait), never two at
once, a failure logged and tried again at the next turn."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

log = logging.getLogger("toolkeeper")


class Periodic:
    """``tick()`` starts ``job`` on a thread named ``name`` every ``every_s`` seconds (the
    first ``every_s`` after construction), skipping a turn while the last run goes on.
    ``lock`` is held for each run: take it to run the job inline, or to wait for one."""

    def __init__(self, name: str, every_s: float, job: Callable[[], object], *,
                 what: str) -> None:
        self.name = name
        self.every_s = every_s
        self.lock = threading.Lock()
        self._job = job
        self._what = what
        self._next = time.monotonic() + every_s

    def tick(self) -> None:
        if time.monotonic() < self._next:
            return
        self._next = time.monotonic() + self.every_s
        if self.lock.locked():
            return
        threading.Thread(target=self._run, name=self.name, daemon=True).start()

    def _run(self) -> None:
        with self.lock:
            try:
                self._job()
            except Exception:  # the next turn tries again; the calls never notice
                log.exception("%s failed", self._what)

    def wait_idle(self, timeout_s: float) -> bool:
        """Whether no run is going on (waiting up to ``timeout_s`` for one to end)."""
        if self.lock.acquire(timeout=timeout_s):
            self.lock.release()
            return True
        return False

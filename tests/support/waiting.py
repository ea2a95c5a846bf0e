"""Bounded waits: poll for a condition instead of sleeping for a guessed while."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def wait_until(predicate: Callable[[], T], *, timeout: float = 10.0, what: str,
               interval: float = 0.02,
               ignoring: tuple[type[BaseException], ...] = ()) -> T:
    """``predicate()``'s first truthy value, polled every ``interval`` seconds.

    An exception of a type in ``ignoring`` counts as "not yet"; any other propagates (so a
    predicate can fail fast, e.g. when the process it waits for has exited). After
    ``timeout`` seconds: ``TimeoutError`` saying ``what`` did not happen, and the last
    value or ignored exception seen.
    """
    deadline = time.monotonic() + timeout
    while True:
        last: object
        try:
            value = predicate()
        except ignoring as exc:
            last = exc
        else:
            if value:
                return value
            last = value
        if time.monotonic() >= deadline:
            raise TimeoutError(f"not within {timeout:g} s: {what} (last seen: {last!r})")
        time.sleep(interval)

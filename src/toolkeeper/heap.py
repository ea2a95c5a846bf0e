"""Giving memory a burst freed back to the system.

Python frees the objects of a drained backlog, but glibc keeps the freed pages in its heaps
until told otherwise: a REST worker that queued thousands of calls during a burst stayed
~16 MB larger after they were written. ``malloc_trim(0)`` returns them. glibc only: elsewhere
(musl, macOS) :func:`trim` does nothing.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable


@functools.cache
def _malloc_trim() -> Callable[[int], int] | None:
    """glibc's ``malloc_trim``, looked up once (``None`` where there is none)."""
    if not sys.platform.startswith("linux"):
        return None
    import ctypes  # only when a trim is first due

    try:
        fn: Callable[[int], int] = ctypes.CDLL("libc.so.6").malloc_trim
    except (OSError, AttributeError):  # not glibc
        return None
    return fn


def trim() -> bool:
    """Return free heap memory to the system; ``True`` if the C library can and did (ctypes
    releases the GIL meanwhile: other threads run)."""
    fn = _malloc_trim()
    return fn is not None and bool(fn(0))

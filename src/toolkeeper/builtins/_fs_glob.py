"""Glob patterns of the ``filesystem`` built-in: ``*``, ``?``, ``[...]`` within one path
component and ``**`` for any number of components, matched against root-relative paths."""

from __future__ import annotations

import fnmatch
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass

from toolkeeper.builtins._fs_walk import UNDO_DIR, split

_Segment = re.Pattern[str] | None  # None stands for "**"


@dataclass(frozen=True, slots=True)
class Pattern:
    segments: tuple[_Segment, ...]

    @classmethod
    def parse(cls, pattern: object) -> Pattern:
        """The pattern's components (same refusals as a path: no ``..``, not absolute)."""
        parts = split(pattern)
        return cls(tuple(None if p == "**" else re.compile(fnmatch.translate(p))
                         for p in parts))

    def matches(self, parts: list[str]) -> bool:
        return _match(self.segments, tuple(parts))


def _match(segs: tuple[_Segment, ...], parts: tuple[str, ...]) -> bool:
    if not segs:
        return not parts
    head = segs[0]
    if head is None:
        return any(_match(segs[1:], parts[i:]) for i in range(len(parts) + 1))
    return bool(parts) and head.match(parts[0]) is not None and _match(segs[1:], parts[1:])


def walk(root_fd: int, max_scanned: int) -> Iterator[tuple[list[str], bool] | None]:
    """Every entry below the root as (components, is_directory), links not followed, in
    sorted order; yields ``None`` once and stops when ``max_scanned`` entries were seen."""
    seen = 0
    for dirpath, dirnames, filenames, _fd in os.fwalk(".", dir_fd=root_fd,
                                                      follow_symlinks=False):
        base = [p for p in dirpath.split("/") if p not in ("", ".")]
        if not base and UNDO_DIR in dirnames:
            dirnames.remove(UNDO_DIR)
        dirnames.sort()
        entries = sorted([(d, True) for d in dirnames] + [(f, False) for f in filenames])
        for name, is_dir in entries:
            seen += 1
            if seen > max_scanned:
                yield None
                return
            yield [*base, name], is_dir

"""Identifiers, unique across processes and cheap to make.

Each process draws 64 random bits once and appends a counter: ``os.urandom`` costs tens of
microseconds per call on some virtual machines, far too much for every call and event.
A forked child draws its own bits (``os.register_at_fork``), so it never reuses its
parent's sequence, without a ``getpid`` system call per id.
Ids are not secrets (tenant isolation does not rely on them being unguessable); approval ids
and preview tokens, which are capabilities, use ``secrets`` instead.
"""

from __future__ import annotations

import itertools
import os


class _Sequence:
    """This process's random prefix and counter."""

    __slots__ = ("counter", "prefix")

    def __init__(self) -> None:
        self.prefix = ""
        self.counter = itertools.count(1)
        self.reset()

    def reset(self) -> None:
        self.prefix = os.urandom(8).hex()
        self.counter = itertools.count(1)


_SEQ = _Sequence()
if hasattr(os, "register_at_fork"):  # POSIX; spawned processes import afresh anyway
    os.register_at_fork(after_in_child=_SEQ.reset)


def new_call_id() -> str:
    seq = _SEQ
    return f"{seq.prefix}{next(seq.counter):012x}"


def new_event_id() -> str:
    seq = _SEQ
    return f"e{seq.prefix}{next(seq.counter):012x}"


def new_id(prefix: str = "") -> str:
    seq = _SEQ
    return f"{prefix}{seq.prefix}{next(seq.counter):012x}"

"""Identifiers, unique across processes and cheap to make.

Each process draws 64 random bits once and appends a counter: ``os.urandom`` costs tens of
microseconds per call on some virtual machines, far too much for every call and event.
Ids are not secrets (tenant isolation does not rely on them being unguessable); approval ids
and preview tokens, which are capabilities, use ``secrets`` instead.
"""

from __future__ import annotations

import itertools
import os
import threading

_lock = threading.Lock()
_PID = os.getpid()
_PREFIX = os.urandom(8).hex()
_COUNTER = itertools.count(1)


def _prefix() -> str:
    global _PID, _PREFIX, _COUNTER
    if os.getpid() != _PID:  # forked: a child must not reuse the parent's sequence
        with _lock:
            if os.getpid() != _PID:
                _PID, _PREFIX, _COUNTER = os.getpid(), os.urandom(8).hex(), itertools.count(1)
    return _PREFIX


def new_call_id() -> str:
    return f"{_prefix()}{next(_COUNTER):012x}"


def new_event_id() -> str:
    return f"e{_prefix()}{next(_COUNTER):012x}"


def new_id(prefix: str = "") -> str:
    return f"{prefix}{_prefix()}{next(_COUNTER):012x}"

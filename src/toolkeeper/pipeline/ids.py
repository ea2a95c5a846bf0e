"""Identifiers: call ids are random UUIDs; event ids are cheap and unique per process."""

from __future__ import annotations

import itertools
import os
import uuid

_PREFIX = os.urandom(6).hex()
_COUNTER = itertools.count(1)


def new_call_id() -> str:
    return uuid.uuid4().hex


def new_event_id() -> str:
    # process-random prefix + counter: unique across processes, ~10x cheaper than uuid4.
    return f"{_PREFIX}{next(_COUNTER):010x}"

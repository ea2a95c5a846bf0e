"""What an agent's runtime may decide when new user messages arrive before an irreversible
call (seed 004 §6, §10)."""

from __future__ import annotations

from enum import StrEnum


class SupersedeAction(StrEnum):
    """The decision, and what follows from it for the turn group (and so the keys)."""

    SUPERSEDE = "supersede"
    """Abort the turn: its turn group is superseded, so this and its later irreversible
    calls stop with ``superseded``; the new messages start a new turn."""
    ABSORB = "absorb"
    """Take the new messages into this turn and go on in the same turn group: a re-run of
    the same call (a regenerated answer) dedupes to the first execution."""
    FORCE_COMPLETE = "force_complete"
    """Finish the turn as planned, in the same turn group; the messages wait."""
    QUEUE = "queue"
    """Go on under a new turn group: the call gets new keys, so it may run again even if an
    earlier turn ran it (the new messages asked for it once more)."""

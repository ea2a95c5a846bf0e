"""Single use of MCP ``requestState`` values (``toolkeeper.mcp.request_state``), in the
store every worker and replica shares.

A state's random nonce is inserted when the state comes back; a second insert of the same
nonce fails, so the state is accepted once wherever it arrives. A row is kept until the
state's own expiry — afterwards the state is refused as expired anyway — and expired rows
are deleted by later uses (at most once a minute per process) or :meth:`purge`. Times are
epoch seconds.
"""

from __future__ import annotations

from sqlalchemy import delete, insert
from sqlalchemy.exc import IntegrityError

from toolkeeper.store.db import Database
from toolkeeper.store.schema import request_states as used

PURGE_EVERY_S = 60.0


class RequestStateRepo:
    def __init__(self, db: Database) -> None:
        self._db = db
        self._next_purge = 0.0

    def consume(self, nonce: str, expires_at: float, now: float) -> bool:
        """Mark ``nonce`` used; ``False`` if it was used before (a replay)."""
        if now >= self._next_purge:
            self.purge(now)
        try:
            with self._db.write() as conn:
                conn.execute(insert(used).values(nonce=nonce, expires_at=expires_at))
        except IntegrityError:
            return False
        return True

    def purge(self, now: float) -> int:
        """Delete the nonces of states that expired; how many went."""
        self._next_purge = now + PURGE_EVERY_S
        with self._db.write() as conn:
            return int(conn.execute(delete(used).where(used.c.expires_at <= now)).rowcount)

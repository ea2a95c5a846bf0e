"""The console's sign-in sessions and sign-ins in progress (single sign-on,
``toolkeeper.identity.sso``), in the store every worker and replica shares.

Only the SHA-256 of a session id (the cookie's value) or of a pre-login id is stored. A
session ends at its idle expiry (moved forward on use) or its absolute expiry, or when
deleted by sign-out; expired rows are deleted by later sign-ins (at most once a minute per
process). Times are epoch seconds of the caller's clock.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from sqlalchemy import Connection, delete, insert, select, update

from toolkeeper.store.db import Database
from toolkeeper.store.schema import console_sessions as sessions
from toolkeeper.store.schema import sso_logins as logins

PURGE_EVERY_S = 60.0


def id_hash(value: str) -> str:
    return hashlib.sha256(value.encode()).hexdigest()


@dataclass(frozen=True, slots=True, kw_only=True)
class SessionRow:
    tenant_id: str
    roles: str
    subject: str
    issuer: str
    name: str
    email: str | None
    csrf: str
    created_at: float
    last_seen: float
    idle_expires_at: float
    expires_at: float


@dataclass(frozen=True, slots=True, kw_only=True)
class LoginRow:
    state: str
    nonce: str
    verifier: str
    expires_at: float


class SessionRepo:
    def __init__(self, db: Database) -> None:
        self._db = db
        self._next_purge = 0.0

    def create(self, session_id: str, row: SessionRow) -> None:
        with self._db.write() as conn:
            conn.execute(insert(sessions).values(id_hash=id_hash(session_id),
                                                 **_fields(row)))
            self._purge(conn, row.created_at)

    def get(self, session_id: str, now: float) -> SessionRow | None:
        """The session, or ``None`` when unknown, signed out or expired at ``now``."""
        c = sessions.c
        q = select(*[getattr(c, f) for f in SessionRow.__slots__]).where(
            c.id_hash == id_hash(session_id))
        with self._db.read() as conn:
            found = conn.execute(q).first()
        if found is None:
            return None
        row = SessionRow(**found._mapping)
        return row if now < row.idle_expires_at and now < row.expires_at else None

    def touch(self, session_id: str, now: float, idle_expires_at: float) -> None:
        with self._db.write() as conn:
            conn.execute(update(sessions).where(
                sessions.c.id_hash == id_hash(session_id)).values(
                last_seen=now, idle_expires_at=idle_expires_at))

    def delete(self, session_id: str) -> bool:
        with self._db.write() as conn:
            res = conn.execute(delete(sessions).where(sessions.c.id_hash == id_hash(session_id)))
            return res.rowcount == 1

    def start_login(self, login_id: str, row: LoginRow, now: float) -> None:
        with self._db.write() as conn:
            conn.execute(insert(logins).values(id_hash=id_hash(login_id), state=row.state,
                                               nonce=row.nonce, verifier=row.verifier,
                                               expires_at=row.expires_at))
            self._purge(conn, now)

    def take_login(self, login_id: str, now: float) -> LoginRow | None:
        """The sign-in in progress, deleted as it is read (a callback gets it once)."""
        key = id_hash(login_id)
        with self._db.write() as conn:
            found = conn.execute(select(logins.c.state, logins.c.nonce, logins.c.verifier,
                                        logins.c.expires_at).where(
                logins.c.id_hash == key)).first()
            if found is None:
                return None
            if conn.execute(delete(logins).where(logins.c.id_hash == key)).rowcount != 1:
                return None
        row = LoginRow(**found._mapping)
        return row if now < row.expires_at else None

    def purge(self, now: float) -> int:
        """Delete every expired session and sign-in; how many sessions went."""
        with self._db.write() as conn:
            return self._purge(conn, now, force=True)

    def _purge(self, conn: Connection, now: float, *, force: bool = False) -> int:
        if not force and now < self._next_purge:
            return 0
        self._next_purge = now + PURGE_EVERY_S
        c = sessions.c
        res = conn.execute(delete(sessions).where(
            (c.expires_at <= now) | (c.idle_expires_at <= now)))
        conn.execute(delete(logins).where(logins.c.expires_at <= now))
        return int(res.rowcount)


def _fields(row: SessionRow) -> dict[str, object]:
    return {f: getattr(row, f) for f in SessionRow.__slots__}

"""Tokens (hashed, revocable), superseded turns, encrypted secret blobs, rate counters."""

from __future__ import annotations

import hashlib
import hmac
import secrets
import time
import uuid

from sqlalchemy import delete, insert, select, update
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert

from toolkeeper.store.changes import bump
from toolkeeper.store.db import Database, as_utc, utcnow
from toolkeeper.store.raw import raw_read
from toolkeeper.store.records import TokenRecord
from toolkeeper.store.schema import rate_counters, secret_blobs, superseded_turns, tokens

TOKEN_PREFIX = "tk_"


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


class TokenRepo:
    """Tokens carry ≥128 random bits (we use 256), are stored only as SHA-256 hashes."""

    def __init__(self, db: Database) -> None:
        self._db = db
        self.generation = 0
        """Moves with every create/revoke made through this object (this process)."""

    def create(self, *, tenant_id: str, role: str, agent: str | None = None,
               label: str = "") -> tuple[TokenRecord, str]:
        token = TOKEN_PREFIX + secrets.token_urlsafe(32)
        rec = TokenRecord(id=str(uuid.uuid4()), tenant_id=tenant_id, role=role, agent=agent,
                          label=label or (agent or role), created_at=utcnow())
        with self._db.write() as conn:
            conn.execute(insert(tokens).values(
                id=rec.id, tenant_id=tenant_id, role=role, agent=agent, label=rec.label,
                hash=hash_token(token), created_at=rec.created_at))
            bump(conn, "tokens")
        self.generation += 1
        return rec, token

    def find(self, token: str) -> TokenRecord | None:
        """Look a presented token up by hash; revoked tokens are not found."""
        wanted = hash_token(token)
        with self._db.read() as conn:
            row = conn.execute(select(tokens).where(tokens.c.hash == wanted)).first()
        if row is None or not hmac.compare_digest(row.hash, wanted) or row.revoked_at:
            return None
        return _token(row._mapping)

    def get(self, token_id: str) -> TokenRecord | None:
        """The token record ``token_id`` (revoked ones too), or ``None``."""
        with self._db.read() as conn:
            row = conn.execute(select(tokens).where(tokens.c.id == token_id)).first()
        return None if row is None else _token(row._mapping)

    def revoke(self, token_id: str) -> bool:
        with self._db.write() as conn:
            res = conn.execute(update(tokens).where(
                tokens.c.id == token_id, tokens.c.revoked_at.is_(None)).values(
                revoked_at=utcnow()))
            bump(conn, "tokens")
        self.generation += 1
        return res.rowcount == 1

    def list(self, tenant_id: str | None = None) -> list[TokenRecord]:
        q = select(tokens)
        if tenant_id:
            q = q.where(tokens.c.tenant_id == tenant_id)
        with self._db.read() as conn:
            return [_token(r._mapping) for r in conn.execute(q.order_by(tokens.c.created_at))]

    def any_admin(self) -> bool:
        with self._db.read() as conn:
            return conn.execute(select(tokens.c.id).where(
                tokens.c.role == "admin", tokens.c.revoked_at.is_(None))).first() is not None


def _token(m: object) -> TokenRecord:
    data = {k: v for k, v in dict(m).items() if k != "hash"}  # type: ignore[call-overload]
    data["created_at"] = as_utc(data["created_at"])
    data["revoked_at"] = as_utc(data["revoked_at"])
    return TokenRecord(**data)


class TurnRepo:
    def __init__(self, db: Database) -> None:
        self._db = db

    def supersede(self, tenant_id: str, turn_group_id: str) -> bool:
        with self._db.write() as conn:
            if conn.execute(select(superseded_turns.c.tenant_id).where(
                    superseded_turns.c.tenant_id == tenant_id,
                    superseded_turns.c.turn_group_id == turn_group_id)).first():
                return False
            conn.execute(insert(superseded_turns).values(
                tenant_id=tenant_id, turn_group_id=turn_group_id, created_at=utcnow()))
            return True

    def is_superseded(self, tenant_id: str, turn_group_id: str) -> bool:
        with raw_read(self._db) as txn:  # on every irreversible call: keep it cheap
            return txn.fetchone("superseded", {"t": tenant_id, "g": turn_group_id}) is not None


class BlobRepo:
    """Implements the secrets ``BlobStore`` protocol: opaque (already encrypted) bytes."""

    def __init__(self, db: Database) -> None:
        self._db = db

    def get_blob(self, name: str) -> bytes | None:
        with self._db.read() as conn:
            row = conn.execute(select(secret_blobs.c.data).where(
                secret_blobs.c.name == name)).first()
        return bytes(row.data) if row else None

    def put_blob(self, name: str, data: bytes) -> None:
        with self._db.write() as conn:
            conn.execute(delete(secret_blobs).where(secret_blobs.c.name == name))
            conn.execute(insert(secret_blobs).values(name=name, data=data))

    def delete_blob(self, name: str) -> None:
        with self._db.write() as conn:
            conn.execute(delete(secret_blobs).where(secret_blobs.c.name == name))

    def list_blobs(self) -> list[tuple[str, bytes]]:
        with self._db.read() as conn:
            rows = conn.execute(select(secret_blobs.c.name, secret_blobs.c.data)).all()
        return [(r.name, bytes(r.data)) for r in rows]


class RateRepo:
    """Fixed-window counters shared by every process on the database."""

    def __init__(self, db: Database) -> None:
        self._db = db

    def hit(self, key: str, limit: int, window_s: float) -> float | None:
        """Count one call; ``None`` if allowed, else seconds until the window resets."""
        now = time.time()
        with self._db.write() as conn:
            # make sure the row exists before locking it: FOR UPDATE locks nothing that is
            # not there, and two first hits would both insert
            ins = (pg_insert if conn.dialect.name == "postgresql" else sqlite_insert)(
                rate_counters)
            conn.execute(ins.values(key=key, window_start=now, count=0)
                         .on_conflict_do_nothing(index_elements=["key"]))
            row = conn.execute(select(rate_counters).where(rate_counters.c.key == key)
                               .with_for_update()).one()._mapping
            # (not ``row.count``: on a Row that is the tuple's count() method)
            if now - row["window_start"] >= window_s:
                conn.execute(update(rate_counters).where(rate_counters.c.key == key).values(
                    window_start=now, count=1))
                return None
            if row["count"] >= limit:
                return max(0.001, float(row["window_start"]) + window_s - now)
            conn.execute(update(rate_counters).where(rate_counters.c.key == key).values(
                count=row["count"] + 1))
            return None

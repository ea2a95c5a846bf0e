"""Agent, approver and admin tokens: ≥128 random bits, stored only as SHA-256 hashes, revocable."""

from __future__ import annotations

import hashlib
import hmac
import secrets
import uuid

from sqlalchemy import insert, select, update

from toolkeeper.store.changes import bump
from toolkeeper.store.db import Database, as_utc, utcnow
from toolkeeper.store.records import TokenRecord
from toolkeeper.store.schema import tokens

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

"""Encrypted secret blobs of the embedded secrets backend (opaque bytes to the store)."""

from __future__ import annotations

from sqlalchemy import delete, insert, select

from toolkeeper.store.db import Database
from toolkeeper.store.schema import secret_blobs


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

"""Retrieval pipelines, their documents and chunks, and full-text search over them.

Every read and write names the pipeline's tenant: another tenant's pipeline is absent here.
Search is the backend's own: SQLite FTS5 ranked by ``bm25()`` (its ``rank``; ``score =
-bm25``), or
PostgreSQL full-text search ranked by ``ts_rank_cd``; on both a higher score is better.
The caller hands over plain terms; they are quoted here, never parsed as query syntax.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, delete, func, or_, select, text
from sqlalchemy.exc import IntegrityError

from toolkeeper.store.db import Database, as_utc, utcnow
from toolkeeper.store.schema import retrieval_chunks as chunks
from toolkeeper.store.schema import retrieval_documents as documents
from toolkeeper.store.schema import retrieval_pipelines as pipelines

Scalar = str | int | float | bool


@dataclass(frozen=True, slots=True)
class PipelineRow:
    id: str
    tenant_id: str
    name: str
    description: str
    chunk_chars: int
    chunk_overlap: int
    created_at: datetime
    documents: int = 0
    chunks: int = 0


@dataclass(frozen=True, slots=True)
class NewDocument:
    """A document ready to store: its chunks already cut."""

    source: str
    metadata: Mapping[str, Any]
    content_hash: str
    chunks: Sequence[str]


@dataclass(frozen=True, slots=True)
class DocumentRow:
    id: str
    pipeline_id: str
    source: str
    metadata: dict[str, Any]
    content_hash: str
    chunks: int
    created_at: datetime


class PipelineNameTaken(Exception):
    """The tenant already has a pipeline by that name."""


def new_id(prefix: str, order: int | None = None) -> str:
    """A unique id; with ``order`` (e.g. nanoseconds) ids sort in that order."""
    stamp = "" if order is None else f"{order:016x}"
    return prefix + stamp + uuid.uuid4().hex[:32 - len(stamp)]


class RetrievalRepo:
    """The ``retrieval_*`` tables and the backend's full-text index."""

    def __init__(self, db: Database) -> None:
        self._db = db

    def create(self, tenant_id: str, name: str, description: str, chunk_chars: int,
               chunk_overlap: int) -> PipelineRow:
        row = PipelineRow(id=new_id("rp_"), tenant_id=tenant_id, name=name,
                          description=description, chunk_chars=chunk_chars,
                          chunk_overlap=chunk_overlap, created_at=utcnow())
        try:
            with self._db.write() as conn:
                conn.execute(pipelines.insert().values(
                    id=row.id, tenant_id=tenant_id, name=name, description=description,
                    chunk_chars=chunk_chars, chunk_overlap=chunk_overlap,
                    created_at=row.created_at))
        except IntegrityError:
            raise PipelineNameTaken(name) from None
        return row

    def pipelines(self, tenant_id: str) -> list[PipelineRow]:
        with self._db.read() as conn:
            rows = conn.execute(select(pipelines).where(
                pipelines.c.tenant_id == tenant_id).order_by(pipelines.c.name)).all()
            return [self._row(conn, r) for r in rows]

    def get(self, tenant_id: str, ref: str) -> PipelineRow | None:
        """The tenant's pipeline whose id (else name) is ``ref``."""
        with self._db.read() as conn:
            rows = conn.execute(select(pipelines).where(
                pipelines.c.tenant_id == tenant_id,
                or_(pipelines.c.id == ref, pipelines.c.name == ref))).all()
            found = sorted(rows, key=lambda r: r.id != ref)
            return self._row(conn, found[0]) if found else None

    def find(self, tenant_id: str, ref: str) -> str | None:
        """The id of the tenant's pipeline whose id (else name) is ``ref`` (no counts)."""
        with self._db.read() as conn:
            ids = conn.execute(select(pipelines.c.id).where(
                pipelines.c.tenant_id == tenant_id,
                or_(pipelines.c.id == ref, pipelines.c.name == ref))).scalars().all()
        return (ref if ref in ids else ids[0]) if ids else None

    @staticmethod
    def _row(conn: Connection, r: Any) -> PipelineRow:
        docs = conn.execute(select(func.count()).select_from(documents).where(
            documents.c.pipeline_id == r.id)).scalar_one()
        count = conn.execute(select(func.count()).select_from(chunks).where(
            chunks.c.pipeline_id == r.id)).scalar_one()
        return PipelineRow(id=r.id, tenant_id=r.tenant_id, name=r.name,
                           description=r.description, chunk_chars=r.chunk_chars,
                           chunk_overlap=r.chunk_overlap,
                           created_at=as_utc(r.created_at) or r.created_at,
                           documents=int(docs), chunks=int(count))

    def delete(self, tenant_id: str, pipeline_id: str) -> bool:
        """Drop the pipeline with its documents and chunks (one transaction)."""
        with self._db.write() as conn:
            owned = select(pipelines.c.id).where(pipelines.c.tenant_id == tenant_id,
                                                 pipelines.c.id == pipeline_id)
            conn.execute(delete(chunks).where(chunks.c.pipeline_id.in_(owned)))
            conn.execute(delete(documents).where(documents.c.pipeline_id.in_(owned)))
            res = conn.execute(delete(pipelines).where(pipelines.c.tenant_id == tenant_id,
                                                       pipelines.c.id == pipeline_id))
        return res.rowcount == 1

    def add_documents(self, pipeline_id: str, docs: Sequence[NewDocument]) -> list[DocumentRow]:
        """Store every document and its chunks in one transaction: all or nothing."""
        now, out, start = utcnow(), [], time.time_ns()
        with self._db.write() as conn:
            for i, doc in enumerate(docs):
                row = DocumentRow(id=new_id("rd_", start + i), pipeline_id=pipeline_id,
                                  source=doc.source, metadata=dict(doc.metadata),
                                  content_hash=doc.content_hash, chunks=len(doc.chunks),
                                  created_at=now)
                conn.execute(documents.insert().values(
                    id=row.id, pipeline_id=pipeline_id, source=doc.source,
                    metadata=row.metadata, content_hash=doc.content_hash, created_at=now))
                if doc.chunks:
                    conn.execute(chunks.insert(), [
                        {"pipeline_id": pipeline_id, "document_id": row.id, "ordinal": i,
                         "text": piece, "metadata": row.metadata}
                        for i, piece in enumerate(doc.chunks)])
                out.append(row)
        return out

    def documents(self, pipeline_id: str) -> list[DocumentRow]:
        count = select(func.count()).select_from(chunks).where(
            chunks.c.document_id == documents.c.id).scalar_subquery()
        with self._db.read() as conn:
            rows = conn.execute(select(documents, count.label("n")).where(
                documents.c.pipeline_id == pipeline_id).order_by(documents.c.id)).all()
        return [DocumentRow(id=r.id, pipeline_id=r.pipeline_id, source=r.source,
                            metadata=dict(r.metadata), content_hash=r.content_hash,
                            chunks=int(r.n), created_at=as_utc(r.created_at) or r.created_at)
                for r in rows]

    def delete_document(self, pipeline_id: str, document_id: str) -> bool:
        with self._db.write() as conn:
            conn.execute(delete(chunks).where(chunks.c.pipeline_id == pipeline_id,
                                              chunks.c.document_id == document_id))
            res = conn.execute(delete(documents).where(documents.c.pipeline_id == pipeline_id,
                                                       documents.c.id == document_id))
        return res.rowcount == 1

    def search(self, pipeline_id: str, terms: Sequence[str], top_k: int,
               filters: Mapping[str, Scalar]) -> list[dict[str, Any]]:
        """The ``top_k`` best chunks matching any of ``terms`` (plain words) and every
        metadata filter, best first: ``{text, score, source, document_id, metadata}``."""
        if not terms or top_k < 1:
            return []
        params: dict[str, Any] = {"p": pipeline_id, "k": top_k}
        if self._db.is_sqlite:
            sql = _SQLITE_SEARCH
            params["q"] = " OR ".join(f'"{t}"' for t in terms)
        else:
            sql = _PG_SEARCH
            params["q"] = " or ".join(terms)
        where = [_filter_sql(self._db.is_sqlite, i, key, value, params)
                 for i, (key, value) in enumerate(sorted(filters.items()))]
        sql = sql.replace("{filters}", "".join(f" AND {w}" for w in where))
        with self._db.read() as conn:
            rows = conn.execute(text(sql), params).all()
        return [{"text": r.text, "score": round(float(r.score), 6), "source": r.source,
                 "document_id": r.document_id,
                 "metadata": r.metadata if isinstance(r.metadata, dict)
                 else json.loads(r.metadata)} for r in rows]


_SQLITE_SEARCH = (  # rank and cut first; read texts and sources of the top k only
    "WITH top AS (SELECT c.id AS id, retrieval_fts.rank AS rank FROM retrieval_fts "
    "JOIN retrieval_chunks c ON c.id = retrieval_fts.rowid "
    "WHERE retrieval_fts MATCH :q AND c.pipeline_id = :p{filters} "
    "ORDER BY retrieval_fts.rank, c.id LIMIT :k) "
    "SELECT c.text, -top.rank AS score, d.source, c.document_id, c.metadata "
    "FROM top JOIN retrieval_chunks c ON c.id = top.id "
    "JOIN retrieval_documents d ON d.id = c.document_id ORDER BY top.rank, c.id")
_PG_SEARCH = (
    "SELECT c.text, ts_rank_cd(c.tsv, q) AS score, d.source, c.document_id, c.metadata "
    "FROM retrieval_chunks c JOIN retrieval_documents d ON d.id = c.document_id, "
    "websearch_to_tsquery('english', :q) AS q "
    "WHERE c.tsv @@ q AND c.pipeline_id = :p{filters} "
    "ORDER BY score DESC, c.id LIMIT :k")


def _filter_sql(sqlite: bool, i: int, key: str, value: Scalar,
                params: dict[str, Any]) -> str:
    """Equality of metadata ``key`` with ``value``, type included (``1`` is not ``true``).
    ``key`` is bound as a parameter (the caller checked its characters too)."""
    params[f"fk{i}"], params[f"fv{i}"] = key, value
    if not sqlite:
        params[f"fv{i}"] = json.dumps(value)
        return f"(CAST(c.metadata AS jsonb) -> :fk{i}) = CAST(:fv{i} AS jsonb)"
    params[f"fk{i}"] = f'$."{key}"'
    kind = ("'true', 'false'" if isinstance(value, bool) else
            "'integer', 'real'" if isinstance(value, int | float) else "'text'")
    if isinstance(value, bool):
        params[f"fv{i}"] = int(value)
    return (f"(json_type(c.metadata, :fk{i}) IN ({kind}) "
            f"AND json_extract(c.metadata, :fk{i}) = :fv{i})")

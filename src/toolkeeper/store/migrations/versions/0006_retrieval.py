"""retrieval pipelines, documents and chunks with the backend's full-text index

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-24

Retrieval pipelines were names in the settings ``retrieval_pipelines:{tenant}``. Each name
becomes a pipeline row of its tenant (named so, with a new id; tools naming it keep working:
a pipeline is found by id or name within the tenant) and the settings are dropped. Chunks
are indexed by SQLite FTS5 (``retrieval_fts``, external content, kept in step by triggers)
or by a PostgreSQL generated ``tsvector`` column with a GIN index.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

import sqlalchemy as sa
from alembic import op

revision = '0006'
down_revision = '0005'
branch_labels = None
depends_on = None

PREFIX = "retrieval_pipelines:"
_settings = sa.table("settings", sa.column("key", sa.String), sa.column("value", sa.JSON),
                     sa.column("updated_at", sa.DateTime(timezone=True)))
_pipelines = sa.table("retrieval_pipelines", sa.column("id", sa.String),
                      sa.column("tenant_id", sa.String), sa.column("name", sa.String),
                      sa.column("description", sa.Text), sa.column("chunk_chars", sa.Integer),
                      sa.column("chunk_overlap", sa.Integer),
                      sa.column("created_at", sa.DateTime(timezone=True)))

_SQLITE_INDEX = [
    "CREATE VIRTUAL TABLE retrieval_fts USING fts5(text, content='retrieval_chunks', "
    "content_rowid='id', tokenize='porter unicode61')",
    "CREATE TRIGGER retrieval_chunks_ai AFTER INSERT ON retrieval_chunks BEGIN "
    "INSERT INTO retrieval_fts(rowid, text) VALUES (new.id, new.text); END",
    "CREATE TRIGGER retrieval_chunks_ad AFTER DELETE ON retrieval_chunks BEGIN "
    "INSERT INTO retrieval_fts(retrieval_fts, rowid, text) VALUES ('delete', old.id, old.text);"
    " END",
]
_PG_INDEX = [
    "ALTER TABLE retrieval_chunks ADD COLUMN tsv tsvector "
    "GENERATED ALWAYS AS (to_tsvector('english', text)) STORED",
    "CREATE INDEX ix_retrieval_chunks_tsv ON retrieval_chunks USING GIN (tsv)",
]


def upgrade() -> None:
    op.create_table('retrieval_pipelines',
    sa.Column('id', sa.String(length=64), nullable=False),
    sa.Column('tenant_id', sa.String(length=64), nullable=False),
    sa.Column('name', sa.String(length=200), nullable=False),
    sa.Column('description', sa.Text(), nullable=False),
    sa.Column('chunk_chars', sa.Integer(), nullable=False),
    sa.Column('chunk_overlap', sa.Integer(), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.PrimaryKeyConstraint('id'),
    sa.UniqueConstraint('tenant_id', 'name', name='uq_retrieval_pipelines_tenant_name')
    )
    op.create_table('retrieval_documents',
    sa.Column('id', sa.String(length=64), nullable=False),
    sa.Column('pipeline_id', sa.String(length=64), nullable=False),
    sa.Column('source', sa.String(length=1000), nullable=False),
    sa.Column('metadata', sa.JSON(), nullable=False),
    sa.Column('content_hash', sa.String(length=80), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['pipeline_id'], ['retrieval_pipelines.id'], ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id')
    )
    op.create_index(op.f('ix_retrieval_documents_pipeline_id'), 'retrieval_documents',
                    ['pipeline_id'], unique=False)
    op.create_table('retrieval_chunks',
    sa.Column('id', sa.Integer(), autoincrement=True, nullable=False),
    sa.Column('pipeline_id', sa.String(length=64), nullable=False),
    sa.Column('document_id', sa.String(length=64), nullable=False),
    sa.Column('ordinal', sa.Integer(), nullable=False),
    sa.Column('text', sa.Text(), nullable=False),
    sa.Column('metadata', sa.JSON(), nullable=False),
    sa.ForeignKeyConstraint(['document_id'], ['retrieval_documents.id'], ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id')
    )
    op.create_index(op.f('ix_retrieval_chunks_document_id'), 'retrieval_chunks',
                    ['document_id'], unique=False)
    op.create_index(op.f('ix_retrieval_chunks_pipeline_id'), 'retrieval_chunks',
                    ['pipeline_id'], unique=False)
    conn = op.get_bind()
    for statement in _PG_INDEX if conn.dialect.name == "postgresql" else _SQLITE_INDEX:
        op.execute(statement)
    _copy_settings(conn)


def _copy_settings(conn: sa.Connection) -> None:
    """Each pipeline name of the old settings becomes a row of its tenant."""
    now = datetime.now(UTC)
    rows = conn.execute(sa.select(_settings.c.key, _settings.c.value).where(
        _settings.c.key.like(PREFIX + "%"))).all()
    for key, value in rows:
        tenant = key[len(PREFIX):]
        names = dict.fromkeys(str(v)[:200] for v in value or [] if str(v))
        for name in names if tenant else ():
            conn.execute(_pipelines.insert().values(
                id="rp_" + uuid.uuid4().hex, tenant_id=tenant[:64], name=name,
                description="", chunk_chars=800, chunk_overlap=100, created_at=now))
        conn.execute(_settings.delete().where(_settings.c.key == key))


def downgrade() -> None:
    conn = op.get_bind()
    owned: dict[str, list[str]] = {}
    for tenant, name in conn.execute(sa.select(_pipelines.c.tenant_id, _pipelines.c.name)):
        owned.setdefault(tenant, []).append(name)
    if conn.dialect.name != "postgresql":
        op.execute("DROP TRIGGER IF EXISTS retrieval_chunks_ad")
        op.execute("DROP TRIGGER IF EXISTS retrieval_chunks_ai")
        op.execute("DROP TABLE IF EXISTS retrieval_fts")
    op.drop_index(op.f('ix_retrieval_chunks_pipeline_id'), table_name='retrieval_chunks')
    op.drop_index(op.f('ix_retrieval_chunks_document_id'), table_name='retrieval_chunks')
    op.drop_table('retrieval_chunks')
    op.drop_index(op.f('ix_retrieval_documents_pipeline_id'), table_name='retrieval_documents')
    op.drop_table('retrieval_documents')
    op.drop_table('retrieval_pipelines')
    now = datetime.now(UTC)
    for tenant, names in sorted(owned.items()):  # the names survive; documents do not
        conn.execute(_settings.insert().values(key=PREFIX + tenant, value=names,
                                               updated_at=now))

"""the recent-calls log's ids are 64-bit on PostgreSQL

Revision ID: 0014
Revises: 0013
Create Date: 2026-11-28

``recent_calls.id`` was a ``serial`` (32-bit) on PostgreSQL: its ids grow with every call
ever logged (old rows are trimmed, the sequence goes on), so at 1,000 calls a second it ran
out after about 25 days and the log stopped taking calls. The column and its sequence
become 64-bit. SQLite's ``INTEGER PRIMARY KEY`` is its 64-bit rowid already: nothing to do.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = '0014'
down_revision = '0013'
branch_labels = None
depends_on = None


def _postgresql() -> bool:
    return op.get_bind().dialect.name == "postgresql"


def upgrade() -> None:
    if _postgresql():
        op.alter_column('recent_calls', 'id', type_=sa.BigInteger(),
                        existing_type=sa.Integer(), existing_nullable=False)
        op.execute("ALTER SEQUENCE IF EXISTS recent_calls_id_seq AS bigint")


def downgrade() -> None:
    if _postgresql():
        op.execute("ALTER SEQUENCE IF EXISTS recent_calls_id_seq AS integer")
        op.alter_column('recent_calls', 'id', type_=sa.Integer(),
                        existing_type=sa.BigInteger(), existing_nullable=False)

"""retention: audit chains that start after deleted events, finished outcomes by expiry

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-26

Audit retention deletes a chain's oldest events; the head then records where the kept
chain starts (``base_seq``, ``base_hash``: the last deleted event), covered by the head's
MAC when keyed. ``0``/``NULL`` (every existing row) means nothing was deleted. Finished
outcomes get an index by expiry so the sweep that deletes expired ones reads only those.
Downgrading after retention has deleted events drops the base: verify then reports those
chains' first events as missing.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = '0008'
down_revision = '0007'
branch_labels = None
depends_on = None

_FINISHED = sa.text("state IN ('succeeded', 'failed')")


def upgrade() -> None:
    with op.batch_alter_table('audit_heads') as batch:
        batch.add_column(sa.Column('base_seq', sa.BigInteger(), nullable=False,
                                   server_default=sa.text('0')))
        batch.add_column(sa.Column('base_hash', sa.String(length=80), nullable=True))
    op.create_index('ix_outcomes_finished_expires', 'outcomes', ['expires_at'], unique=False,
                    sqlite_where=_FINISHED, postgresql_where=_FINISHED)


def downgrade() -> None:
    op.drop_index('ix_outcomes_finished_expires', table_name='outcomes',
                  sqlite_where=_FINISHED, postgresql_where=_FINISHED)
    with op.batch_alter_table('audit_heads') as batch:
        batch.drop_column('base_hash')
        batch.drop_column('base_seq')

"""turn caps and concurrency slots shared by every process

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-01

Per-turn call caps and concurrency groups were counted per process, so each ``serve``
replica allowed the whole cap. Their counters and leases now live here (or in Redis).
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = '0005'
down_revision = '0004'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table('turn_counts',
    sa.Column('key', sa.String(length=512), nullable=False),
    sa.Column('count', sa.Integer(), nullable=False),
    sa.Column('expires_at', sa.Float(), nullable=False),
    sa.PrimaryKeyConstraint('key')
    )
    op.create_index(op.f('ix_turn_counts_expires_at'), 'turn_counts', ['expires_at'],
                    unique=False)
    op.create_table('concurrency_groups',
    sa.Column('key', sa.String(length=512), nullable=False),
    sa.PrimaryKeyConstraint('key')
    )
    op.create_table('concurrency_leases',
    sa.Column('group_key', sa.String(length=512), nullable=False),
    sa.Column('lease_id', sa.String(length=64), nullable=False),
    sa.Column('expires_at', sa.Float(), nullable=False),
    sa.PrimaryKeyConstraint('group_key', 'lease_id')
    )


def downgrade() -> None:
    op.drop_table('concurrency_leases')
    op.drop_table('concurrency_groups')
    op.drop_index(op.f('ix_turn_counts_expires_at'), table_name='turn_counts')
    op.drop_table('turn_counts')

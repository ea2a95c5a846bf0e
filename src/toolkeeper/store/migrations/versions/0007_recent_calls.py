"""recent calls: the last N calls of each tenant, whatever became of them

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-24

One row per finished call (denied, gated, pure or recorded) with its id, time, agent, tool,
action, version, status, reason, duration and trace id; never arguments or outputs. The
gateway keeps at most ``recent_calls_max`` rows per tenant (oldest dropped).
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = '0007'
down_revision = '0006'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table('recent_calls',
    sa.Column('id', sa.Integer(), autoincrement=True, nullable=False),
    sa.Column('tenant_id', sa.String(length=64), nullable=False),
    sa.Column('call_id', sa.String(length=64), nullable=False),
    sa.Column('ts', sa.DateTime(timezone=True), nullable=False),
    sa.Column('agent', sa.String(length=200), nullable=True),
    sa.Column('tool', sa.String(length=200), nullable=False),
    sa.Column('action', sa.String(length=200), nullable=True),
    sa.Column('tool_version', sa.String(length=64), nullable=True),
    sa.Column('status', sa.String(length=32), nullable=False),
    sa.Column('reason', sa.String(length=200), nullable=True),
    sa.Column('duration_ms', sa.Float(), nullable=False),
    sa.Column('trace_id', sa.String(length=200), nullable=True),
    sa.PrimaryKeyConstraint('id')
    )
    op.create_index('ix_recent_calls_tenant_id', 'recent_calls', ['tenant_id', 'id'],
                    unique=False)


def downgrade() -> None:
    op.drop_index('ix_recent_calls_tenant_id', table_name='recent_calls')
    op.drop_table('recent_calls')

"""call-stats rollup for the console's overview; indexes for the overview and a call's story

Revision ID: 0013
Revises: 0012
Create Date: 2026-11-28

``call_stats`` (``toolkeeper.store.stats``) holds counts and duration histograms of
finished calls per tenant, minute and hour, written by the recent-calls writer. The
indexes: approvals by tenant and creation time (covering what the overview reads of
them, so a window's approvals are counted from the index alone), by the
call that asked and the call that ran it, side effects by call (a call's story), and the
outcomes in state ``unknown`` per tenant (partial: only those rows).
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = '0013'
down_revision = '0012'
branch_labels = None
depends_on = None

_UNKNOWN = sa.text("state = 'unknown'")
_HIST = [f"h{i}" for i in range(15)]
_INDEXES = [('ix_approvals_tenant_created', 'approvals',
             ['tenant_id', 'created_at', 'kind', 'status', 'expires_at', 'decided_at']),
            ('ix_approvals_call', 'approvals', ['call_id']),
            ('ix_approvals_consumed_by', 'approvals', ['consumed_by']),
            ('ix_side_effects_call', 'side_effects', ['call_id'])]


def upgrade() -> None:
    op.create_table('call_stats',
    sa.Column('tenant_id', sa.String(length=64), nullable=False),
    sa.Column('resolution', sa.String(length=1), nullable=False),
    sa.Column('bucket_start', sa.BigInteger(), nullable=False),
    sa.Column('tool', sa.String(length=200), nullable=False),
    sa.Column('status', sa.String(length=32), nullable=False),
    sa.Column('reason', sa.String(length=200), nullable=False),
    sa.Column('count', sa.BigInteger(), nullable=False),
    sa.Column('duration_sum', sa.Float(), nullable=False),
    sa.Column('duration_max', sa.Float(), nullable=False),
    *(sa.Column(h, sa.BigInteger(), nullable=False) for h in _HIST),
    sa.PrimaryKeyConstraint('tenant_id', 'resolution', 'bucket_start', 'tool', 'status',
                            'reason', name='pk_call_stats')
    )
    op.create_index('ix_call_stats_age', 'call_stats', ['resolution', 'bucket_start'],
                    unique=False)
    for name, table, columns in _INDEXES:
        op.create_index(name, table, columns, unique=False)
    op.create_index('ix_outcomes_unknown', 'outcomes', ['tenant_id', 'created_at'],
                    unique=False, sqlite_where=_UNKNOWN, postgresql_where=_UNKNOWN)


def downgrade() -> None:
    op.drop_index('ix_outcomes_unknown', table_name='outcomes', sqlite_where=_UNKNOWN,
                  postgresql_where=_UNKNOWN)
    for name, table, _columns in reversed(_INDEXES):
        op.drop_index(name, table_name=table)
    op.drop_index('ix_call_stats_age', table_name='call_stats')
    op.drop_table('call_stats')

"""agent calls in flight: the chain guard's record, shared by every process on the store

Revision ID: 0009
Revises: 0008
Create Date: 2026-11-28

While an ``agent_call`` runs, one row names its callee (tenant, agent) and the chain of
agents it came through, so that a call the callee makes back — in whichever worker or
replica it lands — is checked against that chain. Deleted when the call ends; a row left by
a process that died stops counting at ``expires_at`` (epoch seconds).
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = '0009'
down_revision = '0008'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table('agent_calls_in_flight',
    sa.Column('id', sa.String(length=64), nullable=False),
    sa.Column('tenant_id', sa.String(length=64), nullable=False),
    sa.Column('agent', sa.String(length=200), nullable=False),
    sa.Column('chain', sa.JSON(), nullable=False),
    sa.Column('owner', sa.String(length=200), nullable=False),
    sa.Column('started_at', sa.Float(), nullable=False),
    sa.Column('expires_at', sa.Float(), nullable=False),
    sa.PrimaryKeyConstraint('id')
    )
    op.create_index('ix_agent_calls_in_flight_callee', 'agent_calls_in_flight',
                    ['tenant_id', 'agent'], unique=False)


def downgrade() -> None:
    op.drop_index('ix_agent_calls_in_flight_callee', table_name='agent_calls_in_flight')
    op.drop_table('agent_calls_in_flight')

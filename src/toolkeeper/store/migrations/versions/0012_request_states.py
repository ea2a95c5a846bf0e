"""MCP requestState nonces already used (single use across workers and replicas)

Revision ID: 0012
Revises: 0011
Create Date: 2026-11-28

``request_states`` holds the nonce of each sealed ``requestState`` (multi-round-trip requests
of MCP 2026-07-28) that came back and was accepted, until the state's own expiry.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = '0012'
down_revision = '0011'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table('request_states',
    sa.Column('nonce', sa.String(length=64), nullable=False),
    sa.Column('expires_at', sa.Float(), nullable=False),
    sa.PrimaryKeyConstraint('nonce')
    )
    op.create_index('ix_request_states_expires', 'request_states', ['expires_at'],
                    unique=False)


def downgrade() -> None:
    op.drop_index('ix_request_states_expires', table_name='request_states')
    op.drop_table('request_states')

"""MCP tasks: a governed call answered as a task (the tasks extension, SEP-2663)

Revision ID: 0011
Revises: 0010
Create Date: 2026-11-28

``mcp_tasks`` holds a ``tools/call`` that an MCP client declaring
``io.modelcontextprotocol/tasks`` polls: waiting for an approval or a confirmation, or
running in the background; bound to its tenant and agent, deleted after ``expires_at``.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = '0011'
down_revision = '0010'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table('mcp_tasks',
    sa.Column('id', sa.String(length=64), nullable=False),
    sa.Column('tenant_id', sa.String(length=64), nullable=False),
    sa.Column('agent', sa.String(length=200), nullable=False),
    sa.Column('tool', sa.String(length=200), nullable=False),
    sa.Column('status', sa.String(length=16), nullable=False),
    sa.Column('phase', sa.String(length=16), nullable=False),
    sa.Column('status_message', sa.Text(), nullable=True),
    sa.Column('approval_id', sa.String(length=64), nullable=True),
    sa.Column('request', sa.JSON(), nullable=False),
    sa.Column('input_requests', sa.JSON(), nullable=True),
    sa.Column('result', sa.JSON(), nullable=True),
    sa.Column('error', sa.JSON(), nullable=True),
    sa.Column('poll_ms', sa.Integer(), nullable=False),
    sa.Column('created_at', sa.Float(), nullable=False),
    sa.Column('updated_at', sa.Float(), nullable=False),
    sa.Column('expires_at', sa.Float(), nullable=False),
    sa.Column('lease_until', sa.Float(), nullable=True),
    sa.PrimaryKeyConstraint('id')
    )
    op.create_index('ix_mcp_tasks_expires', 'mcp_tasks', ['expires_at'], unique=False)


def downgrade() -> None:
    op.drop_index('ix_mcp_tasks_expires', table_name='mcp_tasks')
    op.drop_table('mcp_tasks')

"""audit export: a cursor per (sink, tenant chain) and a lease per sink

Revision ID: 0016
Revises: 0015
Create Date: 2026-11-28

``audit_export_cursors`` and ``audit_export_leases`` (``toolkeeper.store.audit_export``)
hold where each configured audit sink stands in each tenant's chain, and which process
ships it (``toolkeeper.services.audit_export``).
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = '0016'
down_revision = '0015'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table('audit_export_cursors',
    sa.Column('sink', sa.String(length=200), nullable=False),
    sa.Column('tenant_key', sa.String(length=64), nullable=False),
    sa.Column('seq', sa.BigInteger(), nullable=False),
    sa.Column('updated_at', sa.DateTime(timezone=True), nullable=False),
    sa.PrimaryKeyConstraint('sink', 'tenant_key')
    )
    op.create_table('audit_export_leases',
    sa.Column('sink', sa.String(length=200), nullable=False),
    sa.Column('holder', sa.String(length=64), nullable=False),
    sa.Column('until', sa.Float(), nullable=False),
    sa.PrimaryKeyConstraint('sink')
    )


def downgrade() -> None:
    op.drop_table('audit_export_leases')
    op.drop_table('audit_export_cursors')

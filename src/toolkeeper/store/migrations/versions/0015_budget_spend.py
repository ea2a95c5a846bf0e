"""budget spend per tenant, budget key and calendar period

Revision ID: 0015
Revises: 0014
Create Date: 2026-11-28

``budget_spend`` (``toolkeeper.store.budgets``) holds the calls charged and their summed
cost per tenant, budget key and period (``d:YYYY-MM-DD`` or ``m:YYYY-MM``), and whether the
period's warning was raised.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = '0015'
down_revision = '0014'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table('budget_spend',
    sa.Column('tenant_id', sa.String(length=64), nullable=False),
    sa.Column('key', sa.String(length=400), nullable=False),
    sa.Column('period', sa.String(length=16), nullable=False),
    sa.Column('calls', sa.BigInteger(), nullable=False),
    sa.Column('cost', sa.Float(), nullable=False),
    sa.Column('warned', sa.Boolean(), nullable=False),
    sa.PrimaryKeyConstraint('tenant_id', 'key', 'period', name='pk_budget_spend')
    )


def downgrade() -> None:
    op.drop_table('budget_spend')

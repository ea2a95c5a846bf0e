"""audit chain heads sealed with the audit key

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-28

Each chain head gets a ``mac`` (HMAC-SHA256 of tenant, seq and hash under the audit key,
which never enters the database). Events need no new column: their ``hash`` names its
algorithm (``sha256:`` before this revision, ``hmac-sha256:`` when keyed).
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = '0003'
down_revision = '0002'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('audit_heads') as batch:
        batch.add_column(sa.Column('mac', sa.String(length=80), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table('audit_heads') as batch:
        batch.drop_column('mac')

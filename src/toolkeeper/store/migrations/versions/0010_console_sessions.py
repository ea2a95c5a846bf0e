"""console single sign-on: sessions, sign-ins in progress, the approver's subject and issuer

Revision ID: 0010
Revises: 0009
Create Date: 2026-11-28

``console_sessions`` holds a signed-in person's session (only a hash of its id) for every
worker and replica; ``sso_logins`` a sign-in started at the identity provider (state, nonce,
PKCE verifier) until its callback. ``approvals`` gains ``decided_by_subject`` and
``decided_by_issuer``: who decided, as their identity provider names them.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = '0010'
down_revision = '0009'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table('console_sessions',
    sa.Column('id_hash', sa.String(length=64), nullable=False),
    sa.Column('tenant_id', sa.String(length=64), nullable=False),
    sa.Column('roles', sa.String(length=200), nullable=False),
    sa.Column('subject', sa.String(length=200), nullable=False),
    sa.Column('issuer', sa.String(length=2000), nullable=False),
    sa.Column('name', sa.String(length=200), nullable=False),
    sa.Column('email', sa.String(length=200), nullable=True),
    sa.Column('csrf', sa.String(length=64), nullable=False),
    sa.Column('created_at', sa.Float(), nullable=False),
    sa.Column('last_seen', sa.Float(), nullable=False),
    sa.Column('idle_expires_at', sa.Float(), nullable=False),
    sa.Column('expires_at', sa.Float(), nullable=False),
    sa.PrimaryKeyConstraint('id_hash')
    )
    op.create_index('ix_console_sessions_expires', 'console_sessions', ['expires_at'],
                    unique=False)
    op.create_table('sso_logins',
    sa.Column('id_hash', sa.String(length=64), nullable=False),
    sa.Column('state', sa.String(length=128), nullable=False),
    sa.Column('nonce', sa.String(length=128), nullable=False),
    sa.Column('verifier', sa.String(length=128), nullable=False),
    sa.Column('expires_at', sa.Float(), nullable=False),
    sa.PrimaryKeyConstraint('id_hash')
    )
    with op.batch_alter_table('approvals') as batch:
        batch.add_column(sa.Column('decided_by_subject', sa.String(length=200), nullable=True))
        batch.add_column(sa.Column('decided_by_issuer', sa.String(length=2000), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table('approvals') as batch:
        batch.drop_column('decided_by_issuer')
        batch.drop_column('decided_by_subject')
    op.drop_table('sso_logins')
    op.drop_index('ix_console_sessions_expires', table_name='console_sessions')
    op.drop_table('console_sessions')

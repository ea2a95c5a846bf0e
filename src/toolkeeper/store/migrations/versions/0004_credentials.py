"""tenant credentials as rows

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-28

Credentials written through REST were platform blobs named ``connector/key`` with their
owner in one JSON setting (``credentials:owners``). Each owned blob becomes a row of its
tenant, and so does each webhook HMAC secret (blob ``webhooks/{tenant}/hmac``, the row
``(tenant, "webhooks", "{tenant}/hmac")``). A migration has no master key, so the
ciphertext moves unchanged: its leading format byte (``0x01``) says it is sealed with the
associated data ``connector/key`` (the gateway re-seals it with the tenant bound on open).
Unowned blobs stay platform secrets. The setting is dropped.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import sqlalchemy as sa
from alembic import op

revision = '0004'
down_revision = '0003'
branch_labels = None
depends_on = None

OWNERS = "credentials:owners"
LEGACY_FORMAT = 1

_settings = sa.table("settings", sa.column("key", sa.String), sa.column("value", sa.JSON),
                     sa.column("updated_at", sa.DateTime(timezone=True)))
_blobs = sa.table("secret_blobs", sa.column("name", sa.String),
                  sa.column("data", sa.LargeBinary))
_rows = sa.table("credentials", sa.column("tenant_id", sa.String),
                 sa.column("connector", sa.String), sa.column("key", sa.String),
                 sa.column("data", sa.LargeBinary),
                 sa.column("updated_at", sa.DateTime(timezone=True)))


def upgrade() -> None:
    op.create_table('credentials',
    sa.Column('tenant_id', sa.String(length=64), nullable=False),
    sa.Column('connector', sa.String(length=200), nullable=False),
    sa.Column('key', sa.String(length=200), nullable=False),
    sa.Column('data', sa.LargeBinary(), nullable=False),
    sa.Column('updated_at', sa.DateTime(timezone=True), nullable=False),
    sa.PrimaryKeyConstraint('tenant_id', 'connector', 'key')
    )
    conn = op.get_bind()
    now = datetime.now(UTC)
    for name, (tenant, connector, key) in sorted(_owned(conn).items()):
        data = conn.execute(sa.select(_blobs.c.data).where(_blobs.c.name == name)).scalar()
        if data is None:  # an owner entry whose blob was already gone
            continue
        conn.execute(_rows.insert().values(tenant_id=tenant, connector=connector, key=key,
                                           data=data, updated_at=now))
        conn.execute(_blobs.delete().where(_blobs.c.name == name))
    conn.execute(_settings.delete().where(_settings.c.key == OWNERS))


def _owned(conn: Any) -> dict[str, tuple[str, str, str]]:
    """Blob name → (tenant, connector, key) of every blob a tenant owns."""
    owners = conn.execute(sa.select(_settings.c.value).where(_settings.c.key == OWNERS))
    moves: dict[str, tuple[str, str, str]] = {}
    for name, tenant in (owners.scalar() or {}).items():
        connector, _, key = str(name).partition("/")
        if connector and key and isinstance(tenant, str) and tenant:
            moves[name] = (tenant, connector, key)
    hooks = conn.execute(sa.select(_blobs.c.name).where(_blobs.c.name.like("webhooks/%/hmac")))
    for (name,) in hooks:
        tenant = name[len("webhooks/"):-len("/hmac")]
        if tenant and "/" not in tenant:
            moves.setdefault(name, (tenant, "webhooks", f"{tenant}/hmac"))
    return moves


def downgrade() -> None:
    # Rows still in the old format go back to blobs and owners; rows sealed since the
    # upgrade bind their tenant, which the old schema cannot express: they are lost.
    conn = op.get_bind()
    owners: dict[str, str] = {}
    for tenant, connector, key, data in conn.execute(sa.select(
            _rows.c.tenant_id, _rows.c.connector, _rows.c.key, _rows.c.data)):
        if bytes(data)[:1] != bytes([LEGACY_FORMAT]):
            continue
        name = f"{connector}/{key}"
        conn.execute(_blobs.delete().where(_blobs.c.name == name))
        conn.execute(_blobs.insert().values(name=name, data=data))
        if connector != "webhooks" or key != f"{tenant}/hmac":
            owners[name] = tenant
    if owners:
        conn.execute(_settings.insert().values(key=OWNERS, value=owners,
                                               updated_at=datetime.now(UTC)))
    op.drop_table('credentials')

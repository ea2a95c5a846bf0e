"""The console's sessions in the store (migration 0010): only a hash of the id, expiry by
the caller's clock, sign-out and the sweep delete, a sign-in in progress is taken once; the
migration adds and removes its tables and the approver's subject and issuer columns."""

from __future__ import annotations

import pytest

from toolkeeper.store import Store
from toolkeeper.store.sessions import LoginRow, SessionRow, id_hash


def _row(now: float, *, idle: float = 100, absolute: float = 150) -> SessionRow:
    return SessionRow(tenant_id="t1", roles="approver", subject="dana", issuer="https://idp",
                      name="Dana", email=None, csrf="c" * 43, created_at=now, last_seen=now,
                      idle_expires_at=now + idle, expires_at=now + absolute)


def test_a_session_lives_until_idle_or_absolute_expiry_and_sign_out(db_url: str) -> None:
    store = Store.open(db_url)
    try:
        repo = store.sessions
        repo.create("sid-1", _row(1000.0))
        assert repo.get("sid-1", 1050.0) is not None
        assert repo.get("sid-1", 1100.0) is None  # idle
        repo.touch("sid-1", 1090.0, 1150.0)
        assert repo.get("sid-1", 1149.0) is not None
        assert repo.get("sid-1", 1150.0) is None  # absolute
        assert repo.get("sid-2", 1000.0) is None
        with store.db.read() as conn:
            ids = [r[0] for r in conn.exec_driver_sql("select id_hash from console_sessions")]
        assert ids == [id_hash("sid-1")] and "sid-1" not in ids
        assert repo.delete("sid-1") and repo.get("sid-1", 1000.0) is None
        repo.create("sid-3", _row(2000.0))
        assert repo.purge(2200.0) == 1
    finally:
        store.close()


def test_a_sign_in_in_progress_is_taken_once_and_not_after_it_expires(db_url: str) -> None:
    store = Store.open(db_url)
    try:
        row = LoginRow(state="s", nonce="n", verifier="v", expires_at=1600.0)
        store.sessions.start_login("login-1", row, 1000.0)
        assert store.sessions.take_login("login-1", 1001.0) == row
        assert store.sessions.take_login("login-1", 1001.0) is None
        store.sessions.start_login("login-2", row, 1000.0)
        assert store.sessions.take_login("login-2", 1600.0) is None
    finally:
        store.close()


@pytest.mark.empty_database
def test_migration_0010_adds_sessions_and_approver_identity_and_downgrades(db_url: str) -> None:
    from alembic import command
    from sqlalchemy import create_engine, inspect

    from toolkeeper.store.migrate import alembic_config, current, upgrade

    def shape() -> tuple[set[str], set[str]]:
        engine = create_engine(db_url)
        try:
            found = inspect(engine)
            return (set(found.get_table_names()),
                    {c["name"] for c in found.get_columns("approvals")})
        finally:
            engine.dispose()

    upgrade(db_url, "0010")
    tables, columns = shape()
    assert {"console_sessions", "sso_logins"} <= tables
    assert {"decided_by_subject", "decided_by_issuer"} <= columns
    command.downgrade(alembic_config(db_url), "0009")
    tables, columns = shape()
    assert current(db_url) == "0009" and "console_sessions" not in tables
    assert "decided_by_subject" not in columns
    upgrade(db_url)
    assert current(db_url) >= "0010"  # later migrations may follow

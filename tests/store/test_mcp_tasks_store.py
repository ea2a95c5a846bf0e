"""MCP tasks in the store (migration 0011): found only with their tenant and agent and
until they expire; a call claimed once (again only after its lease ran out); a terminal
status never left; the expired ones purged; the migration adds and removes the table."""

from __future__ import annotations

from typing import Any

import pytest

from tests.support.migrations import table_names
from toolkeeper.store import Store
from toolkeeper.store.mcp_tasks import TaskRow


def _row(task_id: str, now: float, **kw: Any) -> TaskRow:
    base: dict[str, Any] = dict(
        id=task_id, tenant_id="t1", agent="bot", tool="pay", status="working",
        phase="approval", status_message="waiting", approval_id="ap_1",
        request={"tool": "pay", "arguments": {"amount": 5}}, input_requests=None,
        result=None, error=None, poll_ms=500, created_at=now, updated_at=now,
        expires_at=now + 100, lease_until=None)
    return TaskRow(**{**base, **kw})


def test_a_task_is_its_agents_claimed_once_and_terminal_for_good(db_url: str) -> None:
    store = Store.open(db_url)
    try:
        repo = store.mcp_tasks
        repo.create(_row("tsk_1", 1000.0))
        assert repo.get("tsk_1", "t1", "bot", 1050.0) is not None
        for tenant, agent in (("t2", "bot"), ("t1", "other")):
            assert repo.get("tsk_1", tenant, agent, 1050.0) is None
        assert repo.get("tsk_1", "t1", "bot", 1100.0) is None  # expired
        assert [repo.claim("tsk_1", ("approval",), 1010.0, 30.0) for _ in range(2)] == \
            [True, False]
        assert not repo.claim("tsk_1", ("approval",), 1030.0, 30.0)  # the lease holds
        assert repo.claim("tsk_1", ("approval",), 1041.0, 30.0)  # a dead runner's lease
        assert repo.finish("tsk_1", 1042.0, status="completed", message="succeeded",
                           result={"content": [], "isError": False})
        done = repo.get("tsk_1", "t1", "bot", 1050.0)
        assert done is not None and (done.status, done.phase) == ("completed", "done")
        assert not repo.cancel("tsk_1", 1043.0)
        assert not repo.claim("tsk_1", ("running",), 2000.0, 30.0)
        repo.create(_row("tsk_2", 1000.0, phase="confirm", status="input_required",
                         input_requests={"k": {"method": "elicitation/create"}}))
        assert repo.cancel("tsk_2", 1001.0) and not repo.cancel("tsk_2", 1002.0)
        assert not repo.claim("tsk_2", ("confirm",), 1003.0, 30.0)  # cancelled: never runs
        repo.create(_row("tsk_3", 1000.0, phase="running", expires_at=1500.0))
        assert repo.wait("tsk_3", 1001.0, phase="approval", status="working", message="m",
                         approval_id="ap_3", input_requests=None, expires_at=1200.0)
        kept = repo.get("tsk_3", "t1", "bot", 1001.0)
        assert kept is not None and kept.expires_at == 1500.0  # never earlier than announced
        assert repo.purge_expired(1100.5) == 2
    finally:
        store.close()


def test_an_upstreams_questions_are_answered_once(db_url: str) -> None:
    """``ask``: a compare-and-set on the phase and the row's last update, so of two answers
    given at once one wins, and of two last answers only one resumes the call."""
    store = Store.open(db_url)
    try:
        repo = store.mcp_tasks
        repo.create(_row("tsk_3", 1000.0, phase="running", approval_id=None))
        asks = {"a": {"method": "elicitation/create"}, "b": {"method": "elicitation/create"}}
        assert repo.ask("tsk_3", 1001.0, phases=("running",), phase="upstream",
                        status="input_required", input_requests=asks)
        assert not repo.ask("tsk_3", 1002.0, phases=("running",), phase="upstream")
        seen = repo.get("tsk_3", "t1", "bot", 1002.0)
        assert seen is not None and seen.updated_at == 1001.0
        partial = [repo.ask("tsk_3", 1003.0 + i, phases=("upstream",), updated_at=1001.0,
                            input_requests={"b": asks["b"]}) for i in range(2)]
        assert partial == [True, False]  # the second read the row before the first wrote
        resumes = [repo.ask("tsk_3", 1005.0 + i, phases=("upstream",), updated_at=1003.0,
                            phase="running", status="working", input_requests=None)
                   for i in range(2)]
        assert resumes == [True, False]
        assert repo.cancel("tsk_3", 1010.0)
        assert not repo.ask("tsk_3", 1011.0, phases=("running",), phase="upstream")
    finally:
        store.close()


@pytest.mark.empty_database
def test_migration_0011_adds_and_drops_the_tasks_table(db_url: str) -> None:
    from alembic import command

    from toolkeeper.store.migrate import alembic_config, upgrade

    upgrade(db_url, "0011")
    assert "mcp_tasks" in table_names(db_url)
    command.downgrade(alembic_config(db_url), "0010")
    assert "mcp_tasks" not in table_names(db_url)

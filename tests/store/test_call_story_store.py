"""The store's reads behind a call's story (``GET /calls/{call_id}/story``), on SQLite and
PostgreSQL: the approvals a call asked for or consumed and the side effects it recorded,
of its tenant only, oldest first."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import asdict
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import insert

from toolkeeper.model.enums import ApprovalStatus
from toolkeeper.store import Store
from toolkeeper.store.records import ApprovalRecord, SideEffectRecord
from toolkeeper.store.schema import side_effects

T0 = datetime(2026, 11, 28, 12, 0, tzinfo=UTC)


@pytest.fixture
def store(db_url: str) -> Iterator[Store]:
    s = Store.open(db_url)
    yield s
    s.close()


def _approval(ident: str, tenant: str, call_id: str, consumed_by: str | None = None,
              minutes: int = 0) -> ApprovalRecord:
    return ApprovalRecord(
        id=ident, tenant_id=tenant, agent="bot", kind="approve", tool="bank", action="pay",
        tool_version="1", args_digest="d", arguments={"amount": 1}, risk="high",
        gate="approve", policy_version="p",
        status=ApprovalStatus.CONSUMED if consumed_by else ApprovalStatus.PENDING,
        created_at=T0 + timedelta(minutes=minutes), expires_at=T0 + timedelta(days=1),
        call_id=call_id, consumed_by=consumed_by)


def test_the_approvals_a_call_asked_for_or_consumed_of_its_tenant(store: Store) -> None:
    for rec in (_approval("ap-2", "t", "c-1", consumed_by="c-2", minutes=2),
                _approval("ap-1", "t", "c-1", minutes=1),
                _approval("ap-other", "t", "c-9"),
                _approval("ap-acme", "acme", "c-1", consumed_by="c-2")):
        store.approvals.create(rec)
    assert [a.id for a in store.approvals.of_call("t", "c-1")] == ["ap-1", "ap-2"]
    [consumed] = store.approvals.of_call("t", "c-2")
    assert (consumed.id, consumed.call_id, consumed.consumed_by) == ("ap-2", "c-1", "c-2")
    assert [a.id for a in store.approvals.of_call("acme", "c-1")] == ["ap-acme"]
    assert store.approvals.of_call("t", "c-3") == []


def _effect(ident: str, tenant: str, call_id: str, minutes: int = 0) -> SideEffectRecord:
    return SideEffectRecord(
        id=ident, tenant_id=tenant, agent="bot", call_id=call_id, tool="bank", action="pay",
        tool_version="1", policy="compensatable", arguments=None, result=None,
        created_at=T0 + timedelta(minutes=minutes))


def test_the_side_effects_a_call_recorded_of_its_tenant(store: Store) -> None:
    with store.db.write() as conn:
        conn.execute(insert(side_effects), [asdict(e) for e in (
            _effect("se-2", "t", "c-1", minutes=2), _effect("se-1", "t", "c-1", minutes=1),
            _effect("se-9", "t", "c-9"), _effect("se-acme", "acme", "c-1"))])
    assert [e.id for e in store.outcomes.side_effects_of_call("t", "c-1")] == ["se-1", "se-2"]
    assert [e.id for e in store.outcomes.side_effects_of_call("acme", "c-1")] == ["se-acme"]
    assert store.outcomes.side_effect("se-2") == _effect("se-2", "t", "c-1", minutes=2)

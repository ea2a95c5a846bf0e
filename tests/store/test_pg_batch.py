"""PostgreSQL: a group commit batch in one statement (``store/pg_batch.py``), and its
fallback to the usual transaction whenever the chain head is not where this process left it
or a claim loses its key: nothing of the statement is then written. A refusal is answered,
never raised (no error in the server's log): ``fallback.counts`` names it; a statement that
raised would count by its SQLSTATE instead."""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from sqlalchemy import func, insert, select, text

from tests.store.group_commit_support import TENANT, events, rec
from toolkeeper.errors import ConfigError
from toolkeeper.model.enums import OutcomeState
from toolkeeper.store import Store, pg_batch
from toolkeeper.store.audit_chain import append_chained, prepare
from toolkeeper.store.audit_key import AuditKey
from toolkeeper.store.raw import RawTxn, dump_json, raw_write
from toolkeeper.store.records import SideEffectRecord
from toolkeeper.store.schema import audit_events, outcomes

pytestmark = pytest.mark.postgres

KEY = AuditKey(b"k" * 32)


@pytest.fixture
def stores(pg_url: str) -> Iterator[list[Store]]:
    """Stores opened on the database (each its own connections: as another process)."""
    opened: list[Store] = []
    yield opened
    for s in opened:
        s.close()


def _open(opened: list[Store], url: str, key: AuditKey | None = None) -> Store:
    s = Store.open(url, audit_key=key)
    opened.append(s)
    return s


def _effect(call_id: str) -> SideEffectRecord:
    return SideEffectRecord(
        id=f"se-{call_id}", tenant_id=TENANT, agent="bot", call_id=call_id, tool="pay",
        action="", tool_version="1", policy="irreversible", arguments={"amount": 1.5, "ü": [1]},
        result={"ok": True}, status="executed", turn_group_id=None,
        compensation_call_id=None, created_at=datetime.now(UTC))


def _call(s: Store, key: str) -> bool:
    """A recorded call: claim, then finish with its side effect."""
    assert s.outcomes.claim(rec(key), events(f"c-{key}", "call.attempted")) is None
    return s.outcomes.finish(
        f"c-{key}", state=OutcomeState.SUCCEEDED, status="ok", reason=None,
        result={"n": 1, "nested": {"b": None, "a": 2.25}},
        events=events(f"c-{key}", "call.succeeded"), side_effect=_effect(f"c-{key}"))


def _events_of(s: Store, call_id: str) -> int:
    with s.db.read() as conn:
        return int(conn.execute(select(func.count()).select_from(audit_events)
                                .where(audit_events.c.call_id == call_id)).scalar_one())


def test_batches_are_one_statement_once_the_head_is_known(
        pg_url: str, stores: list[Store]) -> None:
    s = _open(stores, pg_url)
    for i in range(5):
        assert _call(s, f"k{i}")
    # the first batch learned where the head is; every other one was a single statement
    assert s.outcomes.fallback.counts == {"head_unknown": 1}
    assert s.audit.verify(TENANT).ok
    # a finish of an outcome no longer in progress: false, and its side effect not written
    assert not s.outcomes.finish("c-k1", state=OutcomeState.FAILED, status="x", reason="r",
                                 result=None, side_effect=_effect("again"))
    assert s.outcomes.side_effect("se-again") is None
    assert s.outcomes.fallback.counts == {"head_unknown": 1}
    with s.db.read() as conn:  # stored as the usual path stores them, to the byte
        row = conn.execute(text(
            "SELECT o.result::text, e.arguments::text, o.reason IS NULL FROM outcomes o "
            "JOIN side_effects e ON e.call_id = o.call_id WHERE o.call_id = 'c-k3'")).one()
    assert row == (dump_json({"n": 1, "nested": {"b": None, "a": 2.25}}),
                   dump_json({"amount": 1.5, "ü": [1]}), True)
    got = s.outcomes.get("c-k3")
    assert got is not None and got.state is OutcomeState.SUCCEEDED and got.status == "ok"
    effect = s.outcomes.side_effect("se-c-k3")
    assert effect is not None and effect.created_at.tzinfo is not None
    assert _events_of(s, "c-k4") == 2
    # an event appended outside the batches (its own transaction) tells where it left the head
    s.audit.append(events("system", "config.applied"))
    assert _call(s, "k5")
    assert s.outcomes.fallback.counts == {"head_unknown": 1}
    assert s.audit.verify(TENANT).ok


def test_a_head_moved_by_another_writer_falls_back_and_the_chain_verifies(
        pg_url: str, stores: list[Store]) -> None:
    a, b = _open(stores, pg_url), _open(stores, pg_url)
    assert _call(a, "a0")
    assert _call(b, "b0")  # b moves the head a last wrote
    assert _call(a, "a1")  # refused once, then chained onto the head the refusal reported
    assert a.outcomes.fallback.counts == {"head_unknown": 1, "head_moved": 1}
    assert a.outcomes.fallback.usual == 1  # the first batch only
    assert _call(a, "a2")
    assert a.outcomes.fallback.counts == {"head_unknown": 1, "head_moved": 1}
    assert a.audit.verify(TENANT).ok
    assert [_events_of(a, f"c-{k}") for k in ("a0", "b0", "a1", "a2")] == [2, 2, 2, 2]


def test_refusals_and_usual_batches_are_counted_on_the_metrics(
        pg_url: str, stores: list[Store]) -> None:
    from prometheus_client.parser import text_string_to_metric_families

    from toolkeeper.observability.metrics import Metrics

    a, b = _open(stores, pg_url), _open(stores, pg_url)
    metrics = Metrics()
    metrics.queues_from(lambda: 0, a.outcomes.commit_stats)  # as the gateway wires it
    assert _call(a, "a0")
    assert _call(b, "b0")  # b moves the head a last wrote
    assert _call(a, "a1")
    samples = {(s.name, s.labels.get("reason")): s.value
               for f in text_string_to_metric_families(metrics.render().decode())
               for s in f.samples if s.name.startswith("toolkeeper_store_")}
    assert samples[("toolkeeper_store_batch_refusals_total", "head_unknown")] == 1
    assert samples[("toolkeeper_store_batch_refusals_total", "head_moved")] == 1
    assert samples[("toolkeeper_store_batch_usual_total", None)] == 1
    assert samples[("toolkeeper_store_group_commits_total", None)] == 4


def test_a_head_moved_again_and_again_is_chained_onto_a_few_times(
        pg_url: str, stores: list[Store], monkeypatch: pytest.MonkeyPatch) -> None:
    """Another writer moving the head before each of three statements: each refused, the
    fourth written; no usual transaction."""
    a, b = _open(stores, pg_url), _open(stores, pg_url)
    assert _call(a, "a0")
    moves = iter(range(3))
    call = RawTxn.call

    def moved_first(txn: RawTxn, sql: str, params: Sequence[Any]) -> Any:
        if sql == pg_batch.CALL and next(moves, None) is not None:
            b.audit.append(events("system", "config.applied"))
        return call(txn, sql, params)

    monkeypatch.setattr(RawTxn, "call", moved_first)
    assert _call(a, "a1")
    assert a.outcomes.fallback.counts == {"head_unknown": 1, "head_moved": 3}
    assert a.outcomes.fallback.usual == 1  # the first batch only
    assert a.audit.verify(TENANT).ok


def test_a_lost_claim_writes_no_events(pg_url: str, stores: list[Store]) -> None:
    s = _open(stores, pg_url)
    assert _call(s, "first")
    found = s.outcomes.claim(rec("first", call_id="c-second"),
                             events("c-second", "call.attempted"))
    assert found is not None and found.call_id == "c-first"
    assert s.outcomes.fallback.counts == {"head_unknown": 1, "claim_lost": 1}
    assert s.outcomes.fallback.usual == 2
    assert _events_of(s, "c-second") == 0
    assert _call(s, "third")
    assert s.audit.verify(TENANT).ok


def test_keyed_chains_and_retention_moving_the_base(pg_url: str, stores: list[Store]) -> None:
    s, other = _open(stores, pg_url, KEY), _open(stores, pg_url, KEY)
    for i in range(3):
        assert _call(s, f"k{i}")
    assert s.outcomes.fallback.counts == {"head_unknown": 1}
    assert s.audit.verify(TENANT).ok
    # retention, elsewhere: the head's base and MAC move, its seq and hash do not
    pruned = other.audit.prune(datetime.now(UTC) + timedelta(days=1))
    assert [r.deleted for r in pruned if r.tenant_id == TENANT] == [6]
    assert _call(s, "after")
    assert s.outcomes.fallback.counts == {"head_unknown": 1, "head_moved": 1}
    assert s.outcomes.fallback.usual == 1
    rep = s.audit.verify(TENANT)
    assert rep.ok, rep.problems


def test_a_chain_keyed_elsewhere_is_not_continued_unkeyed(
        pg_url: str, stores: list[Store]) -> None:
    plain = _open(stores, pg_url)
    assert _call(plain, "k0")
    assert _open(stores, pg_url, KEY).audit.seal() == 1  # seq and hash unchanged, MAC set
    with pytest.raises(ConfigError):
        _call(plain, "k1")
    assert _events_of(plain, "c-k1") == 0


def test_without_the_function_batches_take_the_usual_transaction(
        pg_url: str, stores: list[Store]) -> None:
    s = _open(stores, pg_url)
    with s.db.engine.begin() as conn:  # a database migrated before 0017, or downgraded
        conn.execute(text("DROP FUNCTION toolkeeper_group_apply(json, json, json, json)"))
    for i in range(3):
        assert _call(s, f"k{i}")
    assert s.outcomes.fallback.off
    assert s.outcomes.fallback.counts == {"head_unknown": 1, "42883": 1}
    assert s.audit.verify(TENANT).ok


def _while_blocked(s: Store, fn: Callable[[], Any]) -> Callable[[], Any]:
    """Start ``fn`` on a thread, return once its batch waits on a row lock; the returned
    callable joins it and gives its result."""
    box: list[Any] = []
    thread = threading.Thread(target=lambda: box.append(fn()))
    thread.start()
    pid = s.db.pg_group_writer.driver_connection.info.backend_pid
    deadline = time.monotonic() + 10
    with s.db.engine.connect() as conn:
        while conn.execute(text("SELECT wait_event_type FROM pg_stat_activity WHERE pid = :p"),
                           {"p": pid}).scalar() != "Lock":
            assert time.monotonic() < deadline, "the batch never waited on the lock"
            conn.rollback()
            time.sleep(0.01)

    def result() -> Any:
        thread.join(10)
        return box[0]

    return result


def test_a_key_taken_while_the_statement_runs_writes_nothing_of_it(
        pg_url: str, stores: list[Store]) -> None:
    s = _open(stores, pg_url)
    assert _call(s, "warm")
    other = rec("k", call_id="c-other")
    with s.db.engine.connect() as conn:  # taken, not yet committed: the check cannot see it
        conn.execute(insert(outcomes).values(dataclasses.asdict(other)
                                             | {"state": other.state.value}))
        result = _while_blocked(s, lambda: s.outcomes.claim(
            rec("k"), events("c-k", "call.attempted")))
        conn.commit()
    found = result()
    assert found is not None and found.call_id == "c-other"
    assert s.outcomes.fallback.counts == {"head_unknown": 1, "claim_lost": 1}
    assert _events_of(s, "c-k") == 0
    assert s.audit.verify(TENANT).ok


def test_a_head_moved_while_the_statement_runs_is_chained_onto_again(
        pg_url: str, stores: list[Store]) -> None:
    a, b = _open(stores, pg_url), _open(stores, pg_url)
    assert _call(b, "b0")
    assert _call(a, "a0")
    with raw_write(b.db) as txn:  # b holds the head, moving it, not yet committed
        append_chained(txn, prepare(events("c-held", "config.applied")))
        result = _while_blocked(a, lambda: _call(a, "a1"))
    assert result()
    assert a.outcomes.fallback.counts == {"head_unknown": 1, "head_moved": 1}
    assert a.outcomes.fallback.usual == 1  # the first batch only: the claim was retried
    assert a.audit.verify(TENANT).ok
    assert [_events_of(a, c) for c in ("c-b0", "c-a0", "c-held", "c-a1")] == [2, 2, 1, 2]


def _fresh(conn: Any) -> str:
    """A claim of a key not taken (the first outcome's row under another key), as JSON."""
    return str(conn.execute(text(
        "SELECT json_build_array(row_to_json(o)::jsonb || jsonb_build_object("
        "'call_id', 'c-' || gen_random_uuid(), 'key', gen_random_uuid()))::text "
        "FROM outcomes o LIMIT 1")).scalar_one())


def test_a_refusal_writes_nothing_so_its_commit_flushes_nothing(
        pg_url: str, stores: list[Store]) -> None:
    """A head found moved (with a claim that would win), or a key found taken, is refused
    before any write: no transaction id, so its autocommit needs no WAL flush (a refused
    batch costs no fsync)."""
    s = _open(stores, pg_url)
    assert _call(s, "k0")
    with s.db.engine.connect() as conn:
        head = conn.execute(text(
            "SELECT json_build_object('k', tenant_key, 'seq0', seq - 1, 'hash0', hash, "
            "'mac0', mac, 'base_seq', base_seq, 'base_hash', base_hash, 'seq', seq + 1, "
            "'hash', hash, 'mac', mac)::text FROM audit_heads")).scalar_one()
        taken = conn.execute(text("SELECT row_to_json(o)::text FROM outcomes o")).scalar_one()
        for claims, heads, refused in ((_fresh(conn), f"[{head}]", "head_moved"),
                                       (f"[{taken}]", "[]", "claim_lost")):
            res = conn.execute(text("SELECT toolkeeper_group_apply("
                                    "CAST(:c AS json), '[]', CAST(:h AS json), '[]')::text"),
                               {"c": claims, "h": heads}).scalar_one()
            assert f'"refused" : "{refused}"' in res
            xid = conn.execute(text("SELECT pg_current_xact_id_if_assigned()")).scalar()
            assert xid is None, refused
            conn.rollback()


def test_a_batch_waits_for_another_on_the_head_then_refuses_writing_nothing(
        pg_url: str, stores: list[Store]) -> None:
    """Two statements on one head: the second waits for the first's commit (an advisory
    lock, taken before its check), then finds the head moved before writing its claim."""
    s = _open(stores, pg_url)
    assert _call(s, "k0")
    move = ("SELECT toolkeeper_group_apply(CAST(:c AS json), '[]', "
            "json_build_array(json_build_object("
            "'k', tenant_key, 'seq0', seq, 'hash0', hash, 'mac0', mac, 'base_seq', base_seq, "
            "'base_hash', base_hash, 'seq', seq + 1, 'hash', 'moved', 'mac', mac)), '[]')::text, "
            "pg_current_xact_id_if_assigned() IS NULL FROM audit_heads")
    with s.db.engine.connect() as first, s.db.engine.connect() as second:
        # the first holds the head, not committed; the second would write a claim
        assert '"done"' in first.execute(text(move), {"c": "[]"}).one()[0]
        claim = _fresh(second)
        box: list[Any] = []
        thread = threading.Thread(
            target=lambda: box.append(second.execute(text(move), {"c": claim}).one()))
        thread.start()
        pid = second.connection.driver_connection.info.backend_pid  # type: ignore[union-attr]
        deadline = time.monotonic() + 10
        try:
            with s.db.engine.connect() as watch:
                while watch.execute(text("SELECT wait_event FROM pg_stat_activity "
                                         "WHERE pid = :p"), {"p": pid}).scalar() != "advisory":
                    assert time.monotonic() < deadline, "the second never waited for the first"
                    watch.rollback()
                    time.sleep(0.01)
        finally:
            first.commit()
            thread.join(10)
        res, nothing_written = box[0]
        assert '"refused" : "head_moved"' in res and nothing_written
        second.rollback()

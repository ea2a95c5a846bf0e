"""Retention (services/retention.py): audit chains pruned from their start stay verifiable
and tamper-evident, expired outcomes go, and nothing that may still matter is deleted. On
SQLite and PostgreSQL."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from alembic import command
from sqlalchemy import create_engine, delete, func, inspect, select, text, update

from tests.support import audit_attacks as attack
from toolkeeper import Gateway
from toolkeeper.config.apply import config_settings
from toolkeeper.config.loader import load_file
from toolkeeper.model.enums import ApprovalStatus, OutcomeState
from toolkeeper.services.retention import Retention
from toolkeeper.store import Store
from toolkeeper.store.audit_checkpoints import Checkpoints
from toolkeeper.store.audit_key import AuditKey
from toolkeeper.store.migrate import alembic_config, current, head, upgrade
from toolkeeper.store.records import ApprovalRecord
from toolkeeper.store.schema import audit_events, audit_heads, outcomes

FUTURE = timedelta(days=1)


def _now() -> datetime:
    return datetime.now(UTC)


def _store(url: str, key: bytes | None = attack.KEY, checkpoints: Path | None = None) -> Store:
    audit_key = None if key is None else AuditKey(key)
    cps = None if checkpoints is None or audit_key is None else Checkpoints(checkpoints,
                                                                              audit_key)
    return Store.open(url, audit_key=audit_key, checkpoints=cps)


def _verify(url: str, **kw: Any) -> Any:
    store = _store(url, **kw)
    try:
        return store.audit.verify("default")
    finally:
        store.close()


def _default(reports: list[Any]) -> Any:
    """The report of the default tenant's chain (the global chain has its own)."""
    [rep] = [r for r in reports if r.tenant_id == "default"]
    return rep


def _count(url: str, table: Any, *where: Any) -> int:
    engine = create_engine(url)
    try:
        with engine.connect() as conn:
            return int(conn.execute(select(func.count()).select_from(table).where(*where))
                       .scalar_one())
    finally:
        engine.dispose()


@pytest.mark.parametrize("keyed", [True, False], ids=["keyed", "plain"])
def test_pruning_the_start_keeps_the_chain_verifiable(db_url: str, keyed: bool) -> None:
    key = attack.KEY if keyed else None
    with attack.open_gateway(db_url, audit_key=key, legacy=not keyed) as gw:
        attack.calls(gw, 3, "old")
    total = len(attack.events(db_url))
    cut = _now()
    with attack.open_gateway(db_url, audit_key=key, legacy=not keyed) as gw:
        attack.calls(gw, 2, "new")
    kept_before = len(attack.events(db_url)) - total
    store = _store(db_url, key=key)
    try:
        rep = _default(store.audit.prune(cut, chunk=4))  # several chunks
        assert (rep.tenant_id, rep.deleted, rep.through_seq, rep.refused) == (
            "default", total, total, None)
        assert not [r for r in store.audit.prune(cut) if r.tenant_id == "default"]
        report = store.audit.verify("default")
        assert report.ok, report.problems
        assert (report.first_seq, report.events) == (total + 1, kept_before)
    finally:
        store.close()
    row = attack.head(db_url)
    assert row["base_seq"] == total
    assert row["base_hash"].startswith("hmac-sha256:" if keyed else "sha256:")
    # the chain goes on from there
    with attack.open_gateway(db_url, audit_key=key, legacy=not keyed) as gw:
        attack.calls(gw, 1, "later")
    assert _verify(db_url, key=key).ok


def test_pruning_everything_leaves_an_empty_chain_that_verifies(db_url: str) -> None:
    with attack.open_gateway(db_url, audit_key=attack.KEY) as gw:
        attack.calls(gw, 2)
    last = len(attack.events(db_url))
    store = _store(db_url)
    try:
        rep = _default(store.audit.prune(_now() + FUTURE))
        assert rep.deleted == last
        report = store.audit.verify("default")
        assert report.ok, report.problems
        assert (report.events, report.first_seq) == (0, last + 1)
    finally:
        store.close()


def test_a_checkpoint_before_the_base_is_skipped_one_at_the_base_must_match(
        db_url: str, tmp_path: Path) -> None:
    cps = tmp_path / "audit.checkpoints"
    with attack.open_gateway(db_url, audit_key=attack.KEY, audit_checkpoint_path=cps) as gw:
        attack.calls(gw, 2)  # close writes a checkpoint at the head
    cut = _now()
    with attack.open_gateway(db_url, audit_key=attack.KEY, audit_checkpoint_path=cps) as gw:
        attack.calls(gw, 2, "b")
    store = _store(db_url, checkpoints=cps)
    try:
        rep = _default(store.audit.prune(cut))
        report = store.audit.verify("default")
        assert report.ok, report.problems
    finally:
        store.close()
    # the checkpoint at the old head sits exactly at the base: a forged base hash shows
    engine = create_engine(db_url)
    with engine.begin() as conn:
        conn.execute(update(audit_heads).where(audit_heads.c.tenant_key == "default")
                     .values(base_hash="hmac-sha256:" + "0" * 64))
    engine.dispose()
    report = _verify(db_url, checkpoints=cps)
    assert not report.ok
    assert any(f"base (seq {rep.through_seq}" in p for p in report.problems), report.problems


def test_deleting_more_of_the_start_and_moving_the_base_is_detected(db_url: str) -> None:
    """What an attacker without the key would call retention: caught by the head MAC."""
    with attack.open_gateway(db_url, audit_key=attack.KEY) as gw:
        attack.calls(gw, 3)
    rows = attack.events(db_url)
    engine = create_engine(db_url)
    with engine.begin() as conn:
        conn.execute(delete(audit_events).where(audit_events.c.tenant_key == "default",
                                                audit_events.c.seq <= 3))
        conn.execute(update(audit_heads).where(audit_heads.c.tenant_key == "default")
                     .values(base_seq=3, base_hash=rows[2]["hash"]))
    engine.dispose()
    report = _verify(db_url)
    assert not report.ok
    assert any("chain head's MAC does not match" in p for p in report.problems)


def test_an_edited_event_is_never_pruned_away(db_url: str) -> None:
    with attack.open_gateway(db_url, audit_key=attack.KEY) as gw:
        attack.calls(gw, 3)
    engine = create_engine(db_url)
    with engine.begin() as conn:
        conn.execute(text("UPDATE audit_events SET reason = 'forged' WHERE seq = 4 "
                          "AND tenant_key = 'default'"))
    engine.dispose()
    before = len(attack.events(db_url))
    store = _store(db_url)
    try:
        rep = _default(store.audit.prune(_now() + FUTURE, chunk=2))
        assert rep.refused is not None and "seq 4: event was altered" in rep.refused
        assert rep.deleted == 2  # the verified chunk before it went, the evidence did not
        report = store.audit.verify("default")
        assert "seq 4: event was altered (or the audit key differs)" in report.problems
    finally:
        store.close()
    assert len(attack.events(db_url)) == before - 2


def test_a_chain_whose_head_does_not_check_is_not_pruned(db_url: str) -> None:
    with attack.open_gateway(db_url, audit_key=attack.KEY) as gw:
        attack.calls(gw, 2)
    attack.delete_last_event(db_url, keep_mac=True)
    before = len(attack.events(db_url))
    store = _store(db_url)
    try:
        rep = _default(store.audit.prune(_now() + FUTURE))
        assert rep.deleted == 0 and rep.refused and "MAC" in rep.refused
    finally:
        store.close()
    assert len(attack.events(db_url)) == before
    # without the key a keyed chain is not pruned either (it could not be re-sealed)
    store = _store(db_url, key=None)
    try:
        rep = _default(store.audit.prune(_now() + FUTURE))
        assert rep.deleted == 0 and rep.refused
    finally:
        store.close()


def test_pruning_while_calls_append_never_forks_or_breaks_the_chain(db_url: str) -> None:
    with attack.open_gateway(db_url, audit_key=attack.KEY) as gw:
        attack.calls(gw, 20, "warm")
        stop = threading.Event()
        pruned: list[int] = []

        def prune() -> None:
            while not stop.is_set():
                pruned.extend(r.deleted for r in gw.store.audit.prune(_now(), chunk=7))

        t = threading.Thread(target=prune)
        t.start()
        try:
            attack.calls(gw, 40, "busy")
        finally:
            stop.set()
            t.join(30)
        assert not t.is_alive()
        assert sum(pruned) > 0
        report = gw.store.audit.verify("default")
        assert report.ok, report.problems
        assert report.first_seq > 1


def _outcome_states(url: str) -> dict[str, str]:
    engine = create_engine(url)
    try:
        with engine.connect() as conn:
            return {r.key: r.state for r in conn.execute(select(outcomes.c.key,
                                                                outcomes.c.state))}
    finally:
        engine.dispose()


def test_expired_finished_outcomes_are_purged_running_and_unknown_ones_stay(
        db_url: str) -> None:
    with attack.open_gateway(db_url, outcome_ttl=timedelta(seconds=60)) as gw:
        for i in range(5):
            assert gw.call_sync("pay", arguments={"invoice": str(i)}, agent="bot",
                                idempotency_key=f"k{i}").ok
        engine = create_engine(db_url)
        with engine.begin() as conn:  # k3 became unknown (a crash), k4 is still running
            conn.execute(update(outcomes).where(outcomes.c.key == "k:k3").values(
                state=OutcomeState.UNKNOWN.value, status="unknown"))
            conn.execute(update(outcomes).where(outcomes.c.key == "k:k4").values(
                state=OutcomeState.IN_PROGRESS.value, status="in_progress"))
        engine.dispose()
        assert gw.store.outcomes.purge_expired(_now()) == 0  # not expired yet
        assert gw.store.outcomes.purge_expired(_now() + timedelta(minutes=2), chunk=2) == 3
        assert _outcome_states(db_url) == {"k:k3": "unknown", "k:k4": "in_progress"}
        # a purged key is free: the next call with it runs (and is recorded) again
        res = gw.call_sync("pay", arguments={"invoice": "0"}, agent="bot",
                           idempotency_key="k0")
        assert res.ok and res.call_id is not None
        assert _outcome_states(db_url)["k:k0"] == "succeeded"


def _approval(id_: str, expires_at: datetime) -> ApprovalRecord:
    return ApprovalRecord(
        id=id_, tenant_id="default", agent="bot", kind="approve", tool="pay", action="",
        tool_version="1", args_digest="sha256:x", arguments={}, risk="high", gate="approve",
        policy_version="p", status=ApprovalStatus.PENDING, created_at=_now(),
        expires_at=expires_at)


def test_the_sweep_runs_from_the_gateway_and_counts(db_url: str) -> None:
    with attack.open_gateway(db_url, audit_key=attack.KEY, outcome_ttl=timedelta(seconds=1),
                             outcome_retention=timedelta(0),
                             audit_retention=timedelta(hours=1)) as gw:
        attack.calls(gw, 3)
        for i, expires in enumerate((timedelta(minutes=1), timedelta(hours=3))):
            gw.store.approvals.create(_approval(f"ap{i}", _now() + expires))
        written = len(attack.events(db_url))
        later = (_now() + timedelta(hours=2)).timestamp()  # requestState nonces (MCP)
        gw.store.request_states.consume("gone", later - 1, later - 10)
        gw.store.request_states.consume("kept", later + 1, later - 10)
        rep = gw.retention.run(now=_now() + timedelta(hours=2))
        assert (rep.outcomes, rep.approvals, rep.side_effects) == (3, 1, 3)
        assert rep.request_states == 1 and not gw.store.request_states.consume(
            "kept", later + 1, later)
        assert gw.store.approvals.get("ap0") is None and gw.store.approvals.get("ap1")
        default = _default(rep.audit)
        assert (default.deleted, default.through_seq) == (written, written)
        [pruned] = gw.store.audit.list("default")  # only the prune's own record is left
        assert pruned.type == "audit.pruned" and pruned.seq == written + 1
        assert pruned.data["events"] == written and pruned.data["through_seq"] == written
        assert gw.store.audit.verify("default").ok
        text_ = gw.metrics.render(None).decode()
        assert 'toolkeeper_retention_deleted_total{table="outcomes"} 3.0' in text_
        assert 'toolkeeper_retention_deleted_total{table="approvals"} 1.0' in text_
        assert 'toolkeeper_retention_deleted_total{table="side_effects"} 3.0' in text_
        assert (f'toolkeeper_retention_deleted_total{{table="audit_events"}} '
                f'{float(rep.audit_events)}') in text_


def test_the_sweep_starts_itself_when_due(db_url: str) -> None:
    with attack.open_gateway(db_url, outcome_ttl=timedelta(milliseconds=1),
                             outcome_retention=timedelta(0), retention_every_s=0.2) as gw:
        assert gw.call_sync("pay", arguments={"invoice": "x"}, agent="bot").ok
        deadline = _now() + timedelta(seconds=20)
        while gw.retention.last is None or gw.retention.last.outcomes == 0:
            assert _now() < deadline, "no retention sweep ran within 20 s"
            threading.Event().wait(0.1)
        assert _count(db_url, outcomes) == 0


def test_retention_is_off_for_audit_and_a_day_for_outcomes_by_default(tmp_path: Path) -> None:
    with Gateway.open(f"sqlite:///{tmp_path}/t.db") as gw:
        assert gw.retention.audit_retention is None
        assert gw.retention.outcome_retention == timedelta(hours=24)


def test_the_config_file_sets_retention(tmp_path: Path) -> None:
    config = tmp_path / "toolkeeper.yaml"
    config.write_text("version: 1\nsettings: {audit_retention_s: 604800, "
                      "outcome_retention_s: 0, retention_every_s: 60}\n")
    settings = config_settings(load_file(config))
    assert settings["audit_retention"] == timedelta(days=7)
    assert settings["outcome_retention"] == timedelta(0)
    assert settings["retention_every_s"] == 60


def test_migration_0008_adds_the_base_and_downgrades_cleanly(db_url: str) -> None:
    with attack.open_gateway(db_url, audit_key=attack.KEY) as gw:
        attack.calls(gw, 1)
    assert current(db_url) == head() >= "0008"
    assert attack.head(db_url)["base_seq"] == 0
    command.downgrade(alembic_config(db_url), "0007")
    assert current(db_url) == "0007"
    engine = create_engine(db_url)
    try:
        columns = {c["name"] for c in inspect(engine).get_columns("audit_heads")}
    finally:
        engine.dispose()
    assert "base_seq" not in columns and "mac" in columns
    upgrade(db_url)
    # a head sealed without a base (as before the revision) still verifies after it
    assert attack.head(db_url)["base_seq"] == 0
    assert _verify(db_url).ok


def test_a_closing_gateway_stops_the_sweep_between_chunks(db_url: str) -> None:
    with attack.open_gateway(db_url, audit_key=attack.KEY) as gw:
        attack.calls(gw, 2)
        closing = Retention(gw.store, gw.metrics, outcome_retention=timedelta(0),
                            audit_retention=timedelta(0), every_s=60, closed=lambda: True)
        rep = closing.run(now=_now() + FUTURE)
        assert (rep.outcomes, rep.approvals, rep.audit_events, rep.side_effects) == (0, 0, 0, 0)
        assert gw.store.audit.verify("default").first_seq == 1

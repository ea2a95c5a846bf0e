"""Issue 13, item 1 — crash chaos: replicas SIGKILLed at random moments while concurrent
clients retry irreversible calls with the same idempotency key. Afterwards the execution
file (one fsync'd line per execution) matches the ``succeeded`` outcomes exactly: no double
execution, nothing lost; torn calls are ``unknown`` until resolved through the API; every
completed call has its audit events and every chain verifies. Prints its figures.

``make chaos`` runs 1,000 calls (``CHAOS_CALLS``, ``CHAOS_KILLS``, ``CHAOS_CLIENTS``,
``CHAOS_SEED``); CI runs a bounded form. Not in ``make test`` (marker ``chaos``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.chaos import env_int, fleet, run
from tests.support.chaos_checks import verify_run

pytestmark = [pytest.mark.chaos, pytest.mark.slow]


@pytest.mark.parametrize("backend", [
    pytest.param("postgresql", marks=pytest.mark.postgres),
    pytest.param("sqlite"),
])
def test_crash_chaos(backend: str, request: pytest.FixtureRequest, tmp_path: Path,
                     capsys: pytest.CaptureFixture[str]) -> None:
    # two replicas share PostgreSQL; SQLite is one process's embedded store
    if backend == "postgresql":
        db, size = request.getfixturevalue("pg_url"), 2
    else:
        db, size = f"sqlite:///{tmp_path}/chaos.db", 1
    calls, kills = env_int("CHAOS_CALLS", 200), env_int("CHAOS_KILLS", 10)
    with fleet(db, tmp_path, size) as running:
        figures, answers, sink = run(running, calls=calls, clients=env_int("CHAOS_CLIENTS", 8),
                                     min_kills=kills, seed=env_int("CHAOS_SEED", 13))
        verify_run(running, answers, sink, figures)
    with capsys.disabled():
        print(f"\ncrash chaos on {backend} ({size} replica(s)):\n{figures.table()}")
    assert figures.problems == [], figures.problems[:20]
    assert figures.double_executions == 0 and figures.lost == 0
    assert figures.kills >= kills
    assert figures.lines == figures.succeeded_outcomes
    assert figures.unknowns == figures.resolved_succeeded + figures.resolved_failed

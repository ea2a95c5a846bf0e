"""Crash chaos (issue 13, item 1): ``toolkeeper serve`` replicas take irreversible calls over
REST from concurrent clients that retry with the same idempotency key, while a controller
SIGKILLs a random replica at random moments and restarts it. The tool appends one fsync'd
line per execution, so the file is the ground truth the outcomes are checked against.

Used by tests/chaos (``make chaos``); every wait is bounded."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import httpx

from tests.support.processes import child_env
from tests.support.serve import free_port
from tests.support.waiting import wait_until
from toolkeeper import Gateway

AGENT = "chaos-bot"
TOOL = "append"
TOOL_TIMEOUT_S = 3
CONFIG = f"""\
version: 1
settings: {{stale_grace_s: 1}}
tools:
  - native: tests.support.chaos_tools:append
    overrides: {{execution: {{timeout_s: {TOOL_TIMEOUT_S}}}}}
profiles:
  - name: chaos
    autonomy: 2
    activations: [{{tool: {TOOL}}}]
agents:
  - {{name: {AGENT}, profile: chaos}}
"""
MAX_ATTEMPTS = 60
REQUEST_TIMEOUT_S = 10.0
FINAL = frozenset({"succeeded", "unknown"})
"""A client stops retrying at these; it retries ``in_progress`` (409), 5xx and transport
errors with the same key, and stops at anything else (then listed as a problem)."""


@dataclass
class Figures:
    """What one chaos run did and found; ``double_executions`` and ``lost`` must be 0."""

    calls: int = 0
    replicas: int = 0
    kills: int = 0
    retries: int = 0
    unknowns: int = 0
    resolved_succeeded: int = 0
    resolved_failed: int = 0
    lines: int = 0
    succeeded_outcomes: int = 0
    double_executions: int = 0
    lost: int = 0
    abandoned: int = 0
    duration_s: float = 0.0
    problems: list[str] = field(default_factory=list)

    def table(self) -> str:
        rows = {k: v for k, v in vars(self).items() if k != "problems"}
        rows["duration_s"] = round(self.duration_s, 1)
        return "\n".join(f"  {k:<20} {v}" for k, v in rows.items())


@dataclass
class Replica:
    port: int
    log: Path
    proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"


@dataclass
class Fleet:
    """The ``serve`` processes of one run, all on ``db`` (run in ``work``)."""

    db: str
    work: Path
    replicas: list[Replica]
    tokens: dict[str, str]
    kills: int = 0
    env: dict[str, str] = field(default_factory=dict)
    """Added to each replica's environment (e.g. ``TOOLKEEPER_CONFIG``)."""

    def start(self, r: Replica) -> None:
        with r.log.open("ab") as out:  # a file, not a pipe nobody drains
            r.proc = subprocess.Popen(
                [sys.executable, "-m", "toolkeeper.cli", "serve", "--port", str(r.port)],
                env=child_env(TOOLKEEPER_DATABASE_URL=self.db, **self.env), cwd=self.work,
                stdout=out, stderr=subprocess.STDOUT)
        wait_until(partial(_healthy, r), timeout=60, what=f"{r.url}/healthz answers",
                   ignoring=(httpx.HTTPError,))

    def kill(self, r: Replica) -> None:
        assert r.proc is not None
        r.proc.send_signal(signal.SIGKILL)
        r.proc.wait(timeout=20)
        self.kills += 1

    def stop(self) -> None:
        for r in self.replicas:
            if r.proc is not None and r.proc.poll() is None:
                r.proc.terminate()
        for r in self.replicas:
            if r.proc is not None:
                try:
                    r.proc.wait(timeout=20)
                except subprocess.TimeoutExpired:
                    r.proc.kill()
                    r.proc.wait(timeout=5)


def _healthy(r: Replica) -> bool:
    assert r.proc is not None
    if r.proc.poll() is not None:
        raise RuntimeError(f"serve exited: {r.log.read_text()[-2000:]}")
    return httpx.get(r.url + "/healthz", timeout=1).status_code == 200


def role_tokens(db: str, config: Path, agent: str, roles: tuple[str, ...]) -> dict[str, str]:
    """``config`` applied to the store at ``db`` and a token per role (``agent``'s for the
    ``agent`` role), made before any replica starts."""
    with Gateway.open(db, config=config) as gw:
        return {role: gw.store.tokens.create(tenant_id="default", role=role,
                                             agent=agent if role == "agent" else None)[1]
                for role in roles}


@contextmanager
def fleet(db: str, work: Path, size: int) -> Iterator[Fleet]:
    """``size`` replicas on ``db``, with an agent, an operator and an admin token."""
    config = work / "toolkeeper.yaml"
    config.write_text(CONFIG)
    tokens = role_tokens(db, config, AGENT, ("agent", "operator", "admin"))
    running = Fleet(db, work, [Replica(free_port(), work / f"serve-{i}.log")
                               for i in range(size)], tokens)
    try:
        for r in running.replicas:
            running.start(r)
        yield running
    finally:
        running.stop()


@dataclass
class Progress:
    """Calls finished so far (clients count them; the controller kills by them)."""

    done: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def tick(self) -> None:
        with self.lock:
            self.done += 1


def _controller(f: Fleet, progress: Progress, thresholds: list[int], rng: random.Random,
                finished: threading.Event) -> None:
    """Kill ``k`` comes once ``thresholds[k]`` calls have finished, a random moment later
    (so it lands mid-call): SIGKILL a random replica, restart it, wait until it serves."""
    for at in thresholds:
        wait_until(lambda at=at: progress.done >= at or finished.is_set(), timeout=600,
                   what=f"{at} calls finished", interval=0.02)
        time.sleep(rng.uniform(0.0, 0.1))
        victim = rng.choice(f.replicas)
        f.kill(victim)
        time.sleep(rng.uniform(0.0, 0.3))
        f.start(victim)


def _classify(resp: httpx.Response) -> str:
    try:
        body: Any = resp.json()
    except ValueError:
        body = None
    status = body.get("status") if isinstance(body, dict) else None
    if isinstance(status, str):
        return status
    return "retry" if resp.status_code >= 500 else f"http_{resp.status_code}"


def _one_call(f: Fleet, i: int, path: Path, rng: random.Random) -> tuple[str, int]:
    """Call ``i`` with key ``chaos-<i>`` until it is final: (last status, attempts)."""
    body = {"tool": TOOL, "arguments": {"mark": f"chaos-{i}", "path": str(path)}}
    headers = {"Authorization": f"Bearer {f.tokens['agent']}", "Idempotency-Key": f"chaos-{i}"}
    status = "never_answered"
    for attempt in range(1, MAX_ATTEMPTS + 1):
        url = rng.choice(f.replicas).url
        try:
            status = _classify(httpx.post(url + "/tools/execute", json=body, headers=headers,
                                          timeout=REQUEST_TIMEOUT_S))
        except httpx.TransportError:
            status = "transport_error"
        if status not in ("in_progress", "retry", "transport_error"):
            return status, attempt
        time.sleep(min(0.05 * 2 ** min(attempt, 5), 1.0) * rng.uniform(0.5, 1.0))
    return status, MAX_ATTEMPTS


def run(f: Fleet, calls: int, clients: int, min_kills: int,
        seed: int) -> tuple[Figures, list[tuple[str, int]], Path]:
    """The chaos run: (figures so far, each call's last status and attempts, the execution
    file). ``tests.support.chaos_checks.verify_run`` then checks what it left behind."""
    figures = Figures(calls=calls, replicas=len(f.replicas))
    sink = f.work / "executions.txt"
    sink.touch()
    progress, finished = Progress(), threading.Event()
    rng = random.Random(seed)
    thresholds = sorted(rng.randrange(0, max(1, calls * 9 // 10)) for _ in range(min_kills))
    started = time.monotonic()
    ctl = ThreadPoolExecutor(1)
    killing = ctl.submit(_controller, f, progress, thresholds, rng, finished)

    def client(i: int) -> tuple[str, int]:
        try:
            return _one_call(f, i, sink, random.Random(seed * 100_003 + i))
        finally:
            progress.tick()

    try:
        with ThreadPoolExecutor(clients) as pool:
            answers = list(pool.map(client, range(calls)))
    finally:
        finished.set()
        killing.result(timeout=600)
        ctl.shutdown()
    figures.kills = f.kills
    figures.retries = sum(n - 1 for _, n in answers)
    figures.abandoned = sum(s not in FINAL for s, _ in answers)
    figures.duration_s = time.monotonic() - started
    return figures, answers, sink


def env_int(name: str, default: int) -> int:
    """An integer knob of ``make chaos`` (``CHAOS_CALLS`` …), else ``default``."""
    return int(os.environ.get(name, "") or default)

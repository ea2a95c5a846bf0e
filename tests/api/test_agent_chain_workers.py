"""``agent_call``'s chain guard across processes (issue 26, item 11): under ``toolkeeper
serve --workers 2`` (SQLite, PostgreSQL), a callee that drops ``Toolkeeper-Agent-Chain``
calls back into the gateway over REST, each time on a new connection, until its call-backs
landed in both workers; every one is refused ``agent_call_cycle``, wherever it landed. Which
worker answered is read from the kernel (/proc: the process holding the accepted socket)."""

from __future__ import annotations

import http.client
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.loopback import JsonHandler, serving
from tests.support.processes import child_env, stop
from tests.support.serve import free_port
from tests.support.waiting import wait_until
from toolkeeper import Activation, Agent, Autonomy, Gateway, Profile
from toolkeeper.builtins import definition
from toolkeeper.model.profile import AgentEndpoint

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(not Path("/proc/net/tcp").exists(), reason="Linux /proc")]

CALL_BACKS = 8
"""Call-backs at least; more until ``IN_OTHER`` of them landed in the other worker."""
IN_OTHER = 3
MOST = 80
BURST = 8


def _owners(port: int, peer: int, pids: list[int]) -> int | None:
    """The process among ``pids`` holding the loopback TCP socket ``port`` -> ``peer``."""
    inode = None
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        local, remote = fields[1], fields[2]
        if int(local.split(":")[1], 16) == port and int(remote.split(":")[1], 16) == peer:
            inode = fields[9]
    if inode in (None, "0"):
        return None
    for pid in pids:
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
        except OSError:
            continue
        for fd in fds:
            try:
                if os.readlink(f"/proc/{pid}/fd/{fd}") == f"socket:[{inode}]":
                    return pid
            except OSError:
                continue
    return None


def _children(pid: int) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                found.append(int(entry))
    return found


@dataclass
class Side:
    """The serve process's port and workers, filled in once it answers."""

    port: int = 0
    workers: list[int] = field(default_factory=list)


def _call_back(side: Side, me_token: str) -> tuple[int | None, dict[str, Any]]:
    """One call-back as agent a2 asking a1, on a new connection, without the chain
    header; the worker that answered and the result."""
    conn = http.client.HTTPConnection("127.0.0.1", side.port, timeout=30)
    try:
        conn.request("POST", "/tools/execute", json.dumps({
            "tool": "agent_call", "arguments": {"target_agent_slug": "a1", "input": "x"}}),
            {"Authorization": f"Bearer {me_token}", "Content-Type": "application/json"})
        body = json.loads(conn.getresponse().read())
        assert conn.sock is not None
        mine = conn.sock.getsockname()[1]
        return _owners(side.port, mine, side.workers), body
    finally:
        conn.close()


def _handlers(side: Side, tokens: dict[str, str],
              hits: dict[str, list[Any]]) -> tuple[type, type]:
    """a1 records that it ran; a2 calls back (as a2, asking a1) until done."""
    class A1(JsonHandler):
        def do_POST(self) -> None:
            hits["a1"].append(self.headers.get("Toolkeeper-Agent-Chain"))
            self.reply({"run_id": "a1-run", "output": "a1 ran"})

    class A2(JsonHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers["Content-Length"]))
            # the worker running the outer call holds the connection that reached us
            outer = _owners(self.client_address[1], self.server.server_address[1],
                            side.workers)
            backs: list[tuple[int | None, dict[str, Any]]] = []
            # a burst at once: while one worker is busy the kernel hands the others'
            # connections to the other worker (sequential ones all go to the last waiter)
            with ThreadPoolExecutor(BURST) as pool:
                while len(backs) < MOST and (len(backs) < CALL_BACKS or sum(
                        1 for pid, _ in backs if pid not in (outer, None)) < IN_OTHER):
                    backs += pool.map(lambda _: _call_back(side, tokens["a2"]), range(BURST))
            hits["a2"].append({"outer": outer, "backs": backs})
            self.reply({"run_id": "a2-run", "output": "done"})

    return A1, A2


def _healthz(port: int, workers: list[int]) -> int | None:
    """The worker that answered one ``/healthz`` on a new connection."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        conn.request("GET", "/healthz")
        conn.getresponse().read()
        assert conn.sock is not None
        return _owners(port, conn.sock.getsockname()[1], workers)
    finally:
        conn.close()


@contextmanager
def _serve(db: str, work: Path, side: Side) -> Iterator[None]:
    """``serve --workers 2`` over ``db``, once both workers answer requests."""
    port = free_port()
    log = work / "serve.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "toolkeeper.cli", "serve", "--port", str(port),
             "--workers", "2", "--log-level", "warning"],
            env=child_env(TOOLKEEPER_DATABASE_URL=db), cwd=work, stdout=out,
            stderr=subprocess.STDOUT, start_new_session=True)
    answered: set[int | None] = set()
    try:
        def ready() -> bool:
            assert proc.poll() is None, log.read_text()[-3000:]
            workers = _children(proc.pid)  # the workers (and multiprocessing's tracker)
            with ThreadPoolExecutor(BURST) as pool:
                answered.update(pool.map(lambda _: _healthz(port, workers), range(BURST)))
            side.port, side.workers = port, workers
            return len(answered - {None}) == 2

        wait_until(ready, timeout=90, what="both workers of serve --workers 2 answer",
                   ignoring=(OSError,))
        yield
    finally:
        stop(proc)


def _setup(db: str, urls: dict[str, str]) -> dict[str, str]:
    """Agents a1, a2 (profile with ``agent_call``), their endpoints and tokens."""
    with Gateway.open(db) as gw:
        gw.registry.register(definition("agent_call"))
        gw.registry.put_profile(Profile(name="callers", autonomy=Autonomy(3), activations=(
            Activation(tool="agent_call", policy={"max_depth": 4, "timeout_s": 240}),)))
        tokens = {}
        for name, url in urls.items():
            gw.registry.put_agent(Agent(name=name, profile="callers", endpoint=AgentEndpoint(
                transport="http", url=url + "/run", status="published", timeout_s=240,
                allowed_networks=("127.0.0.1/32",))))
            tokens[name] = gw.store.tokens.create(tenant_id="default", role="agent",
                                                  agent=name)[1]
        return tokens


def test_call_backs_landing_in_either_worker_stop_on_the_cycle(db_url: str,
                                                               tmp_path: Path) -> None:
    hits: dict[str, list[Any]] = {"a1": [], "a2": []}
    tokens: dict[str, str] = {}
    side = Side()
    a1, a2 = _handlers(side, tokens, hits)
    with serving(a1) as u1, serving(a2) as u2:
        tokens.update(_setup(db_url, {"a1": u1, "a2": u2}))
        with _serve(db_url, tmp_path, side):
            outer = httpx.post(f"http://127.0.0.1:{side.port}/tools/execute",
                               timeout=280, headers={"Authorization": f"Bearer {tokens['a1']}"},
                               json={"tool": "agent_call", "arguments": {
                                   "target_agent_slug": "a2", "input": "go"}})
    assert outer.status_code == 200, outer.text
    assert outer.json()["status"] == "succeeded", outer.json()
    assert len(hits["a2"]) == 1
    run = hits["a2"][0]
    landed = {pid for pid, _ in run["backs"]}
    assert run["outer"] in side.workers, run
    assert landed - {run["outer"], None}, f"no call-back reached the other worker: {run}"
    refused = [(b["status"], b.get("reason")) for _, b in run["backs"]]
    assert refused == [("denied", "agent_call_cycle")] * len(run["backs"]), run["backs"]
    assert len(refused) >= CALL_BACKS
    assert hits["a1"] == []  # a1 never ran: the loop was cut in both workers

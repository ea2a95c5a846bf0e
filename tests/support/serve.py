"""One real ``toolkeeper serve`` subprocess (SQLite, loopback) for tests that talk to it
through the client: a config, tokens made in the store before it starts, every wait
bounded."""

from __future__ import annotations

import socket
import subprocess
import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import httpx

from tests.support.processes import child_env, stop
from tests.support.waiting import wait_until
from toolkeeper import Gateway


@dataclass(frozen=True)
class Server:
    url: str
    tokens: dict[str, str]
    work: Path
    db: str
    """The store's URL (another process may open it: a second replica, the CLI)."""


@dataclass(frozen=True)
class TokenSpec:
    """A token to create before the server starts: its role, and its agent if any."""

    role: str
    agent: str | None = None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _healthy(url: str, proc: subprocess.Popen[bytes], log: Path) -> bool:
    if proc.poll() is not None:
        raise RuntimeError(f"serve exited: {log.read_text()[-2000:]}")
    return httpx.get(url + "/healthz", timeout=1).status_code == 200


def _tokens(db: str, config: Path, specs: Mapping[str, TokenSpec]) -> dict[str, str]:
    with Gateway.open(db, config=config) as gw:
        return {name: gw.store.tokens.create(tenant_id="default", role=spec.role,
                                             agent=spec.agent)[1]
                for name, spec in specs.items()}


@contextmanager
def serving_toolkeeper(work: Path, config: str, tokens: Mapping[str, TokenSpec],
                       **env: str) -> Iterator[Server]:
    """``toolkeeper serve`` over ``sqlite:///<work>/tk.db`` with ``config`` applied, run in
    ``work`` (``env`` added to its environment; the repository root is on its path, so
    ``native: tests.…`` tools load), until the block ends. ``tokens``: name → spec."""
    db = f"sqlite:///{work}/tk.db"
    (work / "toolkeeper.yaml").write_text(config)
    made = _tokens(db, work / "toolkeeper.yaml", tokens)
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    log = work / "serve.log"
    with log.open("wb") as out:  # a file, not a pipe nobody drains
        proc = subprocess.Popen(
            [sys.executable, "-m", "toolkeeper.cli", "serve", "--port", str(port)],
            env=child_env(TOOLKEEPER_DATABASE_URL=db, **env), cwd=work, stdout=out,
            stderr=subprocess.STDOUT)
    try:
        wait_until(partial(_healthy, url, proc, log), timeout=60, what=f"{url}/healthz answers",
                   ignoring=(httpx.HTTPError,))
        yield Server(url, made, work, db)
    finally:
        stop(proc)


@contextmanager
def serving_demo(work: Path) -> Iterator[tuple[int, Path]]:
    """What ``make run`` starts (``serve --demo`` over ``work/toolkeeper.db``) on a free
    port, once it answers ``/healthz``: the port and the file holding what it printed.
    Stopped on exit."""
    port, log = free_port(), work / "serve.log"
    env = child_env()
    for name in ("TOOLKEEPER_DATABASE_URL", "TOOLKEEPER_CONFIG", "TOOLKEEPER_SECRETS_BACKEND"):
        env.pop(name, None)
    with log.open("wb") as out:
        proc = subprocess.Popen([sys.executable, "-m", "toolkeeper.cli", "serve", "--demo",
                                 "--port", str(port)], env=env, cwd=work, stdout=out,
                                stderr=subprocess.STDOUT)
    try:
        wait_until(lambda: httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=2)
                   .status_code == 200, timeout=60, what="serve --demo answers /healthz",
                   ignoring=(httpx.HTTPError,))
        yield port, log
    finally:
        stop(proc)

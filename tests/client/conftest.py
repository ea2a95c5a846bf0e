"""One real ``toolkeeper serve`` (SQLite, loopback) for the client tests, with an agent per
behaviour and an approver; every wait bounded."""

from __future__ import annotations

import socket
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import httpx
import pytest

from tests.support.processes import child_env
from tests.support.waiting import wait_until
from toolkeeper import Gateway

CONFIG = """\
version: 1
tools:
  - native: tests.client.client_tools:stamp
  - native: tests.client.client_tools:pay
  - native: tests.client.client_tools:echo
  - native: tests.client.client_tools:Ledger
    overrides: {categories: [finance]}
  - native: tests.client.client_tools:wipe
    overrides: {categories: [danger], confirmation_prompt: "Really wipe?"}
  - native: tests.client.client_tools:vault
  - native: tests.client.client_tools:broken
profiles:
  - {name: worker, autonomy: 2, activations: [{tool: stamp}, {tool: echo}]}
  - {name: payer, autonomy: 0, activations: [{tool: pay}]}
  - {name: careful, autonomy: 0, activations: [{tool: echo}]}
  - name: burst
    autonomy: 2
    activations: [{tool: echo}]
    limits: {rate: [{limit: 1, window_s: 1, per: agent}]}
  - name: capped
    autonomy: 2
    activations: [{tool: echo}]
    limits: {rate: [{limit: 1, window_s: 3600, per: agent}]}
  - name: boxed
    autonomy: 2
    activations: [{tool: ledger}, {tool: wipe}, {tool: echo}, {tool: vault}]
  - {name: batcher, autonomy: 3, activations: [{tool: ledger}, {tool: broken}]}
agents:
  - {name: worker-bot, profile: worker}
  - {name: pay-bot, profile: payer}
  - {name: careful-bot, profile: careful}
  - {name: burst-bot, profile: burst}
  - {name: capped-bot, profile: capped}
  - {name: box-bot, profile: boxed}
  - {name: batch-bot, profile: batcher}
"""


@dataclass(frozen=True)
class Server:
    url: str
    tokens: dict[str, str]
    work: Path
    db: str
    """The store's URL (another process may open it: a second replica, the CLI)."""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _healthy(url: str, proc: subprocess.Popen[bytes], log: Path) -> bool:
    if proc.poll() is not None:
        raise RuntimeError(f"serve exited: {log.read_text()[-2000:]}")
    return httpx.get(url + "/healthz", timeout=1).status_code == 200


@pytest.fixture(scope="package")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    work = tmp_path_factory.mktemp("client-server")
    db = f"sqlite:///{work}/tk.db"
    (work / "toolkeeper.yaml").write_text(CONFIG)
    with Gateway.open(db, config=work / "toolkeeper.yaml") as gw:
        tokens = {name: gw.store.tokens.create(tenant_id="default", role="agent",
                                               agent=name)[1]
                  for name in ("worker-bot", "pay-bot", "careful-bot", "burst-bot",
                               "capped-bot", "box-bot", "batch-bot")}
        tokens["approver"] = gw.store.tokens.create(tenant_id="default", role="approver")[1]
        tokens["admin"] = gw.store.tokens.create(tenant_id="default", role="admin")[1]
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    log = work / "serve.log"
    with log.open("wb") as out:  # a file, not a pipe nobody drains
        proc = subprocess.Popen(
            [sys.executable, "-m", "toolkeeper.cli", "serve", "--port", str(port)],
            env=child_env(TOOLKEEPER_DATABASE_URL=db), cwd=work, stdout=out,
            stderr=subprocess.STDOUT)
    try:
        wait_until(partial(_healthy, url, proc, log), timeout=60, what=f"{url}/healthz answers",
                   ignoring=(httpx.HTTPError,))
        yield Server(url, tokens, work, db)
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=5)

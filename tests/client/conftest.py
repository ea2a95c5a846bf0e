"""One real ``toolkeeper serve`` (SQLite, loopback) for the client tests, with an agent per
behaviour and an approver; every wait bounded."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.serve import Server, TokenSpec, free_port, serving_toolkeeper

__all__ = ["Server", "free_port"]  # the client tests import them from here

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


_AGENTS = ("worker-bot", "pay-bot", "careful-bot", "burst-bot", "capped-bot", "box-bot",
           "batch-bot")


@pytest.fixture(scope="package")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    tokens = {name: TokenSpec("agent", name) for name in _AGENTS}
    tokens |= {"approver": TokenSpec("approver"), "admin": TokenSpec("admin")}
    with serving_toolkeeper(tmp_path_factory.mktemp("client-server"), CONFIG, tokens) as srv:
        yield srv

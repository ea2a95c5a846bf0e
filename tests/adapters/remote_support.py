"""The adapters against a real ``toolkeeper serve`` (issue 9 item 4, remote half): one
server per test module (the ``remote`` fixture in this folder's conftest), its tools from
:mod:`tests.adapters.remote_tools`, an agent token and an approver token.

``lookup`` is pure and allowed; ``transfer`` is irreversible and high risk, which profile
``p`` gates with ``approve`` — and with ``deny`` once an adjuster raises an amount over 1000
to critical; ``post_note`` is irreversible and allowed; ``send_email`` is previewed first (its
activation gates it with ``preview``); ``deploy`` requires confirmation. The server outlives
the tests of a module, so each test names its own accounts, notes and threads
(:func:`unique`), and counts the executions of those only.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from tests.support.serve import Server, TokenSpec, serving_toolkeeper
from toolkeeper import ApprovalStatus
from toolkeeper.client import Approval, Client, Outcome

CONFIG = """\
version: 1
tools:
  - native: tests.adapters.remote_tools:lookup
  - native: tests.adapters.remote_tools:transfer
  - native: tests.adapters.remote_tools:post_note
  - native: tests.adapters.remote_tools:send_email
  - native: tests.adapters.remote_tools:deploy
profiles:
  - name: p
    autonomy: 2
    activations:
      - {tool: lookup}
      - {tool: transfer}
      - {tool: post_note}
      - {tool: send_email, gates: {run: preview}}
      - {tool: deploy}
    gates: {high: {2: approve}, critical: {2: deny}}
    adjusters:
      - {name: big, tools: [transfer], raise_to: critical,
         when: [{arg: amount, op: gt, value: 1000}]}
  - name: nothing  # the server that denies everything (issue 29 "bad input")
    autonomy: 2
    activations: [{tool: lookup}, {tool: transfer}, {tool: post_note}, {tool: deploy}]
    gates: {low: {2: deny}, medium: {2: deny}, high: {2: deny}, critical: {2: deny}}
agents:
  - {name: bot, profile: p}
  - {name: blocked, profile: nothing}
"""
AGENT = "bot"


@dataclass(frozen=True)
class Remote:
    """The running server, its tokens (``bot``: the agent's, ``approver``: a person's)."""

    server: Server
    ledger: Path

    @property
    def url(self) -> str:
        return self.server.url

    @property
    def agent_token(self) -> str:
        return self.server.tokens[AGENT]

    @property
    def approver_token(self) -> str:
        return self.server.tokens["approver"]

    def approval(self, approval_id: str) -> Approval:
        """The approval as the server shows it to a person."""
        with Client(self.url, self.approver_token, timeout=10) as person:
            return person.approvals.get(approval_id)

    def status(self, approval_id: str) -> ApprovalStatus:
        return ApprovalStatus(self.approval(approval_id).status)

    def outcome_of(self, approval_id: str) -> Outcome:
        """The recorded call that consumed an approval (the one that ran)."""
        call_id = self.approval(approval_id).consumed_by
        assert call_id is not None
        with Client(self.url, self.approver_token, timeout=10) as person:
            return person.calls.get(call_id)

    def executions(self, tool: str, mark: str) -> int:
        """How often ``tool`` ran for ``mark`` (its first argument), read from the file
        the server process appends to."""
        log = self.ledger / f"{tool}.log"
        return log.read_text().splitlines().count(mark) if log.exists() else 0


@contextmanager
def running(work: Path) -> Iterator[Remote]:
    ledger = work / "ledger"
    ledger.mkdir()
    tokens = {AGENT: TokenSpec("agent", AGENT), "approver": TokenSpec("approver"),
              "blocked": TokenSpec("agent", "blocked")}
    with serving_toolkeeper(work, CONFIG, tokens,
                            TOOLKEEPER_TEST_LEDGER=str(ledger)) as server:
        yield Remote(server, ledger)


def unique(prefix: str) -> str:
    """A name no other test of the module uses (accounts, notes, threads)."""
    return f"{prefix}-{uuid.uuid4().hex[:10]}"

"""The agent calls running now, in every process on the gateway's store, so that
``agent_call``'s cycle and depth guard does not depend on the callee sending
``Toolkeeper-Agent-Chain`` back.

While agent A's ``agent_call`` runs agent B of tenant T, the store holds a row
``(T, B, chain)`` (the agents the call passed through, A last; ``toolkeeper.store.
agent_calls``), written before anything is sent and deleted when the call ends. A call
that B makes in the meantime (with B's own token, over REST or MCP), in whichever worker
(``serve --workers N``) or replica on the same store it lands, is counted as part of every
chain now running B: the guard checks its target against each of them and counts the depth
of the longest. The chain header a callee sends, if any, is one more candidate: it can add
agents to what the gateway knows, never take any away.

What the gateway cannot know, said plainly:

* which of B's calls belong to the run A asked for: while any call runs B, every call B
  makes is attributed to it, so an unrelated call of B in that window may be refused
  (``agent_call_cycle``/``agent_call_depth``) — a refusal, never an escape;
* a callee that calls back under another agent's token (of its tenant) than its own;
* a callee that answers first and calls back later: the run it was part of is over, so
  the later call starts a chain of its own (rate limits bound such a loop);
* gateways on different stores (two SQLite files, two databases): each knows its own
  calls only. There only the header, when the callee sends it, carries the chain.

A record that cannot be written stops the call before anything is sent (fail closed); one
that cannot be deleted is logged and expires. A process that dies mid-call leaves its row:
it keeps counting (refusals, never escapes) until ``expires_at`` = start + the call's
timeout + :data:`MARGIN_S`, then stops. The cost is ``agent_call``'s alone: one read of the
caller's chains, one insert and one delete per call; no other call reads or writes the
table.

There is no in-memory variant: every gateway has a store (SQLite files only, PostgreSQL),
so one record serves one process and many alike, and there is one thing to test. A
``ToolContext`` made without a gateway (no ``agent_calls``) has only the header to go by.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager

from toolkeeper.store.agent_calls import AgentCallRepo

log = logging.getLogger("toolkeeper")

MARGIN_S = 30.0
"""How long a row outlives its call's timeout: a crashed writer's row stops counting then
(well above the clock skew between replicas, well below a human's retry)."""


class InFlight:
    """The chains of the agent calls in flight on the store, by (tenant, callee)."""

    def __init__(self, repo: AgentCallRepo) -> None:
        self._repo = repo

    def chains_into(self, tenant_id: str, agent: str) -> list[tuple[str, ...]]:
        """The chains of the calls now running ``agent`` of ``tenant_id`` in any process
        on the store (each the agents passed through, the caller last); empty when none
        is."""
        return self._repo.chains_into(tenant_id, agent)

    @contextmanager
    def running(self, tenant_id: str, agent: str, chain: tuple[str, ...],
                timeout_s: float) -> Iterator[None]:
        """Record a call of ``agent`` along ``chain`` for as long as the block runs (at
        most ``timeout_s`` + :data:`MARGIN_S` if this process dies in it)."""
        row = self._repo.start(tenant_id, agent, chain, timeout_s + MARGIN_S)
        try:
            yield
        finally:
            try:
                self._repo.end(row)
            except Exception:  # the callee has answered: its row expires by itself
                log.warning("could not delete the in-flight agent call %s (it stops "
                            "counting at its expiry)", row, exc_info=True)

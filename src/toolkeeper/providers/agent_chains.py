"""The agent calls a gateway process is making right now, so that ``agent_call``'s cycle and
depth guard does not depend on the callee sending ``Toolkeeper-Agent-Chain`` back.

While agent A's ``agent_call`` runs agent B of tenant T, the process records
``(T, B) -> chain`` (the agents the call passed through, A last). A call that B makes in
the meantime (with B's own token, over REST or MCP) is counted as part of every chain now
running B: the guard checks its target against each of them and counts the depth of the
longest. The chain header a callee sends, if any, is one more candidate: it can add agents
to what the gateway knows, never take any away.

What the gateway cannot know, said plainly:

* which of B's calls belong to the run A asked for: while any call runs B, every call B
  makes is attributed to it, so an unrelated call of B in that window may be refused
  (``agent_call_cycle``/``agent_call_depth``) — a refusal, never an escape;
* a callee that calls back under another agent's token (of its tenant) than its own;
* a callee that answers first and calls back later: the run it was part of is over, so
  the later call starts a chain of its own (rate limits bound such a loop);
* a call-back that lands in another process (``serve --workers N``, several replicas):
  the record is this process's memory. There only the header, when the callee sends it,
  carries the chain.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager


class InFlight:
    """The chains of the agent calls in flight in this process, by (tenant, callee)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._running: dict[tuple[str, str], list[tuple[str, ...]]] = {}

    def chains_into(self, tenant_id: str, agent: str) -> list[tuple[str, ...]]:
        """The chains of the calls now running ``agent`` of ``tenant_id`` (each the agents
        passed through, the caller last); empty when none is."""
        with self._lock:
            return list(self._running.get((tenant_id, agent), ()))

    @contextmanager
    def running(self, tenant_id: str, agent: str, chain: tuple[str, ...]) -> Iterator[None]:
        """Record a call of ``agent`` along ``chain`` for as long as the block runs."""
        key = (tenant_id, agent)
        with self._lock:
            self._running.setdefault(key, []).append(chain)
        try:
            yield
        finally:
            with self._lock:
                chains = self._running[key]
                chains.remove(chain)
                if not chains:
                    del self._running[key]

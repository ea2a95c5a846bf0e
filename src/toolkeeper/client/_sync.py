"""The sync face: :class:`Client` runs the async face on its own event loop thread, so it
works from any thread, also one whose own event loop is running (a framework's sync tool)."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine, Mapping, Sequence
from datetime import datetime
from typing import Any, Literal, TypeVar

import httpx

from toolkeeper.client._async import AsyncClient, BatchMode
from toolkeeper.client._models import (
    AgentTools,
    Approval,
    AuditPage,
    AuditVerification,
    Outcome,
    Superseded,
    TurnDecided,
)
from toolkeeper.client.backend import RemoteBackend
from toolkeeper.model.call import CallRequest, CallResult
from toolkeeper.toolbox.toolbox import Toolbox

T = TypeVar("T")


class _Loop:
    """An event loop on a daemon thread, owned by one :class:`Client`."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, daemon=True,
                                        name="toolkeeper-client")
        self._thread.start()

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result()

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(timeout=5)
        if not self.loop.is_running():
            self.loop.close()


class Calls:
    """Recorded calls (``/calls``)."""

    def __init__(self, tk: AsyncClient, loop: _Loop) -> None:
        self._a, self._run = tk.calls, loop.run

    def get(self, call_id: str) -> Outcome:
        return self._run(self._a.get(call_id))

    def list(self, *, status: str | None = None, limit: int = 100) -> list[Outcome]:
        return self._run(self._a.list(status=status, limit=limit))

    def resolve(self, call_id: str, status: Literal["succeeded", "failed"], *,
                output: Any = None, note: str | None = None) -> Outcome:
        return self._run(self._a.resolve(call_id, status, output=output, note=note))


class Approvals:
    """Approvals: the inbox, decisions (approver token), confirmations (agent token)."""

    def __init__(self, tk: AsyncClient, loop: _Loop) -> None:
        self._a, self._run = tk.approvals, loop.run

    def list(self, *, status: str | None = "pending", limit: int = 100) -> list[Approval]:
        return self._run(self._a.list(status=status, limit=limit))

    def get(self, approval_id: str) -> Approval:
        return self._run(self._a.get(approval_id))

    def approve(self, approval_id: str, *, arguments: dict[str, Any] | None = None,
                note: str | None = None) -> Approval:
        return self._run(self._a.approve(approval_id, arguments=arguments, note=note))

    def deny(self, approval_id: str, *, note: str | None = None) -> Approval:
        return self._run(self._a.deny(approval_id, note=note))

    def confirm(self, approval_id: str) -> Approval:
        return self._run(self._a.confirm(approval_id))

    def wait(self, approval_id: str, timeout_s: float = 10.0) -> Approval:
        return self._run(self._a.wait(approval_id, timeout_s))

    def wait_for_decision(self, approval_id: str, timeout_s: float) -> Approval:
        return self._run(self._a.wait_for_decision(approval_id, timeout_s))


class Discovery:
    """What an agent may call, and what it could have and why not."""

    def __init__(self, tk: AsyncClient, loop: _Loop) -> None:
        self._a, self._run = tk.discovery, loop.run

    def enabled(self, agent: str) -> AgentTools:
        return self._run(self._a.enabled(agent))

    def unavailable(self, agent: str) -> AgentTools:
        return self._run(self._a.unavailable(agent))


class Audit:
    """The audit trail (operator or approver token)."""

    def __init__(self, tk: AsyncClient, loop: _Loop) -> None:
        self._a, self._run = tk.audit, loop.run

    def list(self, *, call_id: str | None = None, agent: str | None = None,
             tool: str | None = None, types: Sequence[str] | None = None,
             since: datetime | None = None, until: datetime | None = None,
             cursor: int = 0, limit: int = 100) -> AuditPage:
        return self._run(self._a.list(call_id=call_id, agent=agent, tool=tool, types=types,
                                      since=since, until=until, cursor=cursor, limit=limit))

    def verify(self) -> AuditVerification:
        return self._run(self._a.verify())


class Client:
    """The REST client, sync face (the same methods as :class:`AsyncClient`, blocking).
    ``with Client(url, token) as tk: tk.execute("lookup_invoice", {"invoice_id": "I-1"})``"""

    def __init__(self, base_url: str, token: str, *, timeout: float = 30.0,
                 max_retries: int = 3, max_wait_s: float = 30.0,
                 transport: httpx.AsyncBaseTransport | None = None) -> None:
        self._loop = _Loop()
        self._async = AsyncClient(base_url, token, timeout=timeout, max_retries=max_retries,
                                  max_wait_s=max_wait_s, transport=transport)
        self.calls = Calls(self._async, self._loop)
        self.approvals = Approvals(self._async, self._loop)
        self.discovery = Discovery(self._async, self._loop)
        self.audit = Audit(self._async, self._loop)

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        if self._loop.loop.is_closed():
            return
        self._loop.run(self._async.aclose())
        self._loop.close()

    def toolbox_backend(self, *, approver_token: str | None = None) -> RemoteBackend:
        """The Toolbox backend over this client: requests run on the client's own loop."""
        return RemoteBackend(self._async, approver_token=approver_token, loop=self._loop.loop)

    def toolbox(self, agent: str, *, approver_token: str | None = None) -> Toolbox:
        """See :meth:`AsyncClient.toolbox`; its ``*_sync`` methods block, the async ones
        may be awaited from any event loop."""
        return Toolbox(self.toolbox_backend(approver_token=approver_token), agent=agent)

    def execute(self, tool: str, arguments: Any = None, *, action: str | None = None,
                idempotency_key: str | None = None, turn_group_id: str | None = None,
                **fields: Any) -> CallResult:
        """See :meth:`AsyncClient.execute`."""
        return self._loop.run(self._async.execute(
            tool, arguments, action=action, idempotency_key=idempotency_key,
            turn_group_id=turn_group_id, **fields))

    def call_or_raise(self, tool: str, arguments: Any = None, **kw: Any) -> CallResult:
        """See :meth:`AsyncClient.call_or_raise`."""
        return self._loop.run(self._async.call_or_raise(tool, arguments, **kw))

    def execute_batch(self, requests: Sequence[CallRequest | Mapping[str, Any]], *,
                      mode: BatchMode = "sequential",
                      agent: str | None = None) -> list[CallResult]:
        return self._loop.run(self._async.execute_batch(requests, mode=mode, agent=agent))

    def supersede(self, turn_group_id: str) -> Superseded:
        return self._loop.run(self._async.supersede(turn_group_id))

    def decide_turn(self, turn_group_id: str, decision: str, **kw: Any) -> TurnDecided:
        """See :meth:`AsyncClient.decide_turn`."""
        return self._loop.run(self._async.decide_turn(turn_group_id, decision, **kw))

    def wait_for_decision(self, approval_id: str, timeout_s: float) -> Approval:
        return self._loop.run(self._async.wait_for_decision(approval_id, timeout_s))

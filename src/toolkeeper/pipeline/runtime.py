"""The dependencies every step reads, constructed once per gateway and injected."""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from toolkeeper.bounds import TenantBounds
from toolkeeper.model.enums import Mode
from toolkeeper.observability.metrics import Metrics
from toolkeeper.pipeline.audit_sink import AuditSink
from toolkeeper.pipeline.catalog import Catalog
from toolkeeper.pipeline.health import HealthBoard
from toolkeeper.pipeline.limiters import ConcurrencyGroups, RateLimiter, TurnCounter
from toolkeeper.providers.agent_chains import InFlight
from toolkeeper.secrets.base import SecretsStore
from toolkeeper.secrets.credentials import TenantCredentials
from toolkeeper.secrets.redact import Redactor
from toolkeeper.store import Store
from toolkeeper.store.records import ApprovalRecord


@dataclass(slots=True, kw_only=True)
class Settings:
    """Gateway settings (validated by the config layer)."""

    mode: Mode = Mode.PRODUCTION
    max_payload_bytes: int = 1_000_000
    approval_ttl: timedelta = timedelta(hours=24)
    outcome_ttl: timedelta = timedelta(hours=24)
    stale_grace: timedelta = timedelta(seconds=30)
    """Added to a tool's timeout before an in_progress outcome is presumed dead."""
    outcome_retention: timedelta | None = timedelta(hours=24)
    """How long a finished outcome is kept after its key expired (``outcome_ttl``) before
    the retention sweep deletes it; ``None`` keeps them forever."""
    audit_retention: timedelta | None = None
    """Audit events older than this are deleted from the start of each chain (the chain
    stays verifiable from there); ``None`` (the default) keeps every event."""
    retention_every_s: float = 300.0
    """How often the retention sweeps run (in each process, on a thread of their own)."""
    recovery_every_s: float = 30.0
    """How often stale ``in_progress`` outcomes are looked for (besides start-up)."""
    retry_base_s: float = 0.05
    retry_max_s: float = 2.0
    mcp_resync_s: float = 300.0
    """How often upstream MCP servers are listed again to catch changed definitions
    (besides start-up, apply, reconnects and their own ``list_changed``)."""
    audit_level: str = "decisions"
    """``decisions``: every decision and outcome is audited, and the terminal event of a
    call carries its risk, gate and argument digest; ``steps`` also records pass-through
    steps (``call.requested``, ``gate.allowed``)."""
    audit_durability: str = "transactional"
    """``transactional``: a recorded call's audit events commit in its outcome's own
    transactions (durable with it). ``batched``: they go through the background writer
    like every other event (written within ``max_delay``, ~50 ms) — faster, but a crash can
    lose the last events of calls whose outcomes are durable."""
    audit_arguments: bool = False
    """Tenant opt-in: store (redacted) arguments in audit events, not only their digest."""
    artifacts_dir: str | None = None
    """The operator's artifacts directory (``artifact`` tools; config ``artifacts.dir``)."""
    tenant_bounds: TenantBounds = field(default_factory=TenantBounds)
    """The operator's ceiling for host paths, networks and commands a tenant writes through
    REST (``toolkeeper.bounds``); a mapping is validated into it. Empty: tenants widen
    nothing."""
    retrieval_max_top_k: int = 50
    """The most chunks one retrieval query returns (a tool's policy may lower it)."""
    retrieval_max_document_chars: int = 200_000
    """The longest document one ingest accepts (characters)."""
    retrieval_max_batch_documents: int = 100
    """The most documents one ingest accepts."""
    recent_calls_max: int = 1000
    """Calls kept per tenant in the recent-calls log (``GET /calls/recent``; oldest
    dropped); ``0`` keeps none."""
    call_stats: bool = True
    """Count every finished call per minute and hour (``toolkeeper.store.stats``) for the
    console's overview (``GET /stats/overview``); ``False`` counts nothing."""
    max_pending_approvals: int = 1000
    """Approvals one agent may have waiting for a human at once (unexpired, pending); a
    call that would ask for one more stops with ``approvals_pending_limit``. ``0``: no
    cap."""

    def __post_init__(self) -> None:
        self.mode = Mode(self.mode)
        if not isinstance(self.tenant_bounds, TenantBounds):
            self.tenant_bounds = TenantBounds.model_validate(self.tenant_bounds)
        if self.audit_level not in ("decisions", "steps"):
            raise ValueError("audit_level must be 'decisions' or 'steps'")
        if self.audit_durability not in ("transactional", "batched"):
            raise ValueError("audit_durability must be 'transactional' or 'batched'")
        if self.recent_calls_max < 0:
            raise ValueError("recent_calls_max must be 0 or more")
        if self.max_pending_approvals < 0:
            raise ValueError("max_pending_approvals must be 0 or more")
        if self.retention_every_s <= 0:
            raise ValueError("retention_every_s must be more than 0")


@dataclass(slots=True, kw_only=True)
class Listeners:
    """Callbacks the faces install (e.g. the server's approval webhook). They run after the
    fact on the calling thread and must not block: hand work to a queue."""

    approval_created: list[Callable[[ApprovalRecord], None]] = field(default_factory=list)
    budget_warned: list[Callable[[str, dict[str, Any]], None]] = field(default_factory=list)
    """``(tenant, warning)`` when a budget reaches its warning threshold (e.g. the webhook)."""
    catalog_reloaded: list[Callable[[], None]] = field(default_factory=list)
    """After each new snapshot of the definitions (any thread; e.g. MCP ``list_changed``)."""

    def approval(self, rec: ApprovalRecord) -> None:
        for fn in self.approval_created:
            try:
                fn(rec)
            except Exception:  # a listener's failure never fails the call
                logging.getLogger("toolkeeper").exception("approval listener failed")

    def budget(self, tenant_id: str, warning: dict[str, Any]) -> None:
        for fn in self.budget_warned:
            try:
                fn(tenant_id, warning)
            except Exception:  # a listener's failure never fails the call
                logging.getLogger("toolkeeper").exception("budget listener failed")

    def on_reload(self, fn: Callable[[], None]) -> Callable[[], None]:
        self.catalog_reloaded.append(fn)

        def remove() -> None:
            if fn in self.catalog_reloaded:
                self.catalog_reloaded.remove(fn)
        return remove

    def reloaded(self) -> None:
        for fn in self.catalog_reloaded:
            try:
                fn()
            except Exception:  # a listener's failure never fails the reload
                logging.getLogger("toolkeeper").exception("reload listener failed")


class LoopCalls(threading.local):
    """The calls in flight on this thread's event loop (one loop per thread). With company,
    a claim or finish waits for its commit off the loop (the group commit's drainer), so
    the others go on and their writes share the next commit; alone, it commits inline (a
    thread hop would only add latency)."""

    n = 0
    served = False
    """A server's loop: its next requests may be waiting in the loop's queue, not started
    (and so not counted) until the running call lets go of the loop."""

    async def company(self) -> bool:
        if self.n > 1:
            return True
        if not self.served:
            return False
        await asyncio.sleep(0)  # one turn of the loop: waiting requests start, and count
        return self.n > 1


@dataclass(slots=True, kw_only=True)
class Runtime:
    store: Store
    catalog: Catalog
    sink: AuditSink
    secrets: SecretsStore | None
    redactor: Redactor
    metrics: Metrics
    health: HealthBoard
    rates: RateLimiter
    turns: TurnCounter
    concurrency: ConcurrencyGroups
    settings: Settings = field(default_factory=Settings)
    listeners: Listeners = field(default_factory=Listeners)
    upstreams: Any = None
    """Connections to upstream MCP servers (created on first use by the gateway)."""
    credentials: TenantCredentials | None = None
    """Tenants' own credentials (with the embedded secrets store)."""
    agent_calls: InFlight | None = None
    """The agent calls in flight on the store (every process's), for ``agent_call``'s
    chain guard; the gateway sets it."""
    loop_calls: LoopCalls = field(default_factory=LoopCalls)

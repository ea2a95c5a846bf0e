"""Approval webhooks: each tenant may name one URL that hears ``approval.created``, whichever
face created the approval (REST, MCP, the CLI or the library), and ``budget.warning`` when one
of its budgets reaches its warning threshold (``{event, tenant_id, timestamp, budget}``).

The tenant's setting (registry setting ``webhooks:{tenant}``) is managed by its admins with
``PUT|GET|DELETE /settings/webhook`` (:mod:`toolkeeper.api.webhook`). Deliveries are JSON
``{event, tenant_id, timestamp, approval}`` with ``X-Toolkeeper-Signature: sha256=<hex
HMAC-SHA256 of the raw body>`` and ``X-Toolkeeper-Timestamp`` (the same as the body's
``timestamp``, so the signature covers it and a receiver can refuse replays). The gateway
owns one :class:`WebhookNotifier`; its worker thread starts with the first approval and is
stopped when the gateway closes (after at most 5 s of delivering what is queued, so a
short-lived CLI still notifies). It sends from a bounded queue — a full queue drops the
event and counts it — with a 5 s timeout per attempt and 3 retries with exponential backoff
on network errors, 429 and 5xx. The SSRF guard (:mod:`toolkeeper.netguard`) applies to
every delivery; a tenant reaches a private or loopback receiver only by listing its network
(``allow_networks``), and only within the operator's ceiling (``tenant_bounds.networks``,
see :mod:`toolkeeper.bounds`; checked when set and again before each delivery). The URL is
refused when set if it names a refused address however spelled (``localhost``, ``127.1``,
``2130706433``…): the route resolves it as the delivery will
(:meth:`~toolkeeper.netguard.NetGuard.check_destination`). Nothing
here ever blocks or fails the call that created the approval.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import logging
import queue
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Any

import orjson
from pydantic import BaseModel, ConfigDict, Field

from toolkeeper.bounds import HostNetworks, TenantBounds, excess
from toolkeeper.errors import ToolDenied, ToolError
from toolkeeper.model.reasons import Reason
from toolkeeper.netguard import NetGuard, Resolver
from toolkeeper.secrets.base import parse_ref
from toolkeeper.secrets.credentials import Getter
from toolkeeper.services.approvals import approval_json
from toolkeeper.store.records import ApprovalRecord

if TYPE_CHECKING:
    from toolkeeper.pipeline.runtime import Listeners

log = logging.getLogger("toolkeeper.webhook")
EVENT = "approval.created"
SIGNATURE_HEADER = "X-Toolkeeper-Signature"
TIMESTAMP_HEADER = "X-Toolkeeper-Timestamp"


def setting_key(tenant_id: str) -> str:
    """The registry setting holding a tenant's webhook."""
    return f"webhooks:{tenant_id}"


def sign(secret: str, body: bytes) -> str:
    """The signature header value: ``sha256=`` + hex HMAC-SHA256 of ``body``."""
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


class WebhookConfig(BaseModel):
    """A tenant's webhook as stored (the secret only as a reference)."""

    model_config = ConfigDict(extra="forbid")

    url: str = Field(min_length=1, max_length=2000)
    secret_ref: str = Field(max_length=300)
    """``${secret:connector/key}``: one of the tenant's own credentials, read at send time
    (a tenant-written setting, so never an operator's platform secret)."""
    allow_hosts: list[str] = Field(default_factory=list, max_length=100)
    """When non-empty, the only host names the URL may use."""
    allow_networks: Annotated[list[str], HostNetworks()] = Field(default_factory=list,
                                                                  max_length=100)
    """Private/loopback networks the receiver may resolve to (CIDR), within the operator's
    ceiling (``tenant_bounds.networks``)."""

    def guard(self, resolver: Resolver | None = None) -> NetGuard:
        """The SSRF guard of this webhook (redirects are not followed)."""
        return NetGuard(allowed_hosts=self.allow_hosts, allowed_networks=self.allow_networks,
                        max_redirects=0, resolver=resolver)


@dataclass(slots=True, frozen=True)
class Delivery:
    """What became of one event (kept in :attr:`WebhookNotifier.recent`)."""

    approval_id: str
    tenant_id: str
    ok: bool
    attempts: int
    error: str | None = None


@dataclass(frozen=True, slots=True)
class Notice:
    """An event other than an approval (``budget.warning``): sent as ``{event, tenant_id,
    timestamp, <key>: payload}``, signed the same way."""

    id: str
    tenant_id: str
    event: str
    key: str
    payload: dict[str, Any]


class _Retry(Exception):
    pass


class WebhookNotifier:
    """Sends ``approval.created`` to tenants' webhooks from one background thread."""

    def __init__(self, *, setting: Callable[[str], Any],
                 secrets: Callable[[str], Getter | None], bounds: TenantBounds,
                 queue_size: int = 1000, timeout_s: float = 5.0, retries: int = 3,
                 backoff_s: float = 0.5, resolver: Resolver | None = None) -> None:
        """``setting`` reads a registry setting; ``secrets(tenant)`` is how that tenant's
        secrets resolve (its own credentials only); ``bounds`` the operator's ceiling."""
        self._setting, self._secrets, self._bounds = setting, secrets, bounds
        self._queue: queue.Queue[ApprovalRecord | Notice] = queue.Queue(maxsize=queue_size)
        self.timeout_s, self.retries, self.backoff_s = timeout_s, retries, backoff_s
        self.resolver = resolver
        """How deliveries resolve names (``None``: the system resolver); the write-time check
        of ``PUT /settings/webhook`` resolves the same way."""
        self._stop = threading.Event()
        self._idle = threading.Condition()
        self._pending = 0
        self._starting = threading.Lock()
        self.dropped = 0
        """Events refused because the queue was full."""
        self.recent: deque[Delivery] = deque(maxlen=200)
        self._thread = threading.Thread(target=self._work, name="toolkeeper-webhooks",
                                        daemon=True)

    def listen(self, listeners: Listeners) -> None:
        """Hear every face's approvals and budget warnings (the gateway's listeners)."""
        listeners.approval_created.append(self.notify)
        listeners.budget_warned.append(self.notify_budget)

    def notify_budget(self, tenant_id: str, payload: dict[str, Any]) -> None:
        """A budget reached its warning threshold: ``budget.warning`` with the budget."""
        self.notify(Notice(f"budget:{uuid.uuid4().hex}", tenant_id, "budget.warning",
                           "budget", payload))

    def notify(self, rec: ApprovalRecord | Notice) -> None:
        """The gateway's ``approval_created`` listener: start the worker on the first
        event, then :meth:`submit` it."""
        with self._starting:
            if not self._thread.is_alive() and not self._stop.is_set():
                self._thread.start()
        self.submit(rec)

    def submit(self, rec: ApprovalRecord | Notice) -> None:
        """Queue one event; never blocks (a full queue drops it)."""
        if self._stop.is_set():
            return
        with self._idle:
            self._pending += 1
        try:
            self._queue.put_nowait(rec)
        except queue.Full:
            self._done()
            self.dropped += 1
            log.warning("webhook queue full: approval %s not notified", rec.id)

    def wait_idle(self, timeout: float) -> bool:
        """Wait (at most ``timeout`` s) until every queued event was handled."""
        with self._idle:
            return self._idle.wait_for(lambda: self._pending == 0, timeout)

    def close(self, timeout: float = 5.0) -> None:
        """Deliver what is queued for at most ``timeout`` s in all, then stop the worker
        (a daemon thread: an attempt still in flight never holds the process)."""
        deadline = time.monotonic() + timeout
        with self._starting:
            running = self._thread.is_alive()
            if not running:
                self._stop.set()  # never started: it never starts now
        if running:
            self.wait_idle(timeout)
            self._stop.set()  # the worker polls it at least twice a second
            self._thread.join(max(0.0, deadline - time.monotonic()))

    def _done(self) -> None:
        with self._idle:
            self._pending -= 1
            self._idle.notify_all()

    def _work(self) -> None:
        loop = asyncio.new_event_loop()
        try:
            while not self._stop.is_set():
                try:
                    rec = self._queue.get(timeout=0.5)
                except queue.Empty:
                    continue
                try:
                    self.recent.append(loop.run_until_complete(self._handle(rec)))
                except Exception:  # the worker must outlive any one delivery
                    log.exception("webhook delivery of approval %s crashed", rec.id)
                finally:
                    self._done()
        finally:
            loop.close()

    async def _handle(self, rec: ApprovalRecord | Notice) -> Delivery:
        raw = self._setting(setting_key(rec.tenant_id))
        if not raw:
            return Delivery(rec.id, rec.tenant_id, ok=True, attempts=0, error="no webhook")
        cfg = WebhookConfig.model_validate(raw)
        if excess(WebhookConfig, raw, self._bounds):
            # stored by another path than PUT /settings/webhook, or before the ceiling
            log.warning("webhook of tenant %s allows networks beyond the operator's ceiling",
                        rec.tenant_id)
            return Delivery(rec.id, rec.tenant_id, ok=False, attempts=0,
                            error=Reason.POLICY_EXCEEDS_BOUNDS)
        try:
            secret = await self._secret(cfg.secret_ref, rec.tenant_id)
        except ToolError as exc:
            log.warning("webhook of tenant %s: %s", rec.tenant_id, exc.message)
            return Delivery(rec.id, rec.tenant_id, ok=False, attempts=0, error=exc.reason)
        ts = str(int(time.time()))
        event, key, payload = ((rec.event, rec.key, rec.payload) if isinstance(rec, Notice)
                               else (EVENT, "approval", approval_json(rec)))
        body = orjson.dumps({"event": event, "tenant_id": rec.tenant_id, "timestamp": ts,
                             key: payload})
        headers = {"Content-Type": "application/json", SIGNATURE_HEADER: sign(secret, body),
                   TIMESTAMP_HEADER: ts, "X-Toolkeeper-Event": event,
                   "X-Toolkeeper-Delivery": str(uuid.uuid4())}
        return await self._send(rec, cfg, body, headers)

    async def _secret(self, ref: str, tenant_id: str) -> str:
        parsed = parse_ref(ref)
        get = self._secrets(tenant_id)
        if parsed is None or get is None:
            raise ToolError("secret_not_found", f"webhook secret {ref!r} cannot be resolved")
        return await get(*parsed)

    async def _send(self, rec: ApprovalRecord | Notice, cfg: WebhookConfig, body: bytes,
                    headers: dict[str, str]) -> Delivery:
        guard = cfg.guard(self.resolver)
        error = ""
        for attempt in range(1, self.retries + 2):
            try:
                await asyncio.wait_for(self._post(guard, cfg.url, body, headers),
                                       self.timeout_s)
                return Delivery(rec.id, rec.tenant_id, ok=True, attempts=attempt)
            except ToolDenied as exc:  # the SSRF guard: retrying cannot help
                error = exc.reason
                break
            except (_Retry, ToolError, TimeoutError, OSError) as exc:
                error = str(exc) or type(exc).__name__
            if attempt > self.retries or self._stop.wait(0):
                break
            await asyncio.sleep(self.backoff_s * 2 ** (attempt - 1))
        log.warning("webhook of tenant %s for approval %s failed: %s", rec.tenant_id, rec.id,
                    error)
        return Delivery(rec.id, rec.tenant_id, ok=False, attempts=attempt, error=error)

    async def _post(self, guard: NetGuard, url: str, body: bytes,
                    headers: dict[str, str]) -> None:
        async with guard.client(timeout=self.timeout_s) as client:
            request = client.build_request("POST", url, content=body, headers=headers)
            response = await guard.send(client, request)
            await response.aclose()
        if response.status_code == 429 or response.status_code >= 500:
            raise _Retry(f"HTTP {response.status_code}")
        if not 200 <= response.status_code < 300:
            raise ToolDenied("webhook_refused", f"HTTP {response.status_code}")

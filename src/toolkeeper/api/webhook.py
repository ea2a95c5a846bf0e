"""Approval webhooks: each tenant may name one URL that hears ``approval.created``.

The tenant's setting (registry setting ``webhooks:{tenant}``) is managed by its admins with
``PUT|GET|DELETE /settings/webhook``. Deliveries are JSON ``{event, tenant_id, timestamp,
approval}`` with ``X-Toolkeeper-Signature: sha256=<hex HMAC-SHA256 of the raw body>`` and
``X-Toolkeeper-Timestamp`` (the same as the body's ``timestamp``, so the signature covers it
and a receiver can refuse replays). They are sent by one worker thread from a bounded
queue — a full queue drops the event and counts it — with a 5 s timeout per attempt and
3 retries with exponential backoff on network errors, 429 and 5xx. The SSRF guard
(:mod:`toolkeeper.netguard`) applies to every delivery; a tenant reaches a private or
loopback receiver only by listing its network (``allow_networks``), and only within the
operator's ceiling (``tenant_bounds.networks``, see :mod:`toolkeeper.bounds`; checked when
set and again before each delivery). Nothing here ever blocks or fails the call that
created the approval.
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
from dataclasses import dataclass
from typing import Annotated, Any

import anyio
import orjson
from fastapi import APIRouter, Response
from pydantic import BaseModel, ConfigDict, Field, model_validator

from toolkeeper.api.auth import Caller, GatewayDep, require
from toolkeeper.api.errors import ApiError
from toolkeeper.api.routes.approvals import approval_out
from toolkeeper.bounds import HostNetworks, excess, refuse
from toolkeeper.errors import ConfigError, ToolDenied, ToolError
from toolkeeper.gateway import Gateway
from toolkeeper.model.enums import Role
from toolkeeper.model.reasons import Reason
from toolkeeper.netguard import NetGuard, Resolver
from toolkeeper.secrets.base import parse_ref
from toolkeeper.secrets.credentials import tenant_getter
from toolkeeper.store.records import ApprovalRecord

log = logging.getLogger("toolkeeper.webhook")
router = APIRouter(tags=["webhooks"])
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


class WebhookBody(BaseModel):
    """``PUT /settings/webhook``: a URL and either a ``secret`` (kept as the tenant's
    credential ``webhooks/{tenant}/hmac``) or a ``secret_ref`` to one of its credentials."""

    model_config = ConfigDict(extra="forbid")

    url: str = Field(min_length=1, max_length=2000)
    secret: str | None = Field(default=None, min_length=16, max_length=1000)
    secret_ref: str | None = Field(default=None, max_length=300)
    allow_hosts: list[str] = Field(default_factory=list, max_length=100)
    allow_networks: list[str] = Field(default_factory=list, max_length=100)

    @model_validator(mode="after")
    def _one_secret(self) -> WebhookBody:
        if (self.secret is None) == (self.secret_ref is None):
            raise ValueError("give exactly one of 'secret' and 'secret_ref'")
        if self.secret_ref is not None and parse_ref(self.secret_ref) is None:
            raise ValueError("'secret_ref' must look like ${secret:connector/key}")
        return self


def _store_config(gw: Gateway, tenant: str, body: WebhookBody) -> WebhookConfig:
    ref = body.secret_ref
    if body.secret is not None:
        if gw.credentials is None:
            raise ApiError(409, Reason.CONFLICT, "'secret' needs the embedded secrets backend "
                           "(config 'secrets: {backend: embedded}')")
        # the tenant's own credential; a key with '/' is not managed through /credentials
        gw.credentials.put(tenant, "webhooks", f"{tenant}/hmac", body.secret)
        gw.refresh_secrets()
        ref = f"${{secret:webhooks/{tenant}/hmac}}"
    assert ref is not None
    cfg = WebhookConfig(url=body.url, secret_ref=ref, allow_hosts=body.allow_hosts,
                        allow_networks=body.allow_networks)
    gw.store.registry.put_setting(setting_key(tenant), cfg.model_dump())
    return cfg


def _public(cfg: WebhookConfig) -> dict[str, Any]:
    return cfg.model_dump()


@router.put("/settings/webhook", response_model=WebhookConfig,
            summary="Set the tenant's approval webhook (admin)")
async def put_webhook(body: WebhookBody, gw: GatewayDep, caller: Caller) -> dict[str, Any]:
    require(caller, Role.ADMIN)
    refuse(excess(WebhookConfig, body.model_dump(), gw.settings.tenant_bounds), "the webhook")
    try:
        WebhookConfig(url=body.url, secret_ref="-", allow_hosts=body.allow_hosts,
                      allow_networks=body.allow_networks).guard().check_url(body.url)
    except ToolDenied as exc:
        raise ApiError(422, exc.reason, f"webhook URL refused: {exc.message}; list the "
                       "receiver's network in 'allow_networks' to reach it") from None
    except ConfigError as exc:
        raise ApiError(422, Reason.INVALID_ARGUMENTS, str(exc)) from None
    cfg = await anyio.to_thread.run_sync(_store_config, gw, caller.tenant_id, body)
    return _public(cfg)


@router.get("/settings/webhook", response_model=WebhookConfig,
            summary="The tenant's approval webhook (admin)")
async def get_webhook(gw: GatewayDep, caller: Caller) -> dict[str, Any]:
    require(caller, Role.ADMIN)
    raw = await anyio.to_thread.run_sync(gw.store.registry.get_setting,
                                         setting_key(caller.tenant_id))
    if not raw:
        raise ApiError(404, Reason.NOT_FOUND, "no webhook is set for this tenant")
    return _public(WebhookConfig.model_validate(raw))


@router.delete("/settings/webhook", status_code=204, summary="Remove the tenant's webhook")
async def delete_webhook(gw: GatewayDep, caller: Caller) -> Response:
    require(caller, Role.ADMIN)
    await anyio.to_thread.run_sync(gw.store.registry.put_setting,
                                   setting_key(caller.tenant_id), None)
    return Response(status_code=204)


@dataclass(slots=True, frozen=True)
class Delivery:
    """What became of one event (kept in :attr:`WebhookNotifier.recent`)."""

    approval_id: str
    tenant_id: str
    ok: bool
    attempts: int
    error: str | None = None


class _Retry(Exception):
    pass


class WebhookNotifier:
    """Sends ``approval.created`` to tenants' webhooks from one background thread."""

    def __init__(self, gw: Gateway, *, queue_size: int = 1000, timeout_s: float = 5.0,
                 retries: int = 3, backoff_s: float = 0.5,
                 resolver: Resolver | None = None) -> None:
        self._gw = gw
        self._queue: queue.Queue[ApprovalRecord] = queue.Queue(maxsize=queue_size)
        self.timeout_s, self.retries, self.backoff_s = timeout_s, retries, backoff_s
        self._resolver = resolver
        self._stop = threading.Event()
        self._idle = threading.Condition()
        self._pending = 0
        self.dropped = 0
        """Events refused because the queue was full."""
        self.recent: deque[Delivery] = deque(maxlen=200)
        self._thread = threading.Thread(target=self._work, name="toolkeeper-webhooks",
                                        daemon=True)

    def install(self) -> WebhookNotifier:
        """Start the worker and listen for new approvals."""
        self._thread.start()
        self._gw.on_approval_created(self.submit)
        return self

    def submit(self, rec: ApprovalRecord) -> None:
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
        """Stop the worker; events still queued after ``timeout`` are abandoned."""
        self._stop.set()  # the worker polls it at least twice a second
        if self._thread.is_alive():
            self._thread.join(timeout)

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

    async def _handle(self, rec: ApprovalRecord) -> Delivery:
        raw = self._gw.store.registry.get_setting(setting_key(rec.tenant_id))
        if not raw:
            return Delivery(rec.id, rec.tenant_id, ok=True, attempts=0, error="no webhook")
        cfg = WebhookConfig.model_validate(raw)
        if excess(WebhookConfig, raw, self._gw.settings.tenant_bounds):
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
        body = orjson.dumps({"event": EVENT, "tenant_id": rec.tenant_id, "timestamp": ts,
                             "approval": approval_out(rec)})
        headers = {"Content-Type": "application/json", SIGNATURE_HEADER: sign(secret, body),
                   TIMESTAMP_HEADER: ts, "X-Toolkeeper-Event": EVENT,
                   "X-Toolkeeper-Delivery": str(uuid.uuid4())}
        return await self._send(rec, cfg, body, headers)

    async def _secret(self, ref: str, tenant_id: str) -> str:
        parsed = parse_ref(ref)
        get = tenant_getter(self._gw.runtime.secrets, self._gw.credentials, tenant_id,
                            operator_tool=False)
        if parsed is None or get is None:
            raise ToolError("secret_not_found", f"webhook secret {ref!r} cannot be resolved")
        return await get(*parsed)

    async def _send(self, rec: ApprovalRecord, cfg: WebhookConfig, body: bytes,
                    headers: dict[str, str]) -> Delivery:
        guard = cfg.guard(self._resolver)
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

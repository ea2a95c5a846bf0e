"""The Gateway: the one pipeline every face calls (library, CLI; REST and MCP later)."""

from __future__ import annotations

import asyncio
import logging
import os
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from functools import partial
from pathlib import Path
from typing import Any

import anyio

from toolkeeper.errors import stopped
from toolkeeper.identity.refused import TokenRefused
from toolkeeper.identity.upstream_person import PersonTokens
from toolkeeper.loops import ThreadLoops
from toolkeeper.model.call import CallRequest, CallResult, Principal
from toolkeeper.model.enums import CallStatus, Mode
from toolkeeper.model.reasons import Reason
from toolkeeper.observability.calls import observe_call
from toolkeeper.observability.logs import redact_handlers
from toolkeeper.observability.metrics import Metrics
from toolkeeper.observability.tracing import record_span, tracer_from_global
from toolkeeper.opening import open_gateway
from toolkeeper.pipeline import steps
from toolkeeper.pipeline.audit_sink import AuditSink
from toolkeeper.pipeline.catalog import Catalog, snapshot
from toolkeeper.pipeline.health import HealthBoard
from toolkeeper.pipeline.ids import new_call_id
from toolkeeper.pipeline.limiters import ConcurrencyGroups, RateLimiter, TurnCounter
from toolkeeper.pipeline.recent_calls import RecentCallsLog
from toolkeeper.pipeline.runtime import Runtime, Settings
from toolkeeper.pipeline.state import CallState
from toolkeeper.providers.agent_chains import InFlight
from toolkeeper.providers.artifacts import ArtifactLibrary
from toolkeeper.providers.factory import ProviderFactory
from toolkeeper.sandbox import default_sandbox
from toolkeeper.secrets.base import SecretsStore
from toolkeeper.secrets.credentials import TenantCredentials, redactable, tenant_getter
from toolkeeper.secrets.embedded import KEY_ENV
from toolkeeper.secrets.redact import Redactor
from toolkeeper.services.approvals import ApprovalService
from toolkeeper.services.batch import Batches
from toolkeeper.services.calls import CallService
from toolkeeper.services.changes import DefinitionChanges
from toolkeeper.services.events import health_auditor
from toolkeeper.services.identities import IdentityService
from toolkeeper.services.registry import RegistryService
from toolkeeper.services.retention import Retention
from toolkeeper.services.retrieval import RetrievalService
from toolkeeper.services.retrieval import wire as wire_retrieval
from toolkeeper.services.upstreams import UpstreamSync
from toolkeeper.services.webhooks import WebhookNotifier
from toolkeeper.store import Store, changes
from toolkeeper.store.db import SQLITE_CHECKPOINT_EVERY_S, utcnow
from toolkeeper.store.records import ApprovalRecord
from toolkeeper.token_cache import AgentPrincipals, Bearers, TokenCache

log = logging.getLogger("toolkeeper")


class Gateway:
    """Decides, records and executes tool calls. Construct with :meth:`open`."""

    def __init__(self, store: Store, *, settings: Settings | None = None,
                 secrets: SecretsStore | None = None, factory: ProviderFactory | None = None,
                 metrics: Metrics | None = None, shared_rate_limits: bool = False,
                 tracer: Any = None, redis_url: str | None = None) -> None:
        self.store = store
        self.settings = settings or Settings()
        self.identity_config: Any = None  # the file's ``identity`` section, set by ``open``
        self.audit_export_config: Any = None  # its ``audit_export`` section (serve ships it)
        default_sandbox()  # reads the operator's opt-out now, so its warning shows at start
        self.factory = factory or ProviderFactory(
            artifacts=ArtifactLibrary(self.settings.artifacts_dir))
        self.metrics = metrics or Metrics()
        self._secrets = secrets
        self._tracer = tracer if tracer is not None else tracer_from_global()
        self._next_recovery = time.monotonic() + self.settings.recovery_every_s
        sink = AuditSink(store.audit)
        self.recent_calls = RecentCallsLog(
            store.recent_calls, self.settings.recent_calls_max, self.metrics,
            stats=store.call_stats if self.settings.call_stats else None)
        shared: Any = store.rates if shared_rate_limits else None
        caps: Any = store.caps if shared_rate_limits else None
        self._notifier: Any = None
        if redis_url:
            from toolkeeper.store.redis import RedisCounters

            shared = caps = RedisCounters(redis_url)
        health = HealthBoard(on_change=health_auditor(sink.submit))
        self.credentials = TenantCredentials.over(store.credentials, secrets)
        self._rt = Runtime(
            store=store, catalog=Catalog(mode=self.settings.mode, provider_factory=self.factory),
            sink=sink, secrets=secrets, redactor=self._build_redactor(), metrics=self.metrics,
            health=health, credentials=self.credentials,
            rates=RateLimiter(shared, fallback=store.rates if redis_url and shared_rate_limits
                              else None, on_fallback=self.metrics.redis_fallback),
            turns=TurnCounter(caps), concurrency=ConcurrencyGroups(caps),
            settings=self.settings, agent_calls=InFlight(store.agent_calls))
        self._loops = ThreadLoops()
        self._agent_principals = AgentPrincipals()
        self._definitions_seen = -1
        self._changes = DefinitionChanges(
            self.reload, lambda: None if self._notifier is None else self._notifier.publish())
        self._reloading = threading.RLock()
        self._tokens = TokenCache(store.tokens)
        self._bearers: Bearers | None = None
        self._tokens_seen = changes.version(store.db, "tokens")
        self._closed = False
        self._unredact_logs: Callable[[], None] = lambda: None
        self._wire_services()
        self.metrics.pending_from(
            lambda tenant: self.store.approvals.pending_by_tenant(utcnow(), tenant))
        self.metrics.queues_from(lambda: sink.pending, store.outcomes.commit_stats)
        self.reload()
        # background work starts only now that the gateway is complete
        sink.set_housekeeping(self._housekeeping)
        sink.set_upkeep(store.db.checkpoint, SQLITE_CHECKPOINT_EVERY_S)  # PostgreSQL: no-op
        if redis_url:
            from toolkeeper.store.redis import ChangeNotifier

            self._notifier = ChangeNotifier(redis_url, self.reload,
                                            on_fallback=self.metrics.redis_fallback)

    def _wire_services(self) -> None:
        """The services get what they use, never the gateway (``services/``)."""
        store, rt = self.store, self._rt

        def catalog() -> Catalog:
            return rt.catalog

        def redactor() -> Redactor:
            return rt.redactor

        self.retrieval = RetrievalService(store.retrieval, self.settings)
        wire_retrieval(self.factory, self.retrieval)
        self.registry = RegistryService(store, factory=self.factory, settings=self.settings,
                                        catalog=catalog, changed=self.definitions_changed,
                                        retrieval=self.retrieval)
        self.factory.on_artifact_drift = self.registry.quarantine_artifact
        self.approvals = ApprovalService(store, redactor=redactor, catalog=catalog,
                                         people=PersonTokens(self.credentials))
        self.calls = CallService(store, call=self.call, catalog=catalog, redactor=redactor)
        self._batches = Batches(store, call=self.call, calls=self.calls, catalog=catalog)
        self._upstream = UpstreamSync(self.registry, store, catalog=catalog,
                                      secrets=self._secrets, batch=self.changes_batch,
                                      resync_s=self.settings.mcp_resync_s,
                                      closed=lambda: self._closed, credentials=self.credentials,
                                      on_fallback=self.metrics.upstream_fallback)
        rt.upstreams = self.upstreams = self._upstream.pool
        self.identities = IdentityService(
            registry=store.registry, tokens=store.tokens, credentials=self.credentials,
            catalog=catalog, put_profile=partial(self.registry.put_profile, replace=True),
            put_agent=partial(self.registry.put_agent, replace=True),
            definitions_changed=self.definitions_changed,
            secrets_changed=self.refresh_secrets, policy_model=self.factory.policy_model,
            bounds=self.settings.tenant_bounds)
        self.retention = Retention(
            store, self.metrics, outcome_retention=self.settings.outcome_retention,
            audit_retention=self.settings.audit_retention, stats=self.settings.call_stats,
            every_s=self.settings.retention_every_s, closed=lambda: self._closed)
        self.webhooks = WebhookNotifier(
            setting=store.registry.get_setting, bounds=self.settings.tenant_bounds,
            secrets=lambda tenant: tenant_getter(self._secrets, self.credentials, tenant,
                                                 written_by="api"))
        self.webhooks.listen(self._rt.listeners)  # from every face, not only serve

    @classmethod
    def open(cls, url: str | None = None, *, config: str | Path | None = None,
             mode: Mode | str | None = None, secrets: SecretsStore | str | None = None,
             secrets_key_file: str | Path | None = None,
             natives: Mapping[str, Any] | None = None,
             functions: Mapping[str, Callable[..., Any]] | None = None,
             recover: bool = True, **settings: Any) -> Gateway:
        """Open a ready gateway.

        The database is ``url``, else ``TOOLKEEPER_DATABASE_URL``, else the config file's
        ``database``, else ``sqlite:///./toolkeeper.db``. With ``config``, the file's mode,
        settings and secrets backend apply (explicit arguments win) and the file is synced
        to the store. Stale ``in_progress`` outcomes are then marked ``unknown``.
        ``secrets`` may name a backend (``env`` or ``embedded``, whose master key is
        ``TOOLKEEPER_SECRETS_KEY`` or ``secrets_key_file``) instead of being one.
        Secrets are masked in the records of the logging handlers configured by then
        (see :meth:`redact_logs`).
        ``audit_key``/``audit_key_file``/``audit_checkpoint_path``: docs/audit-integrity.md.
        """
        gw = open_gateway(cls, url, config=config, mode=mode, secrets=secrets,
                          secrets_key_file=secrets_key_file, natives=natives,
                          functions=functions, recover=recover, settings=settings)
        gw.redact_logs()
        return gw

    # -- the pipeline --------------------------------------------------------------------

    async def call(self, tool: str | CallRequest, action: str | None = None,
                   arguments: Any = None, *, agent: str | None = None,
                   tenant_id: str = "default", principal: Principal | None = None,
                   token: str | None = None, **fields: Any) -> CallResult:
        """Run one call through the whole pipeline. Stopped calls return, never raise."""
        request = tool if isinstance(tool, CallRequest) else CallRequest(
            tool=tool, action=action, arguments={} if arguments is None else arguments, **fields)
        principal = principal or self.principal(agent=agent, tenant_id=tenant_id, token=token)
        rt = self._rt
        st = CallState(call_id=new_call_id(), request=request, principal=principal,
                       redactor=rt.redactor)
        # the pipeline is awaited here, not in a helper coroutine: one coroutine frame per
        # call is ~1 µs of the ~20 µs a pure call costs
        start = 0 if self._tracer is None else time.time_ns()
        try:
            res = await steps.run(rt, st)
        except asyncio.CancelledError:
            steps.cancelled(rt, st)
            raise
        except Exception as exc:  # a bug of ours: never a crash for the caller
            log.exception("pipeline error in call %s", st.call_id)
            res = steps.internal_error(rt, st, exc)
        finally:
            for release in st.release:
                release()
        self._observed(st, res, start)
        return res

    async def check(self, request: CallRequest, principal: Principal | None) -> CallResult | None:
        """Ask the gate without executing (:func:`steps.check`): ``None`` when the call may
        run now, else the result that stops it. For frameworks that run their own checks
        between the gate and the tool (the OpenAI Agents SDK's tool input guardrails)."""
        st, res = await steps.check_call(self._rt, request, principal)
        return res if res is None else self._observed(st, res, 0)

    def _observed(self, st: CallState, res: CallResult, start: int) -> CallResult:
        if st.events:
            self._rt.sink.submit_later(st)  # drafts are built by the writer thread
        observe_call(self.metrics, res, st.tenant_id, st.agent)
        self.recent_calls.record(res, st.tenant_id, st.agent, st.request.trace_id)
        if start and self._tracer is not None:
            record_span(self._tracer, res, st.tenant_id, st.agent, start, time.time_ns())
        return res

    async def call_or_raise(self, *args: Any, **kwargs: Any) -> CallResult:
        """Like :meth:`call`, but a call that did not succeed raises with its ``reason``."""
        res = await self.call(*args, **kwargs)
        if res.status is CallStatus.SUCCEEDED:
            return res
        raise stopped(res)

    def call_sync(self, *args: Any, **kwargs: Any) -> CallResult:
        """Blocking :meth:`call` (one event loop per calling thread, reused)."""
        return self._loop().run_until_complete(self.call(*args, **kwargs))

    def call_or_raise_sync(self, *args: Any, **kwargs: Any) -> CallResult:
        return self._loop().run_until_complete(self.call_or_raise(*args, **kwargs))

    def run_sync(self, coro: Any) -> Any:
        """Run any of the gateway's coroutines from synchronous code."""
        return self._loop().run_until_complete(coro)

    def _loop(self) -> asyncio.AbstractEventLoop:
        return self._loops.get()

    async def batch(self, requests: Sequence[CallRequest], *, mode: str = "sequential",
                    agent: str | None = None, tenant_id: str = "default",
                    principal: Principal | None = None,
                    token: str | None = None) -> list[CallResult]:
        """Run several calls (SPEC §5); results come back in request order."""
        principal = principal or self.principal(agent=agent, tenant_id=tenant_id, token=token)
        return await self._batches.run(list(requests), mode=mode, principal=principal)

    # -- identities ----------------------------------------------------------------------

    def principal(self, *, agent: str | None = None, tenant_id: str = "default",
                  token: str | None = None) -> Principal | None:
        """Who is calling: a token's principal, or an in-process agent by name (trusted)."""
        if token is not None:
            return self.authenticate(token)
        return None if agent is None else self._agent_principals.get(agent, tenant_id)

    def authenticate(self, token: str) -> Principal | None:
        """The principal of a ``tk_…`` token; ``None`` for unknown or revoked ones (cached)."""
        return self._tokens.authenticate(token)

    async def authenticate_async(self, token: str) -> Principal | None:
        """:meth:`authenticate_bearer`, ``None`` for a refused token."""
        try:
            return await self.bearers.verify(token)
        except TokenRefused:
            return None

    async def authenticate_bearer(self, token: str) -> Principal:
        """A REST or ``/mcp`` bearer's principal (``tk_…`` or OAuth); else TokenRefused."""
        return await self.bearers.verify(token)

    def cached_principal(self, token: str) -> Principal | None:
        """The principal of a token this process has already verified, without I/O."""
        return self.bearers.cached(token)

    @property
    def bearers(self) -> Bearers:
        """Bearer tokens as the ``identity`` section says (built on first use)."""
        if self._bearers is None and self.identity_config is None:
            self._bearers = Bearers(self._tokens, None)
        elif self._bearers is None:  # the config models are loaded already (a config file)
            from toolkeeper.config.issuers import bearers_for

            self._bearers = bearers_for(self.identity_config, self._tokens,
                                        lambda t, a: (t, a) in self.catalog.agents,
                                        self._secrets.get_secret if self._secrets else None)
        return self._bearers

    # -- definitions ---------------------------------------------------------------------

    def reload(self) -> None:
        """Rebuild the in-memory snapshot from the store (after any definition change).
        Reloads never interleave: a slower one could otherwise install an older snapshot."""
        with self._reloading:
            self._reload()

    def _reload(self) -> None:
        self._definitions_seen = self.store.registry.definitions_version()
        self._rt.catalog = snapshot(self.store.registry, mode=self.settings.mode,
                                    factory=self.factory, bounds=self.settings.tenant_bounds)
        self._rt.listeners.reloaded()

    def definitions_changed(self) -> None:
        """After a definition write: reload here and tell the other processes now (Redis);
        without Redis they notice the database's change counter within about a second.
        Inside :meth:`changes_batch` this happens once, when the batch ends."""
        self._changes.changed()

    def changes_batch(self) -> AbstractContextManager[None]:
        """Many definition writes (a config apply), one reload at the end instead of one
        per write (each reload re-reads the whole catalog). Per thread: another thread's
        writes (an upstream server's re-listing) reload as usual."""
        return self._changes.batch()

    @property
    def catalog(self) -> Catalog:
        return self._rt.catalog

    @property
    def runtime(self) -> Runtime:
        return self._rt

    def on_reload(self, fn: Callable[[], None]) -> Callable[[], None]:
        """Call ``fn`` (on whichever thread reloads; it must not block) after each new
        snapshot of the definitions; returns a function that removes it."""
        return self._rt.listeners.on_reload(fn)

    async def call_served(self, request: CallRequest, principal: Principal) -> CallResult:
        """One call for a server face (REST, MCP). On the embedded SQLite store the few
        writes are short and local, so the call runs on the server's loop; on PostgreSQL
        (network round trips) it runs on a worker thread with its own loop."""
        if self.store.is_local:  # with company here, commits wait off the loop (group_commit)
            self._rt.loop_calls.served = True
            return await self.call(request, principal=principal)
        return await anyio.to_thread.run_sync(
            lambda: self.call_sync(request, principal=principal))

    def on_approval_created(self, fn: Callable[[ApprovalRecord], None]) -> None:
        """Call ``fn`` whenever a call creates an approval (e.g. to notify approvers)."""
        self._rt.listeners.approval_created.append(fn)

    def _build_redactor(self) -> Redactor:
        """Stored secret values (platform and every tenant's credentials), and the master key
        when in the environment (never echoed)."""
        master = os.environ.get(KEY_ENV, "").strip()  # "" is ignored by the redactor
        return Redactor({*redactable(self._secrets, self.credentials), master})

    def redact_logs(self) -> None:
        """Mask this gateway's secrets (and those a running call resolved) in every record
        the logging handlers configured now write; call again after configuring logging
        anew. Undone by :meth:`close`."""
        self._unredact_logs()
        self._unredact_logs = redact_handlers(lambda: self._rt.redactor)

    def refresh_secrets(self) -> None:
        """Re-read the secret values to redact (after secrets change)."""
        with self._reloading:  # a slower refresh never installs an older set
            self._rt.redactor = self._build_redactor()

    def _housekeeping(self) -> None:
        """About once a second on the audit writer thread (the SQLite checkpoint: more often,
        ``set_upkeep``): the audit checkpoint file when due, recovery of stale ``in_progress``
        outcomes, and, each on a thread of its own, upstream MCP listings and retention sweeps."""
        self.store.audit.checkpoint()  # the heads that moved, every audit_checkpoint_every_s
        if self.store.registry.definitions_version() != self._definitions_seen:
            self.reload()  # another process changed tools, profiles or agents
        tokens_now = changes.version(self.store.db, "tokens")
        if tokens_now != self._tokens_seen:  # created or revoked elsewhere
            self._tokens_seen = tokens_now
            self._tokens.drop()
        if self.credentials is not None and self.credentials.changed():
            self.refresh_secrets()  # another process wrote a credential: redact it here too
        if time.monotonic() >= self._next_recovery:
            self._next_recovery = time.monotonic() + self.settings.recovery_every_s
            stale = self.calls.recover()
            if stale:
                log.warning("marked %d stale in_progress outcomes unknown", len(stale))
        self._upstream.tick()
        self.retention.tick()

    def flush(self) -> None:
        """Write queued audit events (and recent calls) now."""
        self._rt.sink.flush()
        self.recent_calls.flush()

    def sync_servers(self, names: Sequence[str] | None = None) -> dict[str, Any]:
        """List the configured upstream MCP servers (or ``names``): import new tools,
        quarantine drifted ones (see :class:`toolkeeper.services.upstreams.UpstreamSync`)."""
        return self._upstream.servers(names)

    @property
    def closed(self) -> bool:
        return self._closed

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._unredact_logs()
        self.webhooks.close()  # delivers what is queued first (bounded)
        self.retention.close()  # a running sweep stops at its next chunk
        self.upstreams.close()
        if self._notifier is not None:
            self._notifier.close()
        closer = getattr(self._rt.rates.shared, "close", None)
        if callable(closer):
            closer()
        self._rt.sink.close()
        self.recent_calls.close()
        try:  # the heads as this gateway leaves them
            self.store.audit.checkpoint(force=True)
        except Exception:  # a full disk must not keep the store open
            log.warning("audit checkpoint at close failed", exc_info=True)
        self._loops.close_current()
        self.store.close()

    def __enter__(self) -> Gateway:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


__all__ = ["Gateway", "Reason", "Settings"]

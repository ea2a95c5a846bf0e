"""``toolkeeper serve``: settings, assembly of the REST app over one gateway, and the run loop.

Settings come from ``TOOLKEEPER_*`` environment variables, overridden by CLI flags, and are
validated before anything opens (SPEC §12). On a store without any admin token the server
creates one for the serving tenant and one system admin (``/tenants``), and prints them once.
"""

from __future__ import annotations

import gc
import logging
import os
import signal
import sys
import threading
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Any, Literal, TextIO

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError

from toolkeeper.errors import ConfigError
from toolkeeper.model.enums import Mode, Role

if TYPE_CHECKING:  # the CLI imports this module: FastAPI and the gateway load on use
    from fastapi import FastAPI

    from toolkeeper.gateway import Gateway
    from toolkeeper.services.audit_export.worker import AuditExporter

NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}$"
ENV = {
    "host": "TOOLKEEPER_HOST", "port": "TOOLKEEPER_PORT",
    "database_url": "TOOLKEEPER_DATABASE_URL", "config": "TOOLKEEPER_CONFIG",
    "mode": "TOOLKEEPER_MODE", "max_body_bytes": "TOOLKEEPER_MAX_BODY_BYTES",
    "cors_origins": "TOOLKEEPER_CORS_ORIGINS", "system_tenant": "TOOLKEEPER_SYSTEM_TENANT",
    "tenant": "TOOLKEEPER_TENANT", "log_level": "TOOLKEEPER_LOG_LEVEL",
    "log_format": "TOOLKEEPER_LOG_FORMAT",
    "workers": "TOOLKEEPER_WORKERS", "secrets_backend": "TOOLKEEPER_SECRETS_BACKEND",
    "secrets_key_file": "TOOLKEEPER_SECRETS_KEY_FILE",
    "audit_key_file": "TOOLKEEPER_AUDIT_KEY_FILE",
    "audit_checkpoints": "TOOLKEEPER_AUDIT_CHECKPOINTS",
    "max_header_bytes": "TOOLKEEPER_MAX_HEADER_BYTES",
    "header_timeout_s": "TOOLKEEPER_HEADER_TIMEOUT_S",
    "max_connections": "TOOLKEEPER_MAX_CONNECTIONS",
    "mcp_fast_path": "TOOLKEEPER_MCP_FAST_PATH",
    "mcp_max_sessions": "TOOLKEEPER_MCP_MAX_SESSIONS",
    "rest_fast_path": "TOOLKEEPER_REST_FAST_PATH",
}
WORKER_SETTINGS = "TOOLKEEPER_WORKER_SETTINGS"
"""How the parent hands its validated settings to uvicorn's worker processes."""
"""Setting → environment variable (flags win over these)."""
DEMO_MARKER = "demo:tokens_created"


class ServerSettings(BaseModel):
    """Everything ``toolkeeper serve`` needs, validated at start."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    host: str = Field(default="127.0.0.1", min_length=1, max_length=255)
    """Bind address; loopback by default (SPEC §8)."""
    port: int = Field(default=8700, ge=1, le=65535)
    database_url: str | None = None
    """``None``: the config file's ``database``, else ``sqlite:///./toolkeeper.db``."""
    config: Path | None = None
    """A ``toolkeeper.yaml`` synced to the store at start."""
    mode: Mode | None = None
    max_body_bytes: int = Field(default=2_000_000, ge=1024, le=1_000_000_000)
    max_header_bytes: int = Field(default=65_536, ge=4096, le=16_777_216)
    """Request line + headers; a larger head is answered 431 ``header_too_large``."""
    header_timeout_s: int = Field(default=5, ge=1, le=3600)
    """A connection that has not sent a complete request head this long after opening (or
    after its previous response) is closed: idle and slowloris clients are dropped."""
    max_connections: int = Field(default=1000, ge=1, le=1_000_000)
    """Open connections (and running requests) per process; beyond it uvicorn answers
    503 to new requests."""
    mcp_fast_path: bool = True
    """Answer plain stateless MCP ``tools/list`` / ``tools/call`` on the lean path."""
    mcp_max_sessions: int = Field(default=10_000, ge=1, le=10_000_000)
    """Open MCP sessions per process; past it a new session is answered 503 with
    ``Retry-After`` (existing sessions go on)."""
    rest_fast_path: bool = True
    """Answer the plainest ``POST /tools/execute`` on the lean path (api/lean_execute)."""
    cors_origins: tuple[str, ...] = ()
    """Closed by default; each an origin ``scheme://host[:port]``."""
    system_tenant: str = Field(default="system", pattern=NAME_PATTERN)
    """Admin tokens of this tenant manage ``/tenants``."""
    tenant: str = Field(default="default", pattern=NAME_PATTERN)
    """The tenant of the bootstrap admin token (and of the demo)."""
    demo: bool = False
    log_level: Literal["critical", "error", "warning", "info", "debug"] = "info"
    log_format: Literal["text", "json"] = "text"
    """``json``: one JSON object per line on stderr (server and gateway logs, SPEC §9)."""
    workers: int = Field(default=1, ge=1, le=64)
    """Server processes on one port (each with its own gateway, like replicas)."""
    secrets_backend: Literal["env", "embedded", "vault"] | None = None
    """Overrides the config file's ``secrets.backend``; ``embedded`` makes ``PUT
    /credentials`` usable. ``--demo`` defaults to ``embedded`` with a generated key file."""
    secrets_key_file: Path | None = None
    """The embedded backend's master key (``TOOLKEEPER_SECRETS_KEY`` wins when set)."""
    audit_key_file: Path | None = None
    """The audit key (``TOOLKEEPER_AUDIT_KEY`` wins); else derived from the secrets master
    key when there is one (docs/audit-integrity.md)."""
    audit_checkpoints: Path | None = None
    """Signed audit checkpoints; default ``<sqlite file>.audit-checkpoints`` when keyed."""

    @field_validator("host")
    @classmethod
    def _host(cls, value: str) -> str:
        if any(c.isspace() or c in "/?#@" for c in value):
            raise ValueError(f"{value!r} is not a host name or address")
        return value

    @field_validator("database_url")
    @classmethod
    def _url(cls, value: str | None) -> str | None:
        if value is not None:
            try:
                make_url(value)
            except ArgumentError:
                raise ValueError("not a database URL (sqlite:///path or "
                                 "postgresql+psycopg://…)") from None
        return value

    @field_validator("config")
    @classmethod
    def _config(cls, value: Path | None) -> Path | None:
        if value is not None and not value.is_file():
            raise ValueError(f"config file {str(value)!r} does not exist")
        return value

    @field_validator("cors_origins")
    @classmethod
    def _origins(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for origin in value:
            scheme, sep, rest = origin.partition("://")
            if origin != "*" and (scheme not in ("http", "https") or not sep or not rest
                                  or "/" in rest):
                raise ValueError(f"{origin!r} is not an origin like https://app.example.com")
        return value

    @classmethod
    def load(cls, environ: Mapping[str, str] | None = None, **flags: Any) -> ServerSettings:
        """Settings from ``environ`` (default ``os.environ``) and ``flags`` (``None`` flags
        are not given); a ``ConfigError`` lists every problem with its variable."""
        env = os.environ if environ is None else environ
        values: dict[str, Any] = {}
        for name, var in ENV.items():
            if env.get(var):
                raw = env[var]
                values[name] = tuple(o.strip() for o in raw.split(",") if o.strip()) \
                    if name == "cors_origins" else raw
        values.update({k: v for k, v in flags.items() if v is not None})
        try:
            return cls.model_validate(values)
        except ValidationError as exc:
            problems = []
            for err in exc.errors():
                field = str(err["loc"][0]) if err["loc"] else "settings"
                where = f"{field} (--{field.replace('_', '-')} / {ENV.get(field, '-')})"
                problems.append(f"{where}: {err['msg']}")
            raise ConfigError("invalid server settings: " + "; ".join(problems),
                              problems=problems) from None

    def base_url(self) -> str:
        """The URL clients use (IPv6 literals bracketed)."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"


@dataclass(slots=True)
class Announcement:
    """A token created at start-up, to print once."""

    title: str
    token_id: str
    token: str


@dataclass(slots=True)
class Server:
    """An assembled server: the gateway and the ASGI app."""

    settings: ServerSettings
    gw: Gateway
    app: FastAPI
    tokens: list[Announcement]
    exporter: AuditExporter | None = None

    def close(self) -> None:
        """Stop the audit export, close the gateway (which stops its webhook worker)."""
        if self.exporter is not None:
            self.exporter.close()
        self.gw.close()


def bootstrap_tokens(gw: Gateway, settings: ServerSettings) -> list[Announcement]:
    """On a store with no admin token: an admin of ``settings.tenant`` and a system admin."""
    if gw.store.tokens.any_admin():
        return []
    wanted = [(settings.tenant, f"admin token (tenant {settings.tenant})")]
    if settings.system_tenant != settings.tenant:
        wanted.append((settings.system_tenant,
                       f"system admin token (tenant {settings.system_tenant}: /tenants)"))
    out = []
    for tenant, title in wanted:
        gw.store.registry.ensure_tenant(tenant)
        rec, token = gw.store.tokens.create(tenant_id=tenant, role=Role.ADMIN.value,
                                            label="bootstrap admin")
        out.append(Announcement(title, rec.id, token))
    return out


def demo_tokens(gw: Gateway, settings: ServerSettings,
                created: list[Announcement]) -> list[Announcement]:
    """Apply the packaged demo config; the first time, create approver and agent tokens
    (and an admin of the demo's tenant, unless the bootstrap just made one)."""
    from toolkeeper.demo.runner import BOT, apply_demo
    from toolkeeper.demo.tools import DemoWorld

    apply_demo(gw, DemoWorld.sample())
    reg, tenant = gw.store.registry, "default"
    if reg.get_setting(DEMO_MARKER):
        return []
    out: list[Announcement] = []
    if not (created and settings.tenant == tenant):
        rec, token = gw.store.tokens.create(tenant_id=tenant, role="admin", label="demo admin")
        out.append(Announcement("demo admin token (tenant default)", rec.id, token))
    for role, agent, title in (("approver", None, "demo approver token"),
                               ("agent", BOT, f"demo agent token ({BOT})")):
        rec, token = gw.store.tokens.create(tenant_id=tenant, role=role, agent=agent,
                                            label=agent or f"demo {role}")
        out.append(Announcement(title, rec.id, token))
    reg.put_setting(DEMO_MARKER, True)
    return out


def secrets_choice(settings: ServerSettings) -> tuple[str | None, Path | None]:
    """The secrets backend and key file to open (``None``: the config file decides), by the
    rule the CLI shares (:mod:`toolkeeper.secrets.choice`): the demo, with no backend
    chosen, uses the embedded store so ``PUT /credentials`` works."""
    from toolkeeper.secrets.choice import secrets_choice as choose

    return choose(settings.secrets_backend, settings.secrets_key_file,
                  config=settings.config is not None, demo=settings.demo)


LOOPBACK = ("127.0.0.1", "localhost", "[::1]")


def mcp_hosts(bind: str) -> tuple[str, ...] | None:
    """Bound to loopback, ``/mcp`` answers only to loopback names (DNS rebinding); bound
    wider, the names clients use are unknown here, so no ``Host`` check."""
    if bind not in ("127.0.0.1", "localhost", "::1"):
        return None
    return (*LOOPBACK, *(f"{h}:*" for h in LOOPBACK))


def build(settings: ServerSettings, *, export: bool = True) -> Server:
    """Open the gateway (which delivers webhooks), create first tokens and build the app;
    ``export``: start the audit export (not in a ``--workers`` parent, which only boots)."""
    from toolkeeper.api import ApiSettings, create_app
    from toolkeeper.gateway import Gateway
    from toolkeeper.mcp.state import state_key
    from toolkeeper.services.audit_export.worker import start_exporter

    # what the imports made (modules, classes, schemas) lives as long as the process: out
    # of the collector's sight before the gateway opens, or each full collection while the
    # catalog loads walks all of it again (~0.1 s of start-up with 10,000 tools)
    gc.freeze()
    backend, key_file = secrets_choice(settings)
    # several workers count rate limits, turn caps and concurrency slots in the store (on
    # SQLite too: one process's counters would let each worker grant the whole limit)
    shared: dict[str, Any] = {"shared_rate_limits": True} if settings.workers > 1 else {}
    gw = Gateway.open(settings.database_url, config=settings.config, mode=settings.mode,
                      secrets=backend, secrets_key_file=key_file,
                      audit_key_file=settings.audit_key_file,
                      audit_checkpoint_path=settings.audit_checkpoints or "auto", **shared)
    try:
        tokens = bootstrap_tokens(gw, settings)
        if settings.demo:
            tokens += demo_tokens(gw, settings, tokens)
        state_key(gw)  # before any worker serves MCP: they must share it
    except BaseException:
        gw.close()
        raise
    app = create_app(gw, ApiSettings(max_body_bytes=settings.max_body_bytes,
                                     cors_origins=list(settings.cors_origins),
                                     mcp_allowed_hosts=mcp_hosts(settings.host),
                                     mcp_fast_path=settings.mcp_fast_path,
                                     mcp_max_sessions=settings.mcp_max_sessions,
                                     rest_fast_path=settings.rest_fast_path))
    app.state.system_tenant = settings.system_tenant
    app.state.audit_export = exporter = start_exporter(
        gw.store, gw.metrics.registry, gw.audit_export_config if export else None)
    # what exists now (catalog, routes, models) lives as long as the server: keep it out
    # of the cyclic collector's generations so collections stay short under load
    gc.freeze()
    return Server(settings=settings, gw=gw, app=app, tokens=tokens, exporter=exporter)


def log_config(settings: ServerSettings) -> dict[str, Any]:
    """uvicorn's logging config: its default for ``text``; for ``json`` the server's and
    the gateway's records as JSON lines on stderr. Either way the root logger gets the
    server's handler (warnings and worse), so what tool code and libraries log is written,
    and redacted, like the server's own records."""
    import copy

    import uvicorn.config

    level = settings.log_level.upper()
    root = {"level": max(logging.WARNING, logging.getLevelName(level))}
    if settings.log_format == "text":
        config = copy.deepcopy(uvicorn.config.LOGGING_CONFIG)
        config["root"] = {**root, "handlers": ["default"]}
        return config

    quiet = {"handlers": ["json"], "level": level, "propagate": False}
    return {"version": 1, "disable_existing_loggers": False,
            "formatters": {"json": {"()": "toolkeeper.observability.logs.JsonFormatter"}},
            "handlers": {"json": {"class": "logging.StreamHandler", "formatter": "json",
                                  "stream": "ext://sys.stderr"}},
            "root": {**root, "handlers": ["json"]},
            "loggers": {name: quiet for name in (
                *uvicorn.config.LOGGING_CONFIG["loggers"], "toolkeeper", "mcp")}}


def announce(server: Server, out: TextIO) -> None:
    """Print where the server listens, and the tokens created now (their only showing)."""
    base = server.settings.base_url()
    lines = [f"toolkeeper serving on {base}",
             f"  API      {base}/", f"  docs     {base}/docs", f"  UI       {base}/ui/",
             f"  MCP      {base}/mcp (streamable HTTP; agent tokens)",
             f"  OpenAPI  {base}/openapi.json"]
    if server.tokens:
        lines.append("tokens created now (shown once, store them now):")
        lines += [f"  {a.title}: {a.token}" for a in server.tokens]
    elif server.settings.demo:
        lines.append("demo tokens were printed on the first start")
    keyed = server.gw.store.audit.keyed_now
    if keyed is not None:
        lines.append(keyed.keyed_note())
    # at every start, the first included: the token printed now is the one to lose
    lines.append("more tokens: POST /tokens or `toolkeeper tokens create --token <admin>`; "
                 "admin token lost? on a host with the database: "
                 "`toolkeeper tokens create --role admin --local`")
    out.write("\n".join(lines) + "\n")
    out.flush()


def _exit_quietly(signum: int, frame: FrameType | None) -> None:
    raise SystemExit(0)


def worker_app() -> FastAPI:
    """uvicorn's factory in each worker process: its own gateway over the shared store
    (opened after uvicorn configured the worker's logging, so its handlers redact)."""
    settings = ServerSettings.model_validate_json(os.environ[WORKER_SETTINGS])
    server = build(settings)  # the parent already created tokens and applied the demo

    inner = server.app.router.lifespan_context

    @asynccontextmanager
    async def lifespan(app: Any) -> AsyncIterator[None]:
        try:
            async with inner(app):
                yield
        finally:  # flush the audit queue and close the store when the worker stops
            server.close()

    server.app.router.lifespan_context = lifespan
    return server.app


def connection_limits(settings: ServerSettings) -> dict[str, Any]:
    """uvicorn's arguments for the bounds on connections (api/connection_limits.py), and
    its access log only where the log level lets it write: uvicorn formats every request's
    line (the path re-quoted, ~1 % of an MCP call's CPU) before the logger drops it."""
    from toolkeeper.api.connection_limits import BoundedHttpToolsProtocol

    return {"http": BoundedHttpToolsProtocol, "timeout_keep_alive": settings.header_timeout_s,
            "h11_max_incomplete_event_size": settings.max_header_bytes,
            "limit_concurrency": settings.max_connections,
            "access_log": access_logged(settings)}


def access_logged(settings: ServerSettings) -> bool:
    """Whether uvicorn's access lines (logged at INFO) would be written at all."""
    level = logging.getLevelName(settings.log_level.upper())
    return isinstance(level, int) and level <= logging.INFO


def _run_workers(settings: ServerSettings, out: TextIO) -> None:
    import uvicorn

    server = build(settings, export=False)  # bootstrap once: tokens, demo, announcement
    try:
        announce(server, out)
    finally:
        server.close()
    backend, key_file = secrets_choice(settings)  # the workers open what the parent chose
    os.environ[WORKER_SETTINGS] = settings.model_copy(update={
        "demo": False, "secrets_backend": backend, "secrets_key_file": key_file,
    }).model_dump_json()
    uvicorn.run("toolkeeper.server:worker_app", factory=True, host=settings.host,
                port=settings.port, workers=settings.workers, loop="uvloop",
                log_level=settings.log_level, server_header=False,
                log_config=log_config(settings),
                timeout_graceful_shutdown=5, **connection_limits(settings))


def run(settings: ServerSettings, out: TextIO | None = None) -> None:
    """Serve until SIGINT/SIGTERM, shut down gracefully, then close everything."""
    import uvicorn

    if settings.workers > 1:
        _run_workers(settings, out or sys.stdout)
        return

    # uvicorn re-raises the signal it caught once it has shut down; the default handler
    # would end the process before the gateway flushes its audit queue and closes.
    main = threading.current_thread() is threading.main_thread()
    previous = {sig: signal.signal(sig, _exit_quietly)
                for sig in (signal.SIGINT, signal.SIGTERM)} if main else {}
    try:
        server = build(settings)
        try:
            announce(server, out or sys.stdout)
            config = uvicorn.Config(server.app, host=settings.host, port=settings.port,
                                    loop="uvloop", lifespan="on", **connection_limits(settings),
                                    log_level=settings.log_level, server_header=False,
                                    log_config=log_config(settings),
                                    timeout_graceful_shutdown=5)
            server.gw.redact_logs()  # the handlers uvicorn's config just made
            uvicorn.Server(config).run()
        finally:
            server.close()
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


__all__ = ["Announcement", "Server", "ServerSettings", "announce", "build", "run",
           "worker_app"]

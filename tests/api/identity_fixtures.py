"""A REST app over a real SQLite gateway for the identity, webhook and server tests: two
tenants (``default`` and ``other``) plus the system tenant, a global ``echo`` tool and an
``approve``-gated ``wire`` tool, one profile and agent per tenant, and tokens for every role.
Spoken to through :class:`tests.support.rest.RestClient`."""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from fastapi.testclient import TestClient

from tests.support.rest import RestClient
from toolkeeper import Activation, Agent, Gateway, Profile, Risk, SideEffect, tool
from toolkeeper.api import ApiSettings, create_app
from toolkeeper.bounds import TenantBounds
from toolkeeper.builtins import BUILTINS
from toolkeeper.pipeline.runtime import Settings
from toolkeeper.providers.factory import ProviderFactory
from toolkeeper.secrets.embedded import EmbeddedSecretsStore
from toolkeeper.store import Store


@tool(side_effect=SideEffect.PURE, inline=True, risk=Risk.LOW)
def echo(text: str) -> str:
    """Return ``text`` unchanged (what a leaky tool would do with a credential)."""
    return text


@tool(side_effect=SideEffect.IRREVERSIBLE, risk=Risk.CRITICAL)
def wire(amount: int) -> dict[str, int]:
    """Move money: critical, so an approver must decide first."""
    return {"wired": amount}


LOOPBACK_BOUNDS = TenantBounds(networks=("127.0.0.0/8",))
"""The operator lets tenants allow-list loopback: the test receivers listen there."""


def open_gateway(url: str, *, embedded: bool,
                 tenant_bounds: TenantBounds = LOOPBACK_BOUNDS) -> Gateway:
    """A gateway on ``url``, with an embedded secrets store when asked."""
    store = Store.open(url)
    secrets = EmbeddedSecretsStore(store.blobs, os.urandom(32)) if embedded else None
    return Gateway(store, secrets=secrets, factory=ProviderFactory(builtins=BUILTINS),
                   settings=Settings(tenant_bounds=tenant_bounds))


def seed(gw: Gateway) -> dict[str, str]:
    """Tools, profiles, agents and tokens of both tenants and the system tenant."""
    gw.registry.register(echo)
    gw.registry.register(wire)
    acts = (Activation(tool="echo"), Activation(tool="wire"))
    for tenant, profile, agent in (("default", "reader", "bot"),
                                   ("other", "other-prof", "other-bot")):
        gw.registry.put_profile(Profile(name=profile, tenant_id=tenant, autonomy=3,
                                        activations=acts))
        gw.registry.put_agent(Agent(name=agent, profile=profile, tenant_id=tenant))
    tokens: dict[str, str] = {}
    for who, tenant, role, agent in (
            ("admin", "default", "admin", None), ("operator", "default", "operator", None),
            ("approver", "default", "approver", None), ("agent", "default", "agent", "bot"),
            ("other_admin", "other", "admin", None),
            ("other_agent", "other", "agent", "other-bot"),
            ("system_admin", "system", "admin", None)):
        tokens[who] = gw.store.tokens.create(tenant_id=tenant, role=role, agent=agent,
                                             label=who)[1]
    return tokens


@contextmanager
def identity_api(where: Path | str, *, embedded: bool = True,
                 tenant_bounds: TenantBounds = LOOPBACK_BOUNDS) -> Iterator[RestClient]:
    """A seeded app on a fresh database (a URL, or a directory for a SQLite file)."""
    url = where if isinstance(where, str) else f"sqlite:///{where}/identities.db"
    gw = open_gateway(url, embedded=embedded, tenant_bounds=tenant_bounds)
    try:
        tokens = seed(gw)
        app = create_app(gw, ApiSettings())
        app.state.system_tenant = "system"
        with TestClient(app) as client:
            yield RestClient(gw=gw, client=client, tokens=tokens)
    finally:
        gw.close()


@dataclass
class Received:
    """One request the receiver got."""

    path: str
    headers: dict[str, str]
    body: bytes


class Receiver:
    """A real HTTP server on 127.0.0.1 in a thread, recording what it receives and answering
    each request with the next status of ``statuses`` (then 200)."""

    def __init__(self, statuses: list[int] | None = None) -> None:
        self.got: list[Received] = []
        self.statuses = list(statuses or [])
        self.arrived = threading.Event()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", "0"))
                body = self.rfile.read(length)
                outer.got.append(Received(self.path, dict(self.headers.items()), body))
                status = outer.statuses.pop(0) if outer.statuses else 200
                self.send_response(status)
                self.send_header("Content-Length", "0")
                self.end_headers()
                outer.arrived.set()

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self._server.server_address[1]
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        """The receiver's URL by IP literal."""
        return f"http://127.0.0.1:{self.port}/hook"

    def __enter__(self) -> Receiver:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(5)

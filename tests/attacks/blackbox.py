"""The black-box probes' shared server (issue 26): a hostile agent and a hostile tenant
admin, from outside only (REST and ``/mcp`` of a real uvicorn, and the CLI). One server per
test module (SQLite, a thread), two tenants: ``default`` (agents ``bot``, ``viewer``
read-only, ``careful`` at autonomy 0, ``netbot`` allowed 127.0.0.1) and ``other`` (agent
``other-bot``), each with an admin token; a filesystem root with symlinks out, a FIFO,
``/dev/zero``, a 10 GiB sparse file; a platform secret and a recording loopback server that
inward probes must never reach. Every probe is a row of a :class:`ProbeTable`."""

from __future__ import annotations

import base64
import os
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.loopback import serving_app
from toolkeeper import Gateway
from toolkeeper.api import ApiSettings, create_app
from toolkeeper.server import mcp_hosts

CANARY = "blackbox-outside-canary-41c7"
TIMEOUT = 20.0
OPS_SECRET = "ops-platform-secret-9b2e77"
TENANT_SECRET = "other-tenant-credential-3c1d"
CONFIG = """\
version: 1
tools:
  - builtin: filesystem
    policy: {{root: "{root}"}}
  - builtin: http_request
  - builtin: web_fetch
  - builtin: calculate
  - builtin: json_transform
  - builtin: datetime_utils
profiles:
  - name: worker
    autonomy: 3
    activations:
      - {{tool: filesystem, policy: {{allow_write: true, allow_delete: true}}}}
      - {{tool: http_request, policy: {{allowed_methods: [GET, POST]}}}}
      - {{tool: web_fetch}}
      - {{tool: calculate}}
      - {{tool: json_transform}}
      - {{tool: datetime_utils}}
  - name: reader
    autonomy: 3
    activations: [{{tool: filesystem}}, {{tool: calculate}}]
  - name: careful
    autonomy: 0
    activations: [{{tool: filesystem, policy: {{allow_write: true}}}}]
  - name: net
    autonomy: 3
    activations:
      - tool: http_request
        policy: {{allowed_networks: ["127.0.0.1/32"], allowed_methods: [GET, POST]}}
      - {{tool: json_transform}}
agents:
  - {{name: bot, profile: worker}}
  - {{name: viewer, profile: reader}}
  - {{name: careful, profile: careful}}
  - {{name: netbot, profile: net}}
"""


class Recorder:
    """A loopback HTTP server counting every request it gets (any method)."""

    def __init__(self) -> None:
        self.hits: list[str] = []
        self.raw: list[str] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def _any(self) -> None:
                outer.hits.append(f"{self.command} {self.path}")
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length).decode(errors="replace") if length else ""
                outer.raw.append(f"{self.path}\n{self.headers}\n{body}")
                if self.path.startswith("/redirect?to="):
                    self.send_response(302)
                    self.send_header("Location", self.path.split("=", 1)[1])
                else:
                    self.send_response(200)
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"ok")

            do_GET = do_POST = do_PUT = do_HEAD = _any

            def log_message(self, *args: object) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self._server.server_address[1]
        threading.Thread(target=self._server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()


@dataclass
class Box:
    base: str
    tokens: dict[str, str]
    gw: Gateway
    root: Path
    outside: Path
    work: Path
    rec: Recorder
    http: httpx.Client

    def req(self, method: str, path: str, who: str | None = "admin", **kw: Any) -> httpx.Response:
        headers = {**({"Authorization": f"Bearer {self.tokens[who]}"} if who else {}),
                   **kw.pop("headers", {})}
        return self.http.request(method, self.base + path, headers=headers, **kw)

    def call(self, tool: str, action: str | None, arguments: Any, who: str = "bot",
             **fields: Any) -> dict[str, Any]:
        body = {"tool": tool, "arguments": arguments, **fields}
        if action is not None:
            body["action"] = action
        resp = self.req("POST", "/tools/execute", who, json=body)
        try:
            out: dict[str, Any] = resp.json()
        except ValueError:
            out = {"raw": resp.text}
        out["_http"] = resp.status_code
        return out

    def mcp(self, who: str, method: str, params: dict[str, Any],
            headers: dict[str, str] | None = None) -> httpx.Response:
        v = "2026-07-28"
        meta = {"io.modelcontextprotocol/protocolVersion": v,
                "io.modelcontextprotocol/clientCapabilities": {}}
        body = {"jsonrpc": "2.0", "id": 1, "method": method,
                "params": {**params, "_meta": {**meta, **params.get("_meta", {})}}}
        routing = {"Mcp-Method": method}
        name = params.get("name", params.get("uri"))
        if isinstance(name, str) and name.isprintable() and name.isascii() \
                and name == name.strip():
            routing["Mcp-Name"] = name
        return self.http.post(self.base + "/mcp", json=body, headers={
            "Accept": "application/json, text/event-stream", "Content-Type": "application/json",
            "MCP-Protocol-Version": v, **routing, **(headers or {}),
            "Authorization": f"Bearer {self.tokens[who]}"})


def _tree(tmp: Path) -> tuple[Path, Path]:
    root, outside = tmp / "root", tmp / "outside"
    (root / "docs").mkdir(parents=True)
    outside.mkdir()
    (root / "docs" / "a.txt").write_text("alpha\n")
    (outside / "secret.txt").write_text(CANARY + "\n")
    (outside / "dir").mkdir()
    (outside / "dir" / "deep.txt").write_text(CANARY + "\n")
    os.symlink(outside, root / "out_dir")
    os.symlink(outside / "secret.txt", root / "out_file")
    os.symlink("../../outside/secret.txt", root / "docs" / "rel_out")
    os.symlink("/dev/zero", root / "zero")
    os.symlink("/dev/urandom", root / "urandom")
    os.symlink("/etc", root / "etc")
    os.symlink("/proc/self/environ", root / "environ")
    os.symlink("loop_b", root / "loop_a")
    os.symlink("loop_a", root / "loop_b")
    os.symlink("/nonexistent/target", root / "dangling")
    os.mkfifo(root / "fifo")
    with (root / "sparse.bin").open("wb") as f:
        f.truncate(10 << 30)  # 10 GiB of holes
    return root, outside


@pytest.fixture(scope="module")
def box(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Box]:
    tmp = tmp_path_factory.mktemp("blackbox")
    root, outside = _tree(tmp)
    (tmp / "toolkeeper.yaml").write_text(CONFIG.format(root=root))
    (tmp / "secrets.key").write_bytes(base64.b64encode(os.urandom(32)))
    (tmp / "secrets.key").chmod(0o600)
    gw = Gateway.open(f"sqlite:///{tmp}/tk.db", config=tmp / "toolkeeper.yaml",
                      secrets="embedded", secrets_key_file=tmp / "secrets.key")
    gw._secrets.set_secret("ops", "token", OPS_SECRET)  # type: ignore[union-attr]
    gw.refresh_secrets()
    from toolkeeper import Activation, Agent, Profile
    gw.registry.put_profile(Profile(name="other-prof", tenant_id="other", autonomy=3,
                                    activations=(Activation(tool="calculate"),
                                                 Activation(tool="http_request"))))
    gw.registry.put_agent(Agent(name="other-bot", profile="other-prof", tenant_id="other"))
    tokens = {}
    for who, tenant, role, agent in (("admin", "default", "admin", None),
                                     ("approver", "default", "approver", None),
                                     ("bot", "default", "agent", "bot"),
                                     ("viewer", "default", "agent", "viewer"),
                                     ("careful", "default", "agent", "careful"),
                                     ("netbot", "default", "agent", "netbot"),
                                     ("other_admin", "other", "admin", None),
                                     ("other_bot", "other", "agent", "other-bot")):
        tokens[who] = gw.store.tokens.create(tenant_id=tenant, role=role, agent=agent,
                                             label=who)[1]
    app = create_app(gw, ApiSettings(mcp_allowed_hosts=mcp_hosts("127.0.0.1")))
    rec = Recorder()
    http = httpx.Client(timeout=TIMEOUT)
    try:
        with serving_app(app, what="uvicorn started", started_within=20, joined_within=15,
                         lifespan="on") as port:
            yield Box(f"http://127.0.0.1:{port}", tokens, gw, root, outside, tmp, rec, http)
    finally:
        http.close()
        rec.close()
        gw.close()


def stopped(out: dict[str, Any]) -> bool:
    """The call did not succeed (refused, failed or rejected by the route)."""
    return out.get("status") != "succeeded"


def gist(out: dict[str, Any]) -> str:
    if "error" in out:
        return f"{out['_http']} {out['error'].get('reason')}"
    return f"{out.get('status')} {out.get('reason')}"


def no_canary(out: dict[str, Any]) -> bool:
    return CANARY not in str(out)

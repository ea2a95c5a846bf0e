"""Black-box probes (issue 26): a hostile agent and a hostile tenant admin, from outside only
(REST and ``/mcp`` of a real uvicorn, and the CLI), try families of attacks the other suites
do not: SSRF spellings through every outbound built-in, filesystem escapes (traversal,
symlinks, special files, long and odd paths), arithmetic and JMESPath bombs, datetime input,
approval binding, idempotency keys across tenants, tenant admins widening tools, agent
endpoints and webhooks toward loopback, secret references written by an agent, MCP names not
listed. Every probe is a row of a :class:`ProbeTable`; each family asserts all held.

One server for the module (SQLite, a thread), two tenants: ``default`` (agent ``bot``) and
``other`` (agent ``other-bot``), each with an admin token. Inward targets that are loopback
point at a recording server which must see no request."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn

from tests.attacks.table import ProbeTable
from tests.support.processes import child_env
from tests.support.waiting import wait_until
from toolkeeper import Gateway
from toolkeeper.api import ApiSettings, create_app
from toolkeeper.server import mcp_hosts

CANARY = "blackbox-outside-canary-41c7"
TIMEOUT = 20.0
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
agents:
  - {{name: bot, profile: worker}}
  - {{name: viewer, profile: reader}}
"""


class Recorder:
    """A loopback HTTP server counting every request it gets (any method)."""

    def __init__(self) -> None:
        self.hits: list[str] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def _any(self) -> None:
                outer.hits.append(f"{self.command} {self.path}")
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
        if isinstance(name, str):
            routing["Mcp-Name"] = name
        return self.http.post(self.base + "/mcp", json=body, headers={
            "Accept": "application/json, text/event-stream", "Content-Type": "application/json",
            "MCP-Protocol-Version": v, **routing, **(headers or {}),
            "Authorization": f"Bearer {self.tokens[who]}"})


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


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
    gw = Gateway.open(f"sqlite:///{tmp}/tk.db", config=tmp / "toolkeeper.yaml")
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
                                     ("other_admin", "other", "admin", None),
                                     ("other_bot", "other", "agent", "other-bot")):
        tokens[who] = gw.store.tokens.create(tenant_id=tenant, role=role, agent=agent,
                                             label=who)[1]
    port = _free_port()
    app = create_app(gw, ApiSettings(mcp_allowed_hosts=mcp_hosts("127.0.0.1")))
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, lifespan="on",
                                           log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    rec = Recorder()
    http = httpx.Client(timeout=TIMEOUT)
    try:
        wait_until(lambda: bool(server.started), timeout=20, what="uvicorn started")
        yield Box(f"http://127.0.0.1:{port}", tokens, gw, root, outside, tmp, rec, http)
    finally:
        http.close()
        rec.close()
        server.should_exit = True
        thread.join(timeout=15)
        gw.close()


def _stopped(out: dict[str, Any]) -> bool:
    """The call did not succeed (refused, failed or rejected by the route)."""
    return out.get("status") != "succeeded"


def _gist(out: dict[str, Any]) -> str:
    if "error" in out:
        return f"{out['_http']} {out['error'].get('reason')}"
    return f"{out.get('status')} {out.get('reason')}"


def _no_canary(out: dict[str, Any]) -> bool:
    return CANARY not in str(out)


# -- SSRF: every outbound built-in, every spelling ------------------------------------------


def _inward(port: int) -> list[str]:
    p = port
    return [
        f"http://127.0.0.1:{p}/", f"http://127.1:{p}/", f"http://127.0.1:{p}/",
        f"http://2130706433:{p}/", f"http://0x7f000001:{p}/", f"http://0x7f.1:{p}/",
        f"http://017700000001:{p}/", f"http://0177.0.0.01:{p}/", f"http://0:{p}/",
        f"http://0.0.0.0:{p}/", f"http://[::]:{p}/", f"http://[::1]:{p}/",
        f"http://[0:0:0:0:0:0:0:1]:{p}/", f"http://[::ffff:127.0.0.1]:{p}/",
        f"http://[::ffff:7f00:1]:{p}/", f"http://[0:0:0:0:0:ffff:127.0.0.1]:{p}/",
        f"http://[::127.0.0.1]:{p}/", f"http://[64:ff9b::127.0.0.1]:{p}/",
        f"http://[2002:7f00:1::]:{p}/", f"http://[::ffff:127.0.0.1%25eth0]:{p}/",
        f"http://localhost:{p}/", f"http://LOCALHOST.:{p}/", f"http://localhost.localdomain:{p}/",
        f"http://ip6-localhost:{p}/", f"http://evil@127.0.0.1:{p}/",
        f"http://user:pw@127.0.0.1:{p}/", f"http://127.0.0.1:{p}#@example.com/",
        f"http://127.0.0.1:{p}\\@example.com/", f"http://example.com@127.0.0.1:{p}/",
        f"http://\uff11\uff12\uff17.\uff10.\uff10.\uff11:{p}/",  # fullwidth digits
        f"http://127\u30020\u30020\u30021:{p}/",  # ideographic full stops
        f"http://127.0.0.1.:{p}/", f"HTTP://127.0.0.1:{p}/", f"http://127.000.000.001:{p}/",
        f"http://[::ffff:0:127.0.0.1]:{p}/", f"http://%31%32%37.0.0.1:{p}/",
        f"http://127.0.0.1:{p}/%2e%2e/", f" http://127.0.0.1:{p}/",
    ]


ELSEWHERE = ["http://169.254.169.254/latest/meta-data/", "http://[fd00:ec2::254]/",
             "http://0xa9.0xfe.0xa9.0xfe/", "http://2852039166/", "http://10.0.0.1/",
             "http://[::ffff:a9fe:a9fe]/", "file:///etc/passwd", "gopher://127.0.0.1:25/",
             "ftp://127.0.0.1/", "dict://127.0.0.1:11211/", "http:///etc/passwd",
             "unix:///var/run/docker.sock"]


def test_ssrf_over_rest_every_outbound_builtin(box: Box) -> None:
    table = ProbeTable("black box: SSRF over REST")
    before = len(box.rec.hits)
    for url in _inward(box.rec.port) + ELSEWHERE:
        for tool, args in (("http_request", {"url": url, "method": "GET"}),
                           ("web_fetch", {"url": url})):
            out = box.call(tool, None, args)
            table.add(f"{tool} {url!r}", "refused", _gist(out), _stopped(out))
    out = box.call("http_request", None, {"url": f"http://127.0.0.1:{box.rec.port}/",
                                          "method": "POST", "body": "x"}, who="other_bot")
    table.add("other tenant http_request POST loopback", "refused", _gist(out), _stopped(out))
    seen = box.rec.hits[before:]
    table.add("loopback recorder contacted", "0 requests", f"{len(seen)} {seen[:3]}", not seen)
    table.check()


# -- filesystem: paths out of the root ------------------------------------------------------

READ_PATHS = [
    "../outside/secret.txt", "docs/../../outside/secret.txt", "/etc/passwd",
    "//etc/passwd", "docs/../../../../../../etc/passwd", "out_file", "out_dir/secret.txt",
    "out_dir/dir/deep.txt", "docs/rel_out", "etc/passwd", "environ", "./../outside/secret.txt",
    "docs/./../../outside/secret.txt", "..", "../", "..\\outside\\secret.txt",
    "%2e%2e/outside/secret.txt", "\u2025/outside/secret.txt", "\uff0e\uff0e/outside/secret.txt",
    "docs/a.txt\x00../../outside/secret.txt", "docs/\x00", "loop_a", "dangling",
    "/proc/self/environ", "/proc/self/cwd/toolkeeper.yaml", "~/.ssh/id_rsa",
    "docs/" + "x/" * 3000 + "a.txt", "a" * 5000, "docs/a.txt/../../outside/secret.txt",
    "out_dir/../root/docs/a.txt/../../../outside/secret.txt",
]
SPECIAL = ["zero", "urandom", "fifo", "sparse.bin"]


def test_filesystem_read_never_leaves_the_root(box: Box) -> None:
    table = ProbeTable("black box: filesystem reads")
    for path in READ_PATHS:
        for action in ("read", "stat", "list"):
            out = box.call("filesystem", action, {"path": path})
            held = _no_canary(out) and ("root:x:0:0" not in str(out))
            if action == "read":
                held = held and _stopped(out)
            table.add(f"{action} {path[:60]!r}", "no outside data", _gist(out), held)
    for path in SPECIAL:  # a read that blocks or streams forever must be refused, at once
        out = box.call("filesystem", "read", {"path": path})
        table.add(f"read special {path}", "refused", _gist(out), _stopped(out))
    table.check()


GLOBS = ["../*", "../outside/*", "../**/secret.txt", "**/secret.txt", "**/deep.txt",
         "out_dir/*", "out_dir/**", "*/secret.txt", "/etc/*", "**/../../outside/*",
         "docs/../../*", "**/*/../../../outside/*", "etc/pass*", "[.][.]/*", "**/" * 60 + "*",
         "*" * 2000, "**/**/**/**/**/**/**/**/**/**/**/*"]


def test_filesystem_glob_never_leaves_the_root(box: Box) -> None:
    table = ProbeTable("black box: filesystem glob")
    for pattern in GLOBS:
        out = box.call("filesystem", "glob", {"pattern": pattern})
        paths = str((out.get("output") or {}).get("matches"))
        held = _no_canary(out) and "secret.txt" not in paths and "deep.txt" not in paths \
            and "passwd" not in paths
        table.add(f"glob {pattern[:50]!r}", "nothing outside", _gist(out), held)
    table.check()


WRITES = [
    ("write", {"path": "../outside/planted.txt", "content": "x"}),
    ("write", {"path": "out_dir/planted.txt", "content": "x"}),
    ("write", {"path": "out_file", "content": "overwritten"}),
    ("write", {"path": "docs/rel_out", "content": "overwritten"}),
    ("write", {"path": "dangling", "content": "x"}),
    ("write", {"path": "/tmp/planted-blackbox.txt", "content": "x"}),
    ("append", {"path": "out_file", "content": "appended"}),
    ("append", {"path": "out_dir/secret.txt", "content": "appended"}),
    ("append", {"path": "zero", "content": "x"}),
    ("append", {"path": "fifo", "content": "x"}),
    ("move", {"source": "docs/a.txt", "destination": "../outside/moved.txt"}),
    ("move", {"source": "docs/a.txt", "destination": "out_dir/moved.txt"}),
    ("move", {"source": "out_file", "destination": "docs/stolen.txt"}),
    ("move", {"source": "out_dir", "destination": "docs/stolen_dir"}),
    ("move", {"source": "docs", "destination": "out_dir/docs"}),
    ("move", {"source": ".", "destination": "../outside/root2"}),
    ("delete", {"path": "out_file"}),
    ("delete", {"path": "out_dir/secret.txt"}),
    ("delete", {"path": "../outside/secret.txt"}),
    ("delete", {"path": "."}),
    ("write", {"path": "docs/big.txt", "content": "x" * 300_000}),
    ("write", {"path": "docs/a.txt", "content": "@@not base64@@", "encoding": "base64"}),
]


def test_filesystem_writes_never_leave_the_root(box: Box) -> None:
    table = ProbeTable("black box: filesystem writes")
    before = {p: p.read_bytes() for p in box.outside.rglob("*") if p.is_file()}
    for action, args in WRITES:
        out = box.call("filesystem", action, args)
        outside_now = {p: p.read_bytes() for p in box.outside.rglob("*") if p.is_file()}
        held = outside_now == before and not Path("/tmp/planted-blackbox.txt").exists()
        if args != {"path": "out_file"}:  # deleting the link itself (inside) is allowed
            held = held and _stopped(out)
        table.add(f"{action} {args}"[:90], "refused, outside unchanged", _gist(out), held)
    out = box.call("filesystem", "read", {"path": "docs/a.txt"}, who="viewer")
    table.add("read-only profile reads", "succeeded", _gist(out), not _stopped(out))
    out = box.call("filesystem", "write", {"path": "docs/v.txt", "content": "x"}, who="viewer")
    table.add("read-only profile writes", "refused", _gist(out), _stopped(out))
    table.check()

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

import base64
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


# -- pure built-ins: bombs must be refused at once, never hang the server -------------------

CALC_BOMBS = ["9**9**9", "9**99999", "(10**999)**2", "10**999*10**999", "2**1001*2**1001",
              "round(5, -(10**20))", "round(5, -99999999)", "round(1.5, 10**999)",
              "round(10**999, -10**999)", "(" * 200 + "1" + ")" * 200, "-" * 900 + "1",
              "10**999/3", "sqrt(10**999)", "exp(10**6)", "log(0)", "1/0", "10**999 % 0.5",
              "floor(1e308*10)", "max(" + ",".join(["10**999"] * 50) + ")**2",
              "__import__('os').system('id')", "().__class__", "[1]*10**9", "'a'*10**9",
              "lambda: 1", "(1).real", "pi**pi**pi**pi", "1e308*1e308", "abs(-(10**1000))"]


def test_calculate_bombs_are_refused(box: Box) -> None:
    table = ProbeTable("black box: calculate bombs")
    for expr in CALC_BOMBS:
        out = box.call("calculate", None, {"expression": expr})
        result = str((out.get("output") or {}).get("result", ""))
        table.add(f"calculate {expr[:50]!r}", "refused or small",
                  _gist(out), _stopped(out) or len(result) <= 1000)
    out = box.call("calculate", None, {"expression": "round(2.675, 2) + 2**10"})
    table.add("calculate ordinary", "succeeded", _gist(out), not _stopped(out))
    table.check()


def _pipes(unit: str, n: int) -> str:
    return "|".join([unit] * n)


JMES_BOMBS = [
    ("doubling by reference", ["x" * 10] * 10, _pipes("[@,@]", 40)),
    ("doubling, then length", ["x" * 10] * 10, _pipes("[@,@]", 40) + "|length(@)"),
    ("doubling, then to_string", "x" * 100, _pipes("[@,@]", 40) + "|to_string(@)"),
    ("flatten tenfold", list(range(1000)), _pipes("[@,@,@,@,@,@,@,@,@,@][]", 12)),
    ("flatten, sort", list(range(1000)), _pipes("[@,@,@,@,@,@,@,@,@,@][]", 6) + "|sort(@)"),
    ("join grows a string", ["y" * 1000] * 10,
     _pipes("[join('', @), join('', @), join('', @), join('', @)]", 10)),
    ("projection of pairs", list(range(1000)), "[*].[" + ",".join(["@"] * 100) + "]|[]|[]"),
    ("map doubling", [[1]], _pipes("map(&[@,@], @)", 40)),
    ("unknown function", {}, "system('id')"),
]


def test_json_transform_bombs_are_refused(box: Box) -> None:
    table = ProbeTable("black box: json_transform bombs")
    for probe, data, expr in JMES_BOMBS:
        try:
            out = box.call("json_transform", None, {"data": data, "expression": expr})
            observed = _gist(out)
            held = _stopped(out) and "payload_too_large" not in observed  # a bound reached
        except httpx.HTTPError as exc:
            observed, held = type(exc).__name__, False
        table.add(f"json_transform {probe}", "refused at once", observed, held)
    out = box.call("json_transform", None, {"data": {"a": [1, 2]}, "expression": "a[-1]"})
    table.add("json_transform ordinary", "succeeded", _gist(out), not _stopped(out))
    table.check()


DATETIME = [
    ("convert", {"value": "2024-01-01T00:00:00Z", "to_tz": "../../../etc/passwd"}),
    ("convert", {"value": "2024-01-01T00:00:00Z", "to_tz": "/etc/localtime"}),
    ("convert", {"value": "2024-01-01T00:00:00Z", "to_tz": "Europe/../../etc/passwd"}),
    ("now", {"tz": "posix/../../../../proc/self/environ"}),
    ("parse", {"value": "@99999999999999999999"}),
    ("parse", {"value": "@-999999999999"}),
    ("parse", {"value": "9999-12-31T23:59:59+14:00"}),
    ("diff", {"start": "0001-01-01T00:00:00Z", "end": "9999-12-31T00:00:00Z",
              "unit": "seconds"}),
    ("parse", {"value": "x" * 10_000}),
    ("add", {"value": "2024-01-01T00:00:00Z", "amount": 1e300, "unit": "days"}),
]


def test_datetime_inputs(box: Box) -> None:
    table = ProbeTable("black box: datetime_utils")
    for action, args in DATETIME:
        out = box.call("datetime_utils", action, args)
        held = "root:x" not in str(out) and out["_http"] < 500
        table.add(f"datetime {action} {str(args)[:50]}", "no 5xx, nothing read", _gist(out), held)
    table.check()


# -- a hostile tenant admin over REST: tools, activations, endpoints, webhook --------------


def _tenant_tools(port: int, root: Path, outside: Path) -> list[tuple[str, dict[str, Any]]]:
    loop = f"http://127.0.0.1:{port}/"
    http = [(f"http tool {u}", {"implementation_type": "http",
                                "implementation_config": {"url": u}})
            for u in (loop, f"http://2130706433:{port}/", f"http://[::1]:{port}/",
                      f"http://localhost:{port}/", f"http://0:{port}/",
                      "http://169.254.169.254/latest/meta-data/", "file:///etc/passwd")]
    builtin = [
        ("builtin filesystem root /", {"policy": {"root": "/"}}, "filesystem"),
        ("builtin filesystem root outside", {"policy": {"root": str(outside)}}, "filesystem"),
        ("builtin filesystem root via symlink", {"policy": {"root": str(root / "out_dir")}},
         "filesystem"),
        ("builtin filesystem root ..", {"policy": {"root": str(root) + "/.."}}, "filesystem"),
        ("builtin http_request loopback net",
         {"policy": {"allowed_networks": ["127.0.0.0/8"]}}, "http_request"),
        ("builtin http_request all nets", {"policy": {"allowed_networks": ["0.0.0.0/0"]}},
         "http_request"),
        ("builtin http_request ::/0", {"policy": {"allowed_networks": ["::/0"]}},
         "http_request"),
        ("builtin web_fetch mapped loopback",
         {"policy": {"allowed_networks": ["::ffff:127.0.0.0/104"]}}, "web_fetch"),
        ("builtin shell with sh", {"policy": {"commands": {"sh": {"path": "/bin/sh"}}}},
         "shell"),
        ("builtin git on /", {"policy": {"repositories": {"r": {"path": "/"}}}}, "git"),
    ]
    out = [(p, {**b, "implementation_type": "builtin",
                "implementation_config": {"builtin_key": k}}) for p, b, k in builtin]
    return http + out + [
        ("native entry point", {"implementation_type": "native",
                                "implementation_config": {"entry_point": "os:system"}}),
        ("python entry point", {"implementation_type": "python",
                                "implementation_config": {"entry_point": "subprocess:run"}}),
        ("function os.system", {"implementation_type": "function",
                                "implementation_config": {"function": "os.system"}}),
        ("upstream mcp stdio", {"implementation_type": "mcp", "implementation_config": {
            "command": ["/bin/sh", "-c", "id"], "tool": "x"}}),
        ("upstream mcp http loopback", {"implementation_type": "mcp", "implementation_config": {
            "url": loop, "tool": "x"}}),
        ("artifact", {"implementation_type": "artifact",
                      "implementation_config": {"path": "/etc/passwd"}}),
    ]


def test_tenant_admin_cannot_write_a_tool_that_reaches_the_host(box: Box) -> None:
    table = ProbeTable("black box: tenant admin tools")
    before = len(box.rec.hits)
    for i, (probe, fields) in enumerate(_tenant_tools(box.rec.port, box.root, box.outside)):
        name = f"evil{i}"
        made = box.req("POST", "/tools", "other_admin", json={"name": name, **fields})
        observed = f"create {made.status_code}"
        held = made.status_code >= 400
        if made.status_code < 300:  # stored: it must not run (publish, enable, call)
            tid = made.json()["id"]
            pub = box.req("POST", f"/tools/{tid}/publish", "other_admin", json={})
            act = box.req("POST", "/activations", "other_admin",
                          json={"profile": "other-prof", "tool": name})
            args: dict[str, Any] = {"path": "secret.txt"} if "filesystem" in probe else {}
            action = "read" if "filesystem" in probe else None
            out = box.call(name, action, args, who="other_bot")
            observed += f", publish {pub.status_code}, enable {act.status_code}, {_gist(out)}"
            held = _stopped(out) and _no_canary(out) and "root:x" not in str(out)
        table.add(f"other_admin {probe}", "refused", observed, held)
    seen = box.rec.hits[before:]
    table.add("loopback recorder contacted", "0 requests", f"{len(seen)}", not seen)
    table.check()


ACTIVATION_POLICIES = [
    ("filesystem", {"root": "/"}), ("filesystem", {"root": "/etc"}),
    ("filesystem", {"root": "../outside"}), ("filesystem", {"max_read_bytes": 10**12}),
    ("http_request", {"allowed_networks": ["127.0.0.0/8"]}),
    ("http_request", {"allowed_networks": ["127.0.0.1/32"]}),
    ("http_request", {"allowed_networks": ["0.0.0.0/0"]}),
    ("http_request", {"allowed_networks": ["169.254.0.0/16"]}),
    ("http_request", {"allowed_networks": ["::1/128"]}),
    ("http_request", {"allowed_networks": ["::ffff:0:0/96"]}),
    ("http_request", {"allowed_networks": ["64:ff9b::/96"]}),
    ("http_request", {"allowed_networks": ["2002::/16"]}),
    ("web_fetch", {"allowed_networks": ["0.0.0.0/1", "128.0.0.0/1"]}),
]


def test_tenant_admin_activation_policies_cannot_widen(box: Box) -> None:
    """Tenant ``default``'s admin enables operator built-ins for its own profile with
    policies beyond the operator's (empty) ceiling: refused, or stored and the call refused."""
    table = ProbeTable("black box: tenant activation policies")
    before = len(box.rec.hits)
    for tool, policy in ACTIVATION_POLICIES:
        resp = box.req("POST", "/activations", "admin",
                       json={"profile": "reader", "tool": tool, "policy": policy})
        observed, held = f"{resp.status_code}", resp.status_code >= 400
        if resp.status_code < 300:
            args: dict[str, Any] = ({"path": "passwd"} if tool == "filesystem" else
                                    {"url": f"http://127.0.0.1:{box.rec.port}/"})
            out = box.call(tool, "read" if tool == "filesystem" else None, args, who="viewer")
            observed += f", call {_gist(out)}"
            held = _stopped(out) and "root:x" not in str(out)
        table.add(f"activate {tool} {policy}", "refused", observed, held)
    seen = box.rec.hits[before:]
    table.add("loopback recorder contacted", "0 requests", f"{len(seen)}", not seen)
    box.req("POST", "/activations", "admin", json={"profile": "reader", "tool": "filesystem"})
    table.check()


def _loop_urls(port: int) -> list[str]:
    return [f"http://127.0.0.1:{port}/h", f"http://localhost:{port}/h", f"http://127.1:{port}/h",
            f"http://2130706433:{port}/h", f"http://0x7f000001:{port}/h", f"http://0:{port}/h",
            f"http://[::1]:{port}/h", f"http://[::ffff:127.0.0.1]:{port}/h",
            "http://169.254.169.254/h", f"http://0.0.0.0:{port}/h", "file:///etc/passwd",
            f"http://evil@127.0.0.1:{port}/h"]


def test_agent_endpoints_toward_loopback_are_refused(box: Box) -> None:
    table = ProbeTable("black box: agent endpoints")
    for url in _loop_urls(box.rec.port):
        for transport in ("http", "a2a"):
            resp = box.req("PUT", "/agents/viewer/endpoint", "admin", json={
                "transport": transport, "url": url, "status": "published"})
            table.add(f"endpoint {transport} {url}", "422", str(resp.status_code),
                      resp.status_code == 422)
        resp = box.req("PUT", "/agents/viewer/endpoint", "admin", json={
            "transport": "http", "url": url, "status": "published",
            "allowed_networks": ["127.0.0.0/8"]})
        table.add(f"endpoint + loopback net {url}", "422", str(resp.status_code),
                  resp.status_code == 422)
    table.check()


@pytest.mark.xfail(strict=True, reason="issue 26 item 10: PUT /settings/webhook accepts "
                   "loopback spellings other than 127.0.0.1; fixed in services/webhooks.py")
def test_webhook_toward_loopback_is_refused(box: Box) -> None:
    table = ProbeTable("black box: webhook URL")
    for url in _loop_urls(box.rec.port):
        resp = box.req("PUT", "/settings/webhook", "admin",
                       json={"url": url, "secret": "s" * 32})
        table.add(f"webhook {url}", "422", str(resp.status_code), resp.status_code == 422)
    box.req("DELETE", "/settings/webhook", "admin")
    table.check()


# -- approvals bound to the call, idempotency keys per tenant ------------------------------


def test_an_approval_runs_only_the_call_it_approved(box: Box) -> None:
    table = ProbeTable("black box: approval binding")
    args = {"path": "docs/approved.txt", "content": "approved"}
    first = box.call("filesystem", "write", args, who="careful")
    ap = first.get("approval_id")
    table.add("write at autonomy 0", "stopped with an approval id", _gist(first),
              first.get("status") in ("approval_required", "confirmation_required")
              and bool(ap))
    kind = box.req("GET", f"/approvals/{ap}", "approver").json().get("kind")
    deciders = ("bot", "viewer", "other_admin", "other_bot") + (
        ("careful",) if kind == "approve" else ())
    for who in deciders:
        for verb in ("approve", "confirm"):
            r = box.req("POST", f"/approvals/{ap}/{verb}", who, json={})
            table.add(f"{who} {verb}s ({kind} gate)", "refused", str(r.status_code),
                      r.status_code in (403, 404, 409))
    r = box.req("POST", f"/approvals/{ap}/approve", "approver", json={"note": "ok"})
    table.add("approver approves", "200", str(r.status_code), r.status_code == 200)
    changed = [{"path": "docs/approved.txt", "content": "CHANGED"},
               {"path": "docs/other.txt", "content": "approved"},
               {"path": "docs/approved.txt", "content": "approved", "encoding": "utf-8"},
               {"path": "./docs/approved.txt", "content": "approved"},
               {"path": "docs//approved.txt", "content": "approved"}]
    for other in changed:
        out = box.call("filesystem", "write", other, who="careful", approval_id=ap)
        table.add(f"approved id, args {other}"[:80], "refused", _gist(out),
                  out.get("status") != "succeeded")
    for action in ("append", "delete"):
        out = box.call("filesystem", action, args if action == "append"
                       else {"path": "docs/approved.txt"}, who="careful", approval_id=ap)
        table.add(f"approved id on {action}", "refused", _gist(out), _stopped(out))
    out = box.call("filesystem", "write", args, who="viewer", approval_id=ap)
    table.add("approved id by a read-only agent", "refused", _gist(out), _stopped(out))
    out = box.call("filesystem", "write", args, who="careful", approval_id=ap)
    table.add("approved call itself", "succeeded", _gist(out), out.get("status") == "succeeded")
    again = box.call("filesystem", "write", {**args, "content": "again"}, who="careful",
                     approval_id=ap)
    table.add("approval reused with new content", "refused", _gist(again), _stopped(again))
    table.add("file holds the approved content", "approved",
              (box.root / "docs/approved.txt").read_text(),
              (box.root / "docs/approved.txt").read_text() == "approved")
    table.check()


def test_idempotency_keys_do_not_cross_tenants(box: Box) -> None:
    table = ProbeTable("black box: idempotency keys")
    key = "shared-key-0001"
    mine = box.call("calculate", None, {"expression": "6*7"}, who="bot", idempotency_key=key)
    theirs = box.call("calculate", None, {"expression": "6*7"}, who="other_bot",
                      idempotency_key=key)
    table.add("same key, other tenant", "own fresh call", _gist(theirs),
              theirs.get("status") == "succeeded" and not theirs.get("deduped")
              and theirs.get("call_id") != mine.get("call_id"))
    changed = box.call("calculate", None, {"expression": "1+1"}, who="other_bot",
                       idempotency_key=key)
    table.add("same key, other tenant, other args", "not the first tenant's result",
              _gist(changed), "42" not in str(changed.get("output")))
    for who in ("viewer", "netbot"):
        r = box.call("calculate", None, {"expression": "6*7"}, who=who, idempotency_key=key)
        table.add(f"same key, agent {who}", "not handed bot's call",
                  _gist(r), r.get("call_id") != mine.get("call_id") or r.get("_http") >= 400)
    r = box.req("POST", "/tools/execute", "bot", json={"tool": "calculate", "arguments": {
        "expression": "1"}}, headers={"Idempotency-Key": "x" * 5000})
    table.add("oversized Idempotency-Key header", "4xx", str(r.status_code),
              400 <= r.status_code < 500)
    table.check()


# -- secrets: a reference an agent writes never resolves ------------------------------------


def test_agent_written_secret_references_never_resolve(box: Box) -> None:
    table = ProbeTable("black box: agent-written secret references")
    made = box.req("PUT", "/credentials/conn/key", "other_admin", json={"value": TENANT_SECRET})
    assert made.status_code < 300, made.text
    mine = box.req("PUT", "/credentials/mine/key", "admin", json={"value": TENANT_SECRET + "x"})
    assert mine.status_code < 300, mine.text
    before = len(box.rec.raw)
    url = f"http://127.0.0.1:{box.rec.port}/s"
    refs = ["${secret:ops/token}", "${secret:conn/key}", "${secret:mine/key}",
            "${secret:other/conn/key}", "${env:TOOLKEEPER_SECRET_OPS__TOKEN}",
            "$" + "{secret:ops/token}", "${{secret:ops/token}}"]
    for ref in refs:
        for probe, args in (
                ("header", {"url": url, "method": "GET", "headers": {"X-Probe": ref}}),
                ("bearer", {"url": url, "method": "GET",
                            "headers": {"Authorization": f"Bearer {ref}"}}),
                ("query", {"url": f"{url}?q={ref}", "method": "GET"}),
                ("body", {"url": url, "method": "POST", "body": ref})):
            out = box.call("http_request", None, args, who="netbot")
            table.add(f"http_request {probe} {ref}", "sent unresolved", _gist(out),
                      OPS_SECRET not in str(out) and TENANT_SECRET not in str(out))
        out = box.call("json_transform", None, {"data": {"a": ref}, "expression": "a"},
                       who="netbot")
        table.add(f"json_transform echoes {ref}", "unresolved", _gist(out),
                  OPS_SECRET not in str(out) and TENANT_SECRET not in str(out))
    sent = "\n".join(box.rec.raw[before:])
    table.add("requests received", "some", str(len(box.rec.raw) - before),
              len(box.rec.raw) > before)
    table.add("platform secret at the receiver", "absent", str(OPS_SECRET in sent),
              OPS_SECRET not in sent)
    table.add("tenant credential at the receiver", "absent", str(TENANT_SECRET in sent),
              TENANT_SECRET not in sent)
    audit = box.req("GET", "/audit", "admin").text + box.req("GET", "/calls", "admin").text
    table.add("secrets in audit/calls", "absent", str(OPS_SECRET in audit),
              OPS_SECRET not in audit and TENANT_SECRET not in audit)
    table.check()


# -- MCP: names not listed, resources, methods, sessions, roles -----------------------------


def _mcp_gist(resp: httpx.Response) -> tuple[str, dict[str, Any]]:
    try:
        body = resp.json()
    except ValueError:
        return f"{resp.status_code} (not JSON)", {}
    if not isinstance(body, dict):
        return f"{resp.status_code}", {}
    if "error" in body:
        return f"{resp.status_code} rpc {body['error'].get('code')}", body
    result = body.get("result") or {}
    return f"{resp.status_code} isError={result.get('isError')}", body


def _mcp_ran(body: dict[str, Any]) -> bool:
    result = body.get("result")
    return isinstance(result, dict) and result.get("isError") is False and "content" in result


MCP_CALLS: list[tuple[str, str, dict[str, Any]]] = [
    ("viewer", "filesystem_write", {"path": "docs/mcp.txt", "content": "x"}),
    ("viewer", "filesystem_delete", {"path": "docs/a.txt"}),
    ("viewer", "http_request", {"url": "http://example.com/", "method": "GET"}),
    ("viewer", "json_transform", {"data": {}, "expression": "@"}),
    ("viewer", "shell", {"command": "id"}),
    ("viewer", "git_status", {}),
    ("viewer", "filesystem", {"path": "docs/a.txt"}),
    ("viewer", "filesystem_read ", {"path": "docs/a.txt"}),
    ("viewer", "FILESYSTEM_WRITE", {"path": "docs/mcp.txt", "content": "x"}),
    ("viewer", "filesystem.write", {"path": "docs/mcp.txt", "content": "x"}),
    ("viewer", "filesystem/write", {"path": "docs/mcp.txt", "content": "x"}),
    ("viewer", "filesystem_write\u0000", {"path": "docs/mcp.txt", "content": "x"}),
    ("other_bot", "filesystem_read", {"path": "docs/a.txt"}),
    ("other_bot", "json_transform", {"data": {}, "expression": "@"}),
    ("bot", "filesystem_read", {"path": "../outside/secret.txt"}),
    ("bot", "filesystem_read", {"path": "out_file"}),
    ("bot", "filesystem_glob", {"pattern": "../**"}),
    ("bot", "http_request", {"url": "http://127.1:9/", "method": "GET"}),
    ("bot", "web_fetch", {"url": "http://[::ffff:127.0.0.1]:9/"}),
    ("bot", "calculate", {"expression": "round(5, -(10**20))"}),
    ("careful", "filesystem_write", {"path": "docs/mcp.txt", "content": "x"}),
]


def test_mcp_calls_out_of_reach_are_refused(box: Box) -> None:
    table = ProbeTable("black box: MCP tools/call")
    for who, name, args in MCP_CALLS:
        resp = box.mcp(who, "tools/call", {"name": name, "arguments": args})
        gist, body = _mcp_gist(resp)
        held = not _mcp_ran(body) and CANARY not in resp.text
        table.add(f"{who} tools/call {name!r}", "refused", gist, held)
    out = box.mcp("bot", "tools/call", {"name": "calculate", "arguments": {"expression": "2+2"}})
    table.add("bot tools/call calculate 2+2", "ran", _mcp_gist(out)[0],
              _mcp_ran(_mcp_gist(out)[1]))
    table.add("no file written through MCP", "absent", str((box.root / "docs/mcp.txt").exists()),
              not (box.root / "docs/mcp.txt").exists())
    table.check()


MCP_OTHER: list[tuple[str, str, dict[str, Any]]] = [
    ("bot", "resources/read", {"uri": "file:///etc/passwd"}),
    ("bot", "resources/read", {"uri": f"file://{'/' + 'proc/self/environ'}"}),
    ("bot", "resources/read", {"uri": "toolkeeper://tools/tenant/other/available"}),
    ("bot", "resources/read", {"uri": "toolkeeper://tools/agent/other-bot/enabled"}),
    ("bot", "resources/read", {"uri": "toolkeeper://tools/agent/viewer/enabled/../../../"}),
    ("bot", "resources/read", {"uri": "http://127.0.0.1:9/"}),
    ("bot", "prompts/get", {"name": "x"}),
    ("bot", "completion/complete", {"ref": {"type": "ref/prompt", "name": "x"},
                                    "argument": {"name": "a", "value": "b"}}),
    ("bot", "sampling/createMessage", {"messages": [], "maxTokens": 1}),
    ("bot", "roots/list", {}),
    ("bot", "logging/setLevel", {"level": "debug"}),
    ("bot", "tasks/list", {}),
    ("admin", "tools/call", {"name": "calculate", "arguments": {"expression": "1"}}),
    ("approver", "tools/list", {}),
    ("other_admin", "tools/list", {}),
]


def test_mcp_other_methods_and_roles(box: Box) -> None:
    table = ProbeTable("black box: MCP methods and roles")
    for who, method, params in MCP_OTHER:
        resp = box.mcp(who, method, params)
        gist, body = _mcp_gist(resp)
        text = resp.text
        held = ("error" in body or resp.status_code >= 400) and "root:x" not in text \
            and CANARY not in text
        if method == "resources/read" and "tenant/other" not in str(params) \
                and "other-bot" not in str(params) and "result" in body:
            held = "root:x" not in text and "HOME=" not in text
        table.add(f"{who} {method} {str(params)[:40]}", "refused", gist, held)
    listed = box.mcp("viewer", "tools/list", {}).text
    table.add("viewer tools/list", "no http_request, no shell", "listed",
              "http_request" not in listed and "shell" not in listed)
    forged = box.http.post(box.base + "/mcp", json={
        "jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}, headers={
        "Accept": "application/json, text/event-stream", "Content-Type": "application/json",
        "MCP-Protocol-Version": "2025-11-25", "Mcp-Session-Id": "forged-session-0000",
        "Authorization": f"Bearer {box.tokens['viewer']}"})
    table.add("forged Mcp-Session-Id", "404/400", str(forged.status_code),
              forged.status_code in (400, 404))
    bare = box.http.post(box.base + "/mcp", json={"jsonrpc": "2.0", "id": 1,
                                                  "method": "tools/list", "params": {}},
                         headers={"Accept": "application/json, text/event-stream"})
    table.add("no token", "401", str(bare.status_code), bare.status_code == 401)
    table.check()



@pytest.mark.xfail(strict=True, reason="issue 26 (listed iff callable): a read-only filesystem "
                   "policy lists write/append/move/restore/delete, every call of them refused "
                   "write_not_allowed/delete_not_allowed; fixed in builtins/filesystem.py with "
                   "pipeline/resolve.policy_allows")
def test_mcp_lists_only_what_the_policy_lets_run(box: Box) -> None:
    """``viewer``'s filesystem policy allows no write and no delete: what ``tools/list``
    offers must run (SPEC §5 resolve: an action the tool's policy refuses is not listed)."""
    table = ProbeTable("black box: MCP listed => callable (policy)")
    tools = box.mcp("viewer", "tools/list", {}).json()["result"]["tools"]
    args = {"filesystem_write": {"path": "docs/l.txt", "content": "x"},
            "filesystem_append": {"path": "docs/l.txt", "content": "x"},
            "filesystem_move": {"source": "docs/l.txt", "destination": "docs/m.txt"},
            "filesystem_delete": {"path": "docs/zz-missing.txt"},
            "filesystem_restore": {"path": "docs/l.txt", "undo": {"id": "x"}}}
    for tool in tools:
        if tool["name"] not in args:
            continue
        gist, body = _mcp_gist(box.mcp("viewer", "tools/call", {
            "name": tool["name"], "arguments": args[tool["name"]]}))
        text = str(body)
        held = "write_not_allowed" not in text and "delete_not_allowed" not in text
        table.add(f"listed {tool['name']}", "not refused by policy", gist, held)
    table.check()


# -- the CLI, as an agent -------------------------------------------------------------------

CLI_PROBES: list[tuple[str, list[str]]] = [
    ("control: bot calculates", ["call", "calculate", "--agent", "bot",
                                 "--arg", "expression=1+1"]),
    ("read ../outside", ["call", "filesystem", "read", "--agent", "viewer",
                         "--arg", "path=../outside/secret.txt"]),
    ("write as read-only", ["call", "filesystem", "write", "--agent", "viewer",
                            "--args-json", '{"path": "docs/cli.txt", "content": "x"}']),
    ("other tenant's agent", ["call", "calculate", "--agent", "other-bot",
                              "--arg", "expression=1+1"]),
    ("http to loopback", ["call", "http_request", "--agent", "bot", "--args-json",
                          '{"url": "http://2130706433:9/", "method": "GET"}']),
    ("calculate bomb", ["call", "calculate", "--agent", "bot", "--arg",
                        "expression=round(5, -(10**20))"]),
]


@pytest.mark.slow  # one CLI process per probe (~2-5 s each on a loaded machine)
def test_cli_calls_hold(box: Box) -> None:
    table = ProbeTable("black box: CLI call")
    env = child_env(TOOLKEEPER_DATABASE_URL=f"sqlite:///{box.work}/tk.db",
                    TOOLKEEPER_SECRETS_KEY=(box.work / "secrets.key").read_text())
    for probe, argv in CLI_PROBES:
        done = subprocess.run([sys.executable, "-m", "toolkeeper.cli", *argv, "--json"],
                              env=env, cwd=box.work, capture_output=True, timeout=60)
        text = (done.stdout + done.stderr).decode(errors="replace")
        held = (done.returncode == 0) == probe.startswith("control") and CANARY not in text \
            and "root:x" not in text and OPS_SECRET not in text
        table.add(f"cli {probe}", "exit 0" if probe.startswith("control") else "exit != 0",
                  f"exit {done.returncode}", held)
    table.add("cli wrote nothing", "absent", str((box.root / "docs/cli.txt").exists()),
              not (box.root / "docs/cli.txt").exists())
    table.check()


# -- REST identity and request tricks -------------------------------------------------------


def _raw_execute(box: Box, who: str, raw: bytes) -> httpx.Response:
    return box.req("POST", "/tools/execute", who, content=raw,
                   headers={"Content-Type": "application/json"})


def test_rest_identity_and_body_tricks(box: Box) -> None:
    table = ProbeTable("black box: REST identity and bodies")
    calc = {"tool": "calculate", "arguments": {"expression": "1+1"}}
    probes: list[tuple[str, str, dict[str, Any], tuple[int, ...]]] = [
        ("agent names another agent", "bot", {**calc, "agent": "viewer"}, (403, 422)),
        ("agent names other tenant's agent", "bot", {**calc, "agent": "other-bot"}, (403, 422)),
        ("admin acts for other tenant's agent", "admin", {**calc, "agent": "other-bot"},
         (200, 401, 403, 404, 422)),
        ("approver acts for an agent", "approver", {**calc, "agent": "bot"}, (403,)),
        ("tenant_id in the body", "bot", {**calc, "tenant_id": "other"}, (422,)),
        ("principal in the body", "bot", {**calc, "principal": {"tenant_id": "other"}}, (422,)),
        ("scopes granted by the caller", "viewer",
         {"tool": "http_request", "arguments": {"url": "http://example.com/"},
          "scopes": ["*", "admin"]}, (200, 404)),
    ]
    for probe, who, body, allowed in probes:
        r = box.req("POST", "/tools/execute", who, json=body)
        out = r.json() if r.headers.get("content-type", "").startswith("application/json") \
            else {}
        ran_other = r.status_code == 200 and out.get("status") == "succeeded" \
            and probe.startswith(("admin acts for other", "scopes"))
        table.add(probe, f"one of {allowed}", f"{r.status_code} {out.get('status', '')}",
                  r.status_code in allowed and not ran_other)
    raws = [("duplicate tool key", b'{"tool": "calculate", "tool": "http_request", '
             b'"arguments": {"url": "http://127.1:9/"}}'),
            ("nested arguments 100k deep", b'{"tool": "calculate", "arguments": '
             + b'{"a":' * 100_000 + b'1' + b'}' * 100_001),
            ("huge integer", b'{"tool": "calculate", "arguments": {"expression": "1"}, '
             b'"x": ' + b'9' * 50_000 + b'}'),
            ("NaN", b'{"tool": "calculate", "arguments": {"expression": NaN}}'),
            ("lone surrogate", b'{"tool": "calculate", "arguments": {"expression": "\\ud800"}}'),
            ("not an object", b'["calculate"]'), ("empty", b""),
            ("BOM", b'\xef\xbb\xbf{"tool": "calculate", "arguments": {"expression": "1"}}')]
    for probe, raw in raws:
        r = _raw_execute(box, "viewer", raw)
        table.add(f"body {probe}", "4xx, or ran only what viewer may",
                  str(r.status_code), r.status_code < 500 and box.rec.port != 0
                  and "http_request" not in r.text.split("tool")[0])
    for probe, headers in (("token in query", {}), ("Basic auth", {
            "Authorization": "Basic " + base64.b64encode(b"admin:admin").decode()}),
            ("Bearer with other's token id", {"Authorization": "Bearer tk_" + "A" * 43}),
            ("two Authorization headers", {"Authorization": "Bearer x, Bearer y"})):
        url = "/tools/execute" + (f"?token={box.tokens['bot']}&access_token="
                                  f"{box.tokens['bot']}" if "query" in probe else "")
        r = box.http.post(box.base + url, json=calc, headers=headers)
        table.add(f"auth {probe}", "401", str(r.status_code), r.status_code == 401)
    marker = box.call("calculate", None, {"expression": "7*1919191"}, who="other_bot",
                      idempotency_key="other-marker-key")
    assert marker.get("status") == "succeeded", marker
    for path in ("/calls?tenant_id=other", "/audit?tenant_id=other", "/approvals?tenant=other",
                 "/tools?tenant_id=other", "/credentials?tenant_id=other",
                 "/agents?tenant_id=other", f"/calls/{marker['call_id']}",
                 "/calls/recent?tenant_id=other", "/audit?agent=other-bot",
                 "/metrics", "/audit/verify?tenant_id=other"):
        r = box.req("GET", path, "admin")
        echoed = r.status_code == 404 and marker["call_id"] in path  # "no call <id>"
        table.add(f"GET {path}", "nothing of other's", str(r.status_code),
                  (echoed or marker["call_id"] not in r.text) and "other-marker-key" not in r.text
                  and "1919191" not in r.text and TENANT_SECRET not in r.text
                  and "other-prof" not in r.text)
    table.check()


@pytest.mark.xfail(strict=True, reason="issue 26 item 9: filesystem reads and appends through "
                   "a hard link inside the root to a file outside; fixed in builtins/filesystem.py")
def test_filesystem_hard_link_out_of_the_root(box: Box) -> None:
    table = ProbeTable("black box: filesystem hard link")
    target = box.outside / "hard.txt"
    target.write_text(CANARY + "\n")
    link = box.root / "docs" / "hard.txt"
    if not link.exists():
        os.link(target, link)
    out = box.call("filesystem", "read", {"path": "docs/hard.txt"})
    table.add("read a hard link to outside", "refused", _gist(out),
              _stopped(out) and _no_canary(out))
    out = box.call("filesystem", "append", {"path": "docs/hard.txt", "content": "x"})
    table.add("append to a hard link to outside", "outside unchanged", _gist(out),
              target.read_text() == CANARY + "\n")
    table.check()


# -- a tenant admin's tool or endpoint aimed at its own host, carrying the operator's secrets


PLATFORM_KEY = "platform-serper-key-51aa"


def test_tenant_written_references_never_reach_platform_secrets(tmp_path: Path) -> None:
    """With loopback inside the operator's ceiling (so the tenant's host can be a recorder
    here), tenant ``other``'s admin writes a ``web_search`` tool whose endpoint is its host
    and whose key names the platform's secrets, and an agent endpoint whose headers do: the
    platform values must never arrive. (A tenant's own credential may.)"""
    from tests.api.identity_fixtures import identity_api
    from toolkeeper.builtins import definition

    rec = Recorder()
    table = ProbeTable("black box: tenant-written secret references")
    try:
        with identity_api(tmp_path) as api:
            api.gw._secrets.set_secret("serper", "api_key", PLATFORM_KEY)  # type: ignore
            api.gw._secrets.set_secret("ops", "token", OPS_SECRET)  # type: ignore
            api.gw.refresh_secrets()
            api.gw.registry.register(definition("web_search"))
            url = f"http://127.0.0.1:{rec.port}/search"
            for i, ref in enumerate(("${secret:serper/api_key}", "${secret:ops/token}",
                                     "serper/api_key")):
                field = "api_key" if ref.startswith("$") else "credentials_ref"
                made = api.call("POST", "/tools", "other_admin", json={
                    "name": f"search{i}", "implementation_type": "builtin",
                    "implementation_config": {"builtin_key": "web_search", "endpoint": url,
                                              field: ref},
                    "policy": {"allowed_hosts": [], "allowed_networks": ["127.0.0.1/32"]}})
                observed = f"create {made.status_code}"
                if made.status_code < 300:
                    tid = made.json()["id"]
                    api.call("POST", f"/tools/{tid}/publish", "other_admin", json={})
                    api.call("POST", "/activations", "other_admin",
                             json={"profile": "other-prof", "tool": f"search{i}"})
                    out = api.execute("other_agent", f"search{i}", {"query": "q"})
                    observed += f", call {out.status_code} {out.json().get('reason')}"
                seen = "\n".join(rec.raw)
                table.add(f"web_search tool {field}={ref}", "platform value never sent",
                          observed, PLATFORM_KEY not in seen and OPS_SECRET not in seen)
            table.check()
    finally:
        rec.close()


@pytest.mark.xfail(strict=True, reason="issue 26 item 8: a tenant-written agent endpoint's "
                   "headers resolve platform secrets through the global agent_call; fixed in "
                   "secrets scope / builtins/agent_call.py")
def test_tenant_agent_endpoint_headers_never_carry_platform_secrets(tmp_path: Path) -> None:
    from tests.api.identity_fixtures import identity_api
    from toolkeeper import Activation, Agent, Profile
    from toolkeeper.builtins import definition

    rec = Recorder()
    table = ProbeTable("black box: tenant agent endpoint headers")
    try:
        with identity_api(tmp_path) as api:
            gw = api.gw
            gw._secrets.set_secret("ops", "token", OPS_SECRET)  # type: ignore[union-attr]
            gw.refresh_secrets()
            gw.registry.register(definition("agent_call"))
            gw.registry.put_profile(Profile(name="other-prof", tenant_id="other", autonomy=3,
                                            activations=(Activation(tool="agent_call"),)),
                                    replace=True)
            gw.registry.put_agent(Agent(name="callee", profile="other-prof",
                                        tenant_id="other"), replace=True)
            put = api.call("PUT", "/agents/callee/endpoint", "other_admin", json={
                "transport": "http", "url": f"http://127.0.0.1:{rec.port}/run",
                "status": "published", "allowed_networks": ["127.0.0.1/32"],
                "headers": {"Authorization": "Bearer ${secret:ops/token}"}})
            out = api.execute("other_agent", "agent_call",
                              {"target_agent_slug": "callee", "input": "hi"})
            seen = "\n".join(rec.raw)
            table.add("endpoint header ${secret:ops/token}", "never sent",
                      f"put {put.status_code}, call {out.status_code} "
                      f"{out.json().get('reason')}, {len(rec.raw)} received",
                      OPS_SECRET not in seen and OPS_SECRET not in out.text)
            table.check()
    finally:
        rec.close()


# -- redirects inward over REST; operator's global tools and tokens out of a tenant's reach --


def test_redirects_inward_are_refused_over_rest(box: Box) -> None:
    """``netbot`` may reach 127.0.0.1 (the operator allow-listed it); a redirect from there
    to any other inward address is refused at the hop, whatever the method or spelling."""
    table = ProbeTable("black box: redirects inward over REST")
    hops = ["http://127.0.0.2/", "http://0x7f000002/", "http://2130706434/", "http://127.2/",
            "http://[::1]/", "http://[::ffff:127.0.0.2]/", "http://169.254.169.254/",
            "http://[fd00:ec2::254]/", "http://10.0.0.1/", "http://0/", "file:///etc/passwd",
            "gopher://127.0.0.1/", "http://user:pw@127.0.0.2/", "//127.0.0.2/",
            "http://localhost/"]
    for hop in hops:
        for method in ("GET", "POST"):
            url = f"http://127.0.0.1:{box.rec.port}/redirect?to={hop}"
            args: dict[str, Any] = {"url": url, "method": method}
            if method == "POST":
                args["body"] = "x"
            out = box.call("http_request", None, args, who="netbot")
            table.add(f"{method} redirect -> {hop}", "refused", _gist(out), _stopped(out))
    table.check()


def test_tenant_admin_cannot_touch_global_tools_or_mint_wider_tokens(box: Box) -> None:
    table = ProbeTable("black box: global tools and tokens")
    tools = box.req("GET", "/tools", "admin").json()
    globals_ = [t for t in tools if t.get("scope") == "global"]
    assert globals_, tools
    for t in globals_[:3]:
        tid = t["id"]
        for method, path, body in (
                ("PUT", f"/tools/{tid}", {"description": "hijacked",
                                          "policy": {"root": "/"}}),
                ("PUT", f"/tools/{tid}", {"implementation_config": {"url": "http://127.1/"}}),
                ("POST", f"/tools/{tid}/version?new_version=9.9.9", {}),
                ("POST", f"/tools/{tid}/publish", {}),
                ("DELETE", f"/tools/{tid}", None)):
            r = box.req(method, path, "admin", json=body)
            table.add(f"{method} {path.replace(tid, t['name'])} {str(body)[:30]}",
                      "403/404/405", str(r.status_code), r.status_code in (403, 404, 405))
        after = box.req("GET", f"/tools/{tid}", "admin").json()
        table.add(f"global {t['name']} unchanged", "same", after.get("description", "")[:20],
                  after.get("description") == t.get("description"))
    for body in ({"role": "admin", "tenant_id": "system"}, {"role": "system"},
                 {"role": "superuser"}, {"role": "agent", "agent": "other-bot"},
                 {"role": "agent", "agent": "../other-bot"}):
        r = box.req("POST", "/tokens", "admin", json=body)
        held = r.status_code >= 400
        if r.status_code < 300:  # made: it must stay in default and reach nothing more
            tok = r.json().get("token", "")
            me = box.http.get(box.base + "/me", headers={"Authorization": f"Bearer {tok}"})
            held = me.json().get("tenant_id") == "default"
        table.add(f"POST /tokens {body}", "refused or own tenant", str(r.status_code), held)
    for who in ("bot", "approver"):
        r = box.req("POST", "/tokens", who, json={"role": "admin"})
        table.add(f"{who} mints an admin token", "403", str(r.status_code), r.status_code == 403)
    table.check()


# -- the filesystem's own undo store, inside the root ---------------------------------------


def test_undo_store_is_out_of_the_agents_reach(box: Box) -> None:
    """A write's undo copy lives under the root (``.toolkeeper-undo``): an agent must neither
    read, plant nor aim a ``restore`` at it (or, through it, at anything outside)."""
    table = ProbeTable("black box: filesystem undo store")
    made = box.call("filesystem", "write", {"path": "docs/undo.txt", "content": "v1"})
    made = box.call("filesystem", "write", {"path": "docs/undo.txt", "content": "v2"})
    undo = str(made)
    for action, args in (
            ("list", {"path": ".toolkeeper-undo"}), ("read", {"path": ".toolkeeper-undo"}),
            ("glob", {"pattern": ".toolkeeper-undo/**"}),
            ("write", {"path": ".toolkeeper-undo/planted", "content": "x"}),
            ("append", {"path": ".toolkeeper-undo/planted", "content": "x"}),
            ("delete", {"path": ".toolkeeper-undo"}),
            ("move", {"source": "docs/a.txt", "destination": ".toolkeeper-undo/a.txt"}),
            ("move", {"source": ".toolkeeper-undo", "destination": "docs/undo-copy"}),
            ("restore", {"path": "docs/undo.txt", "undo": {"id": "../../outside/secret.txt"}}),
            ("restore", {"path": "docs/undo.txt", "undo": {"id": "/etc/passwd"}}),
            ("restore", {"path": "../outside/secret.txt", "undo": {"id": "x"}}),
            ("restore", {"path": "out_file", "undo": {"id": "x"}}),
            ("restore", {"path": "docs/undo.txt", "undo": {"id": "..%2f..%2fx"}})):
        out = box.call("filesystem", action, args)
        listed = str((out.get("output") or {}).get("matches", "")) if action == "glob" else ""
        held = (_stopped(out) or (action == "glob" and ".toolkeeper-undo" not in listed)) \
            and _no_canary(out) and "root:x" not in str(out)
        table.add(f"{action} {str(args)[:60]}", "refused", _gist(out), held)
    table.add("file keeps its last write", "v2", (box.root / "docs/undo.txt").read_text(),
              (box.root / "docs/undo.txt").read_text() == "v2" and bool(undo))
    table.add("outside unchanged", CANARY[:10], (box.outside / "secret.txt").read_text()[:10],
              (box.outside / "secret.txt").read_text() == CANARY + "\n")
    table.check()


def test_http_request_methods_and_header_injection(box: Box) -> None:
    table = ProbeTable("black box: http_request methods and headers")
    url = f"http://127.0.0.1:{box.rec.port}/h"
    before = len(box.rec.raw)
    for method in ("DELETE", "PUT", "CONNECT", "TRACE", "get ", "G\r\nET", "PATCH", "OPTIONS"):
        out = box.call("http_request", None, {"url": url, "method": method}, who="netbot")
        table.add(f"method {method!r} (GET/POST allowed)", "refused", _gist(out), _stopped(out))
    for name, value in (("X-A", "a\r\nInjected: 1"), ("X-A\r\nInjected", "1"),
                        ("X-A", "a\nInjected: 1"), ("Host", "169.254.169.254"),
                        ("Transfer-Encoding", "chunked"), ("Content-Length", "0\r\n\r\nGET /x"),
                        ("X-A", "a\x00b")):
        out = box.call("http_request", None, {"url": url, "method": "GET",
                                              "headers": {name: value}}, who="netbot")
        table.add(f"header {name!r}: {value!r}", "invalid_arguments, nothing sent",
                  _gist(out), "invalid_arguments" in _gist(out))
    got = "\n".join(box.rec.raw[before:])
    table.add("smuggled header line at the receiver", "absent", str("Injected" in got),
              "Injected" not in got and "GET /x" not in got)
    table.check()

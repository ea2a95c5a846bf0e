"""Black-box probes (issue 26) through each face: MCP (names not listed or not the caller's,
other methods, roles, sessions, listed => callable), the CLI as an agent, and REST identity
and body tricks. See :mod:`tests.attacks.blackbox`."""

from __future__ import annotations

import base64
import subprocess
import sys
from typing import Any

import httpx
import pytest

from tests.attacks.blackbox import (
    CANARY,
    OPS_SECRET,
    TENANT_SECRET,
    Box,
)
from tests.attacks.table import ProbeTable
from tests.support.processes import child_env

# -- MCP: names not listed, resources, methods, sessions, roles -----------------------------


def _mcpgist(resp: httpx.Response) -> tuple[str, dict[str, Any]]:
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
        gist, body = _mcpgist(resp)
        held = not _mcp_ran(body) and CANARY not in resp.text
        table.add(f"{who} tools/call {name!r}", "refused", gist, held)
    out = box.mcp("bot", "tools/call", {"name": "calculate", "arguments": {"expression": "2+2"}})
    table.add("bot tools/call calculate 2+2", "ran", _mcpgist(out)[0],
              _mcp_ran(_mcpgist(out)[1]))
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
        gist, body = _mcpgist(resp)
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
    listed = {tool["name"] for tool in tools}
    for name, arguments in args.items():
        if name not in listed:
            table.add(f"{name} not listed", "not listed", "not listed", True)
            continue
        gist, body = _mcpgist(box.mcp("viewer", "tools/call", {
            "name": name, "arguments": arguments}))
        text = str(body)
        held = "write_not_allowed" not in text and "delete_not_allowed" not in text
        table.add(f"listed {name}", "not refused by policy", gist, held)
    # the probe is meaningful: viewer's read actions are listed and run
    table.add("filesystem_read listed", "listed", "listed" if "filesystem_read" in listed
              else "not listed", "filesystem_read" in listed)
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

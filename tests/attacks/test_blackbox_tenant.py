"""Black-box probes (issue 26), a hostile tenant admin and approvals: tools, activations,
endpoints and the webhook reaching the host or loopback, platform secrets named by what a
tenant writes, the operator's global tools and tokens, approvals bound to their call,
idempotency keys across tenants, secret references an agent writes. See
:mod:`tests.attacks.blackbox`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.attacks.blackbox import (
    OPS_SECRET,
    TENANT_SECRET,
    Box,
    Recorder,
    gist,
    no_canary,
    stopped,
)
from tests.attacks.table import ProbeTable

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
            observed += f", publish {pub.status_code}, enable {act.status_code}, {gist(out)}"
            held = stopped(out) and no_canary(out) and "root:x" not in str(out)
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
            observed += f", call {gist(out)}"
            held = stopped(out) and "root:x" not in str(out)
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
    table.add("write at autonomy 0", "stopped with an approval id", gist(first),
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
        table.add(f"approved id, args {other}"[:80], "refused", gist(out),
                  out.get("status") != "succeeded")
    for action in ("append", "delete"):
        out = box.call("filesystem", action, args if action == "append"
                       else {"path": "docs/approved.txt"}, who="careful", approval_id=ap)
        table.add(f"approved id on {action}", "refused", gist(out), stopped(out))
    out = box.call("filesystem", "write", args, who="viewer", approval_id=ap)
    table.add("approved id by a read-only agent", "refused", gist(out), stopped(out))
    out = box.call("filesystem", "write", args, who="careful", approval_id=ap)
    table.add("approved call itself", "succeeded", gist(out), out.get("status") == "succeeded")
    again = box.call("filesystem", "write", {**args, "content": "again"}, who="careful",
                     approval_id=ap)
    table.add("approval reused with new content", "refused", gist(again), stopped(again))
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
    table.add("same key, other tenant", "own fresh call", gist(theirs),
              theirs.get("status") == "succeeded" and not theirs.get("deduped")
              and theirs.get("call_id") != mine.get("call_id"))
    changed = box.call("calculate", None, {"expression": "1+1"}, who="other_bot",
                       idempotency_key=key)
    table.add("same key, other tenant, other args", "not the first tenant's result",
              gist(changed), "42" not in str(changed.get("output")))
    for who in ("viewer", "netbot"):
        r = box.call("calculate", None, {"expression": "6*7"}, who=who, idempotency_key=key)
        table.add(f"same key, agent {who}", "not handed bot's call",
                  gist(r), r.get("call_id") != mine.get("call_id") or r.get("_http") >= 400)
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
            table.add(f"http_request {probe} {ref}", "sent unresolved", gist(out),
                      OPS_SECRET not in str(out) and TENANT_SECRET not in str(out))
        out = box.call("json_transform", None, {"data": {"a": ref}, "expression": "a"},
                       who="netbot")
        table.add(f"json_transform echoes {ref}", "unresolved", gist(out),
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

"""A tool a tenant defines through the API reaches its own tenant's credentials only —
never the operator's platform secrets, never another tenant's."""

from __future__ import annotations

import http.server
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from identity_fixtures import IdApi, identity_api

from loopback import serving
from toolkeeper import Activation, Agent, Autonomy, Profile

PLATFORM_VALUE = "platform-secret-value-9d1e"


class _Echo(http.server.BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        body = json.dumps({"auth": self.headers.get("Authorization")}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def api(tmp_path: Path) -> Iterator[IdApi]:
    with identity_api(tmp_path) as a:
        a.gw._secrets.set_secret("platform", "key", PLATFORM_VALUE)  # type: ignore[union-attr]
        a.gw.refresh_secrets()
        yield a


def _tool(api: IdApi, name: str, ref: str, url: str) -> None:
    created = api.call("POST", "/tools", json={
        "name": name, "implementation_type": "http", "side_effect": "idempotent",
        "risk_default": "low", "input_schema": {"type": "object"},
        "implementation_config": {"url": url, "method": "POST",
                                  "headers": {"Authorization": ref},
                                  "allowed_networks": ["127.0.0.0/8"]}})
    assert created.status_code == 201, created.text
    published = api.call("POST", f"/tools/{created.json()['id']}/publish")
    assert published.status_code == 200, published.text


def _run(api: IdApi, name: str) -> dict[str, Any]:
    api.gw.registry.put_profile(Profile(name="hooks", autonomy=Autonomy(3),
                                        activations=(Activation(tool=name),)))
    api.gw.registry.put_agent(Agent(name="hook-bot", profile="hooks"))
    token = api.gw.store.tokens.create(tenant_id="default", role="agent", agent="hook-bot")[1]
    res = api.call("POST", "/tools/execute", who=token, json={"tool": name, "arguments": {}})
    assert res.status_code == 200, res.text
    body: dict[str, Any] = res.json()
    return body


def test_an_api_defined_tool_cannot_reach_a_platform_secret(api: IdApi) -> None:
    with serving(_Echo) as base:
        _tool(api, "exfil", "${secret:platform/key}", base + "/hook")
        result = _run(api, "exfil")
    assert (result["status"], result["reason"]) == ("failed", "secret_not_found")
    assert PLATFORM_VALUE not in json.dumps(result)


def test_an_api_defined_tool_uses_its_tenants_own_credential(api: IdApi) -> None:
    put = api.call("PUT", "/credentials/mine/key", json={"value": "tenant-owned-value-77"})
    assert put.status_code == 204, put.text
    with serving(_Echo) as base:
        _tool(api, "own", "${secret:mine/key}", base + "/hook")
        result = _run(api, "own")
    assert result["status"] == "succeeded", result
    assert result["output"] == {"auth": "***"}  # it reached the upstream, redacted here

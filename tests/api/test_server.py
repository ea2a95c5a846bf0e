"""``toolkeeper serve`` (SPEC §7 Bootstrap, §12): settings validated at start with clear
errors, and the real server process — health, first admin token printed once, docs."""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from typer.testing import CliRunner

from tests.support.processes import stop
from tests.support.waiting import wait_until
from toolkeeper.cli import app
from toolkeeper.errors import ConfigError
from toolkeeper.server import ServerSettings, connection_limits

TOKEN = re.compile(r"tk_[A-Za-z0-9_-]{40,}")
BIN = Path(sys.executable).parent / "toolkeeper"


def test_defaults_are_loopback_port_8700_and_closed_cors() -> None:
    s = ServerSettings.load(environ={})
    assert (s.host, s.port, s.cors_origins, s.system_tenant) == ("127.0.0.1", 8700, (), "system")
    assert s.database_url is None and s.mode is None


@pytest.mark.parametrize(("level", "logged"), [
    ("debug", True), ("info", True), ("warning", False), ("error", False), ("critical", False)])
def test_uvicorn_formats_access_lines_only_where_the_level_writes_them(level: str,
                                                                       logged: bool) -> None:
    s = ServerSettings.load(environ={}, log_level=level)
    assert connection_limits(s)["access_log"] is logged


def test_flags_win_over_the_environment() -> None:
    env = {"TOOLKEEPER_PORT": "9001", "TOOLKEEPER_HOST": "0.0.0.0",
           "TOOLKEEPER_CORS_ORIGINS": "https://a.example.com, http://localhost:3000"}
    s = ServerSettings.load(environ=env, port=9002)
    assert (s.host, s.port) == ("0.0.0.0", 9002)
    assert s.cors_origins == ("https://a.example.com", "http://localhost:3000")


@pytest.mark.parametrize(("env", "names"), [
    ({"TOOLKEEPER_PORT": "70000"}, ["port", "TOOLKEEPER_PORT"]),
    ({"TOOLKEEPER_PORT": "eighty"}, ["port"]),
    ({"TOOLKEEPER_MODE": "chaos"}, ["mode", "TOOLKEEPER_MODE"]),
    ({"TOOLKEEPER_MAX_BODY_BYTES": "10"}, ["max_body_bytes"]),
    ({"TOOLKEEPER_CORS_ORIGINS": "example.com/path"}, ["cors_origins", "not an origin"]),
    ({"TOOLKEEPER_CONFIG": "/nonexistent/toolkeeper.yaml"}, ["config", "does not exist"]),
    ({"TOOLKEEPER_DATABASE_URL": "not a url"}, ["database_url", "not a database URL"]),
    ({"TOOLKEEPER_SYSTEM_TENANT": "a/b"}, ["system_tenant"]),
    ({"TOOLKEEPER_HOST": "http://x"}, ["host"]),
    ({"TOOLKEEPER_SECRETS_BACKEND": "keychain"}, ["secrets_backend", "--secrets-backend"]),
])
def test_invalid_settings_are_refused_naming_the_setting(env: dict[str, str],
                                                         names: list[str]) -> None:
    with pytest.raises(ConfigError) as info:
        ServerSettings.load(environ=env)
    for name in names:
        assert name in str(info.value)


def test_the_cli_exits_2_on_a_bad_flag_before_opening_anything(tmp_path: Path) -> None:
    db = tmp_path / "never.db"
    res = CliRunner().invoke(app, ["--db", f"sqlite:///{db}", "serve", "--port", "0"])
    assert res.exit_code == 2
    assert "port" in res.output
    assert not db.exists()


def test_an_embedded_backend_without_a_key_is_refused_at_start(tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch,
                                                               ) -> None:
    monkeypatch.delenv("TOOLKEEPER_SECRETS_KEY", raising=False)
    db = tmp_path / "s.db"
    res = CliRunner().invoke(app, ["--db", f"sqlite:///{db}", "serve",
                                   "--secrets-backend", "embedded"])
    assert res.exit_code == 2 and "TOOLKEEPER_SECRETS_KEY" in res.output


async def _mcp_lookup(url: str, token: str, mode: str) -> tuple[list[str], Any]:
    import httpx2
    from mcp.client.streamable_http import streamable_http_client

    from mcp import Client

    async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}) as http, \
            Client(streamable_http_client(url, http_client=http), mode=mode) as client:
        names = [t.name for t in (await client.list_tools()).tools]
        result = await client.call_tool("lookup_invoice", {"invoice_id": "INV-1001"})
        return names, result.structured_content


@pytest.mark.slow
def test_serve_logs_json_lines_when_asked(tmp_path: Path) -> None:
    import json

    with serving(tmp_path, "json", "--log-format", "json") as (base, _out):
        assert httpx.get(f"{base}/healthz", timeout=5).status_code == 200
    lines = [line for line in (tmp_path / "json.err").read_text().splitlines() if line]
    assert lines, "no log lines"
    records = [json.loads(line) for line in lines]  # every line is one JSON object
    assert any("startup complete" in r["message"] for r in records)
    assert all({"ts", "level", "logger", "message"} <= r.keys() for r in records)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def serving(tmp_path: Path, name: str, *args: str,
            extra_env: dict[str, str] | None = None) -> Iterator[tuple[str, Path]]:
    """``toolkeeper serve`` as a real process; yields its base URL and stdout file
    (stderr, the log, goes to ``{name}.err``)."""
    port = free_port()
    out, err = tmp_path / f"{name}.out", tmp_path / f"{name}.err"
    env = {**os.environ, "TOOLKEEPER_DATABASE_URL": f"sqlite:///{tmp_path}/serve.db",
           "PYTHONUNBUFFERED": "1", **(extra_env or {})}
    env.pop("TOOLKEEPER_SECRETS_KEY", None)
    with out.open("wb") as fout, err.open("wb") as ferr:
        proc = subprocess.Popen([str(BIN), "serve", "--port", str(port), *args],
                                stdout=fout, stderr=ferr, env=env, cwd=tmp_path)
    base = f"http://127.0.0.1:{port}"
    try:
        def healthy() -> bool:
            assert proc.poll() is None, f"serve exited early: {err.read_text()}"
            return httpx.get(f"{base}/healthz", timeout=1).status_code == 200

        wait_until(healthy, timeout=30, what=f"{base}/healthz answers",
                   ignoring=(httpx.TransportError,))
        yield base, out
    finally:
        stop(proc, 15)
    assert proc.returncode == 0, err.read_text()


@pytest.mark.slow
def test_serve_prints_the_first_admin_token_once_and_serves_docs(tmp_path: Path) -> None:
    with serving(tmp_path, "first") as (base, out):
        text = out.read_text()
        assert f"{base}/docs" in text and f"{base}/openapi.json" in text
        admin_line = next(line for line in text.splitlines()
                          if "admin token (tenant default)" in line)
        admin = TOKEN.search(admin_line)
        assert admin is not None and len(TOKEN.findall(text)) == 2  # + the system admin
        auth = {"Authorization": f"Bearer {admin.group(0)}"}
        assert httpx.get(f"{base}/agents", headers=auth, timeout=5).status_code == 200
        assert httpx.get(f"{base}/agents", timeout=5).status_code == 401
        assert httpx.get(f"{base}/docs", timeout=5).status_code == 200
        paths = httpx.get(f"{base}/openapi.json", timeout=5).json()["paths"]
        for path in ("/tools/execute", "/agents", "/profiles", "/activations", "/tokens",
                     "/credentials", "/tenants", "/settings/webhook", "/healthz"):
            assert path in paths
    with serving(tmp_path, "second") as (base, out):
        assert TOKEN.findall(out.read_text()) == []
        # the way back from a lost admin token is named at every later start
        assert "toolkeeper tokens create --role admin --local" in out.read_text()
        assert httpx.get(f"{base}/agents", headers=auth, timeout=5).status_code == 200


@pytest.mark.slow
def test_serve_demo_prints_demo_tokens_once_and_the_agent_can_call(tmp_path: Path) -> None:
    with serving(tmp_path, "demo1", "--demo") as (base, out):
        text = out.read_text()
        lines = {line.split(":")[0].strip(): TOKEN.search(line) for line in text.splitlines()
                 if TOKEN.search(line)}
        assert set(lines) >= {"admin token (tenant default)", "demo approver token",
                              "demo agent token (billing-bot)"}
        agent = lines["demo agent token (billing-bot)"]
        assert agent is not None
        r = httpx.post(f"{base}/tools/execute", timeout=10,
                       headers={"Authorization": f"Bearer {agent.group(0)}"},
                       json={"tool": "lookup_invoice", "arguments": {"invoice_id": "INV-1001"}})
        assert r.json()["status"] == "succeeded", r.text
        assert f"{base}/ui/" in text and httpx.get(f"{base}/ui/", timeout=5).status_code == 200
        assert f"{base}/mcp" in text
        for era in ("legacy", "auto"):  # the same agent over MCP, both protocol eras
            names, looked_up = anyio.run(_mcp_lookup, f"{base}/mcp", agent.group(0), era)
            assert names == ["lookup_invoice", "pay_invoice", "refund_invoice", "send_email"]
            assert looked_up["id"] == "INV-1001"
        admin = lines["admin token (tenant default)"]
        assert admin is not None
        admin_auth = {"Authorization": f"Bearer {admin.group(0)}"}
        # the demo keeps credentials in the embedded store, under a generated 0600 key
        put = httpx.put(f"{base}/credentials/crm/api_key", headers=admin_auth, timeout=5,
                        json={"value": "s3cr3t-demo-value"})
        assert put.status_code == 204, put.text
    key = tmp_path / "toolkeeper-secrets.key"
    assert key.stat().st_mode & 0o777 == 0o600
    first_key = key.read_bytes()
    with serving(tmp_path, "demo2", "--demo") as (base, out):
        assert TOKEN.findall(out.read_text()) == []
        listed = httpx.get(f"{base}/credentials", headers=admin_auth, timeout=5).json()
        assert "s3cr3t" not in str(listed) and "api_key" in str(listed)
    assert key.read_bytes() == first_key  # reused, not regenerated
    # the audit chain is keyed with a key derived from that master key, and the server left
    # signed checkpoints next to the database; verify loads the key the same way
    assert (tmp_path / "serve.db.audit-checkpoints").stat().st_size > 0
    env = {"TOOLKEEPER_SECRETS_KEY_FILE": str(key), "TOOLKEEPER_SECRETS_KEY": None,
           "TOOLKEEPER_AUDIT_KEY": None, "TOOLKEEPER_AUDIT_KEY_FILE": None,
           "TOOLKEEPER_AUDIT_CHECKPOINTS": None}
    verified = CliRunner().invoke(app, ["--db", f"sqlite:///{tmp_path}/serve.db", "audit",
                                        "verify"], env=env)
    assert verified.exit_code == 0, verified.output
    assert "warning:" not in verified.stderr, verified.output

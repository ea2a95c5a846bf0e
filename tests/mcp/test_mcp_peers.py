"""Our ``/mcp`` driven by other implementations: the MCP inspector's CLI in both eras, and
the conformance suite's server scenarios with a justified expected-failures baseline."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from conformance_upstream import fronted
from mcp_fixtures import McpServer, serving

from peers import entry, node

pytestmark = pytest.mark.slow  # a real server or peer process: CI and `make test-all`

HERE = Path(__file__).resolve().parent
BASELINE = HERE / "conformance-expected-failures.yml"


@pytest.fixture(scope="module")
def srv(tmp_path_factory: pytest.TempPathFactory) -> Iterator[McpServer]:
    with serving(f"sqlite:///{tmp_path_factory.mktemp('peers')}/tk.db") as s:
        yield s


def _inspector(srv: McpServer, tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    cmd = [node(), entry("inspector"), "--cli", srv.url, "--transport", "http",
           "--header", f"Authorization: Bearer {srv.tokens['bot']}", "--format", "json", *args]
    env = {**os.environ, "HOME": str(tmp_path)}  # it writes ~/.mcp-inspector
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120, env=env,
                          stdin=subprocess.DEVNULL)


@pytest.mark.parametrize("era", ["legacy", "modern"])
def test_the_inspector_cli_lists_and_calls(srv: McpServer, tmp_path: Path, era: str) -> None:
    listed = _inspector(srv, tmp_path, "--protocol-era", era, "--method", "tools/list")
    assert listed.returncode == 0, listed.stderr
    names = [t["name"] for t in json.loads(listed.stdout)["result"]["tools"]]
    assert names == ["add", "bank_hold", "bank_refund", "pay"]
    called = _inspector(srv, tmp_path, "--protocol-era", era, "--method", "tools/call",
                        "--tool-name", "add", "--tool-args-json", '{"a": 40, "b": 2}')
    assert called.returncode == 0, called.stderr
    result = json.loads(called.stdout)["result"]
    assert result["structuredContent"] == {"result": 42} and not result.get("isError")


def test_the_inspector_is_refused_without_a_token(srv: McpServer, tmp_path: Path) -> None:
    cmd = [node(), entry("inspector"), "--cli", srv.url, "--transport", "http",
           "--method", "tools/list", "--connect-timeout", "5000"]
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=120,
                         env={**os.environ, "HOME": str(tmp_path)}, stdin=subprocess.DEVNULL)
    # our 401 + WWW-Authenticate: Bearer reads to it as "authorization required" (exit 3)
    assert res.returncode == 3 and "auth_required" in res.stderr


@pytest.fixture(scope="module")
def conformance_srv(tmp_path_factory: pytest.TempPathFactory) -> Iterator[McpServer]:
    """toolkeeper fronting the conformance fixture upstream (conformance_upstream.py); the
    suite cannot send a bearer token, so every request carries bot's."""
    with fronted(tmp_path_factory.mktemp("conf"), acting_as="bot") as s:
        yield s


@pytest.mark.parametrize("suite", [["--suite", "active"], ["--requirements", "2026-07-28"]],
                         ids=["active-2025-11-25", "requirements-2026-07-28"])
def test_conformance_server_scenarios_fail_only_as_the_baseline_says(
        conformance_srv: McpServer, tmp_path: Path, suite: list[str]) -> None:
    cmd = [node(), entry("conformance"), "server", "--url", conformance_srv.url, *suite,
           "--expected-failures", str(BASELINE), "-o", str(tmp_path / "out")]
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=600,
                         stdin=subprocess.DEVNULL, env={**os.environ, "NO_COLOR": "1"})
    tail = "\n".join(res.stdout.splitlines()[-40:])
    assert res.returncode == 0, f"conformance differs from the baseline:\n{tail}\n{res.stderr}"
    assert "passed" in res.stdout

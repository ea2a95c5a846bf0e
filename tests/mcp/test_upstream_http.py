"""Upstream MCP servers over streamable HTTP: the real ``@modelcontextprotocol/server-everything``
(npm, speaks only 2025-11-25) imported and called through the pipeline, and headers taken
from secrets at connect time (delivered upstream, masked in what comes back)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import yaml

from peers import entry, node
from toolkeeper import Gateway
from toolkeeper.bench.procs import free_port, listening
from toolkeeper.secrets import MASK

FIXTURE = Path(__file__).resolve().parent / "upstream_fixture.py"


def _gateway(tmp: Path, server: dict[str, object], tools: list[str]) -> Gateway:
    doc = {"version": 1, "secrets": {"backend": "env"}, "servers": [server],
           "profiles": [{"name": "p", "autonomy": 3,
                         "activations": [{"tool": t} for t in tools]}],
           "agents": [{"name": "a", "profile": "p"}]}
    cfg = tmp / "toolkeeper.yaml"
    cfg.write_text(yaml.safe_dump(doc))
    return Gateway.open(f"sqlite:///{tmp}/tk.db", config=cfg)


def test_server_everything_tools_are_imported_and_called(tmp_path: Path) -> None:
    import os

    # server-everything takes its port from the environment, not the command line
    port = free_port()
    env = {**os.environ, "PORT": str(port)}
    with listening([node(), entry("server-everything"), "streamableHttp"], env,
                   port=port) as base:
        url = f"{base}/mcp"
        server = {"name": "everything", "url": url, "side_effect": "pure", "risk": "low"}
        with _gateway(tmp_path, server, ["everything_echo", "everything_get-sum"]) as gw:
            names = {t.name for t in gw.catalog.all_tools()}
            assert {"everything_echo", "everything_get-sum"} <= names
            echo = gw.call_sync("everything_echo", agent="a", arguments={"message": "hi"})
            assert (echo.status.value, echo.output) == ("succeeded", "Echo: hi"), echo
            total = gw.call_sync("everything_get-sum", agent="a", arguments={"a": 2, "b": 3})
            assert total.status.value == "succeeded" and "5" in str(total.output), total


def test_headers_come_from_secrets_at_connect_time(tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TOOLKEEPER_SECRET_FX__TOKEN", "s3cret-upstream-token")
    with listening([sys.executable, str(FIXTURE), "http", "{port}"]) as base:
        url = f"{base}/mcp"
        server = {"name": "fx", "url": url,
                  "headers": {"Authorization": "Bearer ${secret:fx/token}"},
                  "tools": {"whoami": {"side_effect": "pure", "risk": "low"}}}
        with _gateway(tmp_path, server, ["fx_whoami"]) as gw:
            stored = str(gw.store.registry.get_setting("mcp:servers"))
            assert "s3cret" not in stored and "${secret:fx/token}" in stored
            seen = gw.call_sync("fx_whoami", agent="a")
            assert seen.status.value == "succeeded", seen
            # the upstream received the token; what came back has it masked
            assert seen.output == f"Bearer {MASK}"

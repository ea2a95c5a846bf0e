"""SPEC §8 "secrets never logged", on the real ``toolkeeper serve`` process: a secret that
tool code logs through Python ``logging`` (a library's logger, an exception's traceback,
uvicorn's own loggers) and one in a request's URL (uvicorn's access log) reach the server's
log masked, in the text and the JSON log formats."""

from __future__ import annotations

import base64
import json
import os
from pathlib import Path

import httpx
import pytest
from test_server import TOKEN, serving

SECRET = "tk-leaky-Sup3rS3cretValue-0042"
TOOL = '''
import logging

from toolkeeper import BaseTool, Risk, SideEffect


class Leaky(BaseTool):
    """Logs the secret it resolved, the way careless tool and library code does."""

    tool_name = "leaky"
    side_effect = SideEffect.PURE
    risk_default = Risk.LOW

    async def execute(self, action, request, context):
        token = await context.secret("token", "leaky")
        lib = logging.getLogger("some.lib")
        lib.warning("token=%s", token)
        try:
            raise RuntimeError(f"upstream refused token {token}")
        except RuntimeError:
            lib.exception("request failed")
        logging.getLogger("uvicorn.error").error("uvicorn saw %s", token)
        return "ok"
'''
CONFIG = """
version: 1
tools:
  - native: leaky_tool:Leaky
    tenant: default
profiles:
  - name: leaky-profile
    tenant_id: default
    autonomy: 3
    activations: [{tool: leaky}]
agents:
  - {name: leaker, profile: leaky-profile, tenant_id: default}
"""


def _serve_and_leak(tmp_path: Path, fmt: str) -> str:
    """Serve the leaky tool, call it once and send the secret in a URL; the log text."""
    (tmp_path / "leaky_tool.py").write_text(TOOL)
    (tmp_path / "toolkeeper.yaml").write_text(CONFIG)
    env = {"TOOLKEEPER_SECRET_LEAKY__TOKEN": SECRET,
           "PYTHONPATH": os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")])}
    with serving(tmp_path, fmt, "--config", "toolkeeper.yaml", "--log-format", fmt,
                 "--secrets-backend", "env",
                 extra_env=env) as (base, out):
        admin = next(TOKEN.search(line) for line in out.read_text().splitlines()
                     if "admin token (tenant default)" in line)
        assert admin is not None
        made = httpx.post(f"{base}/tokens", timeout=5, json={"role": "agent", "agent": "leaker"},
                          headers={"Authorization": f"Bearer {admin.group(0)}"})
        assert made.status_code == 201, made.text
        res = httpx.post(f"{base}/tools/execute", timeout=10, json={"tool": "leaky"},
                         headers={"Authorization": f"Bearer {made.json()['token']}"})
        assert res.json()["status"] == "succeeded", res.text
        assert httpx.get(f"{base}/healthz", params={"key": SECRET}, timeout=5).status_code \
            == 200
    # uvicorn's text access log goes to stdout, everything else to stderr
    log = (tmp_path / f"{fmt}.err").read_text()
    if fmt == "text":
        log += (tmp_path / f"{fmt}.out").read_text()
    b64 = base64.b64encode(SECRET.encode()).decode()
    assert SECRET not in log and b64.rstrip("=") not in log, log
    return log


@pytest.mark.slow
def test_text_log_masks_secrets_from_tools_libraries_and_uvicorn(tmp_path: Path) -> None:
    log = _serve_and_leak(tmp_path, "text")
    assert "token=***" in log  # a library logger (the root logger's handler)
    assert "RuntimeError: upstream refused token ***" in log  # the traceback
    assert "uvicorn saw ***" in log  # uvicorn's error logger, its own handler
    assert "/healthz?key=*** HTTP/1.1" in log  # uvicorn's access logger


@pytest.mark.slow
def test_json_log_masks_secrets_and_keeps_one_object_per_line(tmp_path: Path) -> None:
    log = _serve_and_leak(tmp_path, "json")
    records = [json.loads(line) for line in log.splitlines() if line]
    by_logger: dict[str, list[dict[str, str]]] = {}
    for r in records:
        by_logger.setdefault(r["logger"], []).append(r)
    lib = by_logger["some.lib"]
    assert [r["message"] for r in lib] == ["token=***", "request failed"]
    assert "RuntimeError: upstream refused token ***" in lib[1]["exception"]
    assert any(r["message"] == "uvicorn saw ***" for r in by_logger["uvicorn.error"])
    assert any("/healthz?key=***" in r["message"] for r in by_logger["uvicorn.access"])

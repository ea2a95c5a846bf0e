"""Start-up imports only what serving needs: the page reader's libraries (trafilatura and
its helpers, lxml, charset_normalizer), the MCP SDK, the OpenTelemetry SDK and alembic (on a
database already migrated) load when first used, and httpx's command-line client (click, rich,
pygments) only when it is run (SPEC §10 start-up)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.support.processes import child_env
from toolkeeper.store import Store

LAZY = ("trafilatura", "courlan", "htmldate", "justext", "lxml", "charset_normalizer", "mcp",
        "opentelemetry.sdk", "alembic", "click", "rich", "pygments")

_STARTUP = """
import json, sys
from toolkeeper.api import create_app
from toolkeeper.gateway import Gateway
gw = Gateway.open(sys.argv[1])
app = create_app(gw)
loaded = {m: m in sys.modules for m in json.loads(sys.argv[2])}
from pydantic import BaseModel
def subclasses(c):
    for s in c.__subclasses__():
        yield s
        yield from subclasses(s)
loaded["attribute_docstrings"] = sorted({
    f"{c.__module__}.{c.__qualname__}" for c in subclasses(BaseModel)
    if c.__module__.startswith("toolkeeper") and c.model_config.get("use_attribute_docstrings")})
if sys.argv[3] == "read-page":
    from toolkeeper.builtins._web_page import read_html
    page = read_html("<html><title>T</title><body><p>Hello there.</p></body></html>",
                     "https://example.test/", max_links=5)
    assert page.title == "T", page
    loaded["after_read:trafilatura"] = "trafilatura" in sys.modules
gw.close()
print(json.dumps(loaded))
"""


def _run(tmp_path: Path, then: str) -> dict[str, Any]:
    url = f"sqlite:///{tmp_path / 'lazy.db'}"
    Store.open(url).close()  # migrated here: the server opens a database at the newest revision
    out = subprocess.run([sys.executable, "-c", _STARTUP, url, json.dumps(LAZY), then],
                         env=child_env(), capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-3000:]
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def test_serving_app_does_not_import_unused_libraries(tmp_path: Path) -> None:
    loaded = _run(tmp_path, "nothing")
    assert [m for m in LAZY if loaded[m]] == []


def test_serving_app_models_take_no_attribute_docstrings(tmp_path: Path) -> None:
    # pydantic finds them by walking the stack and mapping every loaded module to its file
    # (~50 ms at the first model, for 800 modules); the models loaded to serve describe their
    # fields with Field(description=...) instead (the config file's may use docstrings)
    assert _run(tmp_path, "nothing")["attribute_docstrings"] == []


def test_page_reader_imports_trafilatura_on_first_use(tmp_path: Path) -> None:
    loaded = _run(tmp_path, "read-page")
    assert loaded["trafilatura"] is False
    assert loaded["after_read:trafilatura"] is True


_HTTPX_CLI = """
import sys
import toolkeeper, httpx
assert "httpx._main" in sys.modules and "rich" not in sys.modules  # the stand-in
try:
    httpx.main(["--help"], standalone_mode=False)
except SystemExit as exc:
    assert not exc.code, exc
assert "rich" in sys.modules and type(sys.modules["httpx._main"]).__name__ == "module"
"""


def test_httpx_command_line_client_still_runs_when_called() -> None:
    out = subprocess.run([sys.executable, "-c", _HTTPX_CLI], env=child_env(),
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-3000:]
    assert "--help" in out.stdout  # the real client printed its usage

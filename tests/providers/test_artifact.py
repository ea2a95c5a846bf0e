"""The ``artifact`` provider: operator-installed, content-hashed callables run in a worker
process with limits, on SQLite and PostgreSQL, configured through toolkeeper.yaml."""

from __future__ import annotations

import json
import textwrap
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from tests.support.sandbox import needs_sandbox  # noqa: F401 (a fixture)
from tests.support.waiting import wait_until
from toolkeeper import Gateway
from toolkeeper.errors import ConfigError, OperationRefused
from toolkeeper.model.enums import ToolStatus
from toolkeeper.model.profile import Activation, Agent, Profile
from toolkeeper.model.tool import ToolDefinition

pytestmark = pytest.mark.usefixtures("needs_sandbox")  # every process runs in it

# every call starts an artifact worker process (and some wait out timeouts): CI and
# `make test-all` run them, `make test` leaves them out
pytestmark = pytest.mark.slow

SOURCES = {
    "echo": ('''
        import os
        def run(text, count=1, tags=None):
            print("noise on stdout goes to stderr")
            return {"text": text, "count": count, "tags": tags,
                    "env": sorted(os.environ)}
        ''', [{"name": "text", "type": "string", "required": True},
              {"name": "count", "type": "integer"},
              {"name": "tags", "type": "array"}]),
    "sleeper": ('''
        import subprocess, sys, time
        def run(token):
            subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)", token])
            time.sleep(120)
        ''', [{"name": "token", "type": "string", "required": True}]),
    "hog": ('''
        def run():
            blocks = []
            for _ in range(100):
                blocks.append(bytearray(64 * 1024 * 1024))
            return len(blocks)
        ''', []),
    "spin": ('''
        def run():
            while True:
                pass
        ''', []),
    "crash": ('''
        import os
        def run(how):
            if how == "raise":
                raise ValueError("secret detail")
            if how == "abort":
                os.abort()
            if how == "object":
                return object()
            return "x" * 5000
        ''', [{"name": "how", "type": "string", "required": True}]),
}

CONFIG = """\
version: 1
artifacts: {{dir: ./artifacts}}
tools:
  - name: echo
    implementation_type: artifact
    artifact_id: echo
    artifact_version: "{echo_version}"
    side_effect: pure
    risk_default: low
  - {{name: sleeper, implementation_type: artifact, artifact_id: sleeper, artifact_version: "1.0.0",
      risk_default: low, execution: {{timeout_s: 3}}}}
  - {{name: hog, implementation_type: artifact, artifact_id: hog, artifact_version: "1.0.0",
      risk_default: low, implementation: {{memory_mb: 256}}}}
  - {{name: spin, implementation_type: artifact, artifact_id: spin, artifact_version: "1.0.0",
      risk_default: low, implementation: {{cpu_s: 1}}, execution: {{timeout_s: 30}}}}
  - {{name: crash, implementation_type: artifact, artifact_id: crash, artifact_version: "1.0.0",
      risk_default: low, implementation: {{max_output_bytes: 2000}}}}
  - name: loose
    implementation_type: artifact
    artifact_id: echo
    artifact_version: "1.0.0"
    risk_default: low
    input_schema: {{type: object}}
profiles:
  - name: ops
    autonomy: 3
    activations:
      - {{tool: echo}}
      - {{tool: sleeper}}
      - {{tool: hog}}
      - {{tool: spin}}
      - {{tool: crash}}
      - {{tool: loose}}
agents:
  - {{name: bot, profile: ops}}
"""


def install(root: Path, artifact_id: str, version: str = "1.0.0",
            source: str | None = None) -> Path:
    code, inputs = SOURCES[artifact_id]
    where = root / "artifacts" / f"{artifact_id}-{version}"
    where.mkdir(parents=True, exist_ok=True)
    (where / f"{artifact_id}.py").write_text(textwrap.dedent(source or code))
    (where / "artifact.json").write_text(json.dumps({
        "id": artifact_id, "version": version, "entry": f"{artifact_id}:run",
        "inputs": inputs, "description": f"the {artifact_id} artifact"}))
    return where


@pytest.fixture
def site(tmp_path: Path) -> Path:
    for name in SOURCES:
        install(tmp_path, name)
    (tmp_path / "toolkeeper.yaml").write_text(CONFIG.format(echo_version="1.0.0"))
    return tmp_path


@pytest.fixture
def gw(db_url: str, site: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Gateway]:
    monkeypatch.setenv("TOOLKEEPER_TEST_SECRET", "do-not-leak")
    with Gateway.open(db_url, config=site / "toolkeeper.yaml") as gateway:
        yield gateway


def call(gw: Gateway, tool: str, **arguments: Any) -> Any:
    return gw.call_sync(tool, arguments=arguments, agent="bot")


def test_arguments_map_to_inputs_by_name_in_a_scrubbed_worker(gw: Gateway) -> None:
    res = call(gw, "echo", text="hi", count=3)
    assert res.ok, res
    out = res.output
    assert (out["text"], out["count"], out["tags"]) == ("hi", 3, None)
    assert "TOOLKEEPER_TEST_SECRET" not in out["env"]
    # PWD: set by the sandbox (bwrap --chdir)
    assert set(out["env"]) <= {"PATH", "LANG", "PYTHONDONTWRITEBYTECODE", "LC_CTYPE", "PWD"}


def test_template_syntax_passes_as_a_literal_string(gw: Gateway) -> None:
    literal = "{{ text }} and {{count}} ${secret:x/y}"
    res = call(gw, "echo", text=literal, tags=["{{ tags }}"])
    assert res.ok, res
    assert (res.output["text"], res.output["tags"]) == (literal, ["{{ tags }}"])


def test_the_declared_inputs_are_the_tools_schema(gw: Gateway) -> None:
    tool = gw.catalog.record("default", "echo")
    assert tool is not None
    assert tool[1].input_schema["required"] == ["text"]
    assert tool[1].description == "the echo artifact"
    missing = call(gw, "echo", count=1)
    assert (missing.ok, missing.reason) == (False, "invalid_arguments")
    typed = call(gw, "echo", text="x", count="three")
    assert (typed.ok, typed.reason) == (False, "invalid_arguments")


def test_a_missing_required_input_is_refused_by_the_provider_too(gw: Gateway) -> None:
    res = call(gw, "loose", count=1)
    assert (res.ok, res.reason) == (False, "artifact_input_missing")
    assert "text" in (res.message or "")
    res = call(gw, "loose", text="x", extra=1)
    assert (res.ok, res.reason) == (False, "invalid_arguments")


def _running(token: str) -> bool:
    """Whether a live process has ``token`` as an argument. The sandboxed artifact sees only
    its own PID namespace and no host file, so its child is found by a unique argument."""
    for entry in Path("/proc").iterdir():
        try:
            cmd = (entry / "cmdline").read_bytes().split(b"\0")
            stat = (entry / "stat").read_text()
        except (FileNotFoundError, NotADirectoryError, ProcessLookupError, PermissionError):
            continue
        if token.encode() in cmd and stat.rsplit(")", 1)[1].split()[0] != "Z":
            return True
    return False


def test_a_timeout_kills_the_whole_process_group(gw: Gateway) -> None:
    token = f"sleeper-{uuid.uuid4().hex}"
    with ThreadPoolExecutor(1) as pool:
        seen = pool.submit(wait_until, lambda: _running(token), what="the child started")
        res = call(gw, "sleeper", token=token)
        seen.result()
    assert (res.ok, res.reason) == (False, "artifact_timeout")
    wait_until(lambda: not _running(token), what="the artifact's child was killed")
    assert res.output is None


def test_the_memory_limit_stops_an_artifact(gw: Gateway) -> None:
    res = call(gw, "hog")
    assert (res.ok, res.reason) == (False, "artifact_memory_limit")


def test_the_cpu_limit_stops_an_artifact(gw: Gateway) -> None:
    res = call(gw, "spin")
    assert (res.ok, res.reason) == (False, "artifact_timeout")
    assert "CPU" in (res.message or "")


@pytest.mark.parametrize("how", ["raise", "abort", "object"])
def test_a_crash_is_artifact_failed_and_nothing_partial(gw: Gateway, how: str) -> None:
    res = call(gw, "crash", how=how)
    assert (res.ok, res.reason, res.output) == (False, "artifact_failed", None)
    assert "secret detail" not in (res.message or "")


def test_an_answer_over_the_cap_is_refused(gw: Gateway) -> None:
    res = call(gw, "crash", how="big")
    assert (res.ok, res.reason, res.output) == (False, "output_too_large", None)


def test_a_changed_artifact_quarantines_its_tool(gw: Gateway, site: Path) -> None:
    assert call(gw, "echo", text="a").ok
    pinned = gw.catalog.record("default", "echo")
    assert pinned is not None
    first = pinned[1].implementation["artifact_hash"]
    assert first.startswith("sha256:")
    install(site, "echo", source="def run(text, count=1, tags=None):\n    return 'evil'\n")
    res = call(gw, "echo", text="a")
    assert (res.ok, res.reason, res.output) == (False, "tool_quarantined", None)
    gw.flush()
    events = gw.store.audit.list("default", types=["tool.quarantined"])
    assert len(events) == 1
    data = events[0].data
    assert (data["pinned_hash"], data["artifact_id"]) == (first, "echo")
    assert data["artifact_hash"] != first
    again = call(gw, "echo", text="a")
    assert (again.ok, again.reason) == (False, "tool_quarantined")
    # an admin publishes it again, under a new version: the new hash is pinned
    gw.registry.new_version("echo", "1.0.1", "default")
    res = call(gw, "echo", text="a")
    assert (res.ok, res.output) == (True, "evil")


def test_the_pin_survives_a_restart_and_drift_while_down_is_caught(
        db_url: str, site: Path) -> None:
    path = site / "toolkeeper.yaml"
    with Gateway.open(db_url, config=path) as gw:
        assert call(gw, "echo", text="a").ok
    with Gateway.open(db_url, config=path) as gw:  # unchanged: kept, not re-published
        assert call(gw, "echo", text="a").ok
        record = gw.catalog.record("default", "echo")
        assert record is not None and len(record[2]) == 1  # one published snapshot
    install(site, "echo", source="def run(text, count=1, tags=None):\n    return 'evil'\n")
    with Gateway.open(db_url, config=path) as gw:  # caught at start, before any call
        record = gw.catalog.record("default", "echo")
        assert record is not None and record[1].status is ToolStatus.QUARANTINED
        gw.flush()
        events = gw.store.audit.list("default", types=["tool.quarantined"])
        assert sorted(str(e.tool) for e in events) == ["echo", "loose"]  # same artifact
        assert call(gw, "echo", text="a").reason == "tool_quarantined"
    with Gateway.open(db_url, config=path) as gw:  # config apply does not re-pin it
        record = gw.catalog.record("default", "echo")
        assert record is not None and record[1].status is ToolStatus.QUARANTINED
        assert call(gw, "echo", text="a").reason == "tool_quarantined"


def test_the_version_is_pinned(db_url: str, site: Path) -> None:
    install(site, "echo", "2.0.0", source="def run(text, count=1, tags=None):\n"
                                          "    return 'two'\n")
    path = site / "toolkeeper.yaml"
    with Gateway.open(db_url, config=path) as gw:
        assert call(gw, "echo", text="a").output["text"] == "a"  # 1.0.0 runs, not 2.0.0
    path.write_text(CONFIG.format(echo_version="2.0.0").replace(
        "    side_effect: pure\n", "    side_effect: pure\n    version: 1.1.0\n", 1))
    with Gateway.open(db_url, config=path) as gw:
        assert call(gw, "echo", text="a").output == "two"


def test_a_config_naming_an_uninstalled_artifact_is_refused(db_url: str, site: Path) -> None:
    path = site / "toolkeeper.yaml"
    path.write_text(CONFIG.format(echo_version="9.9.9"))
    with pytest.raises(ConfigError) as info:
        Gateway.open(db_url, config=path)
    assert "artifact_not_installed" in str(info.value)
    assert "9.9.9" in str(info.value)


def test_an_api_tool_cannot_run_an_artifact(gw: Gateway) -> None:
    tool = ToolDefinition(name="mine", tenant_id="default", implementation_type="artifact",
                          artifact_id="echo", artifact_version="1.0.0", origin="api")
    with pytest.raises(OperationRefused) as info:
        gw.registry.create(tool)
    assert info.value.reason == "entry_point_not_allowed"


def test_a_library_tool_runs_an_artifact(db_url: str, site: Path) -> None:
    with Gateway.open(db_url, artifacts_dir=str(site / "artifacts")) as gw:
        published = gw.registry.register(ToolDefinition(
            name="echo", implementation_type="artifact", artifact_id="echo",
            artifact_version="1.0.0", input_schema={"type": "object"}), tenant_id="default")
        assert published.implementation["artifact_hash"].startswith("sha256:")
        gw.registry.put_profile(Profile(name="p", tenant_id="default", autonomy=3,
                                        activations=[Activation(tool="echo")]))
        gw.registry.put_agent(Agent(name="lib", profile="p", tenant_id="default"))
        res = gw.call_sync("echo", arguments={"text": "lib"}, agent="lib")
        assert (res.ok, res.output["text"]) == (True, "lib")


def test_publishing_an_uninstalled_artifact_is_refused(db_url: str, site: Path) -> None:
    with Gateway.open(db_url, artifacts_dir=str(site / "artifacts")) as gw:
        with pytest.raises(OperationRefused) as info:
            gw.registry.register(ToolDefinition(
                name="nope", implementation_type="artifact", artifact_id="nope",
                artifact_version="1.0.0"), tenant_id="default")
        assert info.value.reason == "provider_unavailable"
        assert "not installed" in info.value.message


def test_an_installed_package_offers_an_artifact(db_url: str, tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    site_dir = tmp_path / "site-packages"
    name = f"tk_demo_{uuid.uuid4().hex[:12]}"  # parent packages stay imported after a test
    package = site_dir / name / "shout"
    package.mkdir(parents=True)
    (package.parent / "__init__.py").write_text("")
    (package / "__init__.py").write_text("raise RuntimeError('never imported here')\n")
    (package / "impl.py").write_text("def run(text):\n    return text.upper()\n")
    (package / "artifact.json").write_text(json.dumps({
        "id": "shout", "version": "0.1.0", "entry": "impl:run",
        "inputs": [{"name": "text", "type": "string", "required": True}]}))
    dist = site_dir / f"{name}-0.1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 0.1.0\n")
    (dist / "entry_points.txt").write_text(f"[toolkeeper.artifacts]\nshout = {name}.shout\n")
    monkeypatch.syspath_prepend(str(site_dir))
    path = tmp_path / "toolkeeper.yaml"
    path.write_text("""\
version: 1
tools:
  - {name: shout, implementation_type: artifact, artifact_id: shout, artifact_version: 0.1.0,
     risk_default: low}
profiles: [{name: p, autonomy: 3, activations: [{tool: shout}]}]
agents: [{name: bot, profile: p}]
""")
    with Gateway.open(db_url, config=path) as gw:
        res = call(gw, "shout", text="quiet")
        assert (res.ok, res.output) == (True, "QUIET")
        (package / "impl.py").write_text("def run(text):\n    return text\n")
        assert call(gw, "shout", text="quiet").reason == "tool_quarantined"


def test_toolkeeper_check_reports_an_uninstalled_artifact(site: Path) -> None:
    from typer.testing import CliRunner

    from toolkeeper.cli import app

    path = site / "toolkeeper.yaml"
    runner = CliRunner(env={"TOOLKEEPER_DATABASE_URL": None, "TOOLKEEPER_CONFIG": None})
    assert runner.invoke(app, ["check", "-f", str(path)]).exit_code == 0
    path.write_text(CONFIG.format(echo_version="9.9.9"))
    res = runner.invoke(app, ["check", "-f", str(path), "--json"])
    assert res.exit_code != 0
    found = [v for v in json.loads(res.stdout)["violations"]
             if v["rule"] == "artifact_not_installed"]
    assert [v["path"] for v in found] == ["tools[0]"]

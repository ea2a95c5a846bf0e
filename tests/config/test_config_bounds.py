"""The operator's ceiling comes from ``settings.tenant_bounds`` in toolkeeper.yaml; the
file's own tools and profiles are the operator's and are never bounded (SPEC §8)."""

from __future__ import annotations

import subprocess
from pathlib import Path

from fastapi.testclient import TestClient

from toolkeeper import Gateway
from toolkeeper.api import create_app
from toolkeeper.config.apply import apply_file

CONFIG = """\
version: 1
settings:
  tenant_bounds: {{paths: ["{tenants}"], networks: [127.0.0.0/8]}}
tools:
  - builtin: git
    policy: {{repo_root: "{repo}"}}
  - builtin: http_request
  - builtin: calculate
profiles:
  - name: ops
    autonomy: 3
    activations:
      - tool: git
        policy: {{repo_root: "{ops}"}}
  - {{name: team, autonomy: 3}}
agents:
  - {{name: bot, profile: ops}}
  - {{name: teambot, profile: team}}
"""


def make_repo(root: Path) -> Path:
    root.mkdir(parents=True)
    for args in (["init", "-q", "-b", "main"], ["config", "user.name", "T"],
                 ["config", "user.email", "t@example.com"],
                 ["commit", "-q", "--allow-empty", "-m", f"first in {root.name}"]):
        subprocess.run(["git", "-C", str(root), *args], check=True, capture_output=True)
    return root


def test_the_files_profiles_are_unbounded_and_its_ceiling_bounds_tenants(
        db_url: str, tmp_path: Path) -> None:
    tenants, ops = tmp_path / "tenants", make_repo(tmp_path / "ops-only")
    mine = make_repo(tenants / "default")
    path = tmp_path / "toolkeeper.yaml"
    path.write_text(CONFIG.format(tenants=tenants, repo=make_repo(tmp_path / "repo"), ops=ops))
    with Gateway.open(db_url, config=path) as gw:
        assert gw.settings.tenant_bounds.networks == ("127.0.0.0/8",)
        assert origins(gw) == {"ops": "config", "team": "config"}
        res = gw.call_sync("git", "log", agent="bot")
        assert res.ok, res
        admin = gw.store.tokens.create(tenant_id="default", role="admin")[1]
        with TestClient(create_app(gw)) as client:
            def activate(profile: str, tool: str, policy: dict[str, object]) -> list[str]:
                r = client.post("/activations", headers={"Authorization": f"Bearer {admin}"},
                                json={"profile": profile, "tool": tool, "policy": policy})
                return [] if r.status_code == 200 else [
                    e["pointer"] for e in r.json()["error"]["details"]["errors"]]

            # editing the operator's profile would make its host value the tenant's
            assert activate("ops", "calculate", {}) == ["/activations/0/policy/repo_root"]
            assert activate("team", "http_request", {"allowed_networks": ["127.0.0.1/32"]}) == []
            assert activate("team", "git", {"repo_root": str(ops)}) == ["/policy/repo_root"]
            assert activate("team", "git", {"repo_root": str(mine)}) == []
        assert origins(gw) == {"ops": "config", "team": "api"}
        res = gw.call_sync("git", "log", agent="teambot")
        assert res.ok and res.output["commits"][0]["subject"] == "first in default", res
        report = apply_file(gw, path)  # the operator's file takes its profile back
        assert report.updated == ["profile:default/team"]
        assert origins(gw) == {"ops": "config", "team": "config"}
        assert gw.call_sync("git", "log", agent="teambot").reason == "tool_not_enabled"


def origins(gw: Gateway) -> dict[str, str]:
    return {p.name: p.origin for p in gw.store.registry.profiles()}


NARROWING = """\
version: 1
settings:
  tenant_bounds:
    paths: ["{tenants}"]
    commands: [/usr/bin/true, {{path: /usr/bin/ls, flags: ["-l"], max_args: 1}}]
    permissions: [allow_write]
    env: {{TZ: null, MODE: fast}}
tools:
  - builtin: filesystem
    policy: {{root: "{ro}"}}
  - builtin: shell
    policy: {{cwd: "{ro}", commands: {{ls: {{path: /usr/bin/ls}}}}}}
profiles:
  - name: ops
    autonomy: 3
    activations:
      - tool: filesystem
        policy: {{allow_write: true}}
      - tool: shell
        policy: {{env: {{TAR_OPTIONS: "-v", HOME: "{ro}"}}}}
  - {{name: team, autonomy: 3}}
agents:
  - {{name: bot, profile: ops}}
"""


def test_the_files_ceiling_carries_rules_switches_and_env_and_its_profiles_set_anything(
        db_url: str, tmp_path: Path) -> None:
    ro, tenants = tmp_path / "ro", tmp_path / "tenants"
    ro.mkdir()
    (tenants / "default").mkdir(parents=True)
    path = tmp_path / "toolkeeper.yaml"
    path.write_text(NARROWING.format(tenants=tenants, ro=ro))
    with Gateway.open(db_url, config=path) as gw:
        bounds = gw.settings.tenant_bounds
        assert [c.path for c in bounds.command_rules] == ["/usr/bin/true", "/usr/bin/ls"]
        assert (bounds.permissions, bounds.env) == (("allow_write",), {"TZ": None,
                                                                        "MODE": "fast"})
        # the operator's profile: a write switch and any variable but the hooks
        assert gw.call_sync("filesystem", "write", {"path": "a.txt", "content": "ops"},
                            agent="bot").ok
        assert gw.call_sync("shell", arguments={"command": "ls"}, agent="bot").ok
        admin = gw.store.tokens.create(tenant_id="default", role="admin")[1]
        with TestClient(create_app(gw)) as client:
            def activate(tool: str, policy: dict[str, object]) -> list[str]:
                r = client.post("/activations", headers={"Authorization": f"Bearer {admin}"},
                                json={"profile": "team", "tool": tool, "policy": policy})
                return [] if r.status_code == 200 else [
                    e["pointer"] for e in r.json()["error"]["details"]["errors"]]

            assert activate("filesystem", {"allow_write": True}) == []  # permissions
            assert activate("shell", {"env": {"TAR_OPTIONS": "-v"}}) == ["/policy/env/TAR_OPTIONS"]
            assert activate("shell", {"env": {"TZ": "UTC", "MODE": "fast"}}) == []
            assert activate("shell", {"commands": {"ls": {
                "path": "/usr/bin/ls", "flags": ["-l"], "max_args": 1}}}) == []
            assert activate("shell", {"commands": {"ls": {
                "path": "/usr/bin/ls", "flags": ["-la"], "max_args": 1}}}) == [
                    "/policy/commands/ls/flags/0"]
    assert (ro / "a.txt").read_text() == "ops"

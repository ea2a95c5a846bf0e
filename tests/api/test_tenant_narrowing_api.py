"""A tenant admin (REST only) may narrow the operator's tools, never widen them (issue 26,
items 5-7): a shell command's flags, positional patterns, subcommands and ``max_args`` stay
within the operator's rule for that program; the process environment is an allow-list; a
read-only filesystem root stays read-only and git's switches and lists stay the operator's.
Refused at write (422 ``policy_exceeds_bounds`` with each pointer) and, for a value stored
before the rule existed, at call time (``policy.denied``), the program never started."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient

from tests.api.test_tenant_bounds_api import (
    BOUNDS,
    AsTenant,
    _store_tenant_profile,
    make_repo,
    refused,
)
from toolkeeper import Activation, Agent, Gateway, Profile
from toolkeeper.api import create_app
from toolkeeper.builtins import definition

NAME = r"[A-Za-z0-9._-]+"
TAR = {"path": "/usr/bin/tar", "flags": ["-c", "-t", "-f"], "positional": [NAME],
       "max_args": 4}
GIT = {"path": "/usr/bin/git", "subcommands": ["status", "log"], "flags": ["--short"],
       "max_args": 2}
CHECKPOINT = "--checkpoint-action=exec=touch pwned"
KEPT = {"LC_ALL": "C"}
"""The operator's shell sets it; a tenant's env keeps it (dropping it is refused too)."""


@dataclass
class Host:
    cwd: Path
    """The operator's shell working directory (a git work tree, for the alias attack)."""
    ro: Path
    """The operator's read-only filesystem root."""
    repo: Path
    tenants: Path

    @property
    def pwned(self) -> Path:
        return self.cwd / "pwned"


@dataclass
class Api(AsTenant):
    def activate(self, tool: str, policy: dict[str, Any]) -> httpx.Response:
        return self.call("POST", "/activations", json={"profile": "main", "tool": tool,
                                                       "policy": policy})


@pytest.fixture
def host(tmp_path: Path) -> Host:
    cwd = make_repo(tmp_path / "work", "in.txt")
    ro = tmp_path / "ro"
    ro.mkdir()
    (ro / "notes.txt").write_text("operator's\n")
    return Host(cwd=cwd, ro=ro, repo=make_repo(tmp_path / "repo", "a.txt"),
                tenants=tmp_path / "tenants")


@contextmanager
def narrowing(db_url: str, host: Host, **tenant_bounds: Any) -> Iterator[Api]:
    """Operator: global ``shell`` (``tar``, ``git status|log``, ``LC_ALL=C``), a read-only
    ``filesystem`` and a read-only ``git``; tenant ``acme``: an admin and agent ``bot``."""
    gw = Gateway.open(db_url, tenant_bounds=tenant_bounds)
    try:
        gw.registry.register(definition("shell", policy={
            "cwd": str(host.cwd), "commands": {"tar": TAR, "git": GIT}, "env": KEPT}))
        gw.registry.register(definition("filesystem", policy={"root": str(host.ro)}))
        gw.registry.register(definition("git", policy={"repo_root": str(host.repo)}))
        gw.registry.put_profile(Profile(name="main", tenant_id="acme", autonomy=3), replace=True)
        gw.registry.put_agent(Agent(name="bot", profile="main", tenant_id="acme"), replace=True)
        tokens = {"admin": gw.store.tokens.create(tenant_id="acme", role="admin")[1],
                  "bot": gw.store.tokens.create(tenant_id="acme", role="agent",
                                                agent="bot")[1]}
        with TestClient(create_app(gw)) as client:
            yield Api(gw=gw, client=client, tokens=tokens)
    finally:
        gw.close()


def denied(api: Api, result: dict[str, Any]) -> None:
    assert (result["status"], result["reason"]) == ("denied", BOUNDS), result
    api.gw.flush()
    assert [e.reason for e in api.gw.store.audit.list("acme", types=["policy.denied"])] == [
        BOUNDS]


def shell(api: Api, command: str, *args: str) -> dict[str, Any]:
    return api.execute("shell", {"command": command, "args": list(args)})


# item 5: a command's arguments ---------------------------------------------------------

@pytest.mark.parametrize(("commands", "pointers"), [
    ({"tar": {**TAR, "flags": [*TAR["flags"], "--checkpoint.*"]}},
     ["/policy/commands/tar/flags/3"]),
    ({"mine": {**TAR, "positional": [".*"], "max_args": 8}},
     ["/policy/commands/mine/positional/0", "/policy/commands/mine/max_args"]),
    ({"git": {"path": "/usr/bin/git", "flags": ["-c"], "positional": [".*"], "max_args": 2}},
     ["/policy/commands/git/subcommands", "/policy/commands/git/flags/0",
      "/policy/commands/git/positional/0"]),
    ({"git": {**GIT, "subcommands": ["status", "config"]}},
     ["/policy/commands/git/subcommands/1"]),
    ({"sh": {"path": "/bin/sh"}}, ["/policy/commands/sh/path"]),
], ids=["tar-flag", "tar-any-argument", "git-c-alias", "git-subcommand", "other-program"])
def test_a_tenant_cannot_open_the_arguments_of_an_operator_command(
        db_url: str, host: Host, commands: dict[str, Any], pointers: list[str]) -> None:
    with narrowing(db_url, host) as api:
        refused(api.activate("shell", {"commands": commands}), *pointers)
        r = api.call("POST", "/tools", json={
            "name": "myshell", "implementation_type": "builtin",
            "implementation_config": {"builtin_key": "shell"},
            "policy": {"cwd": str(host.cwd), "commands": commands}})
        assert r.status_code == 422, r.text  # its own tool has no ceiling at all here


def test_a_tenant_may_narrow_an_operator_command(db_url: str, host: Host) -> None:
    with narrowing(db_url, host) as api:
        narrow = {"git": {**GIT, "subcommands": ["status"], "flags": [], "max_args": 1},
                  "list": {**TAR, "flags": ["-t", "-f"], "max_args": 2}}
        assert api.activate("shell", {"commands": narrow}).status_code == 200
        result = shell(api, "git", "status")
        assert result["status"] == "succeeded" and result["output"]["exit_code"] == 0, result
        refusal = shell(api, "git", "log")
        assert refusal["reason"] == "argument_not_allowed", refusal


@pytest.mark.parametrize(("rule", "args"), [
    ({**TAR, "flags": [*TAR["flags"], "--checkpoint=1", "--checkpoint-action=exec=.*"],
      "max_args": 6}, ["-c", "-f", "out.tar", "--checkpoint=1", CHECKPOINT, "in.txt"]),
    ({"path": "/usr/bin/git", "flags": ["-c"], "positional": [".*"], "max_args": 3},
     ["-c", "alias.x=!touch pwned", "x"]),
], ids=["tar-checkpoint-action", "git-c-alias"])
def test_a_stored_wider_command_rule_runs_nothing(
        db_url: str, host: Host, rule: dict[str, Any], args: list[str]) -> None:
    name = Path(rule["path"]).name
    with narrowing(db_url, host) as api:
        refused(api.activate("shell", {"commands": {name: rule}}),
                *([f"/policy/commands/{name}/flags/3", f"/policy/commands/{name}/flags/4",
                   f"/policy/commands/{name}/max_args"] if name == "tar" else
                  [f"/policy/commands/{name}/subcommands", f"/policy/commands/{name}/flags/0",
                   f"/policy/commands/{name}/positional/0",
                   f"/policy/commands/{name}/max_args"]))
        _store_tenant_profile(api.gw, (Activation(tool="shell", policy={
            "commands": {name: rule}}),))
        denied(api, shell(api, name, *args))
    assert not host.pwned.exists()


def test_the_tenant_bounds_commands_give_a_tenants_own_shell_its_ceiling(
        db_url: str, host: Host) -> None:
    bounds = {"paths": [str(host.tenants)], "commands": ["/usr/bin/true", TAR]}
    mine = host.tenants / "acme"
    mine.mkdir(parents=True)

    def tool(name: str, commands: dict[str, Any]) -> httpx.Response:
        return api.call("POST", "/tools", json={
            "name": name, "implementation_type": "builtin",
            "implementation_config": {"builtin_key": "shell"},
            "policy": {"cwd": str(mine), "commands": commands}})

    with narrowing(db_url, host, **bounds) as api:
        assert tool("ok", {"t": {"path": "/usr/bin/true"}, "tar": TAR}).status_code == 201
        refused(tool("args", {"t": {"path": "/usr/bin/true", "positional": [".*"]}}),
                "/policy/commands/t/positional/0")  # a bare path: the program, no arguments
        refused(tool("flag", {"tar": {**TAR, "flags": ["-I"]}}), "/policy/commands/tar/flags/0")


# item 6: the environment ---------------------------------------------------------------

HOOKS = ["TAR_OPTIONS", "HOME", "XDG_CONFIG_HOME", "OPENSSL_CONF", "EDITOR", "PAGER",
         "GIT_CONFIG_GLOBAL", "VISUAL", "TERMINFO", "LOCALDOMAIN"]


def test_a_tenant_sets_only_allow_listed_environment_variables(db_url: str, host: Host) -> None:
    with narrowing(db_url, host) as api:
        for name in HOOKS:
            r = api.activate("shell", {"env": {**KEPT, name: "x"}})
            assert r.status_code == 422, (name, r.text)
            if r.json()["error"]["reason"] == BOUNDS:  # GIT_*: the model refuses it for all
                refused(r, f"/policy/env/{name}")
        refused(api.activate("shell", {"env": {"LANG": "/tmp/evil", "LC_ALL": "../x"}}),
                "/policy/env/LANG", "/policy/env/LC_ALL", "/policy/env")  # LC_ALL=C dropped
        safe = {"LANG": "C.UTF-8", "TZ": "Europe/Paris", "LC_ALL": "C", "NO_COLOR": "1"}
        assert api.activate("shell", {"env": safe}).status_code == 200


def test_the_operators_env_ceiling_names_values_or_frees_them(db_url: str, host: Host) -> None:
    with narrowing(db_url, host, env={"MODE": "fast", "RETRIES": None}) as api:
        refused(api.activate("shell", {"env": {**KEPT, "MODE": "slow"}}), "/policy/env/MODE")
        assert api.activate("shell", {"env": {**KEPT, "MODE": "fast", "RETRIES": "7"}}
                            ).status_code == 200


def test_a_stored_tar_options_runs_nothing(db_url: str, host: Host) -> None:
    with narrowing(db_url, host) as api:
        env = {**KEPT, "TAR_OPTIONS": "--checkpoint=1 --checkpoint-action='exec=touch pwned'"}
        refused(api.activate("shell", {"env": env}), "/policy/env/TAR_OPTIONS")
        _store_tenant_profile(api.gw, (Activation(tool="shell", policy={"env": env}),))
        denied(api, shell(api, "tar", "-c", "-f", "out.tar", "in.txt"))
    assert not host.pwned.exists()
    assert not (host.cwd / "out.tar").exists()


# item 7: switches and lists of the operator's tools ------------------------------------

@pytest.mark.parametrize(("tool", "policy", "pointer"), [
    ("filesystem", {"allow_write": True}, "allow_write"),
    ("filesystem", {"allow_delete": True}, "allow_delete"),
    ("filesystem", {"max_read_bytes": 1_000_000}, "max_read_bytes"),
    ("git", {"allow_push": True}, "allow_push"),
    ("git", {"allow_worktree_dirty": True}, "allow_worktree_dirty"),
    ("git", {"allowed_actions": None}, "allowed_actions"),
    ("git", {"allowed_actions": ["status", "push"]}, "allowed_actions/1"),
    ("git", {"managed_branch_prefix": ""}, "managed_branch_prefix"),
    ("git", {"allowed_remotes": ["origin", "evil"]}, "allowed_remotes/1"),
    ("git", {"timeout_s": 600}, "timeout_s"),
    ("git", {"max_output_chars": 10**9}, "max_output_chars"),
])
def test_a_tenant_cannot_widen_the_operators_tool(
        db_url: str, host: Host, tool: str, policy: dict[str, Any], pointer: str) -> None:
    with narrowing(db_url, host) as api:
        refused(api.activate(tool, policy), f"/policy/{pointer}")


def test_a_tenant_may_narrow_the_operators_tool(db_url: str, host: Host) -> None:
    with narrowing(db_url, host) as api:
        assert api.activate("git", {"allowed_actions": ["status", "log"], "max_files": 10,
                                    "managed_branch_prefix": "agent/acme/",
                                    "allow_push": False, "timeout_s": 5}).status_code == 200
        assert api.execute("git", {}, "status")["status"] == "succeeded"
        assert api.activate("filesystem", {"allow_write": False, "max_read_bytes": 100}
                            ).status_code == 200
        assert api.execute("filesystem", {"path": "notes.txt"}, "read")["status"] == "succeeded"


def test_a_stored_write_switch_on_a_read_only_root_writes_nothing(
        db_url: str, host: Host) -> None:
    with narrowing(db_url, host) as api:
        _store_tenant_profile(api.gw, (Activation(tool="filesystem", policy={
            "allow_write": True, "allow_delete": True}),))
        denied(api, api.execute("filesystem", {"path": "notes.txt", "content": "tenant's"},
                                "write"))
        enabled = api.call("GET", "/discovery/agents/bot/enabled", "bot").json()["tools"]
        assert "filesystem" not in [t["name"] for t in enabled]  # listed as it is decided
    assert (host.ro / "notes.txt").read_text() == "operator's\n"


def test_permissions_in_the_ceiling_let_a_tenants_own_tool_write(
        db_url: str, host: Host) -> None:
    mine = host.tenants / "acme"
    mine.mkdir(parents=True)
    body = {"name": "files", "implementation_type": "builtin",
            "implementation_config": {"builtin_key": "filesystem"},
            "policy": {"root": str(mine), "allow_write": True}}
    with narrowing(db_url, host, paths=[str(host.tenants)]) as api:
        refused(api.call("POST", "/tools", json=body), "/policy/allow_write")
        refused(api.activate("filesystem", {"allow_write": True}), "/policy/allow_write")
    with narrowing(db_url, host, paths=[str(host.tenants)], permissions=["allow_write"]) as api:
        created = api.call("POST", "/tools", json=body)
        assert created.status_code == 201, created.text
        assert api.call("POST", f"/tools/{created.json()['id']}/publish").status_code == 200
        assert api.activate("files", {}).status_code == 200
        result = api.execute("files", {"path": "a.txt", "content": "mine"}, "write")
        assert result["status"] == "succeeded", result
    assert (mine / "a.txt").read_text() == "mine"


def test_the_operators_profile_may_set_anything(db_url: str, host: Host) -> None:
    with narrowing(db_url, host) as api:
        api.gw.registry.put_profile(Profile(name="main", tenant_id="acme", autonomy=3,
                                            activations=(Activation(tool="filesystem", policy={
                                                "allow_write": True}),)), replace=True)
        result = api.execute("filesystem", {"path": "notes.txt", "content": "ops"}, "write")
        assert result["status"] == "succeeded", result
    assert (host.ro / "notes.txt").read_text() == "ops"


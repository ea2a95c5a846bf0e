"""Operator ceilings on host-touching policy (SPEC §8): a tenant admin writing through REST
may narrow a repository root or a network allow-list within what the operator allows,
never widen it — refused at write time (422 ``policy_exceeds_bounds`` with JSON pointers)
and, for a value already in the store, denied at call time (``policy.denied``)."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select, update

from tests.support.loopback import JsonHandler, serving
from toolkeeper import Activation, Agent, Gateway, Profile
from toolkeeper.api import create_app
from toolkeeper.builtins import definition
from toolkeeper.model.enums import ToolStatus
from toolkeeper.model.tool import ToolDefinition
from toolkeeper.store.registry import definition_hash
from toolkeeper.store.schema import profiles

BOUNDS = "policy_exceeds_bounds"


def git(repo: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True)


def make_repo(root: Path, file: str) -> Path:
    root.mkdir(parents=True)
    git(root, "init", "-q", "-b", "main")
    git(root, "config", "user.name", "Test")
    git(root, "config", "user.email", "test@example.com")
    (root / file).write_text("x\n")
    git(root, "add", file)
    git(root, "commit", "-q", "-m", f"add {file}")
    return root


class Hits(JsonHandler):
    """Answers every GET with 200 ``ok`` and counts the requests it got."""

    count: list[int] = []  # noqa: RUF012 - reset per test by ``hits``

    def do_GET(self) -> None:
        Hits.count.append(1)
        self.reply({"ok": True})


@dataclass
class Host:
    """The server host as the tests see it: the operator's repository, a nested one a tenant
    may narrow to, and a repository the operator never exposed."""

    repo: Path
    nested: Path
    secret: Path
    tenants: Path


@dataclass
class AsTenant:
    """A tenant's REST face in process: requests as one of ``tokens``, calls as agent
    ``bot``."""

    gw: Gateway
    client: TestClient
    tokens: dict[str, str]

    def call(self, method: str, path: str, who: str = "admin", **kw: Any) -> httpx.Response:
        return self.client.request(method, path, headers={
            "Authorization": f"Bearer {self.tokens[who]}"}, **kw)

    def execute(self, tool: str, arguments: dict[str, Any], action: str | None = None,
                ) -> dict[str, Any]:
        r = self.call("POST", "/tools/execute", "bot",
                      json={"tool": tool, "action": action, "arguments": arguments})
        assert r.status_code == 200, r.text
        out: dict[str, Any] = r.json()
        return out


@dataclass
class Bounded(AsTenant):
    host: Host


@pytest.fixture
def host(tmp_path: Path) -> Host:
    repo = make_repo(tmp_path / "srv" / "repo", "public.txt")
    nested = make_repo(repo / "vendor", "vendored.txt")
    secret = make_repo(tmp_path / "secret", "SECRET.txt")
    return Host(repo=repo, nested=nested, secret=secret, tenants=tmp_path / "tenants")


@contextmanager
def bounded(db_url: str, host: Host, **tenant_bounds: list[str]) -> Iterator[Bounded]:
    """Operator: a global git tool rooted at ``host.repo``, a global ``http_request``, the
    given ``tenant_bounds``; tenant ``acme``: an admin and an agent ``bot`` on profile
    ``main`` (an operator profile without activations)."""
    gw = Gateway.open(db_url, tenant_bounds=tenant_bounds)
    try:
        gw.registry.register(definition("git", policy={"repo_root": str(host.repo)}))
        gw.registry.register(definition("http_request", risk_default="low"))
        gw.registry.put_profile(Profile(name="main", tenant_id="acme", autonomy=3), replace=True)
        gw.registry.put_agent(Agent(name="bot", profile="main", tenant_id="acme"), replace=True)
        tokens = {"admin": gw.store.tokens.create(tenant_id="acme", role="admin")[1],
                  "bot": gw.store.tokens.create(tenant_id="acme", role="agent",
                                                agent="bot")[1]}
        with TestClient(create_app(gw)) as client:
            yield Bounded(gw=gw, client=client, host=host, tokens=tokens)
    finally:
        gw.close()


def refused(r: httpx.Response, *pointers: str) -> None:
    assert r.status_code == 422, r.text
    err = r.json()["error"]
    assert err["reason"] == BOUNDS, err
    assert [e["pointer"] for e in err["details"]["errors"]] == list(pointers), err


def denied_bounds(api: Bounded, result: dict[str, Any]) -> None:
    assert (result["status"], result["reason"]) == ("denied", BOUNDS), result
    api.gw.flush()
    events = api.gw.store.audit.list("acme", types=["policy.denied"])
    assert [e.reason for e in events] == [BOUNDS]


def activate(api: Bounded, tool: str, policy: dict[str, Any]) -> httpx.Response:
    return api.call("POST", "/activations", json={"profile": "main", "tool": tool,
                                                  "policy": policy})


# repository roots ----------------------------------------------------------------------

def _outside(host: Host) -> list[str]:
    link = host.repo / "escape"
    if not link.exists():
        link.symlink_to(host.secret, target_is_directory=True)
    return ["/", str(host.secret), str(host.repo / ".." / ".." / "secret"), str(link),
            str(host.repo.parent)]


def test_a_tenant_repo_root_outside_the_operators_is_refused(db_url: str, host: Host) -> None:
    with bounded(db_url, host) as api:
        for root in _outside(host):
            refused(activate(api, "git", {"repo_root": root}), "/policy/repo_root")
            r = api.call("POST", "/profiles", json={
                "name": "wide", "activations": [
                    {"tool": "git"}, {"tool": "git", "policy": {"repo_root": root}}]})
            refused(r, "/activations/1/policy/repo_root")
        assert api.call("GET", "/profiles/wide").status_code == 404
        assert api.gw.catalog.profiles[("acme", "main")].profile.activations == ()


def test_a_tenant_may_narrow_the_repo_root_below_the_operators(
        db_url: str, host: Host) -> None:
    with bounded(db_url, host) as api:
        assert activate(api, "git", {"repo_root": str(host.nested)}).status_code == 200
        result = api.execute("git", {}, "status")
        assert result["status"] == "succeeded", result
        listed = api.execute("git", {}, "log")
        assert [c["subject"] for c in listed["output"]["commits"]] == ["add vendored.txt"]


def test_operator_bounds_paths_admit_a_tenant_repository_there(
        db_url: str, host: Host) -> None:
    mine = make_repo(host.tenants / "acme", "acme.txt")
    with bounded(db_url, host, paths=[str(host.tenants)]) as api:
        assert activate(api, "git", {"repo_root": str(mine)}).status_code == 200
        assert api.execute("git", {}, "status")["status"] == "succeeded"
        refused(activate(api, "git", {"repo_root": str(host.secret)}), "/policy/repo_root")


def test_a_tenant_tool_of_the_git_built_in_cannot_root_itself_on_the_host(
        db_url: str, host: Host) -> None:
    with bounded(db_url, host) as api:
        r = api.call("POST", "/tools", json={
            "name": "mygit", "implementation_type": "builtin",
            "implementation_config": {"builtin_key": "git"},
            "policy": {"repo_root": str(host.secret)}})
        refused(r, "/policy/repo_root")


def _store_tenant_profile(gw: Gateway, activations: tuple[Activation, ...], *,
                          legacy: bool = False) -> None:
    """What a tenant wrote before the ceiling existed, straight into the store."""
    gw.store.registry.upsert_profile(Profile(name="main", tenant_id="acme", autonomy=3,
                                             origin="api", activations=activations))
    if legacy:  # a row from before profiles recorded their origin
        with gw.store.db.write() as conn:
            row = conn.execute(select(profiles.c.definition).where(
                profiles.c.name == "main")).one()
            stored = {k: v for k, v in row.definition.items() if k != "origin"}
            conn.execute(update(profiles).where(profiles.c.name == "main")
                         .values(definition=stored))
    gw.reload()


@pytest.mark.parametrize("legacy", [False, True], ids=["tenant-row", "row-without-origin"])
def test_a_stored_tenant_repo_root_on_the_host_cannot_be_read(
        db_url: str, host: Host, legacy: bool) -> None:
    with bounded(db_url, host) as api:
        _store_tenant_profile(api.gw, (Activation(tool="git", policy={
            "repo_root": str(host.secret)}),), legacy=legacy)
        result = api.execute("git", {}, "log")
        denied_bounds(api, result)
        assert "SECRET" not in str(result)
        # listed as the call is decided: never shown to the agent as callable
        enabled = api.call("GET", "/discovery/agents/bot/enabled", "bot").json()["tools"]
        assert "git" not in [t["name"] for t in enabled]
        unavailable = api.call("GET", "/discovery/agents/bot/unavailable", "bot").json()
        why = {t["name"]: t for t in unavailable["tools"]}
        assert why["git"]["why_unavailable"] == "disabled_for_agent"
        assert "repo_root" in why["git"]["message"]


def test_an_operator_profile_is_not_bounded(db_url: str, host: Host) -> None:
    with bounded(db_url, host) as api:
        api.gw.registry.put_profile(Profile(
            name="main", tenant_id="acme", autonomy=3,
            activations=(Activation(tool="git", policy={"repo_root": str(host.secret)}),)),
                                    replace=True)
        result = api.execute("git", {}, "log")
        assert result["status"] == "succeeded", result
        assert "add SECRET.txt" in str(result["output"])


# networks ------------------------------------------------------------------------------

@pytest.fixture
def hits() -> Iterator[str]:
    Hits.count = []
    with serving(Hits) as base:
        yield base


def _http_tool(base: str, networks: list[str]) -> dict[str, Any]:
    return {"name": "probe", "implementation_type": "http", "side_effect": "pure",
            "risk_default": "low", "input_schema": {"type": "object"},
            "implementation_config": {"url": base + "/healthz", "method": "GET",
                                      "allowed_networks": networks}}


def test_an_api_http_tool_allowing_every_network_is_refused(
        db_url: str, host: Host, hits: str) -> None:
    with bounded(db_url, host) as api:
        refused(api.call("POST", "/tools", json=_http_tool(hits, ["0.0.0.0/0"])),
                "/implementation_config/allowed_networks/0")
        created = api.call("POST", "/tools", json=_http_tool(hits, []))
        assert created.status_code == 201, created.text
        r = api.call("PUT", f"/tools/{created.json()['id']}", json={"implementation_config": {
            "url": hits + "/healthz", "allowed_networks": ["10.0.0.0/8", "127.0.0.1/32"]}})
        refused(r, "/implementation_config/allowed_networks/0",
                "/implementation_config/allowed_networks/1")
    assert Hits.count == []


def test_a_stored_api_http_tool_cannot_reach_the_gateways_loopback(
        db_url: str, host: Host, hits: str) -> None:
    with bounded(db_url, host) as api:
        tool = ToolDefinition.model_validate({
            **{k: v for k, v in _http_tool(hits, ["0.0.0.0/0"]).items()
               if k != "implementation_config"},
            "implementation": _http_tool(hits, ["0.0.0.0/0"])["implementation_config"],
            "tenant_id": "acme", "origin": "api", "status": "published"})
        tool = tool.model_copy(update={"definition_hash": definition_hash(tool)})
        tool_id = api.gw.store.registry.upsert_tool(tool)
        api.gw.store.registry.add_version(tool_id, tool)
        api.gw.registry.put_profile(Profile(name="main", tenant_id="acme", autonomy=3,
                                            activations=(Activation(tool="probe"),)), replace=True)
        denied_bounds(api, api.execute("probe", {}))
    assert Hits.count == []


def test_operator_loopback_bound_lets_a_tenant_list_one_loopback_address(
        db_url: str, host: Host, hits: str) -> None:
    with bounded(db_url, host, networks=["127.0.0.0/8"]) as api:
        created = api.call("POST", "/tools", json=_http_tool(hits, ["127.0.0.1/32"]))
        assert created.status_code == 201, created.text
        assert api.call("POST", f"/tools/{created.json()['id']}/publish").status_code == 200
        assert activate(api, "probe", {}).status_code == 200
        assert api.execute("probe", {})["status"] == "succeeded"
        assert activate(api, "http_request", {"allowed_networks": ["127.0.0.1/32"]}
                        ).status_code == 200
        result = api.execute("http_request", {"url": hits + "/x"})
        assert result["status"] == "succeeded", result
    assert len(Hits.count) == 2


@pytest.mark.parametrize("networks", [["127.0.0.1/32"], ["169.254.169.254/32"],
                                      ["::ffff:127.0.0.1/128"], ["0.0.0.0/0"]])
def test_an_operator_wildcard_never_grants_loopback_link_local_or_metadata(
        db_url: str, host: Host, networks: list[str]) -> None:
    with bounded(db_url, host, networks=["0.0.0.0/0", "::/0"]) as api:
        refused(activate(api, "http_request", {"allowed_networks": networks}),
                "/policy/allowed_networks/0")
        assert activate(api, "http_request", {"allowed_networks": ["10.1.0.0/16"]}
                        ).status_code == 200


def test_a_stored_tenant_activation_cannot_reach_loopback(
        db_url: str, host: Host, hits: str) -> None:
    with bounded(db_url, host) as api:
        _store_tenant_profile(api.gw, (Activation(tool="http_request", policy={
            "allowed_networks": ["127.0.0.0/8"]}),))
        denied_bounds(api, api.execute("http_request", {"url": hits + "/healthz"}))
    assert Hits.count == []


def test_the_tenant_bounds_setting_is_validated(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/tk.db"
    with pytest.raises(ValueError, match="networks"):
        Gateway.open(url, tenant_bounds={"networks": ["not-a-net"]})
    with pytest.raises(ValueError, match="unknown"):
        Gateway.open(url, tenant_bounds={"unknown": []})
    with pytest.raises(ValueError, match="empty entry"):
        Gateway.open(url, tenant_bounds={"paths": [""]})


def test_a_refused_tool_update_leaves_the_stored_tool_as_it_was(db_url: str, host: Host) -> None:
    with bounded(db_url, host) as api:
        created = api.call("POST", "/tools", json=_http_tool("http://example.com", []))
        tool_id = created.json()["id"]
        r = api.call("PUT", f"/tools/{tool_id}", json={"implementation_config": {
            "url": "http://example.com", "allowed_networks": ["192.168.0.0/16"]}})
        refused(r, "/implementation_config/allowed_networks/0")
        row = api.gw.store.registry.tool_by_id(tool_id)
        assert row is not None and row.definition.status is ToolStatus.DRAFT
        assert row.definition.implementation["allowed_networks"] == []

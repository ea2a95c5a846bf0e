"""``GET /tools/sources`` (issue 11 item 2): what the console's tool dialog picks from — the
``functions:`` allow-list, configured MCP servers with their imported tools, installed
artifacts and their versions, the tenant's retrieval pipelines and agents. Admins only."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from tests.support.rest import RestClient, assert_error
from toolkeeper import Gateway
from toolkeeper.api import create_app
from toolkeeper.model.profile import Agent, Profile


def lookup(key: str) -> str:
    return key


def shout(text: str) -> str:
    return text.upper()


def _artifact(root: Path, ident: str, version: str) -> None:
    where = root / f"{ident}-{version}"
    where.mkdir(parents=True)
    (where / "artifact.json").write_text(json.dumps(
        {"id": ident, "version": version, "entry": "main:run"}))
    (where / "main.py").write_text("def run(**kw):\n    return kw\n")


@pytest.fixture
def api(db_url: str, tmp_path: Path) -> Iterator[RestClient]:
    arts = tmp_path / "artifacts"
    for ident, version in (("summarise", "1.0.0"), ("summarise", "1.2.0"), ("tidy", "0.1.0")):
        _artifact(arts, ident, version)
    gw = Gateway.open(db_url, functions={"shout": shout, "lookup": lookup},
                      artifacts_dir=str(arts))
    try:
        gw.registry.put_profile(Profile(name="p", tenant_id="acme"))
        gw.registry.put_profile(Profile(name="p", tenant_id="globex"))
        for tenant, agent in (("acme", "writer"), ("acme", "reader"), ("globex", "spy")):
            gw.registry.put_agent(Agent(name=agent, profile="p", tenant_id=tenant))
        gw.retrieval.create("acme", "handbook")
        gw.retrieval.create("globex", "secret-plans")
        who = {"admin": ("acme", "admin", None), "approver": ("acme", "approver", None),
               "operator": ("acme", "operator", None), "bot": ("acme", "agent", "writer")}
        tokens = {k: gw.store.tokens.create(tenant_id=t, role=r, agent=a)[1]
                  for k, (t, r, a) in who.items()}
        with TestClient(create_app(gw), raise_server_exceptions=False) as client:
            yield RestClient(gw=gw, client=client, tokens=tokens, tenant="acme")
    finally:
        gw.close()


def test_an_admin_gets_the_pickers_contents_of_its_own_tenant(api: RestClient) -> None:
    resp = api.get("admin", "/tools/sources")
    assert resp.status_code == 200, resp.text
    assert resp.json() == {
        "functions": ["lookup", "shout"],
        "servers": [],
        "artifacts": [{"id": "summarise", "versions": ["1.0.0", "1.2.0"]},
                      {"id": "tidy", "versions": ["0.1.0"]}],
        "pipelines": ["handbook"],
        "agents": ["reader", "writer"]}


@pytest.mark.parametrize("who", ["approver", "operator", "bot"])
def test_other_roles_are_refused(api: RestClient, who: str) -> None:
    assert_error(api.get(who, "/tools/sources"), 403, "forbidden")


def test_no_token_is_refused(api: RestClient) -> None:
    resp = api.client.get("/tools/sources")
    assert resp.status_code == 401, resp.text

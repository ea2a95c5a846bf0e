"""The ``composio`` built-in (issue 31 part 5) on the official ``composio`` SDK, against a
loopback Composio backend speaking what the SDK sends (read from its code: ``GET
/api/v3.1/tools/{slug}`` for the schema, ``POST /api/v3.1/tools/execute/{slug}`` with
``x-api-key`` and ``{arguments, user_id, version}``): the tenant's credential is the key
and never shows, the policy's slugs and users bound what runs, versions are pinned,
Composio's verdicts become reasons. SQLite and PostgreSQL."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from typing import Any, ClassVar

import pytest

from tests.support.loopback import JsonHandler, serving
from toolkeeper import Activation, Agent, Autonomy, CallResult, Gateway, Profile
from toolkeeper.builtins import BUILTINS, definition
from toolkeeper.providers.factory import ProviderFactory
from toolkeeper.secrets.embedded import EmbeddedSecretsStore
from toolkeeper.store import Store

TENANT_KEY = "ak_tenant-key-6e1f0c2b"
ENV_KEY = "ak_env-key-77aa90d1"
REJECTED = "ak_rejected-3b9d"
LOOPBACK = {"allowed_hosts": ["127.0.0.1"], "allowed_networks": ["127.0.0.0/8"],
            "allowed_tools": ["GITHUB_STAR_A_REPO", "FAILING_TOOL"]}
VERSIONS = {"github": "20251201_00", "failing": "20251201_00"}


def _schema(slug: str) -> dict[str, Any]:
    toolkit = slug.split("_")[0].lower()
    return {"slug": slug, "name": slug.title(), "description": "d", "version": "20251201_00",
            "available_versions": ["20251201_00"], "is_deprecated": False, "no_auth": False,
            "deprecated": {"available_versions": ["20251201_00"], "displayName": slug,
                           "is_deprecated": False, "toolkit": {"logo": ""},
                           "version": "20251201_00"},
            "input_parameters": {"type": "object", "properties": {
                "owner": {"type": "string"}, "repo": {"type": "string"}}},
            "output_parameters": {"type": "object"}, "scopes": [], "tags": [],
            "toolkit": {"logo": "", "name": toolkit, "slug": toolkit}}


class Backend(JsonHandler):
    """Composio's API as the SDK calls it; ``FAILING_TOOL`` runs unsuccessfully, key
    ``REJECTED`` gets 401; every answer echoes the key it got (a careless upstream)."""

    got: ClassVar[list[dict[str, Any]]]

    def do_GET(self) -> None:
        key = self.headers.get("x-api-key", "")
        self.got.append({"method": "GET", "path": self.path, "key": key})
        if key == REJECTED:
            return self.reply({"error": {"message": f"invalid key {key}"}}, status=401)
        slug = self.path.split("?")[0].rsplit("/", 1)[-1]
        return self.reply(_schema(slug))

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers.get("content-length") or 0)))
        key = self.headers.get("x-api-key", "")
        self.got.append({"method": "POST", "path": self.path, "key": key, "body": body})
        if "FAILING_TOOL" in self.path:
            return self.reply({"data": {}, "successful": False, "log_id": "l1",
                               "error": f"repository not found (key {key})"})
        return self.reply({"data": {"starred": body["arguments"], "echo": key},
                           "successful": True, "error": None, "log_id": "l2"})


@pytest.fixture
def backend(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[str, list[dict[str, Any]]]]:
    monkeypatch.delenv("COMPOSIO_API_KEY", raising=False)
    monkeypatch.delenv("COMPOSIO_ENDPOINT", raising=False)
    handler = type("OwnBackend", (Backend,), {"got": []})
    with serving(handler) as base:
        yield base, handler.got


@pytest.fixture
def gw(db_url: str, backend: tuple[str, list[Any]]) -> Iterator[Gateway]:
    store = Store.open(db_url)
    g = Gateway(store, secrets=EmbeddedSecretsStore(store.blobs, os.urandom(32)),
                factory=ProviderFactory(builtins=BUILTINS))
    g.registry.register(definition("composio", policy=LOOPBACK, implementation={
        "builtin_key": "composio", "endpoint": backend[0], "toolkit_versions": VERSIONS}))
    g.registry.register(definition("composio", name="composio_unpinned", policy=LOOPBACK,
                                   implementation={"builtin_key": "composio",
                                                   "endpoint": backend[0]}))
    g.registry.put_profile(Profile(name="p", autonomy=Autonomy(3), activations=(
        Activation(tool="composio"), Activation(tool="composio_unpinned"))), replace=True)
    g.registry.put_agent(Agent(name="bot", profile="p"), replace=True)
    yield g
    g.close()


def _put(gw: Gateway, value: str) -> None:
    assert gw.credentials is not None
    gw.credentials.put("default", "composio", "api_key", value)
    gw.refresh_secrets()


def _run(gw: Gateway, tool: str = "GITHUB_STAR_A_REPO", name: str = "composio",
         **extra: Any) -> CallResult:
    return gw.call_sync(name, agent="bot", arguments={
        "tool": tool, "arguments": {"owner": "acme", "repo": "toolkeeper"}, **extra})


def test_a_tool_runs_with_the_tenants_credential_which_never_shows(
        gw: Gateway, backend: tuple[str, list[dict[str, Any]]]) -> None:
    _put(gw, json.dumps({"api_key": TENANT_KEY}))
    res = _run(gw)
    assert res.ok, (res.reason, res.message)
    assert res.output["successful"] and res.output["tool"] == "GITHUB_STAR_A_REPO"
    assert res.output["data"]["starred"] == {"owner": "acme", "repo": "toolkeeper"}
    got = backend[1]
    assert [g["method"] for g in got] == ["GET", "POST"]  # the schema, then the run
    assert got[1]["path"] == "/api/v3.1/tools/execute/GITHUB_STAR_A_REPO"
    assert got[1]["body"]["user_id"] == "default" and got[1]["body"]["version"] == "20251201_00"
    assert all(g["key"] == TENANT_KEY for g in got)
    gw.flush()
    shown = json.dumps(res.to_dict(), default=str) + json.dumps(
        [e.to_dict() for e in gw.store.audit.list("default", limit=100)], default=str)
    assert TENANT_KEY not in shown and "***" in shown  # the upstream's echo is masked


def test_the_policy_bounds_slugs_and_users_before_anything_is_sent(
        gw: Gateway, backend: tuple[str, list[dict[str, Any]]]) -> None:
    _put(gw, TENANT_KEY)
    other = _run(gw, tool="GMAIL_SEND_EMAIL")
    assert other.reason == "argument_not_allowed", other
    user = _run(gw, user_id="someone-else")
    assert user.reason == "argument_not_allowed", user
    unpinned = _run(gw, name="composio_unpinned")
    assert unpinned.reason == "config_invalid" and "toolkit_versions" in (unpinned.message or "")
    assert backend[1] == []


def test_no_key_is_credential_missing_and_the_environment_key_is_the_last_place(
        gw: Gateway, backend: tuple[str, list[dict[str, Any]]],
        monkeypatch: pytest.MonkeyPatch) -> None:
    missing = _run(gw)
    assert missing.reason == "credential_missing" and "composio/api_key" in (
        missing.message or "")
    monkeypatch.setenv("COMPOSIO_API_KEY", ENV_KEY)
    monkeypatch.setenv("COMPOSIO_ENDPOINT", backend[0])
    assert _run(gw).ok and backend[1][-1]["key"] == ENV_KEY
    assert backend[1][-1]["body"]["user_id"] == "default"  # the calling tenant itself


def test_with_the_operators_key_a_tenant_runs_as_itself_only(
        gw: Gateway, backend: tuple[str, list[dict[str, Any]]],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The operator's key reaches every user of the operator's Composio project: a tool
    naming another user (a tenant's own tool may) is refused with it, not with a tenant's
    own key."""
    monkeypatch.setenv("COMPOSIO_API_KEY", ENV_KEY)
    monkeypatch.setenv("COMPOSIO_ENDPOINT", backend[0])
    gw.registry.register(definition("composio", name="composio_as_acme", policy={
        **LOOPBACK, "user_id": "acme"}, implementation={
        "builtin_key": "composio", "toolkit_versions": VERSIONS}))
    gw.registry.put_profile(Profile(name="p", autonomy=Autonomy(3), activations=(
        Activation(tool="composio_as_acme"),)), replace=True)
    refused = _run(gw, name="composio_as_acme")
    assert refused.reason == "argument_not_allowed" and backend[1] == []
    _put(gw, json.dumps({"api_key": TENANT_KEY, "endpoint": backend[0]}))
    assert _run(gw, name="composio_as_acme").ok  # the tenant's own key: its own project
    assert backend[1][-1]["body"]["user_id"] == "acme"


def test_composios_verdicts_become_reasons(
        gw: Gateway, backend: tuple[str, list[dict[str, Any]]]) -> None:
    _put(gw, TENANT_KEY)
    failed = _run(gw, tool="FAILING_TOOL")
    assert failed.reason == "upstream_error" and "repository not found" in (failed.message or "")
    assert TENANT_KEY not in (failed.message or "")
    _put(gw, REJECTED)
    rejected = _run(gw)
    assert rejected.reason == "credential_rejected", (rejected.reason, rejected.message)

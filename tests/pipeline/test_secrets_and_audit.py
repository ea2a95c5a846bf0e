"""SPEC §8: secret values never reach audit, logs or results; the audit chain detects
edited and deleted events (SQLite and PostgreSQL)."""

from __future__ import annotations

import base64
import logging
from typing import Any

import pytest
from sqlalchemy import text

from tests.pipeline.gw_helpers import build_gateway
from tests.secrets.backends import Backend
from toolkeeper import SideEffect, ToolContext, ToolError, tool
from toolkeeper.secrets import SecretsStore
from toolkeeper.secrets.env import EnvSecretsStore

SECRET = "s3cr3t-Value-7f2a9c"


@tool(side_effect=SideEffect.IRREVERSIBLE)
async def leaky(mode: str, note: str, ctx: ToolContext) -> Any:
    """Resolves a secret at use and then leaks it in every way a tool can."""
    value = await ctx.secret("token", "vault")
    if mode == "error":
        raise ToolError("upstream_error", f"auth failed with {value}")
    if mode == "crash":
        raise RuntimeError(f"crashed holding {value}")
    return {"echo": value, "nested": [f"Bearer {value}"], "b64": base64.b64encode(
        value.encode()).decode(), "note": note}


def _leaky_gateway(db_url: str, secrets: SecretsStore) -> Any:
    from toolkeeper.pipeline.runtime import Settings
    from toolkeeper.providers.factory import ProviderFactory
    from toolkeeper.store import Store

    setup = build_gateway(db_url, tools=[leaky], autonomy=0)  # medium @0: confirm
    setup.close()
    from toolkeeper import Gateway

    return Gateway(Store.open(db_url), settings=Settings(), secrets=secrets,
                   factory=ProviderFactory(natives={"test_secrets_and_audit:leaky": leaky}))


@pytest.fixture
def gw(db_url: str) -> Any:
    g = _leaky_gateway(db_url, EnvSecretsStore(
        environ={"TOOLKEEPER_SECRET_VAULT__TOKEN": SECRET}))
    yield g
    g.close()


@pytest.fixture
def secret_gw(db_url: str, secrets_backend: Backend) -> Any:
    """The leaky tool's gateway over each secrets backend (env, embedded, Vault)."""
    secrets_backend.put("vault", "token", SECRET)
    g = _leaky_gateway(db_url, secrets_backend.store)
    yield g
    g.close()


def _everything_text(gw: Any) -> str:
    gw.flush()
    with gw.store.db.engine.connect() as conn:
        parts = []
        for table in ("audit_events", "outcomes", "approvals", "side_effects"):
            parts += [repr(tuple(r)) for r in conn.execute(text(f"SELECT * FROM {table}"))]
    return "\n".join(parts)


def test_a_planted_secret_never_leaks(secret_gw: Any, caplog: Any) -> None:
    from toolkeeper import Principal, Role

    gw = secret_gw
    caplog.set_level(logging.DEBUG)
    approver = Principal(name="alice", tenant_id="default", roles=frozenset({Role.APPROVER}))
    results = []
    for mode in ("ok", "error", "crash"):
        args = {"mode": mode, "note": f"agent pasted {SECRET} here"}
        ask = gw.call_sync("leaky", arguments=args, agent="bot")
        results.append(ask)
        gw.approvals.confirm(ask.approval_id, approver)
        results.append(gw.call_sync("leaky", arguments=args, agent="bot",
                                    approval_id=ask.approval_id))
    assert results[1].ok and results[1].output["echo"] == "***"
    assert results[3].reason == "upstream_error" and results[5].reason == "tool_error"
    blob = repr([r.to_dict() for r in results]) + _everything_text(gw) + caplog.text
    assert SECRET not in blob
    assert base64.b64encode(SECRET.encode()).decode() not in blob
    assert "***" in blob


def test_audit_verify_detects_an_edited_event(gw: Any) -> None:
    for i in range(3):
        gw.call_sync("leaky", arguments={"mode": "ok", "note": str(i)}, agent="bot")
    gw.flush()
    assert gw.store.audit.verify("default").ok
    with gw.store.db.engine.begin() as conn:
        conn.execute(text("UPDATE audit_events SET reason = 'forged' WHERE seq = 2"))
    report = gw.store.audit.verify("default")
    assert not report.ok and any("seq 2" in p for p in report.problems)


def test_audit_verify_detects_a_deleted_event(gw: Any) -> None:
    for i in range(3):
        gw.call_sync("leaky", arguments={"mode": "ok", "note": str(i)}, agent="bot")
    gw.flush()
    with gw.store.db.engine.begin() as conn:
        conn.execute(text("DELETE FROM audit_events WHERE seq = 2"))
    assert not gw.store.audit.verify("default").ok


def test_audit_verify_detects_a_truncated_chain(gw: Any) -> None:
    for i in range(3):
        gw.call_sync("leaky", arguments={"mode": "ok", "note": str(i)}, agent="bot")
    gw.flush()
    with gw.store.db.engine.begin() as conn:
        last = conn.execute(text("SELECT max(seq) FROM audit_events WHERE tenant_key = "
                                 "'default'")).scalar()
        conn.execute(text(f"DELETE FROM audit_events WHERE seq = {last}"))
    assert not gw.store.audit.verify("default").ok


def test_arguments_are_audited_only_when_opted_in_and_redacted(tmp_path: Any) -> None:
    from toolkeeper.pipeline.runtime import Settings

    for opted in (False, True):
        url = f"sqlite:///{tmp_path}/opt-{opted}.db"
        build_gateway(url, tools=[leaky], autonomy=3).close()
        from toolkeeper import Gateway
        from toolkeeper.providers.factory import ProviderFactory
        from toolkeeper.store import Store

        secrets = EnvSecretsStore(environ={"TOOLKEEPER_SECRET_VAULT__TOKEN": SECRET})
        with Gateway(Store.open(url), settings=Settings(audit_arguments=opted), secrets=secrets,
                     factory=ProviderFactory(natives={"test_secrets_and_audit:leaky": leaky})
                     ) as g:
            res = g.call_sync("leaky", arguments={"mode": "ok", "note": f"x {SECRET}"},
                              agent="bot")
            g.flush()
            data = [e.data for e in g.store.audit.list("default", call_id=res.call_id)]
        assert all("args_digest" in d for d in data)
        if opted:
            assert data[-1]["arguments"] == {"mode": "ok", "note": "x ***"}
        else:
            assert all("arguments" not in d for d in data)


def test_batched_audit_durability_still_records_every_event(tmp_path: Any) -> None:
    from tests.pipeline.sample_tools import charge

    url = f"sqlite:///{tmp_path}/batched.db"
    gw = build_gateway(url, tools=[charge], audit_durability="batched")
    try:
        res = gw.call_sync("charge", arguments={"invoice": "a", "amount": 1}, agent="bot",
                           idempotency_key="k")
        gw.flush()
        types = [e.type for e in gw.store.audit.list("default", call_id=res.call_id)]
        assert types == ["call.attempted", "call.succeeded", "side_effect.recorded"]
        assert gw.store.audit.verify("default").ok
    finally:
        gw.close()


def test_a_tenants_credential_is_not_there_for_another_tenant(tmp_path: Any) -> None:
    from toolkeeper import Activation, Agent, Autonomy, Gateway, Profile
    from toolkeeper.providers.factory import ProviderFactory
    from toolkeeper.secrets.embedded import EmbeddedSecretsStore
    from toolkeeper.store import Store

    store = Store.open(f"sqlite:///{tmp_path}/tenants.db")
    secrets = EmbeddedSecretsStore(store.blobs, b"t" * 32)
    gw = Gateway(store, secrets=secrets,
                 factory=ProviderFactory(natives={"test_secrets_and_audit:leaky": leaky}))
    try:
        assert gw.credentials is not None
        gw.credentials.put("acme", "vault", "token", SECRET)
        gw.refresh_secrets()
        gw.registry.register(leaky)  # a global tool, callable from both tenants
        for tenant in ("acme", "globex"):
            gw.registry.put_profile(Profile(name="p", tenant_id=tenant, autonomy=Autonomy(3),
                                            activations=(Activation(tool="leaky"),)))
            gw.registry.put_agent(Agent(name="bot", profile="p", tenant_id=tenant))
        own = gw.call_sync("leaky", arguments={"mode": "ok", "note": ""}, agent="bot",
                           tenant_id="acme")
        other = gw.call_sync("leaky", arguments={"mode": "ok", "note": ""}, agent="bot",
                             tenant_id="globex")
        assert own.ok and own.output["echo"] == "***"
        assert other.reason == "secret_not_found"
    finally:
        gw.close()

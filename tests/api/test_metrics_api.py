"""SPEC §9 metrics over REST, per tenant (SPEC §6 tenancy, §8 least privilege): a tenant's
admin or operator reads only its own series; the system tenant's admins and operators read
every tenant's; approvers and agents read none."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.samples import Sample

from tests.api.exec_fixtures import api_for
from tests.support.rest import RestClient, assert_error
from toolkeeper import Activation, Profile, Risk, SideEffect, tool

SPEC_METRICS = ("tool_execution_duration_seconds", "tool_execution_total",
                "tool_idempotency_cache_hits_total", "tool_side_effect_total",
                "tool_gate_decisions_total", "tool_denials_total", "approvals_pending")
INVOICE = {"invoice": "inv-9", "amount": 70}


@tool(side_effect=SideEffect.IRREVERSIBLE, risk=Risk.LOW)
def acme_ledger(entry: str) -> str:
    """Book an entry in acme's ledger (a tool only tenant acme has)."""
    return entry


@pytest.fixture
def api(db_url: str) -> Iterator[RestClient]:
    with api_for(db_url) as a:
        gw = a.gw
        gw.registry.register(acme_ledger, tenant_id="acme")
        gw.registry.put_profile(Profile(name="acme", tenant_id="acme", autonomy=3,
                                        scopes=("bank",),
                                        activations=(Activation(tool="acme_ledger"),)),
                                replace=True)
        for who, tenant, role in (("sys_admin", "system", "admin"),
                                  ("sys_operator", "system", "operator")):
            a.tokens[who] = gw.store.tokens.create(tenant_id=tenant, role=role)[1]
        a.tokens["acme_operator"] = gw.store.tokens.create(tenant_id="acme",
                                                           role="operator")[1]
        _calls(a)
        yield a


def _calls(api: RestClient) -> None:
    """Both tenants call: side effects, denials, gate decisions, a cache hit, an approval."""
    assert api.execute("bot", "add", {"a": 1, "b": 2}).json()["status"] == "succeeded"
    assert api.execute("bot", "charge", INVOICE).json()["status"] == "succeeded"
    assert api.execute("intern", "bank", INVOICE, action="pay").json()["status"] \
        == "approval_required"
    for _ in range(2):
        done = api.execute("acme_bot", "acme_ledger", {"entry": "e1"}, idempotency_key="k1")
        assert done.json()["status"] == "succeeded", done.text
    bad = api.execute("acme_bot", "acme_ledger", {"entry": 1})
    assert bad.status_code == 422, bad.text  # counted as a denial (invalid_arguments)


def _scrape(api: RestClient, who: str) -> tuple[str, dict[str, list[Sample]]]:
    resp = api.client.get("/metrics", headers=api.auth(who))
    assert resp.status_code == 200, resp.text
    assert resp.headers["content-type"].startswith("text/plain")
    families = {f.name: f.samples for f in text_string_to_metric_families(resp.text)}
    return resp.text, families


def _tenants(families: dict[str, list[Sample]]) -> set[str | None]:
    return {s.labels.get("tenant") for samples in families.values() for s in samples}


def _tools(families: dict[str, list[Sample]]) -> set[str]:
    return {s.labels["tool"] for samples in families.values() for s in samples
            if "tool" in s.labels}


@pytest.mark.parametrize("who", ["acme_admin", "acme_operator"])
def test_a_tenant_token_sees_only_its_own_series(api: RestClient, who: str) -> None:
    text, families = _scrape(api, who)
    assert _tenants(families) == {"acme"}  # every sample carries the caller's tenant
    assert _tools(families) == {"acme_ledger"}
    for name in ("add", "charge", "bank"):
        assert f'"{name}"' not in text
    assert 'tenant="default"' not in text
    for name in ("tool_side_effect", "tool_gate_decisions", "tool_denials",
                 "approvals_pending", "tool_idempotency_cache_hits"):  # counters: no _total
        assert any(s.labels["tenant"] == "acme" for s in families[name]), name
    assert [s.value for s in families["approvals_pending"]] == [0.0]


def test_the_other_tenant_sees_its_series_and_none_of_acme(api: RestClient) -> None:
    text, families = _scrape(api, "admin")
    assert _tenants(families) == {"default"}
    assert {"add", "charge", "bank"} <= _tools(families)
    assert "acme" not in text
    assert [s.value for s in families["approvals_pending"]] == [1.0]


@pytest.mark.parametrize("who", ["sys_admin", "sys_operator"])
def test_the_system_operator_sees_every_tenant(api: RestClient, who: str) -> None:
    _text, families = _scrape(api, who)
    assert {"default", "acme"} <= _tenants(families)  # type: ignore[operator]
    assert {"acme_ledger", "add", "charge", "bank"} <= _tools(families)
    pending = {s.labels["tenant"]: s.value for s in families["approvals_pending"]}
    assert pending.get("default") == 1.0


@pytest.mark.parametrize("who", ["admin", "acme_admin", "sys_admin"])
def test_every_view_is_valid_exposition_with_every_spec_family(api: RestClient, who: str) -> None:
    text, families = _scrape(api, who)
    for name in SPEC_METRICS:
        family = name.removesuffix("_total")
        assert f"# HELP {name} " in text and f"# TYPE {family}" in text, name
    # each histogram series keeps its buckets, +Inf bucket, sum and count together
    series: dict[tuple[tuple[str, str], ...], set[str]] = {}
    for s in families["tool_execution_duration_seconds"]:
        key = tuple(sorted((k, v) for k, v in s.labels.items() if k != "le"))
        kind = "+Inf" if s.labels.get("le") == "+Inf" else s.name.rsplit("_", 1)[-1]
        series.setdefault(key, set()).add(kind)
    assert series and all(kinds == {"bucket", "+Inf", "sum", "count"}
                           for kinds in series.values()), series


@pytest.mark.parametrize("who", ["bot", "acme_bot", "approver"])
def test_agents_and_approvers_cannot_read_metrics(api: RestClient, who: str) -> None:
    assert_error(api.client.get("/metrics", headers=api.auth(who)), 403, "forbidden")

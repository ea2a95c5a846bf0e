"""Built-in ``agent_call`` and the ``agent_call`` implementation type (SPEC §11) through the
Gateway on SQLite and PostgreSQL: happy per transport (plain HTTP JSON and a real a2a-sdk
server), deny (other tenant, unpublished, cycle, depth), validation and limits."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.builtins.agent_servers import Got, a2a_agent, http_agent
from toolkeeper import Activation, Agent, Gateway, Profile
from toolkeeper.bounds import TenantBounds
from toolkeeper.builtins import BUILTINS, definition
from toolkeeper.errors import OperationRefused
from toolkeeper.model.call import CallResult
from toolkeeper.model.enums import CallStatus
from toolkeeper.model.profile import AgentEndpoint, agent_id
from toolkeeper.pipeline.runtime import Settings
from toolkeeper.providers.factory import ProviderFactory
from toolkeeper.store import Store

LOOPBACK = ("127.0.0.1/32",)


def _endpoint(url: str, transport: str = "http", status: str = "published",
              **fields: Any) -> AgentEndpoint:
    return AgentEndpoint.model_validate({"transport": transport, "url": url, "status": status,
                                         "allowed_networks": LOOPBACK, **fields})


@pytest.fixture
def callee() -> Iterator[tuple[str, Got]]:
    with http_agent() as found:
        yield found


@pytest.fixture
def gw(db_url: str, callee: tuple[str, Got]) -> Iterator[Gateway]:
    """Tenant ``default``: ``caller`` (agent_call enabled, max_depth 3), ``helper``
    (published endpoint), ``drafty`` (draft endpoint), ``silent`` (none); tenant
    ``other``: ``stranger`` with a published endpoint."""
    url = callee[0]
    gateway = Gateway(Store.open(db_url), factory=ProviderFactory(builtins=BUILTINS),
                      settings=Settings(tenant_bounds=TenantBounds()))
    gateway.registry.register(definition("agent_call"))
    for tenant in ("default", "other"):
        gateway.registry.put_profile(Profile(
            name="callers", tenant_id=tenant, autonomy=3,
            activations=(Activation(tool="agent_call", policy={"max_depth": 3}),)), replace=True)
    agents = [Agent(name="caller", profile="callers"),
              Agent(name="helper", profile="callers", endpoint=_endpoint(url + "/echo")),
              Agent(name="drafty", profile="callers",
                    endpoint=_endpoint(url + "/echo", status="draft")),
              Agent(name="silent", profile="callers"),
              Agent(name="stranger", profile="callers", tenant_id="other",
                    endpoint=_endpoint(url + "/echo"))]
    for agent in agents:
        gateway.registry.put_agent(agent, replace=True)
    yield gateway
    gateway.close()


def _set_endpoint(gw: Gateway, name: str, endpoint: AgentEndpoint) -> None:
    gw.registry.put_agent(Agent(name=name, profile="callers", endpoint=endpoint), replace=True)


async def _call(gw: Gateway, arguments: dict[str, Any], agent: str = "caller",
                **fields: Any) -> CallResult:
    return await gw.call("agent_call", arguments=arguments, agent=agent, **fields)


async def test_http_agent_answers_with_the_spec_shape(
        gw: Gateway, callee: tuple[str, Got]) -> None:
    res = await _call(gw, {"target_agent_slug": "helper", "input": "hi",
                           "context": {"k": 1}})
    assert res.status is CallStatus.SUCCEEDED, res.message
    assert res.output == {"mode": "sync", "target_agent_id": agent_id("default", "helper"),
                          "target_agent_slug": "helper", "run_id": "r-1",
                          "status": "completed", "output": "echo:hi",
                          "context": {"seen": {"k": 1}}, "error": None}
    body, headers = callee[1].bodies[0], callee[1].headers[0]
    assert body == {"input": "hi", "messages": None, "context": {"k": 1}, "chain": ["caller"],
                    "depth": 1}
    assert headers["Toolkeeper-Agent-Chain"] == "caller"


async def test_target_by_id_and_the_text_and_messages_aliases(
        gw: Gateway, callee: tuple[str, Got]) -> None:
    res = await _call(gw, {"target_agent_id": agent_id("default", "helper"), "text": "yo"})
    assert res.output["output"] == "echo:yo"
    res = await _call(gw, {"target_agent_slug": "helper",
                           "messages": [{"role": "user", "content": "m"}]})
    assert res.status is CallStatus.SUCCEEDED
    assert callee[1].bodies[-1]["messages"] == [{"role": "user", "content": "m"}]


async def test_a2a_agent_through_the_a2a_sdk(gw: Gateway) -> None:
    with a2a_agent() as (url, got):
        _set_endpoint(gw, "helper", _endpoint(url, "a2a"))
        res = await _call(gw, {"target_agent_slug": "helper", "input": "hello",
                               "context": {"ticket": 7}}, chain=["origin"])
        assert res.status is CallStatus.SUCCEEDED, res.message
        assert res.output["status"] == "completed"
        assert res.output["output"] == "echo:hello"
        assert res.output["target_agent_slug"] == "helper" and res.output["run_id"]
        assert got.bodies[0] == {"text": "hello", "metadata": {
            "toolkeeper_chain": ["origin", "caller"], "toolkeeper_depth": 2.0,
            "context": {"ticket": 7.0}}}
        failed = await _call(gw, {"target_agent_slug": "helper", "input": "fail"})
    assert failed.status is CallStatus.SUCCEEDED
    assert failed.output["status"] == "failed"
    assert failed.output["error"] == "the agent broke"


@pytest.mark.parametrize("target", ["drafty", "silent", "stranger", "nobody"])
async def test_unpublished_unknown_and_other_tenants_agents_are_one_answer(
        gw: Gateway, callee: tuple[str, Got], target: str) -> None:
    res = await _call(gw, {"target_agent_slug": target, "input": "x"})
    assert res.status is CallStatus.DENIED
    assert res.reason == "agent_not_found"
    assert target not in (res.message or "")
    by_id = await _call(gw, {"target_agent_id": agent_id("other", "stranger"), "input": "x"})
    assert by_id.reason == "agent_not_found" and by_id.message == res.message
    assert callee[1].bodies == []


async def test_a_cycle_stops_before_the_request(gw: Gateway, callee: tuple[str, Got]) -> None:
    res = await _call(gw, {"target_agent_slug": "helper", "input": "x"},
                      chain=["helper", "middle"])
    assert res.status is CallStatus.DENIED and res.reason == "agent_call_cycle"
    again = await _call(gw, {"target_agent_slug": "helper", "input": "x"},
                        chain=["caller"])
    assert again.reason == "agent_call_cycle"
    assert callee[1].bodies == []


async def test_a_chain_deeper_than_max_depth_stops(
        gw: Gateway, callee: tuple[str, Got]) -> None:
    ok = await _call(gw, {"target_agent_slug": "helper", "input": "x"}, chain=["a", "b"])
    assert ok.status is CallStatus.SUCCEEDED
    assert callee[1].bodies[0]["chain"] == ["a", "b", "caller"]
    res = await _call(gw, {"target_agent_slug": "helper", "input": "x"},
                      chain=["a", "b", "c"])
    assert res.status is CallStatus.DENIED and res.reason == "agent_call_depth"
    assert len(callee[1].bodies) == 1


@pytest.mark.parametrize("arguments", [
    {"input": "no target"},
    {"target_agent_slug": "helper", "target_agent_id": "x", "input": "both"},
    {"target_agent_slug": "helper", "input": "a", "text": "b"},
    {"target_agent_slug": "helper", "context": {"only": "context"}},
    {"target_agent_slug": "helper", "input": "x", "extra": 1},
])
async def test_bad_arguments_are_refused_before_anything_is_sent(
        gw: Gateway, callee: tuple[str, Got], arguments: dict[str, Any]) -> None:
    res = await _call(gw, arguments)
    assert res.reason == "invalid_arguments", res.message
    assert callee[1].bodies == []


async def test_callee_failures(gw: Gateway, callee: tuple[str, Got]) -> None:
    url = callee[0]
    _set_endpoint(gw, "helper", _endpoint(url + "/failed"))
    failed = await _call(gw, {"target_agent_slug": "helper", "input": "x"})
    assert failed.status is CallStatus.SUCCEEDED
    assert (failed.output["status"], failed.output["error"]) == ("failed", "it broke")
    _set_endpoint(gw, "helper", _endpoint(url + "/500"))
    down = await _call(gw, {"target_agent_slug": "helper", "input": "x"})
    # the agent may have acted before it failed: the outcome is unknown, for a person to
    # resolve (an irreversible call is never retried)
    assert down.status is CallStatus.UNKNOWN and down.reason == "upstream_error"


async def test_limits_timeout_and_reply_size(gw: Gateway, callee: tuple[str, Got]) -> None:
    url = callee[0]
    _set_endpoint(gw, "helper", _endpoint(url + "/slow", timeout_s=0.3))
    slow = await _call(gw, {"target_agent_slug": "helper", "input": "x"})
    callee[1].release.set()
    assert slow.reason == "timeout"
    _set_endpoint(gw, "helper", _endpoint(url + "/big"))
    gw.registry.put_profile(Profile(name="callers", autonomy=3, activations=(
        Activation(tool="agent_call", policy={"max_response_bytes": 1000}),)), replace=True)
    big = await _call(gw, {"target_agent_slug": "helper", "input": "x"})
    assert big.reason == "output_too_large"


async def test_policy_allow_list_and_ssrf_guard(gw: Gateway, callee: tuple[str, Got]) -> None:
    gw.registry.put_profile(Profile(name="callers", autonomy=3, activations=(
        Activation(tool="agent_call", policy={"allowed_agents": ["someone-else"]}),)), replace=True)
    res = await _call(gw, {"target_agent_slug": "helper", "input": "x"})
    assert res.reason == "agent_not_allowed"
    gw.registry.put_profile(Profile(name="callers", autonomy=3, activations=(
        Activation(tool="agent_call"),)), replace=True)
    _set_endpoint(gw, "helper", _endpoint(callee[0] + "/echo", allowed_networks=()))
    guarded = await _call(gw, {"target_agent_slug": "helper", "input": "x"})
    assert guarded.reason == "address_not_allowed"
    assert callee[1].bodies == []


def test_endpoint_headers_hold_secret_references_only(gw: Gateway, callee: tuple[str, Got]
                                                      ) -> None:
    with pytest.raises(OperationRefused) as refused:
        _set_endpoint(gw, "helper", _endpoint(callee[0], headers={"Authorization": "abc"}))
    assert refused.value.reason == "secret_literal_refused"
    _set_endpoint(gw, "helper", _endpoint(callee[0], headers={
        "Authorization": "Bearer ${secret:bots/token}"}))


async def test_agent_call_tool_with_a_fixed_target(gw: Gateway, callee: tuple[str, Got]
                                                   ) -> None:
    gw.registry.register(definition(
        "agent_call", name="ask_helper", is_system=False, builtin_key=None,
        implementation_type="agent_call",
        implementation={"target_agent_slug": "helper", "timeout_s": 5}), tenant_id="default")
    gw.registry.put_profile(Profile(name="callers", autonomy=3, activations=(
        Activation(tool="ask_helper"),)), replace=True)
    res = await gw.call("ask_helper", arguments={"input": "fixed"}, agent="caller")
    assert res.status is CallStatus.SUCCEEDED, res.message
    assert res.output["target_agent_slug"] == "helper"
    assert res.output["output"] == "echo:fixed"
    other = await gw.call("ask_helper", arguments={"input": "x", "target_agent_slug":
                                                   "drafty"}, agent="caller")
    assert other.reason == "invalid_arguments"


async def test_a_tenant_endpoint_beyond_todays_ceiling_is_denied_at_call_time(
        gw: Gateway, callee: tuple[str, Got]) -> None:
    """Written over REST while the operator allowed loopback; the ceiling is empty now."""
    _set_endpoint(gw, "helper", _endpoint(callee[0] + "/echo", origin="api"))
    res = await _call(gw, {"target_agent_slug": "helper", "input": "x"})
    assert res.status is CallStatus.DENIED and res.reason == "policy_exceeds_bounds"
    assert callee[1].bodies == []


async def test_a_supervised_agent_gets_a_preview_and_nothing_is_sent(
        gw: Gateway, callee: tuple[str, Got]) -> None:
    gw.registry.put_profile(Profile(name="callers", autonomy=1, activations=(
        Activation(tool="agent_call"),)), replace=True)
    res = await _call(gw, {"target_agent_slug": "helper", "input": "x"})
    assert res.status is CallStatus.PREVIEW_REQUIRED, res
    assert res.preview["data"]["target_agent_slug"] == "helper"
    assert res.preview["data"]["chain"] == ["caller"]
    assert callee[1].bodies == []


async def test_a2a_reply_size_cap_and_dead_endpoint(gw: Gateway) -> None:
    gw.registry.put_profile(Profile(name="callers", autonomy=3, activations=(
        Activation(tool="agent_call", policy={"max_response_bytes": 20}),)), replace=True)
    with a2a_agent() as (url, got):
        _set_endpoint(gw, "helper", _endpoint(url, "a2a"))
        big = await _call(gw, {"target_agent_slug": "helper", "input": "x" * 100})
        assert big.reason == "output_too_large" and len(got.bodies) == 1
    dead = await _call(gw, {"target_agent_slug": "helper", "input": "x"})
    # nothing listens any more: it cannot have run, so the call failed (not unknown)
    assert dead.status is CallStatus.FAILED and dead.reason == "upstream_error"

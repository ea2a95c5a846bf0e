"""In-band questions of ``tools/call`` with the official SDK client: a ``confirm`` gate as a
2026-07-28 ``InputRequiredResult`` whose ``requestState`` is toolkeeper's sealed, bound,
single-use envelope (every refusal also shown to stop refusing when its rule is broken),
and an upstream tool's own questions (elicitation, sampling, two rounds) relayed to the
agent in its era, or refused with -32021 when it cannot answer them."""

from __future__ import annotations

import base64
import os
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import mcp_types as types
import orjson
import pytest
import uvicorn
import yaml
from mcp.shared.exceptions import MCPError
from mcp_fixtures import McpServer, _free_port, confirm_with, connect, serving

from peers import entry, node
from tests.support.waiting import wait_until
from toolkeeper import Agent, Gateway
from toolkeeper.api import ApiSettings, create_app
from toolkeeper.bench.procs import listening
from toolkeeper.mcp import input_required, request_state
from toolkeeper.mcp.request_state import RequestStates
from toolkeeper.server import mcp_hosts
from toolkeeper.store.outcomes import OutcomeRepo
from toolkeeper.store.request_states import RequestStateRepo

ASKING = Path(__file__).resolve().parent / "asking_fixture.py"
MODERN = "2026-07-28"
YES = types.ElicitResult(action="accept", content={"confirm": True})


@pytest.fixture(scope="module")
def srv(tmp_path_factory: pytest.TempPathFactory) -> Iterator[McpServer]:
    tmp = tmp_path_factory.mktemp("mrtr")
    with serving(f"sqlite:///{tmp}/tk.db") as s:
        # a second agent on sup's profile, to replay sup's state as someone else
        s.gw.registry.put_agent(Agent(name="sup2", profile="supervised"), replace=True)
        s.tokens["sup2"] = s.gw.store.tokens.create(tenant_id="default", role="agent",
                                                    agent="sup2")[1]
        yield s


async def _first(c: Any, args: dict[str, Any]) -> types.InputRequiredResult:
    """Round one, driven by hand: the confirmation's InputRequiredResult."""
    r = await c.session.call_tool("pay", args, allow_input_required=True)
    assert isinstance(r, types.InputRequiredResult), r
    return r


async def _retry(c: Any, args: dict[str, Any], state: str) -> Any:
    return await c.session.call_tool("pay", args, input_responses={"confirm": YES},
                                     request_state=state, allow_input_required=True)


async def _refused(c: Any, args: dict[str, Any], state: str) -> str | None:
    """The ``detail`` of a refused state, ``None`` if the retry was not refused."""
    try:
        await _retry(c, args, state)
    except MCPError as exc:
        assert exc.code == -32602, exc
        data = exc.error.data or {}
        assert data["reason"] == "request_state_invalid", data
        return str(data["detail"])
    return None


def _paid(srv: McpServer, invoice: str) -> int:
    effects = srv.gw.store.outcomes.side_effects("default")
    return sum(1 for e in effects if (e.arguments or {}).get("invoice") == invoice)


def _claims(state: str) -> dict[str, Any]:
    body = state.removeprefix("tk1.").split(".")[0]
    return dict(orjson.loads(base64.urlsafe_b64decode(body + "=" * (-len(body) % 4))))


def _forged(state: str, **changes: Any) -> str:
    """``state`` with its claims changed and its old tag kept."""
    claims = {**_claims(state), **changes}
    body = base64.urlsafe_b64encode(orjson.dumps(claims)).decode().rstrip("=")
    return f"tk1.{body}.{state.split('.')[2]}"


# -- toolkeeper's own confirmation ------------------------------------------------------

async def test_a_confirmation_is_asked_as_input_required_and_the_call_runs_once(
        srv: McpServer) -> None:
    args = {"invoice": "inv-mrtr-once", "amount": 3}
    async with connect(srv, "sup", MODERN, elicitation_callback=confirm_with("accept")) as c:
        first = await _first(c, args)
        ask = first.input_requests["confirm"]
        assert isinstance(ask, types.ElicitRequest) and "inv-mrtr-once" in ask.params.message
        state = first.request_state
        assert state is not None and state.startswith("tk1.")
        claims = _claims(state)
        approval = srv.gw.approvals.get(claims["x"], "default")
        assert claims["e"] <= approval.expires_at.timestamp() + 0.001  # no longer than it
        done = await _retry(c, args, state)
        assert isinstance(done, types.CallToolResult) and not done.is_error, done
        assert done.structured_content == {"paid": "inv-mrtr-once", "amount": 3}
        # the SDK's own loop (callback answers, client retries) gets the same
        args2 = {"invoice": "inv-mrtr-loop", "amount": 4}
        looped = await c.call_tool("pay", args2)
        assert not looped.is_error and looped.structured_content["paid"] == "inv-mrtr-loop"
    assert (_paid(srv, "inv-mrtr-once"), _paid(srv, "inv-mrtr-loop")) == (1, 1)


async def test_a_declined_confirmation_denies_the_call(srv: McpServer) -> None:
    args = {"invoice": "inv-mrtr-no", "amount": 3}
    async with connect(srv, "sup", MODERN, elicitation_callback=confirm_with("decline")) as c:
        r = await c.call_tool("pay", args)
    assert r.is_error and r.structured_content["reason"] == "approval_denied"
    assert _paid(srv, "inv-mrtr-no") == 0


async def _tampered(srv: McpServer, tag: str) -> tuple[str | None, str | None]:
    """What a state with a longer life (its tag kept) and one with a changed tag (the
    conformance suite's tampering) are refused as."""
    args = {"invoice": f"inv-mrtr-tamper-{tag}", "amount": 3}
    async with connect(srv, "sup", MODERN, elicitation_callback=confirm_with("accept")) as c:
        state = str((await _first(c, args)).request_state)
        later = _claims(state)["e"] + 3600.0
        forged = await _refused(c, args, _forged(state, e=later))
        return forged, await _refused(c, args, state + "-TAMPERED")


async def test_a_tampered_state_is_refused(srv: McpServer) -> None:
    assert await _tampered(srv, "ok") == ("tampered", "tampered")


async def test_without_the_integrity_check_a_tampered_state_would_pass(
        srv: McpServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(RequestStates, "_authentic", lambda self, payload, mac: True)
    assert (await _tampered(srv, "broken"))[0] is None


async def _replayed(srv: McpServer, tag: str) -> str | None:
    args = {"invoice": f"inv-mrtr-replay-{tag}", "amount": 3}
    async with connect(srv, "sup", MODERN, elicitation_callback=confirm_with("accept")) as c:
        state = str((await _first(c, args)).request_state)
        done = await _retry(c, args, state)
        assert isinstance(done, types.CallToolResult) and not done.is_error, done
        return await _refused(c, args, state)


async def test_a_replayed_state_is_refused(srv: McpServer) -> None:
    assert await _replayed(srv, "ok") == "replayed"
    assert _paid(srv, "inv-mrtr-replay-ok") == 1


async def test_without_single_use_a_replayed_state_would_pass(
        srv: McpServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(RequestStateRepo, "consume", lambda self, n, e, now: True)
    assert await _replayed(srv, "broken") is None


class _Later:
    """``time`` as seen from ``ahead_s`` seconds in the future."""

    def __init__(self, ahead_s: float) -> None:
        import time

        self.ahead_s, self._time = ahead_s, time

    def time(self) -> float:
        return self._time.time() + self.ahead_s


async def _expired(srv: McpServer, tag: str, monkeypatch: pytest.MonkeyPatch) -> str | None:
    args = {"invoice": f"inv-mrtr-late-{tag}", "amount": 3}
    async with connect(srv, "sup", MODERN, elicitation_callback=confirm_with("accept")) as c:
        state = str((await _first(c, args)).request_state)
        left = _claims(state)["e"] - _Later(0).time()
        assert 0 < left <= request_state.DEFAULT_TTL_S + 1
        monkeypatch.setattr(request_state, "time", _Later(left + 1))
        return await _refused(c, args, state)


async def test_an_expired_state_is_refused(srv: McpServer,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    assert await _expired(srv, "ok", monkeypatch) == "expired"


async def test_without_the_expiry_check_an_expired_state_would_pass(
        srv: McpServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(RequestStates, "_live", staticmethod(lambda e, now: True))
    assert await _expired(srv, "broken", monkeypatch) is None


async def _someone_elses(srv: McpServer, tag: str, thief: str) -> str | None:
    args = {"invoice": f"inv-mrtr-theft-{tag}", "amount": 3}
    async with connect(srv, "sup", MODERN, elicitation_callback=confirm_with("accept")) as c:
        state = str((await _first(c, args)).request_state)
    async with connect(srv, thief, MODERN, elicitation_callback=confirm_with("accept")) as t:
        return await _refused(t, args, state)


@pytest.mark.parametrize("thief", ["sup2", "acme-bot"])
async def test_another_agents_or_tenants_state_is_refused(srv: McpServer, thief: str) -> None:
    assert await _someone_elses(srv, f"ok-{thief}", thief) == "principal"


async def test_without_the_principal_binding_another_agents_state_would_pass(
        srv: McpServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(request_state, "principal_digest", lambda who: "anyone")
    assert await _someone_elses(srv, "broken", "sup2") is None


async def _other_arguments(srv: McpServer, tag: str) -> str | None:
    args = {"invoice": f"inv-mrtr-args-{tag}", "amount": 3}
    async with connect(srv, "sup", MODERN, elicitation_callback=confirm_with("accept")) as c:
        state = str((await _first(c, args)).request_state)
        return await _refused(c, {**args, "amount": 3000}, state)


async def test_a_state_for_other_arguments_is_refused(srv: McpServer) -> None:
    assert await _other_arguments(srv, "ok") == "call"


async def test_without_the_call_binding_a_state_for_other_arguments_would_pass(
        srv: McpServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(input_required, "call_digest", lambda tool, action, args: tool)
    assert await _other_arguments(srv, "broken") is None


# -- an upstream's questions ------------------------------------------------------------

@contextmanager
def _front(tmp: Path, server: dict[str, Any], tools: list[str]) -> Iterator[McpServer]:
    """toolkeeper's ``/mcp`` in front of ``server`` (agent ``bot`` may call ``tools``)."""
    doc = {"version": 1, "database": f"sqlite:///{tmp}/tk.db", "servers": [server],
           "profiles": [{"name": "all", "autonomy": 3,
                         "activations": [{"tool": t} for t in tools]}],
           "agents": [{"name": "bot", "profile": "all"}]}
    cfg = tmp / "toolkeeper.yaml"
    cfg.write_text(yaml.safe_dump(doc))
    gw = Gateway.open(config=cfg)
    tokens = {"bot": gw.store.tokens.create(tenant_id="default", role="agent", agent="bot")[1]}
    port = _free_port()
    app: Any = create_app(gw, ApiSettings(mcp_allowed_hosts=mcp_hosts("127.0.0.1")))
    server_ = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, lifespan="on",
                                            log_level="warning"))
    thread = threading.Thread(target=server_.run, daemon=True)
    thread.start()
    try:
        wait_until(lambda: bool(server_.started), timeout=20, what="uvicorn started")
        url = f"http://127.0.0.1:{port}"
        yield McpServer(gw=gw, url=f"{url}/mcp", base=url, tokens=tokens)
    finally:
        server_.should_exit = True
        thread.join(timeout=15)
        gw.close()


@pytest.fixture(scope="module")
def fronted(tmp_path_factory: pytest.TempPathFactory) -> Iterator[McpServer]:
    """In front of the asking fixture (2026-07-28 InputRequiredResult; tools ``up_…``)."""
    tmp = tmp_path_factory.mktemp("asking")
    with listening([sys.executable, str(ASKING), "{port}"]) as base:
        tools = ["up_ask_name", "up_ask_sample", "up_ask_roots", "up_ask_twice",
                 "up_ask_later", "up_count"]
        with _front(tmp, {"name": "up", "url": f"{base}/mcp", "side_effect": "idempotent",
                          "risk": "low"}, tools) as s:
            yield s


@pytest.fixture(scope="module")
def everything(tmp_path_factory: pytest.TempPathFactory) -> Iterator[McpServer]:
    """In front of server-everything, which speaks only 2025-11-25: it asks in the middle
    of ``tools/call``, on the call's SSE stream."""
    tmp = tmp_path_factory.mktemp("everything")
    port = _free_port()
    env = {**os.environ, "PORT": str(port)}
    with listening([node(), entry("server-everything"), "streamableHttp"], env,
                   port=port) as base:
        tools = ["ev_trigger-elicitation-request", "ev_trigger-sampling-request"]
        with _front(tmp, {"name": "ev", "url": f"{base}/mcp", "side_effect": "idempotent",
                          "risk": "low"}, tools) as s:
            yield s


def _name(answer: str) -> Any:
    async def callback(context: Any, params: Any) -> types.ElicitResult:
        assert "What is your name?" in params.message
        return types.ElicitResult(action="accept", content={"name": answer})
    return callback


async def _sample(context: Any, params: Any) -> types.CreateMessageResult:
    return types.CreateMessageResult(role="assistant", model="test-model",
                                     content=types.TextContent(type="text", text="hi there"))


async def _ran(c: Any, tool: str) -> int:
    counted = (await c.call_tool("up_count", {})).structured_content or {}
    return int(counted.get(tool, 0))


async def test_an_upstreams_elicitation_is_relayed_to_a_2026_agent(fronted: McpServer) -> None:
    async with connect(fronted, "bot", MODERN, elicitation_callback=_name("Ada")) as c:
        before = await _ran(c, "ask_name")
        first = await c.session.call_tool("up_ask_name", {}, allow_input_required=True)
        assert isinstance(first, types.InputRequiredResult)
        assert isinstance(first.input_requests["q"], types.ElicitRequest)
        state = str(first.request_state)  # ours, wrapping the upstream's own
        assert state.startswith("tk1.") and _claims(state)["x"] == "up-ask_name-0"
        done = await c.session.call_tool(
            "up_ask_name", {}, request_state=state, allow_input_required=True,
            input_responses={"q": types.ElicitResult(action="accept",
                                                     content={"name": "Ada"})})
        assert isinstance(done, types.CallToolResult) and not done.is_error, done
        assert done.content[0].text == "hello Ada state-ok"
        # the SDK's own loop, two rounds
        twice = await c.call_tool("up_ask_twice", {})
        assert not twice.is_error and twice.content[0].text == "hello Ada state-ok"
        assert await _ran(c, "ask_name") == before + 1
        with pytest.raises(MCPError) as info:  # used once
            await c.session.call_tool(
                "up_ask_name", {}, request_state=state, allow_input_required=True,
                input_responses={"q": types.ElicitResult(action="accept",
                                                         content={"name": "Eve"})})
        assert (info.value.error.data or {})["detail"] == "replayed"
    rounds = fronted.gw.store.audit.list("default", tool="up_ask_name", limit=1000,
                                         types=["call.failed"])
    assert any(e.reason == "input_required" for e in rounds)  # each round is audited


async def test_an_upstreams_elicitation_is_asked_in_band_of_a_2025_agent(
        fronted: McpServer) -> None:
    async with connect(fronted, "bot", "legacy", elicitation_callback=_name("Grace")) as c:
        r = await c.call_tool("up_ask_name", {})
    assert not r.is_error and r.content[0].text == "hello Grace state-ok", r


@pytest.mark.parametrize("era", ["legacy", MODERN])
async def test_an_upstreams_sampling_request_is_relayed(fronted: McpServer, era: str) -> None:
    async with connect(fronted, "bot", era, sampling_callback=_sample) as c:
        r = await c.call_tool("up_ask_sample", {})
    assert not r.is_error and r.content[0].text.startswith("sampled hi there"), r


@pytest.mark.parametrize("declared", [{}, {"sampling_callback": _sample}])
async def test_an_agent_without_the_capability_gets_32021(fronted: McpServer,
                                                          declared: dict[str, Any]) -> None:
    async with connect(fronted, "bot", MODERN, **declared) as c:
        with pytest.raises(MCPError) as info:
            await c.call_tool("up_ask_name", {})
    assert info.value.code == -32021
    assert info.value.error.data == {"requiredCapabilities": {"elicitation": {}}}


async def test_an_input_required_round_does_not_hold_the_idempotency_key(
        fronted: McpServer) -> None:
    meta = {"toolkeeper/idempotency_key": "mrtr-key-1"}
    async with connect(fronted, "bot", MODERN, elicitation_callback=_name("Key")) as c:
        r = await c.call_tool("up_ask_name", {}, meta=meta)
        assert not r.is_error and r.content[0].text == "hello Key state-ok", r
        again = await c.call_tool("up_ask_name", {}, meta=meta)  # answered from its outcome
    assert again.content[0].text == "hello Key state-ok"


async def test_if_a_round_held_its_key_the_retry_would_not_run(
        fronted: McpServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(OutcomeRepo, "release", lambda self, call_id: False)
    meta = {"toolkeeper/idempotency_key": "mrtr-key-2"}
    async with connect(fronted, "bot", MODERN, elicitation_callback=_name("Key")) as c:
        r = await c.call_tool("up_ask_name", {}, meta=meta)
    assert r.is_error  # the retry answered from the first round's outcome


@pytest.mark.slow
async def test_a_2025_upstreams_elicitation_mid_call_is_asked_of_a_2025_agent(
        everything: McpServer) -> None:
    async def answer(context: Any, params: Any) -> types.ElicitResult:
        assert params.message.startswith("Please provide inputs")
        return types.ElicitResult(action="accept", content={"name": "Ada Lovelace"})
    async with connect(everything, "bot", "legacy", elicitation_callback=answer) as c:
        r = await c.call_tool("ev_trigger-elicitation-request", {})
    assert not r.is_error and "- Name: Ada Lovelace" in r.content[1].text, r


@pytest.mark.slow
async def test_a_2025_upstreams_sampling_mid_call_is_asked_of_a_2025_agent(
        everything: McpServer) -> None:
    async with connect(everything, "bot", "legacy", sampling_callback=_sample) as c:
        r = await c.call_tool("ev_trigger-sampling-request", {"prompt": "greet"})
    assert not r.is_error and "hi there" in r.content[0].text, r


@pytest.mark.slow
async def test_a_2026_agent_cannot_be_asked_mid_call_and_the_upstream_is_told(
        everything: McpServer) -> None:
    asked: list[Any] = []

    async def answer(context: Any, params: Any) -> types.ElicitResult:
        asked.append(params)
        return types.ElicitResult(action="accept", content={"name": "nobody"})
    async with connect(everything, "bot", MODERN, elicitation_callback=answer) as c:
        r = await c.call_tool("ev_trigger-elicitation-request", {})
    assert r.is_error and asked == [], r  # the upstream got an error answer, not a hang


async def test_the_missing_capability_is_http_400_in_the_stateless_era(
        fronted: McpServer) -> None:
    import httpx

    body = {"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {
        "name": "up_ask_name", "arguments": {}, "_meta": {
            "io.modelcontextprotocol/protocolVersion": MODERN,
            "io.modelcontextprotocol/clientCapabilities": {}}}}
    headers = {"Authorization": f"Bearer {fronted.tokens['bot']}",
               "MCP-Protocol-Version": MODERN, "Mcp-Method": "tools/call",
               "Mcp-Name": "up_ask_name", "Accept": "application/json, text/event-stream"}
    async with httpx.AsyncClient(timeout=20) as http:
        resp = await http.post(fronted.url, json=body, headers=headers)
    assert resp.status_code == 400, resp.text
    error = resp.json()["error"]
    assert (error["code"], error["data"]) == (
        -32021, {"requiredCapabilities": {"elicitation": {}}})


async def test_a_round_with_only_a_state_is_relayed_to_a_client_without_capabilities(
        fronted: McpServer) -> None:
    async with connect(fronted, "bot", MODERN) as c:  # no capability: the lean path
        first = await c.session.call_tool("up_ask_later", {}, allow_input_required=True)
        assert isinstance(first, types.InputRequiredResult) and not first.input_requests
        assert str(first.request_state).startswith("tk1.")
        r = await c.call_tool("up_ask_later", {})  # the SDK's loop sends the state back
    assert not r.is_error and r.content[0].text == "later state-ok", r

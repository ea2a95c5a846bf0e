"""SPEC §2 steps 6-7 and 10: the default matrix cell by cell, adjusters that only raise,
the output cap, an http tool and the encrypted secrets backend through the pipeline."""

from __future__ import annotations

import http.server
import json
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from tests.pipeline.gw_helpers import update_profile
from tests.pipeline.sample_tools import LEDGER, Payments, charge
from toolkeeper import (
    Adjuster,
    Autonomy,
    CallStatus,
    Condition,
    Gate,
    GateMatrix,
    Reason,
    Risk,
    SideEffect,
    ToolDefinition,
    tool,
)

SPEC_TABLE = """
low      confirm allow   allow   allow
medium   confirm preview allow   allow
high     approve confirm preview allow
critical deny    approve approve confirm
"""


def test_default_matrix_is_the_spec_table() -> None:
    matrix = GateMatrix()
    for line in SPEC_TABLE.strip().splitlines():
        risk, *gates = line.split()
        for autonomy, gate in enumerate(gates):
            assert matrix.gate(Risk(risk), Autonomy(autonomy)) is Gate(gate), (risk, autonomy)


def test_overrides_layer_tenant_then_profile() -> None:
    m = GateMatrix({Risk.LOW: {Autonomy(3): Gate.CONFIRM}}, {Risk.LOW: {Autonomy(3): Gate.DENY}})
    assert m.gate(Risk.LOW, Autonomy(3)) is Gate.DENY
    assert m.gate(Risk.LOW, Autonomy(2)) is Gate.ALLOW


def test_adjusters_raise_risk_from_arguments_and_context(make_gateway: Any) -> None:
    gw = make_gateway(tools=[charge], autonomy=2)
    update_profile(gw, adjusters=[
        Adjuster(name="big", when=(Condition(arg="amount", op="gt", value=1000),),
                 raise_to=Risk.HIGH),
        Adjuster(name="vip", when=(Condition(arg="invoice", op="matches", value="^vip-"),),
                 raise_by=1),
        Adjuster(name="irreversible", when=(Condition(context="side_effect",
                                                      value="irreversible"),),
                 raise_to=Risk.MEDIUM)])
    small = gw.call_sync("charge", arguments={"invoice": "a", "amount": 5}, agent="bot")
    assert small.risk is Risk.MEDIUM and small.ok  # low → at least medium; medium @2 allows
    big = gw.call_sync("charge", arguments={"invoice": "a", "amount": 5000}, agent="bot")
    assert big.risk is Risk.HIGH and big.status is CallStatus.CONFIRMATION_REQUIRED
    vip = gw.call_sync("charge", arguments={"invoice": "vip-1", "amount": 5000}, agent="bot")
    assert vip.risk is Risk.CRITICAL and vip.status is CallStatus.APPROVAL_REQUIRED


def test_adjusters_never_lower_risk(make_gateway: Any) -> None:
    gw = make_gateway(tools=[charge], autonomy=2)
    update_profile(gw, adjusters=[Adjuster(when=(), raise_to=Risk.LOW)])
    res = gw.call_sync("charge", arguments={"invoice": "a", "amount": 1}, agent="bot")
    assert res.risk is Risk.LOW  # its own level; an adjuster "to low" cannot lower anything
    update_profile(gw, adjusters=[Adjuster(when=(), raise_to=Risk.HIGH),
                                  Adjuster(when=(), raise_to=Risk.MEDIUM)])
    res = gw.call_sync("charge", arguments={"invoice": "b", "amount": 1}, agent="bot")
    assert res.risk is Risk.HIGH  # order does not matter: the later, lower one cannot undo it
    assert LEDGER["runs"] == 1


@tool(side_effect=SideEffect.PURE, inline=True)
def chatty(n: int) -> str:
    """Returns n characters."""
    return "x" * n


def test_output_is_capped(make_gateway: Any) -> None:
    gw = make_gateway(tools=[chatty], autonomy=3)
    res = gw.call_sync("chatty", arguments={"n": 200_000}, agent="bot")
    assert res.ok and len(res.output) == 100_000
    assert res.details == {"truncated": True, "original_chars": 200_000}


@pytest.fixture
def echo_server() -> Iterator[str]:
    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers["Content-Length"]))
            reply = json.dumps({"got": json.loads(body),
                                "auth": self.headers.get("Authorization")}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(reply)))
            self.end_headers()
            self.wfile.write(reply)

        def log_message(self, *args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}/hook"
    server.shutdown()


def test_http_tool_through_the_pipeline_with_a_secret_header(tmp_path: Any,
                                                            echo_server: str) -> None:
    from toolkeeper import Activation, Gateway
    from toolkeeper.secrets.embedded import EmbeddedSecretsStore
    from toolkeeper.store import Store

    url = f"sqlite:///{tmp_path}/http.db"
    store = Store.open(url)
    secrets = EmbeddedSecretsStore(store.blobs, b"k" * 32)
    secrets.set_secret("hooks", "token", "Bearer hunter2-secret")
    gw = Gateway(store, secrets=secrets)
    try:
        gw.registry.register(ToolDefinition(
            name="hook", implementation_type="http", side_effect=SideEffect.IDEMPOTENT,
            risk_default=Risk.LOW,
            input_schema={"type": "object", "properties": {"msg": {"type": "string"}}},
            implementation={"url": echo_server, "method": "POST",
                            "headers": {"Authorization": "${secret:hooks/token}"},
                            "allowed_networks": ["127.0.0.0/8"]}))
        from toolkeeper import Agent, Profile

        gw.registry.put_profile(Profile(name="p", autonomy=Autonomy(2),
                                        activations=(Activation(tool="hook"),)))
        gw.registry.put_agent(Agent(name="bot", profile="p"))
        res = gw.call_sync("hook", arguments={"msg": "hi"}, agent="bot")
        assert res.ok, res
        assert res.output["got"] == {"msg": "hi"}
        assert res.output["auth"] == "***"  # the upstream saw it; the agent never does
    finally:
        gw.close()


def test_encrypted_secrets_live_in_the_store(db_url: str) -> None:
    from toolkeeper.secrets.embedded import EmbeddedSecretsStore
    from toolkeeper.store import Store

    store = Store.open(db_url)
    try:
        EmbeddedSecretsStore(store.blobs, b"m" * 32).set_secret("gh", "token", "ghp_value_123")
        raw = b"".join(blob for _, blob in store.blobs.list_blobs())
        assert b"ghp_value_123" not in raw  # encrypted at rest
        again = EmbeddedSecretsStore(store.blobs, b"m" * 32)
        import asyncio

        assert asyncio.run(again.get_secret("gh", "token")) == "ghp_value_123"
        assert "ghp_value_123" in again.known_values()
    finally:
        store.close()


# listing follows the gate (SPEC §2: a tool the agent cannot call is never listed) --------

def _listed(gw: Any) -> dict[str, tuple[str, ...]]:
    from toolkeeper.services.discovery import agent_enabled

    view = agent_enabled(gw.catalog, gw.runtime.health, "default", "bot")
    assert view is not None
    return {t.definition.name: t.actions for t in view[1]}


def _why(gw: Any, tool: str) -> str:
    from toolkeeper.services.discovery import agent_tools

    view = agent_tools(gw.catalog, gw.runtime.health, "default", "bot")
    assert view is not None
    return {u.definition.name: u.why.value for u in view.unavailable}[tool]


PAY_ARGS = {"invoice": "inv-g", "amount": 5}


def test_an_action_whose_gate_is_deny_is_not_listed_and_is_denied(make_gateway: Any) -> None:
    from toolkeeper import Activation

    gw = make_gateway(tools=[Payments], autonomy=3, scopes=("payments",), activations=(
        Activation(tool="payments", gates={"pay": Gate.DENY}),))
    assert _listed(gw) == {"payments": ("refund",)}
    assert gw.call_sync("payments", "pay", PAY_ARGS, agent="bot").reason == Reason.GATE_DENIED
    assert gw.call_sync("payments", "refund", PAY_ARGS, agent="bot").ok


def test_a_tool_whose_every_action_is_denied_is_unavailable_with_gate_denied(
        make_gateway: Any) -> None:
    from toolkeeper import Activation

    gw = make_gateway(tools=[Payments], autonomy=3, scopes=("payments",), activations=(
        Activation(tool="payments", gates={"pay": Gate.DENY, "refund": Gate.DENY}),))
    assert _listed(gw) == {}
    assert _why(gw, "payments") == "gate_denied"
    for action in ("pay", "refund"):
        assert gw.call_sync("payments", action, PAY_ARGS, agent="bot").reason == \
            Reason.GATE_DENIED


def test_a_profile_matrix_deny_hides_the_action_at_that_autonomy(make_gateway: Any) -> None:
    gw = make_gateway(tools=[Payments], autonomy=0, scopes=("payments",))
    assert _listed(gw) == {"payments": ("pay", "refund")}  # approve and confirm: callable
    update_profile(gw, gates={Risk.HIGH: {0: Gate.DENY}})
    assert _listed(gw) == {"payments": ("refund",)}
    assert gw.call_sync("payments", "pay", PAY_ARGS, agent="bot").reason == Reason.GATE_DENIED

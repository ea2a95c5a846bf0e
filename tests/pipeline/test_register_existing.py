"""Registering a tool, profile or agent whose name exists (issue 15 item 1): the identical
definition is a no-op, a different one is refused with ``already_exists`` unless the caller
says ``replace=True``; nothing changes on a refusal."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.pipeline.conftest import GatewayFactory
from tests.pipeline.sample_tools import add
from tests.support.docs import block
from toolkeeper import Activation, Agent, Autonomy, Gateway, OperationRefused, Profile, tool
from toolkeeper.config import apply_file
from toolkeeper.demo.runner import BOT, DEMO_CONFIG
from toolkeeper.model.enums import Risk, SideEffect


@tool(name="add", side_effect=SideEffect.PURE, inline=True, risk=Risk.LOW)
def other_add(a: int, b: int) -> int:
    """Another tool that calls itself add."""
    return a - b


def test_same_tool_again_is_a_no_op_and_another_is_refused(make_gateway: GatewayFactory) -> None:
    gw = make_gateway(tools=[add])
    again = gw.registry.register(add)
    assert again.version == "1.0.0"
    with pytest.raises(OperationRefused) as refused:
        gw.registry.register(other_add)
    assert refused.value.reason == "already_exists"
    assert "add" in refused.value.message and "replace=True" in refused.value.message
    r = gw.call_sync("add", arguments={"a": 5, "b": 2}, agent="bot")
    assert r.ok and r.output == 7  # the stored tool and its code are unchanged


def test_replace_true_replaces_the_tool(make_gateway: GatewayFactory) -> None:
    gw = make_gateway(tools=[add])
    gw.registry.register(other_add, replace=True, version="1.1.0")
    r = gw.call_sync("add", arguments={"a": 5, "b": 2}, agent="bot")
    assert r.ok and r.output == 3


def test_profile_and_agent_refused_unless_identical_or_replaced(
        make_gateway: GatewayFactory) -> None:
    gw = make_gateway(tools=[add])
    same = Profile(name="p", autonomy=Autonomy(2), activations=(Activation(tool="add"),))
    gw.registry.put_profile(same)
    gw.registry.put_agent(Agent(name="bot", profile="p"))
    gw.registry.put_profile(Profile(name="q", autonomy=Autonomy.SUPERVISED))
    with pytest.raises(OperationRefused) as refused:
        gw.registry.put_agent(Agent(name="bot", profile="q"))
    assert refused.value.reason == "already_exists" and "bot" in refused.value.message
    with pytest.raises(OperationRefused) as refused:
        gw.registry.put_profile(Profile(name="p", autonomy=Autonomy.SUPERVISED))
    assert refused.value.reason == "already_exists"
    assert gw.call_sync("add", arguments={"a": 1, "b": 1}, agent="bot").ok
    gw.registry.put_agent(Agent(name="bot", profile="q"), replace=True)
    assert gw.call_sync("add", arguments={"a": 1, "b": 1}, agent="bot").reason == \
        "tool_not_enabled"


def _readme_example() -> str:
    return block("docs/guides/library.md: Use it as a library #0")


def _demo_agents(url: str) -> dict[str, str]:
    with Gateway.open(url) as gw:
        return {a.name: a.profile for a in gw.store.registry.agents()}


def test_readme_example_runs_where_the_demo_ran_and_leaves_the_demo_alone(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("TOOLKEEPER_DATABASE_URL", raising=False)
    demo_db = "sqlite:///./toolkeeper.db"  # what `make run` (serve --demo) seeds
    with Gateway.open(demo_db) as gw:
        apply_file(gw, str(DEMO_CONFIG))
    before = _demo_agents(demo_db)
    for _ in range(2):  # the second run registers identical definitions: a no-op
        exec(compile(_readme_example(), "README.md", "exec"), {"__name__": "readme_example"})
        out = capsys.readouterr().out
        assert "confirmation_required" in out and "ap_" in out
    assert _demo_agents(demo_db) == before and BOT in before
    with Gateway.open(demo_db) as gw:
        apply_file(gw, str(DEMO_CONFIG))  # the demo starts again as before

"""The function_call built-in through the gateway: a function of the operator's allow-list by
name (sync in a worker thread, async awaited), refused by name, policy or arguments before it
runs, on SQLite and PostgreSQL; and the same wiring from a config file."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from toolkeeper import Activation, Agent, CallStatus, Gateway, Profile, Reason
from toolkeeper.builtins import definition
from toolkeeper.model.enums import Risk, SideEffect
from toolkeeper.model.tool import ExecutionMeta


class Calls:
    """What the allow-listed functions saw: one list per test, no module state."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, Any]] = []

    def shout(self, text: str, times: int = 1) -> str:
        self.seen.append(("shout", threading.get_ident()))
        return (text.upper() + " ") * times

    async def whisper(self, text: str) -> dict[str, Any]:
        self.seen.append(("whisper", threading.get_ident()))
        return {"text": text.lower()}

    async def slow(self) -> str:
        self.seen.append(("slow", None))
        await asyncio.sleep(60)
        return "never"

    def functions(self) -> dict[str, Any]:
        return {"shout": self.shout, "whisper": self.whisper, "slow": self.slow}


@pytest.fixture
def calls() -> Calls:
    return Calls()


@pytest.fixture
def gw(db_url: str, calls: Calls) -> Iterator[Gateway]:
    with Gateway.open(db_url, functions=calls.functions()) as gateway:
        gateway.registry.register(definition(
            "function_call", execution=ExecutionMeta(timeout_s=0.5)))
        yield gateway


def enable(gw: Gateway, **policy: Any) -> None:
    gw.registry.put_profile(Profile(name="p", autonomy=3, activations=(
        Activation(tool="function_call", policy=policy),)))
    gw.registry.put_agent(Agent(name="bot", profile="p"))


def call(gw: Gateway, arguments: dict[str, Any]) -> Any:
    return gw.call_sync("function_call", arguments=arguments, agent="bot")


def test_a_sync_function_runs_in_a_worker_thread_and_an_async_one_is_awaited(
        gw: Gateway, calls: Calls) -> None:
    enable(gw)
    res = call(gw, {"function_name": "shout", "arguments": {"text": "hi", "times": 2}})
    assert (res.status, res.output) == (CallStatus.SUCCEEDED, "HI HI "), res
    res = call(gw, {"function_name": "whisper", "arguments": {"text": "HeLLo"}})
    assert (res.status, res.output) == (CallStatus.SUCCEEDED, {"text": "hello"}), res
    threads = dict(calls.seen)
    assert threads["shout"] != threads["whisper"]  # the loop's thread ran only the async one


def test_the_default_definition_is_irreversible_and_medium_risk() -> None:
    tool = definition("function_call")
    assert (tool.side_effect, tool.risk_default) == (SideEffect.IRREVERSIBLE, Risk.MEDIUM)
    assert tool.actions["run"].input_schema is not None
    assert tool.actions["run"].input_schema["required"] == ["function_name"]


def test_a_name_outside_the_allow_list_is_refused(gw: Gateway, calls: Calls) -> None:
    enable(gw)
    res = call(gw, {"function_name": "os.system", "arguments": {"command": "true"}})
    assert (res.status, res.reason) == (CallStatus.DENIED, Reason.FUNCTION_NOT_ALLOWED), res
    assert res.message == "function 'os.system' is not registered in the allow-list"
    gw.flush()
    events = gw.store.audit.list("default", tool="function_call", types=["policy.denied"])
    assert [e.reason for e in events] == [Reason.FUNCTION_NOT_ALLOWED]


def test_a_registered_name_outside_the_policy_is_refused_before_it_runs(
        gw: Gateway, calls: Calls) -> None:
    enable(gw, allowed_functions=["whisper"])
    res = call(gw, {"function_name": "shout", "arguments": {"text": "hi"}})
    assert (res.status, res.reason) == (CallStatus.DENIED, Reason.FUNCTION_NOT_ALLOWED), res
    assert "not allowed by the policy" in (res.message or "")
    assert calls.seen == []
    assert call(gw, {"function_name": "whisper", "arguments": {"text": "A"}}).ok


@pytest.mark.parametrize("arguments", [
    {"arguments": {"text": "hi"}},                                  # no function_name
    {"function_name": "", "arguments": {}},                         # empty
    {"function_name": "shout", "arguments": ["hi"]},                # not an object
    {"function_name": "shout", "arguments": {}},                    # required text missing
    {"function_name": "shout", "arguments": {"text": "a", "loud": True}},  # unknown keyword
    {"function_name": "shout", "extra": 1},                         # unknown field
])
def test_bad_arguments_are_invalid_and_nothing_runs(
        gw: Gateway, calls: Calls, arguments: dict[str, Any]) -> None:
    enable(gw)
    res = call(gw, arguments)
    assert res.reason == Reason.INVALID_ARGUMENTS, res
    assert calls.seen == []


def test_a_function_name_over_the_length_cap_is_invalid(gw: Gateway) -> None:
    enable(gw)
    assert call(gw, {"function_name": "f" * 201}).reason == Reason.INVALID_ARGUMENTS


def test_a_function_slower_than_the_tool_timeout_stops_with_timeout(
        gw: Gateway, calls: Calls) -> None:
    enable(gw)
    res = call(gw, {"function_name": "slow"})
    assert res.reason == Reason.TIMEOUT, res
    assert calls.seen == [("slow", None)]


def test_config_wires_the_allow_list_and_the_built_in(db_url: str, tmp_path: Path) -> None:
    path = tmp_path / "toolkeeper.yaml"
    path.write_text(
        "version: 1\n"
        "functions: {shorten_text: 'textwrap:shorten', dedent: 'textwrap:dedent'}\n"
        "tools:\n  - builtin: function_call\n    policy: {allowed_functions: [shorten_text]}\n"
        "profiles: [{name: p, autonomy: 3, activations: [{tool: function_call}]}]\n"
        "agents: [{name: bot, profile: p}]\n")
    with Gateway.open(db_url, config=path) as gw:
        res = call(gw, {"function_name": "shorten_text",
                        "arguments": {"text": "one two three four", "width": 12}})
        assert (res.status, res.output) == (CallStatus.SUCCEEDED, "one [...]"), res
        res = call(gw, {"function_name": "dedent", "arguments": {"text": "  x"}})
        assert res.reason == Reason.FUNCTION_NOT_ALLOWED, res

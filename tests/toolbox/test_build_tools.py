"""Seed 001 ``build_tools``: one entry point; an unknown framework or a missing extra fails
with a message saying what to do."""

from __future__ import annotations

import sys
from typing import Any

import pytest

from tests.pipeline.sample_tools import add
from tests.toolbox.conftest import gateway_of
from toolkeeper import UserError
from toolkeeper.toolbox import FRAMEWORKS, build_tools

EXTRAS = {"pydantic_ai": "toolkeeper[pydantic-ai]", "openai_agents": "toolkeeper[openai-agents]",
          "langchain": "toolkeeper[langchain]",
          # strands-agents requires mcp<2.2: it installs only beside the client distribution
          "strands": "toolkeeper-client[strands]"}


def test_the_four_frameworks_and_their_extras() -> None:
    assert {name: f"{fw.distribution}[{fw.extra}]"
            for name, fw in FRAMEWORKS.items()} == EXTRAS


def test_an_unknown_framework_names_the_known_ones(make_box: Any) -> None:
    box = make_box(tools=[add])
    with pytest.raises(UserError) as err:
        build_tools(box, framework="crewai")
    assert "'crewai'" in str(err.value)
    for name in EXTRAS:
        assert name in str(err.value)


@pytest.mark.parametrize("framework", sorted(EXTRAS))
def test_a_missing_extra_names_the_install_line(make_box: Any, framework: str,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    box = make_box(tools=[add])
    for module in FRAMEWORKS[framework].modules:
        monkeypatch.setitem(sys.modules, module, None)  # as if not installed
    monkeypatch.delitem(sys.modules, f"toolkeeper.adapters.{framework}", raising=False)
    with pytest.raises(UserError) as err:
        build_tools(gateway_of(box), agent="bot", framework=framework)
    assert f"pip install '{EXTRAS[framework]}'" in str(err.value)


def test_the_target_must_be_a_toolbox_gateway_or_client(make_box: Any) -> None:
    box = make_box(tools=[add])
    with pytest.raises(UserError, match="agent="):
        build_tools(gateway_of(box), framework="pydantic_ai")
    with pytest.raises(UserError, match="not a str"):
        build_tools("http://localhost:8080", agent="bot", framework="pydantic_ai")
    with pytest.raises(UserError, match="'bot'"):
        build_tools(box, agent="other-bot", framework="pydantic_ai")

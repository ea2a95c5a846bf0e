"""The tool dialog's retrieval and agent-call wiring (issue 11 item 2), in a real Chromium
against a real ``toolkeeper serve``: the pipeline picker offers the tenant's retrieval
pipelines and saves the one picked; an agent-call tool targets an agent by name (its slug)
or by its stable id, with its timeout. What was stored is read back over REST."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from playwright.sync_api import Locator, Page, expect

from tests.support.serve import Server, TokenSpec, serving_toolkeeper
from tests.ui.conftest import ConsolePage
from toolkeeper.model.profile import agent_id

CONFIG = """\
version: 1
retrieval:
  pipelines:
    - {name: handbook}
    - {name: wiki}
profiles:
  - {name: helpers, autonomy: 1}
agents:
  - {name: helper-bot, profile: helpers}
  - {name: writer-bot, profile: helpers}
"""


@pytest.fixture(scope="module")
def wiring_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    tokens = {"admin": TokenSpec("admin")}
    with serving_toolkeeper(tmp_path_factory.mktemp("ui-wiring"), CONFIG, tokens) as srv:
        yield srv


def _dialog(page: Page, server: Server, name: str, kind: str) -> Locator:
    page.goto(server.url + "/ui/#tools")
    page.get_by_label("token").fill(server.tokens["admin"])
    page.get_by_role("button", name="Use token").click()
    expect(page.locator("#status")).to_have_text(re.compile(r"^\d+ of \d+ tools$"))
    page.get_by_role("button", name="New tool").click()
    dialog = page.locator("#tool-dialog")
    dialog.get_by_label("Name", exact=True).fill(name)
    dialog.locator("#te-type").select_option(kind)
    expect(dialog.locator("fieldset.te-kind:visible")).to_have_count(1)
    dialog.get_by_label("Risk").select_option("low")
    dialog.get_by_label("Side effect").select_option("pure")
    return dialog


def _implementation(server: Server, name: str) -> dict[str, Any]:
    resp = httpx.get(server.url + "/tools?limit=500", timeout=30,
                     headers={"Authorization": f"Bearer {server.tokens['admin']}"})
    assert resp.status_code == 200, resp.text
    tool = next(t for t in resp.json() if t["name"] == name)
    implementation: dict[str, Any] = tool["config_schema"]["implementation"]
    return implementation


def test_a_retrieval_tool_names_the_pipeline_picked(console_page: ConsolePage,
                                                    wiring_server: Server) -> None:
    page = console_page.page
    dialog = _dialog(page, wiring_server, "kb_search", "rag_retrieval")
    picker = dialog.get_by_label("Pipeline")
    expect(picker.locator("option")).to_have_text(["handbook", "wiki"])
    picker.select_option("wiki")
    page.get_by_role("button", name="Save draft").click()
    expect(page.locator("#tooledit-result")).to_have_text("Saved kb_search 1.0.0 (draft)")
    assert _implementation(wiring_server, "kb_search")["pipeline_id"] == "wiki"
    expect(page.locator("#tools tbody tr[data-tool=kb_search]")).to_contain_text("rag_retrieval")
    assert console_page.console.errors == []


def test_an_agent_call_tool_targets_an_agent_by_name_or_by_id(console_page: ConsolePage,
                                                              wiring_server: Server) -> None:
    page = console_page.page
    dialog = _dialog(page, wiring_server, "ask_helper", "agent_call")
    expect(dialog.locator("#te-agents option")).to_have_count(2)  # the name suggestions
    assert dialog.locator("#te-agents option").evaluate_all(
        "(os) => os.map((o) => o.value)") == ["helper-bot", "writer-bot"]
    dialog.get_by_label("Target agent").fill("helper-bot")
    dialog.get_by_label("Timeout").fill("30")
    page.get_by_role("button", name="Save draft").click()
    result = page.locator("#tooledit-result")
    expect(result).to_have_text("Saved ask_helper 1.0.0 (draft)")
    assert _implementation(wiring_server, "ask_helper") == {
        "target_agent_slug": "helper-bot", "timeout_s": 30}

    page.keyboard.press("Escape")
    page.get_by_role("button", name="New tool").click()
    dialog.get_by_label("Name", exact=True).fill("ask_writer")
    dialog.locator("#te-type").select_option("agent_call")
    writer = agent_id("default", "writer-bot")
    dialog.get_by_label("Target agent").fill(writer)
    page.get_by_role("button", name="Save draft").click()
    expect(result).to_have_text("Saved ask_writer 1.0.0 (draft)")
    assert _implementation(wiring_server, "ask_writer") == {
        "target_agent_id": writer, "timeout_s": 60}
    expect(dialog.get_by_label("Target agent")).to_have_value(writer)  # refilled from the API

    dialog.get_by_label("Target agent").fill("")  # an edit of the wiring without a target
    page.get_by_role("button", name="Save draft").click()
    expect(result).to_have_text("invalid_arguments: choose a target agent")
    assert console_page.console.errors == []

"""Artifact tools in the console (issue 11 item 2), in a real Chromium against a real
``toolkeeper serve`` whose operator installed artifacts. Python code is the operator's: the
API refuses a tool it holds that runs an artifact, on creation and on an edit of its wiring
(``entry_point_not_allowed``). So a new tool cannot pick the artifact type, and an
operator's artifact tool is edited for its governance only: its artifact and version show
read-only, configured in toolkeeper.yaml, and the edited tool publishes with its pin."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from playwright.sync_api import Page, expect

from tests.support.serve import Server, TokenSpec, serving_toolkeeper
from tests.ui.conftest import ConsolePage

CONFIG = """\
version: 1
artifacts: {dir: ./artifacts}
tools:
  - {name: shout, tenant: default, implementation_type: artifact, artifact_id: echo,
     artifact_version: "1.1.0", side_effect: pure, risk_default: low}
"""
INSTALLED = {"echo": ["1.0.0", "1.1.0"], "upper": ["2.0.0"]}


def _install(root: Path, artifact_id: str, version: str) -> None:
    where = root / "artifacts" / f"{artifact_id}-{version}"
    where.mkdir(parents=True)
    (where / f"{artifact_id}.py").write_text("def run(text):\n    return text\n")
    (where / "artifact.json").write_text(json.dumps({
        "id": artifact_id, "version": version, "entry": f"{artifact_id}:run",
        "inputs": [{"name": "text", "type": "string", "required": True}],
        "description": f"the {artifact_id} artifact"}))


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    work = tmp_path_factory.mktemp("ui-artifacts")
    for artifact_id, versions in INSTALLED.items():
        for version in versions:
            _install(work, artifact_id, version)
    tokens = {"admin": TokenSpec("admin")}
    with serving_toolkeeper(work, CONFIG, tokens,
                            TOOLKEEPER_CONFIG=str(work / "toolkeeper.yaml")) as srv:
        yield srv


def _tool(server: Server, name: str) -> dict[str, Any]:
    resp = httpx.get(server.url + "/tools", timeout=30,
                     headers={"Authorization": f"Bearer {server.tokens['admin']}"})
    found: dict[str, Any] = next(t for t in resp.json() if t["name"] == name)
    return found


def _tools(page: Page, server: Server) -> None:
    page.goto(server.url + "/ui/#tools")
    page.get_by_label("token").fill(server.tokens["admin"])
    page.get_by_role("button", name="Use token").click()
    expect(page.locator("#status")).to_have_text(re.compile(r"^\d+ of \d+ tools$"))


def test_an_artifact_tools_governance_is_edited_and_published_its_wiring_read_only(
        console_page: ConsolePage, installed: Server) -> None:
    shout = _tool(installed, "shout")
    refused = httpx.put(f"{installed.url}/tools/{shout['id']}", timeout=30,
                        json={"implementation_config": {}, "risk_default": "medium"},
                        headers={"Authorization": f"Bearer {installed.tokens['admin']}"})
    assert (refused.status_code, refused.json()["error"]["reason"]) == (
        422, "entry_point_not_allowed"), refused.text
    page = console_page.page
    _tools(page, installed)
    page.locator("#tools tbody tr[data-tool=shout] button.link").click()
    drawer = page.locator("#tool-drawer")
    expect(drawer.locator("dl.summary")).to_contain_text("artifact")
    expect(drawer).to_contain_text("Wired by the operator")
    drawer.get_by_role("button", name="Edit").click()
    dialog = page.locator("#tool-dialog")
    for picker, value in (("#te-artifact", "echo"), ("#te-artifact-version", "1.1.0")):
        expect(dialog.locator(picker)).to_have_value(value)
        expect(dialog.locator(picker)).to_be_disabled()
    expect(dialog.locator("fieldset[data-kind=artifact] .te-operator")).to_contain_text(
        "configured in toolkeeper.yaml")
    dialog.get_by_label("Risk").select_option("high")
    dialog.get_by_role("button", name="Save draft").click()
    expect(dialog.locator("#tooledit-result")).to_have_text(re.compile(r"^Saved shout "))
    dialog.get_by_label("New version").fill("1.1.0")
    dialog.get_by_role("button", name="Make version").click()
    expect(dialog.locator("#tooledit-result")).to_have_text("Version 1.1.0 of shout published")
    after = _tool(installed, "shout")
    assert (after["origin"], after["status"], after["risk_default"]) == (
        shout["origin"], "published", "high")
    assert (after["artifact_id"], after["artifact_version"]) == ("echo", "1.1.0")
    assert after["config_schema"]["implementation"] == shout["config_schema"]["implementation"]
    page.keyboard.press("Escape")
    page.get_by_role("button", name="New tool").click()
    expect(page.locator("#te-type option[value=artifact]")).to_be_disabled()
    expect(page.locator("#te-artifact")).to_be_enabled()
    assert console_page.console.errors == []

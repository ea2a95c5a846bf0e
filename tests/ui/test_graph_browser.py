"""The console's impact dialog and dependency drawing (issue 31), in a real Chromium against a
real ``toolkeeper serve``: Publish lists who is affected and runs only after Confirm; Cancel
changes nothing; the drawer draws the tool's profile and agent."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from playwright.sync_api import expect

from tests.support.serve import Server, TokenSpec, serving_toolkeeper
from tests.ui.conftest import ConsolePage

ORDERS = {"name": "orders", "implementation_type": "http",
          "implementation_config": {"url": "https://orders.example/api", "method": "GET"}}


@pytest.fixture(scope="module")
def wired(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    tokens = {"admin": TokenSpec("admin")}
    with serving_toolkeeper(tmp_path_factory.mktemp("ui-graph"), "version: 1\n", tokens) as srv:
        _rest(srv, "POST", "/tools", json=ORDERS)
        _rest(srv, "POST", "/profiles", json={"name": "sales", "activations": [
            {"tool": "orders"}]})
        _rest(srv, "POST", "/agents", json={"name": "seller", "profile": "sales"})
        yield srv


def _rest(server: Server, method: str, path: str, **kw: Any) -> Any:
    resp = httpx.request(method, server.url + path, timeout=30, **kw,
                         headers={"Authorization": f"Bearer {server.tokens['admin']}"})
    assert resp.status_code < 400, resp.text
    return resp.json()


def _status(server: Server) -> str:
    return next(t["status"] for t in _rest(server, "GET", "/tools") if t["name"] == "orders")


@pytest.mark.slow
def test_publish_shows_the_impact_and_waits_for_confirm(console_page: ConsolePage,
                                                        wired: Server) -> None:
    page = console_page.page
    page.goto(wired.url + "/ui/#tools")
    page.get_by_label("token").fill(wired.tokens["admin"])
    page.get_by_role("button", name="Use token").click()
    page.locator("#tools tbody tr[data-tool=orders]").get_by_role("button",
                                                                  name="orders").click()
    drawer = page.locator("#drawer-body")
    drawing = drawer.locator("svg.graph-drawing")
    expect(drawing.locator("text.graph-center")).to_have_text("tool: orders")
    expect(drawing.locator("text[data-node='agent:default/seller']")).to_have_count(1)

    drawer.get_by_role("button", name="Publish").click()
    dialog = drawer.get_by_role("alertdialog")
    expect(dialog.locator("li")).to_have_text(
        ["agent seller (profile sales) follows the new version for orders: run"])
    dialog.get_by_role("button", name="Cancel").click()
    expect(dialog).to_have_count(0)
    assert _status(wired) == "draft"

    drawer.get_by_role("button", name="Publish").click()
    drawer.get_by_role("alertdialog").get_by_role("button", name="Confirm publish").click()
    expect(page.locator("#tools tbody tr[data-tool=orders] td").nth(2)).to_have_text(
        "published")
    assert _status(wired) == "published"


@pytest.mark.slow
def test_an_agent_row_draws_its_profile_and_tools(console_page: ConsolePage,
                                                  wired: Server) -> None:
    page = console_page.page
    page.goto(wired.url + "/ui/#agents")
    page.get_by_label("token").fill(wired.tokens["admin"])
    page.get_by_role("button", name="Use token").click()
    page.get_by_role("button", name="Graph of seller").click()
    drawing = page.locator("#agent-table tr.graph-row svg.graph-drawing")
    expect(drawing.locator("text.graph-center")).to_have_text("agent: seller")
    expect(drawing.locator("text[data-node='profile:default/sales']")).to_have_count(1)
    expect(drawing.locator("text[data-node='tool:default/orders']")).to_have_count(1)
    page.get_by_role("button", name="Graph of seller").click()
    expect(drawing).to_have_count(0)

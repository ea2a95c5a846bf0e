"""Every field of a registry row and of the tool drawer (issue 11 item 1), in a real Chromium
against a real ``toolkeeper serve``: the row's bucket and subtype badges, status, version,
side effect and risk; in the drawer the input and output schemas as tables, the redacted
implementation (a secret stays a reference) and the execution config, the definition hash,
and each version with its snapshot — all as the API reports them."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from playwright.sync_api import expect

from tests.support.serve import Server, TokenSpec, serving_toolkeeper
from tests.ui.conftest import ConsolePage
from tests.ui.shown import short

ORDERS = {
    "name": "orders", "description": "Order look-up", "implementation_type": "http",
    "side_effect": "idempotent", "risk_default": "high",
    "implementation_config": {"url": "https://orders.example/api", "method": "GET",
                              "headers": {"Authorization": "Bearer ${secret:orders/key}"}},
    "input_schema": {"type": "object", "required": ["id"], "properties": {
        "id": {"type": "string", "description": "The order id"}}},
    "output_schema": {"type": "object", "properties": {
        "total": {"type": "number", "description": "Order total"},
        "lines": {"type": "array", "items": {"type": "string"}}}},
}


@pytest.fixture(scope="module")
def orders(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    tokens = {"admin": TokenSpec("admin")}
    with serving_toolkeeper(tmp_path_factory.mktemp("ui-drawer"), "version: 1\n", tokens) as srv:
        made = _rest(srv, "POST", "/tools", json=ORDERS)
        _rest(srv, "POST", f"/tools/{made['id']}/publish")
        _rest(srv, "POST", f"/tools/{made['id']}/version?new_version=1.1.0")
        yield srv


def _rest(server: Server, method: str, path: str, **kw: Any) -> Any:
    resp = httpx.request(method, server.url + path, timeout=30, **kw,
                         headers={"Authorization": f"Bearer {server.tokens['admin']}"})
    assert resp.status_code < 400, resp.text
    return resp.json()


def test_the_row_and_the_drawer_show_what_the_api_holds(console_page: ConsolePage,
                                                        orders: Server) -> None:
    tool = next(t for t in _rest(orders, "GET", "/tools") if t["name"] == "orders")
    versions = _rest(orders, "GET", f"/tools/{tool['id']}/versions")
    assert [v["version"] for v in versions] == ["1.1.0", "1.0.0"] or \
        [v["version"] for v in versions] == ["1.0.0", "1.1.0"], versions
    page = console_page.page
    page.goto(orders.url + "/ui/#tools")
    page.get_by_label("token").fill(orders.tokens["admin"])
    page.get_by_role("button", name="Use token").click()
    row = page.locator("#tools tbody tr[data-tool=orders]")
    expect(row.locator("td")).to_have_text(
        ["orders", "custom http", "published", "1.1.0", "idempotent", "high"])
    expect(row.locator(".badge")).to_have_text(["custom", "http"])

    row.get_by_role("button", name="orders").click()
    drawer = page.locator("#drawer-body")
    summary = {k: v for k, v in zip(drawer.locator("dl.summary dt").all_inner_texts(),
                                    drawer.locator("dl.summary dd").all_inner_texts(),
                                    strict=True)}
    digest = drawer.locator("dl.summary dd .shortid")  # shortened, the whole hash copyable
    expect(digest).to_have_attribute("data-id", tool["definition_hash"])
    assert summary["definition hash"].startswith(short(tool["definition_hash"]))
    assert (summary["bucket"], summary["subtype"], summary["version"]) == (
        "custom", "http", "1.1.0")
    schemas = drawer.locator("table.schema")
    expect(schemas).to_have_count(2)
    expect(schemas.nth(0).locator("tbody tr td")).to_have_text(
        ["id", "string", "yes", "The order id"])
    expect(schemas.nth(1).locator("tbody tr td")).to_have_text(
        ["total", "number", "no", "Order total", "lines", "array of string", "no", ""])
    # Versions and Dependencies are appended after their own fetches: wait for the last
    # part before reading the parts, or a slow run reads the drawer half built.
    expect(drawer.locator(".drawer-part h3").last).to_have_text("Dependencies")
    parts = {p.locator("h3").inner_text(): p for p in drawer.locator(".drawer-part").all()}
    implementation = json.loads(parts["Implementation (redacted)"].locator("pre").inner_text())
    assert implementation == tool["config_schema"]["implementation"]
    assert implementation["headers"] == {"Authorization": "Bearer ${secret:orders/key}"}
    execution = json.loads(parts["Execution"].locator("pre").inner_text())
    assert execution == tool["config_schema"]["execution"] and execution

    table = parts["Versions"].locator("table.versions tbody tr")
    expect(table).to_have_count(len(versions))
    for i, version in enumerate(versions):
        cells = table.nth(i).locator("td")
        expect(cells.nth(0)).to_have_text(version["version"])
        if version["definition_hash"]:
            expect(cells.nth(2).locator(".shortid")).to_have_attribute(
                "data-id", version["definition_hash"])
        cells.nth(3).locator("summary").click()
        snapshot = json.loads(cells.nth(3).locator("pre").inner_text())
        assert snapshot == version["tool"]
    assert console_page.console.errors == []

"""The create / edit tool dialog of the admin console (issue 11 item 2), in a real Chromium
against a real ``toolkeeper serve``: an admin creates an HTTP tool whose header is a secret
reference, saves the draft, publishes it, and makes a new version (a bad semver refused in
the page, then 1.1.0 accepted); a literal secret header is refused in the page; a function
tool is wired with the allow-list picker; an invalid input schema shows the API's reason;
Escape closes the dialog and focus returns; an approver sees neither New tool nor Edit."""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest
from playwright.sync_api import Locator, Page, expect

from tests.support.serve import Server, TokenSpec, serving_toolkeeper
from tests.support.waiting import wait_until
from tests.ui.conftest import ConsolePage

CONFIG = """\
version: 1
functions:
  dedent: textwrap:dedent
  shorten: textwrap:shorten
tools:
  - builtin: calculate
"""


@pytest.fixture(scope="module")
def dialog_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    tokens = {"admin": TokenSpec("admin"), "approver": TokenSpec("approver")}
    work = tmp_path_factory.mktemp("ui-dialog")  # serve reads its functions: allow-list
    with serving_toolkeeper(work, CONFIG, tokens,
                            TOOLKEEPER_CONFIG=str(work / "toolkeeper.yaml")) as srv:
        yield srv


def form(page: Page) -> Locator:
    """The tool dialog: its labels share words with other tabs' forms."""
    return page.locator("#tool-dialog")


def _tools(page: Page, server: Server, who: str) -> None:
    page.goto(server.url + "/ui/#tools")
    page.get_by_label("token").fill(server.tokens[who])
    page.get_by_role("button", name="Use token").click()
    expect(page.locator("#status")).to_have_text(re.compile(r"^\d+ of \d+ tools$"))


def _row(page: Page, name: str) -> object:
    return page.locator(f"#tools tbody tr[data-tool={name}]")


def test_http_tool_draft_publish_and_new_version(console_page: ConsolePage,
                                                 dialog_server: Server) -> None:
    page = console_page.page
    _tools(page, dialog_server, "admin")
    page.get_by_role("button", name="New tool").click()
    dialog = page.get_by_role("dialog", name="New tool")
    expect(dialog).to_be_visible()
    expect(form(page).get_by_label("Name", exact=True)).to_be_focused()
    form(page).get_by_label("Name", exact=True).fill("orders")
    form(page).get_by_label("Description").fill("Places an order")
    form(page).get_by_label("Method").select_option("POST")
    form(page).get_by_label("URL").fill("https://orders.example/api")
    headers = form(page).get_by_label(re.compile("^Headers"))
    headers.fill("Authorization: Bearer hunter2")  # a literal credential: refused here
    page.get_by_role("button", name="Save draft").click()
    result = page.locator("#tooledit-result")
    expect(result).to_have_text(re.compile(r"^secret_literal_refused: header Authorization"))
    headers.fill("Authorization: Bearer ${secret:orders/token}\nAccept: application/json")
    form(page).get_by_label("Input schema").fill(
        '{"type": "object", "required": ["sku"], "properties": {"sku": {"type": "string"}}}')
    form(page).get_by_label("Risk").select_option("high")
    form(page).get_by_label("Side effect").select_option("idempotent")
    form(page).get_by_label("Scopes").fill("orders:write, orders:read")
    form(page).get_by_label("Requires confirmation").check()
    page.get_by_role("button", name="Save draft").click()
    expect(result).to_have_text("Saved orders 1.0.0 (draft)")
    row = page.locator("#tools tbody tr[data-tool=orders]")
    expect(row).to_contain_text("draft")
    expect(row).to_contain_text("high")

    page.get_by_role("button", name="Publish").click()
    expect(result).to_have_text("Published orders 1.0.0")
    expect(row.locator(".status")).to_have_text("published")

    form(page).get_by_label("New version").fill("1.1")
    page.get_by_role("button", name="Make version").click()
    expect(result).to_have_text('invalid_version: "1.1" is not semver X.Y.Z')
    form(page).get_by_label("New version").fill("0.9.0")
    page.get_by_role("button", name="Make version").click()
    expect(result).to_have_text("invalid_version: 0.9.0 must be greater than 1.0.0")
    form(page).get_by_label("New version").fill("1.1.0")
    page.get_by_role("button", name="Make version").click()
    expect(result).to_have_text("Version 1.1.0 of orders published")
    expect(row).to_contain_text("1.1.0")
    page.keyboard.press("Escape")
    expect(dialog.or_(page.get_by_role("dialog", name=re.compile("orders")))).to_be_hidden()
    expect(page.get_by_role("button", name="New tool")).to_be_focused()
    assert console_page.console.errors == []

    # the drawer's Edit opens the saved tool: its header stays a reference
    row.locator("button.link").click()
    page.locator("#tool-drawer").get_by_role("button", name="Edit").click()
    expect(page.get_by_role("dialog", name="Edit orders 1.1.0")).to_be_visible()
    expect(headers).to_have_value(re.compile(r"\$\{secret:orders/token\}"))
    expect(form(page).get_by_label("Requires confirmation")).to_be_checked()
    form(page).get_by_label("Description").fill("Places an order (edited)")
    page.get_by_role("button", name="Save draft").click()
    expect(result).to_have_text(re.compile(r"^Saved orders 1\.1\.0 \((draft|published)\)$"))
    # the form is refilled from the API's answer: the change was stored
    expect(form(page).get_by_label("Description")).to_have_value("Places an order (edited)")
    page.keyboard.press("Escape")
    expect(page.locator("#tool-dialog")).to_be_hidden()
    wait_until(lambda: page.evaluate(  # focus back on the row's name (re-rendered table)
        "document.activeElement.matches('#tools tbody tr[data-tool=orders] button.link')"),
        what="focus back on the orders row")
    assert console_page.console.errors == []


def test_function_tool_from_the_allow_list_and_a_bad_schema(console_page: ConsolePage,
                                                            dialog_server: Server) -> None:
    page = console_page.page
    _tools(page, dialog_server, "admin")
    page.get_by_role("button", name="New tool").click()
    form(page).get_by_label("Name", exact=True).fill("tidy")
    page.locator("#te-type").select_option("function")
    picker = form(page).get_by_label(re.compile("^Registered function"))
    expect(picker.locator("option")).to_have_text(["dedent", "shorten"])
    picker.select_option("shorten")
    schema = form(page).get_by_label("Input schema")
    schema.fill('{"type": "object",')  # not JSON: refused in the page
    page.get_by_role("button", name="Save draft").click()
    result = page.locator("#tooledit-result")
    expect(result).to_have_text(re.compile(r"^invalid_arguments: the input schema is not JSON"))
    schema.fill('{"type": "object", "properties": {"text": {"type": "nonsense"}}}')
    page.get_by_role("button", name="Save draft").click()  # JSON, but no JSON Schema: the API
    expect(result).to_have_text(re.compile(
        r"^422 invalid_arguments: input_schema is not a valid JSON Schema"))
    refused = list(console_page.console.errors)
    assert refused and all("422" in e for e in refused), refused
    schema.fill('{"type": "object", "properties": {"text": {"type": "string"}}}')
    page.get_by_role("button", name="Save draft").click()
    expect(result).to_have_text("Saved tidy 1.0.0 (draft)")
    row = page.locator("#tools tbody tr[data-tool=tidy]")
    expect(row).to_contain_text("function")
    assert console_page.console.errors == refused


def test_an_approver_sees_no_new_or_edit(console_page: ConsolePage,
                                         dialog_server: Server) -> None:
    page = console_page.page
    _tools(page, dialog_server, "approver")
    expect(page.locator("#tools tbody tr[data-tool=calculate]")).to_be_visible()
    expect(page.get_by_role("button", name="New tool")).to_be_hidden()
    page.locator("#tools tbody tr[data-tool=calculate] button.link").click()
    expect(page.locator("#drawer-body table.versions, #drawer-body p.hint").last).to_be_visible()
    expect(page.locator("#tool-drawer").get_by_role("button", name="Edit")).to_have_count(0)


def test_the_dialog_by_keyboard_alone(console_page: ConsolePage, dialog_server: Server) -> None:
    """Enter in a field saves the draft (implicit submission), Escape closes the dialog and the
    keyboard is back on New tool (issue 11 item 6)."""
    page = console_page.page
    _tools(page, dialog_server, "admin")
    page.get_by_role("button", name="New tool").focus()
    page.keyboard.press("Enter")
    name = form(page).get_by_label("Name", exact=True)
    expect(name).to_be_focused()
    page.keyboard.type("bykeys")
    page.keyboard.press("Tab")
    expect(form(page).get_by_label("Description")).to_be_focused()
    form(page).get_by_label("URL").fill("https://keys.example/api")
    name.focus()
    page.keyboard.press("Enter")
    expect(page.locator("#tooledit-result")).to_have_text("Saved bykeys 1.0.0 (draft)")
    page.keyboard.press("Escape")
    expect(page.get_by_role("dialog")).to_have_count(0)
    expect(page.get_by_role("button", name="New tool")).to_be_focused()

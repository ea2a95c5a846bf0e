"""The whole operator scenario of the admin console (issue 11 item 7), in a real Chromium
against a real ``toolkeeper serve``: the admin creates an HTTP tool in the tool dialog
(pointed at a loopback server this test runs, reachable through the operator's
``tenant_bounds``), publishes it, gives an agent with no tools a profile with the Tool
Picker; the agent's call waits for approval, the approver approves it in the inbox, the
retry succeeds and reaches the upstream exactly once (a replay does not send again); the
Audit tab shows the call's events and an intact hash chain.

The same run renders the console's main views to PNGs at 1280 px: into ``tmp_path`` always
(each checked to be a PNG of the right size), into docs/screenshots with
``TOOLKEEPER_UPDATE_SCREENSHOTS=1`` (``make screenshots``)."""

from __future__ import annotations

import json
import os
import re
import struct
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest
from playwright.sync_api import Browser, Page, expect

from tests.support.serve import Server, TokenSpec, serving_toolkeeper
from tests.ui.conftest import Console

CONFIG = """\
version: 1
settings:
  tenant_bounds: {networks: [127.0.0.0/8]}
tools:
  - builtin: calculate
profiles:
  - {name: desk, autonomy: 0}
agents:
  - {name: order-bot, profile: desk}
"""
"""``order-bot`` starts with no tools; at autonomy 0 a high-risk call waits for approval."""

SHOTS = Path(__file__).resolve().parents[2] / "docs" / "screenshots"
WIDTH, HEIGHT = 1280, 800
MASKED = ("#token-table td:nth-child(6)", "#call-table td:nth-child(6)",
          "#recent-table td:nth-child(6)",
          "#audit-table td:nth-child(6)", "#audit-call",
          "article.approval dt:has-text('call id') + dd")
"""Ids that change on every run, masked in the screenshots."""


class Upstream:
    """A loopback HTTP endpoint that records the body of every request it receives."""

    def __init__(self) -> None:
        self.bodies: list[Any] = []
        lock = threading.Lock()
        bodies = self.bodies

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                with lock:
                    bodies.append(json.loads(raw or b"null"))
                out = json.dumps({"order": "ord-1", "accepted": True}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(out)))
                self.end_headers()
                self.wfile.write(out)

            def log_message(self, *args: Any) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/orders"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)


@pytest.fixture
def upstream() -> Iterator[Upstream]:
    up = Upstream()
    up.thread.start()
    try:
        yield up
    finally:
        up.httpd.shutdown()
        up.httpd.server_close()


@pytest.fixture(scope="module")
def scenario_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    tokens = {"admin": TokenSpec("admin"), "approver": TokenSpec("approver"),
              "agent": TokenSpec("agent", "order-bot")}
    work = tmp_path_factory.mktemp("ui-scenario")  # serve reads settings from its config
    with serving_toolkeeper(work, CONFIG, tokens,
                            TOOLKEEPER_CONFIG=str(work / "toolkeeper.yaml")) as srv:
        yield srv


class Shots:
    """Saves a viewport PNG per view into ``tmp_path``, and into docs/screenshots when
    ``TOOLKEEPER_UPDATE_SCREENSHOTS=1``."""

    def __init__(self, tmp: Path) -> None:
        self.dirs = [tmp]
        if os.environ.get("TOOLKEEPER_UPDATE_SCREENSHOTS") == "1":
            SHOTS.mkdir(parents=True, exist_ok=True)
            self.dirs.append(SHOTS)
        self.taken: list[Path] = []

    def take(self, page: Page, name: str) -> None:
        page.evaluate("document.activeElement && document.activeElement.blur()")
        data = page.screenshot(animations="disabled", caret="hide",
                               mask=[page.locator(sel) for sel in MASKED],
                               mask_color="#d5dae3")
        for d in self.dirs:
            (d / f"{name}.png").write_bytes(data)
        self.taken.append(self.dirs[0] / f"{name}.png")


def png_size(data: bytes) -> tuple[int, int]:
    """Width and height from a PNG's IHDR (fails on anything else)."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    assert data[12:16] == b"IHDR"
    width, height = struct.unpack(">II", data[16:24])
    return int(width), int(height)


def _login(page: Page, server: Server, who: str, hash_: str = "") -> None:
    page.goto(server.url + "/ui/" + hash_)
    page.get_by_label("token").fill(server.tokens[who])
    page.get_by_role("button", name="Use token").click()
    page.get_by_label("token").fill("")  # no secret in a screenshot


def _execute(server: Server, **fields: Any) -> dict[str, Any]:
    body = {"tool": "place_order", "arguments": {"sku": "A-1", "qty": 2}, **fields}
    resp = httpx.post(server.url + "/tools/execute", json=body, timeout=30,
                      headers={"Authorization": f"Bearer {server.tokens['agent']}"})
    result: dict[str, Any] = resp.json()
    if "error" in result:  # a refusal: its reason next to the call's details
        return {**result["error"]["details"], "reason": result["error"]["reason"]}
    return result


def _new_page(browser: Browser) -> tuple[Page, Console]:
    page = browser.new_context(viewport={"width": WIDTH, "height": HEIGHT}).new_page()
    console = Console()
    page.on("console", console.on_console)
    page.on("pageerror", console.on_error)
    page.set_default_timeout(10_000)
    return page, console


def _create_tool(page: Page, upstream: Upstream, shots: Shots) -> None:
    dialog = page.locator("#tool-dialog")
    page.get_by_role("button", name="New tool").click()
    dialog.get_by_label("Name", exact=True).fill("place_order")
    dialog.get_by_label("Description").fill("Places an order with the warehouse")
    dialog.locator("#te-type").select_option("http")
    dialog.get_by_label("URL").fill(upstream.url)
    dialog.get_by_label("Private networks").fill("127.0.0.0/8")
    expect(dialog.locator("fieldset.te-kind:visible")).to_have_count(1)  # HTTP's only
    dialog.get_by_label("Input schema").fill(json.dumps(
        {"type": "object", "required": ["sku", "qty"],
         "properties": {"sku": {"type": "string"}, "qty": {"type": "integer"}}}))
    dialog.get_by_label("Risk").select_option("high")
    dialog.get_by_label("Side effect").select_option("irreversible")
    shots.take(page, "tool-dialog")
    page.get_by_role("button", name="Save draft").click()
    result = page.locator("#tooledit-result")
    expect(result).to_have_text("Saved place_order 1.0.0 (draft)")
    # the form is refilled from the API's answer: the networks were stored
    expect(dialog.get_by_label("Private networks")).to_have_value("127.0.0.0/8")
    page.get_by_role("button", name="Publish").click()
    expect(result).to_have_text("Published place_order 1.0.0")
    page.keyboard.press("Escape")
    row = page.locator("#tools tbody tr[data-tool=place_order]")
    expect(row.locator(".status")).to_have_text("published")
    expect(row).to_contain_text("high")
    row.locator("button.link").click()
    expect(page.locator("#tool-drawer")).to_be_visible()
    shots.take(page, "registry")
    page.locator("#drawer-close").click()


def _pick_tool(page: Page, shots: Shots) -> None:
    agents = page.locator("#agents")
    page.get_by_role("button", name="Agents", exact=True).click()
    expect(page.locator("#status")).to_have_text(re.compile(r"\d+ agents, \d+ profiles"))
    agents.locator('#profile-table tr[data-profile="desk"]').get_by_role(
        "button", name="Edit").click()
    agents.get_by_label("Picker search").fill("place")
    agents.locator("#picker-groups").get_by_role(
        "checkbox", name=re.compile("^ ?place_order ")).check()
    expect(agents.locator("#picker-count")).to_have_text("1 selected: place_order")
    shots.take(page, "tool-picker")
    agents.get_by_role("button", name="Save profile").click()
    expect(agents.locator("#agents-result")).to_have_text("profile desk saved: 1 tools")


def test_the_operator_scenario_end_to_end(browser: Browser, scenario_server: Server,
                                          upstream: Upstream, tmp_path: Path) -> None:
    server, shots = scenario_server, Shots(tmp_path)
    refused = _execute(server)
    assert (refused["status"], refused["reason"]) == ("denied", "tool_not_found")

    page, console = _new_page(browser)
    _login(page, server, "admin", "#tools")
    expect(page.locator("#status")).to_have_text(re.compile(r"^\d+ of \d+ tools$"))
    _create_tool(page, upstream, shots)
    _pick_tool(page, shots)

    waiting = _execute(server, idempotency_key="order-A-1")
    assert waiting["status"] == "approval_required", waiting
    approval_id = waiting["approval_id"]
    assert upstream.bodies == []

    approver, approver_console = _new_page(browser)
    _login(approver, server, "approver", "#approvals")
    card = approver.locator(f'article.approval[data-id="{approval_id}"]')
    expect(card).to_contain_text("place_order")
    shots.take(approver, "approvals")
    approver.emulate_media(color_scheme="dark")  # the console follows the system setting
    shots.take(approver, "approvals-dark")
    approver.emulate_media(color_scheme="light")
    card.get_by_role("button", name="Approve", exact=True).click()
    expect(approver.locator("#approval-result")).to_contain_text("approved")
    assert approver_console.errors == []

    done = _execute(server, idempotency_key="order-A-1", approval_id=approval_id)
    assert done["status"] == "succeeded", done
    assert upstream.bodies == [{"sku": "A-1", "qty": 2}]
    again = _execute(server, idempotency_key="order-A-1", approval_id=approval_id)
    assert again["status"] == "succeeded", again
    assert len(upstream.bodies) == 1  # the replay is answered from the stored outcome

    page.get_by_role("button", name="Calls", exact=True).click()
    calls = page.locator("#call-table tbody")
    expect(calls).to_contain_text("place_order")
    expect(calls).to_contain_text("succeeded")
    shots.take(page, "calls")
    page.get_by_role("button", name="Audit", exact=True).click()
    audit = page.locator("#audit")
    audit.get_by_label("Call id").fill(done["call_id"])
    audit.get_by_role("button", name="Search").click()
    rows = page.locator("#audit-table tbody")
    expect(rows).to_contain_text("call.succeeded")
    expect(rows).to_contain_text("approval.consumed")
    call_link = page.locator(f'a[href="#call/{done["call_id"]}"]')
    expect(rows.locator("tr", has_not=call_link)).to_have_count(0)
    page.get_by_role("button", name="Verify the hash chain").click()
    expect(page.locator("#verify-result")).to_have_text(re.compile(r"^intact: \d+ events"))
    shots.take(page, "audit")
    page.get_by_role("button", name="Access", exact=True).click()
    page.locator("#tier-agent").select_option("order-bot")
    expect(page.locator("#enabled-table tbody")).to_contain_text("place_order")
    shots.take(page, "access")
    assert console.errors == []
    for path in shots.taken:
        assert png_size(path.read_bytes()) == (WIDTH, HEIGHT), path
    assert sorted(p.stem for p in shots.taken) == sorted(
        ["tool-dialog", "registry", "tool-picker", "approvals", "approvals-dark", "calls", "audit",
         "access"])


def test_every_screenshot_is_in_the_console_guide_and_every_image_exists() -> None:
    guide = (SHOTS.parent / "guides" / "console.md").read_text(encoding="utf-8")
    referenced = set(re.findall(r"!\[[^\]]*\]\(\.\./(screenshots/[^)\s]+)\)", guide))
    assert referenced, "docs/guides/console.md shows no console screenshot"
    root = SHOTS.parent
    assert all((root / r).is_file() for r in referenced), referenced
    on_disk = {f"screenshots/{p.name}" for p in SHOTS.glob("*.png")}
    assert on_disk == referenced
    for path in SHOTS.glob("*.png"):
        assert png_size(path.read_bytes()) == (WIDTH, HEIGHT), path


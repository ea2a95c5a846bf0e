"""The Overview, the console's landing tab (issue 30 items 1, 4, 5), in a real Chromium against a
real ``toolkeeper serve``: known calls made through agents' tokens (two that succeeded, three
denied for two reasons, two that asked for an approval, one of them decided) are what each
chart draws (its data attributes) and what its data table says; the window picker asks for
another window; a new call appears without a reload, on the page's fake clock, and nothing is
asked while the page is hidden, on another tab or after the token is forgotten; axe-core finds
nothing serious at 1280 and 390 px in both colour schemes, the page does not scroll sideways,
the keyboard reaches the picker and every data table, and no CSP or console error is raised.
Screenshots: docs/screenshots/overview.png and overview-dark.png with
``TOOLKEEPER_UPDATE_SCREENSHOTS=1``."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from datetime import datetime
from pathlib import Path
from typing import Any, Literal
from zoneinfo import ZoneInfo

import httpx
import pytest
from playwright.sync_api import Browser, Page, Request, Route, expect

from tests.support.serve import Server, TokenSpec, serving_toolkeeper
from tests.support.waiting import wait_until
from tests.ui.a11y import assert_accessible, axe_source, horizontal_overflow
from tests.ui.conftest import Console, new_page
from tests.ui.test_operator_scenario_browser import HEIGHT, WIDTH, Shots

CONFIG = """\
version: 1
tools:
  - native: tests.support.replica_tools:pay
  - native: tests.support.replica_tools:echo
profiles:
  - {name: payer, autonomy: 0, activations: [{tool: pay}]}
  - {name: runner, autonomy: 1, activations: [{tool: echo}]}
agents:
  - {name: pay-bot, profile: payer}
  - {name: echo-bot, profile: runner}
"""
"""``echo`` (low risk) runs at autonomy 1; ``pay`` (high risk) waits for an approval at 0."""

SUCCEEDED = 2
DENIALS = {"tool_not_found": 2, "invalid_arguments": 1}
ASKED, DECIDED = 2, 1
ALL = SUCCEEDED + sum(DENIALS.values()) + ASKED
RETIRED = "old_lookup"
QUIET_MS = 700
"""Real time given to a request the fake clock may have started, before counting."""

pytestmark = pytest.mark.slow


def _execute(server: Server, agent: str, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    result: dict[str, Any] = httpx.post(
        server.url + "/tools/execute", json={"tool": tool, "arguments": arguments}, timeout=30,
        headers={"Authorization": f"Bearer {server.tokens[agent]}"}).json()
    return result["error"]["details"] if "error" in result else result  # a refusal's call


def _stats(server: Server, window: str = "hour") -> dict[str, Any]:
    resp = httpx.get(f"{server.url}/stats/overview?window={window}", timeout=30,
                     headers={"Authorization": f"Bearer {server.tokens['admin']}"})
    assert resp.status_code == 200, resp.text
    body: dict[str, Any] = resp.json()
    return body


def _recorded(server: Server, total: int) -> dict[str, Any]:
    """The stats once the background writer has recorded ``total`` calls (bounded wait)."""
    return wait_until(lambda: (s := _stats(server))["calls"]["total"] >= total and s,
                      timeout=20, interval=0.2, what=f"{total} calls in the stats")


def _retire(server: Server, name: str) -> None:
    """A published HTTP tool of the tenant, then disabled: a tool that needs attention."""
    def admin(method: str, path: str, **kw: Any) -> Any:
        resp = httpx.request(method, server.url + path, timeout=30, **kw,
                             headers={"Authorization": f"Bearer {server.tokens['admin']}"})
        assert resp.status_code < 400, resp.text
        return resp.json()

    made = admin("POST", "/tools", json={
        "name": name, "description": "an old lookup", "implementation_type": "http",
        "side_effect": "pure", "risk_default": "low", "input_schema": {"type": "object"},
        "implementation_config": {"url": "https://example.com/x", "method": "GET"}})
    admin("POST", f"/tools/{made['id']}/publish")
    admin("PUT", f"/tools/{made['id']}", json={"status": "disabled"})


@pytest.fixture(scope="module")
def known(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """A server whose only calls are the known ones above."""
    tokens = {"admin": TokenSpec("admin"), "pay-bot": TokenSpec("agent", "pay-bot"),
              "echo-bot": TokenSpec("agent", "echo-bot")}
    work = tmp_path_factory.mktemp("ui-overview")
    with serving_toolkeeper(work, CONFIG, tokens) as srv:
        for n in range(SUCCEEDED):
            assert _execute(srv, "echo-bot", "echo", {"n": n})["status"] == "succeeded"
        for tool, args in (("no_such_tool", {}), ("no_such_tool", {"x": 1}),
                           ("echo", {"n": "not a number"})):
            denied = _execute(srv, "echo-bot", tool, args)
            assert denied["status"] == "denied" and denied["reason"] in DENIALS, denied
        asked = [_execute(srv, "pay-bot", "pay", {"invoice": f"inv-{i}", "path": str(work / "l")})
                 for i in range(ASKED)]
        assert {a["status"] for a in asked} == {"approval_required"}, asked
        httpx.post(f"{srv.url}/approvals/{asked[0]['approval_id']}/approve", json={}, timeout=30,
                   headers={"Authorization": f"Bearer {srv.tokens['admin']}"}).raise_for_status()
        _recorded(srv, ALL)
        _retire(srv, RETIRED)
        yield srv


@pytest.fixture(scope="module")
def empty(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """A server no agent has called yet."""
    with serving_toolkeeper(tmp_path_factory.mktemp("ui-overview-empty"), CONFIG,
                            {"admin": TokenSpec("admin")}) as srv:
        yield srv


def _page(browser: Browser, scheme: Literal["light", "dark"] = "light",
          width: int = 1280) -> tuple[Page, Console]:
    opened = new_page(browser, width=width, height=HEIGHT, scheme=scheme)
    return opened.page, opened.console


def _open(page: Page, server: Server) -> None:
    """Signs in and waits for the Overview, the landing tab, to be drawn."""
    page.goto(server.url + "/ui/")
    page.get_by_label("token").fill(server.tokens["admin"])
    page.get_by_role("button", name="Use token").click()
    expect(page.locator("#overview[data-generated-at]")).to_have_count(1)
    expect(page.locator("#tabs button[aria-current=page]")).to_have_text("Overview")


def _data(page: Page, figure: str, attr: str) -> Any:
    raw = page.locator(f"#ov-{figure} .ov-chart").get_attribute(f"data-{attr}")
    assert raw is not None, (figure, attr)
    return json.loads(raw)


def _table(page: Page, figure: str) -> list[list[str]]:
    rows: list[list[str]] = page.locator(f"#ov-{figure} table tbody tr").evaluate_all(
        "(rows) => rows.map((r) => [...r.cells].map((c) => c.textContent))")
    return rows


def _bars(page: Page, figure: str) -> list[float]:
    """The values Chartist drew (its ``ct:value`` on each bar), in drawing order."""
    page.locator(f"#ov-{figure} .ct-bar").first.wait_for(state="attached")
    values: list[str] = page.locator(f"#ov-{figure} .ct-bar").evaluate_all(
        "(bars) => bars.map((b) => b.getAttribute('ct:value'))")
    return [float(v) for v in values]


def test_each_chart_draws_the_known_calls(browser: Browser, known: Server) -> None:
    page, console = _page(browser)
    asked: list[str] = []
    page.on("request", lambda r: asked.append(r.url) if "/stats/overview" in r.url else None)
    _open(page, known)
    stats = _stats(known)

    by_status = _data(page, "calls", "series")
    assert by_status == stats["calls"]["by_status"]
    assert {s: sum(v) for s, v in by_status.items()} == {
        "succeeded": SUCCEEDED, "denied": sum(DENIALS.values()), "approval_required": ASKED}
    assert _data(page, "calls", "buckets") == stats["buckets"] and len(stats["buckets"]) == 60
    total = _table(page, "calls")[-1]  # the window's row: one column per status, then the sum
    assert total[1:] == [str(n) for n in (SUCCEEDED, sum(DENIALS.values()), ASKED, ALL)]
    assert sum(_bars(page, "calls")) == ALL

    assert _data(page, "denials", "denials") == DENIALS
    assert sorted(_table(page, "denials")) == sorted([r, str(n)] for r, n in DENIALS.items())
    assert sorted(_bars(page, "denials")) == sorted(DENIALS.values())

    series = _data(page, "approvals", "series")
    assert (sum(series["requested"]), sum(series["decided"])) == (ASKED, DECIDED)
    assert _table(page, "approvals")[-1][1:] == [str(ASKED), str(DECIDED)]
    wait = _data(page, "approvals", "wait")
    assert wait == stats["approvals"]["wait_ms"] and wait["max"] is not None
    pending = page.locator("#ov-approvals dd[data-key=pending]")
    expect(pending).to_have_text(str(ASKED - DECIDED))

    tools = _data(page, "slowest", "tools")
    assert tools == stats["slowest_tools"]
    assert {t["tool"]: t["calls"] for t in tools} == {"echo": SUCCEEDED}  # pay never ran
    assert [row[:2] for row in _table(page, "slowest")] == [["echo", str(SUCCEEDED)]]

    tile = page.locator("[data-tile=approvals]")
    expect(tile).to_have_attribute("data-count", str(ASKED - DECIDED))
    expect(page.locator("[data-tile=unknown]")).to_have_attribute("data-count", "0")
    tools_tile = page.locator("[data-tile=tools]")
    expect(tools_tile).to_have_attribute("data-count", "1")
    expect(tools_tile.locator(f"li[data-tool={RETIRED}]")).to_contain_text("disabled")
    for fig in ("calls", "denials", "approvals", "slowest"):
        chart = page.locator(f"#ov-{fig} .ov-chart")
        expect(chart).to_have_attribute("role", "img")
        expect(chart).to_have_attribute("aria-label", re.compile(r"\S"))
        expect(page.locator(f"#ov-{fig} figcaption")).not_to_be_empty()
    expect(page.locator("#ov-calls .ov-chart")).to_have_attribute(
        "aria-label", re.compile(f"^{ALL} calls in the last hour"))

    page.get_by_label("Window").select_option("day")
    expect(page.locator("#overview")).to_have_attribute("data-window", "day")
    assert asked[-1].endswith("/stats/overview?window=day"), asked
    assert len(_data(page, "calls", "buckets")) == 24
    assert _data(page, "denials", "denials") == DENIALS  # the same calls, in the last day
    tile.get_by_role("link").click()
    expect(page.locator("#approvals")).to_be_visible()
    assert console.errors == []
    page.context.close()


class Asks:
    """The Overview's requests (``GET /stats/overview``) the page sent."""

    def __init__(self, page: Page) -> None:
        self.count = 0
        page.on("request", self.seen)

    def seen(self, request: Request) -> None:
        if "/stats/overview" in request.url:
            self.count += 1

    def settled(self, page: Page) -> int:
        page.wait_for_timeout(QUIET_MS)
        return self.count


HIDE = """(hidden) => {
  Object.defineProperty(document, "visibilityState", {configurable: true,
                                                       get: () => hidden ? "hidden" : "visible"});
  Object.defineProperty(document, "hidden", {configurable: true, get: () => hidden});
  document.dispatchEvent(new Event("visibilitychange"));
}"""


def test_it_refreshes_while_shown_and_visible_only(browser: Browser, known: Server) -> None:
    page, console = _page(browser)
    page.clock.install()
    asks = Asks(page)
    _open(page, known)
    before = _stats(known)["calls"]["total"]
    start = asks.settled(page)

    assert _execute(known, "echo-bot", "echo", {"n": 99})["status"] == "succeeded"
    _recorded(known, before + 1)
    page.clock.run_for(10_500)  # one 10-second refresh, no reload
    expect(page.locator("#ov-calls .ov-chart")).to_have_attribute(
        "aria-label", re.compile(f"^{before + 1} calls"))
    assert asks.settled(page) == start + 1  # one request per refresh: none overlap

    page.evaluate(HIDE, True)
    hidden = asks.settled(page)
    page.clock.run_for(35_000)
    assert asks.settled(page) == hidden, "asked while the page was hidden"
    page.evaluate(HIDE, False)  # visible again: asks at once, then every 10 s
    wait_until(lambda: asks.count > hidden, timeout=10, what="a refresh when visible again")

    page.get_by_role("button", name="Calls", exact=True).click()
    on_calls = asks.settled(page)
    page.clock.run_for(35_000)
    assert asks.settled(page) == on_calls, "asked while another tab was shown"

    page.get_by_role("button", name="Overview", exact=True).click()
    expect(page.locator("#ov-calls .ov-chart")).to_be_visible()
    page.get_by_role("button", name="Forget").click()
    expect(page.locator("#overview-body")).to_be_empty()
    forgotten = asks.settled(page)
    page.clock.run_for(35_000)
    assert asks.settled(page) == forgotten, "asked after the token was forgotten"
    assert console.errors == []
    page.context.close()


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_it_is_accessible_in_both_schemes_at_both_widths(
        browser: Browser, known: Server, scheme: Literal["light", "dark"], tmp_path: Path) -> None:
    axe_source()  # skips (fails under CI=true) before any work when axe-core is missing
    for width in (WIDTH, 390):
        page, console = _page(browser, scheme, width)
        _open(page, known)
        if width == WIDTH:
            Shots(tmp_path).take(page, "overview" if scheme == "light" else "overview-dark")
        for summary in page.locator("#overview details summary").all():
            summary.click()  # the data tables are scanned too
        expect(page.locator("#overview details[open] table")).to_have_count(4)
        assert_accessible(page, f"overview, {scheme}, {width} px")
        assert horizontal_overflow(page) == 0, f"sideways scroll at {width} px ({scheme})"
        assert console.errors == []
        page.context.close()


def test_the_keyboard_reaches_the_window_picker_and_every_data_table(
        browser: Browser, known: Server) -> None:
    page, console = _page(browser)
    _open(page, known)
    picker = page.get_by_label("Window")
    for _ in range(40):
        page.keyboard.press("Tab")
        if picker.evaluate("(e) => e === document.activeElement"):
            break
    expect(picker).to_be_focused()
    page.keyboard.press("ArrowDown")  # a closed select changes with the arrows
    expect(page.locator("#overview")).to_have_attribute("data-window", "day")
    for fig in ("calls", "denials", "approvals", "slowest"):
        summary = page.locator(f"#ov-{fig} summary")
        for _ in range(20):
            if summary.evaluate("(e) => e === document.activeElement"):
                break
            page.keyboard.press("Tab")
        expect(summary).to_be_focused()
        page.keyboard.press("Enter")
        expect(page.locator(f"#ov-{fig} table")).to_be_visible()
    assert console.errors == []
    page.context.close()


def test_an_empty_store_says_what_to_do_next(browser: Browser, empty: Server) -> None:
    page, console = _page(browser)
    _open(page, empty)
    calls = page.locator("#ov-calls .ov-empty")
    expect(calls).to_contain_text("No calls in the last hour")
    expect(calls.get_by_role("link", name="Calls")).to_be_visible()
    expect(page.locator("#ov-calls .ov-chart")).to_be_hidden()
    for fig in ("denials", "approvals", "slowest"):
        expect(page.locator(f"#ov-{fig} .ov-empty")).to_be_visible()
    assert _data(page, "denials", "denials") == {}
    assert console.errors == []
    page.context.close()


def _hold_answers(page: Page) -> tuple[list[Route], Callable[[int], bool]]:
    """Holds back every request for the Overview (``route.continue_()`` lets one through):
    the held routes, and ``holding(n)``: are ``n`` held yet?"""
    held: list[Route] = []

    def holding(n: int) -> bool:
        page.wait_for_timeout(50)  # lets Playwright hand over the requests it intercepted
        return len(held) >= n

    def hold(route: Route) -> None:  # a function of ours: Playwright wraps what it is given
        held.append(route)

    page.route("**/stats/overview*", hold)
    return held, holding


def test_one_request_at_a_time_and_the_last_window_chosen_wins(browser: Browser,
                                                               known: Server) -> None:
    """Answers are held back (then let through unchanged) to see the page wait for one before
    it asks again: a window chosen meanwhile is asked for once the first answer is back, and
    the answer for a window no longer chosen is not drawn."""
    page, console = _page(browser)
    _open(page, known)
    held, holding = _hold_answers(page)
    page.get_by_label("Window").select_option("day")
    wait_until(lambda: holding(1), timeout=10, what="the day's request")
    page.get_by_label("Window").select_option("week")
    page.wait_for_timeout(QUIET_MS)
    assert [r.request.url.rsplit("=", 1)[1] for r in held] == ["day"]  # week waits its turn
    held[0].continue_()
    wait_until(lambda: holding(2), timeout=10, what="the week's request, after the day's")
    assert held[1].request.url.endswith("window=week")
    expect(page.locator("#overview")).to_have_attribute("data-window", "hour")  # day not drawn
    held[1].continue_()
    expect(page.locator("#overview")).to_have_attribute("data-window", "week")
    assert len(_data(page, "calls", "buckets")) == 168
    assert console.errors == []
    page.context.close()


def test_the_time_axis_is_in_the_browsers_time_zone(browser: Browser, known: Server) -> None:
    """Kolkata is UTC+05:30: a label in UTC would show other minutes than the one expected."""
    zone = "Asia/Kolkata"
    context = browser.new_context(viewport={"width": WIDTH, "height": HEIGHT},
                                  timezone_id=zone, locale="en-GB")
    page = context.new_page()
    page.set_default_timeout(10_000)
    _open(page, known)
    first = datetime.fromisoformat(_data(page, "calls", "buckets")[0]).astimezone(ZoneInfo(zone))
    label = page.locator("#ov-calls .ct-label.ct-horizontal").first
    expect(label).to_have_text(re.compile(rf"^0?{first.hour}:{first.minute:02d}$"))
    context.close()


def test_an_answer_asked_for_under_a_forgotten_token_is_not_drawn(
        browser: Browser, known: Server) -> None:
    """The token is forgotten and one pasted again while the Overview's request is out: its
    answer (held back, then let through) is not drawn; the page asks again, once."""
    page, console = _page(browser)
    _open(page, known)
    held, holding = _hold_answers(page)
    page.get_by_label("Window").select_option("day")
    wait_until(lambda: holding(1), timeout=10, what="the day's request")
    page.get_by_role("button", name="Forget").click()
    expect(page.locator("#overview-body")).to_be_empty()
    page.get_by_label("token").fill(known.tokens["admin"])
    page.get_by_role("button", name="Use token").click()
    expect(page.locator("#overview")).to_be_visible()
    held[0].continue_()
    wait_until(lambda: holding(2), timeout=10, what="the request of the token pasted again")
    assert page.locator("#overview").get_attribute("data-window") is None  # the old answer
    held[1].continue_()
    expect(page.locator("#overview")).to_have_attribute("data-window", "day")
    assert len(held) == 2
    assert console.errors == []
    page.context.close()

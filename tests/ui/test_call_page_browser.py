"""A call's page (issue 30 item 2, and item 5 for it), in a real Chromium against a real
``toolkeeper serve`` at ``audit_level: steps``: an agent's high-risk, compensatable ``bank.pay``
waits for an approval, an approver approves it with edits (through the REST API), the agent
re-submits, it runs, then an operator compensates its side effect. Every list (recorded calls,
recent calls, audit, the approval card) links to a call's page, by keyboard too. The page of
the call that ran shows its steps in order, the gate and why, the approver, the edited keys
side by side, the outcome, the compensation and the related calls; its agent and tool links
open that agent's row and that tool's drawer; the page of the call that asked links to the one
that ran; an unknown id says so with a way back; a story cut short says so; the browser's Back
returns to the list the page was opened from; axe-core finds nothing serious at 1280 and 390 px
in both colour schemes, nothing scrolls sideways at 390 px, and no CSP or console error is
raised. Screenshots: docs/screenshots/call-page.png and call-page-dark.png with
``TOOLKEEPER_UPDATE_SCREENSHOTS=1``."""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import httpx
import pytest
from playwright.sync_api import Browser, Locator, Page, Route, expect

from tests.support.serve import Server, TokenSpec, serving_toolkeeper
from tests.support.waiting import wait_until
from tests.ui.a11y import assert_accessible, axe_source, horizontal_overflow
from tests.ui.conftest import Console, new_page
from tests.ui.test_operator_scenario_browser import HEIGHT, WIDTH, Shots

CONFIG = """\
version: 1
settings:
  audit_level: steps
tools:
  - native: tests.api.exec_fixtures:Bank
profiles:
  - {name: manual, autonomy: 0, scopes: [bank], activations: [{tool: bank}]}
agents:
  - {name: intern, profile: manual}
"""
"""``bank.pay`` is high risk and compensatable (by ``refund``): at autonomy 0 it waits for an
approver, and its refund for a confirmation."""

INVOICE = {"invoice": "inv-30", "amount": 120}
EDITED = {"invoice": "inv-30", "amount": 100}
NOTE = "100 is the agreed price"
TURN = "turn-30"

pytestmark = pytest.mark.slow


@dataclass(frozen=True)
class Story:
    """The calls of the scenario: the one that asked, its approval, the one that ran, the
    compensation that refunded it."""

    asked: str
    approval: str
    ran: str
    compensation: str
    pending: str
    """A call still waiting for its approver (in the inbox)."""


def _rest(server: Server, who: str, method: str, path: str, **kw: Any) -> Any:
    resp = httpx.request(method, server.url + path, timeout=30, **kw,
                         headers={"Authorization": f"Bearer {server.tokens[who]}"})
    assert resp.status_code < 400, resp.text
    return resp.json()


def _pay(server: Server, arguments: dict[str, Any], **fields: Any) -> dict[str, Any]:
    body = {"tool": "bank", "action": "pay", "arguments": arguments, **fields}
    result: dict[str, Any] = _rest(server, "intern", "POST", "/tools/execute", json=body)
    return result


def _scenario(server: Server) -> Story:
    asked = _pay(server, INVOICE)
    assert asked["status"] == "approval_required", asked
    approval = asked["approval_id"]
    _rest(server, "approver", "POST", f"/approvals/{approval}/approve",
          json={"arguments": EDITED, "note": NOTE})
    ran = _pay(server, EDITED, approval_id=approval)
    assert ran["status"] == "succeeded" and ran["side_effect_id"], ran
    compensate = f"/side-effects/{ran['side_effect_id']}/compensate"
    gated = _rest(server, "operator", "POST", compensate)
    assert gated["status"] == "confirmation_required", gated
    _rest(server, "approver", "POST", f"/approvals/{gated['approval_id']}/confirm")
    comp = _rest(server, "operator", "POST", compensate)
    assert comp["status"] == "succeeded", comp
    pending = _pay(server, {"invoice": "inv-31", "amount": 5}, turn_group_id=TURN)
    assert pending["status"] == "approval_required", pending
    return Story(asked["call_id"], approval, ran["call_id"], comp["call_id"], pending["call_id"])


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Server, Story]]:
    tokens = {"admin": TokenSpec("admin"), "approver": TokenSpec("approver"),
              "operator": TokenSpec("operator"), "intern": TokenSpec("agent", "intern")}
    work = tmp_path_factory.mktemp("ui-call-page")  # serve reads settings from its config
    with serving_toolkeeper(work, CONFIG, tokens,
                            TOOLKEEPER_CONFIG=str(work / "toolkeeper.yaml")) as srv:
        yield srv, _scenario(srv)


def _page(browser: Browser, scheme: Literal["light", "dark"] = "light",
          width: int = WIDTH) -> tuple[Page, Console]:
    opened = new_page(browser, width=width, height=HEIGHT, scheme=scheme)
    return opened.page, opened.console


def _open(page: Page, server: Server, hash_: str, who: str = "admin") -> None:
    page.goto(server.url + "/ui/" + hash_)
    page.get_by_label("token").fill(server.tokens[who])
    page.get_by_role("button", name="Use token").click()


def _call_page(page: Page, call_id: str) -> None:
    expect(page.locator("#call")).to_be_visible()
    expect(page.locator("#call")).to_have_attribute("data-call-id", call_id)
    expect(page.locator("#call-title")).to_be_focused()


def test_the_page_of_a_call_approved_with_edits_then_compensated(
        browser: Browser, served: tuple[Server, Story]) -> None:
    server, story = served
    page, console = _page(browser)
    _open(page, server, "#calls")
    page.locator(f'#call-table tr[data-call-id="{story.ran}"] a[href="#call/{story.ran}"]').click()
    _call_page(page, story.ran)
    expect(page.locator("#tabs button[aria-current=page]")).to_have_count(0)
    expect(page.locator("#call-title")).to_have_text("Call of bank.pay by intern")
    head = page.locator("#call-body > dl.st-facts")
    expect(head.locator("[data-key=tool]")).to_have_text(re.compile(r"^bank\.pay version "))
    expect(head.locator("[data-key=status]")).to_have_text("succeeded")

    steps = page.locator("#call-body .st-steps li").evaluate_all(
        "(lis) => lis.map((li) => li.dataset.type)")
    api = _rest(server, "admin", "GET", f"/calls/{story.ran}/story")
    assert steps == [s["type"] for s in api["steps"]]  # every step, in the story's order
    assert steps[:3] == ["call.requested", "call.resolved", "gate.allowed"]
    assert steps.index("call.attempted") < steps.index("call.succeeded") \
        < steps.index("side_effect.compensated")
    expect(page.locator("#call-body .st-steps li").first).to_contain_text(re.compile(r"^\+0 ms"))

    gate = page.locator("[data-part=gate]")
    expect(gate.locator("[data-key=risk]")).to_have_text("high")
    expect(gate.locator("[data-key=why]")).to_have_text(f"allowed by approval {story.approval}")

    card = page.locator(f'article.st-approval[data-approval-id="{story.approval}"]')
    expect(card.locator("h4")).to_have_text("approve — consumed, with edits")
    expect(card.locator("[data-key=requested-by]")).to_have_text("intern")
    expect(card.locator("[data-key=decided-by]")).to_have_text("approver")
    expect(card.locator("[data-key=note]")).to_have_text(NOTE)
    expect(card.locator(".st-saw")).to_have_text(re.compile(r"^What they saw: \S"))
    expect(card.locator("[data-key=waited]")).to_have_text(re.compile(r"\d+(\.\d)? (ms|s|min)$"))
    changed = card.locator("table.st-diff tr[data-changed=true]")
    expect(changed).to_have_count(1)
    expect(changed).to_have_attribute("data-key", "amount")
    expect(changed.locator("td")).to_have_text(["120", "100", "edited"])  # in words, too
    expect(card.locator('table.st-diff tr[data-key=invoice] td').last).to_have_text("same")

    outcome = page.locator("[data-part=outcome]")
    expect(outcome.locator("[data-key=state]")).to_have_text("succeeded")
    expect(outcome.locator("[data-key=side-effect]")).to_have_text("compensatable")
    effect = page.locator("[data-part=effects] li")
    expect(effect).to_have_attribute("data-status", "compensated")
    expect(effect).to_contain_text("compensated — compensation call")
    expect(effect).to_contain_text("succeeded")
    expect(effect.locator(f'a[href="#call/{story.compensation}"]')).to_have_count(1)
    related = page.locator("[data-part=related] li")
    expect(related).to_have_count(2)
    expect(page.locator("[data-relation=resubmission_of] a")).to_have_attribute(
        "href", f"#call/{story.asked}")
    levels = page.locator("#call h2, #call h3, #call h4").evaluate_all(
        "(hs) => hs.map((h) => h.tagName)")
    assert levels[0] == "H2" and levels[1:7] == ["H3", "H3", "H3", "H4", "H3", "H3"], levels

    head.locator("[data-key=agent] a").click()  # that agent's row, on the Agents tab
    expect(page.locator('#agent-table tr[data-agent="intern"]')).to_have_attribute(
        "aria-current", "true")
    page.go_back()
    _call_page(page, story.ran)
    head.locator("[data-key=tool] a").click()  # the tool's drawer, on the Tools tab
    expect(page.locator("#drawer-title")).to_have_text("bank")
    expect(page.locator("#tool-search")).to_have_value("bank")
    page.get_by_role("button", name="Close the tool details").click()
    page.go_back()
    _call_page(page, story.ran)
    page.locator("[data-relation=resubmission_of] a").click()  # the call that asked
    _call_page(page, story.asked)
    expect(page.locator("[data-part=outcome]")).to_contain_text("the tool did not run")
    expect(page.locator("[data-relation=resubmitted_as] a")).to_have_attribute(
        "href", f"#call/{story.ran}")
    page.go_back()
    _call_page(page, story.ran)
    page.go_back()  # the list it came from
    expect(page.locator("#calls")).to_be_visible()
    expect(page.locator("#tabs button[aria-current=page]")).to_have_text("Calls")
    assert console.errors == []
    page.context.close()


def test_the_keyboard_reaches_the_page_its_links_and_the_way_back(
        browser: Browser, served: tuple[Server, Story]) -> None:
    server, story = served
    page, console = _page(browser)
    _open(page, server, "#audit")
    page.locator(f'#audit-table a[href="#call/{story.asked}"]').first.click()
    _call_page(page, story.asked)
    link = page.locator("[data-relation=resubmitted_as] a")
    for _ in range(40):
        page.keyboard.press("Tab")
        if link.evaluate("(e) => e === document.activeElement"):
            break
    expect(link).to_be_focused()
    page.keyboard.press("Enter")
    _call_page(page, story.ran)
    page.go_back()  # the browser's Back
    _call_page(page, story.asked)
    back = page.get_by_role("button", name="Back", exact=True)
    for _ in range(40):
        page.keyboard.press("Shift+Tab")
        if back.evaluate("(e) => e === document.activeElement"):
            break
    expect(back).to_be_focused()
    page.keyboard.press("Enter")
    expect(page.locator("#audit")).to_be_visible()
    expect(page.locator("#tabs button[aria-current=page]")).to_have_text("Audit")
    assert console.errors == []
    page.context.close()


def test_an_unknown_call_says_so_with_a_way_back(browser: Browser,
                                                 served: tuple[Server, Story]) -> None:
    server, _ = served
    page, console = _page(browser)
    _open(page, server, "#call/no-such-call")
    expect(page.locator("#call-title")).to_have_text("No such call")
    expect(page.locator("#call-body")).to_contain_text(
        "No such call (or not visible to this token): no-such-call")
    expect(page.locator("#call-title")).to_be_focused()
    page.get_by_role("button", name="Back to the calls").click()
    expect(page.locator("#calls")).to_be_visible()
    assert f"404 GET {server.url}/calls/no-such-call/story" in console.errors
    others = [e for e in console.errors if "no-such-call" not in e
              and not e.startswith("Failed to load resource: the server responded with a status "
                                   "of 404")]  # Chromium's own line for the same answer
    assert others == []
    page.get_by_role("button", name="Forget").click()
    expect(page.locator("#call-body")).to_be_empty()
    page.context.close()


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_it_is_accessible_in_both_schemes_at_both_widths(
        browser: Browser, served: tuple[Server, Story], scheme: Literal["light", "dark"],
        tmp_path: Path) -> None:
    server, story = served
    axe_source()  # skips (fails under CI=true) before any work when axe-core is missing
    for width in (WIDTH, 390):
        page, console = _page(browser, scheme, width)
        _open(page, server, f"#call/{story.ran}")
        _call_page(page, story.ran)
        if width == WIDTH:
            Shots(tmp_path).take(page, "call-page" if scheme == "light" else "call-page-dark")
        assert_accessible(page, f"call page, {scheme}, {width} px")
        assert horizontal_overflow(page) == 0, f"sideways scroll at {width} px ({scheme})"
        assert console.errors == []
        page.context.close()


def test_a_story_cut_short_says_so(browser: Browser, served: tuple[Server, Story]) -> None:
    """The server's own answer, with ``truncated`` set as a story of more than 500 events
    has it (making 500 events here would be slow)."""
    server, story = served
    page, console = _page(browser)

    def cut(route: Route) -> None:
        body = route.fetch().json()
        route.fulfill(json={**body, "truncated": True})

    page.route("**/story", cut)
    _open(page, server, f"#call/{story.ran}")
    _call_page(page, story.ran)
    expect(page.locator("#call-body .st-note")).to_have_text(re.compile(
        r"^This call has more audit events than a page shows: only the first \d+ steps"))
    assert console.errors == []
    page.context.close()


def test_a_waiting_call_and_its_copyable_id(browser: Browser,
                                           served: tuple[Server, Story]) -> None:
    server, story = served
    page, console = _page(browser)
    page.context.grant_permissions(["clipboard-read", "clipboard-write"])
    _open(page, server, f"#call/{story.pending}")
    _call_page(page, story.pending)
    expect(page.locator("#call-body > dl.st-facts [data-key=status]")).to_have_text(
        "approval required")
    expect(page.locator("#call-body > dl.st-facts [data-key=turn]")).to_contain_text(TURN)
    card = page.locator("article.st-approval")
    expect(card.locator("h4")).to_have_text("approve — pending")
    expect(card.locator("[data-key=decided-by]")).to_have_text("nobody yet")
    expect(card.locator("table.st-diff caption")).to_have_text("Arguments asked for")
    expect(card.locator("table.st-diff tr[data-key=amount] td")).to_have_text("5")
    expect(page.locator("[data-part=outcome]")).to_contain_text("No outcome recorded")
    page.locator("#call-body [data-key=call-id] button").click()
    wait_until(lambda: page.evaluate("navigator.clipboard.readText()") == story.pending,
               timeout=10, what="the call id on the clipboard")
    assert console.errors == []
    page.context.close()


def _tab_to(page: Page, target: Locator, presses: int = 120) -> None:
    for _ in range(presses):
        if target.evaluate("(e) => e === document.activeElement"):
            break
        page.keyboard.press("Tab")
    expect(target).to_be_focused()


@pytest.mark.parametrize(("tab", "scope", "which"), [
    ("#calls", "#call-table", "ran"), ("#calls", "#recent-table", "ran"),
    ("#audit", "#audit-table", "ran"), ("#approvals", "#approval-list", "pending")])
def test_every_list_links_to_the_page_and_back_returns_to_it(
        browser: Browser, served: tuple[Server, Story], tab: str, scope: str,
        which: str) -> None:
    """By keyboard: Tab to the call's link in the list, Enter; the browser's Back returns."""
    server, story = served
    call_id = getattr(story, which)
    page, console = _page(browser)
    _open(page, server, tab)
    link = page.locator(f'{scope} a[href="#call/{call_id}"]').first
    expect(link).to_be_visible()
    _tab_to(page, link)
    page.keyboard.press("Enter")
    _call_page(page, call_id)
    page.go_back()
    expect(page.locator(tab)).to_be_visible()
    expect(page.locator("#tabs button[aria-current=page]")).to_have_attribute(
        "data-tab", tab[1:])
    assert console.errors == []
    page.context.close()

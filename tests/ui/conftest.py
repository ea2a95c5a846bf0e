"""A real ``toolkeeper serve`` (SQLite, loopback) and a real Chromium driven by Playwright,
for the admin console's browser tests.

Chromium is Debian's ``chromium`` package, launched by its path (Playwright's own browser
downloads are not used). Without it the browser tests skip with a loud reason locally and
fail under ``CI=true``, so CI never goes green without having rendered the console.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Literal

import pytest
from playwright.sync_api import Browser, ConsoleMessage, Page, Response, sync_playwright

from tests.support.required import missing
from tests.support.serve import Server, TokenSpec, serving_toolkeeper

CONFIG = """\
version: 1
tools:
  - native: tests.support.replica_tools:pay
profiles:
  - {name: payer, autonomy: 0, activations: [{tool: pay}]}
agents:
  - {name: pay-bot, profile: payer}
"""
"""``pay`` is high risk: at autonomy 0 every call waits for an approver."""

_CANDIDATES = ("chromium", "chromium-browser")


def chromium_path() -> str | None:
    """Debian's Chromium on ``PATH`` (as .ci/run installs it), or ``None``."""
    for name in _CANDIDATES:
        found = shutil.which(name)
        if found:
            return found
    return None


@dataclass
class Console:
    """The page's console errors (CSP violations among them), uncaught exceptions and
    failed requests, as text."""

    errors: list[str] = field(default_factory=list)

    def on_console(self, msg: ConsoleMessage) -> None:
        if msg.type == "error":
            self.errors.append(msg.text)

    def on_error(self, exc: Exception) -> None:
        self.errors.append(f"uncaught: {exc}")

    def on_response(self, resp: Response) -> None:
        """Names the request behind a console's bare "Failed to load resource"."""
        if resp.status >= 400:
            self.errors.append(f"{resp.status} {resp.request.method} {resp.url}")


@dataclass(frozen=True)
class ConsolePage:
    page: Page
    console: Console


@pytest.fixture(scope="package")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    tokens = {"admin": TokenSpec("admin"), "approver": TokenSpec("approver"),
              "agent": TokenSpec("agent", "pay-bot")}
    with serving_toolkeeper(tmp_path_factory.mktemp("ui-server"), CONFIG, tokens) as srv:
        yield srv


def chromium_or_missing() -> str:
    """Chromium's path, or a loud skip locally and a failure under ``CI=true``."""
    path = chromium_path()
    if path is None:
        missing("NO CHROMIUM: the admin console's browser tests need Debian's `chromium` "
                "(apt-get install chromium); .ci/run installs it")
    return path


@pytest.fixture(scope="package")
def browser() -> Iterator[Browser]:
    path = chromium_or_missing()
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=path, args=["--no-sandbox"])
        try:
            yield b
        finally:
            b.close()


def new_page(browser: Browser, *, width: int = 1280, height: int = 900,
             scheme: Literal["light", "dark"] = "light") -> ConsolePage:
    """A page in a fresh context (no shared ``sessionStorage``) in colour ``scheme``, its
    console errors, uncaught exceptions and failed requests collected; close its
    ``page.context`` when done."""
    context = browser.new_context(viewport={"width": width, "height": height},
                                  color_scheme=scheme)
    page = context.new_page()
    console = Console()
    page.on("console", console.on_console)
    page.on("pageerror", console.on_error)
    page.on("response", console.on_response)
    page.set_default_timeout(10_000)
    return ConsolePage(page, console)


@pytest.fixture
def console_page(browser: Browser, server: Server) -> Iterator[ConsolePage]:
    """A fresh page (its own context: no shared ``sessionStorage``) on the console."""
    opened = new_page(browser)
    try:
        yield opened
    finally:
        opened.page.context.close()

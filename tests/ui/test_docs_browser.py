"""``/docs`` offline: Swagger UI comes from the package, so with every request off the
loopback blocked the page still renders the operations and the key expiry policy, under its
Content-Security-Policy and with a clean console."""

from __future__ import annotations

from urllib.parse import urlsplit

from playwright.sync_api import Route, expect

from tests.support.serve import Server
from tests.ui.conftest import ConsolePage
from tests.ui.test_console_browser import CSP_WATCH

LOOPBACK = {"127.0.0.1", "localhost", "::1", "[::1]"}


def test_docs_render_with_no_request_off_the_loopback(console_page: ConsolePage,
                                                      server: Server) -> None:
    page, console = console_page.page, console_page.console
    external: list[str] = []

    def only_loopback(route: Route) -> None:
        url = route.request.url
        if urlsplit(url).scheme in ("data", "blob") or urlsplit(url).hostname in LOOPBACK:
            route.continue_()
        else:
            external.append(url)
            route.abort()

    page.route("**/*", only_loopback)
    page.add_init_script(CSP_WATCH)
    page.goto(server.url + "/docs")
    operations = page.locator(".opblock")
    expect(operations.first).to_be_visible()
    expect(page.locator(".opblock-summary-path", has_text="/tools/execute").first).to_be_visible()
    assert operations.count() >= 50
    info = page.locator(".information-container")
    expect(info.get_by_role("heading", name="Key expiry policy")).to_be_visible()
    expect(info).to_contain_text("24 hours")
    # a documented operation opens, with the error shape as its errors' example
    page.locator(".opblock-summary-path", has_text="/tools/execute").first.click()
    opened = page.locator(".opblock.is-open")
    expect(opened).to_contain_text("Too Many Requests")
    expect(opened.locator(".response", has_text="429")).to_contain_text('"reason"')
    assert external == []
    assert page.evaluate("window.__csp") == []
    assert console.errors == []

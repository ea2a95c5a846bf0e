"""The admin UI's tools registry (issue 11 item 1), statically: ``registry.js`` is served
under the strict CSP, the page loads it before ``app.js`` with no inline code, it builds
its DOM without markup strings, and every endpoint it calls exists with that method."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest

import toolkeeper.ui
from tests.api.exec_fixtures import api_for
from tests.support.rest import RestClient

STATIC = Path(toolkeeper.ui.__file__).parent / "static"
CALL = re.compile(r'api\("(GET|POST|PUT|DELETE)", "(/[^"?]*)')


@pytest.fixture
def api(tmp_path: Path) -> Iterator[RestClient]:
    with api_for(f"sqlite:///{tmp_path}/ui.db") as a:
        yield a


def test_registry_script_is_served_under_the_strict_csp(api: RestClient) -> None:
    page = api.client.get("/ui/")
    scripts = re.findall(r'<script src="([^"]+)" defer></script>', page.text)
    # the registry first (app.js uses it), the approvals inbox and calls/audit after (they
    # use app.js)
    assert scripts == ["/ui/registry.js",
                       "/ui/graph.js",  # the impact list and drawings the registry uses
                       "/ui/app.js", "/ui/approvals.js", "/ui/calls.js",
                       "/ui/agents.js", "/ui/tooledit.js", "/ui/access.js",
                       "/ui/chartist.js", "/ui/overview.js",  # the Overview's charts, then it
                       "/ui/story.js"]  # a call's page
    asset = api.client.get("/ui/registry.js")
    assert asset.status_code == 200
    assert asset.headers["content-type"].startswith("text/javascript")
    csp = asset.headers["content-security-policy"]
    assert "script-src 'self'" in csp and "'unsafe-inline'" not in csp
    assert asset.headers["x-content-type-options"] == "nosniff"
    assert asset.text == (STATIC / "registry.js").read_text()


def test_registry_markup_and_script_carry_no_inline_code_or_markup_writes() -> None:
    page = (STATIC / "index.html").read_text()
    assert not re.search(r"\son[a-z]+\s*=", page), "inline event handler in index.html"
    assert "<script>" not in page and "javascript:" not in page
    for name in ("registry.js", "app.js", "tooledit.js"):
        source = (STATIC / name).read_text()
        for banned in ("innerHTML", "outerHTML", "insertAdjacentHTML", "document.write",
                       "eval(", "new Function", "setAttribute(\"on"):
            assert banned not in source, f"{name} uses {banned}"


def test_the_drawer_is_a_labelled_dialog_and_every_filter_has_a_label() -> None:
    page = (STATIC / "index.html").read_text()
    drawer = re.search(r'<aside id="tool-drawer"[^>]*>', page)
    assert drawer and 'role="dialog"' in drawer[0] and 'aria-labelledby="drawer-title"' in drawer[0]
    for control in ("tool-search", "tool-status", "tool-bucket", "tool-subtype"):
        assert re.search(rf"<label>[^<]+<(input|select) id=\"{control}\"", page), control


def test_every_endpoint_the_registry_calls_exists_with_that_method(api: RestClient) -> None:
    paths = api.client.get("/openapi.json").json()["paths"]
    calls = CALL.findall((STATIC / "registry.js").read_text())
    assert {p for _, p in calls} >= {"/tools", "/tools/"}, calls  # admin-ness: app.js, /me
    for method, prefix in calls:
        matches = [p for p, ops in paths.items() if method.lower() in ops
                   and (p == prefix or (prefix.endswith("/") and p.startswith(prefix)))]
        assert matches, f"the registry calls {method} {prefix}… which the API does not serve"

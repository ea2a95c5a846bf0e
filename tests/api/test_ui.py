"""The admin web UI (SPEC §1): a static page over the REST API, under a strict CSP."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest

import toolkeeper.ui
from tests.api.exec_fixtures import api_for
from tests.support.rest import RestClient

SCRIPTS = sorted(p for p in (Path(toolkeeper.ui.__file__).parent / "static").glob("*.js")
                 if p.name != "chartist.js")  # ours only: the vendored library is Chartist's
CALL = re.compile(r'api\("(GET|POST|PUT|DELETE)", "(/[^"?]*)')


@pytest.fixture
def api(tmp_path: Path) -> Iterator[RestClient]:
    with api_for(f"sqlite:///{tmp_path}/ui.db") as a:
        yield a


def test_the_page_and_its_assets_are_served_under_a_strict_csp(api: RestClient) -> None:
    assert api.client.get("/ui", follow_redirects=False).headers["location"] == "/ui/"
    page = api.client.get("/ui/")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    csp = page.headers["content-security-policy"]
    assert "script-src 'self'" in csp and "'unsafe-inline'" not in csp
    assert 'src="/ui/app.js"' in page.text and "<script>" not in page.text  # no inline code
    for name, kind in (("app.js", "text/javascript"), ("approvals.js", "text/javascript"),
                       ("calls.js", "text/javascript"),
                       ("app.css", "text/css"), ("favicon.svg", "image/svg+xml")):
        asset = api.client.get(f"/ui/{name}")
        assert asset.status_code == 200 and asset.headers["content-type"].startswith(kind)
    assert api.client.get("/ui/../server.py").status_code == 404
    assert api.client.get("/ui/secrets.key").status_code == 404
    assert "/ui/" not in api.client.get("/openapi.json").json()["paths"]


def test_the_script_writes_values_as_text_never_as_markup() -> None:
    assert len(SCRIPTS) >= 2
    source = "".join(script.read_text() for script in SCRIPTS)
    for banned in ("innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval(",
                   "new Function", "srcdoc"):
        assert banned not in source, banned


def test_every_endpoint_the_script_calls_exists_with_that_method(api: RestClient) -> None:
    paths = api.client.get("/openapi.json").json()["paths"]
    calls = CALL.findall("".join(script.read_text() for script in SCRIPTS))
    assert len(calls) >= 6, calls
    for method, prefix in calls:
        # a literal path, or the literal start of one completed by the script ("/tools/" + id)
        matches = [p for p, ops in paths.items() if method.lower() in ops
                   and (p == prefix or (prefix.endswith("/") and p.startswith(prefix)))]
        assert matches, f"the UI calls {method} {prefix}… which the API does not serve"

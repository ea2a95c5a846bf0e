"""The CSRF Origin check compares origins as browsers send them: a public URL written with
its default port (``https://host:443``) is the origin ``https://host``; another scheme,
host or port, ``null``, or a host hidden after user info is not the console's origin."""

from __future__ import annotations

from typing import Any, cast

import pytest

from toolkeeper.config.sso import SsoConfig, compiled
from toolkeeper.identity.sso import Sso
from toolkeeper.identity.sso_session import same_origin

SECTION: dict[str, Any] = {
    "issuer": "https://idp.example", "client_id": "console",
    "claims": {"tenant": "acme", "roles": [{"claim": "groups", "value": "x",
                                            "role": "approver"}]}}


def _sso(public_url: str) -> Sso:
    cfg = SsoConfig.model_validate({**SECTION, "public_url": public_url})
    return Sso(compiled(cfg), cast(Any, None))


@pytest.mark.parametrize(("public_url", "origin"), [
    ("https://tools.example.com:443", "https://tools.example.com"),
    ("https://tools.example.com", "https://tools.example.com"),
    ("https://Tools.Example.com/", "https://tools.example.com"),
    ("http://127.0.0.1:8080", "http://127.0.0.1:8080"),
    ("http://tools.example.com:80", "http://tools.example.com"),
    ("http://[::1]:8080", "http://[::1]:8080"),
])
def test_the_consoles_own_origin_is_accepted(public_url: str, origin: str) -> None:
    sso = _sso(public_url)
    assert same_origin(sso, {"origin": origin})
    assert same_origin(sso, {"referer": origin + "/ui/"})


@pytest.mark.parametrize("origin", [
    "http://tools.example.com", "https://tools.example.com:8443", "https://evil.example",
    "https://tools.example.com.evil.example", "https://tools.example.com@evil.example",
    "null", "", "https://", "https://tools.example.com:99999"])
def test_another_origin_is_refused(origin: str) -> None:
    sso = _sso("https://tools.example.com:443")
    assert not same_origin(sso, {"origin": origin})
    assert not same_origin(sso, {"referer": origin + "/ui/"})
    assert not same_origin(sso, {})

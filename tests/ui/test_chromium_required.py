"""Without Chromium the browser tests skip with a loud reason locally and fail under
``CI=true`` (issue 11 item 7): CI never goes green without having rendered the console."""

from __future__ import annotations

import pytest

from tests.ui import conftest


def test_a_missing_chromium_skips_loudly_and_fails_under_ci(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(conftest.shutil, "which", lambda name: None)
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception, match=r"NO CHROMIUM: .*apt-get install chromium"):
        conftest.chromium_or_missing()
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="NO CHROMIUM"):
        conftest.chromium_or_missing()


def test_chromium_is_found_on_the_path_when_installed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(conftest.shutil, "which",
                        lambda name: "/usr/bin/chromium" if name == "chromium" else None)
    assert conftest.chromium_or_missing() == "/usr/bin/chromium"

"""Without ``.venv-strands`` the Strands tests skip loudly on a developer's machine and fail
under ``CI=true`` (where ``make test`` has made it): CI never goes green without them."""

from __future__ import annotations

from pathlib import Path

import pytest

import tests.adapters.strands_support as support


def test_a_missing_strands_venv_skips_loudly_locally(tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(support, "STRANDS_PYTHON", tmp_path / "bin" / "python")
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception, match=r"SKIPPED LOUDLY.*make strands"):
        support.strands_python()


def test_a_missing_strands_venv_fails_under_ci(tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(support, "STRANDS_PYTHON", tmp_path / "bin" / "python")
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="make strands"):
        support.strands_python()

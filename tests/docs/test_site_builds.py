"""The documentation site builds with ``mkdocs build --strict`` (as ``make docs`` does), so
a broken link or anchor, a page left out of the nav or a failing reference generator stops
``make test``; and the strict settings of mkdocs.yml do refuse each of those."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.support.docs import REPO
from tests.support.processes import child_env

# MkDocs 1.6 prints a banner about its successor on every build
ENV = {"NO_MKDOCS_2_WARNING": "1"}


def mkdocs_build(config: Path, site: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--config-file", str(config),
         "--site-dir", str(site)],
        cwd=REPO, env=child_env(**ENV), capture_output=True, text=True, timeout=300,
        check=False)


def test_the_site_builds_strict_with_every_reference_page(tmp_path: Path) -> None:
    done = mkdocs_build(REPO / "mkdocs.yml", tmp_path)
    assert done.returncode == 0, done.stderr[-4000:]
    for page in ("reasons", "rest", "cli", "config", "metrics", "builtins"):
        assert (tmp_path / "reference" / page / "index.html").is_file(), page
    assert "gate_denied" in (tmp_path / "reference/reasons/index.html").read_text()
    assert (tmp_path / "index.html").is_file()
    assert (tmp_path / "search" / "search_index.json").is_file()
    assert (tmp_path / "screenshots" / "approvals.png").is_file()
    # not for the site: the helpers' notes and the generator's own code
    for absent in ("api-notes-for-helpers", "hooks.py", "gen"):
        assert not list(tmp_path.glob(f"{absent}*")), absent
    assert [p for p in tmp_path.rglob("*") if p.suffix in (".py", ".pyc")] == []


BROKEN_PAGES = {
    "a link to a missing anchor": ("See [there](b.md#no-such-heading).", ["a.md", "b.md"]),
    "a link to a missing page": ("See [there](missing.md).", ["a.md", "b.md"]),
    "a page left out of the nav": ("See [there](b.md#a-heading).", ["a.md"]),
    "nothing broken": ("See [there](b.md#a-heading).", ["a.md", "b.md"]),
}


@pytest.mark.parametrize("case", sorted(BROKEN_PAGES))
def test_the_strict_settings_refuse_a_broken_page(case: str, tmp_path: Path) -> None:
    """Our mkdocs.yml's settings (strict, validation, theme, extensions) over two small
    pages: one broken fails the build; the same pages unbroken build (so the failures are
    the breakage, not the setup)."""
    text, nav = BROKEN_PAGES[case]
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.md").write_text(f"# A\n\n{text}\n")
    (docs / "b.md").write_text("# B\n\n## A heading\n")
    ours = yaml.safe_load((REPO / "mkdocs.yml").read_text())
    assert ours["strict"] is True
    config = {key: ours[key] for key in ("site_name", "strict", "validation", "theme",
                                         "markdown_extensions")}
    (tmp_path / "mkdocs.yml").write_text(yaml.safe_dump(config | {"docs_dir": str(docs),
                                                                  "nav": nav}))
    done = mkdocs_build(tmp_path / "mkdocs.yml", tmp_path / "site")
    if case == "nothing broken":
        assert done.returncode == 0, done.stderr[-2000:]
    else:
        assert done.returncode != 0, f"{case}: built anyway\n{done.stderr[-2000:]}"

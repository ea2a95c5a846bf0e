"""The site's pages render as MkDocs renders them (Python-Markdown), which differs from
GitHub's Markdown where a page written for GitHub silently renders wrong: a list right after
a paragraph line (no blank line between, also inside a list item) is run into the paragraph
as plain text, and a list nested by two spaces comes out flat. Each page of docs/ is
rendered with mkdocs.yml's extensions and refused when either happens."""

from __future__ import annotations

import re
from typing import Any

import markdown
import pytest
import yaml

from tests.support.docs import REPO, pages

FENCE = re.compile(r"^ *(```|~~~)")
LEAKED = re.compile(r"^\s*([-*+]|1[.)]) \S")  # CommonMark: only "1." starts a list in a paragraph
NESTED_BY_TWO = re.compile(r"^ {1,3}([-*+]|\d+[.)]) \S")


def renderer() -> markdown.Markdown:
    """Python-Markdown with the extensions (and their settings) of mkdocs.yml."""
    names: list[str] = []
    configs: dict[str, Any] = {}
    for ext in yaml.safe_load((REPO / "mkdocs.yml").read_text())["markdown_extensions"]:
        if isinstance(ext, dict):
            (name, settings), = ext.items()
            names.append(name)
            configs[name] = settings or {}
        else:
            names.append(ext)
    return markdown.Markdown(extensions=names, extension_configs=configs)


def misrendered(text: str) -> list[str]:
    """Why each list of ``text`` would not render as the list it is on GitHub."""
    html = re.sub(r"<pre.*?</pre>", "", renderer().convert(text), flags=re.S)
    found = [f"a list run into the text before it (add a blank line): {line.strip()[:60]}"
             for line in html.splitlines() if LEAKED.match(line)]
    fenced, prev_item = False, False
    for n, line in enumerate(text.splitlines(), 1):
        if FENCE.match(line):
            fenced = not fenced
        if fenced or not line.strip():
            continue
        if NESTED_BY_TWO.match(line) and prev_item:
            found.append(f"line {n}: a nested list needs four spaces: {line.strip()[:60]}")
        prev_item = bool(LEAKED.match(line)) or (prev_item and line.startswith(" "))
    return found


SITE_PAGES = [page for page in pages() if page.startswith("docs/")]  # README is GitHub's


@pytest.mark.parametrize("page", SITE_PAGES)
def test_page_lists_render_in_mkdocs(page: str) -> None:
    assert misrendered((REPO / page).read_text(encoding="utf-8")) == []


@pytest.mark.parametrize(("text", "why"), [
    ("Overrides combine:\n- a tenant's gates\n- a profile's\n", "run into the text"),
    ("- an item\n\n  ```yaml\n  a: 1\n  ```\n\n  more.\n- the next\n", "run into the text"),
    ("- a list\n  - nested by two\n", "four spaces"),
])
def test_a_list_github_renders_but_mkdocs_would_not_is_refused(text: str, why: str) -> None:
    assert any(why in problem for problem in misrendered(text))


def test_lists_written_for_mkdocs_pass() -> None:
    text = ("Overrides combine:\n\n- a tenant's gates,\n  continued\n- a profile's\n"
            "    - nested by four\n\n1. one\n2. two\n\n```\nnot: a list\n- in a fence\n```\n"
            "\n- an item\n\n    ```yaml\n    a: 1\n    ```\n\n    more.\n\n- the next\n")
    assert misrendered(text) == []

"""The fenced blocks of README.md and the docs pages, by key, for the tests that run them.

A block's key is ``"<page>: <heading> #<n>"``: the page's path from the repository root, the
heading it sits under (any level; ``(top)`` before the first) and its index there, e.g.
``"docs/guides/toolbox.md: In-process #0"``.
"""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
README = REPO / "README.md"
DOCS = REPO / "docs"
# notes for the people working on the code, not pages of the site (mkdocs.yml excludes it)
NOT_PAGES = {"docs/api-notes-for-helpers.md"}


def pages() -> list[str]:
    """README.md and every Markdown page under docs/, as paths from the repository root."""
    found = ["README.md", *(p.relative_to(REPO).as_posix() for p in sorted(DOCS.rglob("*.md")))]
    return [page for page in found if page not in NOT_PAGES]


def blocks(page: str) -> dict[str, tuple[str, str]]:
    """Each fenced block of ``page`` by key: its info string (language) and its text."""
    found: dict[str, tuple[str, str]] = {}
    heading, index, fence, body = "(top)", 0, None, []
    for line in (REPO / page).read_text(encoding="utf-8").splitlines():
        if fence is not None:
            if line.strip() == "```":
                text = textwrap.dedent("\n".join(body) + "\n")  # a block inside a list item
                found[f"{page}: {heading} #{index}"] = (fence, text)
                index, fence = index + 1, None
            else:
                body.append(line)
        elif line.lstrip().startswith("```"):
            fence, body = line.strip()[3:], []
        elif re.match(r"#{1,6} ", line):
            heading, index = line.lstrip("#").strip(), 0
    assert fence is None, f"an unclosed fence in {page}"
    return found


def all_blocks() -> dict[str, tuple[str, str]]:
    """The blocks of every page."""
    return {key: value for page in pages() for key, value in blocks(page).items()}


def block(key: str) -> str:
    """The text of one block, by key."""
    return blocks(key.split(": ", 1)[0])[key][1]


def section(page: str, heading: str) -> str:
    """The text under ``heading`` of ``page`` up to the next heading of its level or above
    (a ``#`` line inside a fenced block is code, not a heading)."""
    lines, level, fenced = [], 0, False
    for line in (REPO / page).read_text(encoding="utf-8").splitlines(keepends=True):
        if line.lstrip().startswith("```"):
            fenced = not fenced
        found = None if fenced else re.match(r"(#{1,6}) (.*)", line)
        if level and found and len(found.group(1)) <= level:
            break
        if level:
            lines.append(line)
        elif found and found.group(2).strip() == heading:
            level = len(found.group(1))
    assert level, f"{page} has no heading {heading!r}"
    return "".join(lines)

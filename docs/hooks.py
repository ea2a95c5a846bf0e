"""MkDocs hooks (``hooks:`` in mkdocs.yml): add the reference pages, generated from the code
by ``docs/gen`` on every build, so they are never committed and cannot drift from it."""

from __future__ import annotations

from typing import Any

from gen import PAGES  # docs/gen: MkDocs puts this file's directory on sys.path to load it
from mkdocs.structure.files import File, Files


def on_files(files: Files, config: Any) -> Files:
    """Every page of ``PAGES``, rendered now, as a file of the site."""
    for uri, render in PAGES.items():
        files.append(File.generated(config, uri, content=render()))
    return files

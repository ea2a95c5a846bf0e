"""The vendored chart library (Chartist, for the Overview): the files are the ones the note says
(sha256), the licence ships beside them with both texts, and the console serves all three.
The wheel ships ``ui/static/*`` whole (tests/packaging/test_wheel_contents.py)."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

import pytest

from toolkeeper.ui import _FILES

STATIC = Path(__file__).resolve().parents[2] / "src" / "toolkeeper" / "ui" / "static"
NOTE = STATIC / "VENDORED.md"


def noted_digests(note: str) -> dict[str, str]:
    """``{file: sha256}`` from the note's table rows ``| file | from | sha256 |``."""
    return {m[1]: m[2] for m in re.finditer(r"^\| (\S+) \| .*? \| ([0-9a-f]{64}) \|$", note, re.M)}


def test_the_note_names_the_version_and_both_files() -> None:
    note = NOTE.read_text()
    assert "chartist@1.5.0" in note
    assert set(noted_digests(note)) == {"chartist.js", "chartist.css"}


@pytest.mark.parametrize("name", ["chartist.js", "chartist.css"])
def test_the_vendored_file_is_the_one_noted(name: str) -> None:
    digest = hashlib.sha256((STATIC / name).read_bytes()).hexdigest()
    assert digest == noted_digests(NOTE.read_text())[name], (
        f"{name} is not the file VENDORED.md names: a changed copy must say so there")


def test_the_licence_ships_with_both_texts() -> None:
    licence = (STATIC / "chartist.LICENSE.txt").read_text()
    assert "MIT OR WTFPL" in licence
    assert "Permission is hereby granted, free of charge" in licence  # MIT
    assert "Copyright (c) 2013 Gion Kunz" in licence
    assert "DO WHAT THE FUCK YOU WANT TO PUBLIC LICENSE" in licence  # WTFPL


def test_the_console_serves_the_library_and_its_licence() -> None:
    assert {"chartist.js", "chartist.css", "chartist.LICENSE.txt",
            "overview.js", "overview.css"} <= set(_FILES)
    for name in _FILES:
        assert (STATIC / name).is_file(), name

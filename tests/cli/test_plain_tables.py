"""Listings piped to another program are plain tab-separated lines, never a table wrapped
at 80 columns (issue 15)."""

from __future__ import annotations

from cli_helpers import Invoke


def test_a_piped_listing_is_one_plain_line_per_row(cli: Invoke, demo_store: str) -> None:
    res = cli("tools", "list", env={"COLUMNS": "80"})
    assert res.exit_code == 0, res.output
    lines = res.stdout.splitlines()
    header = lines[0].split("\t")
    assert "name" in [h.lower() for h in header], lines[0]
    rows = [line.split("\t") for line in lines[1:]]
    assert all(len(r) == len(header) for r in rows), lines
    assert "pay_invoice" in {r[header.index(next(h for h in header if h.lower() == "name"))]
                             for r in rows}
    assert not any(ch in res.stdout for ch in "┃│━─┏┗")

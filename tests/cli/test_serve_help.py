"""``toolkeeper serve --help`` states the default of every option a user may leave out
(issue 15: the defaults read blank)."""

from __future__ import annotations

import re

from typer.testing import CliRunner

from toolkeeper.cli import app


def test_serve_help_shows_every_default() -> None:
    result = CliRunner().invoke(app, ["serve", "--help"], env={"COLUMNS": "400"})
    assert result.exit_code == 0, result.output
    text = re.sub(r"\s+", " ", re.sub(r"[│╭╮╰╯─]", " ", result.output))
    for shown in ("default 127.0.0.1", "default 8700", "else production",
                  "default 2000000", "default info", "default text", "default 1",
                  "default system", "default none"):
        assert shown in text, shown
    for flag in ("--mode", "--max-body-bytes", "--log-level", "--config"):
        described = text.split(flag, 1)[1].split(" --", 1)[0]
        assert "default" in described, (flag, described)

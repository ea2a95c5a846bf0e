"""The Toolbox guide's in-process example runs as written: saved as a file and run with the
venv's ``python`` in an empty directory, it prints what its comments say."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from tests.support.docs import block
from tests.support.processes import child_env

EXAMPLE = "docs/guides/toolbox.md: In-process #0"


def test_toolbox_guide_example_runs(tmp_path: Path) -> None:
    code = block(EXAMPLE)
    (tmp_path / "toolbox_first.py").write_text(code)
    run = subprocess.run([sys.executable, "toolbox_first.py"], cwd=tmp_path, env=child_env(),
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    said = [re.split(r"[:(]| {2}", comment)[0].strip() for comment in
            re.findall(r"^\s*print\(.*\)  # (.*)$", code, re.M)]
    out = run.stdout.splitlines()
    assert len(out) == len(said) == 6
    for line, expected in zip(out, said, strict=True):
        assert line.startswith(expected), (line, expected)
    # the call confirmed after supersede did not run: the turn's paid invoice is the only one
    assert out[-2] == "succeeded {'paid': 'inv-7', 'amount': 120}"
    assert out[-1] == "superseded superseded"

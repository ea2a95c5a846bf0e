"""examples/supersede_decisions.py runs as written and shows each decision's path: supersede
stops the email, absorb and force_complete dedupe it in the same turn group, queue sends it
again from a new one; the audit holds the four decisions."""

from __future__ import annotations

import ast
import inspect
import subprocess
import sys
from pathlib import Path

from tests.support.docs import block
from tests.support.processes import child_env
from toolkeeper.toolbox import Toolbox

REPO = Path(__file__).resolve().parents[2]
EXPECTED = [
    "supersede: superseded, deduped=False, same turn group, sent 1x",
    "absorb: succeeded, deduped=True, same turn group, sent 1x",
    "force_complete: succeeded, deduped=True, same turn group, sent 1x",
    "queue: succeeded, deduped=False, new turn group, sent 2x",
    "audit: ['supersede', 'absorb', 'force_complete', 'queue']",
]


def test_the_supersede_example_shows_each_path(tmp_path: Path) -> None:
    run = subprocess.run([sys.executable, str(REPO / "examples/supersede_decisions.py")],
                         cwd=tmp_path, env=child_env(), capture_output=True, text=True,
                         timeout=120)
    assert run.returncode == 0, run.stderr
    assert run.stdout.splitlines() == EXPECTED


def test_the_guides_output_is_the_examples() -> None:
    shown = block("docs/guides/toolbox.md: Supersede decisions #1").splitlines()
    assert shown == EXPECTED[:4]


def test_the_guides_snippet_calls_the_guard_with_its_real_parameters() -> None:
    code = block("docs/guides/toolbox.md: Supersede decisions #0")
    tree = ast.parse(code)
    calls = {n.func.attr: {k.arg for k in n.keywords} for n in ast.walk(tree)
             if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)}
    params = set(inspect.signature(Toolbox.guard).parameters) - {"self"}
    assert calls["guard"] and calls["guard"] <= params, (calls["guard"], params)
    assert "execute" in calls

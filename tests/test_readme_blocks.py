"""Every fenced block of the README is run or validated by a named test, or listed as not
executable with the reason: a new block without either fails here."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.support.processes import child_env
from tests.test_readme import README, REPO, _make_run

_RUN = "tests/test_readme.py::test_readme_first_ten_minutes_runs_as_written"
_HERE = "tests/test_readme_blocks.py::"
_FRAMEWORKS = _HERE + "test_readme_framework_snippets_are_the_examples"

# block key ("<heading> #<index under it>") -> the test that runs or validates it
COVERED: dict[str, str] = {
    "First ten minutes #0": _RUN,  # the start-up text serve --demo prints
    "First ten minutes #1": _RUN,
    "First ten minutes #2": _RUN,
    "First ten minutes #3": _RUN,
    "First ten minutes #4": _RUN,
    "Use it as a library #0": "tests/test_readme.py::test_readme_library_example_runs",
    "Toolbox #0": "tests/toolbox/test_toolbox_readme.py::test_readme_toolbox_example_runs",
    "Use it from your agent framework #0": _FRAMEWORKS,
    "Use it from your agent framework #1": _FRAMEWORKS,
    "Use it from your agent framework #2": _FRAMEWORKS,
    "Python client #0": _HERE + "test_readme_python_client_snippet_runs_against_the_demo",
    "MCP #0": "tests/test_readme.py::test_readme_servers_example_is_valid_config",
    "Built-in tools #0":
        "tests/test_readme.py::test_readme_builtins_config_sets_valid_policies_for_every_builtin",
    "Retrieval #0": _HERE + "test_readme_retrieval_config_passes_check",
    "Identity: your company's sign-in #0": _HERE + "test_readme_identity_config_passes_check",
    "Secrets #0": "tests/secrets/test_vault.py::test_the_readme_vault_example_is_valid_config",
    # `make run` serves until stopped and `make test` is this suite: the targets must exist
    "Set up #0": _HERE + "test_readme_setup_targets_are_the_makefiles",
    "Five-minute tour #0": _HERE + "test_readme_pipeline_diagram_names_real_steps_and_reasons",
    "CLI #0": _HERE + "test_readme_cli_synopsis_names_real_commands_and_options",
    "Layout #0": _HERE + "test_readme_layout_names_every_package",
    "Layering #0": _HERE + "test_readme_layering_diagram_is_the_contract",
}

# block key -> why no test runs it (none left: each is validated above)
NOT_EXECUTABLE: dict[str, str] = {}


def readme_blocks() -> dict[str, tuple[str, str]]:
    """Each fenced block by key: the heading it sits under and its index there."""
    blocks: dict[str, tuple[str, str]] = {}
    heading, index, fence, body = "(top)", 0, None, []
    for line in README.read_text().splitlines():
        if fence is not None:
            if line.strip() == "```":
                blocks[f"{heading} #{index}"] = (fence, "\n".join(body) + "\n")
                index, fence = index + 1, None
            else:
                body.append(line)
        elif line.lstrip().startswith("```"):
            fence, body = line.strip()[3:], []
        elif re.match(r"#{1,6} ", line):
            heading, index = line.lstrip("#").strip(), 0
    assert fence is None, "an unclosed fence in README.md"
    return blocks


def _block(key: str) -> str:
    return readme_blocks()[key][1]


def test_every_readme_block_is_covered_or_excused() -> None:
    keys = set(readme_blocks())
    assert not set(COVERED) & set(NOT_EXECUTABLE)
    missing = sorted(keys - set(COVERED) - set(NOT_EXECUTABLE))
    assert missing == [], f"README blocks no test runs (add a test to COVERED): {missing}"
    stale = sorted((set(COVERED) | set(NOT_EXECUTABLE)) - keys)
    assert stale == [], f"COVERED/NOT_EXECUTABLE name blocks the README lacks: {stale}"
    for key, test in COVERED.items():
        path, name = test.split("::")
        assert f"def {name}(" in (REPO / path).read_text(), f"{key}: {test} does not exist"


def _statements(code: str) -> list[str]:
    """The code's lines without indentation and comments (PEP 8's: after two spaces)."""
    lines = (line.split("  #")[0].strip() for line in code.splitlines())
    return [line for line in lines if line and not line.startswith("#")]


@pytest.mark.parametrize("index,example", [(0, "pydantic_ai_agent.py"),
                                           (1, "openai_agents_agent.py"),
                                           (2, "langgraph_agent.py")])
def test_readme_framework_snippets_are_the_examples(index: int, example: str) -> None:
    """Each snippet is the core of its example, line for line; the examples run offline in
    tests/adapters (test_*_example.py, test_langchain.py)."""
    snippet = _block(f"Use it from your agent framework #{index}")
    assert f"(examples/{example})" in README.read_text()
    source = set(_statements((REPO / "examples" / example).read_text()))
    missing = [line for line in _statements(snippet) if line not in source]
    assert missing == [], f"examples/{example} lacks the README's lines {missing}"


def test_readme_retrieval_config_passes_check(tmp_path: Path) -> None:
    """The retrieval block, with the document it names, passes ``toolkeeper check``."""
    block = _block("Retrieval #0")
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "leave.md").write_text("Annual leave is 25 days.\n")
    (tmp_path / "toolkeeper.yaml").write_text("version: 1\n" + block)
    run = subprocess.run([str(REPO / ".venv/bin/toolkeeper"), "check", "-f", "toolkeeper.yaml"],
                         cwd=tmp_path, env=child_env(), capture_output=True, text=True,
                         timeout=60)
    assert run.returncode == 0, run.stdout + run.stderr


def test_readme_identity_config_passes_check(tmp_path: Path) -> None:
    """The identity block passes ``toolkeeper check`` (issuers, claim mapping, SSO)."""
    (tmp_path / "toolkeeper.yaml").write_text("version: 1\n" + _block(
        "Identity: your company's sign-in #0"))
    run = subprocess.run([str(REPO / ".venv/bin/toolkeeper"), "check", "-f", "toolkeeper.yaml"],
                         cwd=tmp_path, env=child_env(), capture_output=True, text=True,
                         timeout=60)
    assert run.returncode == 0, run.stdout + run.stderr


def test_readme_python_client_snippet_runs_against_the_demo(tmp_path: Path) -> None:
    """Against ``make run``'s server: asks, is approved, waits, pays; run again (the first
    ten minutes' turn, already paid), the same payment comes back deduped."""
    snippet = _block("Python client #0")
    with _make_run(tmp_path) as (port, tokens):
        code = (f"agent_token = {tokens['demo agent token (billing-bot)']!r}\n"
                f"approver_token = {tokens['demo approver token']!r}\n"
                + snippet.replace("127.0.0.1:8700", f"127.0.0.1:{port}")
                + "import json\nprint(json.dumps(res.to_dict(omit_empty=False)))\n")
        (tmp_path / "client_snippet.py").write_text(code)
        paid, again = (_run_snippet(tmp_path) for _ in range(2))
    assert paid["status"] == "succeeded", paid
    assert paid["output"]["invoice_status"] == "paid" and not paid["deduped"]
    assert again["deduped"] and again["output"] == paid["output"], again


def _run_snippet(work: Path) -> dict[str, Any]:
    run = subprocess.run([str(REPO / ".venv/bin/python"), "client_snippet.py"], cwd=work,
                         env=child_env(), capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    result: dict[str, Any] = json.loads(run.stdout.splitlines()[-1])
    return result


def test_readme_setup_targets_are_the_makefiles() -> None:
    """``make run`` serves until stopped and ``make test`` is this suite: the targets the
    block (and the text after it) names exist in the Makefile."""
    text = README.read_text()
    setup = text[text.index("## Set up"):text.index("## First ten minutes")]
    named = set(re.findall(r"make ([a-z][\w-]*)", setup))
    assert {"run", "test", "peers", "test-all", "bench", "lint"} <= named
    makefile = (REPO / "Makefile").read_text()
    assert sorted(t for t in named if not re.search(rf"^{re.escape(t)}:", makefile, re.M)) == []


def test_readme_pipeline_diagram_names_real_steps_and_reasons() -> None:
    """The tour's diagram: the steps in order, and every reason code under them is real."""
    from toolkeeper.model.reasons import Reason

    steps, *codes = _block("Five-minute tour #0").splitlines()
    assert steps.split(" → ") == ["authenticate", "resolve", "validate", "scope", "limits",
                                  "risk", "gate", "supersede", "idempotency", "execute",
                                  "outcome"]
    named = {word for line in codes for word in line.split() if word != "…"}
    assert len(named) > 10
    assert sorted(named - {r.value for r in Reason}) == []


def _cli_lines() -> list[str]:
    lines: list[str] = []
    for line in _block("CLI #0").splitlines():
        if line.startswith(" "):
            lines[-1] += " " + line.strip()
        else:
            lines.append(line)
    return [re.sub(r"\s+\([^)]*\)", "", line.removeprefix("toolkeeper ")) for line in lines]


def test_readme_cli_synopsis_names_real_commands_and_options() -> None:
    """Every command of the synopsis exists with every ``--option`` it shows."""
    import typer

    from toolkeeper.cli import app

    commands = typer.main.get_command(app).commands  # type: ignore[attr-defined]
    seen = 0
    for line in _cli_lines():
        first, *others = [alt.strip() for alt in line.replace("| ", " | ").split(" | ")]
        group = commands.get(first.split()[0])
        assert group is not None, line
        if hasattr(group, "commands"):
            parent, alternatives = group.commands, [first.split(None, 1)[1], *others]
        else:
            parent, alternatives = commands, [first, *others]
        for alt in alternatives:
            command = parent.get(alt.split()[0])
            assert command is not None, f"no command {alt.split()[0]!r} ({line})"
            opts = {o for p in command.params for o in p.opts}
            missing = [o for o in re.findall(r"--[\w-]+", alt) if o not in opts]
            assert missing == [], f"{alt}: {missing}"
            seen += 1
    assert seen >= 30


def test_readme_layout_names_every_package() -> None:
    """The tree's directories are exactly the packages under src/toolkeeper."""
    tree = set(re.findall(r"^  (\w+)/", _block("Layout #0"), re.M))
    src = REPO / "src" / "toolkeeper"
    packages = {p.parent.name for p in src.glob("*/__init__.py")}
    assert sorted(tree ^ packages) == []


def test_readme_layering_diagram_is_the_contract() -> None:
    """The diagram lists the import-linter layers contract's modules, top to bottom."""
    import tomllib

    config = tomllib.loads((REPO / "pyproject.toml").read_text())
    layers = next(c for c in config["tool"]["importlinter"]["contracts"]
                  if c["id"] == "layers")["layers"]
    contract = [m.removeprefix("toolkeeper.") for layer in layers
                for m in re.split(r" [|:] ", layer)]
    labels = {"faces", "kernel", "base"}  # "gateway" names its row and is its first layer
    diagram = [word for line in _block("Layering #0").splitlines()
               for word in re.findall(r"[a-z_]+", line) if word not in labels]
    assert diagram == contract

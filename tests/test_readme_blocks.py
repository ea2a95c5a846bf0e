"""Every fenced block of README.md and of the docs pages is run or validated by a named test,
or listed as not runnable with the reason: a new block without either fails here."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from tests.support.docs import REPO, all_blocks, block
from tests.test_readme import (
    APPROVE,
    BANNER,
    CLI,
    CURLS,
    MCP_FIRST,
    PAY,
    curls,
    demo_env,
    make_run,
    run_python,
)

_README = "tests/test_readme.py::"
_RUN = _README + "test_readme_first_ten_minutes_runs_as_written"
_SAME = _README + "test_readme_first_ten_minutes_is_the_guides"
_HERE = "tests/test_readme_blocks.py::"
_FRAMEWORKS = _HERE + "test_framework_snippets_are_the_examples"
_DEMO = _HERE + "test_snippets_run_against_the_demo"
_CONFIG = _HERE + "test_config_blocks_are_valid_config"
_COMMANDS = _HERE + "test_command_blocks_name_real_commands_and_options"
_GUIDES = "docs/guides/"

# Config fragments (each is a valid toolkeeper.yaml once `version: 1` is added), and whether
# `toolkeeper check` passes on it too (False: the reason it cannot here).
CONFIGS: dict[str, str | None] = {
    "docs/guides/identity.md: Your identity provider #0": None,
    "docs/guides/mcp-clients.md: Upstream MCP servers #0": None,
    "docs/guides/vault.md: Vault and OpenBao #0": None,
    "docs/guides/config-as-code.md: Retrieval #0": None,
    "docs/identity-sso.md: Configure #0": None,
    "docs/identity-upstreams.md: Client credentials, Okta #0": None,
    "docs/identity-upstreams.md: Client credentials, Microsoft Entra ID #0": None,
    "docs/identity-upstreams.md: Client credentials, Keycloak #0": None,
    "docs/identity-upstreams.md: Token exchange on behalf of the calling agent, Keycloak #0":
        None,
    "docs/identity-upstreams.md: Token exchange on behalf of the approver #0": None,
    "docs/identity.md: Configuration #0": None,
    "docs/identity.md: Okta #0": None,
    "docs/identity.md: Microsoft Entra ID #0": None,
    "docs/identity.md: Keycloak #0": None,
    "docs/identity.md: Google #0": None,
    "docs/security.md: What a tenant writes may only narrow the operator's ceiling #0": None,
    "docs/web-search.md: `web_search` #0": None,
    "docs/guides/budgets.md: Declare what an action costs #0": None,
    "docs/guides/budgets.md: Declare budgets #0": None,
    "docs/guides/audit-export.md: Configure #0": None,
    "docs/composio.md: `composio` #0": None,
    "docs/mcp.md: What becomes of them #0":
        "its profile activates prompts that exist once `apply` has connected the upstream",
}

# Blocks of `toolkeeper …` command lines: every command and option they use exists.
COMMANDS = [
    "docs/guides/postgresql-replicas.md: One PostgreSQL #0",
    "docs/guides/server.md: Running the server #0",
]

_DEPLOY_GUIDE = "tests/deploy/test_deploy_guide.py::"
_IMAGE = "tests/deploy/test_image.py::test_the_image_serves_on_a_read_only_root"
_DEPLOY = {  # docs/guides/deploy.md (the image test builds and runs it with podman and runc)
    "The image #0": _IMAGE, "The image #1": _IMAGE,
    "The image #2": _DEPLOY_GUIDE + "test_the_key_command_makes_a_key_toolkeeper_accepts",
    "Helm chart #0": _DEPLOY_GUIDE + "test_the_install_line_renders",
    "Helm chart #1": _DEPLOY_GUIDE + "test_the_vault_values_render",
}

# block key -> the test that runs or validates it
COVERED: dict[str, str] = {
    "README.md: Two commands #0": _HERE + "test_make_targets_named_are_the_makefiles",
    "README.md: First ten minutes #0": _SAME,  # the guide's blocks, run there
    "README.md: First ten minutes #1": _SAME,
    "README.md: First ten minutes #2": _SAME,
    "docs/guides/first-ten-minutes.md: Serve the demo #0": _SAME,  # `make run` is serve --demo
    BANNER: _RUN,  # the start-up text serve --demo prints, line for line
    CURLS: _RUN,
    APPROVE: _RUN,
    MCP_FIRST: _RUN,
    PAY: _DEMO,  # also in _RUN, on the turn paid there (deduped)
    CLI: _RUN,
    "docs/concepts/gates.md: Preview: see the effect, then send the token back #0": _DEMO,
    "docs/concepts/pipeline.md: The steps #0":
        _HERE + "test_pipeline_diagram_puts_each_reason_under_its_step",
    "docs/guides/config-as-code.md: Start a project: `toolkeeper init` #0":
        _HERE + "test_init_block_starts_a_project",
    "docs/guides/config-as-code.md: Check and apply #0":
        _HERE + "test_the_example_config_applies_to_its_own_store",
    "docs/guides/config-as-code.md: Built-in tools #0":
        _README + "test_builtins_config_sets_valid_policies_for_every_builtin",
    "docs/guides/config-as-code.md: Retrieval #0": _HERE + "test_retrieval_config_passes_check",
    "docs/guides/frameworks.md: The examples #0": _FRAMEWORKS,
    "docs/guides/frameworks.md: The examples #1": _FRAMEWORKS,
    "docs/guides/frameworks.md: The examples #2": _FRAMEWORKS,
    "docs/guides/library.md: Use it as a library #0": _README + "test_library_example_runs",
    "docs/guides/mcp-clients.md: Upstream MCP servers #0":
        _README + "test_upstream_servers_example_is_valid_config",
    "docs/guides/server.md: The CLI #0":
        _HERE + "test_cli_synopsis_names_real_commands_and_options",
    "docs/guides/toolbox.md: In-process #0":
        "tests/toolbox/test_toolbox_readme.py::test_toolbox_guide_example_runs",
    "docs/guides/toolbox.md: Remote #0": _DEMO,
    "docs/guides/toolbox.md: Supersede decisions #0": "tests/toolbox/test_supersede_example.py"
        "::test_the_guides_snippet_calls_the_guard_with_its_real_parameters",
    "docs/guides/toolbox.md: Supersede decisions #1":
        "tests/toolbox/test_supersede_example.py::test_the_guides_output_is_the_examples",
    f"{_GUIDES}vault.md: Which key a store is keyed with #0":
        _HERE + "test_the_keying_note_is_what_the_cli_prints",
    "docs/guides/vault.md: Vault and OpenBao #0":
        "tests/secrets/test_vault.py::test_the_readme_vault_example_is_valid_config",
    "docs/architecture.md: Layout #0": _HERE + "test_layout_names_every_package",
    "docs/architecture.md: Layering #0": _HERE + "test_layering_diagram_is_the_contract",
    # the Strands and Google ADK guides (h/strands, h/adk: their tests run the examples)
    "docs/guides/strands.md: The example #0": "tests/adapters/test_strands_example.py::"
        "test_the_strands_example_pays_the_confirmed_invoice_once",
    "docs/guides/strands.md: The example #1":
        "tests/adapters/test_strands_example.py::test_the_guides_python_is_the_example",
    "docs/guides/google-adk.md: The example #0":
        "tests/adapters/test_google_adk_example.py::test_the_google_adk_example_runs_offline",
    "docs/guides/google-adk.md: The example #1":
        "tests/adapters/test_google_adk_example.py::test_the_guides_snippet_is_the_example",
    "docs/guides/client.md: An example #0": "tests/packaging/test_client_wheel.py::"
        "test_the_guides_example_runs_in_the_slim_venv",  # in a venv with the built wheel
    **{f"docs/guides/deploy.md: {key}": test for key, test in _DEPLOY.items()},
    **{key: _COMMANDS for key in COMMANDS},
    **{key: _CONFIG for key in CONFIGS if key not in (
        "docs/guides/mcp-clients.md: Upstream MCP servers #0",
        "docs/guides/vault.md: Vault and OpenBao #0",
        "docs/guides/config-as-code.md: Retrieval #0")},
}

# block key -> why no test runs it
NOT_EXECUTABLE: dict[str, str] = {
    "docs/guides/deploy.md: Compose: PostgreSQL, Redis, two replicas behind nginx #0":
        "needs a Docker daemon and the postgres, redis and nginx images (no container "
        "registry here); tests/deploy/test_checkers.py checks the compose file",
    "README.md: Use it in your own project #0":
        "installs the released packages from PyPI (the suite has no registry); the packaging "
        "tests build and install the wheels themselves",
    "docs/guides/strands.md: Install #0": "installs from PyPI (the suite has no registry)",
    "docs/guides/google-adk.md: Install #0": "installs from PyPI (the suite has no registry)",
    "docs/guides/client.md: Install #0": "installs from PyPI (the suite has no registry); "
        "tests/packaging/test_client_wheel.py installs the wheel it builds",
    "docs/mcp.md: A 2026-07-28 client that declared the tasks extension #0":
        "a task's answer as it appears on the wire, ids and times elided (…)",
    "docs/mcp.md: A 2026-07-28 client that declared the tasks extension #1":
        "a completed task's answer, its content elided (…)",
    "docs/mcp.md: How they are governed #0":
        "one activation of the profile in the block above, not a config by itself",
}


def test_every_block_is_covered_or_excused() -> None:
    keys = set(all_blocks())
    assert not set(COVERED) & set(NOT_EXECUTABLE)
    missing = sorted(keys - set(COVERED) - set(NOT_EXECUTABLE))
    assert missing == [], f"blocks no test runs (add a test to COVERED): {missing}"
    # a page another branch writes may be registered before it is merged: only the blocks
    # of pages that are here are held to be present
    here = {key for key in set(COVERED) | set(NOT_EXECUTABLE)
            if (REPO / key.split(": ", 1)[0]).is_file()}
    stale = sorted(here - keys)
    assert stale == [], f"COVERED/NOT_EXECUTABLE name blocks the pages lack: {stale}"
    for key, test in COVERED.items():
        path, name = test.split("::")
        if key in here:
            assert f"def {name}(" in (REPO / path).read_text(), f"{key}: {test} does not exist"


def test_an_unregistered_block_fails_the_registry(tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """A page with one block nobody registered: the registry check names it."""
    import tests.support.docs as docs

    page = tmp_path / "docs" / "guides" / "new.md"
    page.parent.mkdir(parents=True)
    page.write_text("# New\n\n## Try it\n\n```bash\ntoolkeeper nothing\n```\n")
    (tmp_path / "README.md").write_text("# toolkeeper\n")
    monkeypatch.setattr(docs, "REPO", tmp_path)
    monkeypatch.setattr(docs, "DOCS", tmp_path / "docs")
    with pytest.raises(AssertionError, match=r"docs/guides/new.md: Try it #0"):
        test_every_block_is_covered_or_excused()


def _statements(code: str) -> list[str]:
    """The code's lines without indentation and comments (PEP 8's: after two spaces)."""
    lines = (line.split("  #")[0].strip() for line in code.splitlines())
    return [line for line in lines if line and not line.startswith("#")]


@pytest.mark.parametrize("index,example", [(0, "pydantic_ai_agent.py"),
                                           (1, "openai_agents_agent.py"),
                                           (2, "langgraph_agent.py")])
def test_framework_snippets_are_the_examples(index: int, example: str) -> None:
    """Each snippet is lines of its example, line for line; the examples run offline in
    tests/adapters (test_*_example.py, test_langchain.py)."""
    snippet = block(f"{_GUIDES}frameworks.md: The examples #{index}")
    assert f"`examples/{example}`" in (REPO / _GUIDES / "frameworks.md").read_text()
    source = set(_statements((REPO / "examples" / example).read_text()))
    missing = [line for line in _statements(snippet) if line not in source]
    assert missing == [], f"examples/{example} lacks the guide's lines {missing}"


def _toolkeeper(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    from tests.support.processes import child_env

    return subprocess.run([str(REPO / ".venv/bin/toolkeeper"), *args], cwd=cwd,
                          env=child_env(), capture_output=True, text=True, timeout=60)


def test_retrieval_config_passes_check(tmp_path: Path) -> None:
    """The retrieval block, with the document it names, passes ``toolkeeper check``."""
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "leave.md").write_text("Annual leave is 25 days.\n")
    (tmp_path / "toolkeeper.yaml").write_text(
        "version: 1\n" + block(f"{_GUIDES}config-as-code.md: Retrieval #0"))
    run = _toolkeeper(["check", "-f", "toolkeeper.yaml"], tmp_path)
    assert run.returncode == 0, run.stdout + run.stderr


@pytest.mark.parametrize("key", sorted(CONFIGS))
def test_config_blocks_are_valid_config(key: str) -> None:
    """Each config fragment is a valid ``toolkeeper.yaml`` with ``version: 1`` added, and
    passes ``toolkeeper check``'s rules unless it says why it cannot here."""
    import yaml

    from toolkeeper.config import check, load_text
    from toolkeeper.config.model import ConfigFile

    text = block(key)
    ConfigFile.model_validate({"version": 1, **yaml.safe_load(text)})
    if CONFIGS[key] is None:
        found = check(load_text("version: 1\n" + text), base_dir=REPO)
        assert [(v.rule, v.path, v.message) for v in found] == []


def _shell(work: Path, text: str) -> subprocess.CompletedProcess[str]:
    """Run a block's lines with bash in the venv, in ``work`` (this checkout's sources kept
    first on ``PYTHONPATH`` when a line sets it)."""
    from tests.support.processes import child_env

    env = {k: v for k, v in child_env().items() if not k.startswith("TOOLKEEPER_")}
    text = re.sub(r"PYTHONPATH=(\S+)", r"PYTHONPATH=\1:$PYTHONPATH", text)
    return subprocess.run(["bash", "-euc", "source .venv/bin/activate\n" + text], cwd=work,
                          env=env, capture_output=True, text=True, timeout=180)


def test_init_block_starts_a_project(tmp_path: Path) -> None:
    """``toolkeeper init`` then the call its comment shows, in a new directory, in the venv:
    the call succeeds with the output the comment names."""
    (tmp_path / ".venv").symlink_to(REPO / ".venv")
    lines = block(f"{_GUIDES}config-as-code.md: Start a project: `toolkeeper init` #0"
                  ).splitlines()
    said = next(line for line in lines if line.startswith("# status"))
    run = _shell(tmp_path, "\n".join(lines))
    assert run.returncode == 0, run.stdout + run.stderr
    assert "tk_" in run.stdout and (tmp_path / "toolkeeper.yaml").is_file()
    status, output = re.fullmatch(r"# status (\w+) … output (.*)", said).groups()  # type: ignore[union-attr]
    assert re.search(rf"status\W+{status}", run.stdout), run.stdout
    assert output in run.stdout, run.stdout


def test_the_example_config_applies_to_its_own_store(tmp_path: Path) -> None:
    """In a copy of the checkout's examples: check is clean, apply names the store it wrote
    (its own, not the demo's), and the native tool runs from a later CLI without --config."""
    import shutil

    (tmp_path / ".venv").symlink_to(REPO / ".venv")
    shutil.copytree(REPO / "examples", tmp_path / "examples")
    text = block(f"{_GUIDES}config-as-code.md: Check and apply #0")
    run = _shell(tmp_path, text)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "applied examples/toolkeeper.yaml to the store sqlite:///./examples.db" in run.stdout
    assert not (tmp_path / "toolkeeper.db").exists()
    status, output = re.search(r"# status (\w+) … output (.*)", text).groups()  # type: ignore[union-attr]
    assert re.search(rf"status\W+{status}", run.stdout) and re.search(
        rf"output\W+{re.escape(output)}\W", run.stdout), run.stdout


@pytest.mark.slow  # a real server and four child processes
def test_snippets_run_against_the_demo(tmp_path: Path) -> None:
    """On a fresh ``make run`` demo: the Python client pays (asked, approved, waited for)
    and, run again, gets the same payment deduped; the preview token sent back over REST;
    the remote Toolbox confirms and pays another invoice."""
    (tmp_path / ".venv").symlink_to(REPO / ".venv")
    with make_run(tmp_path) as (port, tokens):
        env = demo_env(tokens)
        code = block(PAY).replace("127.0.0.1:8700", f"127.0.0.1:{port}")
        first, again = (run_python(tmp_path, "pay.py", code, env).split() for _ in range(2))
        assert first == ["succeeded", "False", "PAY-0001"] and again[:2] == ["succeeded", "True"]
        said = re.search(r"# (succeeded True PAY-0001)", block(PAY))
        assert said and " ".join(again) == said.group(1)

        preview = block("docs/concepts/gates.md: Preview: see the effect, then send the token "
                        "back #0")
        asked_at = preview.index("export PREVIEW_TOKEN=")
        sent_at = preview.index("\n", asked_at) + 1
        env["EMAIL"] = re.search(r"export EMAIL='(.*)'", preview).group(1)  # type: ignore[union-attr]
        asked, = curls(preview[:asked_at].split("\n", 1)[1], env, port)
        assert asked["preview_token"].startswith("pv_")
        sent, = curls(preview[sent_at:], {**env, "PREVIEW_TOKEN": asked["preview_token"]},
                      port)
        assert sent["status"] == "succeeded"

        remote = block("docs/guides/toolbox.md: Remote #0")
        out = run_python(tmp_path, "toolbox_remote.py",
                         remote.replace("127.0.0.1:8700", f"127.0.0.1:{port}"), env)
        assert out.splitlines() == ["['lookup_invoice', 'pay_invoice', 'refund_invoice', "
                                    "'send_email']", "confirmation_required", "succeeded paid"]
        assert all(f"# {line}" in remote for line in out.splitlines()), out


def test_make_targets_named_are_the_makefiles() -> None:
    """``make run`` serves until stopped and ``make test`` is this suite: every ``make X``
    the README names is a target of the Makefile."""
    text = (REPO / "README.md").read_text()
    named = set(re.findall(r"`make ([a-z][\w-]*)", text)) | set(
        re.findall(r"^make ([a-z][\w-]*)", block("README.md: Two commands #0"), re.M))
    assert {"run", "test"} <= named
    assert "make run" in block("README.md: Two commands #0")
    assert "make test" in block("README.md: Two commands #0")
    makefile = (REPO / "Makefile").read_text()
    assert sorted(t for t in named if not re.search(rf"^{re.escape(t)}:", makefile, re.M)) == []


def test_pipeline_diagram_puts_each_reason_under_its_step() -> None:
    """The steps in the pipeline's order, each on its row with reason codes that step's own
    module stops a call with (a code under the wrong step fails here)."""
    from toolkeeper.model.reasons import Reason

    rows = [re.sub(r"\(.*\)", "", line).split()  # a remark in parentheses
            for line in block("docs/concepts/pipeline.md: The steps #0").splitlines()]
    steps = [row[0] for row in rows]
    assert steps == ["authenticate", "resolve", "validate", "scope", "limits", "risk", "gate",
                     "supersede", "budgets", "idempotency", "execute", "outcome"]
    order = (REPO / "src/toolkeeper/pipeline/steps.py").read_text().split("\n\n")[1]
    assert steps == re.findall(r"(\w+)(?: →|\.)", order)  # the docstring's normative order
    named = 0
    for step, *codes in rows:
        source = (REPO / "src/toolkeeper/pipeline" / f"{step}.py").read_text()
        for code in (c for c in codes if re.fullmatch(r"[a-z_]+", c)):
            assert code in {r.value for r in Reason}, f"{code} is no reason code"
            assert f"Reason.{code.upper()}" in source, f"{step} never stops a call with {code}"
            named += 1
    assert named > 15


def _cli_lines(text: str) -> list[str]:
    lines: list[str] = []
    for line in text.splitlines():
        if line.startswith(" ") and lines:
            lines[-1] += " " + line.strip()
        elif line and not line.startswith("#"):
            lines.append(line)
    return [re.sub(r"\s+\([^)]*\)", "", line.removeprefix("toolkeeper ")) for line in lines]


def _check_commands(lines: list[str]) -> int:
    """Every command of the lines exists with every ``--option`` it shows; how many."""
    import typer

    from toolkeeper.cli import app

    commands = typer.main.get_command(app).commands  # type: ignore[attr-defined]
    seen = 0
    for line in lines:
        line = re.sub(r"\s+#.*$", "", line)
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
    return seen


def test_cli_synopsis_names_real_commands_and_options() -> None:
    assert _check_commands(_cli_lines(block(f"{_GUIDES}server.md: The CLI #0"))) >= 30


@pytest.mark.parametrize("key", COMMANDS)
def test_command_blocks_name_real_commands_and_options(key: str) -> None:
    """A block of shell lines: each ``toolkeeper`` line is a real command with real options,
    and each variable it exports is one toolkeeper reads."""
    text = block(key)
    lines = [line for line in text.splitlines() if line.startswith("toolkeeper ")]
    assert lines and _check_commands(_cli_lines("\n".join(lines))) == len(lines)
    src = "".join(p.read_text() for p in (REPO / "src/toolkeeper").rglob("*.py"))
    for name in re.findall(r"^export (\w+)=", text, re.M):
        assert f'"{name}"' in src or f"'{name}'" in src or name.removeprefix(
            "TOOLKEEPER_").lower() in src, f"{key}: toolkeeper never reads {name}"


def test_layout_names_every_package() -> None:
    """The tree's directories are exactly the packages under src/toolkeeper."""
    tree = set(re.findall(r"^  (\w+)/", block("docs/architecture.md: Layout #0"), re.M))
    src = REPO / "src" / "toolkeeper"
    packages = {p.parent.name for p in src.glob("*/__init__.py")}
    assert sorted(tree ^ packages) == []


def test_layering_diagram_is_the_contract() -> None:
    """The diagram lists the import-linter layers contract's modules, top to bottom."""
    import tomllib

    config = tomllib.loads((REPO / "pyproject.toml").read_text())
    layers = next(c for c in config["tool"]["importlinter"]["contracts"]
                  if c["id"] == "layers")["layers"]
    contract = [m.removeprefix("toolkeeper.") for layer in layers
                for m in re.split(r" [|:] ", layer)]
    labels = {"faces", "kernel", "base"}  # "gateway" names its row and is its first layer
    diagram = [word for line in block("docs/architecture.md: Layering #0").splitlines()
               for word in re.findall(r"[a-z_]+", line) if word not in labels]
    assert diagram == contract


def test_the_console_words_the_pages_quote_are_the_consoles() -> None:
    """What the console says after an approval, quoted by the console guide and the
    approvals page, is built from the console's own strings (around the approval id)."""
    script = (REPO / "src/toolkeeper/ui/static/approvals.js").read_text()
    # the sentence's pieces between the places where approvals.js joins in other values
    pieces = ["the agent runs it by sending the same call again",
              " (same tool, action and arguments)",
              ": the gateway finds this approval from the call itself, or by approval_id ",
              " if the agent sends it"]
    for piece in pieces:
        assert f'"{piece}"' in script or f'"; {piece}"' in script, piece
    quoted = "".join(pieces[:3]) + "ap_…" + pieces[3]
    for page in ("docs/guides/console.md", "docs/concepts/approvals.md"):
        text = re.sub(r"\s+", " ", (REPO / page).read_text())
        assert f'"{quoted}"' in text, page


def test_every_page_runs_commands_one_way() -> None:
    """Commands are run in the activated venv (``source .venv/bin/activate``, then
    ``toolkeeper``, ``python``), never as ``.venv/bin/<program>`` on one page and bare on
    another (issue 33: a reader typed ``toolkeeper demo`` and got ``command not found``)."""
    from tests.support.docs import pages

    mixed = [f"{page}:{n}" for page in pages()
             for n, line in enumerate((REPO / page).read_text().splitlines(), 1)
             if re.search(r"\.venv/bin/(?!activate\b)[\w-]", line)]
    assert mixed == [], f"say `source .venv/bin/activate` and the bare command: {mixed}"
    assert "source .venv/bin/activate" in (REPO / "README.md").read_text()


def test_the_keying_note_is_what_the_cli_prints(tmp_path: Path) -> None:
    """Where ``serve --demo`` left its key file, a new store (``toolkeeper init``) is keyed
    with it and says so in the words the secrets guide shows."""
    from toolkeeper.secrets import generate_key_file

    (tmp_path / ".venv").symlink_to(REPO / ".venv")
    generate_key_file(tmp_path / "toolkeeper-secrets.key")
    note = block(f"{_GUIDES}vault.md: Which key a store is keyed with #0").strip()
    run = _shell(tmp_path, "toolkeeper init")
    assert run.returncode == 0, run.stdout + run.stderr
    said = re.sub(r"\s+", " ", run.stderr + run.stdout)
    assert note.replace("/path/to", str(tmp_path)) in said, said

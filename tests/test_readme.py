"""The snippets of the first ten minutes (README.md and its guide) and of the library and
config guides run, or pass the checks they claim, as written."""

from __future__ import annotations

import json
import os
import re
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from tests.support.docs import REPO, block, blocks, section
from tests.support.processes import child_env
from tests.support.required import missing

GUIDE = "docs/guides/first-ten-minutes.md"
LIBRARY = "docs/guides/library.md: Use it as a library #0"
CONFIG = "docs/guides/config-as-code.md"


def test_library_example_runs(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("TOOLKEEPER_DATABASE_URL", raising=False)
    exec(compile(block(LIBRARY), "library.md", "exec"), {"__name__": "readme_example"})
    out = capsys.readouterr().out
    assert "confirmation_required" in out and "ap_" in out
    assert "succeeded {'paid': 'inv-7', 'amount': 120}" in out
    assert os.path.exists(tmp_path / "quickstart.db")


def test_upstream_servers_example_is_valid_config() -> None:
    import yaml

    from toolkeeper.config.model import ConfigFile

    example = block("docs/guides/mcp-clients.md: Upstream MCP servers #0")
    config = ConfigFile.model_validate({"version": 1, **yaml.safe_load(example)})
    server = config.servers[0]
    assert server.name == "github" and server.tools["search"].side_effect == "pure"


def _builtins_section() -> str:
    return section(CONFIG, "Built-in tools")


def test_builtins_table_names_every_builtin_with_a_valid_call() -> None:
    import json

    import jsonschema_rs

    from toolkeeper.builtins import BUILTINS

    rows = re.findall(r"^\| `(\w+)` \| [^|]+ \| (?:(\w+): )?`(\{.*\})` \|$", _builtins_section(),
                      re.M)
    assert sorted(key for key, _, _ in rows) == sorted(BUILTINS)
    for key, action, example in rows:
        tool = BUILTINS[key].definition()
        action = action or next(iter(tool.actions))
        schema = tool.actions[action].input_schema or tool.input_schema
        errors = [e.message for e in
                  jsonschema_rs.Draft202012Validator(schema).iter_errors(json.loads(example))]
        assert errors == [], f"{key}.{action}: {errors}"


def test_builtins_config_sets_valid_policies_for_every_builtin() -> None:
    import yaml

    from toolkeeper.builtins import BUILTINS
    from toolkeeper.config import check, load_text

    config = block(f"{CONFIG}: Built-in tools #0")
    assert sorted(t["builtin"] for t in yaml.safe_load(config)["tools"]) == sorted(BUILTINS)
    found = check(load_text("version: 1\n" + config), base_dir=REPO)
    assert [(v.rule, v.path, v.message) for v in found] == []


# --- "First ten minutes": every snippet of the path, against a real `serve --demo` ----------

BANNER = f"{GUIDE}: Serve the demo #1"
CURLS, APPROVE = f"{GUIDE}: An approved call #0", f"{GUIDE}: An approved call #1"
MCP_FIRST = f"{GUIDE}: The same agent over MCP #0"
PAY = f"{GUIDE}: The same turn from Python #0"
CLI = f"{GUIDE}: From the CLI #0"


def test_readme_first_ten_minutes_is_the_guides() -> None:
    """The README's short path is the guide's, block for block (the guide's run covers it),
    and ``make run`` is what the tests start (``serve --demo``)."""
    readme = [body for _, body in blocks("README.md").values()]
    for key in (BANNER, CURLS, APPROVE):
        assert block(key) in readme, f"README.md lacks the guide's block {key}"
    recipe = re.search(r"^run:.*\n((?:\t.*\n)+)", (REPO / "Makefile").read_text(), re.M)
    assert recipe and "toolkeeper serve --demo" in recipe.group(1)
    assert block(f"{GUIDE}: Serve the demo #0") == "make run\n"


def _fragments_hold(comment: str, actual: str) -> None:
    """Every piece of a ``# {…}`` comment between the ellipses is in ``actual``."""
    for piece in comment.lstrip("# ").split("…"):
        piece = piece.strip(" ,{}")
        assert piece in actual, f"the page says {piece!r}; got {actual}"


def _json_docs(out: str) -> list[dict[str, Any]]:
    docs, pos, dec = [], 0, json.JSONDecoder()
    while pos < len(out.rstrip()):
        doc, pos = dec.raw_decode(out, pos)
        docs.append(doc)
        while pos < len(out) and out[pos].isspace():
            pos += 1
    return docs


def curls(block_text: str, env: dict[str, str], port: int) -> list[dict[str, Any]]:
    """Run a bash block of curl calls (on ``port``); check each answer against the comment
    after it."""
    run = subprocess.run(["bash", "-euc", here(block_text, port)], env=env,
                         capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    docs = _json_docs(run.stdout)
    comments = [line for line in block_text.splitlines() if line.startswith("# {")]
    assert len(docs) == len(comments) == block_text.count("curl -s")
    for doc, comment in zip(docs, comments, strict=True):
        _fragments_hold(comment, json.dumps(doc, separators=(",", ":"), ensure_ascii=False))
    return docs


def here(text: str, port: int) -> str:
    """A snippet written for port 8700, on ``port``."""
    return text.replace("127.0.0.1:8700", f"127.0.0.1:{port}")


def _announced(log: Path, expected: str, port: int) -> dict[str, str]:
    """The start-up text is the guide's, line for line; the tokens by title."""
    pattern = "\n".join(re.escape(here(line, port)).replace("tk_…", r"(tk_\S+)")
                        .replace("…", r"\S*")  # e.g. the directory of the key file
                        for line in expected.strip().splitlines())
    found = re.search(pattern, log.read_text())  # printed before the server listens
    assert found, f"the guide's start-up text is not what serve printed:\n{log.read_text()}"
    titles = re.findall(r"^  (.*): tk_…$", expected, re.M)
    return dict(zip(titles, found.groups(), strict=True))


@contextmanager
def make_run(work: Path) -> Iterator[tuple[int, dict[str, str]]]:
    """What ``make run`` starts (``serve --demo`` over ``./toolkeeper.db``), on a free port;
    the tokens it printed by title."""
    from tests.support.serve import serving_demo

    with serving_demo(work) as (port, log):
        yield port, _announced(log, block(BANNER), port)


def demo_env(tokens: dict[str, str]) -> dict[str, str]:
    """The environment the pages tell a reader to export: both demo tokens."""
    return child_env(AGENT_TOKEN=tokens["demo agent token (billing-bot)"],
                     APPROVER_TOKEN=tokens["demo approver token"])


def run_python(work: Path, name: str, code: str, env: dict[str, str]) -> str:
    """Save ``code`` as ``name`` in ``work`` and run it as the page says (``python name``,
    in the venv); its standard output."""
    (work / name).write_text(code)
    run = subprocess.run(["bash", "-euc", f"source .venv/bin/activate && python {name}"],
                         cwd=work, env=env, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    return run.stdout


def _without_exports(block_text: str) -> str:
    """A curl block whose ``export NAME=tk_…`` lines the test sets in the environment."""
    return "\n".join(line for line in block_text.splitlines()
                     if not re.match(r"export \w+=tk_…", line)) + "\n"


@pytest.mark.slow  # a real server and six child processes: 5 to 34 s on a shared machine
def test_readme_first_ten_minutes_runs_as_written(tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str],
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / ".venv").symlink_to(REPO / ".venv")
    with make_run(tmp_path) as (port, tokens):
        env = demo_env(tokens)
        _, paying = curls(_without_exports(block(CURLS)), env, port)
        curls(block(APPROVE), {**env, "APPROVAL_ID": paying["approval_id"]}, port)

        mcp_snippet = block(MCP_FIRST)
        names, record = run_python(tmp_path, "mcp_first.py", here(mcp_snippet, port),
                                   env).splitlines()
        said = re.findall(r"^\s*(?:print\(.*?\)\s*)?# (.*)$", mcp_snippet, re.M)
        assert names == said[0]
        _fragments_hold(said[1], record)

        # the turn paid above: the Python client gets that payment back, deduped
        paid = run_python(tmp_path, "pay.py", here(block(PAY), port), env)
        assert paid.split() == ["succeeded", "True", "PAY-0001"], paid

        cli = block(CLI)
        activate, ok_line, refused_line = [line for line in cli.splitlines()
                                           if line and not line.startswith("#")]
        ok = subprocess.run(["bash", "-euc", f"{activate} && {ok_line}"], cwd=tmp_path,
                            env=env, capture_output=True, text=True, timeout=60)
        assert ok.returncode == 0 and "succeeded" in ok.stdout and "Globex" in ok.stdout, ok
        status, reason, code = re.search(r"# status (\w+), reason (\w+) .*exit status (\d)",
                                         cli).groups()
        refused = subprocess.run(["bash", "-euc", f"{activate} && {refused_line}"],
                                 cwd=tmp_path, env=env, capture_output=True, text=True,
                                 timeout=60)
        assert refused.returncode == int(code), refused
        assert status in refused.stdout and reason in refused.stdout

        # the library example, in the checkout where the demo runs: its own store
        test_library_example_runs(tmp_path, capsys, monkeypatch)


def _approve_in_the_ui(url: str, token: str, approval_id: str) -> None:
    """The guide's clicks: paste the token, **Use token**, **Approvals**, **Approve**."""
    import shutil

    from playwright.sync_api import expect, sync_playwright

    for doc in ("README.md", GUIDE):
        text = (REPO / doc).read_text()
        for words in ("**Use token**", "**Approvals**", "**Approve**"):
            assert words in text, f"{doc}: {words}"
    path = shutil.which("chromium") or shutil.which("chromium-browser")
    if path is None:
        message = "NO CHROMIUM: the first ten minutes' UI approval needs Debian's `chromium`"
        missing(message)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=path, args=["--no-sandbox"])
        try:
            page = browser.new_page()
            page.set_default_timeout(10_000)
            page.goto(url + "/ui/")
            page.get_by_label("token").fill(token)
            page.get_by_role("button", name="Use token").click()
            page.locator("#tabs").get_by_role("button", name="Approvals").click()
            card = page.locator(f'article.approval[data-id="{approval_id}"]')
            expect(card).to_contain_text("pay_invoice")
            card.get_by_role("button", name="Approve", exact=True).click()
            expect(card.get_by_role("button", name="Approve", exact=True)).to_have_count(0)
        finally:
            browser.close()


def test_readme_first_ten_minutes_approval_in_the_ui(tmp_path: Path) -> None:
    approve = block(APPROVE)
    resubmit = approve[approve.index("\ncurl -s http") + 1:]
    with make_run(tmp_path) as (port, tokens):
        env = demo_env(tokens)
        _, paying = curls(_without_exports(block(CURLS)), env, port)
        _approve_in_the_ui(f"http://127.0.0.1:{port}", tokens["demo approver token"],
                           paying["approval_id"])
        paid, = curls(resubmit, env, port)
        assert paid["output"]["invoice_status"] == "paid"


def test_readme_demo_data_is_the_demos(tmp_path: Path) -> None:
    """The demo-data table's example arguments pass each tool's schema and meet the gate it
    names; the invoices named are the demo's own."""
    from toolkeeper import Gateway
    from toolkeeper.demo.runner import DEMO_CONFIG
    from toolkeeper.demo.tools import DemoWorld

    data = section(GUIDE, "The demo data")
    rows = re.findall(r"^\| `(\w+)` \| `(\{.*?\})`.*? \| `(\w+)`[^|]*?(?:\((\S+)\))? \|$",
                      data, re.M)
    assert len(rows) == 5
    with Gateway.open(f"sqlite:///{tmp_path}/demo.db", config=str(DEMO_CONFIG)) as gw:
        for tool, arguments, gate, agent in rows:
            r = gw.call_sync(tool, arguments=json.loads(arguments),
                             agent=agent or "billing-bot", turn_group_id=f"readme-{tool}")
            assert r.gate == gate, (tool, r.to_dict())
    invoices = re.findall(r"`(INV-\d+)`\s+\((\w[\w ]*), (\d+)\)", data)
    assert {(i, c, float(a)) for i, c, a in invoices} == {
        (inv.id, inv.customer, inv.amount) for inv in DemoWorld.sample().invoices.values()}

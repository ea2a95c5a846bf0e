"""The README's library example runs as written."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.processes import child_env, stop
from tests.support.required import missing
from tests.support.waiting import wait_until

README = Path(__file__).parent.parent / "README.md"


def test_readme_library_example_runs(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                     monkeypatch: pytest.MonkeyPatch) -> None:
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), re.S)
    example = next(b for b in blocks if "Gateway.open" in b)
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("TOOLKEEPER_DATABASE_URL", raising=False)
    exec(compile(example, "README.md", "exec"), {"__name__": "readme_example"})
    out = capsys.readouterr().out
    assert "confirmation_required" in out and "ap_" in out
    assert "succeeded {'paid': 'inv-7', 'amount': 120}" in out
    assert os.path.exists(tmp_path / "quickstart.db")


def test_readme_servers_example_is_valid_config() -> None:
    import yaml

    from toolkeeper.config.model import ConfigFile

    blocks = re.findall(r"```yaml\n(.*?)```", README.read_text(), re.S)
    example = next(b for b in blocks if b.startswith("servers:"))
    config = ConfigFile.model_validate({"version": 1, **yaml.safe_load(example)})
    server = config.servers[0]
    assert server.name == "github" and server.tools["search"].side_effect == "pure"


def _builtins_section() -> str:
    text = README.read_text()
    return text[text.index("## Built-in tools"):text.index("## Secrets")]


def test_readme_builtins_table_names_every_builtin_with_a_valid_call() -> None:
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


def test_readme_builtins_config_sets_valid_policies_for_every_builtin() -> None:
    import yaml

    from toolkeeper.builtins import BUILTINS
    from toolkeeper.config import check, load_text

    block = next(b for b in re.findall(r"```yaml\n(.*?)```", _builtins_section(), re.S)
                 if b.startswith("tools:"))
    assert sorted(t["builtin"] for t in yaml.safe_load(block)["tools"]) == sorted(BUILTINS)
    found = check(load_text("version: 1\n" + block), base_dir=README.parent)
    assert [(v.rule, v.path, v.message) for v in found] == []


# --- "First ten minutes": every snippet of the path, against a real `serve --demo` ----------

REPO = README.parent
_FENCE = re.compile(r"```(\w+)\n(.*?)```", re.S)


def _first_ten_minutes() -> list[tuple[str, str]]:
    text = README.read_text()
    start = text.index("## First ten minutes")
    return _FENCE.findall(text[start:text.index("\n## ", start + 1)])


def _fragments_hold(comment: str, actual: str) -> None:
    """Every piece of a ``# {…}`` comment between the ellipses is in ``actual``."""
    for piece in comment.lstrip("# ").split("…"):
        piece = piece.strip(" ,{}")
        assert piece in actual, f"README says {piece!r}; got {actual}"


def _json_docs(out: str) -> list[dict[str, Any]]:
    docs, pos, dec = [], 0, json.JSONDecoder()
    while pos < len(out.rstrip()):
        doc, pos = dec.raw_decode(out, pos)
        docs.append(doc)
        while pos < len(out) and out[pos].isspace():
            pos += 1
    return docs


def _curls(block: str, env: dict[str, str]) -> list[dict[str, Any]]:
    """Run a bash block of curl calls; check each answer against the comment after it."""
    run = subprocess.run(["bash", "-euc", block], env=env, capture_output=True, text=True,
                         timeout=60)
    assert run.returncode == 0, run.stderr
    docs = _json_docs(run.stdout)
    comments = [line for line in block.splitlines() if line.startswith("# {")]
    assert len(docs) == len(comments) == block.count("curl -s")
    for doc, comment in zip(docs, comments, strict=True):
        _fragments_hold(comment, json.dumps(doc, separators=(",", ":"), ensure_ascii=False))
    return docs


def _announced(log: Path, expected: str, port: int) -> dict[str, str]:
    """The start-up text is the README's, line for line; the tokens by title."""
    pattern = "\n".join(re.escape(line.replace("8700", str(port))).replace("tk_…", r"(tk_\S+)")
                        for line in expected.strip().splitlines())
    found = re.search(pattern, log.read_text())  # printed before the server listens
    assert found, f"the README's start-up text is not what serve printed:\n{log.read_text()}"
    titles = re.findall(r"^  (.*): tk_…$", expected, re.M)
    return dict(zip(titles, found.groups(), strict=True))


@contextmanager
def _make_run(work: Path) -> Iterator[tuple[int, dict[str, str]]]:
    """What ``make run`` starts (``serve --demo`` over ``./toolkeeper.db``), on a free port."""
    from tests.support.serve import free_port

    expected = next(body for lang, body in _first_ten_minutes() if lang == "text")
    port, log = free_port(), work / "serve.log"
    env = child_env()
    for name in ("TOOLKEEPER_DATABASE_URL", "TOOLKEEPER_CONFIG", "TOOLKEEPER_SECRETS_BACKEND"):
        env.pop(name, None)
    with log.open("wb") as out:
        proc = subprocess.Popen([sys.executable, "-m", "toolkeeper.cli", "serve", "--demo",
                                 "--port", str(port)], env=env, cwd=work, stdout=out,
                                stderr=subprocess.STDOUT)
    try:
        wait_until(lambda: httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=2)
                   .status_code == 200, timeout=60, what="serve --demo answers /healthz",
                   ignoring=(httpx.HTTPError,))
        yield port, _announced(log, expected, port)
    finally:
        stop(proc)


@pytest.mark.slow  # a real server and five child processes: 5 to 34 s on a shared machine
def test_readme_first_ten_minutes_runs_as_written(tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str],
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    blocks = _first_ten_minutes()
    assert [lang for lang, _ in blocks] == ["text", "bash", "bash", "python", "bash"], \
        "a snippet added to the first ten minutes needs its run here"
    (_, _), (_, calls), (_, approve), (_, mcp_snippet), (_, cli) = blocks
    (tmp_path / ".venv").symlink_to(REPO / ".venv")
    with _make_run(tmp_path) as (port, tokens):
        def here(text: str) -> str:
            return text.replace("127.0.0.1:8700", f"127.0.0.1:{port}")

        agent, approver = tokens["demo agent token (billing-bot)"], tokens["demo approver token"]
        env = child_env()
        calls = here(calls).replace("AGENT_TOKEN=tk_…", f"AGENT_TOKEN={agent}") \
            .replace("APPROVER_TOKEN=tk_…", f"APPROVER_TOKEN={approver}")
        _, paying = _curls(calls, env)
        _curls(here(approve), {**env, "AGENT_TOKEN": agent, "APPROVER_TOKEN": approver,
                               "APPROVAL_ID": paying["approval_id"]})

        (tmp_path / "mcp_first.py").write_text(here(mcp_snippet))
        run = subprocess.run([".venv/bin/python", "mcp_first.py"], cwd=tmp_path,
                             env={**env, "AGENT_TOKEN": agent}, capture_output=True, text=True,
                             timeout=60)
        assert run.returncode == 0, run.stderr
        said = re.findall(r"^\s*(?:print\(.*?\)\s*)?# (.*)$", mcp_snippet, re.M)
        names, record = run.stdout.splitlines()
        assert names == said[0]
        _fragments_hold(said[1], record)

        lines = [line for line in cli.splitlines() if line and not line.startswith("#")]
        ok = subprocess.run(["bash", "-euc", lines[0]], cwd=tmp_path, env=env,
                            capture_output=True, text=True, timeout=60)
        assert ok.returncode == 0 and "succeeded" in ok.stdout and "Globex" in ok.stdout, ok
        status, reason, code = re.search(r"# status (\w+), reason (\w+) .*exit status (\d)",
                                         cli).groups()
        refused = subprocess.run(["bash", "-euc", lines[1]], cwd=tmp_path, env=env,
                                 capture_output=True, text=True, timeout=60)
        assert refused.returncode == int(code), refused
        assert status in refused.stdout and reason in refused.stdout

        # the library example, in the checkout where the demo runs: its own store
        test_readme_library_example_runs(tmp_path, capsys, monkeypatch)


def _approve_in_the_ui(url: str, token: str, approval_id: str) -> None:
    """The README's clicks: paste the token, **Use token**, **Approvals**, **Approve**."""
    import shutil

    from playwright.sync_api import expect, sync_playwright

    text = README.read_text()
    for words in ("**Use token**", "**Approvals**", "**Approve**"):
        assert words in text
    path = shutil.which("chromium") or shutil.which("chromium-browser")
    if path is None:
        message = "NO CHROMIUM: the README's UI approval needs Debian's `chromium`"
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
    _, (_, calls), (_, approve), _, _ = _first_ten_minutes()
    resubmit = approve[approve.index("\ncurl -s http") + 1:]
    with _make_run(tmp_path) as (port, tokens):
        agent, approver = tokens["demo agent token (billing-bot)"], tokens["demo approver token"]
        env = {**child_env(), "AGENT_TOKEN": agent}
        calls = calls.replace("127.0.0.1:8700", f"127.0.0.1:{port}") \
            .replace("AGENT_TOKEN=tk_…", f"AGENT_TOKEN={agent}")
        _, paying = _curls(calls, env)
        _approve_in_the_ui(f"http://127.0.0.1:{port}", approver, paying["approval_id"])
        paid, = _curls(resubmit.replace("127.0.0.1:8700", f"127.0.0.1:{port}"), env)
        assert paid["output"]["invoice_status"] == "paid"


def test_readme_demo_data_is_the_demos(tmp_path: Path) -> None:
    """The demo-data table's example arguments pass each tool's schema and meet the gate it
    names; the invoices named are the demo's own."""
    from toolkeeper import Gateway
    from toolkeeper.demo.runner import DEMO_CONFIG
    from toolkeeper.demo.tools import DemoWorld

    text = README.read_text()
    section = text[text.index("**The demo data**"):text.index("In a second terminal")]
    rows = re.findall(r"^\| `(\w+)` \| `(\{.*?\})`.*? \| `(\w+)`[^|]*?(?:\((\S+)\))? \|$",
                      section, re.M)
    assert len(rows) == 5
    with Gateway.open(f"sqlite:///{tmp_path}/demo.db", config=str(DEMO_CONFIG)) as gw:
        for tool, arguments, gate, agent in rows:
            r = gw.call_sync(tool, arguments=json.loads(arguments),
                             agent=agent or "billing-bot", turn_group_id=f"readme-{tool}")
            assert r.gate == gate, (tool, r.to_dict())
    invoices = re.findall(r"`(INV-\d+)`\s+\((\w[\w ]*), (\d+)\)", section)
    assert {(i, c, float(a)) for i, c, a in invoices} == {
        (inv.id, inv.customer, inv.amount) for inv in DemoWorld.sample().invoices.values()}

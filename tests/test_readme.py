"""The README's library example runs as written."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

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

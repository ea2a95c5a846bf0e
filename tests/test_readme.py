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
    assert os.path.exists(tmp_path / "toolkeeper.db")


def test_readme_servers_example_is_valid_config() -> None:
    import yaml

    from toolkeeper.config.model import ConfigFile

    blocks = re.findall(r"```yaml\n(.*?)```", README.read_text(), re.S)
    example = next(b for b in blocks if b.startswith("servers:"))
    config = ConfigFile.model_validate({"version": 1, **yaml.safe_load(example)})
    server = config.servers[0]
    assert server.name == "github" and server.tools["search"].side_effect == "pure"

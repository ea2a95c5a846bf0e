"""No build step for a user who pip installs (issue 11 item 6): the wheel carries every file the
console, the API docs, the migrations and the config schema need at run time."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile
from importlib.metadata import version
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PKG = ROOT / "src" / "toolkeeper"
SHIPPED = ["ui/static", "api/static", "store/migrations", "config"]


def _setuptools_ok() -> bool:
    major = int(version("setuptools").split(".")[0])
    return major >= 77


def _expected() -> set[str]:
    found = set()
    for sub in SHIPPED:
        for f in (PKG / sub).rglob("*"):
            if f.is_file() and "__pycache__" not in f.parts and f.suffix != ".pyc":
                found.add("toolkeeper/" + f.relative_to(PKG).as_posix())
    return found


@pytest.mark.slow
def test_the_wheel_ships_every_static_file_migration_and_schema(tmp_path: Path) -> None:
    if not _setuptools_ok():
        reason = "the venv's setuptools is older than 77: reinstall the dev extra"
        if os.environ.get("CI") == "true":
            pytest.fail(reason)
        pytest.skip(reason)
    src = tmp_path / "src-copy"  # built from a copy: the build leaves build/ and egg-info behind
    src.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, src / name)
    skip = shutil.ignore_patterns("__pycache__", "*.egg-info")
    shutil.copytree(ROOT / "src", src / "src", ignore=skip)
    out = tmp_path / "wheels"
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation",
         "-w", str(out), str(src)],
        check=True, timeout=300,
    )
    [wheel] = list(out.glob("toolkeeper-*.whl"))
    names = set(zipfile.ZipFile(wheel).namelist())
    expected = _expected()
    assert "toolkeeper/ui/static/index.html" in expected
    assert "toolkeeper/config/toolkeeper.schema.json" in expected
    assert any(n.startswith("toolkeeper/api/static/swagger-ui/") for n in expected)
    assert any(n.startswith("toolkeeper/store/migrations/versions/") for n in expected)
    assert sorted(expected - names) == []

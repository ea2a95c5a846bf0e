"""``make run`` (issue 33): a runtime-only install into .venv that says what it is doing,
then the demo server. The Makefile's choice is shown with ``make -n`` on the real Makefile
in a scratch copy (fast); the slow test runs ``make run`` for real in a copy of the
checkout with a fresh venv (pip reaches the registry), waits for the banner and fetches
the URLs it prints."""

from __future__ import annotations

import os
import queue
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import pytest

from tests.deploy.checkers import ROOT
from tests.support.serve import free_port
from tests.support.waiting import wait_until

MAKE = shutil.which("make")


def own_make_env() -> dict[str, str]:
    """This environment without what a ``make`` running the suite (``make test``) hands its
    children: its flags (``-o``, ``-n``…) and level (``make[1]: Entering directory``)."""
    return {k: v for k, v in os.environ.items()
            if k not in ("PYTHONPATH", "VIRTUAL_ENV", "MAKEFLAGS", "MFLAGS", "MAKELEVEL")}


def dry_run(work: Path, target: str) -> list[str]:
    """The commands ``make -n TARGET`` would run in ``work``, one per line."""
    assert MAKE, "GNU make is needed"
    result = subprocess.run([MAKE, "-n", target, "PYTHON=python3"], cwd=work, text=True,
                            capture_output=True, timeout=60, env=own_make_env())
    return result.stdout.splitlines()


@pytest.fixture
def scratch(tmp_path: Path) -> Path:
    for name in ("Makefile", "pyproject.toml"):
        shutil.copy2(ROOT / name, tmp_path / name)
    (tmp_path / ".venv" / "bin").mkdir(parents=True)
    return tmp_path


def installs(lines: list[str]) -> list[str]:
    return [line for line in lines if "pip install" in line]


def test_make_run_installs_the_runtime_only_and_says_so(scratch: Path) -> None:
    lines = dry_run(scratch, "run")
    assert any("Installing toolkeeper's runtime dependencies into .venv" in line
               for line in lines), lines
    (last,) = [line for line in installs(lines) if " -e " in line]
    assert last.endswith("-e .") and "--quiet" not in last and "dev" not in last, last
    assert lines[-1] == ".venv/bin/toolkeeper serve --demo"


def test_make_run_after_the_dev_install_installs_nothing(scratch: Path) -> None:
    (scratch / ".venv" / ".installed").touch()  # what `make venv` / `make test` leave
    os.utime(scratch / "pyproject.toml", (1, 1))
    lines = dry_run(scratch, "run")
    assert not installs(lines), lines
    assert lines == ["touch .venv/.installed-runtime", ".venv/bin/toolkeeper serve --demo"]


def test_make_test_after_make_run_installs_the_dev_extra(scratch: Path) -> None:
    (scratch / ".venv" / ".installed-runtime").touch()  # what `make run` leaves
    os.utime(scratch / "pyproject.toml", (1, 1))
    assert not installs(dry_run(scratch, "run"))
    dev = installs(dry_run(scratch, "venv"))
    assert any('-e ".[dev]"' in line for line in dev), dev


def copy_checkout(dest: Path) -> None:
    """The files git would clone (tracked, and new ones not ignored), nothing else."""
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others",
                             "--exclude-standard"], cwd=ROOT, capture_output=True,
                            check=True, timeout=60).stdout.decode().split("\0")
    for name in filter(None, listed):
        src = ROOT / name
        if src.is_file() and not src.is_symlink():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / name)


def reader(stream: object, lines: queue.Queue[str]) -> None:
    for line in stream:  # type: ignore[attr-defined]
        lines.put(line.rstrip("\n"))


def read_until(lines: queue.Queue[str], seen: list[str], pattern: str, timeout: float) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            line = lines.get(timeout=1)
        except queue.Empty:
            continue
        seen.append(line)
        if re.search(pattern, line):
            return line
    raise TimeoutError(f"no line matching {pattern!r} within {timeout:g} s; last lines:\n"
                       + "\n".join(seen[-40:]))


@pytest.mark.slow
def test_make_run_on_a_fresh_checkout_serves_the_demo(tmp_path: Path) -> None:
    assert MAKE, "GNU make is needed"
    work = tmp_path / "checkout"
    copy_checkout(work)
    port = free_port()
    env = {**own_make_env(), "TOOLKEEPER_PORT": str(port)}
    python = shutil.which("python3") or sys.executable
    proc = subprocess.Popen([MAKE, "run", f"PYTHON={python}"], cwd=work, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)
    lines: queue.Queue[str] = queue.Queue()
    threading.Thread(target=reader, args=(proc.stdout, lines), daemon=True).start()
    seen: list[str] = []
    try:
        read_until(lines, seen, r"Installing toolkeeper's runtime dependencies", 60)
        read_until(lines, seen, r"toolkeeper serving on http://", 900)
        read_until(lines, seen, r"OpenAPI\s+http://", 30)
        urls = dict(re.findall(r"^\s+(API|docs|UI|OpenAPI)\s+(http://\S+)", "\n".join(seen),
                               re.M))
        assert set(urls) == {"API", "docs", "UI", "OpenAPI"}, seen[-20:]
        # the banner is printed as uvicorn starts: wait (bounded) for it to listen
        wait_until(lambda: httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=2)
                   .status_code == 200, timeout=60, what="the demo server answers /healthz",
                   ignoring=(httpx.HTTPError,))
        for name, url in urls.items():
            answer = httpx.get(url, timeout=10, follow_redirects=True)
            assert answer.status_code == 200, (name, url, answer.status_code)
        assert httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=10).status_code == 200
        # the runtime only: no test tools, no agent frameworks
        probe = subprocess.run([str(work / ".venv/bin/python"), "-c",
                                "import importlib.util as u; print([m for m in ('pytest', "
                                "'mypy', 'playwright', 'langgraph', 'agents') if u.find_spec(m)])"],
                               capture_output=True, text=True, timeout=60)
        assert probe.stdout.strip() == "[]", probe.stdout + probe.stderr
        assert any("%" in line or "━" in line or "Downloading" in line for line in seen), \
            "pip's progress was not shown"
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=30)

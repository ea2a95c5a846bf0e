"""The image from deploy/Dockerfile, built and run on this machine (tests/deploy/container.py
says how, and why not with ``podman run``): it serves /healthz and /readyz as user 10001 on
a read-only root filesystem, writes only to its volume, and its own HEALTHCHECK passes."""

from __future__ import annotations

import json
import subprocess
import uuid
from pathlib import Path

import httpx
import pytest

from tests.deploy.container import build, bundle, ensure_base, sh, tools
from tests.support.serve import free_port
from tests.support.waiting import wait_until


@pytest.mark.slow
def test_the_image_builds_and_serves_on_a_read_only_root(tmp_path: Path) -> None:
    found = tools()
    podman, runc = found["podman"], found["runc"]
    config = build(podman, ensure_base(podman, found["debootstrap"]))
    assert config.get("User") == "10001:10001", config.get("User")
    health = config["Healthcheck"]["Test"]
    assert health[0] == "CMD" and health[1] == "python3" and "/healthz" in health[-1]

    rootfs = sh(podman, "image", "mount", "localhost/toolkeeper:test").stdout.strip()
    name = f"tk-test-{uuid.uuid4().hex[:8]}"
    port = free_port()
    # loopback: without a network namespace the default 0.0.0.0 would bind the machine's
    volume = bundle(runc, rootfs, config, tmp_path,
                    {"TOOLKEEPER_HOST": "127.0.0.1", "TOOLKEEPER_PORT": str(port)})
    base = f"http://127.0.0.1:{port}"
    log = (tmp_path / "container.log").open("w")
    try:
        started = subprocess.run([runc, "run", "--detach", name], cwd=tmp_path, stdout=log,
                                 stderr=subprocess.STDOUT, timeout=120)
        assert started.returncode == 0, (tmp_path / "container.log").read_text()
        wait_until(lambda: httpx.get(f"{base}/healthz", timeout=2).status_code == 200,
                   timeout=120, what=f"{base}/healthz answers", ignoring=(httpx.HTTPError,))
        assert httpx.get(f"{base}/readyz", timeout=10).json() == {"status": "ready"}
        state = json.loads(sh(runc, "state", name).stdout)
        status = Path(f"/proc/{state['pid']}/status").read_text()
        assert "Uid:\t10001\t10001\t10001\t10001" in status, status
        user = config["User"]
        sh(runc, "exec", "--user", user, name, *health[1:], timeout=60)  # the HEALTHCHECK
        ro = sh(runc, "exec", "--user", user, name, "python3", "-c",
                "import os\ntry:\n    open('/opt/toolkeeper/x', 'w')\nexcept OSError as e:\n"
                "    print(e.errno)\nelse:\n    print('written')", timeout=60)
        assert ro.stdout.strip() == "30", ro.stdout  # EROFS
        assert (volume / "toolkeeper.db").exists()  # its state went to the volume
    finally:
        subprocess.run([runc, "kill", name, "TERM"], capture_output=True, timeout=30)
        try:
            wait_until(lambda: json.loads(sh(runc, "state", name).stdout)["status"] == "stopped",
                       timeout=30, what="the container stops", ignoring=(AssertionError,))
        finally:
            subprocess.run([runc, "delete", "--force", name], capture_output=True, timeout=30)
            subprocess.run([podman, "image", "unmount", "localhost/toolkeeper:test"],
                           capture_output=True, timeout=60)
            log.close()

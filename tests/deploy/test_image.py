"""The image from deploy/Dockerfile, built and run on this machine (tests/deploy/container.py
says how, and why not with ``podman run``): on its own it serves /healthz and /readyz as
user 10001 on a read-only root filesystem, writes only to its volume, and its own
HEALTHCHECK passes; on PostgreSQL its ``db upgrade`` migrates an empty database and two
replicas serve one store (a token printed by one is accepted by the other)."""

from __future__ import annotations

import base64
import json
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.deploy.container import IMAGE, build, ensure_base, run_once, running, sh, tools
from tests.support.pgcluster import PgCluster
from tests.support.serve import free_port
from tests.support.waiting import wait_until

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def image() -> Iterator[tuple[dict[str, str], dict[str, Any], str]]:
    """(tools, the image's config, its root filesystem mounted) for the module."""
    found = tools()
    podman = found["podman"]
    config = build(podman, ensure_base(podman, found["debootstrap"]))
    rootfs = sh(podman, "image", "mount", IMAGE).stdout.strip()
    try:
        yield found, config, rootfs
    finally:
        sh(podman, "image", "unmount", IMAGE)


def ready(base: str) -> None:
    """Wait (bounded) for /healthz, then ask /readyz."""
    wait_until(lambda: httpx.get(f"{base}/healthz", timeout=2).status_code == 200,
               timeout=120, what=f"{base}/healthz answers", ignoring=(httpx.HTTPError,))
    assert httpx.get(f"{base}/readyz", timeout=10).json() == {"status": "ready"}


def test_the_image_serves_on_a_read_only_root(
        image: tuple[dict[str, str], dict[str, Any], str], tmp_path: Path) -> None:
    found, config, rootfs = image
    runc = found["runc"]
    assert config.get("User") == "10001:10001", config.get("User")
    health = config["Healthcheck"]["Test"]
    assert health[0] == "CMD" and health[1] == "python3" and "/healthz" in health[-1]
    port = free_port()
    # loopback: without a network namespace the default 0.0.0.0 would bind the machine's
    env = {"TOOLKEEPER_HOST": "127.0.0.1", "TOOLKEEPER_PORT": str(port)}
    with running(runc, rootfs, config, tmp_path, env) as box:
        ready(f"http://127.0.0.1:{port}")
        state = json.loads(sh(runc, "state", box.name).stdout)
        status = Path(f"/proc/{state['pid']}/status").read_text()
        assert "Uid:\t10001\t10001\t10001\t10001" in status, status
        user = config["User"]
        sh(runc, "exec", "--user", user, box.name, *health[1:], timeout=60)  # the HEALTHCHECK
        ro = sh(runc, "exec", "--user", user, box.name, "python3", "-c",
                "try:\n    open('/opt/toolkeeper/x', 'w')\nexcept OSError as e:\n"
                "    print(e.errno)\nelse:\n    print('written')", timeout=60)
        assert ro.stdout.strip() == "30", ro.stdout  # EROFS
        assert (box.volume / "toolkeeper.db").exists()  # its state went to the volume


def key() -> str:
    return base64.b64encode(os.urandom(32)).decode()


def test_the_image_migrates_postgresql_and_two_replicas_share_it(
        image: tuple[dict[str, str], dict[str, Any], str], pg_cluster: PgCluster,
        tmp_path: Path) -> None:
    found, config, rootfs = image
    runc = found["runc"]
    url = pg_cluster.fresh_database(f"tk_image_{os.urandom(4).hex()}")
    shared = {"TOOLKEEPER_DATABASE_URL": url, "TOOLKEEPER_HOST": "127.0.0.1",
              "TOOLKEEPER_SECRETS_BACKEND": "embedded", "TOOLKEEPER_SECRETS_KEY": key(),
              "TOOLKEEPER_AUDIT_KEY": key()}
    out = run_once(runc, rootfs, config, tmp_path / "migrate", shared, ["db", "upgrade"])
    assert "database at revision" in out, out
    ports = free_port(), free_port()
    with running(runc, rootfs, config, tmp_path / "one",
                 {**shared, "TOOLKEEPER_PORT": str(ports[0])}) as one:
        ready(f"http://127.0.0.1:{ports[0]}")
        with running(runc, rootfs, config, tmp_path / "two",
                     {**shared, "TOOLKEEPER_PORT": str(ports[1])}):
            ready(f"http://127.0.0.1:{ports[1]}")
            printed = re.search(r"admin token \(tenant default\): (\S+)", one.log.read_text())
            assert printed, one.log.read_text()[-2000:]
            me = httpx.get(f"http://127.0.0.1:{ports[1]}/me", timeout=10,
                           headers={"Authorization": f"Bearer {printed.group(1)}"})
            assert me.status_code == 200 and "admin" in me.json()["roles"], me.text

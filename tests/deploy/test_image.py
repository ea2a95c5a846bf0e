"""The image from deploy/Dockerfile, built and run on this machine (tests/deploy/container.py
says how, and why not with ``podman run``): on its own it serves /healthz and /readyz as
user 10001 on a read-only root filesystem, writes only to its volume, and its own
HEALTHCHECK passes; in compose.yaml's topology its ``db upgrade`` migrates an empty
PostgreSQL and two replicas on it and Redis serve one store behind compose's nginx.conf."""

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
from tests.deploy.nginx import proxy
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


def test_the_compose_topology_migrates_and_serves_behind_the_proxy(
        image: tuple[dict[str, str], dict[str, Any], str], pg_cluster: PgCluster,
        redis_url: str, tmp_path: Path) -> None:
    """compose.yaml's services without compose: the image's ``db upgrade`` on an empty
    PostgreSQL, two replicas of the image on it and on Redis, compose's nginx.conf in
    front; a token one replica printed is accepted through the proxy and by the other,
    and with the first replica stopped the proxy still answers."""
    found, config, rootfs = image
    runc = found["runc"]
    url = pg_cluster.fresh_database(f"tk_image_{os.urandom(4).hex()}")
    shared = {"TOOLKEEPER_DATABASE_URL": url, "TOOLKEEPER_REDIS_URL": redis_url,
              "TOOLKEEPER_HOST": "127.0.0.1", "TOOLKEEPER_SECRETS_BACKEND": "embedded",
              "TOOLKEEPER_SECRETS_KEY": key(), "TOOLKEEPER_AUDIT_KEY": key()}
    out = run_once(runc, rootfs, config, tmp_path / "migrate", shared, ["db", "upgrade"])
    assert "database at revision" in out, out
    ports = free_port(), free_port()
    front = f"http://127.0.0.1:{free_port()}"
    with running(runc, rootfs, config, tmp_path / "one",
                 {**shared, "TOOLKEEPER_PORT": str(ports[0])}) as one:
        ready(f"http://127.0.0.1:{ports[0]}")
        with running(runc, rootfs, config, tmp_path / "two",
                     {**shared, "TOOLKEEPER_PORT": str(ports[1])}), \
                proxy(tmp_path / "nginx", int(front.rsplit(":", 1)[1]),
                      {"toolkeeper-1": ports[0], "toolkeeper-2": ports[1]}):
            ready(f"http://127.0.0.1:{ports[1]}")
            ready(front)
            printed = re.search(r"admin token \(tenant default\): (\S+)", one.log.read_text())
            assert printed, one.log.read_text()[-2000:]
            auth = {"Authorization": f"Bearer {printed.group(1)}"}
            for base in (f"http://127.0.0.1:{ports[1]}", front, front):
                me = httpx.get(f"{base}/me", timeout=10, headers=auth)
                assert me.status_code == 200 and "admin" in me.json()["roles"], me.text
            sh(runc, "kill", one.name, "TERM")
            wait_until(lambda: json.loads(sh(runc, "state", one.name).stdout)["status"]
                       == "stopped", timeout=30, what="replica one stops")
            for _ in range(4):  # nginx passes each request to the replica still up
                assert httpx.get(f"{front}/readyz", timeout=10).status_code == 200

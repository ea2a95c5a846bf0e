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
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import hvac.exceptions
import pytest
import yaml

from tests.deploy.checkers import render
from tests.deploy.container import (
    IMAGE,
    Container,
    build,
    ensure_base,
    run_once,
    running,
    sh,
    tools,
)
from tests.deploy.nginx import proxy
from tests.secrets.backends import admin, vault_put
from tests.support.openbao import OpenBaoServer
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


def ready(base: str, runc: str | None = None, box: Container | None = None) -> None:
    """Wait (bounded) for /healthz, then ask /readyz; with ``box``, fail at once when its
    container has stopped (its log in the message)."""
    def answers() -> bool:
        if box is not None and runc is not None and json.loads(
                sh(runc, "state", box.name).stdout)["status"] == "stopped":
            raise AssertionError(f"container stopped:\n{box.log.read_text()[-3000:]}")
        return httpx.get(f"{base}/healthz", timeout=2).status_code == 200

    wait_until(answers, timeout=120, what=f"{base}/healthz answers",
               ignoring=(httpx.HTTPError,))
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
        ready(f"http://127.0.0.1:{port}", runc, box)
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


def from_chart(where: Path, values: dict[str, Any]) -> dict[str, tuple[list[str], dict[str, str]]]:
    """The chart rendered with ``values`` on top of tests/deploy/values/embedded.yaml: for
    the migration Job and the Deployment, the container's args and environment, each
    ``secretKeyRef`` resolved from the Secret the chart made; the config it renders (if
    any) written to ``where/config/toolkeeper.yaml``."""
    where.mkdir(parents=True, exist_ok=True)
    (where / "values.yaml").write_text(yaml.safe_dump(values))
    manifests = render(where / "manifests.yaml", "embedded.yaml", str(where / "values.yaml"))
    docs = [d for d in yaml.safe_load_all(manifests.read_text()) if d]
    (secret,) = [d["stringData"] for d in docs if d["kind"] == "Secret"]
    for doc in docs:
        if doc["kind"] == "ConfigMap":
            (where / "config").mkdir()
            (where / "config" / "toolkeeper.yaml").write_text(doc["data"]["toolkeeper.yaml"])
    out = {}
    for doc in docs:
        if doc["kind"] in ("Job", "Deployment"):
            (container,) = doc["spec"]["template"]["spec"]["containers"]
            env = {}
            for item in container["env"]:
                ref = item.get("valueFrom", {}).get("secretKeyRef")
                if ref is None:
                    env[item["name"]] = item["value"]
                elif ref["key"] in secret:
                    env[item["name"]] = secret[ref["key"]]
                else:
                    assert ref.get("optional"), ref
            out[doc["kind"]] = (container["args"], env)
    return out


def test_the_compose_topology_migrates_and_serves_behind_the_proxy(
        image: tuple[dict[str, str], dict[str, Any], str], pg_cluster: PgCluster,
        redis_url: str, tmp_path: Path) -> None:
    """compose.yaml's services without compose, configured as the Helm chart configures
    its Job and pods: the image's ``db upgrade`` on an empty PostgreSQL, two replicas of
    the image on it and on Redis, compose's nginx.conf in front; a token one replica
    printed is accepted through the proxy and by the other, and with the first replica
    stopped the proxy still answers."""
    found, config, rootfs = image
    runc = found["runc"]
    url = pg_cluster.fresh_database(f"tk_image_{os.urandom(4).hex()}")
    # the environment and arguments the Helm chart gives its Job and its pods
    chart = from_chart(tmp_path / "chart", {"secrets": {"values": {
        "databaseUrl": url, "redisUrl": redis_url, "auditKey": key(), "secretsKey": key()}}})
    job_args, job_env = chart["Job"]
    out = run_once(runc, rootfs, config, tmp_path / "migrate", job_env, job_args)
    assert "database at revision" in out, out
    serve_args, serve_env = chart["Deployment"]
    assert serve_args == config["Cmd"] == ["serve"]
    assert serve_env["TOOLKEEPER_REDIS_URL"] == redis_url
    # loopback (no network namespace here) instead of the chart's 0.0.0.0:8700
    shared = {**serve_env, "TOOLKEEPER_HOST": "127.0.0.1"}
    ports = free_port(), free_port()
    front = f"http://127.0.0.1:{free_port()}"
    with running(runc, rootfs, config, tmp_path / "one",
                 {**shared, "TOOLKEEPER_PORT": str(ports[0])}) as one:
        ready(f"http://127.0.0.1:{ports[0]}", runc, one)
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


def test_the_chart_s_vault_settings_log_the_image_in_to_openbao(
        image: tuple[dict[str, str], dict[str, Any], str], openbao: OpenBaoServer,
        tmp_path: Path) -> None:
    """``secrets.backend: vault`` with AppRole: the config and the environment the chart
    renders start the image's server against a real OpenBao, which logs in with the
    chart's role id and secret id (a secret id good for one login: the server used it)."""
    found, config, rootfs = image
    prefix = f"tk-{uuid.uuid4().hex[:8]}"
    vault_put(openbao, prefix)("crm", "api_key", "the-crm-key")
    role_id, secret_id = approle(openbao, prefix)
    chart = from_chart(tmp_path / "chart", {
        "secrets": {"backend": "vault", "values": {
            "databaseUrl": "sqlite:////var/lib/toolkeeper/toolkeeper.db", "auditKey": key(),
            "vaultRoleId": role_id, "vaultSecretId": secret_id}},
        "vault": {"address": openbao.url, "pathPrefix": prefix, "verify": False}})
    _, env = chart["Deployment"]
    assert env["TOOLKEEPER_SECRETS_BACKEND"] == "vault" and "TOOLKEEPER_SECRETS_KEY" not in env
    port = free_port()
    with running(found["runc"], rootfs, config, tmp_path / "box",
                 {**env, "TOOLKEEPER_HOST": "127.0.0.1", "TOOLKEEPER_PORT": str(port)},
                 mounts={"/etc/toolkeeper": tmp_path / "chart" / "config"}) as box:
        ready(f"http://127.0.0.1:{port}", found["runc"], box)
    with pytest.raises(hvac.exceptions.InvalidRequest):  # used up by the server's login
        admin(openbao).auth.approle.login(role_id=role_id, secret_id=secret_id)


def approle(server: OpenBaoServer, prefix: str) -> tuple[str, str]:
    """An AppRole that may read and list ``secret/{prefix}``, and a secret id for one login."""
    client = admin(server)
    if "approle/" not in client.sys.list_auth_methods()["data"]:
        client.sys.enable_auth_method("approle")
    client.sys.create_or_update_policy(name=prefix, policy=(
        f'path "secret/data/{prefix}/*" {{ capabilities = ["read"] }}\n'
        f'path "secret/metadata/{prefix}" {{ capabilities = ["list"] }}\n'
        f'path "secret/metadata/{prefix}/" {{ capabilities = ["list"] }}\n'))
    client.auth.approle.create_or_update_approle(prefix, token_policies=[prefix],
                                                 token_ttl="1h", secret_id_num_uses=1)
    role_id = client.auth.approle.read_role_id(prefix)["data"]["role_id"]
    secret_id = client.auth.approle.generate_secret_id(prefix)["data"]["secret_id"]
    return role_id, secret_id

"""Build deploy/Dockerfile with podman and run the image with runc, for test_image.py.

What this machine allows (a VM without CAP_SYS_RESOURCE, cgroups in hybrid mode, and no
network but the package registries): base images cannot be pulled from a container
registry, so the base is Debian bookworm made with debootstrap from Debian's packages
(python3, python3-venv) and imported into podman once (``BASE``, kept in podman's store);
``podman build`` runs its steps with chroot isolation; ``podman run`` cannot start a
container here (crun refuses hybrid cgroups, and podman always asks for rlimits this VM
refuses), so the image runs with runc from an OCI bundle made from the image's own config
(user, environment, entrypoint, working directory) with a read-only root, a tmpfs on /tmp
and a directory as its volume, in its own mount, PID, IPC and UTS namespaces, on the
host's loopback (no network namespace: there is no bridge to the host here)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.deploy.checkers import DOCKERFILE, ROOT
from tests.support.required import missing
from tests.support.waiting import wait_until

BASE = "localhost/toolkeeper-test-base:bookworm"
IMAGE = "localhost/toolkeeper:test"
MIRROR = "http://deb.debian.org/debian"


@dataclass(frozen=True)
class Container:
    name: str
    volume: Path
    log: Path


def tools() -> dict[str, str]:
    found = {name: shutil.which(name) for name in ("podman", "runc", "debootstrap")}
    lacking = sorted(name for name, path in found.items() if not path)
    if lacking:
        missing(f"CONTAINER TOOLS MISSING: {', '.join(lacking)} (apt-get install podman runc "
                "debootstrap); the image was not built or run")
    return {name: str(path) for name, path in found.items()}


def sh(*args: str, timeout: float = 600, **kw: Any) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(list(args), capture_output=True, text=True, timeout=timeout, **kw)
    if result.returncode != 0:
        raise AssertionError(f"{' '.join(args[:4])}… exited {result.returncode}:\n"
                             f"{result.stdout[-3000:]}\n{result.stderr[-3000:]}")
    return result


def ensure_base(podman: str, debootstrap: str) -> str:
    """The base image, made once from Debian's packages (about 5 minutes)."""
    if subprocess.run([podman, "image", "exists", BASE], timeout=60).returncode == 0:
        return BASE
    with tempfile.TemporaryDirectory(prefix="tk-rootfs-") as tmp:
        rootfs = Path(tmp) / "rootfs"
        sh(debootstrap, "--variant=minbase", "--include=python3,python3-venv,ca-certificates",
           "bookworm", str(rootfs), MIRROR, timeout=1500)
        # the machine's CA bundle, so pip in the build trusts what the host's pip trusts
        shutil.copy2("/etc/ssl/certs/ca-certificates.crt",
                     rootfs / "etc/ssl/certs/ca-certificates.crt")
        shutil.rmtree(rootfs / "var/cache/apt/archives", ignore_errors=True)
        tar = subprocess.Popen(["tar", "-C", str(rootfs), "-c", "."], stdout=subprocess.PIPE)
        try:
            sh(podman, "import", "--change", 'CMD ["python3"]', "-", BASE, stdin=tar.stdout,
               timeout=600)
        finally:
            tar.wait(timeout=600)
    return BASE


def build(podman: str, base: str) -> dict[str, Any]:
    """``podman build`` of deploy/Dockerfile on ``base``; the image's config, with its
    ``Healthcheck`` (podman keeps that beside the config)."""
    sh(podman, "build", "--isolation", "chroot", "--network", "host", "--format", "docker",
       "-f", str(DOCKERFILE), "--build-arg", f"PYTHON_IMAGE={base}", "-t", IMAGE, str(ROOT),
       timeout=1200)
    (info,) = json.loads(sh(podman, "image", "inspect", IMAGE).stdout)
    config: dict[str, Any] = {**info["Config"], "Healthcheck": info.get("Healthcheck")}
    return config


def bundle(runc: str, rootfs: str, config: dict[str, Any], where: Path,
           env: dict[str, str]) -> Path:
    """An OCI bundle in ``where`` running the image as its config says, ``env`` added."""
    sh(runc, "spec", cwd=where)
    spec = json.loads((where / "config.json").read_text())
    uid, _, gid = config["User"].partition(":")
    data = where / "volume"
    data.mkdir()
    os.chown(data, int(uid), int(gid or uid))
    image_env = dict(e.split("=", 1) for e in config["Env"])
    spec["root"] = {"path": rootfs, "readonly": True}
    process = spec["process"]
    process.pop("rlimits", None)
    process.update(terminal=False, user={"uid": int(uid), "gid": int(gid or uid)},
                   args=[*config["Entrypoint"], *config.get("Cmd", [])],
                   cwd=config["WorkingDir"],
                   env=[f"{k}={v}" for k, v in {**image_env, **env}.items()])
    linux = spec["linux"]
    linux["namespaces"] = [n for n in linux["namespaces"]
                           if n["type"] in ("pid", "mount", "ipc", "uts")]
    (volume,) = config["Volumes"]
    spec["mounts"] += [
        {"destination": volume, "type": "bind", "source": str(data), "options": ["rbind", "rw"]},
        {"destination": "/tmp", "type": "tmpfs", "source": "tmpfs",
         "options": ["nosuid", "nodev", "mode=1777", "size=64m"]},
    ]
    (where / "config.json").write_text(json.dumps(spec))
    return data


@contextmanager
def running(runc: str, rootfs: str, config: dict[str, Any], where: Path,
            env: dict[str, str]) -> Iterator[Container]:
    """The image running detached (its stdout and stderr in ``where/container.log``) until
    the block ends; then stopped with SIGTERM (bounded) and deleted."""
    where.mkdir(parents=True, exist_ok=True)
    volume = bundle(runc, rootfs, config, where, env)
    name = f"tk-test-{uuid.uuid4().hex[:8]}"
    log_path = where / "container.log"
    with log_path.open("w") as log:
        started = subprocess.run([runc, "run", "--detach", name], cwd=where, stdout=log,
                                 stderr=subprocess.STDOUT, timeout=120)
    assert started.returncode == 0, log_path.read_text()
    try:
        yield Container(name, volume, log_path)
    finally:
        subprocess.run([runc, "kill", name, "TERM"], capture_output=True, timeout=30)
        try:
            wait_until(lambda: json.loads(sh(runc, "state", name).stdout)["status"] == "stopped",
                       timeout=30, what=f"container {name} stops", ignoring=(AssertionError,))
        finally:
            subprocess.run([runc, "delete", "--force", name], capture_output=True, timeout=30)


def run_once(runc: str, rootfs: str, config: dict[str, Any], where: Path,
             env: dict[str, str], args: list[str]) -> str:
    """The image with ``args`` instead of its command, in the foreground; its output."""
    where.mkdir(parents=True, exist_ok=True)
    bundle(runc, rootfs, {**config, "Cmd": args}, where, env)
    return sh(runc, "run", f"tk-once-{uuid.uuid4().hex[:8]}", cwd=where, timeout=300,
              stdin=subprocess.DEVNULL).stdout

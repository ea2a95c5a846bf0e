"""The deploy checkers of ``make checkers`` (.venv-checkers: checkov, kubernetes-validate,
hadolint, check-jsonschema, helm) and the chart rendered with helm, for tests/deploy.

Each run is a subprocess bounded in time. A checker that is missing skips its test loudly
locally and fails it under ``CI=true`` (tests/support/required.py)."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

from tests.support.required import missing

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
DOCKERFILE = DEPLOY / "Dockerfile"
COMPOSE = DEPLOY / "compose" / "compose.yaml"
CHART = DEPLOY / "helm" / "toolkeeper"
VALUES = Path(__file__).resolve().parent / "values"
CHECKERS = ROOT / ".venv-checkers" / "bin"
TIMEOUT = 300

# Checks the deploy files fail on purpose, each with its reason. Nothing else may fail.
ALLOWED: dict[str, str] = {
    "CKV_DOCKER_7": (
        "checkov does not resolve ARG in FROM: the base is ARG PYTHON_IMAGE, whose default "
        "carries a version tag (test_the_image_pins_its_base_and_checks_health checks it), "
        "so a registry mirror can be named with --build-arg"),
    "CKV_K8S_35": (
        "keys reach the server as variables from a Secret (secretKeyRef), not as files: "
        "toolkeeper refuses a key file that group or others can read, and a Secret volume "
        "shared with the non-root user through fsGroup always is group-readable"),
    "CKV_K8S_43": (
        "the image is named by tag by default: an operator pins it with image.digest "
        "(values.yaml), which the chart then uses instead of the tag"),
    "CKV_K8S_15": (
        "imagePullPolicy IfNotPresent by default: with image.digest set it is exact, and "
        "Always would make every pod start depend on the registry"),
}

HELM_RENDER_ALLOWED = {
    "CKV_K8S_21": (
        "checkov's helm runner renders the chart into namespace default itself; the chart "
        "puts everything in .Release.Namespace, and our renderings (namespace toolkeeper) "
        "are checked for it too"),
}
"""Allowed only in what checkov's own helm rendering finds (``--framework helm``)."""


def tool(name: str) -> Path:
    """The checker's executable in .venv-checkers, or skip/fail saying how to get it."""
    path = CHECKERS / name
    if not path.exists():
        missing(f"{name} NOT INSTALLED: `make checkers` puts it in .venv-checkers "
                f"(docs/guides/deploy.md); the deploy checks did not run")
    return path


def run(args: list[str | Path], *, check: bool = False,
        timeout: float = TIMEOUT) -> subprocess.CompletedProcess[str]:
    """One checker run, bounded; ``PATH`` leads to .venv-checkers (checkov finds helm)."""
    env = {**os.environ, "PATH": f"{CHECKERS}{os.pathsep}{os.environ.get('PATH', '')}",
           "CHECKOV_RUN_SCA_PACKAGE_SCAN_V2": "false", "BC_SKIP_MAPPING": "TRUE",
           "LOG_LEVEL": "WARNING"}
    result = subprocess.run([str(a) for a in args], capture_output=True, text=True,
                            timeout=timeout, env=env, cwd=ROOT)
    if check and result.returncode != 0:
        raise AssertionError(f"{args[0]} exited {result.returncode}:\n{result.stdout[-4000:]}"
                             f"\n{result.stderr[-4000:]}")
    return result


def render(dest: Path, *values: str, sets: tuple[str, ...] = ()) -> Path:
    """``helm template`` of the chart with the named values files (tests/deploy/values/),
    written to ``dest`` (a file of all manifests)."""
    args: list[str | Path] = [tool("helm"), "template", "tk", CHART, "--namespace", "toolkeeper"]
    for name in values:
        args += ["-f", VALUES / name]
    for item in sets:
        args += ["--set", item]
    dest.write_text(run(args, check=True).stdout)
    return dest


def checkov(*args: str | Path) -> list[dict[str, Any]]:
    """checkov's failed checks (JSON output) for ``args`` (its -f/-d/--framework options)."""
    result = run([tool("checkov"), "--output", "json", "--quiet", "--compact",
                  "--skip-download", *args])
    if result.returncode not in (0, 1) or not result.stdout.strip().startswith(("{", "[")):
        raise AssertionError(f"checkov did not run (exit {result.returncode}):\n"
                             f"{result.stdout[-3000:]}\n{result.stderr[-3000:]}")
    reports = json.loads(result.stdout)
    reports = reports if isinstance(reports, list) else [reports]
    failed: list[dict[str, Any]] = []
    for report in reports:
        failed += (report.get("results") or {}).get("failed_checks", [])
    return failed


def summarize(failed: list[dict[str, Any]]) -> list[str]:
    """``CHECK_ID file resource: name`` of each failure, for an assertion message."""
    return sorted({f"{f['check_id']} {f.get('file_path')} {f.get('resource')}: "
                   f"{f.get('check_name')}" for f in failed})


def unexpected(failed: list[dict[str, Any]]) -> list[str]:
    """The failures not allowed (``ALLOWED``)."""
    return summarize([f for f in failed if f["check_id"] not in ALLOWED])

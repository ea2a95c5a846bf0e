"""The image, compose file and Helm chart under deploy/ pass maintained checkers from the
registries (docs/guides/deploy.md): checkov (Dockerfile, chart, rendered manifests),
hadolint (Dockerfile), kubernetes-validate (rendered manifests against the Kubernetes
schemas), check-jsonschema (compose file against the compose spec). A finding fails the
test unless its check is in ``checkers.ALLOWED`` with a written reason;
``test_the_checkers_catch_a_broken_dockerfile_and_chart`` shows they find what they must."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest
import yaml

from tests.deploy.checkers import (
    ALLOWED,
    CHART,
    COMPOSE,
    DOCKERFILE,
    HELM_RENDER_ALLOWED,
    VALUES,
    checkov,
    render,
    run,
    summarize,
    tool,
    unexpected,
)

VARIANTS = ("embedded.yaml", "vault.yaml")


@pytest.fixture(scope="module")
def rendered(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The chart rendered with each values file, one directory each (for checkov -d)."""
    out = {}
    for name in VARIANTS:
        folder = tmp_path_factory.mktemp(name.removesuffix(".yaml"))
        out[name] = render(folder / "manifests.yaml", name)
    return out


def test_the_dockerfile_passes_checkov_and_hadolint() -> None:
    failed = checkov("--framework", "dockerfile", "-f", DOCKERFILE)
    assert not unexpected(failed), unexpected(failed)
    result = run([tool("hadolint"), "--no-color", DOCKERFILE])
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_chart_and_its_renderings_pass_checkov(rendered: dict[str, Path]) -> None:
    # the chart as checkov renders it itself (with helm), and each rendering of ours
    failed = [f for f in checkov("--framework", "helm", "-d", CHART,
                                 "--var-file", VALUES / "embedded.yaml")
              if f["check_id"] not in HELM_RENDER_ALLOWED]
    files = [arg for path in rendered.values() for arg in ("-f", path)]
    failed += checkov("--framework", "kubernetes", *files)
    assert not unexpected(failed), unexpected(failed)
    checked = {f["check_id"] for f in failed}
    assert checked <= set(ALLOWED)


def test_the_rendered_manifests_are_valid_kubernetes(rendered: dict[str, Path]) -> None:
    for path in rendered.values():
        result = run([tool("kubernetes-validate"), "--strict", "--kubernetes-version", "1.33",
                      path])
        assert result.returncode == 0, result.stdout + result.stderr


def test_the_compose_file_matches_the_compose_spec() -> None:
    result = run([tool("check-jsonschema"), "--builtin-schema", "vendor.compose-spec", COMPOSE])
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_chart_lints_and_refuses_one_replica(tmp_path: Path) -> None:
    lint = run([tool("helm"), "lint", "--strict", CHART, "-f", VALUES / "embedded.yaml"])
    assert lint.returncode == 0, lint.stdout + lint.stderr
    one = run([tool("helm"), "template", "tk", CHART, "-f", VALUES / "embedded.yaml",
               "--set", "replicaCount=1"])
    assert one.returncode != 0 and "replicaCount must be 2 or more" in one.stderr
    keyless = run([tool("helm"), "template", "tk", CHART])
    assert keyless.returncode != 0 and "databaseUrl" in keyless.stderr


def docs(path: Path) -> list[dict]:  # type: ignore[type-arg]
    return [d for d in yaml.safe_load_all(path.read_text()) if d]


def test_the_chart_has_what_operators_need(rendered: dict[str, Path]) -> None:
    for name, path in rendered.items():
        kinds = {d["kind"]: d for d in docs(path)}
        assert {"Deployment", "Service", "PodDisruptionBudget", "Job",
                "NetworkPolicy", "ServiceAccount"} <= set(kinds), (name, sorted(kinds))
        deploy = kinds["Deployment"]
        assert deploy["spec"]["replicas"] >= 2
        pod = deploy["spec"]["template"]["spec"]
        (container,) = pod["containers"]
        assert container["livenessProbe"]["httpGet"]["path"] == "/healthz"
        assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"
        assert container["resources"]["limits"] and container["resources"]["requests"]
        assert pod["securityContext"]["runAsNonRoot"] is True
        assert container["securityContext"]["readOnlyRootFilesystem"] is True
        job = kinds["Job"]
        assert job["metadata"]["annotations"]["helm.sh/hook"] == "pre-install,pre-upgrade"
        assert job["spec"]["template"]["spec"]["containers"][0]["args"] == ["db", "upgrade"]
        env = {e["name"]: e for e in container["env"]}
        assert env["TOOLKEEPER_AUDIT_KEY"]["valueFrom"]["secretKeyRef"]["key"] == "audit-key"
        assert env["TOOLKEEPER_DATABASE_URL"]["valueFrom"]["secretKeyRef"]


def test_the_vault_rendering_gives_a_config_toolkeeper_accepts(
        rendered: dict[str, Path], tmp_path: Path) -> None:
    (config_map,) = [d for d in docs(rendered["vault.yaml"]) if d["kind"] == "ConfigMap"]
    config = tmp_path / "toolkeeper.yaml"
    config.write_text(config_map["data"]["toolkeeper.yaml"])
    assert yaml.safe_load(config.read_text())["secrets"]["vault"]["auth"] == "approle"
    result = run([sys.executable, "-m", "toolkeeper.cli", "check", "-f", config], timeout=120)
    assert result.returncode == 0 and "no violations" in result.stdout, result.stdout + \
        result.stderr
    env = {e["name"] for d in docs(rendered["vault.yaml"]) if d["kind"] == "Deployment"
           for e in d["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert {"TOOLKEEPER_VAULT_ROLE_ID", "TOOLKEEPER_VAULT_SECRET_ID", "TOOLKEEPER_CONFIG"} <= env
    assert "TOOLKEEPER_SECRETS_KEY" not in env


def test_the_compose_file_runs_two_read_only_replicas_behind_the_proxy() -> None:
    compose = yaml.safe_load(COMPOSE.read_text())
    services = compose["services"]
    replicas = [s for s in services if s.startswith("toolkeeper-")]
    assert len(replicas) == 2
    for name in (*replicas, "migrate"):
        service = services[name]
        assert service["read_only"] is True and service["user"] == "10001:10001"
        assert service["environment"]["TOOLKEEPER_DATABASE_URL"].startswith(
            "postgresql+psycopg://")
        assert service["environment"]["TOOLKEEPER_REDIS_URL"].startswith("redis://")
        # keys come from .env (required there), never written into the file; checkov's
        # secrets scan does not recognise a base64 key, so this is checked here
        for var in ("TOOLKEEPER_SECRETS_KEY", "TOOLKEEPER_AUDIT_KEY"):
            assert service["environment"][var] == f"${{{var}:?set {var} in .env}}", var
        assert ":${POSTGRES_PASSWORD:?" in service["environment"]["TOOLKEEPER_DATABASE_URL"]
    for name in replicas:
        assert services[name]["depends_on"]["migrate"]["condition"] == \
            "service_completed_successfully"
    nginx = (COMPOSE.parent / "nginx.conf").read_text()
    assert {f"{r}:8700" for r in replicas} <= set(re.findall(r"server (\S+)", nginx))


def test_the_image_pins_its_base_and_checks_health() -> None:
    text = DOCKERFILE.read_text()
    base = re.search(r"^ARG PYTHON_IMAGE=(\S+)$", text, re.M)
    assert base and re.fullmatch(r"[\w./-]+:\d[\w.-]*", base.group(1)), base
    assert re.findall(r"^FROM (\S+)", text, re.M) == ["${PYTHON_IMAGE}"] * 2
    check = re.search(r"^HEALTHCHECK .*?CMD (.*)$", text, re.M | re.S)
    assert check and '"python3"' in check.group(1) and "/healthz" in check.group(1)
    assert "curl" not in check.group(1)
    assert re.search(r"^USER 10001", text, re.M)


def test_the_checkers_catch_a_broken_dockerfile_and_chart(tmp_path: Path) -> None:
    """Broken on purpose: the Dockerfile without USER and HEALTHCHECK, the chart with a
    writable root filesystem, root allowed and no resources; each rule must be found."""
    text = DOCKERFILE.read_text()
    broken = re.sub(r"^USER .*\n", "", text, flags=re.M)
    broken = re.sub(r"^HEALTHCHECK .*?\n(?=ENTRYPOINT)", "", broken, flags=re.M | re.S)
    assert "USER" not in broken.split("FROM ${PYTHON_IMAGE} AS runtime")[1]
    assert "HEALTHCHECK" not in broken
    dockerfile = tmp_path / "docker" / "Dockerfile"
    dockerfile.parent.mkdir()
    dockerfile.write_text(broken)
    found = {f["check_id"] for f in checkov("--framework", "dockerfile", "-f", dockerfile)}
    assert {"CKV_DOCKER_2", "CKV_DOCKER_3"} <= found, found

    chart = tmp_path / "k8s"
    chart.mkdir()
    manifests = render(chart / "manifests.yaml", "embedded.yaml", sets=(
        "securityContext.readOnlyRootFilesystem=false", "securityContext.runAsNonRoot=false",
        "podSecurityContext.runAsNonRoot=false", "resources=null",
        "securityContext.allowPrivilegeEscalation=true"))
    failed = checkov("--framework", "kubernetes", "-f", manifests)
    found = {f["check_id"] for f in failed}
    assert {"CKV_K8S_22", "CKV_K8S_20", "CKV_K8S_11", "CKV_K8S_13"} <= found, \
        summarize(failed)

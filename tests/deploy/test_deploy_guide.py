"""The blocks of docs/guides/deploy.md that can run here run here (the rest are registered
in tests/test_readme_blocks.py with the test that covers them or the reason they cannot)."""

from __future__ import annotations

import base64
import re
import subprocess
from pathlib import Path

import yaml

from tests.deploy.checkers import CHART, DOCKERFILE, render, run, tool
from tests.support.docs import block

PAGE = "docs/guides/deploy.md"


def test_the_key_command_makes_a_key_toolkeeper_accepts() -> None:
    command = block(f"{PAGE}: The image #2").strip()
    made = subprocess.run(["sh", "-c", command], capture_output=True, text=True, timeout=60,
                          check=True).stdout.strip()
    assert len(base64.b64decode(made, validate=True)) == 32
    from toolkeeper.secrets.embedded import _decode_key

    assert len(_decode_key(made, "TOOLKEEPER_AUDIT_KEY")) == 32


def test_the_build_and_run_lines_match_the_dockerfile() -> None:
    build = block(f"{PAGE}: The image #0")
    assert "-f deploy/Dockerfile" in build and build.rstrip().endswith(" .")
    run_line = " ".join(block(f"{PAGE}: The image #1").replace("\\\n", " ").split())
    text = DOCKERFILE.read_text()
    volume = re.search(r'^VOLUME \["(\S+)"\]', text, re.M)
    assert volume and f":{volume.group(1)} " in run_line
    assert "--read-only" in run_line and "--tmpfs /tmp" in run_line
    port = re.search(r"^EXPOSE (\d+)", text, re.M)
    assert port and f":{port.group(1)}:{port.group(1)} " in run_line


def test_the_vault_values_render(tmp_path: Path) -> None:
    values = tmp_path / "vault-values.yaml"
    values.write_text(block(f"{PAGE}: Helm chart #1"))
    manifests = render(tmp_path / "manifests.yaml", str(values))  # absolute: VALUES / it is it
    kinds = {d["kind"] for d in yaml.safe_load_all(manifests.read_text()) if d}
    assert "ConfigMap" in kinds and "Secret" not in kinds


def test_the_install_line_renders(tmp_path: Path) -> None:
    line = " ".join(block(f"{PAGE}: Helm chart #0").replace("\\\n", " ").split())
    sets = re.findall(r"--set (\S+)", line)
    assert "secrets.existingSecret=toolkeeper-keys" in sets
    keys = set(re.findall(r"--from-literal=([\w-]+)=", line))
    assert keys == {"database-url", "audit-key", "secrets-key", "redis-url"}
    args = [tool("helm"), "template", "toolkeeper", CHART, "-n", "toolkeeper"]
    for item in sets:
        args += ["--set", item.replace("sha256:…", "sha256:" + "0" * 64)]
    rendered = run(args, check=True).stdout
    used = set(re.findall(r"key: ([\w-]+)", rendered))
    assert used <= keys, used - keys

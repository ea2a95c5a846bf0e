"""A throwaway PostgreSQL cluster for the test suite: initdb, start, hand out databases, stop.

Every cluster lives in its own fresh temp dir on a free port, so a run that was killed before
its teardown never gets in the way of the next one.
"""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import psycopg
from psycopg import sql

from toolkeeper.bench.irreversible import PG_URL_ENV

DEFAULT_DATABASE = "toolkeeper_test"
_SUPERUSER = "postgres"
_OS_USER = "postgres"
_START_ATTEMPTS = 3
_COMMAND_TIMEOUT = 60.0
_CONNECT_TIMEOUT = 10
_DB_NAME = re.compile(r"[a-z_][a-z0-9_]{0,62}")
_PREFIX = "toolkeeper-pg-"
_OWNER_FILE = "owner.pid"
_SERVER_SETTINGS = (
    "-c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=300"
)
_DURABLE_SETTINGS = "-c max_connections=300"
"""For benchmarks: PostgreSQL's own durability defaults (fsync, synchronous commit)."""


def _identifier(name: str) -> sql.Identifier:
    """A database name this module creates or drops, checked against ``_DB_NAME``."""
    if not _DB_NAME.fullmatch(name):
        raise ValueError(f"database name must match {_DB_NAME.pattern}: {name!r}")
    return sql.Identifier(name)


class PgUnavailable(RuntimeError):
    """PostgreSQL cannot be run on this machine (binaries or the postgres OS user missing)."""


class PgClusterError(RuntimeError):
    """PostgreSQL is installed but a cluster could not be created, started or used."""


def find_bin_dir() -> Path:
    """The directory holding both `initdb` and `pg_ctl`: PATH, /usr/local/bin, then Debian's."""
    candidates: list[Path] = []
    on_path = shutil.which("initdb")
    if on_path:
        candidates.append(Path(on_path).parent)
    candidates.append(Path("/usr/local/bin"))
    debian = glob.glob("/usr/lib/postgresql/*/bin")
    # Newest major version first; the directory name is the version.
    debian.sort(key=lambda p: int(v) if (v := Path(p).parent.name).isdigit() else -1, reverse=True)
    candidates.extend(Path(p) for p in debian)
    for directory in candidates:
        if all(os.access(directory / name, os.X_OK) for name in ("initdb", "pg_ctl")):
            return directory
    raise PgUnavailable(
        "PostgreSQL server binaries (initdb, pg_ctl) not found on PATH, in /usr/local/bin or "
        "/usr/lib/postgresql/*/bin; install them with `apt-get install -y postgresql` "
        "(.ci/run does this)"
    )


def libpq_url(url: str) -> str:
    """The SQLAlchemy URL `postgresql+psycopg://…` as a plain libpq URL psycopg accepts."""
    return url.replace("postgresql+psycopg://", "postgresql://", 1)


def reap_orphans() -> None:
    """Stop and delete clusters left by test runs that died before their teardown.

    A cluster is an orphan only when the process recorded as its owner no longer exists, so
    clusters of concurrent runs on the same machine are left alone.
    """
    roots = {Path(tempfile.gettempdir()), Path("/tmp")}
    for root in (d for base in roots for d in base.glob(f"{_PREFIX}*")):
        try:
            owner_pid = int((root / _OWNER_FILE).read_text())
        except (OSError, ValueError):
            continue
        if _alive(owner_pid):
            continue
        bin_dir = find_bin_dir()
        PgCluster(bin_dir=bin_dir, root=root, port=0, as_postgres=os.geteuid() == 0).stop()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)  # signal 0 only checks existence; PermissionError still means alive
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    return True


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@dataclass(kw_only=True)
class PgCluster:
    """A running throwaway cluster; `stop()` kills it and deletes every file it wrote."""

    bin_dir: Path
    """Where `initdb` and `pg_ctl` were found."""
    root: Path
    """The temp dir holding the data directory, the socket and the server log."""
    port: int
    """TCP port on 127.0.0.1 the server listens on."""
    as_postgres: bool
    """True when we are root and run the binaries as the `postgres` OS user."""
    durable: bool = False
    """PostgreSQL's durability defaults (benchmarks) instead of the tests' fsync=off."""

    @property
    def _settings(self) -> str:
        return _DURABLE_SETTINGS if self.durable else _SERVER_SETTINGS

    @property
    def data_dir(self) -> Path:
        return self.root / "data"

    @property
    def log_file(self) -> Path:
        return self.root / "server.log"

    @property
    def url(self) -> str:
        """URL of the database created at start-up."""
        return self.url_for(DEFAULT_DATABASE)

    def url_for(self, database: str) -> str:
        return f"postgresql+psycopg://{_SUPERUSER}@127.0.0.1:{self.port}/{database}"

    @classmethod
    def start(cls, *, durable: bool = False) -> PgCluster:
        """initdb a new cluster in a fresh temp dir, start it and create `toolkeeper_test`
        (``durable``: with PostgreSQL's fsync and synchronous commit, for benchmarks)."""
        bin_dir = find_bin_dir()
        as_postgres = os.geteuid() == 0
        if as_postgres:
            try:
                owner = pwd.getpwnam(_OS_USER)
            except KeyError:
                raise PgUnavailable(
                    "running as root, and initdb/pg_ctl refuse root, but there is no "
                    f"'{_OS_USER}' OS user to run them as; installing the postgresql package "
                    "creates it (.ci/run does this)"
                ) from None
        reap_orphans()
        # As root, /tmp: the postgres user must be able to reach the dir, whatever TMPDIR says.
        root = Path(tempfile.mkdtemp(prefix=_PREFIX, dir="/tmp" if as_postgres else None))
        (root / _OWNER_FILE).write_text(f"{os.getpid()}\n")
        if as_postgres:
            os.chown(root, owner.pw_uid, owner.pw_gid)
        cluster = cls(bin_dir=bin_dir, root=root, port=0, as_postgres=as_postgres,
                      durable=durable)
        try:
            cluster._initdb()
            cluster._start_on_free_port()
            cluster.fresh_database(DEFAULT_DATABASE)
        except BaseException:
            cluster.stop()
            raise
        return cluster

    def fresh_database(self, name: str, template: str | None = None) -> str:
        """Create a new database — empty, or a copy of ``template`` (a database nobody is
        connected to) — and return its SQLAlchemy URL."""
        statement = sql.SQL("CREATE DATABASE {}").format(_identifier(name))
        if template is not None:
            statement = sql.SQL("{} TEMPLATE {}").format(statement, _identifier(template))
        self._admin(statement, f"could not create database {name!r}")
        return self.url_for(name)

    def drop_database(self, name: str) -> None:
        """Drop a database made by ``fresh_database``, disconnecting whoever is still on it
        (a test's leftovers); the cluster's directory then stays small until ``stop``."""
        self._admin(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(_identifier(name)),
                    f"could not drop database {name!r}")

    def _admin(self, statement: sql.Composed, failure: str) -> None:
        """Run one statement outside a transaction on the ``postgres`` database."""
        admin = libpq_url(self.url_for("postgres"))
        try:
            with psycopg.connect(admin, autocommit=True, connect_timeout=_CONNECT_TIMEOUT) as conn:
                conn.execute(statement)
        except psycopg.Error as exc:
            raise PgClusterError(f"{failure}: {exc}") from exc

    def stop(self) -> None:
        """Stop the server without a checkpoint and delete its directory. Safe to repeat."""
        if (self.data_dir / "postmaster.pid").exists():
            try:
                self._pg_ctl("stop", "-m", "immediate", "-w", "-t", "30")
            except PgClusterError:
                self._kill_postmaster()
        shutil.rmtree(self.root, ignore_errors=True)

    def halt(self) -> None:
        """Stop the server at once (``immediate``: as a crash would), keeping its data, so
        ``resume`` brings the same databases back on the same port."""
        self._pg_ctl("stop", "-m", "immediate", "-w", "-t", "30")

    def resume(self) -> None:
        """Start a ``halt``-ed server again on its port."""
        options = (f"-c listen_addresses=127.0.0.1 -p {self.port} "
                   f"-c unix_socket_directories={self.root} {self._settings}")
        self._pg_ctl("start", "-w", "-t", "30", "-o", options, "-l", str(self.log_file))

    def _initdb(self) -> None:
        # --locale=C: the result must not depend on which locales this machine has installed.
        flags = ["-A", "trust", "-U", _SUPERUSER, "--no-sync", "-E", "UTF8", "--locale=C"]
        self._run("initdb", ["-D", str(self.data_dir), *flags])

    def _start_on_free_port(self) -> None:
        # The port can be taken between probing and binding, hence a few bounded attempts.
        for attempt in range(1, _START_ATTEMPTS + 1):
            self.port = _free_port()
            options = (
                f"-c listen_addresses=127.0.0.1 -p {self.port} "
                f"-c unix_socket_directories={self.root} {self._settings}"
            )
            try:
                self._pg_ctl("start", "-w", "-t", "30", "-o", options, "-l", str(self.log_file))
                return
            except PgClusterError:
                if attempt == _START_ATTEMPTS:
                    raise

    def _pg_ctl(self, *args: str) -> None:
        self._run("pg_ctl", ["-D", str(self.data_dir), *args])

    def _run(self, program: str, args: Sequence[str]) -> None:
        command = [str(self.bin_dir / program), *args]
        if self.as_postgres:
            command = ["runuser", "-u", _OS_USER, "--", *command]
        try:
            # cwd=root: the postgres user may not be allowed into the caller's cwd.
            done = subprocess.run(
                command,
                cwd=self.root,
                stdin=subprocess.DEVNULL,
                capture_output=True,
                text=True,
                timeout=_COMMAND_TIMEOUT,
                check=False,
            )
        except subprocess.TimeoutExpired as exc:
            message = f"{program} timed out after {exc.timeout}s{self._log_tail()}"
            raise PgClusterError(message) from exc
        if done.returncode != 0:
            raise PgClusterError(
                f"{' '.join(command)} exited {done.returncode}\n{done.stdout}{done.stderr}"
                f"{self._log_tail()}"
            )

    def _log_tail(self) -> str:
        try:
            lines = self.log_file.read_text(errors="replace").splitlines()[-20:]
        except OSError:
            return ""
        return "\nserver log (tail):\n" + "\n".join(lines)

    def _kill_postmaster(self) -> None:
        with contextlib.suppress(OSError, ValueError, IndexError):
            pid = int((self.data_dir / "postmaster.pid").read_text().split()[0])
            os.kill(pid, signal.SIGKILL)


def run_with_cluster(command: Sequence[str]) -> int:
    """Run ``command`` with ``TOOLKEEPER_BENCH_PG_URL`` naming a throwaway durable cluster,
    stopped and deleted afterwards (``make bench``: the PostgreSQL figures on a fresh
    machine). Already set, or PostgreSQL not installed: ``command`` runs as it is."""
    if os.environ.get(PG_URL_ENV):
        return subprocess.call(command)
    try:
        cluster = PgCluster.start(durable=True)
    except PgUnavailable as exc:
        print(f"PostgreSQL figures NOT MEASURED: {exc}", file=sys.stderr, flush=True)
        return subprocess.call(command)
    try:
        print(f"PostgreSQL: a throwaway cluster on 127.0.0.1:{cluster.port} "
              "(fsync and synchronous commit on)", file=sys.stderr, flush=True)
        return subprocess.call(command, env={**os.environ, PG_URL_ENV: cluster.url})
    finally:
        cluster.stop()


if __name__ == "__main__":
    # python -m tests.support.pgcluster COMMAND...: COMMAND with a throwaway cluster
    if len(sys.argv) < 2:
        sys.exit("usage: python -m tests.support.pgcluster COMMAND [ARGS...]")
    sys.exit(run_with_cluster(sys.argv[1:]))

"""A real, throwaway PostgreSQL server for the tests: initdb into a temporary folder, started on a free loopback
port with password authentication, stopped and removed at the end. Debian's `postgresql` package provides the
binaries (.ci/run installs it). PostgreSQL refuses to run as root, so as root the server runs as the `postgres`
user the package creates. RESEARCH_TEST_POSTGRES_URL points the tests at a server of your own instead.
"""
from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import tempfile
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

USER, PASSWORD = "verbatim", "pg-test-Secret-4b1e9"  # a recognisable password: tests look for it in every output
MISSING = ("PostgreSQL is needed for the tests of the PostgreSQL backend and none could be started: install Debian's "
           "postgresql package (apt-get install postgresql, as .ci/run does), or set RESEARCH_TEST_POSTGRES_URL to a "
           "server of your own. ")


class PostgresUnavailable(RuntimeError):
    """No server could be started; the message says how to get one."""


def _binary(name: str) -> str:
    found = shutil.which(name) or next(iter(sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"), reverse=True)),
                                       None)
    if found is None:
        raise PostgresUnavailable(MISSING + f"({name} was not found)")
    return found


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class PostgresServer:
    """One running server; `url(database)` is a postgresql:// URL with the test password. A server started here can
    be stopped and started again (`stop()`, `start()`), to test a database that goes away."""

    def __init__(self, admin_url: str, control: list[str] | None = None, start_options: str = ""):
        self.admin_url = admin_url
        self._control, self._options = control, start_options

    def stop(self) -> None:
        assert self._control is not None, "only a server started by the tests can be stopped"
        subprocess.run([*self._control, "-m", "fast", "-w", "stop"], capture_output=True, timeout=60, check=True)

    def start(self) -> None:
        assert self._control is not None, "only a server started by the tests can be started"
        subprocess.run([*self._control, "-w", "-t", "60", "start", "-o", self._options], capture_output=True,
                       timeout=90, check=True)

    def url(self, database: str) -> str:
        parts = urlsplit(self.admin_url)
        return urlunsplit((parts.scheme, parts.netloc, f"/{database}", parts.query, ""))

    @contextmanager
    def database(self) -> Iterator[str]:
        """A new, empty database for one test, dropped after it (its connections closed by force)."""
        import psycopg

        name = f"t_{uuid.uuid4().hex[:12]}"
        with psycopg.connect(self.admin_url, autocommit=True) as admin:
            admin.execute(f'CREATE DATABASE "{name}"')
        try:
            yield self.url(name)
        finally:
            with psycopg.connect(self.admin_url, autocommit=True) as admin:
                admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@contextmanager
def postgres_server() -> Iterator[PostgresServer]:
    """The server RESEARCH_TEST_POSTGRES_URL names, else a throwaway one; PostgresUnavailable when neither works."""
    given = os.environ.get("RESEARCH_TEST_POSTGRES_URL", "").strip()
    if given:
        yield PostgresServer(given)
        return
    initdb, pg_ctl = _binary("initdb"), _binary("pg_ctl")
    as_root = os.geteuid() == 0
    run_as: list[str] = []
    if as_root:
        if shutil.which("runuser") is None or _uid("postgres") is None:
            raise PostgresUnavailable(MISSING + "(running as root needs the postgres user and runuser)")
        run_as = ["runuser", "-u", "postgres", "--"]
    home = Path(tempfile.mkdtemp(prefix="verbatim-pg-"))
    data, pwfile = home / "data", home / "pwfile"
    pwfile.write_text(PASSWORD, encoding="utf-8")
    if as_root:
        shutil.chown(home, "postgres")
        shutil.chown(pwfile, "postgres")
    port = _free_port()
    log = home / "server.log"

    def run(argv: list[str]) -> None:
        proc = subprocess.run([*run_as, *argv], capture_output=True, text=True, timeout=120)
        if proc.returncode != 0:
            text = log.read_text(errors="replace") if log.exists() else ""
            raise PostgresUnavailable(MISSING + f"({Path(argv[0]).name} failed: {proc.stderr[-800:]}{text[-800:]})")

    options = (f"-c listen_addresses=127.0.0.1 -c port={port} -c unix_socket_directories={home} -c fsync=off "
               "-c max_connections=200")
    try:
        run([initdb, "-D", str(data), "-U", USER, f"--pwfile={pwfile}", "--auth-host=scram-sha-256",
             "--auth-local=scram-sha-256", "-E", "UTF8", "--locale=C.UTF-8", "--no-sync"])
        run([pg_ctl, "-D", str(data), "-l", str(log), "-w", "-t", "60", "start", "-o", options])
        try:
            yield PostgresServer(f"postgresql://{USER}:{PASSWORD}@127.0.0.1:{port}/postgres",
                                 [*run_as, pg_ctl, "-D", str(data), "-l", str(log)], options)
        finally:
            subprocess.run([*run_as, pg_ctl, "-D", str(data), "-m", "immediate", "-w", "stop"], capture_output=True,
                           timeout=60)
    finally:
        shutil.rmtree(home, ignore_errors=True)


def _uid(user: str) -> int | None:
    import pwd

    try:
        return pwd.getpwnam(user).pw_uid
    except KeyError:
        return None

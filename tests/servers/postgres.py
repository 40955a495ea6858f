"""A real PostgreSQL server for the sync tests: Debian's PostgreSQL 15 binaries, a fresh cluster
in a temporary folder, on a free loopback port, stopped (and the folder removed) at the end.

``initdb`` refuses to run as root, so when the tests run as root the cluster belongs to the
``postgres`` user (``runuser -u postgres``). Without the binaries the tests are skipped on a
developer's machine but FAIL under CI (``$CI`` set): ``.ci/run`` installs the package.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest


def _bin() -> Path:
    """``$SECFINDINGS_PG_BIN``, else Debian's PostgreSQL 15, else the newest Debian version
    installed (``.ci/run`` falls back to the distribution's default ``postgresql``)."""
    if os.environ.get("SECFINDINGS_PG_BIN"):
        return Path(os.environ["SECFINDINGS_PG_BIN"])
    wanted = Path("/usr/lib/postgresql/15/bin")
    if (wanted / "initdb").exists():
        return wanted
    found = sorted(
        Path("/usr/lib/postgresql").glob("*/bin/initdb"),
        key=lambda p: int(p.parent.parent.name) if p.parent.parent.name.isdigit() else 0,
    )
    return found[-1].parent if found else wanted


PG_BIN = _bin()


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _as_owner(cmd: list[str], owner: str | None) -> list[str]:
    return ["runuser", "-u", owner, "--", *cmd] if owner else cmd


class PostgresServer:
    """One running cluster; ``url`` is a ``postgresql://`` URL of its ``postgres`` database
    (trust authentication on 127.0.0.1, so no password)."""

    def __init__(self, options: str = "") -> None:
        #: More ``-c name=value`` settings for the server (e.g. TLS).
        self.options = options
        self.owner = "postgres" if os.geteuid() == 0 else None
        self.folder = Path(tempfile.mkdtemp(prefix="secfindings-pg-"))
        self.data = self.folder / "data"
        self.port = _free_port()
        self.user = "postgres" if self.owner else (os.environ.get("USER") or "postgres")
        self.url = f"postgresql://{self.user}@127.0.0.1:{self.port}/postgres"
        self._started = False

    def _run(self, cmd: list[str]) -> None:
        done = subprocess.run(
            _as_owner(cmd, self.owner), capture_output=True, text=True, timeout=120, check=False
        )
        if done.returncode != 0:
            raise RuntimeError(f"{cmd[0]} failed ({done.returncode}): {done.stderr.strip() or done.stdout}")

    def start(self) -> None:
        if self.owner:
            shutil.chown(self.folder, self.owner, self.owner)
        initdb = [str(PG_BIN / "initdb"), "-D", str(self.data), "-U", self.user]
        self._run([*initdb, "-A", "trust", "-E", "UTF8", "--no-sync"])
        options = (
            f"-c listen_addresses=127.0.0.1 -c port={self.port} -c unix_socket_directories={self.folder} "
            "-c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=50"
            f" {self.options}"
        )
        log = self.folder / "server.log"
        ctl = str(PG_BIN / "pg_ctl")
        self._run([ctl, "-D", str(self.data), "-l", str(log), "-o", options, "-w", "start"])
        self._started = True
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", self.port), 1):
                return
            time.sleep(0.05)
        raise RuntimeError(f"PostgreSQL did not listen on port {self.port}")

    def own(self, path: Path, mode: int = 0o600) -> Path:
        """``path`` (under :attr:`folder`) made the server's, e.g. its TLS key."""
        os.chmod(path, mode)
        if self.owner:
            shutil.chown(path, self.owner, self.owner)
        return path

    def create_database(self, name: str) -> str:
        """A new empty database; returns its URL."""
        import adbc_driver_postgresql.dbapi as pg

        with pg.connect(self.url, autocommit=True) as conn, conn.cursor() as cur:
            cur.execute(f'CREATE DATABASE "{name}"')
        return f"postgresql://{self.user}@127.0.0.1:{self.port}/{name}"

    def stop(self) -> None:
        try:
            if self._started:
                self._run([str(PG_BIN / "pg_ctl"), "-D", str(self.data), "-m", "immediate", "-w", "stop"])
        finally:
            shutil.rmtree(self.folder, ignore_errors=True)


def available() -> bool:
    return (PG_BIN / "initdb").exists() and (PG_BIN / "pg_ctl").exists()


@contextlib.contextmanager
def postgres_server() -> Iterator[PostgresServer]:
    """A running server for a ``with`` block; skipped (FAILED under ``$CI``) without binaries."""
    if not available():
        message = f"PostgreSQL 15 binaries not found in {PG_BIN} (install postgresql-15)"
        if os.environ.get("CI"):
            pytest.fail(message + "; CI must run the PostgreSQL tests (.ci/run installs it)")
        pytest.skip(message)
    server = PostgresServer()
    try:
        server.start()
        yield server
    finally:
        server.stop()

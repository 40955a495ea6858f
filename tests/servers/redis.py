"""A real Redis server for the tests of the shared request budget: Debian's ``redis-server``, on a
free loopback port, nothing written to disk, stopped at the end.

The server runs in the foreground as a child of the tests (the flags of /work/shared/TOOLCHAIN.md
but ``--daemonize no``), so the tests hold its process: ``stop()`` asks it to shut down and kills
it if it does not, and ``kill()`` takes it away at once, as a crashed store would go. The tests
read what the store holds with ``redis-cli`` of the same package (no Python client needed).
Without ``redis-server`` the tests are skipped on a developer's machine but FAIL under CI (``$CI``
set): ``.ci/run`` installs the package.
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

SERVER = os.environ.get("SECFINDINGS_REDIS_SERVER") or shutil.which("redis-server") or "/usr/bin/redis-server"
CLI = os.environ.get("SECFINDINGS_REDIS_CLI") or shutil.which("redis-cli") or "/usr/bin/redis-cli"


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class RedisServer:
    """One running server; ``url`` is its ``redis://`` URL of database 0 (with the password in it
    when the server was started with one)."""

    def __init__(self, password: str | None = None) -> None:
        self.password = password
        self.folder = Path(tempfile.mkdtemp(prefix="secfindings-redis-"))
        self.port = _free_port()
        self._proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        auth = f":{self.password}@" if self.password else ""
        return f"redis://{auth}127.0.0.1:{self.port}/0"

    def start(self) -> None:
        args = [SERVER, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"]
        args += ["--daemonize", "no", "--dir", str(self.folder), "--logfile", str(self.folder / "redis.log")]
        if self.password:
            args += ["--requirepass", self.password]
        self._proc = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                log = (self.folder / "redis.log").read_text(errors="replace")[-400:]
                raise RuntimeError(f"redis-server exited ({self._proc.returncode}): {log}")
            with contextlib.suppress(OSError, subprocess.SubprocessError):
                if self.cli("PING") == "PONG":
                    return
            time.sleep(0.02)
        raise RuntimeError(f"redis-server did not answer PING on port {self.port}")

    def cli(self, *command: str) -> str:
        """One command through ``redis-cli`` (raw output, stripped), e.g. ``cli("KEYS", "*")``."""
        env = {**os.environ, "REDISCLI_AUTH": self.password} if self.password else None
        done = subprocess.run(
            [CLI, "-h", "127.0.0.1", "-p", str(self.port), "--raw", *command],
            capture_output=True,
            timeout=10,
            check=True,
            env=env,
        )
        return done.stdout.decode("utf-8", "replace").strip()

    def keys(self) -> list[str]:
        """Every key in database 0."""
        return [k for k in self.cli("--scan").splitlines() if k]

    def dump(self) -> str:
        """Every key with its type and whole value, as text: to look for what must not be there."""
        lines = []
        for key in self.keys():
            kind = self.cli("TYPE", key)
            read = {"hash": ("HGETALL",), "string": ("GET",), "zset": ("ZRANGE", "0", "-1", "WITHSCORES")}
            read |= {"list": ("LRANGE", "0", "-1"), "set": ("SMEMBERS",)}
            verb = read.get(kind)
            value = self.cli(verb[0], key, *verb[1:]) if verb else self.cli("DUMP", key)
            lines.append(f"{key} {kind} {value}")
        return "\n".join(lines)

    def alive(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def kill(self) -> None:
        """Take the server away at once (SIGKILL), as a crashed store goes."""
        if self._proc is not None and self._proc.poll() is None:
            self._proc.kill()
            self._proc.wait(10)

    def stop(self) -> None:
        try:
            if self._proc is not None and self._proc.poll() is None:
                with contextlib.suppress(OSError, subprocess.SubprocessError):
                    self.cli("SHUTDOWN", "NOSAVE")
                try:
                    self._proc.wait(5)
                except subprocess.TimeoutExpired:
                    self.kill()
        finally:
            shutil.rmtree(self.folder, ignore_errors=True)


def available() -> bool:
    return os.access(SERVER, os.X_OK) and os.access(CLI, os.X_OK)


@contextlib.contextmanager
def redis_server(password: str | None = None) -> Iterator[RedisServer]:
    """A running server for a ``with`` block; skipped (FAILED under ``$CI``) without the binaries."""
    if not available():
        message = f"redis-server / redis-cli not found ({SERVER}, {CLI}; install Debian's redis-server)"
        if os.environ.get("CI"):
            pytest.fail(message + "; CI must run the Redis tests (.ci/run installs it)")
        pytest.skip(message)
    server = RedisServer(password)
    try:
        for attempt in range(3):
            try:
                server.start()
                break
            except RuntimeError:
                # Another process took the free port between its pick and the bind: a new one.
                if attempt == 2 or server.alive():
                    raise
                server.port = _free_port()
        yield server
    finally:
        server.stop()

"""A fake Redis for the hostile tests of the shared request budget: it speaks RESP over a loopback
socket and answers the budget's script (``EVALSHA``/``EVAL``) with whatever a test scripts,
garbage included; everything else (the driver's ``CLIENT SETINFO``, ``SELECT``, ``PING``,
``SCRIPT LOAD``) gets ``+OK``.

``answer`` is a function of the command (a list of bytes) returning the raw bytes to send back,
:data:`HANG` (read on, answer nothing), or :data:`CLOSE` (close the connection); bytes ending
in :data:`HANG` are sent, then the server hangs (an answer cut off midway). The server
records every connection and every command, so a test can tell how often the client came back
and on which connection (``commands`` holds ``(connection number, [command words])``).
"""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Callable, Iterator
from typing import BinaryIO

HANG = b"\x00hang"
CLOSE = b"\x00close"

Answer = Callable[[list[bytes]], bytes]


def bulk(text: str | bytes) -> bytes:
    raw = text.encode() if isinstance(text, str) else text
    return b"$%d\r\n%s\r\n" % (len(raw), raw)


def array(*items: str | bytes) -> bytes:
    """A RESP array of bulk strings (the script's answers are strings)."""
    return b"*%d\r\n" % len(items) + b"".join(bulk(i) for i in items)


def script_is(cmd: list[bytes]) -> bool:
    return bool(cmd) and cmd[0].upper() in (b"EVALSHA", b"EVAL")


def script_answering(reply: bytes) -> Answer:
    """Answers the budget's script with ``reply``, everything else with ``+OK``."""
    return lambda cmd: reply if script_is(cmd) else b"+OK\r\n"


class FakeRedis:
    def __init__(self, answer: Answer) -> None:
        self.answer = answer
        self.connections = 0
        self.commands: list[tuple[int, list[bytes]]] = []
        self.errors: list[str] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._sock.bind(("127.0.0.1", 0))
        self._sock.listen(64)
        self._sock.settimeout(0.1)
        self.port = int(self._sock.getsockname()[1])
        self._open: list[socket.socket] = []
        self._thread = threading.Thread(target=self._serve, daemon=True)

    def url(self, password: str | None = None) -> str:
        auth = f":{password}@" if password else ""
        return f"redis://{auth}127.0.0.1:{self.port}/0"

    def scripts(self) -> list[tuple[int, list[bytes]]]:
        """The script calls seen, with their connection's number."""
        with self._lock:
            return [(n, c) for n, c in self.commands if script_is(c)]

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self._sock.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            with self._lock:
                self.connections += 1
                number = self.connections
                self._open.append(conn)
            threading.Thread(target=self._talk, args=(conn, number), daemon=True).start()

    def _talk(self, conn: socket.socket, number: int) -> None:
        reader = conn.makefile("rb")
        try:
            while not self._stop.is_set():
                cmd = _read_command(reader)
                if cmd is None:
                    return
                with self._lock:
                    self.commands.append((number, cmd))
                reply = self.answer(cmd)
                if reply == CLOSE:
                    return
                if reply.endswith(HANG):
                    conn.sendall(reply[: -len(HANG)])
                    # Read on (the driver may send more), answer nothing.
                    while _read_command(reader) is not None:
                        pass
                    return
                conn.sendall(reply)
        except (OSError, ValueError) as e:
            if not self._stop.is_set():
                self.errors.append(repr(e))
        finally:
            with contextlib.suppress(OSError):
                conn.close()

    def __enter__(self) -> FakeRedis:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._sock.close()
        with self._lock:
            for c in self._open:
                with contextlib.suppress(OSError):
                    c.shutdown(socket.SHUT_RDWR)
                    c.close()
        self._thread.join(5)


def _read_command(reader: BinaryIO) -> list[bytes] | None:
    """One command (a RESP array of bulk strings, or an inline command); None at the end."""
    line = reader.readline()
    if not line:
        return None
    line = line.rstrip(b"\r\n")
    if not line.startswith(b"*"):
        return line.split()
    words = []
    for _ in range(int(line[1:])):
        head = reader.readline().rstrip(b"\r\n")
        if not head.startswith(b"$"):
            raise ValueError(f"not a bulk string: {head!r}")
        size = int(head[1:])
        words.append(reader.read(size + 2)[:size])
    return words


@contextlib.contextmanager
def fake_redis(answer: Answer) -> Iterator[FakeRedis]:
    with FakeRedis(answer) as server:
        yield server

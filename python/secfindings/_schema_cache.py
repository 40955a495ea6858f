"""The disk cache of schemas: one introspection answer per server (by base URL), kept in a
folder of this user's (``cache_dir()``) and trusted as little as possible, for ``DEFAULT_TTL``
(``SECFINDINGS_SCHEMA_TTL``). :mod:`secfindings._schema` builds the schema from what it holds;
the loading policy (:mod:`secfindings._schema_loading`) decides when it is read and written.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import stat
import sys
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

__all__ = ["cache_dir", "forget_cached", "read_cached", "write_cached"]

log = logging.getLogger("secfindings.schema")

#: How long a schema on disk is trusted (seconds); ``SECFINDINGS_SCHEMA_TTL`` overrides it.
DEFAULT_TTL = 24 * 3600
CACHE_FORMAT = 1


def cache_dir() -> Path | None:
    """Where schemas are kept on disk (None: the disk cache is off)."""
    setting = os.environ.get("SECFINDINGS_SCHEMA_CACHE", "").strip()
    if setting.lower() in {"off", "0", "false", "no", "none"}:
        return None
    if setting:
        return Path(setting).expanduser()
    if sys.platform == "win32":
        base = Path(os.environ.get("LOCALAPPDATA") or Path.home() / "AppData" / "Local")
    elif sys.platform == "darwin":
        base = Path.home() / "Library" / "Caches"
    else:
        base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "secfindings" / "schema"


def _ttl() -> float:
    try:
        return max(0.0, float(os.environ.get("SECFINDINGS_SCHEMA_TTL", DEFAULT_TTL)))
    except ValueError:
        return float(DEFAULT_TTL)


def _digest(introspection: Mapping[str, Any]) -> str:
    """The SHA-256 of an introspection answer, kept next to it on disk.

    It proves integrity, not authenticity: it catches a file cut short or spoiled by a torn
    write, a full disk or a bug, but whoever can write the cache folder can recompute it. That
    is why the folder must not be writable by others (see :func:`read_cached`)."""
    canonical = json.dumps(introspection, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()


#: The largest schema cache file read (and written): a schema within the limits of
#: :mod:`secfindings._schema` (MAX_TYPES, ...) takes a
#: few megabytes as JSON; anything larger is not read at all.
MAX_CACHE_BYTES = 64 << 20


def _cache_file(base_url: str) -> Path | None:
    folder = cache_dir()
    if folder is None:
        return None
    return folder / (hashlib.sha256(base_url.encode()).hexdigest()[:32] + ".json")


_WARNED: set[str] = set()


def _folder_usable(folder: Path) -> bool:
    """Whether the cache folder may be used: not when anyone may write to it (world-writable
    without the sticky bit), since a file there could then be anyone's. Warned once."""
    try:
        st = os.stat(folder)
    except FileNotFoundError:
        return True  # made when first written, for this user only
    except OSError:
        return False
    if os.name == "posix" and st.st_mode & stat.S_IWOTH and not st.st_mode & stat.S_ISVTX:
        if str(folder) not in _WARNED:
            _WARNED.add(str(folder))
            log.warning(
                "the schema cache folder %s is writable by every user: it is not used (make it "
                "private with chmod 700, or set SECFINDINGS_SCHEMA_CACHE to another folder)",
                folder,
            )
        return False
    return True


class _Untrusted(Exception):
    """A cache file that is not read: not a regular file of ours, or too large."""


def _read_file(path: Path) -> bytes:
    """The bytes of the regular file at ``path``, at most :data:`MAX_CACHE_BYTES`. A symlink,
    a FIFO, a device, a file of another user or a larger file raises :class:`_Untrusted`
    without reading it (opened without following links and without blocking, then fstat)."""
    if not hasattr(os, "O_NOFOLLOW") and path.is_symlink():
        raise _Untrusted("a symbolic link")
    flags = os.O_RDONLY
    for name in ("O_NOFOLLOW", "O_NONBLOCK", "O_CLOEXEC", "O_BINARY", "O_NOCTTY"):
        flags |= getattr(os, name, 0)
    try:
        fd = os.open(path, flags)
    except FileNotFoundError:
        raise
    except OSError as e:  # ELOOP: a symbolic link (O_NOFOLLOW); EACCES, ENXIO, ...
        raise _Untrusted(f"cannot be opened: {e.strerror or e}") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise _Untrusted("not a regular file")
        if hasattr(os, "geteuid") and st.st_uid != os.geteuid():
            raise _Untrusted("owned by another user")
        if st.st_size > MAX_CACHE_BYTES:
            raise _Untrusted(f"{st.st_size:,} bytes, more than the {MAX_CACHE_BYTES:,} read")
        chunks: list[bytes] = []
        total = 0
        while True:
            chunk = os.read(fd, min(1 << 20, MAX_CACHE_BYTES + 1 - total))
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
            if total > MAX_CACHE_BYTES:
                raise _Untrusted(f"more than the {MAX_CACHE_BYTES:,} bytes read")
        return b"".join(chunks)
    finally:
        os.close(fd)


def read_cached(base_url: str) -> tuple[dict[str, Any], float] | None:
    """The introspection answer kept for ``base_url``, if fresh and intact, and when it was fetched.

    The file is trusted as little as possible: only a regular file of this user, in a folder
    others cannot write to, of at most :data:`MAX_CACHE_BYTES`, is read; one that fails in any
    way (not JSON, nested too deeply, another format, a hash that does not match) is removed, so
    the schema fetched next takes its place."""
    path = _cache_file(base_url)
    if path is None or not _folder_usable(path.parent):
        return None
    try:
        kept = json.loads(_read_file(path))
        fetched = float(kept["fetched_at"])
        if (
            kept.get("format") != CACHE_FORMAT
            or kept.get("base_url") != base_url
            or _digest(kept["introspection"]) != kept.get("hash")
        ):
            raise _Untrusted("not a schema cache file of this client for this server")
        if not 0 <= time.time() - fetched < _ttl():
            return None  # stale: replaced when the schema is fetched again
        introspection: dict[str, Any] = kept["introspection"]
        if not isinstance(introspection, dict):
            raise _Untrusted("no introspection answer")
        return introspection, fetched
    except FileNotFoundError:
        return None
    except Exception as e:  # RecursionError, MemoryError's cousins, ValueError, ...: any failure
        log.debug("the schema cache file %s is not used (%s): removed", path, _short(e))
        _discard(path)
        return None


def _short(error: BaseException) -> str:
    return (str(error).splitlines() or [type(error).__name__])[0][:200] or type(error).__name__


def _discard(path: Path) -> None:
    """Removes a cache file that failed (a link is removed, not what it points to)."""
    with contextlib.suppress(OSError):
        if not stat.S_ISDIR(os.lstat(path).st_mode):
            path.unlink()


def write_cached(base_url: str, introspection: Mapping[str, Any], fetched: float) -> None:
    path = _cache_file(base_url)
    if path is None:
        return
    body = {
        "format": CACHE_FORMAT,
        "base_url": base_url,
        "fetched_at": fetched,
        "hash": _digest(introspection),
        "introspection": introspection,
    }
    tmp: str | None = None
    try:
        if not _folder_usable(path.parent):
            return
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        data = json.dumps(body).encode("utf-8")
        if len(data) > MAX_CACHE_BYTES:
            log.debug("the schema of %s is not cached: %d bytes", base_url, len(data))
            return
        # Written aside (mode 600) and renamed: a reader never sees half a file, and the rename
        # replaces whatever was there (a link or a FIFO included) without opening it.
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".schema-", suffix=".tmp")
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
        tmp = None
    except Exception as e:
        log.debug("the schema cache cannot be written (%s): %s", path, _short(e))
    finally:
        if tmp is not None:
            with contextlib.suppress(OSError):
                os.unlink(tmp)


def forget_cached(base_url: str) -> None:
    path = _cache_file(base_url)
    if path is not None:
        _discard(path)

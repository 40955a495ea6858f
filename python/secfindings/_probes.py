"""What the walk plan's probes found, per server (base URL and schema hash): in memory for the
process, and on disk beside the schema cache (``<hash of the base URL>.probes.json`` in
:func:`secfindings._schema_cache.cache_dir`), read with the schema cache's care (a regular file of this
user, in a folder others cannot write to, size capped; a file that fails is removed) and trusted
as long as a schema (``SECFINDINGS_SCHEMA_TTL``). Written aside and renamed, mode 0600."""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import tempfile
import threading
import time
from collections.abc import Mapping
from typing import Any

from secfindings._schema_cache import _discard, _folder_usable, _read_file, _ttl, cache_dir
from secfindings._schema_loading import FORGET_HOOKS

__all__ = ["forget", "known", "remember"]

log = logging.getLogger("secfindings.plan")

_LOCK = threading.Lock()
#: Capabilities by server key (base URL and schema hash): name -> (held, when probed).
_MEMORY: dict[str, dict[str, tuple[bool, float]]] = {}
_PROBE_FORMAT = 1


def _key(base_url: str, schema: Any) -> str:
    return f"{base_url} {getattr(schema, 'hash', None) or '-'}"


def _probe_file(base_url: str) -> Any:
    folder = cache_dir()
    if folder is None:
        return None
    return folder / (hashlib.sha256(base_url.encode()).hexdigest()[:32] + ".probes.json")


def _read_disk(base_url: str, key: str) -> dict[str, tuple[bool, float]]:
    path = _probe_file(base_url)
    if path is None or not _folder_usable(path.parent):
        return {}
    try:
        kept = json.loads(_read_file(path))
        if kept.get("format") != _PROBE_FORMAT or kept.get("base_url") != base_url:
            raise ValueError("not a probe file of this client for this server")
        found: dict[str, tuple[bool, float]] = {}
        for name, (held, when) in (kept.get("servers", {}).get(key) or {}).items():
            if isinstance(held, bool) and 0 <= time.time() - float(when) < _ttl():
                found[str(name)] = (held, float(when))
        return found
    except FileNotFoundError:
        return {}
    except Exception as e:  # any failure: the file is not trusted, not kept
        log.debug("the probe cache file %s is not used (%s): removed", path, str(e)[:200])
        _discard(path)
        return {}


def _write_disk(base_url: str, key: str, known: Mapping[str, tuple[bool, float]]) -> None:
    path = _probe_file(base_url)
    if path is None:
        return
    tmp: str | None = None
    try:
        if not _folder_usable(path.parent):
            return
        servers: dict[str, Any] = {}
        with contextlib.suppress(Exception):
            kept = json.loads(_read_file(path))
            if kept.get("format") == _PROBE_FORMAT and kept.get("base_url") == base_url:
                servers = dict(kept.get("servers") or {})
        servers[key] = {name: [held, when] for name, (held, when) in known.items()}
        body = {"format": _PROBE_FORMAT, "base_url": base_url, "servers": servers}
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".probes-", suffix=".tmp")
        with os.fdopen(fd, "wb") as f:
            f.write(json.dumps(body).encode())
        os.replace(tmp, path)
        tmp = None
    except Exception as e:
        log.debug("the probe cache cannot be written (%s): %s", path, str(e)[:200])
    finally:
        if tmp is not None:
            with contextlib.suppress(OSError):
                os.unlink(tmp)


def known(base_url: str, schema: Any, name: str) -> bool | None:
    """What was found of capability ``name`` at this server (None: not probed yet)."""
    key = _key(base_url, schema)
    with _LOCK:
        if key not in _MEMORY:
            _MEMORY[key] = _read_disk(base_url, key)
        found = _MEMORY[key].get(name)
    return None if found is None else found[0]


def remember(base_url: str, schema: Any, name: str, held: bool) -> None:
    """Keeps what a probe found (in memory and on disk)."""
    key = _key(base_url, schema)
    with _LOCK:
        entries = _MEMORY.setdefault(key, {})
        entries[name] = (held, time.time())
        snapshot = dict(entries)
    _write_disk(base_url, key, snapshot)


def forget(base_url: str | None = None) -> None:
    """Forgets the probes of one server, in memory and on disk (with None: every server's, in
    memory)."""
    with _LOCK:
        for key in [k for k in _MEMORY if base_url is None or k.split(" ", 1)[0] == base_url]:
            del _MEMORY[key]
    if base_url is not None:
        path = _probe_file(base_url)
        if path is not None:
            _discard(path)


# A new server at a URL (a test emulator on a port an earlier one used) has not been probed.
FORGET_HOOKS.append(forget)

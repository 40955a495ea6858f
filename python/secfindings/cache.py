"""What the package remembers of servers between runs, and how to forget it.

The schema cache (a server's introspection answer, trusted for ``SECFINDINGS_SCHEMA_TTL``,
24 h) and the walk plan's capability probes (whether a server takes id ranges, offsets, a time
filter: kept beside the schemas as long) live in :func:`folder`. A server that changed (a new
release that now honours a filter it ignored, an emulator restarted with another profile) is
seen at once after :func:`clear`:

    import secfindings.cache
    print(secfindings.cache.clear("https://api.example.com/api/v1"))
    print(secfindings.cache.clear())  # every server's

``secfindings cache clear [--url URL]`` does the same from the shell. Nothing else is cleared
(the request budget's folder keeps its bookings; see the batching guide).
"""

from __future__ import annotations

import os
import re
import stat
from dataclasses import dataclass, field
from pathlib import Path

from secfindings import _probes, _schema_cache, _schema_loading
from secfindings.errors import ValidationError

__all__ = ["Cleared", "clear", "folder"]

#: The names of the files this package writes there (a hash of the base URL), and the temporary
#: files of a write that was killed.
_OURS = re.compile(r"^(?:[0-9a-f]{32}\.json|[0-9a-f]{32}\.probes\.json|\.(?:schema|probes)-[^/]*\.tmp)$")


@dataclass(frozen=True)
class Cleared:
    """What :func:`clear` removed: ``schemas`` and ``probes`` files (and leftovers of killed
    writes) from ``folder``, for ``url`` (None: every server). ``str()`` is one line."""

    folder: Path | None
    url: str | None
    schemas: int = 0
    probes: int = 0
    leftovers: int = 0
    files: list[Path] = field(default_factory=list)

    def __str__(self) -> str:
        where = "every server" if self.url is None else self.url
        if self.folder is None:
            return f"the disk cache is off (SECFINDINGS_SCHEMA_CACHE): nothing removed for {where}"
        if not self.files:
            return f"nothing cached for {where} in {self.folder}"
        parts = [_count(self.schemas, "schema"), _count(self.probes, "probe file")]
        if self.leftovers:
            parts.append(_count(self.leftovers, "leftover temporary file"))
        return f"removed {', '.join(parts)} for {where} from {self.folder}"


def folder() -> Path | None:
    """The folder of the schema cache and the probes (None: the disk cache is off)."""
    return _schema_cache.cache_dir()


def clear(url: str | None = None) -> Cleared:
    """Forgets the schema and the capability probes of the server at ``url`` (a base URL, as
    given to the client: ``https://.../api/v1``), or of every server with None: on disk and in
    this process. Returns what was removed from disk."""
    if url is not None:
        if not isinstance(url, str) or not re.match(r"^https?://[^\s/]+", url.strip()):
            raise ValidationError(f"url must be a base URL such as https://host/api/v1, not {url!r}")
        url = url.strip()
    where = folder()
    removed: list[Path] = []
    schemas = probes = leftovers = 0
    if url is None:
        _schema_loading._MEMORY.clear()
        _schema_loading._UNCHECKED.clear()
        _probes.forget(None)
        for path in _listing(where):
            if _remove(path):
                removed.append(path)
                if path.name.endswith(".probes.json"):
                    probes += 1
                elif path.name.endswith(".json"):
                    schemas += 1
                else:
                    leftovers += 1
    else:
        for base in dict.fromkeys([url, url.rstrip("/")]):
            files = [_schema_cache._cache_file(base), _probes._probe_file(base)]
            present = [p for p in files if p is not None and _exists(p)]
            _schema_loading.forget_server(base)  # memory, the schema file, the hooks (probes)
            for p in present:
                if not _exists(p):
                    removed.append(p)
                    if p.name.endswith(".probes.json"):
                        probes += 1
                    else:
                        schemas += 1
    return Cleared(where, url, schemas, probes, leftovers, removed)


def _listing(where: Path | None) -> list[Path]:
    if where is None:
        return []
    try:
        names = os.listdir(where)
    except OSError:
        return []
    return [where / n for n in sorted(names) if _OURS.match(n)]


def _exists(path: Path) -> bool:
    try:
        os.lstat(path)
    except OSError:
        return False
    return True


def _remove(path: Path) -> bool:
    """Removes a file of ours (a link itself, never what it points to; never a folder)."""
    try:
        if stat.S_ISDIR(os.lstat(path).st_mode):
            return False
        path.unlink()
    except OSError:
        return False
    return True


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"

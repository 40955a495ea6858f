"""``client.budget()``: the request budget an API token shares on this machine.

The Rust core books every request of every client, thread and process of one API token in one
small file under a file lock (``src/core/budget.rs``): ``rate_limit=`` paces them together, and
a server's ``Retry-After`` makes all of them wait, not only the call that got the 429.
"""

from __future__ import annotations

import datetime as dt
import os
import re
from dataclasses import dataclass
from typing import Any

from secfindings.errors import ConfigurationError

__all__ = ["Budget", "budget_required_setting", "budget_setting"]


def _when(ts: Any) -> dt.datetime | None:
    """A unix time as a datetime; None for none, or for one no datetime holds (a hostile store's)."""
    if ts is None:
        return None
    try:
        return dt.datetime.fromtimestamp(float(ts), tz=dt.timezone.utc)
    except (OverflowError, OSError, ValueError):
        return None


@dataclass(frozen=True)
class Budget:
    """The request budget of a client's API token, as every client of it on this machine sees it.

    Attributes:
        limit: requests per ``window`` this client paces by (its ``rate_limit``), or None.
        window: the window of ``limit``, in seconds, or None.
        used: requests booked in the last window by every client of the token.
        remaining: how many more may go now (None without a limit).
        resets_at: when the oldest request of the window leaves it (None when none was booked).
        blocked_until: until when a server's ``Retry-After`` holds every client of the token back.
        shared: whether the budget is shared (``budget=False`` turns it off).
        store: where it is kept: ``"redis"``, ``"postgresql"``, ``"file"``, or None (not shared).
        location: the store's URL (without its password) or the file's path.
        error: why the store of ``budget=`` could not be read (the figures are then the file's).
    """

    limit: int | None
    window: float | None
    used: int
    remaining: int | None
    resets_at: dt.datetime | None
    blocked_until: dt.datetime | None
    shared: bool
    store: str | None = None
    location: str | None = None
    error: str | None = None

    @classmethod
    def from_native(cls, raw: dict[str, Any]) -> Budget:
        return cls(
            limit=raw["limit"],
            window=raw["window"],
            used=int(raw["used"]),
            remaining=raw["remaining"],
            resets_at=_when(raw["resets_at"]),
            blocked_until=_when(raw["blocked_until"]),
            shared=bool(raw["shared"]) or raw.get("store") is not None,
            store=raw.get("store"),
            location=raw.get("location"),
            error=raw.get("error"),
        )

    def __str__(self) -> str:
        if self.limit is None:
            head = f"{self.used} request{'' if self.used == 1 else 's'} booked; no rate_limit set"
        else:
            head = f"{self.used} of {self.limit} per {self.window:g}s used, {self.remaining} remaining"
        if self.resets_at is not None:
            head += f", resets at {self.resets_at:%H:%M:%S} UTC"
        if self.blocked_until is not None:
            head += f"; the server asked to wait until {self.blocked_until:%H:%M:%S} UTC"
        if self.store in ("redis", "postgresql"):
            head += f" (kept in {self.location})"
        if self.error is not None:
            # "the store at X cannot be used" says itself what happened; what the figures are
            # of is what the reader needs besides.
            where = "this machine's file budget" if self.store == "file" else "no shared budget"
            head += f" ({where}, because {self.error})"
        return head


def budget_required_setting(required: object) -> bool:
    """``budget_required``, checked: a bool."""
    if not isinstance(required, bool):
        raise TypeError(f"budget_required must be True or False, got {type(required).__name__}")
    return required


#: A scheme (two letters or more) and a colon, not followed by ``//``: ``redis:host:6379``.
_NO_SLASHES = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]+:(?!//)")
#: A store's scheme followed by a slash, its colon forgotten: ``redis//host``.
_NO_COLON = re.compile(r"^(?:redis|rediss|postgres|postgresql)/", re.IGNORECASE)
#: A URL's scheme, and the schemes of the stores the core takes.
_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]+)://")
_STORES = ("redis", "rediss", "postgres", "postgresql")
#: libpq's key=value connection string (``host=db password=...``), which is not a URL.
_KEYWORDS = re.compile(r"(?:^|\s)(?:host|password|user|dbname)=", re.IGNORECASE)


def _not_a_folder(text: str, where: str) -> None:
    """A value that is meant as a store's URL and is not one would be taken as a folder (a
    relative one, made in the working directory, with whatever the text holds in its name,
    a password too) and the budget would not be shared: refuse it, without showing it."""
    if _NO_SLASHES.match(text):
        scheme = text.split(":", 1)[0]
        found = f"{scheme}: without // after it"
    elif _NO_COLON.match(text):
        found = f"{text.split('/', 1)[0]}/ without the : of '://'"
    elif _KEYWORDS.search(text):
        found = "a key=value connection string"
    else:
        return
    raise ConfigurationError(
        f"{where} looks like a store's URL but is not one ({found}); give "
        "redis://[:password@]host:6379/0, postgresql://user[:password]@host:5432/db, or a folder"
    )


def budget_setting(budget: bool | str | os.PathLike[str]) -> str | None:
    """The native client's ``budget`` argument: None for the default (``$SECFINDINGS_BUDGET``,
    else the default folder), ``"off"``, a folder, or a ``redis://`` / ``postgresql://`` URL.
    A text meant as a store's URL that is not one (``redis:host``, ``redis//host``, libpq's
    ``host=... password=...``) is a ConfigurationError, here or in ``$SECFINDINGS_BUDGET``."""
    if budget is True:
        env = os.environ.get("SECFINDINGS_BUDGET", "").strip()
        if env:
            _not_a_folder(env, "$SECFINDINGS_BUDGET")
            scheme = _SCHEME.match(env)
            if scheme and scheme.group(1).lower() not in _STORES:
                # The core's own message speaks of the argument ("budget must be True, False,
                # ..."), which a command line's user never wrote.
                raise ConfigurationError(
                    "$SECFINDINGS_BUDGET must be a folder, or a redis:// or postgresql:// URL; "
                    f"got a {scheme.group(1)[:20]}:// URL"
                )
        return None
    if budget is False:
        return "off"
    if isinstance(budget, (str, os.PathLike)):
        text = os.fspath(budget)
        if not text.strip():
            raise ValueError("budget must be True, False, a folder or a store's URL; got an empty string")
        _not_a_folder(text.strip(), "budget")
        return text
    raise TypeError(
        "budget must be True, False, a folder (str or path) or a redis:// or postgresql:// URL, "
        f"got {type(budget).__name__}"
    )

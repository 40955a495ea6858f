"""A small JSON-over-HTTP client for the ticket systems (the standard library's urllib: two REST
APIs and a few calls need nothing more): 429 waits for its ``Retry-After`` (the wait is
injectable, so tests never sleep), a 5xx is retried where the call is safe to repeat and handed
to the caller otherwise, and no credential ever reaches a message."""

from __future__ import annotations

import email.utils
import json
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from secfindings.errors import (
    APIStatusError,
    AuthenticationError,
    PaginationError,
    RateLimitError,
    TransportError,
)
from secfindings.formats import line_text

__all__ = ["HTTP", "MAX_BODY", "MAX_PAGES", "Answer", "Pages", "ServerError"]

#: The largest answer read (bytes): a ticket system's page is far smaller; a hostile or broken
#: server's endless body is an error, not all the memory there is.
MAX_BODY = 32 << 20
#: The most pages one listing walks (a million issues at 100 a page).
MAX_PAGES = 10_000
#: Empty pages in a row that each say there is more: a server paging without end.
_EMPTY_PAGES = 3


class ServerError(APIStatusError):
    """A 5xx to a call that is not safe to repeat blindly: the caller reads the state again
    to learn whether it happened."""


@dataclass
class Answer:
    status: int
    headers: Mapping[str, str]
    data: Any


def _retry_after(value: str | None) -> float | None:
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        return None
    return max(0.0, when.timestamp() - time.time())


class _SameOrigin(urllib.request.HTTPRedirectHandler):
    """Follows a redirect only to the same scheme, host and port: urllib would send the
    credential's header to wherever a redirect points."""

    def redirect_request(
        self, req: urllib.request.Request, fp: Any, code: int, msg: str, headers: Any, newurl: str
    ) -> urllib.request.Request | None:
        old, new = urllib.parse.urlsplit(req.full_url), urllib.parse.urlsplit(newurl)
        if (old.scheme, old.netloc) != (new.scheme, new.netloc):
            return None  # the 3xx is then answered as an error
        return super().redirect_request(req, fp, code, msg, headers, newurl)


_OPENER = urllib.request.build_opener(_SameOrigin)


class HTTP:
    """JSON calls to one base URL with fixed headers (the credential among them)."""

    def __init__(
        self,
        base_url: str,
        headers: Mapping[str, str],
        *,
        name: str,
        sleep: Callable[[float], object] = time.sleep,
        max_retries: int = 5,
        max_wait: float = 120.0,
        timeout: float = 30.0,
    ) -> None:
        self.base = base_url.rstrip("/")
        self.headers = {"Accept": "application/json", "User-Agent": "secfindings-tickets", **headers}
        self.name = name
        self.sleep = sleep
        self.max_retries = max_retries
        self.max_wait = max_wait
        self.timeout = timeout
        self.requests = 0

    def url(self, path: str, params: Mapping[str, Any] | None = None) -> str:
        if path.startswith(("http://", "https://")):  # a next page's URL, as the server gave it
            base, given = urllib.parse.urlsplit(self.base), urllib.parse.urlsplit(path)
            if (base.scheme, base.netloc) != (given.scheme, given.netloc):
                # the credential goes with every call: a Link to another host would take it there
                raise PaginationError(
                    f"{self.name}: a next page on another host ({given.scheme}://{given.hostname}) "
                    "is not followed"
                )
        url = path if path.startswith(("http://", "https://")) else self.base + path
        if params:
            url += ("&" if "?" in url else "?") + urllib.parse.urlencode(params)
        return url

    def call(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, Any] | None = None,
        body: Any = None,
        repeatable: bool | None = None,
    ) -> Answer:
        """One call; ``repeatable`` (default: GET) says whether a 5xx may be retried as is."""
        url = self.url(path, params)
        if repeatable is None:
            repeatable = method == "GET"
        data = None if body is None else json.dumps(body).encode()
        headers = dict(self.headers)
        if data is not None:
            headers["Content-Type"] = "application/json"
        shown = url.split("?", 1)[0]
        for attempt in range(self.max_retries + 1):
            self.requests += 1
            req = urllib.request.Request(url, data=data, headers=headers, method=method)
            try:
                with _OPENER.open(req, timeout=self.timeout) as resp:
                    raw = resp.read(MAX_BODY + 1)
                    if len(raw) > MAX_BODY:
                        raise TransportError(
                            f"{self.name}: {method} {shown} answered more than {MAX_BODY >> 20} MiB"
                        )
                    return Answer(
                        resp.status, dict(resp.headers.items()), json.loads(raw) if raw.strip() else None
                    )
            except urllib.error.HTTPError as e:
                status, head = e.code, dict(e.headers.items()) if e.headers else {}
                text = e.read()[:300].decode("utf-8", "replace")
            except (urllib.error.URLError, OSError) as e:
                reason = getattr(e, "reason", e)
                raise TransportError(f"{self.name}: {method} {shown} failed: {reason}") from None
            except json.JSONDecodeError:
                raise TransportError(f"{self.name}: {method} {shown} answered with no JSON") from None
            last = attempt == self.max_retries
            if status == 429:
                wait = _retry_after(head.get("Retry-After") or head.get("retry-after"))
                wait = 2.0**attempt if wait is None else wait
                if last or wait > self.max_wait:
                    raise RateLimitError(
                        f"{self.name}: rate limited (429, Retry-After {wait:.0f} s) on {method} {shown}",
                        status_code=429,
                    )
                self.sleep(wait)
                continue
            if status in (401, 403):
                raise AuthenticationError(f"{self.name}: {status} on {method} {shown}: check the token")
            if status >= 500:
                if not repeatable:
                    raise ServerError(f"{self.name}: {status} on {method} {shown}", status_code=status)
                if not last:
                    self.sleep(min(0.5 * 2**attempt, 8.0))
                    continue
            raise APIStatusError(
                f"{self.name}: {status} on {method} {shown}: {line_text(text, 200)}",
                status_code=status,
            )
        raise AssertionError("unreachable")  # pragma: no cover


class Pages:
    """Guards a paged listing (``name``: the system's): a next page the walk has been to (a
    URL or a token) or :data:`_EMPTY_PAGES` empty pages in a row that say there is more, or more
    than :data:`MAX_PAGES` pages, end it with :class:`PaginationError`: a hostile or broken
    server that pages without end is not walked for ever."""

    def __init__(self, name: str, first: str | None = None) -> None:
        self.name = name
        self.seen: set[str] = set() if first is None else {first}
        self.empty = 0

    def next(self, where: str | None, items: int) -> str | None:
        """``where`` (the next page, None at the end) once checked; ``items``: the page's."""
        if where is None:
            return None
        self.empty = self.empty + 1 if items == 0 else 0
        if where in self.seen:
            raise PaginationError(f"{self.name}: the server pages in a circle (a next page given twice)")
        if self.empty >= _EMPTY_PAGES:
            raise PaginationError(
                f"{self.name}: {self.empty} empty pages in a row that each say there is more"
            )
        if len(self.seen) >= MAX_PAGES:
            raise PaginationError(f"{self.name}: more than {MAX_PAGES} pages; stopped")
        self.seen.add(where)
        return where

"""GitHub issues, REST: the repository's issues with our label (``state=all``, paged by the
``Link`` header), an issue by number, and a close as a comment (posted once: a rerun finds it by
its marker) then ``state=closed`` (repeatable)."""

from __future__ import annotations

import os
import re
import time
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from secfindings.errors import APIStatusError, ConfigurationError, TransportError
from secfindings.tickets._http import HTTP, Pages, ServerError
from secfindings.tickets._model import LABEL, ExternalTicket, ServiceTicket, finding_of_label

__all__ = ["GitHub", "next_link"]

_REPO = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9-]{0,38})/[A-Za-z0-9._-]{1,100}$")
_NEXT = re.compile(r'<([^>]+)>\s*;\s*rel="?next"?')


def next_link(header: str | None) -> str | None:
    """The ``rel="next"`` URL of a ``Link`` header."""
    for part in (header or "").split(","):
        m = _NEXT.search(part)
        if m:
            return m.group(1)
    return None


class GitHub:
    """The issues of one repository (``OWNER/REPO``). ``api_url``: GitHub's API
    (``https://api.github.com``, or a GitHub Enterprise server's ``https://HOST/api/v3``).
    Token: ``token``, by default ``$GITHUB_TOKEN`` (or ``$GH_TOKEN``)."""

    name = "GitHub"

    def __init__(
        self,
        repo: str,
        *,
        api_url: str = "https://api.github.com",
        token: str | None = None,
        page_size: int = 100,
        sleep: Callable[[float], object] | None = None,
    ) -> None:
        if not _REPO.match(repo):
            raise ConfigurationError(f"--github takes OWNER/REPO, got {repo!r}")
        token = token or os.environ.get("GITHUB_TOKEN") or os.environ.get("GH_TOKEN")
        if not token:
            raise ConfigurationError("GitHub needs GITHUB_TOKEN (or GH_TOKEN) in the environment")
        headers = {
            "Authorization": f"Bearer {token}",
            "Accept": "application/vnd.github+json",
            "X-GitHub-Api-Version": "2022-11-28",
        }
        self.http = HTTP(api_url, headers, name="GitHub", sleep=sleep or time.sleep)
        self.repo = repo
        self.page_size = page_size
        owner, name = repo.split("/")
        self._link = re.compile(
            rf"^https?://(?:www\.)?github\.com/{re.escape(owner)}/{re.escape(name)}/issues/(\d+)/?$", re.I
        )
        self._ext = re.compile(rf"^(?:{re.escape(repo)})?#(\d+)$", re.I)

    def __repr__(self) -> str:
        return f"GitHub({self.repo!r})"  # no credential

    def key_of(self, ticket: ServiceTicket) -> str | None:
        """The key of a service's ticket in this system, or None where it is not one of its."""
        m = self._link.match((ticket.link or "").strip()) or self._ext.match(
            (ticket.external_id or "").strip()
        )
        return str(int(m.group(1))) if m else None

    def _ticket(self, issue: dict[str, Any]) -> ExternalTicket:
        labels = [(x.get("name") if isinstance(x, dict) else x) for x in issue.get("labels") or []]
        ids = {i for i in (finding_of_label(str(x)) for x in labels) if i is not None}
        number = issue.get("number")
        if not isinstance(number, int) or isinstance(number, bool) or number < 1:
            # it goes into URLs and onto a terminal: an issue number as GitHub makes them
            raise TransportError(f"GitHub: an issue number that is none: {str(number)[:40]!r}")
        return ExternalTicket(
            str(number),
            issue.get("state") != "closed",
            issue.get("html_url"),
            issue.get("title"),
            ids,
        )

    def labelled(self) -> Iterator[ExternalTicket]:
        """Every ticket that carries :data:`LABEL` (paged)."""
        url: str | None = self.http.url(
            f"/repos/{self.repo}/issues", {"state": "all", "labels": LABEL, "per_page": self.page_size}
        )
        pages = Pages(self.name, url)
        while url:
            answer = self.http.call("GET", url)
            for issue in answer.data or []:
                if "pull_request" not in issue:
                    yield self._ticket(issue)
            url = pages.next(
                next_link(answer.headers.get("Link") or answer.headers.get("link")), len(answer.data or [])
            )

    def _issue(self, key: str) -> ExternalTicket | None:
        try:
            got = self.http.call("GET", f"/repos/{self.repo}/issues/{key}").data
        except Exception as e:
            if getattr(e, "status_code", None) in (404, 410):
                return None
            raise
        return None if not got or "pull_request" in got else self._ticket(got)

    def fetch(self, keys: Iterable[str]) -> dict[str, ExternalTicket]:
        """The tickets of ``keys`` that exist (a key the system does not know is left out)."""
        out = {}
        for key in sorted(set(keys), key=int):
            t = self._issue(key)
            if t is not None:
                out[key] = t
        return out

    def _commented(self, key: str, marker: str) -> bool:
        url: str | None = self.http.url(f"/repos/{self.repo}/issues/{key}/comments", {"per_page": 100})
        pages = Pages(self.name, url)
        while url:
            answer = self.http.call("GET", url)
            if any(marker in str(c.get("body")) for c in answer.data or []):
                return True
            url = pages.next(
                next_link(answer.headers.get("Link") or answer.headers.get("link")), len(answer.data or [])
            )
        return False

    def close(self, key: str, comment: str, marker: str) -> bool:
        """Close ``key`` with ``comment`` unless it is closed already; True when this call closed
        it. ``marker`` is a text of the comment that tells a rerun it was posted."""
        issue = self._issue(key)
        if issue is None:
            raise APIStatusError(f"GitHub: issue {self.repo}#{key} is gone", status_code=404)
        if not issue.open:
            return False
        for _ in range(3):
            if self._commented(key, marker):
                break
            try:
                self.http.call("POST", f"/repos/{self.repo}/issues/{key}/comments", body={"body": comment})
                break
            except ServerError:
                continue  # it may have been posted: the comments say, on the next turn
        else:
            raise ServerError(f"GitHub: the comment on #{key} kept failing (5xx)", status_code=500)
        self.http.call(
            "PATCH",
            f"/repos/{self.repo}/issues/{key}",
            body={"state": "closed", "state_reason": "completed"},
            repeatable=True,  # setting a state twice is the same state
        )
        return True

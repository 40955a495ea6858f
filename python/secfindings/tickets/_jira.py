"""Jira Cloud, REST v3: the enhanced JQL search (``/rest/api/3/search/jql``, paged by
``nextPageToken``), basic authentication with an account's e-mail and API token, and a close as
one transition to a status of the ``done`` category carrying the comment (so a comment is never
posted without the close, nor twice)."""

from __future__ import annotations

import base64
import os
import re
import time
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from secfindings.errors import APIStatusError, ConfigurationError, TransportError
from secfindings.tickets._http import HTTP, Pages, ServerError
from secfindings.tickets._model import LABEL, ExternalTicket, ServiceTicket, finding_of_label

__all__ = ["Jira"]

_KEY = re.compile(r"^[A-Z][A-Z0-9_]{0,49}-\d{1,12}$")
_FIELDS = ["summary", "status", "labels"]


class Jira:
    """One Jira Cloud site (``url``, e.g. ``https://acme.atlassian.net``). ``project``: only
    keys of that project are its (``SEC``). Credentials: ``email`` and ``token``, by default
    ``$JIRA_EMAIL`` and ``$JIRA_API_TOKEN``."""

    name = "Jira"

    def __init__(
        self,
        url: str,
        *,
        project: str | None = None,
        email: str | None = None,
        token: str | None = None,
        page_size: int = 100,
        sleep: Callable[[float], object] | None = None,
    ) -> None:
        if not url.startswith(("http://", "https://")):
            raise ConfigurationError(f"--jira takes the site's URL (https://acme.atlassian.net), got {url!r}")
        email = email or os.environ.get("JIRA_EMAIL")
        token = token or os.environ.get("JIRA_API_TOKEN")
        if not email or not token:
            raise ConfigurationError("Jira needs JIRA_EMAIL and JIRA_API_TOKEN in the environment")
        basic = base64.b64encode(f"{email}:{token}".encode()).decode()
        self.http = HTTP(url, {"Authorization": f"Basic {basic}"}, name="Jira", sleep=sleep or time.sleep)
        self.site = url.rstrip("/")
        self.project = project.upper() if project else None
        self.page_size = page_size

    def __repr__(self) -> str:
        return f"Jira({self.site!r}, project={self.project!r})"  # no credential

    def key_of(self, ticket: ServiceTicket) -> str | None:
        """The key of a service's ticket in this system, or None where it is not one of its."""
        key = (ticket.external_id or "").strip().upper()
        if (ticket.provider_type or "JIRA").upper() != "JIRA" or not _KEY.match(key):
            return None
        if self.project and not key.startswith(self.project + "-"):
            return None
        return key

    def _ticket(self, issue: dict[str, Any]) -> ExternalTicket:
        f = issue.get("fields") or {}
        category = (((f.get("status") or {}).get("statusCategory") or {}).get("key") or "").lower()
        labels = f.get("labels") or []
        ids = {i for i in (finding_of_label(str(x)) for x in labels) if i is not None}
        key = str(issue.get("key"))
        if not _KEY.match(key):  # it goes into URLs and onto a terminal: a key as Jira makes them
            raise TransportError(f"Jira: an issue key that is none: {key[:40]!r}")
        return ExternalTicket(key, category != "done", f"{self.site}/browse/{key}", f.get("summary"), ids)

    def _search(self, jql: str) -> Iterator[ExternalTicket]:
        token: str | None = None
        seen: set[str] = set()
        pages = Pages(self.name)
        while True:
            body: dict[str, Any] = {"jql": jql, "fields": _FIELDS, "maxResults": self.page_size}
            if token:
                body["nextPageToken"] = token
            # a search changes nothing: safe to repeat on a 5xx
            page = self.http.call("POST", "/rest/api/3/search/jql", body=body, repeatable=True).data or {}
            for issue in page.get("issues") or []:
                t = self._ticket(issue)
                if t.key not in seen:
                    seen.add(t.key)
                    yield t
            token = page.get("nextPageToken")
            if page.get("isLast", not token) or not token:
                return
            pages.next(str(token), len(page.get("issues") or []))

    def labelled(self) -> Iterator[ExternalTicket]:
        """Every ticket that carries :data:`LABEL` (paged)."""
        project = f'project = "{self.project}" AND ' if self.project else ""
        yield from self._search(f'{project}labels = "{LABEL}" ORDER BY key')

    def fetch(self, keys: Iterable[str]) -> dict[str, ExternalTicket]:
        """The tickets of ``keys`` that exist (a key the system does not know is left out)."""
        wanted = sorted(set(keys))
        out: dict[str, ExternalTicket] = {}
        for i in range(0, len(wanted), 100):
            chunk = wanted[i : i + 100]
            try:
                for t in self._search(f"key in ({', '.join(chunk)})"):
                    out[t.key] = t
            except APIStatusError as e:
                if e.status_code != 400:
                    raise
                # JQL refuses the whole list when one key does not exist (or is not visible):
                # each key alone, a 404 being a ticket that is gone
                for key in chunk:
                    got = self._issue(key)
                    if got is not None:
                        out[key] = got
        return out

    def _issue(self, key: str) -> ExternalTicket | None:
        try:
            got = self.http.call("GET", f"/rest/api/3/issue/{key}", params={"fields": ",".join(_FIELDS)})
        except APIStatusError as e:
            if e.status_code == 404:
                return None
            raise
        return self._ticket(got.data or {})

    def _is_open(self, key: str) -> bool:
        got = self.http.call("GET", f"/rest/api/3/issue/{key}", params={"fields": "status"}).data or {}
        category = (((got.get("fields") or {}).get("status") or {}).get("statusCategory") or {}).get("key")
        return str(category).lower() != "done"

    def close(self, key: str, comment: str, marker: str) -> bool:
        """Close ``key`` with ``comment`` unless it is closed already; True when this call closed
        it. ``marker`` is a text of the comment that tells a rerun it was posted."""
        if not self._is_open(key):
            return False
        options = self.http.call("GET", f"/rest/api/3/issue/{key}/transitions").data or {}
        done = [
            t for t in options.get("transitions") or []
            if str(((t.get("to") or {}).get("statusCategory") or {}).get("key")).lower() == "done"
        ]  # fmt: skip
        if not done:
            raise ConfigurationError(f"Jira: {key} has no transition to a done status for this account")
        body = {
            "transition": {"id": str(done[0]["id"])},
            "update": {"comment": [{"add": {"body": _adf(comment)}}]},
        }
        for _ in range(3):
            try:
                self.http.call("POST", f"/rest/api/3/issue/{key}/transitions", body=body)
                return True
            except ServerError:
                # it may have happened: the issue's status says (never a second transition)
                if not self._is_open(key):
                    return True
        raise ServerError(f"Jira: the transition of {key} kept failing (5xx)", status_code=500)


def _adf(text: str) -> dict[str, Any]:
    """Plain text as an Atlassian Document Format document (what REST v3 takes)."""
    return {
        "type": "doc",
        "version": 1,
        "content": [{"type": "paragraph", "content": [{"type": "text", "text": text}]}],
    }

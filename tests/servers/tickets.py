"""Fake Jira Cloud (REST v3) and GitHub issues (REST) servers on loopback, for the drift tests:
the few endpoints drift uses, pages of at most two issues (so every listing pages), the
credentials checked, and scripted faults (429 with Retry-After, 5xx before or after the change
is made). Every request is recorded; ``closes`` counts each change of a ticket from open to
closed (and, for Jira, every transition to done, even of a closed issue: a second close shows)."""

from __future__ import annotations

import base64
import json
import re
import threading
import urllib.parse
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

PAGE = 2


@dataclass
class Issue:
    key: str
    open: bool
    labels: list[str]
    title: str = ""
    comments: list[str] = field(default_factory=list)


@dataclass
class Fault:
    method: str
    path: str  # a regular expression, searched in the path
    status: int
    retry_after: str | None = None
    after: bool = False  # make the change, then answer the fault
    location: str | None = None  # a redirect's target
    times: int = 1


class TicketServer:
    """``kind`` "jira" or "github"; ``issues`` by key (Jira ``SEC-1``, GitHub ``1``)."""

    def __init__(
        self, kind: str, issues: list[Issue], *, secret: str = "s3cret-token", repo: str = "acme/app"
    ) -> None:
        self.kind = kind
        self.issues = {i.key: i for i in issues}
        self.secret = secret
        self.repo = repo
        self.faults: list[Fault] = []
        self.requests: list[tuple[str, str]] = []
        self.closes: dict[str, int] = {}
        self.errors: list[str] = []
        self.lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def _go(self) -> None:
                try:
                    server._handle(self)
                except Exception as e:  # recorded: the test asserts none
                    server.errors.append(repr(e))
                    self.send_response(599)
                    self.end_headers()

            do_GET = do_POST = do_PATCH = _go

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, args=(0.05,), daemon=True)

    def reset(self, issues: list[Issue]) -> None:
        """Start again from ``issues``: no request, fault or close recorded."""
        with self.lock:
            self.issues = {i.key: i for i in issues}
            self.faults.clear()
            self.requests.clear()
            self.closes.clear()

    def __enter__(self) -> TicketServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    @property
    def mutations(self) -> list[tuple[str, str]]:
        return [r for r in self.requests if r[0] != "GET" and not r[1].endswith("/search/jql")]

    # ------------------------------------------------------------------------------ plumbing

    def _send(
        self, h: BaseHTTPRequestHandler, status: int, body: Any = None, headers: dict[str, str] | None = None
    ) -> None:
        raw = b"" if body is None else json.dumps(body).encode()
        h.send_response(status)
        h.send_header("Content-Type", "application/json")
        h.send_header("Content-Length", str(len(raw)))
        for k, v in (headers or {}).items():
            h.send_header(k, v)
        h.end_headers()
        h.wfile.write(raw)

    def _handle(self, h: BaseHTTPRequestHandler) -> None:
        length = int(h.headers.get("Content-Length") or 0)
        body = json.loads(h.rfile.read(length)) if length else None
        parts = urllib.parse.urlsplit(h.path)
        query = dict(urllib.parse.parse_qsl(parts.query))
        with self.lock:
            self.requests.append((h.command, parts.path))
            fault = next(
                (
                    f
                    for f in self.faults
                    if f.times > 0 and f.method == h.command and re.search(f.path, parts.path)
                ),
                None,
            )
            if fault:
                fault.times -= 1
        auth = h.headers.get("Authorization", "")
        expected = (
            "Basic " + base64.b64encode(f"me@acme.test:{self.secret}".encode()).decode()
            if self.kind == "jira"
            else f"Bearer {self.secret}"
        )
        if auth != expected:
            return self._send(h, 401, {"message": "Bad credentials"})
        if fault and not fault.after:
            headers = {"Retry-After": fault.retry_after} if fault.retry_after else {}
            if fault.location:
                headers["Location"] = fault.location
            return self._send(h, fault.status, {"message": "scripted"}, headers)
        with self.lock:
            status, answer, headers = (self._jira if self.kind == "jira" else self._github)(
                h.command, parts.path, query, body
            )
        if fault:
            return self._send(h, fault.status, {"message": "scripted, after the change"})
        return self._send(h, status, answer, headers)

    def _close(self, issue: Issue, always: bool) -> None:
        if issue.open or always:
            self.closes[issue.key] = self.closes.get(issue.key, 0) + 1
        issue.open = False

    # ------------------------------------------------------------------------------ Jira

    def _jira_issue(self, i: Issue) -> dict[str, Any]:
        category = "indeterminate" if i.open else "done"
        status = {"name": category, "statusCategory": {"key": category}}
        return {"key": i.key, "fields": {"summary": i.title, "labels": i.labels, "status": status}}

    def _jira(
        self, method: str, path: str, query: dict[str, str], body: Any
    ) -> tuple[int, Any, dict[str, str]]:
        if method == "POST" and path == "/rest/api/3/search/jql":
            jql = body["jql"]
            m = re.search(r"key in \(([^)]*)\)", jql)
            if m:
                keys = {k.strip() for k in m.group(1).split(",")}
                missing = sorted(keys - set(self.issues))
                if missing:  # as Jira does: the whole query is refused
                    return (
                        400,
                        {
                            "errorMessages": [
                                f"An issue with key '{missing[0]}' does not exist for field 'key'."
                            ]
                        },
                        {},
                    )
                found = [i for k, i in sorted(self.issues.items()) if k in keys]
            else:
                label = re.search(r'labels = "([^"]+)"', jql)
                project = re.search(r'project = "([^"]+)"', jql)
                prefix = project.group(1) + "-" if project else ""
                found = [
                    i for _, i in sorted(self.issues.items())
                    if label and label.group(1) in i.labels and i.key.startswith(prefix)
                ]  # fmt: skip
            start = int(body.get("nextPageToken") or 0)
            size = min(int(body.get("maxResults", 50)), PAGE)
            page = found[start : start + size]
            more = start + size < len(found)
            answer: dict[str, Any] = {"issues": [self._jira_issue(i) for i in page], "isLast": not more}
            if more:
                answer["nextPageToken"] = str(start + size)
            return 200, answer, {}
        m = re.fullmatch(r"/rest/api/3/issue/([A-Z0-9_]+-\d+)(/transitions)?", path)
        if not m or m.group(1) not in self.issues:
            return (
                404,
                {"errorMessages": ["Issue does not exist or you do not have permission to see it."]},
                {},
            )
        issue = self.issues[m.group(1)]
        if not m.group(2):
            return 200, self._jira_issue(issue), {}
        if method == "GET":
            return 200, {"transitions": [
                {"id": "11", "name": "Start", "to": {"statusCategory": {"key": "indeterminate"}}},
                {"id": "31", "name": "Done", "to": {"statusCategory": {"key": "done"}}},
            ]}, {}  # fmt: skip
        if body["transition"]["id"] == "31":
            for c in body.get("update", {}).get("comment", []):
                issue.comments.append(c["add"]["body"]["content"][0]["content"][0]["text"])
            self._close(issue, always=True)
        return 204, None, {}

    # ------------------------------------------------------------------------------ GitHub

    def _gh_issue(self, i: Issue) -> dict[str, Any]:
        return {"number": int(i.key), "state": "open" if i.open else "closed", "title": i.title,
                "labels": [{"name": n} for n in i.labels],
                "html_url": f"https://github.com/{self.repo}/issues/{i.key}"}  # fmt: skip

    def _github(
        self, method: str, path: str, query: dict[str, str], body: Any
    ) -> tuple[int, Any, dict[str, str]]:
        base = f"/repos/{self.repo}/issues"
        if path == base and method == "GET":
            label = query.get("labels")
            found = [
                i
                for _, i in sorted(self.issues.items(), key=lambda kv: int(kv[0]))
                if not label or label in i.labels
            ]
            size = min(int(query.get("per_page", 30)), PAGE)
            page = int(query.get("page", 1))
            chunk = found[(page - 1) * size : page * size]
            headers = {}
            if page * size < len(found):
                nxt = {**query, "page": str(page + 1)}
                link = f"{self.url}{base}?{urllib.parse.urlencode(nxt)}"
                headers["Link"] = f'<{link}>; rel="next", <{self.url}{base}>; rel="first"'
            return 200, [self._gh_issue(i) for i in chunk], headers
        m = re.fullmatch(re.escape(base) + r"/(\d+)(/comments)?", path)
        if not m or m.group(1) not in self.issues:
            return 404, {"message": "Not Found"}, {}
        issue = self.issues[m.group(1)]
        if m.group(2):
            if method == "POST":
                issue.comments.append(body["body"])
                return 201, {"body": body["body"]}, {}
            return 200, [{"body": c} for c in issue.comments], {}
        if method == "PATCH":
            if body.get("state") == "closed":
                self._close(issue, always=False)
            return 200, self._gh_issue(issue), {}
        return 200, self._gh_issue(issue), {}

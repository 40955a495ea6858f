"""A server that lies in front of the emulator: every API request is forwarded to an
:class:`~secfindings.testing.Emulator` (with a JWT of its own), after ``request`` may change it,
and its answer goes back after ``answer`` may change that. The identity provider is the hostile
server's own (tests/servers/http.py), so a client of the proxy never talks to the emulator.

    with LyingProxy(emulator) as proxy:
        proxy.request = drop_id_conditions      # a server that ignores the id filter
        with proxy.client() as c:
            c.findings_view().to_arrow(partitions=4)

Loopback only.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Callable
from typing import Any

from tests.servers.http import HostileServer, Request, Response, make_api_token

import secfindings

__all__ = ["LyingProxy", "change_filter", "id_conditions"]

#: Straight to the emulator on loopback, whatever proxy the environment names.
_DIRECT = urllib.request.build_opener(urllib.request.ProxyHandler({}))

#: What the proxy does to a request body (the GraphQL envelope) before forwarding it.
RequestHook = Callable[[dict[str, Any]], dict[str, Any]]
#: What the proxy does to an answer (the request body, the answer's JSON) before returning it.
AnswerHook = Callable[[dict[str, Any], Any], Any]


class LyingProxy:
    """A hostile server forwarding the API to ``emulator`` (see the module's doc)."""

    def __init__(self, emulator: Any) -> None:
        self.emulator = emulator
        self.server = HostileServer()
        self.request: RequestHook = lambda body: body
        self.answer: AnswerHook = lambda body, answer: answer
        self.forwarded: list[dict[str, Any]] = []
        self._jwt = emulator.issue_jwt()
        self.server.api = self._forward

    @property
    def base_url(self) -> str:
        return self.server.base_url

    def _forward(self, req: Request) -> Response:
        body = self.request(req.json())
        self.forwarded.append(body)
        sent = urllib.request.Request(
            self.emulator.base_url,
            data=json.dumps(body).encode(),
            headers={"Content-Type": "application/json", "Authorization": f"Bearer {self._jwt}"},
            method="POST",
        )
        try:
            with _DIRECT.open(sent, timeout=30) as resp:
                status, answer = resp.status, json.loads(resp.read())
        except urllib.error.HTTPError as err:
            status, answer = err.code, json.loads(err.read() or b"{}")
        return Response.of_json(self.answer(body, answer), status)

    def client(self, **kw: Any) -> secfindings.Client:
        """A Client of the proxy that reads the (forwarded) live schema."""
        kw.setdefault("max_retries", 0)
        return secfindings.Client(
            make_api_token(), base_url=self.server.base_url, auth_url=self.server.auth_url, **kw
        )

    def async_client(self, **kw: Any) -> secfindings.AsyncClient:
        kw.setdefault("max_retries", 0)
        return secfindings.AsyncClient(
            make_api_token(), base_url=self.server.base_url, auth_url=self.server.auth_url, **kw
        )

    def __enter__(self) -> LyingProxy:
        self.server.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.close()
        assert not self.server.errors, f"the proxy itself failed: {self.server.errors!r}"


def _walk_tree(tree: Any, change: Callable[[dict[str, Any]], dict[str, Any] | None]) -> Any:
    """The filter tree with each leaf changed (None: the leaf is left out)."""
    if isinstance(tree, dict) and "operands" in tree:
        kept = [t for t in (_walk_tree(o, change) for o in tree["operands"]) if t is not None]
        if not kept:
            return None
        return kept[0] if len(kept) == 1 else {**tree, "operands": kept}
    if isinstance(tree, dict):
        return change(tree)
    return tree


def change_filter(change: Callable[[dict[str, Any]], dict[str, Any] | None]) -> RequestHook:
    """A request hook that changes every leaf of ``filtersjson`` (in the variables)."""

    def hook(body: dict[str, Any]) -> dict[str, Any]:
        variables = body.get("variables") or {}
        for value in variables.values():
            if isinstance(value, dict) and isinstance(value.get("filtersjson"), str):
                tree = _walk_tree(json.loads(value["filtersjson"]), change)
                if tree is None:
                    del value["filtersjson"]
                else:
                    value["filtersjson"] = json.dumps(tree)
        return body

    return hook


def id_conditions(leaf: dict[str, Any]) -> bool:
    """Whether a leaf is a range condition on ``id``."""
    return leaf.get("field") == "id" and leaf.get("condition") in ("gte", "lte", "gt", "lt")

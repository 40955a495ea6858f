"""The clients under test, each behind the same small interface, for the worker processes of
``bench.py``. Every client sends the same query text and variables, checks for ``errors``, and
hands back plain dicts.

Sync clients: ``call(query, variables) -> data`` and ``iterate(limit, page_size) -> nodes``.
Async clients: the same, awaited, plus ``start()`` / ``close()``.

The baselines exchange the API token for a JWT once, before anything is timed (``fetch_jwt``),
and send it as ``Authorization: Bearer``; secfindings does its own exchange on its first call,
which the warm-up call absorbs.
"""

from __future__ import annotations

import base64
import json
import os
import urllib.request
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

FINDING_QUERY = (
    "query GetFinding($id: ID!) { finding(id: $id) { id id_int title cloud_provider cloud_account "
    "age finding_score { score severity } } }"
)
PAGE_QUERY = (
    "query Page($first: Int, $after: String) { findings_view(first: $first, after: $after) {"
    " edges { node { id id_int title score cloud_provider cloud_account resource_name age } }"
    " pageInfo { hasNextPage endCursor } } }"
)
# for developing the harness against an emulator build that does not serve finding(id) yet
if os.environ.get("BENCH_DEV_FINDING_QUERY"):
    FINDING_QUERY = os.environ["BENCH_DEV_FINDING_QUERY"]


class Env:
    def __init__(self) -> None:
        self.base_url = os.environ["BENCH_BASE_URL"]
        self.auth_url = os.environ["BENCH_AUTH_URL"]
        self.api_token = os.environ["BENCH_API_TOKEN"]
        for url in (self.base_url, self.auth_url):
            if not url.startswith(("http://127.0.0.1:", "http://localhost:")):
                raise SystemExit(f"refusing a non-loopback URL: {url}")


def fetch_jwt(env: Env) -> str:
    """The identity-provider exchange, done once per baseline process (not timed)."""
    req = urllib.request.Request(
        env.auth_url,
        data=base64.b64decode(env.api_token),
        headers={
            "X-Amz-Target": "AWSCognitoIdentityProviderService.InitiateAuth",
            "Content-Type": "application/x-amz-json-1.1",
        },
        method="POST",
    )
    with urllib.request.urlopen(req, timeout=30) as resp:
        return str(json.load(resp)["AuthenticationResult"]["AccessToken"])


def _check(doc: dict[str, Any]) -> dict[str, Any]:
    if doc.get("errors"):
        raise RuntimeError(f"GraphQL errors: {doc['errors']!r:.300}")
    data: dict[str, Any] = doc["data"]
    return data


def hand_pages(
    call: Callable[[str, dict[str, Any]], dict[str, Any]], limit: int, page_size: int
) -> Iterator[Any]:
    """The paging loop a user of a plain HTTP or GraphQL library writes."""
    after: str | None = None
    seen = 0
    for _ in range(limit // max(page_size, 1) + 2):  # bounded: never more pages than needed
        conn = call(PAGE_QUERY, {"first": page_size, "after": after})["findings_view"]
        for edge in conn["edges"]:
            yield edge["node"]
        seen += len(conn["edges"])
        info = conn["pageInfo"]
        if not info["hasNextPage"] or seen >= limit:
            return
        if info["endCursor"] == after:
            raise RuntimeError("repeated cursor")
        after = info["endCursor"]


async def ahand_pages(call: Callable[..., Any], limit: int, page_size: int) -> AsyncIterator[Any]:
    after: str | None = None
    seen = 0
    for _ in range(limit // max(page_size, 1) + 2):
        conn = (await call(PAGE_QUERY, {"first": page_size, "after": after}))["findings_view"]
        for edge in conn["edges"]:
            yield edge["node"]
        seen += len(conn["edges"])
        info = conn["pageInfo"]
        if not info["hasNextPage"] or seen >= limit:
            return
        if info["endCursor"] == after:
            raise RuntimeError("repeated cursor")
        after = info["endCursor"]


# ---------------------------------------------------------------------------------------------
# sync


class SecfindingsSync:
    label = "secfindings Client"

    def __init__(self, env: Env) -> None:
        import secfindings

        self.c = secfindings.Client(env.api_token, base_url=env.base_url, auth_url=env.auth_url)

    def call(self, query: str, variables: dict[str, Any]) -> dict[str, Any]:
        return self.c.execute(query, variables)

    def iterate(self, limit: int, page_size: int) -> Iterator[Any]:
        return iter(self.c.paginate(PAGE_QUERY, page_size=page_size, limit=limit))

    def close(self) -> None:
        self.c.close()


TYPED_FIELDS = "id id_int title score cloud_provider cloud_account resource_name age"


class SecfindingsTyped(SecfindingsSync):
    """The typed ``Client.findings_view`` paginator (FindingsView models instead of dicts),
    selecting the same fields as everyone else."""

    label = "secfindings Client.findings_view (typed)"

    def iterate(self, limit: int, page_size: int) -> Iterator[Any]:
        return iter(self.c.findings_view(page_size=page_size, limit=limit, fields=TYPED_FIELDS))


class HttpxSync:
    label = "httpx Client + orjson"

    def __init__(self, env: Env) -> None:
        import httpx
        import orjson

        self.dumps, self.loads = orjson.dumps, orjson.loads
        self.url = env.base_url
        self.c = httpx.Client(
            headers={"Authorization": f"Bearer {fetch_jwt(env)}", "Content-Type": "application/json"},
            timeout=60,
            trust_env=False,
        )

    def call(self, query: str, variables: dict[str, Any]) -> dict[str, Any]:
        r = self.c.post(self.url, content=self.dumps({"query": query, "variables": variables}))
        r.raise_for_status()
        return _check(self.loads(r.content))

    def iterate(self, limit: int, page_size: int) -> Iterator[Any]:
        return hand_pages(self.call, limit, page_size)

    def close(self) -> None:
        self.c.close()


class RequestsSync:
    label = "requests"

    def __init__(self, env: Env) -> None:
        import requests

        self.url = env.base_url
        self.s = requests.Session()
        self.s.trust_env = False
        self.s.headers["Authorization"] = f"Bearer {fetch_jwt(env)}"

    def call(self, query: str, variables: dict[str, Any]) -> dict[str, Any]:
        r = self.s.post(self.url, json={"query": query, "variables": variables}, timeout=60)
        r.raise_for_status()
        return _check(r.json())

    def iterate(self, limit: int, page_size: int) -> Iterator[Any]:
        return hand_pages(self.call, limit, page_size)

    def close(self) -> None:
        self.s.close()


class GqlSync:
    """gql with a sync transport (requests or httpx); documents parsed once, no schema fetch."""

    def __init__(self, env: Env, transport: str) -> None:
        from gql import Client, GraphQLRequest, gql

        headers = {"Authorization": f"Bearer {fetch_jwt(env)}"}
        if transport == "requests":
            from gql.transport.requests import RequestsHTTPTransport

            t: Any = RequestsHTTPTransport(url=env.base_url, headers=headers, timeout=60, retries=0)
        else:
            from gql.transport.httpx import HTTPXTransport

            t = HTTPXTransport(url=env.base_url, headers=headers, timeout=60)
        self.label = f"gql ({transport} transport)"
        self.Request = GraphQLRequest
        self.docs = {FINDING_QUERY: gql(FINDING_QUERY), PAGE_QUERY: gql(PAGE_QUERY)}
        self.client = Client(transport=t, fetch_schema_from_transport=False)
        self.session = self.client.connect_sync()

    def call(self, query: str, variables: dict[str, Any]) -> dict[str, Any]:
        result: dict[str, Any] = self.session.execute(
            self.Request(self.docs[query], variable_values=variables)
        )
        return result

    def iterate(self, limit: int, page_size: int) -> Iterator[Any]:
        return hand_pages(self.call, limit, page_size)

    def close(self) -> None:
        self.client.close_sync()


# ---------------------------------------------------------------------------------------------
# async


class SecfindingsAsync:
    label = "secfindings AsyncClient"

    def __init__(self, env: Env) -> None:
        self.env = env

    async def start(self) -> None:
        import secfindings

        e = self.env
        self.c = secfindings.AsyncClient(e.api_token, base_url=e.base_url, auth_url=e.auth_url)

    async def call(self, query: str, variables: dict[str, Any]) -> dict[str, Any]:
        return await self.c.execute(query, variables)

    def iterate(self, limit: int, page_size: int) -> AsyncIterator[Any]:
        return self.c.paginate(PAGE_QUERY, page_size=page_size, limit=limit).__aiter__()

    async def close(self) -> None:
        await self.c.aclose()


class SecfindingsAsyncTyped(SecfindingsAsync):
    label = "secfindings AsyncClient.findings_view (typed)"

    def iterate(self, limit: int, page_size: int) -> AsyncIterator[Any]:
        return self.c.findings_view(page_size=page_size, limit=limit, fields=TYPED_FIELDS).__aiter__()


class HttpxAsync:
    label = "httpx AsyncClient + orjson"

    def __init__(self, env: Env) -> None:
        self.env = env

    async def start(self) -> None:
        import httpx
        import orjson

        self.dumps, self.loads = orjson.dumps, orjson.loads
        self.url = self.env.base_url
        self.c = httpx.AsyncClient(
            headers={"Authorization": f"Bearer {fetch_jwt(self.env)}", "Content-Type": "application/json"},
            timeout=60,
            trust_env=False,
            limits=httpx.Limits(max_connections=64, max_keepalive_connections=64),
        )

    async def call(self, query: str, variables: dict[str, Any]) -> dict[str, Any]:
        r = await self.c.post(self.url, content=self.dumps({"query": query, "variables": variables}))
        r.raise_for_status()
        return _check(self.loads(r.content))

    def iterate(self, limit: int, page_size: int) -> AsyncIterator[Any]:
        return ahand_pages(self.call, limit, page_size)

    async def close(self) -> None:
        await self.c.aclose()


class AiohttpAsync:
    label = "aiohttp + orjson"

    def __init__(self, env: Env) -> None:
        self.env = env

    async def start(self) -> None:
        import aiohttp
        import orjson

        self.dumps, self.loads = orjson.dumps, orjson.loads
        self.url = self.env.base_url
        self.s = aiohttp.ClientSession(
            headers={"Authorization": f"Bearer {fetch_jwt(self.env)}", "Content-Type": "application/json"},
            connector=aiohttp.TCPConnector(limit=64),
            timeout=aiohttp.ClientTimeout(total=60),
        )

    async def call(self, query: str, variables: dict[str, Any]) -> dict[str, Any]:
        async with self.s.post(self.url, data=self.dumps({"query": query, "variables": variables})) as r:
            r.raise_for_status()
            return _check(self.loads(await r.read()))

    def iterate(self, limit: int, page_size: int) -> AsyncIterator[Any]:
        return ahand_pages(self.call, limit, page_size)

    async def close(self) -> None:
        await self.s.close()


class GqlAiohttp:
    label = "gql (aiohttp transport)"

    def __init__(self, env: Env) -> None:
        self.env = env

    async def start(self) -> None:
        from gql import Client, GraphQLRequest, gql
        from gql.transport.aiohttp import AIOHTTPTransport

        t = AIOHTTPTransport(
            url=self.env.base_url, headers={"Authorization": f"Bearer {fetch_jwt(self.env)}"}, timeout=60
        )
        self.Request = GraphQLRequest
        self.docs = {FINDING_QUERY: gql(FINDING_QUERY), PAGE_QUERY: gql(PAGE_QUERY)}
        self.client = Client(transport=t, fetch_schema_from_transport=False)
        self.session = await self.client.connect_async()

    async def call(self, query: str, variables: dict[str, Any]) -> dict[str, Any]:
        result: dict[str, Any] = await self.session.execute(
            self.Request(self.docs[query], variable_values=variables)
        )
        return result

    def iterate(self, limit: int, page_size: int) -> AsyncIterator[Any]:
        return ahand_pages(self.call, limit, page_size)

    async def close(self) -> None:
        await self.client.close_async()


SYNC: dict[str, Callable[[Env], Any]] = {
    "secfindings": SecfindingsSync,
    "secfindings-typed": SecfindingsTyped,
    "httpx": HttpxSync,
    "requests": RequestsSync,
    "gql-requests": lambda env: GqlSync(env, "requests"),
    "gql-httpx": lambda env: GqlSync(env, "httpx"),
}
ASYNC: dict[str, Callable[[Env], Any]] = {
    "secfindings-async": SecfindingsAsync,
    "secfindings-async-typed": SecfindingsAsyncTyped,
    "httpx-async": HttpxAsync,
    "aiohttp": AiohttpAsync,
    "gql-aiohttp": GqlAiohttp,
}
# Clients whose requests are byte-for-byte alike as far as the emulator's response cache goes
# (same query text, variables and operation name): once one of a family has made a full warm-up
# pass, the others only need a short one (their connection and interpreter, not the server).
REQUEST_FAMILY = {
    "secfindings": "secfindings-execute",
    "secfindings-async": "secfindings-execute",
    "secfindings-typed": "secfindings-typed",
    "secfindings-async-typed": "secfindings-typed",
    "httpx": "plain",
    "httpx-async": "plain",
    "requests": "plain",
    "aiohttp": "plain",
    "gql-requests": "gql",
    "gql-httpx": "gql",
    "gql-aiohttp": "gql",
}

LABELS = {
    "secfindings": "secfindings Client",
    "secfindings-typed": "secfindings Client.findings_view (typed)",
    "httpx": "httpx Client + orjson",
    "requests": "requests",
    "gql-requests": "gql (requests transport)",
    "gql-httpx": "gql (httpx transport)",
    "secfindings-async": "secfindings AsyncClient",
    "secfindings-async-typed": "secfindings AsyncClient.findings_view (typed)",
    "httpx-async": "httpx AsyncClient + orjson",
    "aiohttp": "aiohttp + orjson",
    "gql-aiohttp": "gql (aiohttp transport)",
    "floor": "Rust floor (reqwest + serde_json)",
}

"""A second GraphQL server whose schema differs from the emulator's, as production's does: extra
fields, an extra enum value, a type the package does not model, a missing field, and
introspection that can be turned off. graphql-core executes it over the raw-socket HTTP server of
``tests/servers/http.py`` (loopback only); the identity provider there hands out JWTs.
"""

from __future__ import annotations

import json
import re
from typing import Any

import graphql
from tests.servers.http import HostileServer, Request, Response

from secfindings import _native

__all__ = ["ROWS", "VariantServer", "variant_sdl"]


def _edit_type(sdl: str, name: str, add: str = "", drop: tuple[str, ...] = ()) -> str:
    """Adds field lines to (and drops fields from) the body of ``type name`` / ``enum name``."""
    m = re.search(rf"^(type|enum) {name}\b[^{{]*\{{\n", sdl, flags=re.M)
    assert m, name
    end = sdl.index("\n}", m.end())
    body = sdl[m.end() : end]
    for field in drop:
        body = re.sub(rf'(?:  """[^"]*"""\n)?  {field}\b[^\n]*\n', "", body + "\n").rstrip("\n")
    return sdl[: m.end()] + add + body + sdl[end:]


def variant_sdl(missing: bool = True) -> str:
    sdl = _native.builtin_sdl()
    drop = ("sla_status",) if missing else ()
    sdl = _edit_type(sdl, "FindingsView", "  exploitability: Float\n  epss_percentile: Int\n", drop)
    sdl = _edit_type(sdl, "FindingsViewSortEnum", "  EXPLOITABILITY_DESC\n")
    sdl = _edit_type(sdl, "Finding", "  risk: RiskProfile\n")
    sdl += (
        '\n"""Not in the package\'s model."""\ntype RiskProfile {\n  level: String\n'
        "  factors: [RiskFactor]\n  assessed_at: DateTime\n}\n\n"
        "type RiskFactor {\n  name: String\n  weight: Float\n}\n"
    )
    return sdl


ROWS: list[dict[str, Any]] = [
    {
        "id": f"RmluZGluZ3NWaWV3Ono{i}",
        "id_int": i,
        "title": f"finding {i}",
        "severity": 1 + i % 5,
        "score": 1.5 * i,
        "exploitability": 0.1 * i,
        "epss_percentile": 90 + i,
        "last_reported_time": f"2025-06-0{i}T00:00:00+00:00",
        "due_date": None,
        "discovered_time": f"2025-05-0{i}T00:00:00+00:00",
        "sla_status": "ON_TRACK",
        "cloud_provider": "aws",
        "actual_status": {"category": "OPEN", "key": "10"},
    }
    for i in range(1, 6)
]


class VariantServer:
    """Serves :func:`variant_sdl` at ``base_url``; ``introspection`` turns it on and off, and
    ``documents`` / ``introspections`` count what it received."""

    def __init__(self, *, missing: bool = True, introspection: bool = True) -> None:
        self.schema = graphql.build_schema(variant_sdl(missing))
        self.introspection = introspection
        self.documents: list[str] = []
        self.introspections = 0
        self._server = HostileServer()
        self._server.api = self._api

    def __enter__(self) -> VariantServer:
        self._server.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.__exit__(*exc)

    @property
    def base_url(self) -> str:
        return self._server.base_url

    @property
    def auth_url(self) -> str:
        return self._server.auth_url

    def _root(self) -> dict[str, Any]:
        def findings_view(_info: Any, **args: Any) -> dict[str, Any]:
            rows = list(ROWS)
            if "EXPLOITABILITY_DESC" in (args.get("sort") or []):
                rows.sort(key=lambda r: -r["exploitability"])
            first = args.get("first") or 100
            after = int(args.get("after") or 0)
            page = rows[after : after + first]
            edges = [{"cursor": str(after + i + 1), "node": r} for i, r in enumerate(page)]
            info = {"hasNextPage": after + first < len(rows), "endCursor": str(after + len(page))}
            return {"edges": edges, "pageInfo": info, "total_count": len(rows)}

        def finding(_info: Any, **args: Any) -> dict[str, Any]:
            row = ROWS[0]
            return {
                "id": args["id"],
                "id_int": 1,
                "title": row["title"],
                "risk": {
                    "level": "high",
                    "factors": [{"name": "internet", "weight": 0.7}],
                    "assessed_at": "2025-06-01T10:00:00+00:00",
                },
                "finding_score": {"score": 7.5, "severity": 4, "original_score": None},
            }

        return {"findings_view": findings_view, "finding": finding}

    def _api(self, req: Request) -> Response:
        body = req.json()
        query = body.get("query", "")
        if "__schema" in query:
            self.introspections += 1
            if not self.introspection:
                return Response.of_json(
                    {"errors": [{"message": "GraphQL introspection is not allowed"}]}, status=400
                )
        else:
            self.documents.append(query)
        result = graphql.graphql_sync(
            self.schema,
            query,
            root_value=self._root(),
            variable_values=body.get("variables"),
            operation_name=body.get("operationName"),
        )
        out: dict[str, Any] = {"data": result.data}
        if result.errors:
            out["errors"] = [e.formatted for e in result.errors]
        return Response.text(json.dumps(out), content_type="application/json")

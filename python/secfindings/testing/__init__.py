"""The offline emulator of the API and its identity provider, for tests, notebooks and demos.

    from secfindings.testing import Emulator

    with Emulator(findings=5_000, seed=7) as emu:
        client = emu.client()                  # a Client with a fresh API token
        print(client.execute("{ finding(id: 1) { title } }"))

The emulator is a real HTTP server on 127.0.0.1 (a free port), running in this process on its
own threads. It speaks the identity provider's InitiateAuth protocol at ``auth_url`` and serves
the whole API at ``base_url`` from seeded, deterministic data (same seed, same data).
"""

from __future__ import annotations

import datetime as dt
import math
from types import TracebackType
from typing import Any, Literal

from secfindings._client import AsyncClient, Client
from secfindings._live import forget_server
from secfindings._shared import has_offset, parse_datetime

try:
    from secfindings._native import NativeEmulator
except ImportError as exc:  # a build without the emulator (cargo feature "emulator" off)
    raise ImportError(
        "this build of secfindings has no emulator: install the published wheel, or build from "
        "source with the default features"
    ) from exc

__all__ = ["Emulator"]

RateLimitSpec = tuple[int, float]
"""(requests, window in seconds)."""

#: The models the emulator serves: ours, and only what the public facts show.
PROFILES = ("default", "known")


class Emulator:
    """An in-process emulator; stop it with :meth:`close` or a ``with`` block.

    Args:
        findings: how many findings to seed.
        seed: the seed of the generated data.
        port: 0 picks a free port.
        jwt_lifetime: seconds a JWT from the identity provider lives (``ExpiresIn``).
        global_limit: the API's rate limit over all customers, as (requests, window seconds);
            None means unlimited. A breach answers 429 with ``Retry-After``.
        customer_limit: the same, per customer.
        token_limit: the same, per API token.
        idp_limit: the identity provider's limit (TooManyRequestsException when breached).
        response_cache: answer a repeated query (same document, variables and customer) from
            memory until the next mutation, so that benchmarks measure clients, not the
            GraphQL engine. Authentication, limits, faults and the request log still apply.
        latency_ms: every API request waits this long before it is answered, as a network
            round trip would (0: none).
        max_aliases: refuse a document with more aliased fields than this (400, "too many
            aliases"); None: no limit.
        max_document_bytes: refuse a request body larger than this (413); None: no limit.
        profile: the model served. ``"default"``: ours, richer than what is known of the service
            (range filter conditions, a total count, more FindingsView fields and sort keys).
            ``"known"``: only what the public facts show (docs/guides/testing.md lists each
            rule and its source); test a feature against it to know it works on the service.
    """

    def __init__(
        self,
        findings: int = 5_000,
        seed: int = 7,
        *,
        port: int = 0,
        host: str = "127.0.0.1",
        jwt_lifetime: float = 3600.0,
        global_limit: RateLimitSpec | None = None,
        customer_limit: RateLimitSpec | None = None,
        token_limit: RateLimitSpec | None = None,
        idp_limit: RateLimitSpec | None = None,
        response_cache: bool = False,
        latency_ms: float = 0.0,
        max_aliases: int | None = None,
        max_document_bytes: int | None = None,
        profile: Literal["default", "known"] = "default",
    ) -> None:
        if profile not in PROFILES:
            raise ValueError(f"profile must be one of {', '.join(PROFILES)}, not {profile!r}")
        _check_latency(latency_ms)
        _check_limit("max_aliases", max_aliases)
        _check_limit("max_document_bytes", max_document_bytes)
        self._native = NativeEmulator(
            findings=findings,
            seed=seed,
            port=port,
            host=host,
            jwt_lifetime=jwt_lifetime,
            global_limit=global_limit,
            customer_limit=customer_limit,
            token_limit=token_limit,
            idp_limit=idp_limit,
            response_cache=response_cache,
            latency_ms=latency_ms,
            max_aliases=max_aliases,
            max_document_bytes=max_document_bytes,
            profile=profile,
        )
        self.findings = findings
        self.seed = seed
        self.profile: Literal["default", "known"] = profile
        # A new server at this URL (a port is reused): what was learned of an earlier one goes.
        forget_server(self.base_url)

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:PORT/api/v1``."""
        return self._native.base_url

    @property
    def auth_url(self) -> str:
        """The identity provider's endpoint (``http://127.0.0.1:PORT/``)."""
        return self._native.auth_url

    @property
    def port(self) -> int:
        """The TCP port the emulator listens on (127.0.0.1)."""
        return self._native.port

    def create_api_token(self, customer: str = "acme", name: str = "default") -> str:
        """A new API token: base64 of an InitiateAuth request body, like the real ones."""
        return self._native.create_api_token(customer, name)

    def revoke_api_token(self, api_token: str) -> bool:
        """Revoke a token: its exchanges and the JWTs it produced stop working."""
        return self._native.revoke_api_token(api_token)

    def issue_jwt(self, customer: str = "acme", name: str = "default", lifetime: float = 3600.0) -> str:
        """A JWT without an exchange (for clients given ``jwt=``)."""
        return self._native.issue_jwt(customer, name, lifetime)

    def expire_jwts(self) -> None:
        """Make every JWT issued so far answer 401 (clients must refresh)."""
        self._native.expire_jwts()

    def create_finding(
        self, severity: int = 5, *, status: str | None = None, due_date: dt.datetime | None = None
    ) -> tuple[int, str]:
        """Add a finding of ``severity`` (1-5) and publish it to ``finding_created``
        subscribers. A new finding is as the service makes one: open (status New, sub-phase
        NEW), no tickets, due as the seeded SLA groups say for its severity; ``status`` (a status
        key such as ``"20"`` or a category: ``OPEN``, ``FIXED``, ``IGNORED``) and ``due_date`` (an
        aware datetime) say otherwise. Returns the finding's numeric id and the event's cursor."""
        due = None
        if due_date is not None:
            if due_date.tzinfo is None:
                raise ValueError("due_date must be an aware datetime (with a UTC offset)")
            due = int(due_date.timestamp())
        return self._native.create_finding(severity, status, due)

    def change_finding(self, id: int, kind: str = "changed") -> str:
        """Publish a ``finding_changed`` event of ``kind`` for finding ``id`` (numeric); returns
        the event's cursor."""
        return self._native.change_finding(id, kind)

    def now(self) -> dt.datetime:
        """The emulator's clock (aware, UTC). Its data has a fixed "today"; the clock stands at
        noon of it and moves one second with every change of the store, so each change is later
        than the one before."""
        return dt.datetime.fromtimestamp(self._native.now(), tz=dt.timezone.utc)

    def update_finding(
        self,
        id: int,
        *,
        severity: int | None = None,
        score: float | None = None,
        status: str | None = None,
        last_reported_time: dt.datetime | str | None = None,
    ) -> str:
        """Change finding ``id`` as a scanner or an analyst would, and publish
        ``finding_changed`` (kind ``"updated"``). ``severity`` 1-5; ``score`` 0-100 (as the API
        shows it); ``status`` a status key (``"20"``) or a category (``OPEN``, ``FIXED``,
        ``IGNORED``: its first status); ``last_reported_time`` an aware datetime or an ISO 8601
        string. A status change alone does not move ``last_reported_time``, as on the real
        service. Returns the event's cursor."""
        return self._native.update_finding(
            id,
            severity=severity,
            score=score,
            status=status,
            last_reported=None if last_reported_time is None else _unix(last_reported_time),
        )

    def rereport_finding(self, id: int, at: dt.datetime | str | None = None) -> str:
        """The scanner reports finding ``id`` again: ``last_reported_time`` becomes ``at``
        (default :meth:`now`); publishes ``finding_changed`` (kind ``"reported"``)."""
        when = self._native.now() if at is None else _unix(at)
        return self._native.update_finding(id, last_reported=when, kind="reported")

    def close_finding(self, id: int) -> str:
        """Close finding ``id`` (status "Fixed", category FIXED) without moving its
        ``last_reported_time``; publishes ``finding_changed`` (kind ``"closed"``)."""
        return self._native.update_finding(id, status="FIXED", kind="closed")

    def remove_finding(self, id: int) -> str:
        """Remove finding ``id``: ``finding(id)`` answers not found and no walk lists it any
        more; publishes ``finding_changed`` (kind ``"removed"``)."""
        return self._native.update_finding(id, remove=True, kind="removed")

    def set_latency(self, ms: float) -> None:
        """Every API request waits ``ms`` milliseconds before it is answered (0: none)."""
        _check_latency(ms)
        self._native.set_latency(ms)

    def set_document_limits(self, max_aliases: int | None = None, max_bytes: int | None = None) -> None:
        """Limit one request's document: aliased fields (over it: 400 "too many aliases") and
        body bytes (over it: 413). None lifts a limit."""
        _check_limit("max_aliases", max_aliases)
        _check_limit("max_bytes", max_bytes)
        self._native.set_document_limits(max_aliases, max_bytes)

    def subscription_stats(self) -> dict[str, int]:
        """Subscriptions open on the server, WebSocket connections open, and accepted so far."""
        active, open_, accepted = self._native.subscription_stats()
        return {"active": active, "open": open_, "accepted": accepted}

    def drop_websockets(self) -> None:
        """Drop every open WebSocket connection without a close frame (a network failure)."""
        self._native.drop_websockets()

    def drop_next_websockets(self, count: int = 1) -> None:
        """Drop the next ``count`` WebSocket connections when their ``connection_init`` arrives,
        before the server acknowledges it (a connection lost in its handshake)."""
        if count < 0:
            raise ValueError(f"count must be at least 0, got {count}")
        self._native.drop_next_websockets(count)

    def set_ws_protocols(self, protocols: str) -> None:
        """Which subprotocols the server accepts: ``"both"`` (default),
        ``"graphql-transport-ws"`` or ``"graphql-ws"`` (the legacy protocol only)."""
        self._native.set_ws_protocols(protocols)

    def set_jwt_lifetime(self, seconds: float) -> None:
        """JWTs issued from now on live this many seconds (``ExpiresIn``)."""
        self._native.set_jwt_lifetime(seconds)

    def set_rate_limit(
        self, scope: Literal["global", "customer", "token", "idp"], limit: RateLimitSpec | None
    ) -> None:
        """Change one rate limit: (requests, window seconds), or None to lift it."""
        self._native.set_rate_limit(scope, limit)

    def inject(
        self,
        kind: Literal["status", "reset", "truncated", "delay", "rate_limit", "idp_error", "challenge"],
        count: int = 1,
        *,
        target: Literal["api", "idp"] = "api",
        status: int | None = None,
        retry_after: int | None = None,
        delay: float | None = None,
        error_type: str | None = None,
        message: str | None = None,
        after_mutations: int | None = None,
        applied: bool = False,
    ) -> None:
        """Make the next ``count`` requests to ``target`` fail: ``status`` (502 with an HTML body,
        503, 504), ``reset`` (connection dropped), ``truncated`` (body cut short), ``delay``
        (seconds), ``rate_limit`` (429 with ``retry_after``), ``idp_error`` (``error_type``,
        ``message``) or ``challenge`` (an InitiateAuth challenge named by ``error_type``).

        With ``after_mutations=k`` the fault is for mutations only: ``k`` mutation requests pass,
        then the next ``count`` get it (queries are neither hit nor counted). With
        ``applied=True`` each of those mutations runs first and the fault replaces its answer
        (``status``, ``reset``), cuts it short (``truncated``) or delays it (``delay``): the
        change is kept although the client sees a failure. ``stats()["mutations_applied"]``
        counts the mutations that ran."""
        self._native.inject(
            kind,
            count,
            target=target,
            status=status,
            retry_after=retry_after,
            delay=delay,
            error_type=error_type,
            message=message,
            after_mutations=after_mutations,
            applied=applied,
        )

    def clear_faults(self) -> None:
        """Forget every fault injected and not yet served."""
        self._native.clear_faults()

    def stats(self) -> dict[str, int]:
        """Counters: api_requests, idp_requests, token_exchanges, rate_limited, unauthorized,
        mutations_applied (root mutation fields that ran without an error)."""
        return self._native.stats()

    def reset_stats(self) -> None:
        """Set the counters of :meth:`stats` back to zero."""
        self._native.reset_stats()

    def request_log(self) -> list[dict[str, Any]]:
        """The API requests received (operation_name, query, variables, status, and aliases: the
        aliased fields of the document, counted when read), oldest first."""
        return self._native.request_log()

    def clear_request_log(self) -> None:
        """Empty the log that :meth:`request_log` returns."""
        self._native.clear_request_log()

    def sdl(self) -> str:
        """The emulated schema in GraphQL SDL."""
        return self._native.sdl()

    def _schema_mode(self, kwargs: dict[str, Any]) -> None:
        # The built-in schema is the default profile's: a known-profile client learns the
        # server's own, as a client of the service does.
        kwargs.setdefault("schema", "builtin" if self.profile == "default" else "live")

    def client(self, *, customer: str = "acme", name: str = "default", **kwargs: Any) -> Client:
        """A :class:`~secfindings.Client` for this emulator with a new API token. Its schema
        checks use the built-in schema (the default profile's own) without introspecting, or the
        live schema on the ``known`` profile, unless ``schema=`` says otherwise."""
        self._schema_mode(kwargs)
        return Client(
            self.create_api_token(customer, name), base_url=self.base_url, auth_url=self.auth_url, **kwargs
        )

    def async_client(self, *, customer: str = "acme", name: str = "default", **kwargs: Any) -> AsyncClient:
        """An :class:`~secfindings.AsyncClient` for this emulator with a new API token (the
        schema as :meth:`client` chooses it)."""
        self._schema_mode(kwargs)
        return AsyncClient(
            self.create_api_token(customer, name), base_url=self.base_url, auth_url=self.auth_url, **kwargs
        )

    def close(self) -> None:
        """Stop the server (idempotent)."""
        self._native.shutdown()

    def __enter__(self) -> Emulator:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Emulator(base_url={self.base_url!r}, findings={self.findings}, seed={self.seed})"


def _unix(value: dt.datetime | str) -> int:
    """Unix seconds of an aware datetime or an ISO 8601 string with an offset."""
    if isinstance(value, str):
        parsed = parse_datetime(value)
        if parsed is None:
            raise ValueError(f"not an ISO 8601 datetime: {value!r}")
        # Taken as UTC by the parser; here the caller must say which instant it means.
        value = parsed if has_offset(value) else parsed.replace(tzinfo=None)
    if not isinstance(value, dt.datetime):
        raise TypeError(f"expected a datetime or an ISO 8601 string, got {type(value).__name__}")
    if value.tzinfo is None or value.utcoffset() is None:
        raise ValueError(f"the datetime must be timezone-aware: {value!r}")
    return math.floor(value.timestamp())


def _check_latency(ms: float) -> None:
    if isinstance(ms, bool) or not isinstance(ms, (int, float)) or not math.isfinite(ms) or ms < 0:
        raise ValueError(f"latency_ms must be a number of milliseconds >= 0, got {ms!r}")


def _check_limit(name: str, value: int | None) -> None:
    if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
        raise ValueError(f"{name} must be a whole number >= 1 or None, got {value!r}")

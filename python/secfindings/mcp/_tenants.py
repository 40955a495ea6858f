"""The tenants an MCP server serves: the profiles asked for, else every profile of the file,
else the one the environment names. One client per tenant, made on first use and shared by
every call (so by the API token's shared request budget)."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import secfindings
from secfindings.profiles import FLAG, ProfileError, Settings, load, resolve

#: The tenant's name when no profile is configured (the environment's settings).
ENV_TENANT = "default"


class TenantError(ValueError):
    """A tenant missing or unknown (the tool answers it as an error, naming the tenants)."""


@dataclass
class Tenants:
    settings: dict[str, Settings]
    rate_limit: tuple[int, float] | None = None
    _clients: dict[str, secfindings.Client] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @classmethod
    def configure(
        cls, names: list[str] | None = None, rate_limit: tuple[int, float] | None = None
    ) -> Tenants:
        """The tenants of the profiles file (``names``, or all of them; the environment's
        settings when the file has none), each paced by ``rate_limit`` (requests, seconds)."""
        doc = load()
        if names is None:
            names = sorted(doc.profiles)
        if not names:
            return cls({ENV_TENANT: resolve(None, profiles=doc)}, rate_limit)
        for name in names:
            doc.get(name)
        settings = {name: resolve(name, profiles=doc) for name in names}
        if len(settings) > 1:
            for name, s in settings.items():
                # one token from the environment would be one tenant's, sent to every tenant
                if s.sources.get("base_url") != FLAG or s.sources.get("token") != FLAG:
                    raise ProfileError(
                        f"profile {name!r} has no base_url or no token source of its own: with "
                        "several tenants each needs both (the environment's would go to every tenant)"
                    )
        return cls(settings, rate_limit)

    @property
    def names(self) -> list[str]:
        """The tenants' names, sorted."""
        return sorted(self.settings)

    @property
    def several(self) -> bool:
        """Whether more than one tenant is configured (then every call must name one)."""
        return len(self.settings) > 1

    def pick(self, tenant: str | None) -> str:
        """The tenant a call names; with several configured there is no default."""
        if tenant is None or tenant == "":
            if self.several:
                raise TenantError(f"name the tenant: one of {', '.join(self.names)}")
            return self.names[0]
        if tenant not in self.settings:
            raise TenantError(f"unknown tenant {tenant!r}: one of {', '.join(self.names)}")
        return tenant

    def client(self, tenant: str) -> secfindings.Client:
        """The tenant's client, made on first use and kept (a TenantError without a base URL or
        token)."""
        with self._lock:
            client = self._clients.get(tenant)
            if client is None:
                s = self.settings[tenant]
                token = s.token()
                if not token or not s.base_url:
                    raise TenantError(
                        f"tenant {tenant!r} has no base URL or token configured: set SECFINDINGS_BASE_URL "
                        "and SECFINDINGS_API_TOKEN in the server's environment (the assistant's env), "
                        "or name a profile (SECFINDINGS_PROFILE, -p NAME)"
                    )
                client = secfindings.Client(token, **s.client_kwargs(), rate_limit=self.rate_limit)
                self._clients[tenant] = client
            return client

    def describe(self) -> list[dict[str, Any]]:
        """The tenants without a secret: name and the API's host."""
        return [
            {"tenant": name, "host": urlsplit(self.settings[name].base_url or "").hostname}
            for name in self.names
        ]

    def close(self) -> None:
        """Closes every client made so far."""
        with self._lock:
            for client in self._clients.values():
                client.close()
            self._clients.clear()

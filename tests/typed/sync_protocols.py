"""Checked by mypy strict (tests/test_sync_protocols.py), not run: the real clients are what the
sync's Protocols (python/secfindings/sync/_source.py) say they use."""

from __future__ import annotations

from secfindings import AsyncClient, Client
from secfindings.sync._source import AsyncClientProtocol, SyncClientProtocol


def sync_client(client: Client) -> SyncClientProtocol:
    return client


def async_client(client: AsyncClient) -> AsyncClientProtocol:
    return client

"""pytest fixtures for code that uses secfindings, registered automatically (entry point).

- ``emulator``: a fresh :class:`~secfindings.testing.Emulator` per test;
  override ``secfindings_emulator_options`` to change its arguments.
- ``client`` / ``async_client``: clients bound to that emulator with a new API token.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from secfindings._client import AsyncClient, Client
from secfindings.testing import Emulator


@pytest.fixture
def secfindings_emulator_options() -> dict[str, Any]:
    """Arguments for the ``emulator`` fixture; override it in a conftest.py."""
    return {"findings": 500, "seed": 7}


@pytest.fixture
def emulator(secfindings_emulator_options: dict[str, Any]) -> Iterator[Emulator]:
    with Emulator(**secfindings_emulator_options) as emu:
        yield emu


@pytest.fixture
def client(emulator: Emulator) -> Iterator[Client]:
    with emulator.client() as c:
        yield c


@pytest.fixture
def async_client(emulator: Emulator) -> Iterator[AsyncClient]:
    c = emulator.async_client()
    yield c
    c.close()

"""pytest fixtures for code that uses secfindings, registered automatically (entry point).

- ``emulator``: a fresh :class:`~secfindings.testing.Emulator` per test;
  override ``secfindings_emulator_options`` to change its arguments.
- ``client`` / ``async_client``: clients bound to that emulator with a new API token.

Each test session gets a request-budget folder of its own (``SECFINDINGS_BUDGET_DIR``, unless it is
set already), so a ``Retry-After`` that one test stages is never kept for later tests or later runs.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from typing import Any

import pytest

from secfindings._client import AsyncClient, Client
from secfindings.testing import Emulator


def pytest_configure(config: pytest.Config) -> None:
    # Before any client is made: the budget folder is read when a client starts.
    if not os.environ.get("SECFINDINGS_BUDGET_DIR", "").strip():
        os.environ["SECFINDINGS_BUDGET_DIR"] = tempfile.mkdtemp(prefix="secfindings-budget-")


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

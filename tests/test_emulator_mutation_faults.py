"""The emulator's faults for mutations only (``inject(..., after_mutations=k, applied=...)``):
k mutations pass, queries are neither hit nor counted, and ``applied=True`` keeps the change
although the client sees a failure. ``stats()["mutations_applied"]`` counts what ran."""

from __future__ import annotations

import pytest

import secfindings
from secfindings.testing import Emulator


@pytest.fixture(scope="module")
def emulator() -> Emulator:
    return Emulator(findings=10)


def _add(client: secfindings.Client, name: str) -> None:
    client.add_scoring_rule(scoring_rule={"name": name, "method": "SET", "value": 5.0})


def _names(client: secfindings.Client) -> set[str]:
    return {r.name for r in client.scoring_rules().to_list() if r.name}


def test_a_fault_waits_for_its_mutation_and_queries_pass(emulator: Emulator) -> None:
    client = emulator.client(max_retries=0)
    emulator.reset_stats()
    emulator.inject("status", status=502, after_mutations=1)
    _names(client)  # a query: neither hit nor counted
    _add(client, "mf-first")
    _names(client)
    with pytest.raises(secfindings.APIStatusError):
        _add(client, "mf-second")
    _add(client, "mf-third")  # the fault was used once
    names = _names(client)
    assert {"mf-first", "mf-third"} <= names
    assert "mf-second" not in names
    assert emulator.stats()["mutations_applied"] == 2


@pytest.mark.parametrize("kind", ["reset", "status", "truncated"])
def test_applied_keeps_the_change_the_client_saw_fail(emulator: Emulator, kind: str) -> None:
    client = emulator.client(max_retries=0)
    emulator.reset_stats()
    emulator.inject(kind, status=502, after_mutations=0, applied=True)  # type: ignore[arg-type]
    with pytest.raises(secfindings.SecFindingsError):
        _add(client, f"mf-applied-{kind}")
    assert f"mf-applied-{kind}" in _names(client)
    assert emulator.stats()["mutations_applied"] == 1


def test_bad_combinations_are_refused(emulator: Emulator) -> None:
    with pytest.raises(ValueError, match="after_mutations"):
        emulator.inject("reset", applied=True)
    with pytest.raises(ValueError, match="target='api'"):
        emulator.inject("idp_error", target="idp", after_mutations=0)
    emulator.inject("reset", after_mutations=5)
    emulator.clear_faults()
    _add(emulator.client(max_retries=0), "mf-after-clear")

"""A destination synced with other fields: the error names the fields as they were given
(``'analyst datasource_tags_values'``), not the analyst preset spelt out into a line of twenty
fields on one side and the user's text with ``id_int`` added on the other, which is what the
remediation guide's "By team: tags" reader got on adding the tags to an existing copy."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from secfindings.errors import ConfigurationError
from secfindings.testing import Emulator

pytest.importorskip("duckdb")


@pytest.fixture(scope="module")
def emu() -> Iterator[Emulator]:
    with Emulator(findings=30, seed=7) as emulator:
        yield emulator


def test_fields_of_another_sync_are_named_as_given(emu: Emulator, tmp_path: Path) -> None:
    plain, teams = str(tmp_path / "findings.duckdb"), str(tmp_path / "teams.duckdb")
    with emu.client() as client:
        client.sync(plain)
        client.sync(teams, fields="analyst datasource_tags_values")
        with pytest.raises(ConfigurationError) as caught:
            client.sync(plain, fields="analyst datasource_tags_values")
        assert str(caught.value) == (
            f"duckdb:///{plain} was synced with fields='analyst', not 'analyst datasource_tags_values': "
            "use the same fields, or a new destination"
        )
        with pytest.raises(ConfigurationError) as caught:
            client.sync(teams)
        assert str(caught.value) == (
            f"duckdb:///{teams} was synced with fields='analyst datasource_tags_values', not 'analyst': "
            "use the same fields, or a new destination"
        )
        assert client.sync(teams, fields="analyst datasource_tags_values").kind != "first"

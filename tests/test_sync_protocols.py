"""The sync types the clients it is given by Protocols (it cannot import the client's module:
``Client.sync`` imports it). mypy checks that the real clients satisfy them, and that the
check can fail: the async client is no sync client, nor the reverse."""

from __future__ import annotations

from pathlib import Path

import pytest

mypy_api = pytest.importorskip("mypy.api")

ROOT = Path(__file__).resolve().parents[1]
TYPED = ROOT / "tests" / "typed" / "sync_protocols.py"


def _mypy(*files: Path) -> tuple[str, int]:
    out, err, status = mypy_api.run(
        ["--config-file", str(ROOT / "pyproject.toml"), "--no-error-summary", *map(str, files)]
    )
    return out + err, status


def test_the_real_clients_satisfy_the_sync_protocols() -> None:
    out, status = _mypy(TYPED)
    assert status == 0, out


def test_a_client_of_the_other_kind_is_refused(tmp_path: Path) -> None:
    crossed = tmp_path / "crossed.py"
    crossed.write_text(
        TYPED.read_text()
        .replace("client: Client)", "client: SYNC)")
        .replace("client: AsyncClient)", "client: Client)")
        .replace("client: SYNC)", "client: AsyncClient)")
    )
    out, status = _mypy(crossed)
    assert status == 1, out
    errors = [line for line in out.splitlines() if ": error:" in line]
    assert len(errors) == 2, out
    assert all("Incompatible return value type" in line for line in errors), out

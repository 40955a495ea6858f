"""What ``secfindings.spark.register`` and ``read`` check in the calling process before Spark
runs anything (secfindings/spark/_checks.py), with a stand-in for the SparkSession (no JVM): a
local session whose Python workers cannot import secfindings (a virtualenv that is not
activated, so ``python3`` is another Python), and ``budget_required`` with a store that is down
while the schema comes from the package (nothing sent by the read). Both failed inside Spark's
first task before, as a traceback wrapped in ``PYTHON_DATA_SOURCE_ERROR``."""

from __future__ import annotations

import socket
import stat
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from secfindings.errors import TransportError
from secfindings.testing import Emulator

pytest.importorskip("pyspark")
pytest.importorskip("pyarrow")
sfs = pytest.importorskip("secfindings.spark")
from secfindings.spark import _checks  # noqa: E402


class _Context:
    def __init__(self, python: str, master: str) -> None:
        self.pythonExec = python
        self.master = master


class _Session:
    """What register() and read() touch of a SparkSession; reaching Spark itself is a failure
    of the check (the check comes first)."""

    def __init__(self, python: str = sys.executable, master: str = "local[2]") -> None:
        self.sparkContext = _Context(python, master)
        self.registered: list[Any] = []
        self.dataSource = self

    def register(self, source: Any) -> None:
        self.registered.append(source)

    @property
    def read(self) -> Any:
        raise AssertionError("Spark was reached: the check should have failed first")


@pytest.fixture(scope="module")
def emu() -> Iterator[Emulator]:
    with Emulator(findings=20) as emulator:
        yield emulator


@pytest.fixture
def no_secfindings(tmp_path: Path) -> str:
    """A 'python3' that cannot import secfindings, as another Python on the PATH answers."""
    script = tmp_path / "python3"
    script.write_text("#!/bin/sh\necho \"ModuleNotFoundError: No module named 'secfindings'\" >&2\nexit 1\n")
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    _checks._SEEN.clear()
    return str(script)


def test_register_refuses_workers_without_secfindings(no_secfindings: str) -> None:
    session = _Session(python=no_secfindings)
    with pytest.raises(ImportError) as caught:
        sfs.register(session)  # type: ignore[arg-type]
    message = str(caught.value)
    assert "\n" not in message
    assert no_secfindings in message
    assert "cannot import secfindings" in message
    assert f"PYSPARK_PYTHON={sys.executable}" in message
    assert session.registered == []


def test_register_names_a_worker_python_not_found() -> None:
    _checks._SEEN.clear()
    session = _Session(python="no-such-python-for-secfindings")
    with pytest.raises(ImportError, match="'no-such-python-for-secfindings' which is not found: start"):
        sfs.register(session)  # type: ignore[arg-type]


def test_register_takes_this_python_and_cluster_sessions(no_secfindings: str) -> None:
    here = _Session()
    sfs.register(here)  # type: ignore[arg-type]
    assert here.registered == [sfs.SecFindingsDataSource]
    # On a cluster the workers' Python is on other machines: not checked here.
    cluster = _Session(python=no_secfindings, master="spark://head:7077")
    sfs.register(cluster)  # type: ignore[arg-type]
    assert cluster.registered == [sfs.SecFindingsDataSource]


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_read_with_budget_required_and_the_store_down_is_one_line(emu: Emulator) -> None:
    """The package's schema: the read sends nothing, so only the check finds the store down."""
    url = f"redis://:s3cret@127.0.0.1:{_closed_port()}/0"
    token = emu.create_api_token()
    with pytest.raises(TransportError) as caught:
        sfs.read(
            _Session(),  # type: ignore[arg-type]
            api_token=token,
            base_url=emu.base_url,
            auth_url=emu.auth_url,
            schema="builtin",
            select="id id_int severity",
            budget=url,
            budget_required="true",
        )
    message = str(caught.value)
    assert message.startswith("secfindings data source: the shared request budget at redis://:***@")
    assert "budget_required=True" in message
    assert "\n" not in message
    assert "s3cret" not in message
    assert token not in message


def test_pages_per_request_over_the_clients_bound_is_the_options_error() -> None:
    """The option took 1 to 100 while the client takes 1 to 50: 80 passed the option's check and
    failed where the client was made (inside Spark's task with ``format().load()``)."""
    from secfindings.errors import ValidationError
    from secfindings.spark import _options

    environ = {"SECFINDINGS_API_TOKEN": "not-shown"}
    assert _options.parse({"pages_per_request": "50"}, environ).pages_per_request == 50
    with pytest.raises(ValidationError) as caught:
        _options.parse({"pages_per_request": "80"}, environ)
    assert str(caught.value) == (
        "secfindings data source: option 'pages_per_request' must be an integer from 1 to 50, got '80'"
    )

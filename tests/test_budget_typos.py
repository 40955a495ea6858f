"""A store's URL mistyped in ``budget=`` or ``$SECFINDINGS_BUDGET`` (``redis:host``,
``redis//host``, libpq's ``host=... password=...``) was taken as a relative folder: made in the
working directory with the text (a password too) in its name, shown in ``budget().location``,
and the budget silently not shared. It is a ConfigurationError of one line that does not show
the value, and on the command line an exit 2."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from secfindings.errors import ConfigurationError
from secfindings.testing import Emulator

TYPOS = [
    "redis:127.0.0.1:6379",
    "redis:/127.0.0.1:6379/0",
    "postgresql:user:s3cret@db/sec",
    "redis//:s3cret@budget.internal:6379/0",
    "host=db.internal user=sec password=s3cret",
]


@pytest.fixture(scope="module")
def emu() -> Iterator[Emulator]:
    with Emulator(findings=3) as emulator:
        yield emulator


@pytest.mark.parametrize("typo", TYPOS)
def test_a_mistyped_store_url_is_refused(
    emu: Emulator, typo: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("SECFINDINGS_BUDGET", raising=False)
    with pytest.raises(ConfigurationError) as caught:
        emu.client(budget=typo)
    message = str(caught.value)
    assert message.startswith("budget looks like a store's URL but is not one (")
    assert "s3cret" not in message
    assert "\n" not in message
    monkeypatch.setenv("SECFINDINGS_BUDGET", typo)
    with pytest.raises(ConfigurationError, match=r"^\$SECFINDINGS_BUDGET looks like a store's URL"):
        emu.client()
    assert list(tmp_path.iterdir()) == []  # no folder made of it


def test_folders_and_urls_are_still_taken(
    emu: Emulator, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("SECFINDINGS_BUDGET", raising=False)
    for folder in ("budgets", str(tmp_path / "abs"), "with=sign"):
        with emu.client(budget=folder, rate_limit=(10, 60.0)) as client:
            client.finding(1)
            assert client.budget().store == "file"
    with pytest.raises(ConfigurationError, match="got a mysql:// URL"):
        emu.client(budget="mysql://u@h/db")  # the core's own check, as before


def test_the_command_line_exits_2_with_one_line(emu: Emulator, tmp_path: Path) -> None:
    env = {
        **os.environ,
        "SECFINDINGS_API_TOKEN": emu.create_api_token(),
        "SECFINDINGS_BASE_URL": emu.base_url,
        "SECFINDINGS_AUTH_URL": emu.auth_url,
        "SECFINDINGS_BUDGET": "redis:127.0.0.1:6379",
    }
    done = subprocess.run(
        [sys.executable, "-m", "secfindings", "finding", "1"],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=120,
        check=False,
    )
    assert done.returncode == 2, done.stderr
    assert done.stderr.splitlines() == [
        "error: $SECFINDINGS_BUDGET looks like a store's URL but is not one (redis: without // after "
        "it); give redis://[:password@]host:6379/0, postgresql://user[:password]@host:5432/db, or a folder"
    ]
    assert list(tmp_path.iterdir()) == []


def test_another_scheme_in_the_variable_names_the_variable(emu: Emulator, tmp_path: Path) -> None:
    """The core's message spoke of the argument ('budget must be True, False, a folder, ...'),
    which a user of the command line never wrote."""
    env = {
        **os.environ,
        "SECFINDINGS_API_TOKEN": emu.create_api_token(),
        "SECFINDINGS_BASE_URL": emu.base_url,
        "SECFINDINGS_AUTH_URL": emu.auth_url,
        "SECFINDINGS_BUDGET": "mysql://sec:s3cret@db.internal/sec",
    }
    done = subprocess.run(
        [sys.executable, "-m", "secfindings", "finding", "1"],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=120,
        check=False,
    )
    assert done.returncode == 2, done.stderr
    assert done.stderr.splitlines() == [
        "error: $SECFINDINGS_BUDGET must be a folder, or a redis:// or postgresql:// URL; got a mysql:// URL"
    ]

"""``secfindings cache clear [--url URL]`` and ``secfindings.cache.clear()`` (issue 31): a
remembered capability probe (24 h) and a cached schema can be forgotten, for one server or all,
and the next call asks the server again. Only this package's files go: a link is removed, never
what it points to; a folder or a file of another name stays. Each test has a cache folder of
its own."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

import secfindings.cache
from secfindings import _plan
from secfindings.cli import main
from secfindings.errors import ValidationError
from secfindings.testing import Emulator


@pytest.fixture
def folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    where = tmp_path / "cache"
    monkeypatch.setenv("SECFINDINGS_SCHEMA_CACHE", str(where))
    secfindings.cache.clear()  # and this process's memory of every server
    return where


@pytest.fixture(scope="module")
def emu() -> Iterator[Emulator]:
    with Emulator(findings=50, seed=7) as e:
        yield e


def probes(emu: Emulator) -> int:
    """Requests of the walk plan's probes (findings_view asked with aliases, not a page)."""
    return sum(1 for r in emu.request_log() if r["operation_name"] != "findings_view")


def learn(emu: Emulator) -> int:
    """A client learns the server's schema and its id-range capability; returns the requests."""
    emu.clear_request_log()
    with emu.client(schema="live") as client:
        assert _plan.capable(client, _plan.ID_RANGE)
    return len(emu.request_log())


def test_a_remembered_probe_is_forgotten_for_one_server_and_asked_again(emu: Emulator, folder: Path) -> None:
    first = learn(emu)
    assert first >= 2  # introspection and the probe
    assert learn(emu) == 0  # both remembered (memory and disk)
    names = sorted(p.name for p in folder.iterdir())
    assert [n.split(".", 1)[1] for n in names] == ["json", "probes.json"]
    done = secfindings.cache.clear(emu.base_url)
    assert (done.schemas, done.probes) == (1, 1)
    assert str(done) == f"removed 1 schema, 1 probe file for {emu.base_url} from {folder}"
    assert list(folder.iterdir()) == []
    assert learn(emu) == first  # asked again, as the first time
    # Another server's clear leaves this one's alone.
    other = secfindings.cache.clear("http://127.0.0.1:1/api/v1")
    assert str(other) == f"nothing cached for http://127.0.0.1:1/api/v1 in {folder}"
    assert len(list(folder.iterdir())) == 2


def test_the_command_clears_every_server_in_one_line(emu: Emulator, folder: Path) -> None:
    learn(emu)
    (folder / ".schema-killed.tmp").write_text("half a write", encoding="utf-8")
    result = CliRunner().invoke(main, ["cache", "clear"])
    assert result.exit_code == 0, result.output
    assert result.output == (
        f"removed 1 schema, 1 probe file, 1 leftover temporary file for every server from {folder}\n"
    )
    assert list(folder.iterdir()) == []
    again = CliRunner().invoke(main, ["cache", "clear"])
    assert again.output == f"nothing cached for every server in {folder}\n"
    assert learn(emu) >= 2  # this process forgot too: asked again
    one = CliRunner().invoke(main, ["cache", "clear", "--url", emu.base_url + "/"])
    assert one.output == f"removed 1 schema, 1 probe file for {emu.base_url}/ from {folder}\n"


def test_a_profile_clears_its_own_server_not_every_one(
    emu: Emulator, folder: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`secfindings cache clear -p NAME` (every command takes -p) forgot every server's cache;
    now the profile's server alone, as --url with its base URL."""
    config = tmp_path / "profiles.toml"
    config.write_text(f'[profiles.a]\nbase_url = "{emu.base_url}"\nauth_url = "{emu.auth_url}"\n')
    monkeypatch.setenv("SECFINDINGS_CONFIG", str(config))
    with Emulator(findings=5, seed=1) as other:
        learn(emu)
        learn(other)
        assert len(list(folder.iterdir())) == 4
        for args in (["cache", "clear", "-p", "a"], ["-p", "a", "cache", "clear"]):
            result = CliRunner().invoke(main, args)
            assert result.exit_code == 0, result.output
            assert result.output.startswith(("removed 1 schema, 1 probe file for ", "nothing cached for "))
            assert emu.base_url in result.output
            assert len(list(folder.iterdir())) == 2  # the other server's schema and probes stay
        assert learn(other) == 0  # still remembered
    unknown = CliRunner().invoke(main, ["cache", "clear", "-p", "nope"])
    assert unknown.exit_code == 2
    assert unknown.output.count("\n") == 1


@pytest.mark.reliability_input
def test_only_this_packages_files_go_and_a_link_is_removed_not_its_target(
    emu: Emulator, folder: Path, tmp_path: Path
) -> None:
    learn(emu)
    outside = tmp_path / "precious.txt"
    outside.write_text("keep me", encoding="utf-8")
    link = folder / ("a" * 32 + ".json")
    os.symlink(outside, link)
    (folder / ("b" * 32 + ".probes.json")).mkdir()  # a folder under our name: not ours to remove
    (folder / "notes.txt").write_text("someone's", encoding="utf-8")
    done = secfindings.cache.clear()
    assert done.schemas == 2  # the emulator's and the link
    assert not link.is_symlink()
    assert outside.read_text(encoding="utf-8") == "keep me"
    assert sorted(p.name for p in folder.iterdir()) == ["b" * 32 + ".probes.json", "notes.txt"]


@pytest.mark.reliability_input
@pytest.mark.parametrize("url", ["", "nope", "ftp://host/api/v1", "https:// space"])
def test_a_url_that_is_no_base_url_is_exit_2_in_one_line(url: str, folder: Path) -> None:
    with pytest.raises(ValidationError, match="url must be a base URL"):
        secfindings.cache.clear(url)
    result = CliRunner().invoke(main, ["cache", "clear", "--url", url])
    assert result.exit_code == 2
    assert result.output.startswith("error: url must be a base URL")
    assert result.output.count("\n") == 1


def test_with_the_disk_cache_off_it_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SECFINDINGS_SCHEMA_CACHE", "off")
    result = CliRunner().invoke(main, ["cache", "clear"])
    assert result.exit_code == 0
    assert (
        result.output
        == "the disk cache is off (SECFINDINGS_SCHEMA_CACHE): nothing removed for every server\n"
    )

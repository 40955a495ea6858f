"""--profiles / --all-profiles: the command once per tenant, with a timeout per tenant; one tenant
that hangs and one that fails are reported while the other finishes, and the exit code says so."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from secfindings.cli import main
from secfindings.testing import Emulator

QUERY = "{ findings_view(first: 1) { total_count } }"
#: A tenant's timeout counts from when its process is ready (a slow interpreter start on a loaded
#: machine is not a hang): 4 s is long for a healthy tenant's work (0.3-0.9 s measured at load 7 on 2
#: cores: the schema, the token, one query); the hanging tenant's answer is held 20 s.
TIMEOUT = "4"


@pytest.fixture(scope="module")
def three() -> tuple[Emulator, Emulator, Emulator]:
    with (
        Emulator(findings=9, seed=1) as ok,
        Emulator(findings=8, seed=2) as hangs,
        Emulator(findings=7, seed=3) as fails,
    ):
        yield ok, hangs, fails


@pytest.fixture
def tenants(
    three: tuple[Emulator, Emulator, Emulator], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> tuple[Emulator, Emulator, Emulator]:
    monkeypatch.setenv("SECFINDINGS_CONFIG", str(tmp_path / "profiles.toml"))
    for name in (
        "SECFINDINGS_API_TOKEN",
        "SECFINDINGS_BASE_URL",
        "SECFINDINGS_AUTH_URL",
        "SECFINDINGS_PROFILE",
    ):
        monkeypatch.delenv(name, raising=False)
    for name, emu in zip(("ok", "hangs", "fails"), three, strict=True):
        monkeypatch.setenv(f"TOKEN_{name.upper()}", emu.create_api_token())
        result = CliRunner().invoke(
            main,
            [
                "profile",
                "add",
                name,
                "--base-url",
                emu.base_url,
                "--auth-url",
                emu.auth_url,
                "--token-from",
                f"env:TOKEN_{name.upper()}",
            ],
        )
        assert result.exit_code == 0, result.output
    for emu in three:
        emu.clear_faults()
    return three


def test_all_succeed(tenants: tuple[Emulator, Emulator, Emulator], tmp_path: Path) -> None:
    (tmp_path / "q.graphql").write_text(QUERY)
    result = CliRunner().invoke(main, ["query", str(tmp_path / "q.graphql"), "--all-profiles"])
    assert result.exit_code == 0, result.output
    records = [json.loads(line) for line in result.stdout.splitlines()]
    assert {r["tenant"]: r["data"]["findings_view"]["total_count"] for r in records} == {
        "fails": 7,
        "hangs": 8,
        "ok": 9,
    }
    assert "3 tenants: 3 succeeded" in result.stderr


def test_one_hangs_one_fails(tenants: tuple[Emulator, Emulator, Emulator], tmp_path: Path) -> None:
    _ok, hangs, fails = tenants
    hangs.inject("delay", 5, delay=20.0)
    fails.inject("status", 20, status=400)
    (tmp_path / "q.graphql").write_text(QUERY)
    result = CliRunner().invoke(
        main,
        ["query", str(tmp_path / "q.graphql"), "--profiles", "ok,hangs,fails", "--tenant-timeout", TIMEOUT],
    )
    hangs.clear_faults()
    assert result.exit_code == 1
    records = {r["tenant"]: r for r in map(json.loads, result.stdout.splitlines())}
    assert records["ok"]["status"] == "succeeded"
    assert records["ok"]["data"]["findings_view"]["total_count"] == 9
    assert records["hangs"]["status"] == "timed out"
    assert records["fails"]["status"] == "failed"
    assert records["fails"]["exit_code"] == 1
    assert "HTTP 400" in records["fails"]["error"]
    assert "tenant hangs: timed out after" in result.stderr
    assert "3 tenants: 1 succeeded, 1 failed, 1 timed out" in result.stderr


def test_export_writes_a_file_per_tenant(
    tenants: tuple[Emulator, Emulator, Emulator], tmp_path: Path
) -> None:
    out = tmp_path / "findings.jsonl"
    result = CliRunner().invoke(
        main, ["export", "--out", str(out), "--profiles", "ok,fails", "--no-progress", "--fields", "id_int"]
    )
    assert result.exit_code == 0, result.output
    assert len((tmp_path / "findings.ok.jsonl").read_text().splitlines()) == 9
    assert len((tmp_path / "findings.fails.jsonl").read_text().splitlines()) == 7
    rows = CliRunner().invoke(main, ["export", "--out", "-", "--profiles", "ok,fails", "--limit", "2"])
    assert sorted(json.loads(line)["tenant"] for line in rows.stdout.splitlines()) == [
        "fails",
        "fails",
        "ok",
        "ok",
    ]


def test_gate_exit_code_and_jq_on_records(tenants: tuple[Emulator, Emulator, Emulator]) -> None:
    result = CliRunner().invoke(
        main,
        ["gate", "--profiles", "ok,fails", "--max", "critical=1000", "--format", "json", "--jq", ".tenant"],
    )
    assert result.exit_code == 0, result.output
    assert sorted(result.stdout.split()) == ["fails", "ok"]


def test_unknown_profile_is_a_usage_error(tenants: tuple[Emulator, Emulator, Emulator]) -> None:
    result = CliRunner().invoke(main, ["gate", "--profiles", "ok,okk"])
    assert result.exit_code == 2
    assert "did you mean 'ok'" in result.output


def test_sync_per_tenant_and_a_query_on_stdin(
    tenants: tuple[Emulator, Emulator, Emulator], tmp_path: Path
) -> None:
    pytest.importorskip("duckdb")
    result = CliRunner().invoke(
        main, ["sync", str(tmp_path / "copy-{tenant}.duckdb"), "--profiles", "ok,fails", "--no-progress"]
    )
    assert result.exit_code == 0, result.output
    assert (tmp_path / "copy-ok.duckdb").exists()
    assert (tmp_path / "copy-fails.duckdb").exists()
    assert sorted(line.split()[0] for line in result.stdout.splitlines()) == ["[fails]", "[ok]"]
    piped = CliRunner().invoke(main, ["query", "-", "--profiles", "ok,fails"], input=QUERY)
    assert piped.exit_code == 0, piped.output
    counts = {
        r["tenant"]: r["data"]["findings_view"]["total_count"]
        for r in map(json.loads, piped.stdout.splitlines())
    }
    assert counts == {"ok": 9, "fails": 7}

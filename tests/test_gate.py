"""``secfindings gate`` and ``secfindings.gate()``: table-driven over policies and three snapshots
(emulators of different seeds and sizes) with exact exit codes; the expected counts come from an
independent read of the same data (Arrow columns, counted here). JUnit output is valid XML with
one failure per exceeded limit; ``--new-only`` ignores every finding of the baseline; usage,
authentication and API failures keep their exit codes."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from click.testing import CliRunner

import secfindings
from secfindings.cli import main
from secfindings.gate import parse_max
from secfindings.testing import Emulator

NAMES = {5: "critical", 4: "high", 3: "medium", 2: "low", 1: "info"}
SNAPSHOTS = {"small": (120, 1), "medium": (300, 7), "large": (600, 3)}


class Snapshot:
    def __init__(self, emu: Emulator) -> None:
        self.emu = emu
        self.env = {
            "SECFINDINGS_API_TOKEN": emu.create_api_token(),
            "SECFINDINGS_BASE_URL": emu.base_url,
            "SECFINDINGS_AUTH_URL": emu.auth_url,
        }
        # The truth, read another way: every finding as Arrow columns, counted here.
        with emu.client() as c:
            t = c.findings_view(fields="id_int severity actual_status { category }").to_arrow().to_pylist()
        self.open = Counter(NAMES[r["severity"]] for r in t if r["actual_status.category"] == "OPEN")
        self.all = Counter(NAMES[r["severity"]] for r in t)
        self.ids = {r["id_int"] for r in t}


@pytest.fixture(scope="module", params=sorted(SNAPSHOTS))
def snap(request: pytest.FixtureRequest) -> Iterator[Snapshot]:
    findings, seed = SNAPSHOTS[request.param]
    with Emulator(findings=findings, seed=seed) as emu:
        yield Snapshot(emu)


def gate(env: dict[str, str], *args: str) -> Any:
    return CliRunner().invoke(main, ["gate", *args], env={**env, "GITHUB_STEP_SUMMARY": ""})


def over(counts: Counter[str], limits: dict[str, int]) -> int:
    """The exit code a policy must give: 4 when any count is over its limit."""
    return 4 if any(counts[s] > n for s, n in limits.items()) else 0


# Each policy: (name, arguments for the command given the counts, the limits it sets, which counts
# it is judged on). Limits at the exact count pass; one below fails.
Policy = tuple[str, Callable[[Counter[str]], list[str]], Callable[[Counter[str]], dict[str, int]], str]
ALL5 = ("critical", "high", "medium", "low", "info")
POLICIES: list[Policy] = [
    ("no critical", lambda c: ["--max", "critical=0"], lambda c: {"critical": 0}, "open"),
    (
        "every count exactly",
        lambda c: ["--max", ",".join(f"{s}={c[s]}" for s in ALL5)],
        lambda c: {s: c[s] for s in ALL5},
        "open",
    ),
    (
        "critical one below",
        lambda c: ["--max", f"critical={c['critical'] - 1}"],
        lambda c: {"critical": c["critical"] - 1},
        "open",
    ),
    ("high exactly", lambda c: ["--max", f"high={c['high']}"], lambda c: {"high": c["high"]}, "open"),
    (
        "high one below",
        lambda c: ["--max", f"high={c['high'] - 1}"],
        lambda c: {"high": c["high"] - 1},
        "open",
    ),
    ("no medium nor low", lambda c: ["--max", "medium=0,low=0"], lambda c: {"medium": 0, "low": 0}, "open"),
    ("info exactly", lambda c: ["--max", f"info={c['info']}"], lambda c: {"info": c["info"]}, "open"),
    (
        "informational one below, critical loose",
        lambda c: ["--max", f"informational={c['info'] - 1},critical=100000"],
        lambda c: {"info": c["info"] - 1, "critical": 100000},
        "open",
    ),
    ("no --max: nothing allowed", lambda c: [], lambda c: dict.fromkeys(ALL5, 0), "open"),
    (
        "all loose",
        lambda c: ["--max", ",".join(f"{s}=100000" for s in ALL5)],
        lambda c: dict.fromkeys(ALL5, 100000),
        "open",
    ),
    (
        "names in any case and spaces",
        lambda c: ["--max", f" Critical = {c['critical']} , HIGH={c['high']}"],
        lambda c: {"critical": c["critical"], "high": c["high"]},
        "open",
    ),
    (
        "a filter that leaves the severe ones out",
        lambda c: [
            "--max",
            "critical=0,high=0",
            "--filter",
            '{"field":"severity","condition":"in","value":["1","2"]}',
        ],
        lambda c: {},
        "open",
    ),
    (
        "a filter of critical ones, one below",
        lambda c: [
            "--max",
            f"critical={c['critical'] - 1}",
            "--filter",
            '{"field":"severity","condition":"in","value":["5"]}',
        ],
        lambda c: {"critical": c["critical"] - 1},
        "open",
    ),
    (
        "closed ones count with --all-statuses",
        lambda c: ["--all-statuses", "--max", f"critical={c['critical']},high={c['high']}"],
        lambda c: {"critical": c["critical"], "high": c["high"]},
        "all",
    ),
]


@pytest.mark.parametrize("policy", POLICIES, ids=[p[0] for p in POLICIES])
def test_policies_over_snapshots_exit_exactly(snap, policy):
    _name, args, limits, basis = policy
    counts = snap.open if basis == "open" else snap.all
    # "--all-statuses" policies are written with the open counts; judged on all of them.
    res = gate(snap.env, *args(snap.open))
    assert res.exit_code == over(counts, limits(snap.open)), res.output
    assert res.output.startswith("secfindings gate: " + ("passed" if res.exit_code == 0 else "FAILED"))
    if basis == "open" and "--filter" not in args(snap.open):
        for sev in ALL5:  # the summary shows the counts read independently
            assert any(line.split()[:2] == [sev, str(snap.open[sev])] for line in res.output.splitlines())


def test_the_snapshots_differ_so_the_table_means_something():
    # The policies are judged against counts that are not all the same across the snapshots.
    assert len(SNAPSHOTS) == 3
    assert len({seed for _, seed in SNAPSHOTS.values()}) == 3


def test_junit_is_valid_xml_with_one_failure_per_exceeded_limit(snap, tmp_path):
    c = snap.open
    spec = f"critical={c['critical'] - 1},high={c['high'] - 1},medium={c['medium']},low=100000"
    out = tmp_path / "gate.xml"
    res = gate(snap.env, "--max", spec, "--format", "junit", "--out", str(out))
    assert res.exit_code == 4
    assert res.output.startswith("secfindings gate: FAILED (2 of 4 limits exceeded)")  # text on stdout
    root = ET.fromstring(out.read_text())  # valid XML
    assert root.tag == "testsuites"
    (suite,) = root.findall("testsuite")
    cases = suite.findall("testcase")
    assert [case.get("name") for case in cases] == [
        f"critical findings <= {c['critical'] - 1}",
        f"high findings <= {c['high'] - 1}",
        f"medium findings <= {c['medium']}",
        "low findings <= 100000",
    ]
    failures = [case.find("failure") for case in cases]
    assert [f is not None for f in failures] == [True, True, False, False]
    assert suite.get("tests") == "4"
    assert suite.get("failures") == "2"
    assert (
        failures[0].get("message")
        == f"{c['critical']} critical findings, at most {c['critical'] - 1} allowed"
    )
    assert len(failures[0].text.splitlines()) == c["critical"]  # each counted finding listed


def test_new_only_ignores_every_finding_of_the_baseline(tmp_path):
    with Emulator(findings=200, seed=5) as emu:
        env = {
            "SECFINDINGS_API_TOKEN": emu.create_api_token(),
            "SECFINDINGS_BASE_URL": emu.base_url,
            "SECFINDINGS_AUTH_URL": emu.auth_url,
        }
        base = tmp_path / "base.parquet"
        with emu.client() as c:
            c.findings_view().write_parquet(base)
        # Every finding of the baseline, open ones of every severity among them, is ignored.
        res = gate(env, "--baseline", str(base), "--new-only", "--format", "json")
        assert res.exit_code == 0, res.output
        got = json.loads(res.output)
        assert got["counted"] == 0
        assert got["ignored_by_baseline"] > 0
        # Findings the baseline does not have count; edits to findings it has do not.
        new = []
        for sev in (5, 5, 4):
            fid, _ = emu.create_finding(severity=sev)
            emu.update_finding(fid, status="OPEN")
            new.append(fid)
        emu.update_finding(1, severity=5, status="OPEN")  # in the baseline: still ignored
        res = gate(
            env, "--baseline", str(base), "--new-only", "--max", "critical=1,high=1", "--format", "json"
        )
        assert res.exit_code == 4, res.output
        got = json.loads(res.output)
        assert sorted(f["id_int"] for f in got["findings"]) == sorted(new)
        assert got["counts"] == {"critical": 2, "high": 1, "medium": 0, "low": 0, "info": 0}
        # A baseline of JSON lines keyed by the global id works the same.
        jsonl = tmp_path / "base.jsonl"
        with emu.client() as c:
            c.findings_view(fields="id title").write_jsonl(jsonl)
        res = gate(env, "--baseline", str(jsonl), "--new-only", "--format", "json")
        assert json.loads(res.output)["counted"] == 0
        # Without --new-only the baseline only reports; everything counts.
        res = gate(env, "--baseline", str(base), "--max", "critical=1", "--format", "json")
        assert json.loads(res.output)["counted"] > 3


def test_outputs_markdown_sarif_json_and_the_step_summary(snap, tmp_path):
    summary = tmp_path / "summary.md"
    summary.write_text("earlier step\n")
    env = {**snap.env, "GITHUB_STEP_SUMMARY": str(summary)}
    res = CliRunner().invoke(main, ["gate", "--max", "critical=0", "--format", "markdown"], env=env)
    assert res.exit_code == over(snap.open, {"critical": 0})
    text = summary.read_text()
    assert text.startswith("earlier step\n### secfindings gate: ")  # appended, not replaced
    assert f"| critical | {snap.open['critical']} | 0 |" in text
    assert res.output.startswith("### secfindings gate")
    sarif = tmp_path / "gate.sarif"
    res = gate(snap.env, "--max", "critical=0", "--format", "sarif", "--out", str(sarif))
    log = json.loads(sarif.read_text())
    assert len(log["runs"][0]["results"]) == sum(snap.open.values())
    schema = json.loads((Path(__file__).parent / "data" / "sarif-schema-2.1.0.json").read_text())
    assert not list(jsonschema.Draft4Validator(schema).iter_errors(log))
    res = gate(snap.env, "--max", "high=0", "--format", "json")
    got = json.loads(res.output)
    assert got["counts"] == {s: snap.open[s] for s in ALL5}
    assert got["thresholds"] == [
        {"severity": "high", "max": 0, "count": snap.open["high"], "exceeded": snap.open["high"] > 0}
    ]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--max", "critcal=0"], "unknown severity 'critcal': one of critical, high, medium, low, info"),
        (["--max", "critical=-1"], "whole number >= 0"),
        (["--max", "critical=1.5"], "whole number >= 0"),
        (["--max", "critical"], "is not SEVERITY=COUNT"),
        (["--max", "critical=0,critical=1"], "critical is given twice"),
        (["--max", ","], "no limit given"),
        (["--new-only"], "--new-only needs --baseline"),
        (["--baseline", "/nonexistent/base.parquet", "--new-only"], "no such snapshot"),
        (["--filter", "{nope"], "not JSON"),
        (["--filter", '{"field":"severity","condition":"equal","value":"5"}'], "did you mean 'equals'"),
        (["--format", "xml"], "'xml' is not one of"),
    ],
)
def test_usage_errors_exit_2_and_say_what_is_accepted(emulator, args, message):
    env = {
        "SECFINDINGS_API_TOKEN": emulator.create_api_token(),
        "SECFINDINGS_BASE_URL": emulator.base_url,
        "SECFINDINGS_AUTH_URL": emulator.auth_url,
    }
    res = gate(env, *args)
    assert res.exit_code == 2, res.output
    assert message in res.output


def test_authentication_and_api_failures_keep_their_exit_codes(emulator):
    token = emulator.create_api_token()
    env = {
        "SECFINDINGS_API_TOKEN": token,
        "SECFINDINGS_BASE_URL": emulator.base_url,
        "SECFINDINGS_AUTH_URL": emulator.auth_url,
    }
    emulator.revoke_api_token(token)
    res = gate(env, "--max", "critical=0")
    assert res.exit_code == 3, res.output
    assert token not in res.output
    env["SECFINDINGS_API_TOKEN"] = emulator.create_api_token()
    emulator.inject("status", 50, status=503)
    res = gate(env, "--max", "critical=0")
    assert res.exit_code == 1, res.output


def test_the_python_api_returns_a_result(client, tmp_path):
    result = secfindings.gate(
        client, max={"critical": 0, "high": 1000}, filters=secfindings.field("severity").in_(["5"])
    )
    assert isinstance(result, secfindings.GateResult)
    assert result.exit_code == (4 if result.counts["critical"] else 0)
    assert result.counts["high"] == 0  # the filter kept critical ones only
    assert [t.severity for t in result.thresholds] == ["critical", "high"]
    assert all(f["severity"] == 5 and f["actual_status"]["category"] == "OPEN" for f in result.findings)
    assert parse_max(None) == dict.fromkeys(ALL5, 0)
    with pytest.raises(secfindings.ValidationError, match="new_only needs a baseline"):
        secfindings.gate(client, new_only=True)
    with pytest.raises(secfindings.ValidationError, match="unknown severity"):
        secfindings.gate(client, max={"urgent": 0})


def test_an_async_client_is_refused_with_what_to_do(async_client):
    with pytest.raises(secfindings.ValidationError, match=r"asyncio\.to_thread"):
        secfindings.gate(async_client, max="critical=0")


def test_one_limit_is_named_in_the_singular(client):
    result = secfindings.gate(client, max="critical=100000")
    assert result.to_text().startswith("secfindings gate: passed (1 limit held)")

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
from tests.servers.findings import findings_server

import secfindings
from secfindings.cli import main
from secfindings.gate import parse_max
from secfindings.testing import PROFILES, Emulator

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
        # The truth, read another way: every finding's status as Arrow columns, and its severity
        # looked up by id on the Finding type (which both profiles serve), counted here.
        with emu.client() as c:
            t = c.findings_view(fields="id_int actual_status { category }").to_arrow().to_pylist()
            found = c.findings([r["id_int"] for r in t], fields="id_int finding_score { severity }")
        severity = {f.id_int: f.finding_score.severity for f in found if f is not None}
        assert len(severity) == len(t)
        self.open = Counter(NAMES[severity[r["id_int"]]] for r in t if r["actual_status.category"] == "OPEN")
        self.all = Counter(NAMES[severity[r["id_int"]]] for r in t)
        self.ids = {r["id_int"] for r in t}


@pytest.fixture(scope="module", params=[(n, p) for n in sorted(SNAPSHOTS) for p in PROFILES], ids="-".join)
def snap(request: pytest.FixtureRequest) -> Iterator[Snapshot]:
    name, profile = request.param
    findings, seed = SNAPSHOTS[name]
    with Emulator(findings=findings, seed=seed, profile=profile) as emu:
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
    # The policies are judged against counts that differ from one snapshot to the next.
    counts = []
    for findings, seed in SNAPSHOTS.values():
        with Emulator(findings=findings, seed=seed) as emu:
            counts.append(tuple(sorted(Snapshot(emu).open.items())))
    assert len(set(counts)) == 3, counts


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


def test_new_only_ignores_every_finding_of_the_baseline(profile, tmp_path):
    with Emulator(findings=200, seed=5, profile=profile) as emu:
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
        assert got["counts"] == {"critical": 2, "high": 1, "medium": 0, "low": 0, "info": 0, "unknown": 0}
        # A baseline of JSON lines keyed by the global id works the same.
        jsonl = tmp_path / "base.jsonl"
        with emu.client() as c:
            c.findings_view(fields="id title").write_jsonl(jsonl)
        res = gate(env, "--baseline", str(jsonl), "--new-only", "--format", "json")
        assert json.loads(res.output)["counted"] == 0
        # --baseline implies --new-only (it was read for nothing without it, and said nothing).
        res = gate(env, "--baseline", str(base), "--max", "critical=1,high=1", "--format", "json")
        assert res.exit_code == 4, res.output
        assert sorted(f["id_int"] for f in json.loads(res.output)["findings"]) == sorted(new)
        assert "implies --new-only" in " ".join(CliRunner().invoke(main, ["gate", "--help"]).output.split())
        with emu.client() as c:
            with pytest.raises(secfindings.ValidationError, match="drop new_only=False"):
                secfindings.gate(c, baseline=base, new_only=False)
            assert secfindings.gate(c, baseline=base, max="critical=1,high=1").new_only


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
    assert got["counts"] == {**{s: snap.open[s] for s in ALL5}, "unknown": 0}
    assert got["thresholds"] == [
        {"severity": "high", "max": 0, "count": snap.open["high"], "exceeded": snap.open["high"] > 0}
    ]


@pytest.mark.reliability_input
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
        (["--max", "unknwn=0"], "unknown severity 'unknwn'"),
        (["--severity", "critcal"], "did you mean 'critical'"),
        (["--status", "open", "--all-statuses"], "contradict"),
        (["--filter", "[" * 50_000 + "]" * 50_000], "nests too deeply"),
        (
            ["--filter", '{"field":"severity","condition":"in","value":["critical"]}'],
            "did you mean '5' (critical)",
        ),
        (["--filter", '{"field":"severity","condition":"equals","value":"High"}'], "did you mean '4' (high)"),
        (["--filter", '{"field":"severity","condition":"in","value":["0"]}'], "'0' is not a severity"),
        (
            ["--filter", '{"field":"sla_status","condition":"in","value":["overdue"]}'],
            "did you mean 'OVERDUE'",
        ),
        (["--filter", '{"field":"cloud_provider","condition":"in","value":["aws"]}'], "did you mean 'AWS'"),
    ],
)
def test_usage_errors_exit_2_and_say_what_is_accepted(profiled_emulator, args, message):
    emulator = profiled_emulator
    env = {
        "SECFINDINGS_API_TOKEN": emulator.create_api_token(),
        "SECFINDINGS_BASE_URL": emulator.base_url,
        "SECFINDINGS_AUTH_URL": emulator.auth_url,
    }
    res = gate(env, *args)
    assert res.exit_code == 2, res.output
    assert message in res.output
    assert "Traceback" not in res.output
    # One line says what is wrong (after click's usage lines).
    assert len([line for line in res.output.splitlines() if line.lower().startswith("error")]) == 1


def test_authentication_and_api_failures_keep_their_exit_codes(profiled_emulator):
    emulator = profiled_emulator
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


def test_the_python_api_returns_a_result(profiled_client, tmp_path):
    client = profiled_client
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


def test_one_limit_is_named_in_the_singular(profiled_client):
    client = profiled_client
    result = secfindings.gate(client, max="critical=100000")
    assert result.to_text().startswith("secfindings gate: passed (1 limit held)")
    one = secfindings.gate(
        client, filters={"field": "id", "condition": "in", "value": [result.findings[0]["id_int"]]}
    )
    assert "counted 1 open finding of filter" in one.to_text()
    (t,) = one.exceeded
    assert t.message == f"1 {t.severity} finding, at most 0 allowed"


# ------------------------------------------------------------------ findings the gate cannot place


def node(i: int, **kw: Any) -> dict[str, Any]:
    return {"id": f"f{i}", "id_int": i, "title": f"finding {i}", "actual_status": {"category": "OPEN"}, **kw}


@pytest.mark.reliability_hostile
@pytest.mark.parametrize("severity", [None, 0, 6, 99, "high", True, 4.5])
def test_a_finding_of_no_severity_fails_the_gate(severity):
    """No --max means no finding may be counted: one whose severity is null or not 1..5 is
    counted as unknown and fails the gate (it passed, exit 0, before)."""
    with findings_server([node(1, severity=severity, score=5.0)]) as (_, env):
        res = gate(env, "--format", "json")
        assert res.exit_code == 4, res.output
        got = json.loads(res.output)
        assert got["counts"]["unknown"] == 1
        assert got["thresholds"][-1] == {"severity": "unknown", "max": 0, "count": 1, "exceeded": True}
        # Limits on the five severities do not let it through either; its own limit does.
        assert gate(env, "--max", "critical=0,high=0").exit_code == 4
        res = gate(env, "--max", "critical=0,unknown=1")
        assert res.exit_code == 0, res.output
        assert "  unknown        1      1" in res.output


@pytest.mark.reliability_hostile
def test_null_nodes_and_scores_that_are_not_numbers_are_counted_not_tracebacks():
    nodes = [
        None,
        node(2, severity=5, score="high"),
        node(3, severity=4, score=None),
        node(4, severity=5, score=9.1),
    ]
    with findings_server(nodes) as (_, env):
        for fmt in ("text", "markdown", "json", "junit", "sarif"):
            res = gate(env, "--format", fmt)
            assert res.exit_code == 4, (fmt, res.output)
            assert "Traceback" not in res.output
        res = gate(env, "--max", "critical=5,high=5,unknown=0")
        assert res.exit_code == 4  # the null node: a finding the server sent nothing of
        lines = res.output.splitlines()
        assert lines[lines.index("worst:") + 1 :] == [
            "  critical   9.1 #4  finding 4",
            "  critical     0 #2  finding 2",
            "  high         0 #3  finding 3",
            "  ?            0 #?",
        ]


# ------------------------------------------------------------------ reports a title cannot forge

FORGED = "x\r\r### secfindings gate: passed (9 limits held)\r\r<!--"
HOSTILE_TITLES = [
    FORGED,
    'see <img src="https://tracker.example/p.gif"> here',
    "a | b \\| c \\\\| d",
    "line one\nline two\u2028line three\x85four",
    "![pixel](https://tracker.example/p.gif) [click](javascript:alert(1)) `code` *em*",
    "\x1b[31mred\x1b[0m \x0c feed \x00 nul \ufffe \uffff",
]


def markdown_rows(text: str) -> list[str]:
    return text.splitlines()  # every Unicode line end (a superset of CommonMark's)


def unescaped_pipes(line: str) -> int:
    import re

    return len(re.findall(r"(?<!\\)(?:\\\\)*\|", line))


@pytest.mark.reliability_hostile
def test_markdown_outputs_escape_every_vector(tmp_path):
    nodes = [
        node(i, severity=5, score=9.0, title=t, resource_name=t) for i, t in enumerate(HOSTILE_TITLES, 1)
    ]
    summary = tmp_path / "summary.md"
    with findings_server(nodes) as (_, env):
        res = CliRunner().invoke(
            main,
            [
                "gate",
                "--format",
                "markdown",
                "--filter",
                json.dumps({"field": "title", "condition": "contains", "value": "<img>|x"}),
            ],
            env={**env, "GITHUB_STEP_SUMMARY": str(summary)},
        )
    assert res.exit_code == 4, res.output
    for text in (res.output, summary.read_text()):
        lines = markdown_rows(text)
        assert [line for line in lines if line.startswith("#")] == [
            "### secfindings gate: FAILED (1 of 5 limits exceeded)"
        ]
        assert "<" not in text
        assert "](" not in text.replace("\\](", "")
        assert "\r" not in text
        assert "\x1b" not in text
        rows = [line for line in lines if line.startswith("| critical | 9.0 |")]
        assert len(rows) == len(HOSTILE_TITLES)
        assert all(unescaped_pipes(r) == 6 for r in rows), rows
        # Rendered (Python-Markdown with tables): one heading, no HTML of the titles, no image.
        import markdown

        html = markdown.markdown(text, extensions=["tables"])
        assert html.count("<h3>") == 1
        assert "<img" not in html
        assert "<!--" not in html
        assert html.count("<tr>") == 1 + 5 + 1 + len(HOSTILE_TITLES)


@pytest.mark.reliability_hostile
def test_junit_holds_only_what_xml_can_hold():
    nodes = [node(i, severity=5, title=t) for i, t in enumerate(HOSTILE_TITLES, 1)]
    with findings_server(nodes) as (_, env):
        res = gate(env, "--format", "junit")
    assert res.exit_code == 4
    root = ET.fromstring(res.output.encode("utf-8"))  # parses: no ESC, NUL, form feed, U+FFFE
    (failure,) = root.iter("failure")
    assert failure.text is not None
    assert "\ufffd[31mred" in failure.text
    assert "\ufffd nul" in failure.text
    assert len(failure.text.splitlines()) == len(HOSTILE_TITLES)


@pytest.mark.reliability_input
def test_a_baseline_whose_ids_are_not_ids_is_a_usage_error(emulator, tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    env = {
        "SECFINDINGS_API_TOKEN": emulator.create_api_token(),
        "SECFINDINGS_BASE_URL": emulator.base_url,
        "SECFINDINGS_AUTH_URL": emulator.auth_url,
    }
    for name, table in {
        "lists": pa.table({"id_int": [[1, 2], [3]]}),
        "floats": pa.table({"id_int": [1.5]}),
        "ids-as-numbers": pa.table({"id": [1, 2]}),
    }.items():
        path = tmp_path / f"{name}.parquet"
        pq.write_table(table, path)
        res = gate(env, "--baseline", str(path))
        assert res.exit_code == 2, (name, res.output)
        assert res.output.startswith(f"error: the baseline {path}: its id")
        assert len(res.output.splitlines()) == 1


def test_a_baseline_without_pyarrow_names_the_extra_and_the_gate(client, monkeypatch, tmp_path):
    import sys

    monkeypatch.setitem(sys.modules, "pyarrow", None)
    with pytest.raises(ImportError) as caught:
        secfindings.gate(client, baseline=tmp_path / "base.parquet")
    assert "diff()" not in str(caught.value)
    assert str(caught.value) == "the gate's baseline needs pyarrow: pip install 'secfindings[arrow]'"


# ------------------------------------------------------------------ plain flags


def test_severity_and_status_flags_count_what_they_name(snap):
    res = gate(snap.env, "--severity", "critical,HIGH", "--format", "json")
    got = json.loads(res.output)
    assert got["counts"] == {
        "critical": snap.open["critical"],
        "high": snap.open["high"],
        "medium": 0,
        "low": 0,
        "info": 0,
        "unknown": 0,
    }
    res = gate(snap.env, "--severity", "5", "--status", "open,fixed,ignored", "--format", "json")
    assert json.loads(res.output)["counts"]["critical"] == snap.all["critical"]
    res = gate(
        snap.env, "--status", "Open", "--max", f"critical={snap.open['critical']}", "--severity", "critical"
    )
    assert res.exit_code == 0, res.output


# ------------------------------------------------------------------ the documented workflow


def test_the_documented_workflow_saves_the_baseline_when_the_gate_fails():
    """GitHub skips a step whose `if` has no status function once a step failed (it reads as
    `success() && ...`): the export and the cache save after the gate must say they run anyway,
    or the first run (which always fails: no baseline) never saves one and CI never goes green."""
    import re

    import yaml

    guide = (Path(__file__).parent.parent / "docs" / "guides" / "ci-and-siem.md").read_text()
    (block,) = re.findall(r"### GitHub Actions\s+```yaml\n(.*?)```", guide, re.S)
    steps = yaml.safe_load(block)["jobs"]["gate"]["steps"]
    at = next(i for i, s in enumerate(steps) if "secfindings gate" in s.get("run", ""))
    after = steps[at + 1 :]
    saves = [s for s in after if str(s.get("uses", "")).startswith("actions/cache/save")]
    exports = [s for s in after if "secfindings export" in s.get("run", "")]
    assert len(saves) == 1
    assert len(exports) == 1
    runs_after_failure = ("always()", "failure()", "!cancelled()")
    for step in (*exports, *saves):
        condition = str(step.get("if", ""))
        assert any(f in condition for f in runs_after_failure), step
    (restore,) = [s for s in steps[:at] if str(s.get("uses", "")).startswith("actions/cache/restore")]
    saved = saves[0]["with"]
    assert saved["path"] in exports[0]["run"]
    assert saved["path"] == restore["with"]["path"]
    assert saved["key"].startswith(restore["with"]["restore-keys"])
    assert restore["with"]["path"] in steps[at]["run"]  # the gate reads the restored baseline


def test_the_gate_asks_only_for_what_the_server_has(profiled_emulator, caplog):
    """On a server whose FindingsView has no severity (the known profile), the gate places each
    finding with a walk per level filtered on severity, says once what it left out, and counts
    what the Finding type says of each (looked up by id here)."""
    caplog.set_level("WARNING", logger="secfindings")
    with profiled_emulator.client() as client:
        result = secfindings.gate(client, max="critical=100000,high=100000")
        ids = [f["id_int"] for f in result.findings]
        truth = Counter(
            NAMES[f.finding_score.severity] for f in client.findings(ids, fields="finding_score { severity }")
        )
    warnings = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    if profiled_emulator.profile == "known":
        assert warnings == [
            "gate: the server's FindingsView has no due_date, finding_id, package_name, severity; "
            "left out (severity: one walk per level, filtered on severity)"
        ]
    else:
        assert warnings == []
    assert result.passed
    assert {k: v for k, v in result.counts.items() if v} == dict(truth)
    assert [NAMES[f["severity"]] for f in result.findings].count("critical") == truth["critical"]


def test_export_takes_the_plain_flags_and_refuses_names_for_severities(snap, tmp_path):
    out = tmp_path / "critical.jsonl"
    run = CliRunner().invoke
    res = run(
        main,
        ["export", "--severity", "critical", "--status", "open", "--out", str(out), "--no-progress"],
        env=snap.env,
    )
    assert res.exit_code == 0, res.output
    assert len(out.read_text().splitlines()) == snap.open["critical"]
    assert res.output.strip().startswith(f"wrote {snap.open['critical']} rows in ")
    for args, message in [
        (
            ["--filter", '{"field":"severity","condition":"in","value":["critical"]}'],
            "did you mean '5' (critical)",
        ),
        (["--filter", "[" * 50_000 + "]" * 50_000], "nests too deeply"),
        (["--severity", "urgent"], "'urgent' is not a severity"),
        (["--status", "opne"], "did you mean 'OPEN'"),
        (["--filter", '{"field":"cloud_provider","condition":"equals","value":"aws"}'], "did you mean 'AWS'"),
    ]:
        bad = tmp_path / "bad.jsonl"
        res = run(main, ["export", *args, "--out", str(bad), "--no-progress"], env=snap.env)
        assert res.exit_code == 2, (args, res.output)
        assert message in res.output
        assert "Traceback" not in res.output
        assert not bad.exists()
    res = run(
        main, ["export", "sla_groups", "--severity", "high", "--out", str(tmp_path / "s.jsonl")], env=snap.env
    )
    assert res.exit_code == 2
    assert "findings only" in res.output


@pytest.mark.reliability_hostile
def test_the_text_summary_cannot_drive_a_terminal_or_a_ci_log():
    """The one-screen summary goes to a terminal or a CI log: a title cannot add a line (a
    GitHub workflow command such as ::add-mask:: starts one), send ESC sequences (erase the
    line, recolour) or reorder the text with bidirectional controls."""
    import unicodedata

    titles = [
        "x\r\n::error::forged\r\nsecfindings gate: passed",
        "\x1b[2K\rsecfindings gate: passed \x1b[32mgreen",
        "abc\u202edesrever\u2066x\u2069",
        "nul\x00 del\x7f c1\x9b",
    ]
    nodes = [node(i, severity=5, score=9.0, title=t, resource_name=t) for i, t in enumerate(titles, 1)]
    with findings_server(nodes) as (_, env):
        res = gate(env)
    assert res.exit_code == 4
    lines = res.output.splitlines()
    assert len(lines) == 2 + 5 + 1 + 1 + len(titles)  # verdict, header, rows, scope, worst:, findings
    assert [i for i, line in enumerate(lines) if line.startswith("secfindings gate:")] == [0]
    assert lines[0].startswith("secfindings gate: FAILED")
    assert not [line for line in lines if line.startswith("::")]
    bad = [ch for ch in res.output if ch != "\n" and unicodedata.category(ch) in ("Cc", "Cf")]
    assert bad == []


@pytest.mark.reliability_hostile
def test_a_server_with_no_way_to_place_a_severity_is_one_line_exit_2():
    """A server whose FindingsView has no severity and whose filter refuses the field: the gate
    cannot work, and says so in one line, exit 2 (not an API failure, exit 1)."""
    from tests.servers.http import Response
    from tests.servers.variant import _edit_type

    sdl = _edit_type(secfindings._native.builtin_sdl(), "FindingsView", drop=("severity",))
    refused = {
        "errors": [{"message": "Unknown filter field: severity", "locations": [{"line": 1, "column": 3}]}]
    }

    def answer(req: Any) -> Any:
        if "severity" in json.dumps(req.json().get("variables")):
            return Response.of_json(refused, status=400)
        return [node(1, title="a")]

    with findings_server(answer, sdl=sdl) as (_, env):
        res = gate(env)
    assert res.exit_code == 2, res.output
    assert res.output == (
        "error: the gate counts findings per severity, and this server has no severity on "
        "FindingsView and refused a filter on it: GraphQL error: Unknown filter field: severity\n"
    )


@pytest.mark.reliability_hostile
def test_markdown_text_shows_bidirectional_controls_as_replacement_characters() -> None:
    """A title with U+202E (right-to-left override) showed in another order than it is in every
    Markdown report; the terminal's text already replaced it."""
    from secfindings.formats import line_text, markdown_text

    for hostile in ("a\u202eb", "x\u2066y\u2069z"):
        shown = markdown_text(hostile)
        assert not any(c in shown for c in "\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")
        assert shown == line_text(hostile)


def test_out_dash_is_standard_output_not_a_file_named_dash(
    emulator: Any, tmp_path: Path, monkeypatch: Any
) -> None:
    """``gate --out -`` and ``diff --out -`` wrote a file named ``-`` (``export --out -`` streams)."""
    monkeypatch.chdir(tmp_path)
    env = {
        "SECFINDINGS_API_TOKEN": emulator.create_api_token(),
        "SECFINDINGS_BASE_URL": emulator.base_url,
        "SECFINDINGS_AUTH_URL": emulator.auth_url,
        "GITHUB_STEP_SUMMARY": "",
    }
    res = CliRunner().invoke(
        main, ["gate", "--max", "critical=100000", "--format", "json", "--out", "-"], env=env
    )
    assert res.exit_code == 0, res.output
    assert json.loads(res.output)["passed"] is True
    snapshot = tmp_path / "s.jsonl"
    emulator.client().findings_view(
        fields="id id_int title sla_status actual_status { category }"
    ).write_jsonl(snapshot)
    res = CliRunner().invoke(main, ["diff", str(snapshot), str(snapshot), "--format", "json", "--out", "-"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.output)["counts"]["new"] == 0
    assert not (tmp_path / "-").exists()

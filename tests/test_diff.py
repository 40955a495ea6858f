"""``secfindings.diff`` and ``secfindings diff``: two snapshots of the emulator with known edits
made through its hooks (created, closed, removed, reopened, severity changed, reported again)
give exactly those ids, whatever the export formats; any Arrow stream is a snapshot too (the seam
for a table kept by ``sync``); bad snapshots are clear errors."""

from __future__ import annotations

import json
import random
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

import secfindings
from secfindings.cli import main
from secfindings.testing import Emulator

FIELDS = "id id_int title severity score sla_status due_date actual_status { key category }"


def export(client: Any, path: Path) -> Path:
    pager = client.findings_view(fields=FIELDS)
    getattr(pager, "write_" + {".parquet": "parquet", ".jsonl": "jsonl", ".csv": "csv"}[path.suffix])(path)
    return path


class Edited:
    """BASE and HEAD of one emulator, with the ids of each edit made between them."""

    def __init__(self, emu: Emulator, folder: Path) -> None:
        self.emu, self.folder = emu, folder
        with emu.client() as c:
            rows = c.findings_view(fields=FIELDS).to_arrow().to_pylist()
            for suffix in (".parquet", ".jsonl", ".csv"):
                export(c, folder / f"base{suffix}")
        rng = random.Random(23)
        opened = [r["id_int"] for r in rows if r["actual_status.category"] == "OPEN"]
        closed = [r["id_int"] for r in rows if r["actual_status.category"] != "OPEN"]
        severity = {r["id_int"]: r["severity"] for r in rows}
        rng.shuffle(opened)
        rng.shuffle(closed)
        self.closed, self.removed = opened[:4], opened[4:7]
        self.severity = opened[7:12]
        self.rereported = opened[12:15]
        self.reopened = closed[:2]
        self.new = [emu.create_finding(severity=rng.randint(1, 5))[0] for _ in range(20)]
        for fid in self.closed:
            emu.close_finding(fid)
        for fid in self.removed:
            emu.remove_finding(fid)
        for fid in self.reopened:
            emu.update_finding(fid, status="OPEN")
        for fid in self.severity:
            emu.update_finding(fid, severity=severity[fid] % 5 + 1)
        for fid in self.rereported:
            emu.rereport_finding(fid)
        with emu.client() as c:
            for suffix in (".parquet", ".jsonl", ".csv"):
                export(c, folder / f"head{suffix}")


@pytest.fixture(scope="module")
def edited(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Edited]:
    with Emulator(findings=400, seed=17) as emu:
        yield Edited(emu, tmp_path_factory.mktemp("snapshots"))


@pytest.mark.parametrize(("base", "head"), [("parquet", "jsonl"), ("jsonl", "csv"), ("csv", "parquet")])
def test_known_edits_give_exactly_those_ids(edited, base, head):
    result = secfindings.diff(edited.folder / f"base.{base}", edited.folder / f"head.{head}")
    assert result.key == "id_int"
    assert sorted(result.new) == sorted(edited.new)
    assert len(result.new) == 20
    assert sorted(result.resolved) == sorted(edited.closed + edited.removed)
    assert len(result.resolved) == 7
    assert sorted(result.reopened) == sorted(edited.reopened)
    assert sorted(result.changed) == sorted(edited.severity)  # reported again: not a change
    counts = result.counts
    assert (counts["new"], counts["resolved"], counts["reopened"], counts["changed"]) == (20, 7, 2, 5)
    assert counts["base_rows"] == 400
    assert counts["head_rows"] == 400 + 20 - 3
    rows = {r["id_int"]: r for r in result.rows()}
    for fid in edited.severity:
        assert "severity" in rows[fid]["changed_fields"]
        assert rows[fid]["severity_head"] == rows[fid]["severity_base"] % 5 + 1
    for fid in edited.closed:
        assert "status" in rows[fid]["changed_fields"]
    for fid in edited.removed:
        assert rows[fid]["changed_fields"] is None  # gone: nothing to compare
        assert rows[fid]["severity_head"] is None
    for fid in edited.new:
        assert rows[fid]["changed_fields"] is None
    assert [r["change"] for r in result.rows()] == sorted(
        (r["change"] for r in result.rows()), key=["new", "resolved", "reopened", "changed"].index
    )


def test_snapshots_as_arrow_streams(edited):
    """A paginator, a pyarrow Table and a polars DataFrame are snapshots too: what a table kept
    by sync hands over, read as of a time."""
    head_table = pq.read_table(edited.folder / "head.parquet")
    with edited.emu.client() as c:
        live = c.findings_view(fields=FIELDS)  # HEAD, read live through the Arrow C stream
        result = secfindings.diff(edited.folder / "base.parquet", live)
    assert sorted(result.new) == sorted(edited.new)
    again = secfindings.diff(pl.read_parquet(edited.folder / "base.parquet"), head_table)
    assert again.counts == result.counts
    assert again.table.equals(result.table)


def test_a_folder_of_parts_is_one_snapshot(edited, tmp_path):
    table = pq.read_table(edited.folder / "base.parquet")
    parts = tmp_path / "base"
    parts.mkdir()
    pq.write_table(table.slice(0, 150), parts / "base.parquet")
    pq.write_table(table.slice(150), parts / "base.part2.parquet")
    result = secfindings.diff(parts, edited.folder / "head.parquet")
    # The edits made, not another diff, say what must come out.
    assert result.counts["base_rows"] == 400
    assert sorted(result.new) == sorted(edited.new)
    assert sorted(result.resolved) == sorted(edited.closed + edited.removed)
    assert sorted(result.reopened) == sorted(edited.reopened)
    assert sorted(result.changed) == sorted(edited.severity)


def test_what_counts_as_which_change():
    base = pa.table(
        {
            "id": ["a", "b", "c", "d", "e", "f", "g"],
            "severity": [5, 4, 3, 2, 1, 3, 3],
            "score": [9.0, 8.0, 5.0, 2.0, 1.0, 5.0, None],
            "actual_status.key": ["10", "10", "20", "10", "10", "30", "10"],
            "actual_status.category": ["OPEN", "OPEN", "FIXED", "OPEN", "OPEN", "IGNORED", "OPEN"],
            "sla_status": ["ON_TRACK", "AT_RISK", "CLOSED", "ON_TRACK", "OVERDUE", "CLOSED", "ON_TRACK"],
        }
    )
    head = pa.table(
        {
            "id": ["b", "c", "d", "e", "g", "h"],
            "severity": [4, 3, 2, 1, 3, 2],
            "score": [8.0, 5.0, 2.0, 1.0, 4.0, 2.0],
            "actual_status.key": ["12", "10", "10", "20", "10", "10"],
            "actual_status.category": ["OPEN", "OPEN", "OPEN", "FIXED", "OPEN", "OPEN"],
            "sla_status": ["AT_RISK", "ON_TRACK", "OVERDUE", "CLOSED", "ON_TRACK", "ON_TRACK"],
        }
    )
    result = secfindings.diff(base, head)
    assert result.key == "id"  # no id_int in either
    assert result.fields == ["severity", "score", "status", "sla_status"]
    got = {r["id"]: (r["change"], r["changed_fields"]) for r in result.rows()}
    assert got == {
        "h": ("new", None),
        "a": ("resolved", None),  # open, then gone
        "e": ("resolved", ["status", "sla_status"]),  # open, then closed
        "c": ("reopened", ["status", "sla_status"]),
        "b": ("changed", ["status"]),  # open 10 -> open 12: still open, status changed
        "d": ("changed", ["sla_status"]),
        "g": ("changed", ["score"]),  # a missing value that appears is a change
    }
    # f: closed, then gone: not a change anyone acts on.
    assert result.counts["unchanged"] == 0
    assert "1 new, 2 resolved, 1 reopened, 3 changed" in result.to_text()
    assert "| resolved | 2 |" in result.to_markdown()
    assert json.loads(result.to_json())["counts"]["changed"] == 3


@pytest.mark.parametrize(
    ("base", "head", "message"),
    [
        (pa.table({"title": ["x"]}), pa.table({"id_int": [1]}), "share no id column"),
        (pa.table({"id_int": [1, 1]}), pa.table({"id_int": [1]}), "BASE has 1 row whose id_int came before"),
        (pa.table({"id_int": [1]}), pa.table({"id_int": [1, None]}), "HEAD has 1 row without id_int"),
        ("/nonexistent/base.parquet", pa.table({"id_int": [1]}), "no such snapshot"),
        (42, pa.table({"id_int": [1]}), "got int"),
    ],
)
def test_bad_snapshots_are_clear_errors(base, head, message):
    with pytest.raises(secfindings.ValidationError, match=message):
        secfindings.diff(base, head)


def test_unknown_file_kinds_are_refused(tmp_path):
    odd = tmp_path / "base.xlsx"
    odd.write_text("x")
    with pytest.raises(secfindings.ValidationError, match="not an export file"):
        secfindings.diff(odd, odd)
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(secfindings.ValidationError, match="holds no export file"):
        secfindings.diff(empty, empty)


def test_the_command(edited, tmp_path):
    base, head = str(edited.folder / "base.parquet"), str(edited.folder / "head.jsonl")
    run = CliRunner().invoke
    res = run(main, ["diff", base, head])
    assert res.exit_code == 0, res.output
    assert res.output.startswith("20 new, 7 resolved, 2 reopened, 5 changed (of 400 -> 417 findings")
    res = run(main, ["diff", base, head, "--format", "json"])
    got = json.loads(res.output)
    assert sorted(r["id_int"] for r in got["changes"] if r["change"] == "reopened") == sorted(edited.reopened)
    res = run(main, ["diff", base, head, "--format", "markdown", "--limit", "3"])
    assert "| new | 20 |" in res.output
    assert "... and 31 more." in res.output
    out = tmp_path / "changes.parquet"
    res = run(main, ["diff", base, head, "--format", "parquet", "--out", str(out)])
    assert res.exit_code == 0
    assert pq.read_table(out).num_rows == 34
    res = run(main, ["diff", base, head, "--format", "parquet"])
    assert res.exit_code == 2
    assert "--format parquet needs --out" in res.output
    res = run(main, ["diff", base, str(tmp_path / "missing.parquet")])
    assert res.exit_code == 2
    assert "no such snapshot" in res.output


def test_a_table_kept_by_sync_diffs_as_of_two_times(tmp_path):
    """The seam for sync: its history table read as of a time (valid_from / valid_to) is an Arrow
    stream (a DuckDB relation); diffed against the current table, the edits between the runs."""
    duckdb = pytest.importorskip("duckdb")
    from secfindings.sync import sync

    db = tmp_path / "findings.duckdb"
    with Emulator(findings=300, seed=29) as emu, emu.client() as client:
        sync(client, str(db))
        severity = {
            f.id_int: f.severity
            for f in client.findings_view(fields="id_int severity actual_status { category }")
            if f.actual_status is not None and f.actual_status.category == "OPEN"
        }
        opened = sorted(severity)
        emu.close_finding(opened[0])
        emu.remove_finding(opened[1])
        emu.update_finding(opened[2], severity=severity[opened[2]] % 5 + 1)
        new, _ = emu.create_finding(severity=5)
        sync(client, str(db), reconcile=True)
    con = duckdb.connect(str(db))
    first = "(select min(valid_from) from findings_history)"
    as_of_first = con.sql(
        "select * exclude (valid_from, valid_to) from findings_history "
        f"where valid_from <= {first} and (valid_to is null or valid_to > {first})"
    )
    result = secfindings.diff(as_of_first, con.sql("select * from findings"))
    assert result.new == [new]
    assert sorted(result.resolved) == sorted(opened[:2])
    assert result.reopened == []
    changed = {r["id_int"]: r for r in result.rows() if r["change"] == "changed"}
    assert list(changed) == [opened[2]]
    assert "severity" in changed[opened[2]]["changed_fields"]
    assert "status" in result.fields  # the sync table's actual_status_key is compared


def test_optional_libraries_stay_optional(monkeypatch, tmp_path):
    import subprocess
    import sys

    code = (
        "import sys, secfindings, secfindings.gate, secfindings.diff, secfindings.formats.ocsf, "
        "secfindings.formats.sarif; "
        "print(sorted(m for m in ('pyarrow', 'jsonschema', 'duckdb', 'polars') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
    monkeypatch.setitem(sys.modules, "pyarrow", None)
    with pytest.raises(ImportError, match=r"pip install 'secfindings\[arrow\]'"):
        secfindings.diff(tmp_path / "a.parquet", tmp_path / "b.parquet")
    res = CliRunner().invoke(main, ["diff", str(tmp_path / "a.parquet"), str(tmp_path / "b.parquet")])
    assert res.exit_code == 2
    assert "secfindings[arrow]" in res.output


HOSTILE = [
    "x\r\r### secfindings gate: passed\r\r<!--",
    '<img src="https://tracker.example/p.gif">',
    "a | b \\| c",
    "one\ntwo\u2028three",
    "![p](https://tracker.example/p.gif)",
]


@pytest.mark.reliability_input
def test_markdown_escapes_every_vector(tmp_path):
    """A title (a severity, a status key) from a snapshot cannot add a line, a heading, HTML, an
    image or a cell to the Markdown (only | was escaped before)."""
    n = len(HOSTILE)
    base = pa.table({"id_int": list(range(n)), "title": HOSTILE, "actual_status.key": HOSTILE})
    head = pa.table({"id_int": list(range(n)), "title": HOSTILE, "actual_status.key": ["ok"] * n})
    pq.write_table(base, tmp_path / "base.parquet")
    pq.write_table(head, tmp_path / "head.parquet")
    text = secfindings.diff(base, head).to_markdown()
    res = CliRunner().invoke(
        main, ["diff", str(tmp_path / "base.parquet"), str(tmp_path / "head.parquet"), "--format", "markdown"]
    )
    assert res.exit_code == 0, res.output
    assert res.output == text
    lines = text.splitlines()  # every Unicode line end
    assert not [line for line in lines if line.startswith("#")]
    assert "<" not in text
    assert "\r" not in text
    rows = [line for line in lines if "| changed | status |" in line]
    assert len(rows) == n
    assert all(len(re.findall(r"(?<!\\)(?:\\\\)*\|", r)) == 5 for r in rows), rows
    import markdown

    html = markdown.markdown(text, extensions=["tables"])
    assert "<h" not in html.replace("<hr", "")
    assert "<img" not in html
    assert html.count("<tr>") == 1 + 4 + 1 + n


@pytest.mark.reliability_input
@pytest.mark.parametrize(
    ("ids", "message"),
    [
        (pa.array(["a", "b"]), "BASE's id_int column holds string, not whole numbers"),
        (pa.array([1.0, 2.5]), "BASE's id_int column holds double, not whole numbers"),
        (pa.array([[1], [2, 3]]), "BASE's id_int column holds list<"),
    ],
)
def test_ids_that_are_not_ids_are_clear_errors(tmp_path, ids, message):
    base = pa.table({"id_int": ids})
    with pytest.raises(secfindings.ValidationError, match=re.escape(message)):
        secfindings.diff(base, pa.table({"id_int": [1]}))
    pq.write_table(base, tmp_path / "base.parquet")
    pq.write_table(pa.table({"id_int": [1]}), tmp_path / "head.parquet")
    res = CliRunner().invoke(main, ["diff", str(tmp_path / "base.parquet"), str(tmp_path / "head.parquet")])
    assert res.exit_code == 2
    assert res.output.startswith(f"error: {message}")
    assert res.output.endswith(": one id per finding\n")
    assert len(res.output.splitlines()) == 1
    # Whole numbers read as floats (JSON lines with a gap) are ids.
    ok = secfindings.diff(pa.table({"id_int": [1.0, 2.0, None][:2]}), pa.table({"id_int": [2]}))
    assert ok.counts["resolved"] == 1


@pytest.mark.reliability_input
@pytest.mark.parametrize("kind", ["parquet", "csv", "jsonl"])
def test_titles_that_are_not_utf8_are_clear_errors(tmp_path, kind):
    bad = b"caf\xe9 \xff"
    base, head = tmp_path / f"base.{kind}", tmp_path / f"head.{kind}"
    if kind == "parquet":
        pq.write_table(pa.table({"id_int": [1], "title": pa.array([bad], pa.binary())}), base)
        pq.write_table(pa.table({"id_int": [2], "title": pa.array([bad], pa.binary())}), head)
    elif kind == "csv":
        base.write_bytes(b"id_int,title\n1," + bad + b"\n")
        head.write_bytes(b"id_int,title\n2," + bad + b"\n")
    else:
        base.write_bytes(b'{"id_int": 1, "title": "' + bad + b'"}\n')
        head.write_bytes(b'{"id_int": 2, "title": "' + bad + b'"}\n')
    res = CliRunner().invoke(main, ["diff", str(base), str(head)])
    assert res.exit_code == 2, res.output
    assert res.output.startswith("error: ")
    assert len(res.output.splitlines()) == 1
    assert "Traceback" not in res.output


def test_exports_of_each_profile_diff_by_the_edits_made(profiled_emulator, tmp_path):
    """Snapshots exported with the default selection of each profile (the known one has no
    severity or due_date on FindingsView) diff to exactly the edits made between them."""
    emu = profiled_emulator
    with emu.client() as c:
        c.findings_view().write_parquet(tmp_path / "base.parquet")
        rows = c.findings_view(fields="id_int actual_status { category }").to_list()
    opened = sorted(r.id_int for r in rows if r.actual_status.category == "OPEN")
    closed = sorted(r.id_int for r in rows if r.actual_status.category != "OPEN")
    emu.close_finding(opened[0])
    emu.remove_finding(opened[1])
    emu.update_finding(closed[0], status="OPEN")
    new = [emu.create_finding(severity=s)[0] for s in (5, 3)]
    with emu.client() as c:
        c.findings_view().write_jsonl(tmp_path / "head.jsonl")
    res = CliRunner().invoke(
        main, ["diff", str(tmp_path / "base.parquet"), str(tmp_path / "head.jsonl"), "--format", "json"]
    )
    assert res.exit_code == 0, res.output
    got = json.loads(res.output)
    by = {
        k: sorted(r["id_int"] for r in got["changes"] if r["change"] == k)
        for k in ("new", "resolved", "reopened", "changed")
    }
    assert by == {"new": new, "resolved": opened[:2], "reopened": closed[:1], "changed": []}
    assert ("severity" in got["fields"]) == (emu.profile == "default")


@pytest.mark.reliability_input
def test_the_table_cannot_drive_a_terminal():
    titles = ["x\r\n::error::forged", "\x1b[2Kerased", "abc\u202edesrever", "nul\x00"]
    n = len(titles)
    head = pa.table({"id_int": list(range(n)), "title": titles})
    text = secfindings.diff(pa.table({"id_int": pa.array([], pa.int64())}), head).to_text()
    lines = text.splitlines()
    assert len(lines) == 1 + n
    assert not [line for line in lines if line.startswith("::")]
    import unicodedata

    assert [ch for ch in text if ch != "\n" and unicodedata.category(ch) in ("Cc", "Cf")] == []


def _pairs_to_compare(folder: Path) -> list[tuple[str, Any, Any]]:
    """Snapshot pairs both engines must diff alike: the emulator's exports in every format, the
    cases of each kind of change, hostile titles and statuses, NaN and signed zeros, dictionary
    columns, no statuses, string ids, empty sides, a status key against a category."""
    nan = float("nan")
    cases: list[tuple[str, Any, Any]] = [
        (f"{b}->{h}", folder / f"base.{b}", folder / f"head.{h}")
        for b in ("parquet", "jsonl", "csv")
        for h in ("parquet", "jsonl", "csv")
    ]
    n = len(HOSTILE)
    cases.append(
        (
            "hostile",
            pa.table({"id_int": list(range(n)), "title": HOSTILE, "actual_status.key": HOSTILE}),
            pa.table({"id_int": list(range(n)), "title": HOSTILE, "actual_status.key": ["ok"] * n}),
        )
    )
    titles = ["x\r\n::error::forged", "\x1b[2Kerased", "abc\u202edesrever", "nul\x00"]
    cases.append(
        (
            "terminal",
            pa.table({"id_int": pa.array([], pa.int64())}),
            pa.table({"id_int": list(range(4)), "title": titles}),
        )
    )
    cases.append(
        (
            "floats",
            pa.table({"id": ["a", "b", "c", "d", "e", "f"], "score": [nan, nan, -0.0, None, 1.0, None]}),
            pa.table({"id": ["f", "e", "d", "c", "b", "a"], "score": [None, nan, None, 0.0, 1.0, nan]}),
        )
    )
    cat = ["OPEN", "FIXED", "IGNORED", None, "OPEN", "OPEN"]
    cases.append(
        (
            "dictionaries",
            pa.table(
                {
                    "id_int": [6, 5, 4, 3, 2, 1],
                    "actual_status.category": pa.array(cat).dictionary_encode(),
                    "sla_status": pa.array(["A", "B", None, "A", "C", "C"]).dictionary_encode(),
                    "severity": pa.array([1, 2, 3, 4, 5, None], pa.int8()),
                    "due_date": ["2024-01-01T00:00:00Z", None, "2024-01-02T00:00:00Z"] * 2,
                }
            ),
            pa.table(
                {
                    "id_int": [1, 2, 3, 4, 7, 8],
                    "actual_status.category": pa.array(["FIXED", "OPEN", "OPEN", None, "OPEN", "X"]),
                    "sla_status": pa.array(["C", "C", "B", None, "A", "A"]).dictionary_encode(),
                    "severity": [None, 5, 4, 3, 2, 1],
                    "due_date": pa.array([None, 1_704_067_200_000_000] * 3, pa.timestamp("us", "UTC")),
                }
            ),
        )
    )
    odd = pa.DictionaryArray.from_arrays(pa.array([0, 1, None, 2]), pa.array(["A", "A", "OPEN"]))
    with_null = pa.DictionaryArray.from_arrays(pa.array([0, 1, 2, 1]), pa.array(["OPEN", None, "A"]))
    cases.append(
        (
            "odd dictionaries",  # a value twice, a null value
            pa.table({"id_int": [1, 2, 3, 4], "sla_status": odd, "actual_status.category": with_null}),
            pa.table({"id_int": [4, 3, 2, 1], "sla_status": odd, "actual_status.category": odd}),
        )
    )
    cases.append(
        (
            "no statuses",
            pa.table({"id_int": [3, 1, 2], "severity": [1, 2, 3]}),
            pa.table({"id_int": [2, 4], "severity": [3, 1]}),
        )
    )
    cases.append(
        (
            "key and category",
            pa.table({"id": ["x", "y"], "status.key": ["10", "20"], "status.category": ["OPEN", "FIXED"]}),
            pa.table({"id": ["x", "y"], "actual_status_category": ["FIXED", "OPEN"]}),
        )
    )
    cases.append(
        ("empty", pa.table({"id": pa.array([], pa.string())}), pa.table({"id": pa.array([], pa.string())}))
    )
    return cases


def test_duckdb_and_arrow_compute_diff_alike(edited):
    """Where DuckDB is installed it does the join; Arrow compute stays the fallback. Both give the
    same table (rows, order, types) and counts over the same snapshots, the hostile ones too."""
    import sys

    engine = sys.modules["secfindings.diff"]
    for name, base, head in _pairs_to_compare(edited.folder):
        sides = engine._read_sides(base, head)
        assert engine._changes_duckdb(sides) is not None, name  # DuckDB did it, no fallback
        fast = engine._diff(base, head, engine="duckdb")
        slow = engine._diff(base, head, engine="pyarrow")
        assert fast.table.schema == slow.table.schema, name
        # repr: NaN is not equal to itself, and both must hold it in the same place.
        assert repr(fast.table.to_pylist()) == repr(slow.table.to_pylist()), name
        assert fast.counts == slow.counts, name
        assert (fast.key, fast.fields) == (slow.key, slow.fields), name
    assert engine._has_duckdb()
    # The public call takes DuckDB where it is installed.
    called = []
    real = engine._changes_duckdb
    try:
        engine._changes_duckdb = lambda s: called.append(s) or real(s)
        secfindings.diff(edited.folder / "base.parquet", edited.folder / "head.parquet")
    finally:
        engine._changes_duckdb = real
    assert len(called) == 1

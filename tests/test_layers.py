"""scripts/layers.py, the layering check `make lint` and CI run: it holds on the repository, and
it fails, one line naming each problem, on small trees that break a rule, in both languages."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "layers.py"


def run(root: Path | None = None) -> subprocess.CompletedProcess[str]:
    args = [sys.executable, str(SCRIPT)] + ([str(root)] if root is not None else [])
    return subprocess.run(args, capture_output=True, text=True, timeout=120, check=False)


def tree(root: Path, files: dict[str, str]) -> Path:
    """A small checkout: the package's __init__ and _shared, plus ``files``."""
    base = {"python/secfindings/__init__.py": "", "python/secfindings/_shared.py": "import json\n"}
    for name, text in {**base, **files}.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


def test_the_repository_holds() -> None:
    done = run()
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout == ""
    assert "0 problem(s)" in done.stderr


def test_a_python_import_circle_fails_and_is_named(tmp_path: Path) -> None:
    root = tree(
        tmp_path,
        {
            "python/secfindings/a.py": "from secfindings import b\n",
            # function-local and TYPE_CHECKING imports count too
            "python/secfindings/b.py": "def f():\n    from secfindings.c import g\n",
            "python/secfindings/c.py": (
                "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from secfindings.a import A\n"
            ),
            "python/secfindings/d.py": "from secfindings import a, _shared\n",
        },
    )
    done = run(root)
    assert done.returncode == 1
    assert done.stdout.splitlines() == [
        "python: import circle: python/secfindings/a.py -> python/secfindings/b.py"
        " -> python/secfindings/c.py -> python/secfindings/a.py"
    ]
    (root / "python/secfindings/c.py").write_text("import json\n")
    done = run(root)
    assert (done.returncode, done.stdout) == (0, ""), done.stderr


def test_a_relative_import_and_a_package_s_init_count(tmp_path: Path) -> None:
    root = tree(
        tmp_path,
        {
            "python/secfindings/sync/__init__.py": "from ._engine import run\n",
            "python/secfindings/sync/_engine.py": "from secfindings.sync import OPTIONS\n",
        },
    )
    done = run(root)
    assert done.returncode == 1
    assert done.stdout.splitlines() == [
        "python: import circle: python/secfindings/sync/__init__.py"
        " -> python/secfindings/sync/_engine.py -> python/secfindings/sync/__init__.py"
    ]


@pytest.mark.parametrize(
    ("name", "text", "line"),
    [
        (
            "_shared.py",
            "from secfindings import errors\n",
            "python: _shared is the ground floor and imports nothing of the package, not errors",
        ),
        (
            "gate.py",
            "from secfindings._cli_support import ExitCode\n",
            "python: gate imports the command line (_cli_support); only the command modules "
            "(cli, emulator, __main__, _cli*) may",
        ),
        (
            "_paginator.py",
            "import secfindings.otel\n",
            "python: _paginator imports otel, which only users import (optional)",
        ),
        (
            "diff.py",
            "from secfindings.testing import Emulator\n",
            "python: diff imports testing; the library does not import the test helpers",
        ),
    ],
)
def test_a_layer_rule_broken_is_one_line(tmp_path: Path, name: str, text: str, line: str) -> None:
    others = {
        f"python/secfindings/{m}.py": ""
        for m in ("errors", "_cli_support", "otel", "testing/__init__", "cli", "emulator", "gate", "diff")
    }
    # What is allowed: the command line imports anything, and is imported by itself.
    others["python/secfindings/cli.py"] = "from secfindings import _cli_support, testing, gate\n"
    others["python/secfindings/rules/_cli.py"] = "from secfindings import cli\n"
    root = tree(tmp_path, {**others, f"python/secfindings/{name}": text})
    done = run(root)
    assert done.returncode == 1, done.stdout + done.stderr
    assert done.stdout.splitlines() == [line]


RUST_OK = {
    "src/lib.rs": "pub mod core;\n",
    "src/core/mod.rs": "pub mod a;\npub mod b;\npub use self::a::Thing; // a re-export is no edge\n",
    "src/core/a.rs": "use crate::core::b::helper;\npub struct Thing;\n",
    "src/core/b.rs": (
        "//! crate::core::a in a comment is no dependency\n"
        'pub fn helper() -> &\'static str { "super::a::Thing" }\n'
        "#[cfg(test)]\nmod tests {\n    use crate::core::a::Thing;\n}\n"
    ),
}


def test_rust_crates_without_a_circle_hold(tmp_path: Path) -> None:
    done = run(tree(tmp_path, RUST_OK))
    assert (done.returncode, done.stdout) == (0, ""), done.stderr


def test_a_rust_circle_fails_and_is_named(tmp_path: Path) -> None:
    files = {**RUST_OK, "src/core/b.rs": "use super::{a::{Thing as T}, *};\npub fn helper() {}\n"}
    done = run(tree(tmp_path, files))
    assert done.returncode == 1
    assert done.stdout.splitlines() == [
        "rust: module circle in src: src/core/a.rs -> src/core/b.rs -> src/core/a.rs"
    ]


def test_a_root_that_calls_the_leaves_that_import_it_is_a_circle(tmp_path: Path) -> None:
    # The emulator's old shape: lib.rs held Shared, which the leaves imported, and called them.
    files = {
        "emulator/src/lib.rs": (
            "mod http;\nmod locks;\nuse crate::locks::lock;\npub struct Shared;\n"
            "pub fn start() { http::serve(); }\n"
        ),
        "emulator/src/http.rs": "use crate::Shared;\npub fn serve() {}\n",
        "emulator/src/locks.rs": "pub fn lock() {}\n",
    }
    done = run(tree(tmp_path, files))
    assert done.returncode == 1
    assert done.stdout.splitlines() == [
        "rust: module circle in emulator/src: "
        "emulator/src/lib.rs -> emulator/src/http.rs -> emulator/src/lib.rs"
    ]
    # Shared moved under the root (state.rs); crate::lock is the locks module's, brought in by
    # the root's `use`, so a leaf that calls it does not import the root.
    files["emulator/src/lib.rs"] = (
        "mod http;\nmod locks;\nmod state;\nuse crate::locks::lock;\npub fn start() { http::serve(); }\n"
    )
    files["emulator/src/state.rs"] = "pub struct Shared;\n"
    files["emulator/src/http.rs"] = "use crate::state::Shared;\npub fn serve() { crate::lock(); }\n"
    done = run(tree(tmp_path, files))
    assert (done.returncode, done.stdout) == (0, ""), done.stderr


def test_the_ground_floor_may_import_the_rust_core(tmp_path: Path) -> None:
    # _native is the extension (a .pyi beside the compiled module): it imports nothing of Python's.
    files = {
        "python/secfindings/_native.pyi": "from secfindings._shared import kind\n",
        "python/secfindings/_shared.py": "from secfindings import _native\n",
    }
    done = run(tree(tmp_path, files))
    assert (done.returncode, done.stdout) == (0, ""), done.stderr

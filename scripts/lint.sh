#!/usr/bin/env bash
# The static checks, one list for `make lint`, `make lint-fast`, scripts/test.sh and the
# pre-commit hooks, so they cannot drift apart. Uses the virtualenv of scripts/_venv.sh
# (SECFINDINGS_VENV, default .venv) with the package installed: `make dev` first on a new clone.
#
#   scripts/lint.sh        rustfmt, clippy, ruff check, ruff format --check, mypy, the import
#                          layering (scripts/layers.py), the workflows against GitHub's schema,
#                          stubtest
#   scripts/lint.sh fast   the same without clippy and stubtest (no Rust build, nothing imported)
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/_venv.sh
step() { printf '\n== %s\n' "$*"; }
if ! "$PY" -c "import ruff, mypy" 2>/dev/null; then
  echo "scripts/lint.sh: ruff and mypy are not in $VENV: run make dev (or scripts/test.sh) first" >&2
  exit 1
fi

mode="${1:-all}"
case "$mode" in
  all | fast) ;;
  *) echo "usage: scripts/lint.sh [all|fast]" >&2; exit 2 ;;
esac
# What ruff checks and formats: every Python file of the repository but the generated ones.
PY_PATHS=(python tests examples benches scripts)

step "rustfmt"
cargo fmt --all -- --check

if [ "$mode" = all ]; then
  step "clippy"
  cargo clippy --workspace --all-targets --quiet -- -D warnings
fi

step "ruff"
"$PY" -m ruff check "${PY_PATHS[@]}"
"$PY" -m ruff format --check "${PY_PATHS[@]}"

step "mypy"
"$PY" -m mypy

step "layers"
"$PY" scripts/layers.py

# actionlint cannot be installed from PyPI without a download at build time: the workflows are
# checked against GitHub's workflow schema that check-jsonschema vendors (the docs' workflow by
# tests/test_ci_workflow.py).
step "workflows"
"$PY" -m check_jsonschema --builtin-schema vendor.github-workflows .github/workflows/*.yml

if [ "$mode" = all ]; then
  step "stubtest"
  "$PY" -m mypy.stubtest secfindings._native --allowlist tests/stubtest-allowlist.txt
fi

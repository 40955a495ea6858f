#!/usr/bin/env bash
# Runs every check and test: the static checks of `make lint` (scripts/lint.sh: rustfmt, clippy,
# ruff, mypy, stubtest), the Rust tests (core without PyO3, emulator), and the Python suite
# against the emulator over real HTTP. No test touches the internet.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/_venv.sh
step() { printf '\n== %s\n' "$*"; }

step "build and install the package with the test dependency group"
install_package --group test

# The lint half is `make lint`'s own script (same venv: SECFINDINGS_VENV is inherited).
bash scripts/lint.sh

step "cargo test: core (no PyO3) and emulator"
cargo test --no-default-features --features arrow --lib --quiet
cargo test -p secfindings-emulator --quiet

step "pytest"
"$PY" -m pytest -q ${SECFINDINGS_JUNIT:+--junitxml="$SECFINDINGS_JUNIT"} "$@"

step "the wheel, installed without Rust on PATH (quickstart and a test smoke)"
bash scripts/wheel_test.sh

# A smoke run of the benchmark harness (tiny counts, about a minute with the floor's build): it
# proves `make bench` still works end to end. Its figures are not judged; results go to a temp dir.
if [ -z "${SECFINDINGS_SKIP_BENCH_SMOKE:-}" ]; then
  step "benchmark smoke (bench.sh --quick)"
  smoke_dir="$(mktemp -d)"
  bash scripts/bench.sh --quick --output-dir "$smoke_dir"
  test -s "$smoke_dir/latest.md"
fi

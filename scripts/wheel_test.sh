#!/usr/bin/env bash
# Installs a built wheel into a fresh venv with no Rust toolchain on PATH and runs the quickstart
# and a smoke of the test suite against it (from a directory outside the source tree, so the
# installed package is what gets imported). Usage: scripts/wheel_test.sh [WHEEL]
# Without WHEEL it builds one first with `pip wheel` (release profile, reusing target/).
set -euo pipefail
cd "$(dirname "$0")/.."
root="$PWD"
source scripts/_venv.sh
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
wheel="${1:-}"
if [ -z "$wheel" ]; then
  "$PY" -m pip wheel --quiet --disable-pip-version-check --no-deps -w "$work/wheel" .
  wheel=$(ls "$work"/wheel/secfindings-*.whl)
fi
python3 -m venv "$work/venv"
# No cargo, rustc or maturin from here on: only the venv and the system's basic tools.
clean_path="$work/venv/bin:/usr/local/bin:/usr/bin:/bin"
if PATH="$clean_path" command -v cargo >/dev/null 2>&1 || PATH="$clean_path" command -v rustc >/dev/null 2>&1; then
  echo "a Rust toolchain is still on PATH; the test would prove nothing" >&2
  exit 1
fi
PATH="$clean_path" "$work/venv/bin/python" -m pip install --quiet --disable-pip-version-check \
  --no-build-isolation --only-binary ':all:' "$wheel" pytest pytest-asyncio
cp -r tests "$work/tests"
cd "$work"
PATH="$clean_path" "$work/venv/bin/python" -c "import secfindings, sys; print('installed', secfindings.__version__, 'at', secfindings.__file__)"
PATH="$clean_path" "$work/venv/bin/python" "$root/examples/quickstart.py" | tail -3
SECFINDINGS_SOURCE_ROOT="$root" PATH="$clean_path" "$work/venv/bin/python" -m pytest -q -p no:cacheprovider -o addopts="" \
  -o asyncio_default_fixture_loop_scope=function \
  tests/test_public_api.py tests/test_graphql.py tests/test_auth.py tests/test_paging.py

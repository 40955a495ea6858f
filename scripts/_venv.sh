# Sourced by the other scripts: a virtualenv in .venv with the package built from this tree.
# Only python3 (3.10+), pip and a Rust toolchain are needed; everything else comes from PyPI.
set -euo pipefail
VENV="${SECFINDINGS_VENV:-.venv}"
if [ ! -x "$VENV/bin/python" ]; then
  python3 -m venv "$VENV"
  "$VENV/bin/python" -m pip install --quiet --upgrade pip
fi
PY="$VENV/bin/python"
export PATH="$PWD/$VENV/bin:$PATH"
install_package() {
  # Editable install: maturin builds the extension (release profile, incremental in target/).
  # `install_package --group test` adds a dependency group of pyproject.toml (pip >= 25.1);
  # `install_package "[extra]"` an extra.
  if [ "${1:-}" = "--group" ]; then
    "$PY" -m pip install --quiet --disable-pip-version-check --upgrade 'pip>=25.1'
    "$PY" -m pip install --quiet --disable-pip-version-check -e . --group "$2"
    return
  fi
  local extras="${1:-}"
  "$PY" -m pip install --quiet --disable-pip-version-check -e ".${extras}"
}

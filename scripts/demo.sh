#!/usr/bin/env bash
# Installs secfindings into .venv and runs the main job, examples/quickstart.py:
# against the real API when SECFINDINGS_API_TOKEN and SECFINDINGS_BASE_URL are set,
# otherwise against the embedded emulator.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/_venv.sh
# The first run compiles the Rust core: say so, and how long it takes, so nobody thinks it hung.
if ! "$PY" -c "import secfindings" 2>/dev/null; then
  echo "Building the Rust core into .venv (first run: about 4 minutes on 2 cores; later runs take seconds)..."
  started=$(date +%s)
  install_package
  echo "built in $(( $(date +%s) - started )) s"
else
  install_package
fi
exec "$PY" examples/quickstart.py "$@"

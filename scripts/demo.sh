#!/usr/bin/env bash
# Installs secfindings into .venv and runs the main job, examples/quickstart.py:
# against the real API when SECFINDINGS_API_TOKEN and SECFINDINGS_BASE_URL are set,
# otherwise against the embedded emulator.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/_venv.sh
install_package
exec "$PY" examples/quickstart.py "$@"

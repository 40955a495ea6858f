#!/usr/bin/env bash
# `make reliability`: the hardening set. Hostile servers on loopback (tests/servers/http.py), property
# tests (hypothesis), the emulator under 64 threads and 500 tasks with short-lived JWTs and 429s,
# and the Rust fuzz test of the page scanner and response decoder. Prints the table that
# docs/guides/guarantees.md quotes (counts per kind, from this run). No test touches the internet.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/_venv.sh
if ! "$PY" -c "import secfindings, hypothesis" 2>/dev/null; then
  install_package --group test
fi
report="$(mktemp)"
printf '== Rust: fuzz of the page scanner and the response decoder\n'
cargo test --no-default-features --features arrow --lib --quiet fuzz
printf '\n== pytest: reliability markers\n'
SECFINDINGS_RELIABILITY_REPORT="$report" "$PY" -m pytest -q -p no:cacheprovider \
  -m "reliability_fault or reliability_hostile or reliability_input or reliability_concurrency" "$@"
printf '\n== reliability table (this run)\n\n'
cat "$report"
rm -f "$report"

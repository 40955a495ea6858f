#!/usr/bin/env bash
# `make dist`: the release artefacts in dist/. An sdist and an abi3 wheel (CPython 3.10+) tagged
# manylinux2014 (glibc 2.17), linked with zig (the `ziglang` package from PyPI, nothing else to
# download) so it runs on old Linux distributions, built with the `dist` profile (fat LTO, one
# codegen unit) and stripped. Prints the wheel's size and the import time of the release build.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/_venv.sh
"$PY" -m pip install --quiet --disable-pip-version-check "maturin>=1.9.4,<2" ziglang
rm -rf dist
started=$(date +%s)
echo "building the wheel (dist profile: fat LTO; about 5 minutes on 2 cores)..."
"$PY" -m maturin build --profile dist --strip --zig --compatibility manylinux2014 \
  --interpreter "$PY" --out dist
"$PY" -m maturin sdist --out dist
echo "built in $(( $(date +%s) - started )) s"
ls -l dist
wheel=$(ls dist/*.whl)
# The import time of the release build, in a fresh venv that has only the wheel.
probe="$(mktemp -d)"
python3 -m venv "$probe/venv"
"$probe/venv/bin/python" -m pip install --quiet --disable-pip-version-check "$wheel"
(cd "$probe" && "$probe/venv/bin/python" - <<'PY'
import statistics, subprocess, sys
runs = []
for _ in range(7):
    out = subprocess.run([sys.executable, "-X", "importtime", "-c", "import secfindings"],
                         capture_output=True, text=True).stderr
    total = [l for l in out.splitlines() if l.rstrip().endswith("| secfindings")][-1]
    runs.append(int(total.split("|")[1]) / 1000)
print(f"import secfindings: {statistics.median(runs):.0f} ms (median of 7, -X importtime)")
PY
)
echo "wheel: $(basename "$wheel"), $(du -k "$wheel" | cut -f1) KiB"
rm -rf "$probe"

#!/usr/bin/env bash
# Benchmarks (make bench): secfindings against httpx, requests, gql and aiohttp, and a Rust floor.
# Usage: bash scripts/bench.sh [--quick] [--budget SECONDS] [--skip-memory]
# The baselines are installed into the venv for the benchmark only; they are not dependencies
# of the package. Results: benches/results/latest.{json,md}.
cd "$(dirname "$0")/.."
source scripts/_venv.sh
install_package
"$PY" -m pip install --quiet --disable-pip-version-check \
  httpx orjson requests "gql[requests,aiohttp,httpx]" aiohttp pyarrow pandas polars
# The floor: a small cargo project outside the workspace, with its own target dir.
cargo build --release --quiet --manifest-path benches/floor/Cargo.toml
"$PY" benches/bench.py "$@"
# Findings as data: DataFrames and exports (results/frames.md, or --output-dir).
"$PY" benches/frames.py "$@"
# Sequential latency on an idle and a loaded machine (results/latency.md).
"$PY" benches/latency.py "$@"
# The first call of a process with the live schema off, cold and warm (results/first_call.md).
"$PY" benches/first_call.py "$@"
# Live events: subscription latency and events per second against gql + aiohttp (results/events.md).
"$PY" benches/events.py "$@"

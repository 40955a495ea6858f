"""--jq: the jq PyPI binding (libjq in-process) against the jq binary (a process per command),
on the rows of `secfindings findings` (the emulator's, as to_dict gives them).

    .venv/bin/python benches/bench_jq.py

Prints the median of 5 runs for each way, per program: 1 row (one `finding ID`), 1,000 rows
(one `findings --limit 1000`), and the start-up cost of each."""

from __future__ import annotations

import json
import shutil
import statistics
import subprocess
import time

import jq

from secfindings._shell_output import jq_lines, jq_program
from secfindings.testing import Emulator

PROGRAMS = [".title", "{id: .id_int, severity}", "select(.severity >= 4) | [.id_int, .source] | @tsv"]


def median(fn, n: int = 5) -> float:
    times = []
    for _ in range(n):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    with Emulator(findings=1000, seed=7) as emu, emu.client() as client:
        rows = [f.to_dict() for f in client.findings_view()]
    text = "\n".join(json.dumps(r, default=str) for r in rows)
    binary = shutil.which("jq")
    print(f"binary {binary}; jq module {jq.__file__}")
    for program in PROGRAMS:
        compiled = jq_program(program)
        per_row = median(lambda c=compiled: [list(jq_lines(c, r)) for r in rows])
        one = median(lambda c=compiled: list(jq_lines(c, rows[0])), 50)
        line = f"{program!r}: binding 1 row {one * 1e6:.0f} us, 1000 rows {per_row * 1e3:.1f} ms"
        if binary:
            proc = median(
                lambda p=program: subprocess.run(
                    [binary, "-rc", p], input=text, capture_output=True, text=True, check=True
                )
            )
            proc_one = median(
                lambda p=program: subprocess.run(
                    [binary, "-rc", p],
                    input=json.dumps(rows[0], default=str),
                    capture_output=True,
                    text=True,
                    check=True,
                )
            )
            line += f"; binary 1 row {proc_one * 1e3:.1f} ms, 1000 rows {proc * 1e3:.1f} ms"
        print(line)


if __name__ == "__main__":
    main()

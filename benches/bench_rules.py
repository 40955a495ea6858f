"""Rules as code at 500 rules (200 scoring, 150 status, 150 ticket SLA rules): the time and the
API requests of each step, counted at the emulator (``stats()["api_requests"]``).

Steps, in one fresh emulator per round (in this process, loopback, 200 findings): plan the
500 creates, apply them, export, plan again (no change), drift, 50 rules changed by hand then
planned (50 updates) and applied. Drift runs against the export (every kind), since a drift
reports the seeded rules the 500 lack as objects not in the file. A round's client has made
its token exchange and read the schema before the first step (untimed). Medians of
``--rounds`` rounds. Requests are what a step costs over a real network: at a round trip of
L ms, a step takes at least requests x L.

Usage: python benches/bench_rules.py [--rounds N] [--output results/rules.md]
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from secfindings.testing import Emulator

HERE = Path(__file__).resolve().parent


def _doc() -> dict[str, Any]:
    sev = {"field": "severity", "condition": "in", "value": ["4", "5"]}
    return {
        "scoring_rules": {
            f"scoring {i:03}": {
                "method": "INCREASE",
                "value": 0.1,
                "priority": i,
                "filters_config": {"filtersjson": sev},
            }
            for i in range(200)
        },
        "status_rules": {
            f"status {i:03}": {"status_key": "30", "enabled": False, "priority": i} for i in range(150)
        },
        "ticket_sla_rules": {
            f"ticket {i:03}": {"days": 7 + i % 20, "provider_type": "JIRA"} for i in range(150)
        },
    }


def one_round() -> dict[str, tuple[float, int]]:
    out: dict[str, tuple[float, int]] = {}
    doc = _doc()
    with Emulator(findings=200, seed=7) as emu, emu.client() as c:
        c.rules.export(kinds="scope_hierarchy")  # token exchange, schema: untimed

        def step(name: str, fn: Callable[[], Any]) -> Any:
            emu.reset_stats()
            t = time.perf_counter()
            value = fn()
            out[name] = (time.perf_counter() - t, emu.stats()["api_requests"])
            return value

        plan = step("plan: 500 creates", lambda: c.rules.plan(doc))
        assert len(plan.actions) == 500
        step("apply: 500 creates", lambda: c.rules.apply(doc))
        text = step("export (every kind)", lambda: c.rules.export())
        assert "scoring 199" in text
        assert "ticket 149" in text
        again = step("plan: no change", lambda: c.rules.plan(doc))
        assert again.actions == []
        drift = step("drift of the export: none", lambda: c.rules.drift(text))
        assert drift.exit_code == 0
        for r in list(c.scoring_rules(name="scoring 0", fields="id name"))[:50]:
            c.edit_scoring_rule(r.id, {"value": 0.2})
        changed = step("plan: 50 hand changes", lambda: c.rules.plan(doc))
        assert len(changed.actions) == 50
        step("apply: 50 updates", lambda: c.rules.apply(doc))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--output", type=Path, default=HERE / "results" / "rules.md")
    args = ap.parse_args()
    started = time.time()
    rounds = [one_round() for _ in range(args.rounds)]
    lines = [
        f"# Rules as code at 500 rules on {platform.machine()}, {os.cpu_count()} cores, "
        f"Python {platform.python_version()}",
        "",
        "`benches/bench_rules.py`: one fresh emulator per round (in process, loopback, 200 findings); the "
        "rules are 200 scoring, 150 status and 150 ticket SLA rules. Requests counted at the emulator; "
        f"medians of {args.rounds} rounds.",
        "",
        "| step | requests | wall clock |",
        "|---|---:|---:|",
    ]
    for name in rounds[0]:
        t = statistics.median(r[name][0] for r in rounds)
        reqs = {r[name][1] for r in rounds}
        n = max(reqs)
        lines.append(f"| {name} | {n} | {t * 1000:,.0f} ms |")
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    lines += ["", f"Run took {time.time() - started:.0f} s; load average {load:.2f}."]
    text = "\n".join(lines) + "\n"
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(text, encoding="utf-8")
    sys.stdout.write(text)


if __name__ == "__main__":
    main()

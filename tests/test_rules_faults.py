"""Apply under faults (issue 33): a fault on the k-th mutation of the plan, k swept over every
position, for a 502, a reset connection and an answer later than the client's timeout, each
with the mutation not run and run (the emulator's ``applied=True``: the change is made, the
answer lost). The run stops or goes on after reading the object back; a rerun with the journal
finishes; every object exists once, and the emulator ran each mutation exactly once."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

import secfindings.rules as rules
from secfindings.testing import Emulator

EMU = {"findings": 20, "seed": 7}
#: The client's timeout in these tests, and the delay of the "timeout" fault (well beyond it).
TIMEOUT = 0.3
DELAY = 0.6


def _target(base: str) -> str:
    """A fresh emulator's rules with a change of every sort: creates of every kind (with
    references), an update, an enable, two deletes and the hierarchy saved."""
    data: dict[str, Any] = yaml.safe_load(base)
    data["filters"]["Team filter"] = {"filter": {"field": "severity", "condition": "in", "value": ["3"]}}
    del data["filters"]["Log4Shell"]
    data["scopes"]["On-prem"] = {
        "filter": {"field": "cloud_provider", "condition": "in", "value": ["OnPrem"]}
    }
    data["scope_groups"]["Platform"] = {"scopes": ["AWS", "On-prem"], "users": ["amy@acme.example"]}
    data["sla_groups"]["Crown jewels"] = {"priority": 5, "filters_config": {"filter": "Team filter"}}
    data["scoring_rules"]["Root access"] = {
        "method": "SET",
        "value": 9.0,
        "filters_config": {"filter": "Team filter", "scopes": "Platform"},
    }
    data["scoring_rules"]["Boost publicly exposed resources"]["value"] = 2.0
    data["scoring_rules"]["Lower dev environments"]["active"] = True
    data["status_rules"]["Close on-prem"] = {"status_key": "30", "enabled": False}
    data["sla_rules"]["Crown jewels 5"] = {"group": "Crown jewels", "severity": 5, "days": 2}
    del data["ticket_sla_rules"]["ServiceNow default"]
    text: str = yaml.safe_dump(data, sort_keys=False)
    return text


@pytest.fixture(scope="module")
def target(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, str, int]]:
    """The rules file, what a fault-free apply makes of it (the export), and its mutations."""
    with Emulator(**EMU) as emu, emu.client() as c:
        path = tmp_path_factory.mktemp("rules") / "rules.yaml"
        path.write_text(_target(c.rules.export()), encoding="utf-8")
        plan = c.rules.plan(path, prune=True)
        ops = sorted({a.op for a in plan.actions})
        assert ops == ["create", "delete", "enable", "save", "update"]
        emu.reset_stats()
        c.rules.apply(plan)
        assert emu.stats()["mutations_applied"] == len(plan.actions)
        yield path, c.rules.export(), len(plan.actions)


FAULTS = [
    pytest.param({"kind": "status", "status": 502}, id="502"),
    pytest.param({"kind": "reset"}, id="reset"),
    pytest.param({"kind": "delay", "delay": DELAY}, id="timeout"),
]


@pytest.mark.reliability_fault
@pytest.mark.parametrize("applied", [False, True], ids=["not-run", "run"])
@pytest.mark.parametrize("fault", FAULTS)
def test_fault_after_k_mutations(
    target: tuple[Path, str, int], fault: dict[str, Any], applied: bool, tmp_path: Path
) -> None:
    path, expected, n = target
    journal = tmp_path / "rules.journal"
    for k in range(n):
        with Emulator(**EMU) as emu, emu.client(timeout=TIMEOUT) as c:
            c.rules.export(kinds="scope_hierarchy")  # the token, the schema and the seeded hierarchy
            emu.reset_stats()
            emu.inject(**fault, after_mutations=k, applied=applied)
            try:
                first = c.rules.apply(path, prune=True, journal=journal)
            except rules.ApplyError as exc:
                assert not applied, f"k={k}: a change that was made must be read back, not stop the run"
                stopped = exc.result
                assert len(stopped.done) == k
                assert [ok for _a, ok in stopped.read_back] == [False]
                records = [json.loads(line) for line in journal.read_text(encoding="utf-8").splitlines()]
                assert records[-1]["step"] == k
                assert records[-1]["state"] == "not applied"
                second = c.rules.apply(path, prune=True, journal=journal)
                assert second.complete
                assert [r["step"] for r in second.previous] == [k]
                assert len(second.plan.actions) == n - k
            else:
                assert applied, f"k={k}: a change that was not made cannot have been read back as made"
                assert first.complete
                assert [ok for _a, ok in first.read_back] == [True]
            assert not journal.exists()
            assert emu.stats()["mutations_applied"] == n, f"k={k}: a mutation ran twice or not at all"
            assert c.rules.export() == expected  # every object once: an export refuses duplicates
            assert c.rules.plan(path, prune=True).actions == []


def test_a_crash_mid_mutation_and_a_rerun(target: tuple[Path, str, int], tmp_path: Path) -> None:
    """``secfindings rules apply`` killed (SIGKILL) while a mutation it sent is held by the server
    (run, its answer delayed): the journal shows that step sent with no outcome; a rerun
    reports it, plans afresh and finishes without making anything twice."""
    path, expected, n = target
    journal = tmp_path / "crash.journal"
    k = 3
    with Emulator(**EMU) as emu, emu.client() as c:
        c.rules.export(kinds="scope_hierarchy")
        emu.reset_stats()
        emu.inject("delay", delay=2.0, after_mutations=k, applied=True)
        env = {
            **os.environ,
            "SECFINDINGS_API_TOKEN": emu.create_api_token(),
            "SECFINDINGS_BASE_URL": emu.base_url,
            "SECFINDINGS_AUTH_URL": emu.auth_url,
        }
        args = [
            sys.executable,
            "-m",
            "secfindings",
            "rules",
            "apply",
            str(path),
            "--prune",
            "--journal",
            str(journal),
        ]
        proc = subprocess.Popen(args, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            deadline = time.monotonic() + 60  # a watchdog, not a timed assertion
            while emu.stats()["mutations_applied"] < k + 1 and time.monotonic() < deadline:
                time.sleep(0.01)
            assert emu.stats()["mutations_applied"] == k + 1
        finally:
            proc.kill()
            proc.wait()
        records = [json.loads(line) for line in journal.read_text(encoding="utf-8").splitlines()]
        assert records[-1] == {**records[-1], "step": k, "state": "sending"}
        result = c.rules.apply(path, prune=True, journal=journal)
        assert result.complete
        assert [r["step"] for r in result.previous] == [k]
        assert len(result.plan.actions) == n - k - 1  # the held mutation was made: not planned again
        assert emu.stats()["mutations_applied"] == n
        assert c.rules.export() == expected
        assert not journal.exists()

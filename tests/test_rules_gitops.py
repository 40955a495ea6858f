"""The rules guide's GitOps workflow (docs/guides/rules-as-code.md), its steps' shell run as
GitHub Actions runs them (bash -eo pipefail, a step summary file) against the emulator: a pull
request's plan passes with changes and with none and fails on a bad file, main's apply applies,
and the nightly drift fails the job on a change made by hand, with a Markdown summary."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tests.docs_code import ROOT, files

from secfindings.testing import Emulator

yaml = pytest.importorskip("yaml")

GUIDE = ROOT / "docs" / "guides" / "rules-as-code.md"


def _workflow() -> dict[str, Any]:
    (text,) = [b for b in re.findall(r"```yaml\n(.*?)```", GUIDE.read_text(), re.S) if "jobs:" in b]
    loaded: dict[str, Any] = yaml.safe_load(text)
    return loaded


def _step(name: str) -> str:
    (job,) = _workflow()["jobs"].values()
    (run,) = [s["run"] for s in job["steps"] if s.get("name", "").startswith(name)]
    return str(run)


@pytest.fixture(scope="module")
def emu() -> Iterator[Emulator]:
    with Emulator(findings=10, seed=7) as e:
        yield e


class Job:
    """A checkout with the guide's rules.yaml, and a step runner with the workflow's environment
    (the emulator's URL and a token for the secret)."""

    def __init__(self, emu: Emulator, folder: Path) -> None:
        self.folder = folder
        self.summary = folder / "summary.md"
        (rules,) = [f for f in files(GUIDE) if f.reason == "rules.yaml"]
        (folder / "rules.yaml").write_text(rules.text, encoding="utf-8")
        keep = {"SECFINDINGS_SCHEMA_CACHE", "SECFINDINGS_BUDGET_DIR"}
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("SECFINDINGS_") or k in keep}
        self.env.update(
            SECFINDINGS_API_TOKEN=emu.create_api_token("gitops"),
            SECFINDINGS_BASE_URL=emu.base_url,
            SECFINDINGS_AUTH_URL=emu.auth_url,
            GITHUB_STEP_SUMMARY=str(self.summary),
            PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
        )

    def run(self, step: str) -> tuple[int, str]:
        """The step's exit code and what it added to the summary."""
        self.summary.write_text("", encoding="utf-8")
        done = subprocess.run(
            ["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", _step(step)],
            cwd=self.folder,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
        return done.returncode, self.summary.read_text(encoding="utf-8")


def test_the_workflow_plans_applies_and_checks_drift(emu: Emulator, tmp_path: Path) -> None:
    job = Job(emu, tmp_path)
    code, summary = job.run("plan")
    assert code == 0, summary  # changes pass the pull request's job
    assert summary.startswith("~~~text\n~ update scoring rule 'Boost publicly exposed resources'\n")
    assert summary.endswith("Plan: 1 to update, 1 to create.\n~~~\n")
    good = (tmp_path / "rules.yaml").read_text(encoding="utf-8")
    (tmp_path / "rules.yaml").write_text(good.replace("method: SET", "methd: SET", 1), encoding="utf-8")
    assert job.run("plan")[0] != 0  # a bad file fails it
    (tmp_path / "rules.yaml").write_text(good, encoding="utf-8")
    assert job.run("apply")[0] == 0
    assert job.run("plan") == (0, "~~~text\nNo changes: the server matches the file.\n~~~\n")
    assert job.run("drift")[0] == 0
    with emu.client() as client:
        (rule,) = client.scoring_rules(name="Crown jewels", fields="id name")
        client.edit_scoring_rule(rule.id, {"value": 7.0})
    code, summary = job.run("drift")
    assert code == 2  # the nightly job fails
    assert summary.startswith("**Drift**: 1 object(s) differ from the file.\n")

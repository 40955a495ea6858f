"""Rules as code (issue 33) over real HTTP against two emulators: export from A, apply to a fresh
B, export B byte for byte; a hand change on B seen by drift, planned as one update and undone by
apply; the CLI's exit codes."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml
from click.testing import CliRunner

import secfindings.rules as rules
from secfindings import Client
from secfindings._cli_rules import KINDS
from secfindings.cli import main
from secfindings.rules._jsonschema import text as schema_text
from secfindings.testing import Emulator

EMU = {"findings": 60, "seed": 7}


def _mutate(client: Client, doc: str, variables: dict[str, Any]) -> dict[str, Any]:
    data = client.execute(doc, variables)
    (answer,) = data.values()
    assert answer["ok"] is True
    return dict(answer)


def _setup_a(c: Client) -> None:
    """Objects of every kind on A, with references between them, made by direct mutations."""
    ids: dict[str, str] = {}
    for name, scope, filt in [
        ("Team filter", False, {"field": "severity", "condition": "in", "value": ["3"]}),
        ("On-prem", True, {"field": "cloud_provider", "condition": "in", "value": ["OnPrem"]}),
    ]:
        op, arg = (
            ("new_finding_scope_v2", "finding_scope")
            if scope
            else ("new_finding_filter_v2", "finding_filter")
        )
        res = _mutate(
            c,
            f"mutation M($i: FindingFilterInput!) {{ {op}({arg}: $i) {{ ok {arg} {{ id }} }} }}",
            {"i": {"name": name, "filter": json.dumps(filt), "description": f"{name} (test)"}},
        )
        ids[name] = res[arg]["id"]
    aws = next(f.id for f in c.finding_filters(type="SCOPE", fields="id name") if f.name == "AWS")
    grp = _mutate(
        c,
        "mutation M($s: [ID], $u: [String]) "
        '{ create_scope_group(name: "Platform", scope_ids: $s, users: $u) { ok scope_group { id } } }',
        {"s": [ids["On-prem"], aws], "u": ["zed@acme.example", "amy@acme.example"]},
    )["scope_group"]["id"]
    sla = _mutate(
        c,
        "mutation M($fc: FiltersConfigInput) "
        '{ add_sla_group(name: "Crown jewels", priority: 5, filters_config: $fc) { ok sla_group { id } } }',
        {"fc": {"filtersid": ids["Team filter"], "scope_group": grp}},
    )["sla_group"]["id"]
    fc = {
        "filtersjson": json.dumps({"field": "title", "condition": "contains", "value": "root"}),
        "scopesid": grp,
        "filters_fields_to_exclude": ["severity", "age"],
    }
    _mutate(
        c,
        "mutation M($r: ScoringRuleInput!) { add_scoring_rule(scoring_rule: $r) { ok } }",
        {
            "r": {
                "name": "Root access",
                "method": "MULTIPLY",
                "value": 1.5,
                "filters_config": fc,
                "priority": 7,
                "active": False,
            }
        },
    )
    _mutate(
        c,
        "mutation M($r: StatusRuleInput!) { add_status_rule(status_rule: $r) { ok } }",
        {
            "r": {
                "name": "Ignore on-prem",
                "status_key": "30",
                "enabled": False,
                "filters_config": {"filtersid": ids["Team filter"]},
            }
        },
    )
    _mutate(
        c,
        "mutation M($r: SLARuleInput!) { add_sla_rule(sla_rule: $r) { ok } }",
        {"r": {"name": "Crown jewels 5", "sla_group_id": sla, "severity": 5, "days": 2, "at_risk_days": 1}},
    )
    _mutate(
        c,
        "mutation M($r: TicketSLAInput!) { add_ticket_sla_rule(ticket_sla: $r) { ok } }",
        {"r": {"name": "Monday board", "days": 12, "provider_type": "MONDAY", "description": "multi\nline"}},
    )
    publicly = next(
        f.id for f in c.finding_filters(type="FILTER", fields="id name") if f.name == "Publicly exposed"
    )
    c.delete_finding_filter_v2(publicly)
    c.save_scope_hierarchy()


@pytest.fixture(scope="module")
def pair() -> Iterator[tuple[Emulator, Emulator]]:
    with Emulator(**EMU) as a, Emulator(**EMU) as b:
        with a.client() as c:
            _setup_a(c)
        yield a, b


def _env(emu: Emulator) -> dict[str, str]:
    return {
        "SECFINDINGS_API_TOKEN": emu.create_api_token(),
        "SECFINDINGS_BASE_URL": emu.base_url,
        "SECFINDINGS_AUTH_URL": emu.auth_url,
    }


def test_round_trip_every_kind(pair: tuple[Emulator, Emulator], tmp_path: Path) -> None:
    a, b = pair
    with a.client() as ca, b.client() as cb:
        exported = ca.rules.export()
        assert ca.rules.export() == exported  # byte-stable
        data = yaml.safe_load(exported)
        for key in rules.ALL_KINDS:
            assert data[key], key  # every kind is covered
        assert data["scope_groups"]["Platform"] == {
            "scopes": ["AWS", "On-prem"],
            "users": ["amy@acme.example", "zed@acme.example"],
        }
        assert data["sla_groups"]["Crown jewels"]["filters_config"] == {
            "filter": "Team filter",
            "scope_group": "Platform",
        }
        assert data["scoring_rules"]["Root access"]["filters_config"]["filters_fields_to_exclude"] == [
            "age",
            "severity",
        ]
        assert data["scope_hierarchy"] == {"saved": True}
        assert " id:" not in exported
        assert "created_time" not in exported
        assert "affected_findings" not in exported
        jsonschema.validate(data, rules.json_schema())

        path = tmp_path / "rules.yaml"
        path.write_text(exported, encoding="utf-8")
        p = cb.rules.plan(path, prune=True)
        assert p.exit_code == 2
        ops = [(x.op, x.kind, x.name) for x in p.actions]
        assert ("delete", "filters", "Publicly exposed") in ops
        # dependency order: what a reference names comes first, deletes and the hierarchy last
        kinds = [k for _, k, _ in ops]
        assert (
            kinds.index("scopes")
            < kinds.index("scope_groups")
            < kinds.index("sla_groups")
            < kinds.index("sla_rules")
        )
        assert ops[-1] == ("save", "scope_hierarchy", "")
        b.reset_stats()
        result = cb.rules.apply(path, prune=True)
        assert result.complete
        assert result.mutations == len(p.actions)
        assert cb.rules.export() == exported
        again = cb.rules.plan(path, prune=True)
        assert again.actions == []
        assert again.exit_code == 0

        res = CliRunner().invoke(main, ["rules", "plan", str(path), "--prune"], env=_env(b))
        assert res.exit_code == 0, res.output
        assert res.output == "No changes: the server matches the file.\n"
        res = CliRunner().invoke(main, ["rules", "export"], env=_env(b))
        assert res.exit_code == 0
        assert res.output == exported


def test_hand_change_drift_plan_apply(pair: tuple[Emulator, Emulator], tmp_path: Path) -> None:
    a, b = pair
    with a.client() as ca, b.client() as cb:
        exported = ca.rules.export()
        path = tmp_path / "rules.yaml"
        path.write_text(exported, encoding="utf-8")
        cb.rules.apply(path, prune=True)
        rule = next(r for r in cb.ticket_sla_rules(fields="id name") if r.name == "Monday board")
        cb.edit_ticket_sla_rule(rule.id, {"days": 40})  # by hand, as in the web app

        d = cb.rules.drift(path)
        assert d.exit_code == 2
        assert [x.to_dict() for x in d.items] == [
            {
                "kind": "ticket_sla_rules",
                "name": "Monday board",
                "state": "changed",
                "fields": [{"field": "days", "server": 40, "file": 12}],
            }
        ]
        env = _env(b)
        res = CliRunner().invoke(main, ["rules", "drift", str(path)], env=env)
        assert res.exit_code == 2
        assert res.output == (
            "ticket SLA rule 'Monday board': changed on the server\n"
            "    days: server 40, file 12\n"
            "Drift: 1 object(s) differ from the file.\n"
        )
        res = CliRunner().invoke(main, ["rules", "drift", str(path), "--format", "markdown"], env=env)
        assert res.exit_code == 2
        assert (
            "| `ticket SLA rule 'Monday board': changed on the server` | days | `40` | `12` |" in res.output
        )
        res = CliRunner().invoke(main, ["rules", "drift", str(path), "--format", "json"], env=env)
        assert res.exit_code == 2
        assert json.loads(res.output)["items"] == [x.to_dict() for x in d.items]

        res = CliRunner().invoke(main, ["rules", "plan", str(path), "--format", "json"], env=env)
        assert res.exit_code == 2
        plan = json.loads(res.output)
        assert plan["actions"] == [
            {
                "op": "update",
                "kind": "ticket_sla_rules",
                "name": "Monday board",
                "id": rule.id,
                "changes": [{"field": "days", "before": 40, "after": 12}],
            }
        ]
        res = CliRunner().invoke(main, ["rules", "apply", str(path)], env=env)
        assert res.exit_code == 0, res.output
        done = "done: update ticket SLA rule 'Monday board'\n"
        assert res.output == done + "Applied 1 of 1 change (1 mutation, 2 requests).\n"
        assert not (tmp_path / "rules.yaml.journal").exists()
        assert cb.rules.drift(path).exit_code == 0
        assert cb.rules.export() == exported


def test_enable_disable_and_unmanaged(pair: tuple[Emulator, Emulator], tmp_path: Path) -> None:
    _a, b = pair
    with b.client() as cb:
        data = yaml.safe_load(cb.rules.export(kinds="scoring_rules"))
        assert list(data) == ["version", "scoring_rules"]
        was = data["scoring_rules"]["Lower dev environments"]["active"]
        data["scoring_rules"]["Lower dev environments"]["active"] = not was
        del data["scoring_rules"]["Boost publicly exposed resources"]
        p = cb.rules.plan(data)
        assert [(x.op, x.name) for x in p.actions] == [
            ("enable" if not was else "disable", "Lower dev environments")
        ]
        assert p.unmanaged == [("scoring_rules", "Boost publicly exposed resources")]
        assert (
            "not in the file, kept (--prune deletes them): scoring rule 'Boost publicly exposed resources'"
            in p.to_text()
        )
        cb.rules.apply(p)
        assert cb.rules.plan(data).actions == []
        data["scoring_rules"]["Lower dev environments"]["active"] = was
        cb.rules.apply(data)


def test_schema_file_is_generated() -> None:
    shipped = Path(rules.__file__).with_name("schema.json").read_text(encoding="utf-8")
    assert shipped == schema_text()
    res = CliRunner().invoke(main, ["rules", "schema"])
    assert res.exit_code == 0
    assert json.loads(res.output) == json.loads(shipped)


def test_cli_and_client_load_the_package_on_first_use() -> None:
    assert KINDS == rules.ALL_KINDS
    code = "import sys, secfindings.cli; print('secfindings.rules' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout == "False\n"


def test_known_profile_round_trip(tmp_path: Path) -> None:
    """The fields rules as code reads are served by the profile of only what the public facts
    show too: its export plans as no change, and a change applies."""
    with Emulator(findings=20, seed=7, profile="known") as emu, emu.client() as c:
        exported = c.rules.export()
        assert c.rules.plan(exported, prune=True).actions == []
        data = yaml.safe_load(exported)
        data["ticket_sla_rules"]["Jira critical tickets"]["days"] = 5
        data["status_rules"]["Triage new criticals"]["enabled"] = False
        assert [(a.op, a.name) for a in c.rules.plan(data).actions] == [
            ("disable", "Triage new criticals"),
            ("update", "Jira critical tickets"),
        ]
        path = tmp_path / "rules.yaml"
        path.write_text(yaml.safe_dump(data), encoding="utf-8")
        res = CliRunner().invoke(
            main, ["rules", "apply", str(path), "--dry-run", "--format", "json"], env=_env(emu)
        )
        assert res.exit_code == 2
        assert [a["op"] for a in json.loads(res.output)["actions"]] == ["disable", "update"]
        res = CliRunner().invoke(main, ["rules", "apply", str(path), "--format", "json"], env=_env(emu))
        assert res.exit_code == 0, res.output
        assert json.loads(res.output)["complete"] is True
        out = tmp_path / "again.yaml"
        res = CliRunner().invoke(main, ["rules", "export", "--out", str(out)], env=_env(emu))
        assert res.exit_code == 0
        assert res.output == ""
        assert yaml.safe_load(out.read_text(encoding="utf-8")) == data

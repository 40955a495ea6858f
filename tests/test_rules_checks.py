"""Rules as code refusing what it cannot do safely (issue 33): names two objects share on the
server, a key given twice in the file, references to names that do not exist, a cycle, unknown
fields, changes the API has no mutation for, PyYAML missing: one-line errors, and no mutation
sent (the emulator's request log). And the request count of plan and apply at 500 rules."""

from __future__ import annotations

import math
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner
from tests.servers.proxy import LyingProxy

import secfindings.rules as rules
from secfindings import Client
from secfindings.cli import main
from secfindings.rules import _live as rules_live
from secfindings.rules._plan import order
from secfindings.testing import Emulator


@pytest.fixture(scope="module")
def emu() -> Iterator[Emulator]:
    with Emulator(findings=20, seed=7) as e:
        yield e


@pytest.fixture
def client(emu: Emulator) -> Iterator[Client]:
    with emu.client() as c:
        yield c


def _env(emu: Emulator) -> dict[str, str]:
    return {
        "SECFINDINGS_API_TOKEN": emu.create_api_token(),
        "SECFINDINGS_BASE_URL": emu.base_url,
        "SECFINDINGS_AUTH_URL": emu.auth_url,
    }


def _mutations(emu: Emulator) -> list[dict[str, Any]]:
    return [r for r in emu.request_log() if r["query"].lstrip().startswith("mutation")]


RULE = {"method": "SET", "value": 5.0}


@pytest.mark.parametrize(
    ("doc", "message"),
    [
        ({"scoring_rule": {}}, "scoring_rule: unknown kind (did you mean 'scoring_rules'?)"),
        (
            {"scoring_rules": {"R": {**RULE, "methd": "SET"}}},
            "scoring_rules.R.methd: unknown field of a scoring rule (did you mean 'method'?)",
        ),
        (
            {"scoring_rules": {"R": {**RULE, "filters_config": {"filtersjsn": {}}}}},
            "scoring_rules.R.filters_config.filtersjsn: unknown key of a filters_config "
            "(did you mean 'filtersjson'?)",
        ),
        ({"scoring_rules": {"R": {"value": 1.0}}}, "scoring_rules.R: method is required for a scoring rule"),
        (
            {"scoring_rules": {"R": {**RULE, "method": "set"}}},
            "scoring_rules.R.method: 'set' is not one of SET, INCREASE, DECREASE, MULTIPLY "
            "(did you mean 'SET'?)",
        ),
        (
            {"scoring_rules": {"R": {**RULE, "value": "high"}}},
            "scoring_rules.R.value: must be a finite number, not a string",
        ),
        (
            {"sla_rules": {"S": {"severity": 5, "days": True, "group": "Default"}}},
            "sla_rules.S.days: must be a whole number, not a boolean",
        ),
        (
            {"scoring_rules": {12: RULE}},
            "scoring_rules: the name 12 is a number: names are text, quote it ('12')",
        ),
        (
            {
                "filters": {"Log4Shel": {"filter": {}}},
                "scoring_rules": {"R": {**RULE, "filters_config": {"filter": "Log4Shell"}}},
            },
            "scoring_rules.R.filters_config.filter: no filter named 'Log4Shell' in the file "
            "(did you mean 'Log4Shel'?)",
        ),
        (
            {"scopes": {}, "scope_groups": {"G": {"scopes": ["AWS"]}}},
            "scope_groups.G.scopes: no scope named 'AWS' in the file",
        ),
        ({"scope_hierarchy": {"save": True}}, "scope_hierarchy.save: unknown field (did you mean 'saved'?)"),
        ({"version": 2}, "version: this version of secfindings reads version 1, not 2"),
    ],
)
def test_bad_files_are_one_line_errors_before_any_request(
    emu: Emulator, client: Client, doc: Any, message: str
) -> None:
    emu.clear_request_log()
    with pytest.raises(rules.RulesError) as info:
        client.rules.plan(doc)
    assert str(info.value) == f"rules file: {message}"
    assert emu.request_log() == []


def test_cli_one_line_error_exit_2_nothing_sent(emu: Emulator, tmp_path: Path) -> None:
    path = tmp_path / "rules.yaml"
    path.write_text(
        "scoring_rules:\n  R:\n    method: SET\n    value: 1.0\n  R:\n    method: SET\n    value: 2.0\n",
        encoding="utf-8",
    )
    emu.clear_request_log()
    for command in ("plan", "apply", "drift"):
        res = CliRunner().invoke(main, ["rules", command, str(path)], env=_env(emu))
        assert res.exit_code == 2
        assert (
            res.output
            == f"error: {path}: line 5: 'R' is given twice in one mapping (names are unique per kind)\n"
        )
    assert _mutations(emu) == []


def test_names_two_objects_share_on_the_server(emu: Emulator, client: Client) -> None:
    for _ in range(2):
        client.add_scoring_rule({"name": "Twin", "method": "SET", "value": 1.0})
    try:
        emu.clear_request_log()
        with pytest.raises(rules.RulesError) as info:
            client.rules.plan({"scoring_rules": {"Twin": RULE}})
        assert "2 scoring rules are named 'Twin' on the server (ids " in str(info.value)
        assert "rules as code never guesses between them" in str(info.value)
        with pytest.raises(rules.RulesError, match="2 scoring rules are named 'Twin'"):
            client.rules.apply({"scoring_rules": {}}, prune=True)
        with pytest.raises(rules.RulesError, match="an export keyed by name cannot hold both"):
            client.rules.export(kinds="scoring_rules")
        # a file that leaves the name alone plans, with a warning
        plan = client.rules.plan({"scoring_rules": {}})
        assert plan.warnings == ["2 scoring rules are named 'Twin' on the server"]
        res = CliRunner().invoke(main, ["rules", "export"], env=_env(emu))
        assert res.exit_code == 2
        assert res.output.count("\n") == 1
        assert res.output.startswith("error: 2 scoring rules are named 'Twin'")
        assert _mutations(emu) == []
    finally:
        for r in client.scoring_rules(name="Twin", fields="id name"):
            client.delete_scoring_rule(r.id)


def test_reference_to_a_name_missing_on_the_server(emu: Emulator, client: Client) -> None:
    emu.clear_request_log()
    doc = {"scoring_rules": {"R": {**RULE, "filters_config": {"filter": "Log4Shel", "scopes": "Nobody"}}}}
    with pytest.raises(rules.RulesError) as info:
        client.rules.apply(doc)
    assert str(info.value) == (
        "scoring_rules.'R'.filters_config.filter: no filter named 'Log4Shel' on the server "
        "(did you mean 'Log4Shell'?) (and 1 more)"
    )
    assert _mutations(emu) == []


def test_cycle_is_named() -> None:
    """The kinds' references cannot make a cycle today (filters and scopes name nothing, scope
    groups name scopes, rules and SLA groups name filters and scope groups); the ordering
    that plan uses still refuses one rather than loop or drop a node."""
    assert order({"a": ("b",), "b": (), "c": ("a", "b")}) == ["b", "a", "c"]
    with pytest.raises(rules.RulesError, match=r"^a cycle of references: a -> b -> c -> a$"):
        order({"a": ("b",), "b": ("c",), "c": ("a",)})


def test_changes_the_api_cannot_make(emu: Emulator, client: Client) -> None:
    data = yaml.safe_load(client.rules.export(kinds="sla_groups"))
    data["sla_groups"]["Default"]["priority"] = 3
    plan = client.rules.plan(data)
    assert [(a.op, a.name) for a in plan.actions] == [("unsupported", "Default")]
    assert "! cannot change SLA group 'Default'\n    priority: 100 -> 3\n" in plan.to_text()
    assert plan.to_text().endswith("\nPlan: 1 the API cannot change.\n")  # was "1 to unsupported"
    emu.clear_request_log()
    with pytest.raises(rules.RulesError, match="nothing was sent"):
        client.rules.apply(data)
    assert _mutations(emu) == []


def test_pyyaml_missing_names_the_extra(monkeypatch: pytest.MonkeyPatch, client: Client) -> None:
    monkeypatch.setitem(sys.modules, "yaml", None)
    with pytest.raises(ImportError, match=r"pip install 'secfindings\[rules\]'"):
        client.rules.export()


def test_500_rules_requests(tmp_path: Path) -> None:
    """Plan and apply of 500 rules: the reads come in pages of every kind at once (one request
    for the first page of each, one per further page), one request per mutation."""
    n = 500
    doc = {
        "scoring_rules": {
            f"rule {i:03}": {"method": "INCREASE", "value": 0.1, "priority": i} for i in range(n)
        }
    }
    with Emulator(findings=20, seed=7) as emu, emu.client() as c:
        c.rules.export(kinds="scope_hierarchy")  # the token and the schema, outside the counts
        emu.reset_stats()
        plan = c.rules.plan(doc)
        assert plan.live.requests == 1
        assert emu.stats()["api_requests"] == 1
        assert len(plan.actions) == n
        emu.reset_stats()
        result = c.rules.apply(doc)
        assert result.complete
        assert result.mutations == n
        assert emu.stats()["api_requests"] == result.requests == 1 + n
        emu.reset_stats()
        again = c.rules.plan(doc)
        pages = math.ceil((n + 3) / 100)  # and the 3 seeded rules
        assert again.actions == []
        assert again.live.requests == pages == emu.stats()["api_requests"]


def test_fields_left_out_of_the_file_are_cleared(emu: Emulator, client: Client) -> None:
    """An edit that sends null keeps the field (the emulator's mutations, as graphene's
    ``if value is not None``): a description is cleared with "", and a rule whose enum field
    (round_function) goes is replaced. Before, the second plan still showed both."""
    data = yaml.safe_load(client.rules.export(kinds="scope_groups,scoring_rules"))
    before = yaml.safe_load(client.rules.export(kinds="scope_groups,scoring_rules"))
    try:
        del data["scope_groups"]["AppSec"]["description"]
        data["scope_groups"]["AppSec"]["users"] = []
        del data["scoring_rules"]["Lower dev environments"]["round_function"]
        plan = client.rules.plan(data)
        assert [(a.op, a.name) for a in plan.actions] == [
            ("update", "AppSec"),
            ("replace", "Lower dev environments"),
        ]
        assert (
            "-/+ replace scoring rule 'Lower dev environments'\n    round_function: \"ROUND\" -> (none)\n"
            in plan.to_text()
        )
        result = client.rules.apply(data)
        assert result.mutations == 3  # an edit, a delete and a create
        assert client.rules.plan(data).actions == []
    finally:
        client.rules.apply(before)
    assert client.rules.plan(before).actions == []


def test_a_saved_filter_reference_may_name_a_scope(emu: Emulator, client: Client) -> None:
    doc = {"scoring_rules": {"On AWS": {**RULE, "filters_config": {"filter": "AWS"}}}}
    try:
        client.rules.apply(doc)
        exported = yaml.safe_load(client.rules.export(kinds="scopes,scoring_rules"))
        assert exported["scoring_rules"]["On AWS"]["filters_config"] == {"filter": "AWS"}
        assert client.rules.plan(exported).actions == []
    finally:
        for r in client.scoring_rules(name="On AWS", fields="id name"):
            client.delete_scoring_rule(r.id)


LAUGHS = "a: &a [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"{chr(98 + i)}: &{chr(98 + i)} [{', '.join([f'*{chr(97 + i)}'] * 10)}]\n" for i in range(8)
)


@pytest.mark.reliability_input
@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "scoring_rules:\n  R:\n    method: SET\n    value: 1\n    filters_config:\n      filtersjson:\n"
            "        " + LAUGHS.replace("\n", "\n        ").rstrip() + "\n",
            "line 8: an alias (*a): a rules file has none",
        ),
        ("filters:\n  F:\n    filter: &f {operands: [*f]}\n", "line 3: an alias (*f): a rules file has none"),
        (
            "filters:\n  F:\n    filter: {field: discovered_time, condition: gt, value: 2026-01-01}\n",
            "filters.F.filter: holds a value JSON cannot (Object of type date is not JSON serializable): "
            "quote dates, leave out .nan and .inf",
        ),
        (
            "filters:\n  F:\n    filter: {field: score, condition: gt, value: .nan}\n",
            "filters.F.filter: holds a value JSON cannot (Out of range float values are not JSON compliant): "
            "quote dates, leave out .nan and .inf",
        ),
        ("filters:\n  F:\n    filter: '" + "[" * 50_000 + "'\n", "filters.F.filter: nests too deep"),
    ],
    ids=["billion-laughs", "self-containing", "date", "nan", "deep-json"],
)
def test_hostile_files_are_one_line_errors(emu: Emulator, client: Client, text: str, message: str) -> None:
    emu.clear_request_log()
    with pytest.raises(rules.RulesError) as info:
        client.rules.plan(text)
    assert str(info.value) == f"rules file: {message}"
    assert emu.request_log() == []


def test_broken_yaml_names_its_line(client: Client) -> None:
    with pytest.raises(rules.RulesError) as info:
        client.rules.plan("scoring_rules:\n  R: [1,\n")
    assert str(info.value).startswith("rules file: line 3: not YAML: ")  # libyaml's words or PyYAML's
    assert "\n" not in str(info.value)


def test_a_file_that_is_not_utf8(emu: Emulator, tmp_path: Path) -> None:
    path = tmp_path / "rules.yaml"
    path.write_bytes(b"filters:\n  \xff: {}\n")
    res = CliRunner().invoke(main, ["rules", "plan", str(path)], env=_env(emu))
    assert res.exit_code == 2
    assert res.output == f"error: {path}: not UTF-8 text (invalid start byte at byte 11)\n"


def test_lying_servers(emu: Emulator, monkeypatch: pytest.MonkeyPatch) -> None:
    """An answer `ok: true` without the new object: its id is read back before a reference
    needs it. A server that pages without end (a fresh cursor each time) is stopped."""
    doc = {
        "scopes": {"Lab": {"filter": {"field": "cloud_provider", "condition": "in", "value": ["Lab"]}}},
        "scope_groups": {"Lab group": {"scopes": ["Lab"]}},
    }

    def no_object(body: dict[str, Any], answer: Any) -> Any:
        data = answer.get("data") or {}
        if "new_finding_scope_v2" in data:
            data["new_finding_scope_v2"]["finding_scope"] = None
        return answer

    with LyingProxy(emu) as proxy, proxy.client() as c:
        proxy.answer = no_object
        base = yaml.safe_load(c.rules.export(kinds="scopes,scope_groups"))
        try:
            result = c.rules.apply({k: {**base[k], **doc[k]} for k in doc})
            assert result.complete
            assert result.requests == 1 + 1 + 1 + 1  # plan, create, read back, create
            assert yaml.safe_load(c.rules.export(kinds="scope_groups"))["scope_groups"]["Lab group"] == {
                "scopes": ["Lab"]
            }
        finally:
            c.rules.apply(base, prune=True)

        def endless(body: dict[str, Any], answer: Any) -> Any:
            conn = (answer.get("data") or {}).get("rules_scoring_rules")
            if conn:
                conn["pageInfo"] = {"hasNextPage": True, "endCursor": f"c{len(proxy.forwarded)}"}
            return answer

        proxy.answer = endless
        monkeypatch.setattr(rules_live, "MAX_OBJECTS", 300)  # 100,000 in use: 1,000 pages here
        with pytest.raises(rules.RulesError, match=r"has more than 300 objects; stopped"):
            c.rules.plan({"scoring_rules": {}})

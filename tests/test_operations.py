"""One test per catalog operation, on Client and on AsyncClient, over real HTTP to the emulator
(and the typed calls' errors, resumes and argument checks for both clients).

Each scenario calls the typed method with arguments whose effect is visible (a filter narrows
the result, an edit changes what a later read returns), checks that the variables reached the
server (the emulator's request log), and that the result comes back as the typed model.
"""

from __future__ import annotations

import inspect
import re
import subprocess
import sys
import warnings
from collections.abc import Callable, Iterator
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest
from tests.clients import Either

import secfindings
from secfindings import AsyncPaginator, ValidationError
from secfindings import models as m
from secfindings._native import catalog
from secfindings.testing import Emulator

# A copy of the specification lives in the repo, so the coverage test runs on any clean clone.
SPEC = Path(__file__).resolve().parents[1] / "docs" / "spec" / "000_ae588f3714ae6803.txt"
OPS = {op["name"]: op for op in catalog()}


class _Pager:
    """An AsyncPaginator driven from synchronous test code."""

    def __init__(self, pager: AsyncPaginator[Any], either: Either) -> None:
        self._pager, self._either = pager, either

    def to_list(self) -> list[Any]:
        return self._either.run(self._pager.to_list())

    def __iter__(self) -> Iterator[Any]:
        return iter(self._either.items(self._pager))

    @property
    def cursor(self) -> str | None:
        return self._pager.cursor


class Api:
    """The same scenario code drives both clients (the `either` fixture, tests/clients.py): calls
    of the async client are run to completion here."""

    def __init__(self, either: Either) -> None:
        self._either = either

    def __getattr__(self, name: str) -> Callable[..., Any]:
        fn = getattr(self._either.client, name)

        def call(*args: Any, **kwargs: Any) -> Any:
            result = fn(*args, **kwargs)
            if isinstance(result, AsyncPaginator):
                return _Pager(result, self._either)
            return self._either.run(result)

        return call


@pytest.fixture
def api(either: Either) -> Api:
    # The scenarios assert each operation's own request (its name and the variables the server
    # sees), so their walks read one page per request; tests/test_batched_connections.py reads
    # the same connections in batches (``<name>_pages``, the default).
    either.client.pages_per_request = 1
    return Api(either)


def sent(emulator: Emulator, operation: str) -> list[dict[str, Any]]:
    """The variables of every request the emulator received for `operation`."""
    return [r["variables"] for r in emulator.request_log() if r["operation_name"] == operation]


SCENARIOS: dict[str, Callable[[Api, Emulator], None]] = {}


def scenario(*names: str) -> Callable[[Callable[[Api, Emulator], None]], Callable[[Api, Emulator], None]]:
    def register(fn: Callable[[Api, Emulator], None]) -> Callable[[Api, Emulator], None]:
        for n in names:
            SCENARIOS[n] = fn
        return fn

    return register


# ---------------------------------------------------------------- queries


@scenario("finding")
def _finding(api: Api, emu: Emulator) -> None:
    f = api.finding(7)
    assert isinstance(f, m.Finding)
    assert f.id_int == 7
    assert isinstance(f.discovered_time, datetime)
    assert f.discovered_time.tzinfo is not None
    assert isinstance(f.finding_score, m.FindingScore)
    assert isinstance(f.finding_score.score, float)
    assert isinstance(f.datasource.friendly_name, str)
    assert isinstance(f.main_resource, m.CHResource)
    same = api.finding(secfindings.to_global_id("Finding", 7))
    assert same == f
    assert sent(emu, "finding")[0] == {"id": 7}
    with pytest.raises(secfindings.GraphQLError, match="does not exist") as e:
        api.finding(999_999)
    assert e.value.errors[0]["path"] == ["finding"]


@scenario("findings_view")
def _findings_view(api: Api, emu: Emulator) -> None:
    tree = {"field": "severity", "condition": "in", "value": ["4"]}
    pager = api.findings_view(
        filters=tree, sort=["SCORE_DESC"], page_size=10, limit=25, fields="id id_int severity score"
    )
    items = pager.to_list()
    assert len(items) == 25
    assert all(isinstance(i, m.FindingsView) for i in items)
    assert {i.severity for i in items} == {4}
    scores = [i.score for i in items]
    assert scores == sorted(scores, reverse=True)
    pages = sent(emu, "findings_view")
    assert [p["first"] for p in pages] == [10, 10, 5]
    for p in pages:
        assert p["sort"] == ["SCORE_DESC"]
        assert p["filters_config"]["filtersjson"] == '{"field":"severity","condition":"in","value":["4"]}'


@scenario("finding_filters")
def _finding_filters(api: Api, emu: Emulator) -> None:
    scopes = api.finding_filters(type="SCOPE", fields="id name type filter").to_list()
    assert scopes
    assert {s.type for s in scopes} == {"SCOPE"}
    assert all(isinstance(s, m.FindingFilter) for s in scopes)
    # JSONString comes back decoded.
    assert isinstance(scopes[0].filter, dict)
    assert sent(emu, "finding_filters")[0]["type"] == "SCOPE"


@scenario("get_resources")
def _get_resources(api: Api, emu: Emulator) -> None:
    with pytest.warns(DeprecationWarning, match=r"get_resources\(\) is deprecated.*get_resources_ch\(\)"):
        pager = api.get_resources(cloud_provider="AWS", fields="id cloud_provider resource_name")
    items = pager.to_list()
    assert items
    assert {r.cloud_provider for r in items} == {"AWS"}
    assert isinstance(items[0], m.CHResource)
    assert sent(emu, "get_resources")[0]["cloud_provider"] == "AWS"


@scenario("get_resources_ch")
def _get_resources_ch(api: Api, emu: Emulator) -> None:
    items = api.get_resources_ch(
        cloud_provider=["GCP"], has_findings=True, fields="id cloud_provider findings_count last_seen"
    ).to_list()
    assert items
    assert all(r.cloud_provider == "GCP" and r.findings_count > 0 for r in items)
    assert all(isinstance(r.last_seen, datetime) for r in items)
    assert sent(emu, "get_resources_ch")[0]["cloud_provider"] == ["GCP"]


@scenario("remediation_queues")
def _remediation_queues(api: Api, emu: Emulator) -> None:
    everything = api.remediation_queues().to_list()
    enabled = api.remediation_queues(state="ENABLED", fields="id title state").to_list()
    assert 0 < len(enabled) < len(everything)
    assert {q.state for q in enabled} == {"ENABLED"}
    assert isinstance(enabled[0], m.RemediationQueue)
    assert sent(emu, "remediation_queues")[-1]["state"] == "ENABLED"


@scenario("scope_hierarchy", "save_scope_hierarchy")
def _scope_hierarchy(api: Api, emu: Emulator) -> None:
    saved = api.save_scope_hierarchy(fields="ok scope_hierarchy { total_findings }")
    assert isinstance(saved, m.GenerateScopes)
    assert saved.ok is True
    assert saved.scope_hierarchy.total_findings == 300
    h = api.scope_hierarchy(
        include_unscoped=True, fields="generated_time total_findings nodes { name node_type findings_count }"
    )
    assert isinstance(h, m.ScopeHierarchy)
    assert h.generated_time.tzinfo is not None
    assert all(isinstance(n, m.ScopeNode) for n in h.nodes)
    without = api.scope_hierarchy(fields="nodes { name }")
    assert len(h.nodes) == len(without.nodes) + 1  # the unscoped node
    assert sent(emu, "scope_hierarchy")[0] == {"include_unscoped": True}
    # The default selection asks for nothing undocumented.
    bare = api.scope_hierarchy()
    with pytest.raises(AttributeError, match="not selected"):
        _ = bare.nodes


@scenario("trends")
def _trends(api: Api, emu: Emulator) -> None:
    points = api.trends(time_scale="YEAR", aggregate_function="COUNT", group_by="cloud_provider")
    assert isinstance(points, list)
    assert sum(p["value"] for p in points) == 300
    assert {"time", "group", "value"} <= set(points[0])
    start = datetime(2025, 1, 1, tzinfo=timezone.utc)
    later = api.trends(time_scale="YEAR", aggregate_function="COUNT", start=start)
    assert all(p["time"] >= "2025" for p in later)
    assert sent(emu, "trends")[1]["start"].startswith("2025-01-01T00:00:00")


# ---------------------------------------------------------------- scoring rules


@scenario(
    "scoring_rules", "add_scoring_rule", "edit_scoring_rule", "activate_scoring_rule", "delete_scoring_rule"
)
def _scoring_lifecycle(api: Api, emu: Emulator) -> None:
    target = {"field": "id", "condition": "in", "value": [1, 2]}
    added = api.add_scoring_rule(
        {
            "name": "pin",
            "method": "SET",
            "value": 9.9,
            "active": False,
            "filters_config": {"filtersjson": target},
        },
        fields="ok scoring_rule { id }",
    )
    assert isinstance(added, m.AddScoringRule)
    assert added.ok is True
    rule_id = added.scoring_rule.id
    assert secfindings.from_global_id(rule_id)[0] == "ScoringRule"
    assert sent(emu, "add_scoring_rule")[0]["scoring_rule"]["filters_config"]["filtersjson"] == (
        '{"field":"id","condition":"in","value":[1,2]}'
    )

    edited = api.edit_scoring_rule(rule_id, {"name": "pinned"}, fields="ok scoring_rule { name active }")
    assert isinstance(edited, m.EditScoringRule)
    assert edited.scoring_rule.name == "pinned"
    assert edited.scoring_rule.active is False

    on = api.activate_scoring_rule(rule_id, True, fields="ok scoring_rule { active affected_findings }")
    assert isinstance(on, m.ActivateScoringRule)
    assert on.scoring_rule.active is True
    assert on.scoring_rule.affected_findings == 2
    assert api.finding(1, fields="finding_score { score }").finding_score.score == 9.9

    listed = api.scoring_rules(name="pinned", active=True, fields="id name active").to_list()
    assert [r.id for r in listed] == [rule_id]
    assert isinstance(listed[0], m.ScoringRule)

    gone = api.delete_scoring_rule(rule_id)
    assert isinstance(gone, m.DeleteScoringRule)
    assert gone.ok is True
    assert api.scoring_rules(name="pinned").to_list() == []


# ---------------------------------------------------------------- status rules


@scenario("status_rules", "add_status_rule", "edit_status_rule", "enable_status_rule", "delete_status_rule")
def _status_lifecycle(api: Api, emu: Emulator) -> None:
    added = api.add_status_rule(
        {
            "name": "accept 3",
            "status_key": "30",
            "enabled": False,
            "filters_config": {"filtersjson": {"field": "id", "condition": "in", "value": [5]}},
        },
        fields="status_rule { id }",
    )
    assert isinstance(added, m.AddStatusRule)
    rule_id = added.status_rule.id
    edited = api.edit_status_rule(
        rule_id, {"description": "risk accepted"}, fields="status_rule { description }"
    )
    assert isinstance(edited, m.EditStatusRule)
    assert edited.status_rule.description == "risk accepted"
    enabled = api.enable_status_rule(rule_id, True, fields="ok status_rule { enabled affected_findings }")
    assert isinstance(enabled, m.EnableStatusRule)
    assert enabled.status_rule.enabled is True
    assert enabled.status_rule.affected_findings == 1
    assert api.finding(5, fields="status { key category }").status.key == "30"
    listed = api.status_rules(enabled=True, fields="id name enabled").to_list()
    assert rule_id in [r.id for r in listed]
    assert all(isinstance(r, m.StatusRuleObject) and r.enabled for r in listed)
    assert sent(emu, "status_rules")[0]["enabled"] is True
    gone = api.delete_status_rule(rule_id)
    assert isinstance(gone, m.DeleteStatusRule)
    assert gone.ok is True
    assert rule_id not in [r.id for r in api.status_rules().to_list()]


# ---------------------------------------------------------------- SLA


@scenario(
    "sla_groups",
    "add_sla_group",
    "sla_preferences",
    "add_sla_rule",
    "edit_sla_rule",
    "activate_sla_rule",
    "delete_sla_rule",
    "update_sla_settings_v2",
)
def _sla_lifecycle(api: Api, emu: Emulator) -> None:
    group = api.add_sla_group(
        "crown jewels",
        description="prod",
        priority=1,
        filters={"field": "id", "condition": "in", "value": [4, 5, 6]},
        fields="ok sla_group { id name priority }",
    )
    assert isinstance(group, m.AddSLAGroup)
    gid = group.sla_group.id
    assert group.sla_group.priority == 1
    assert [g.id for g in api.sla_groups(name="crown", fields="id name").to_list()] == [gid]
    assert isinstance(api.sla_groups().to_list()[0], m.SLAGroup)

    rule = api.add_sla_rule(
        {"sla_group_id": gid, "severity": 4, "days": 3, "active": False}, fields="sla_rule { id }"
    )
    assert isinstance(rule, m.AddSLARule)
    rid = rule.sla_rule.id
    edited = api.edit_sla_rule(rid, {"days": 2}, fields="sla_rule { days active }")
    assert isinstance(edited, m.EditSLARule)
    assert edited.sla_rule.days == 2
    active = api.activate_sla_rule(rid, True, fields="ok sla_rule { active }")
    assert isinstance(active, m.ActivateSLAStatus)
    assert active.sla_rule.active is True
    prefs = api.sla_preferences(sla_group_id=gid, fields="id severity days").to_list()
    assert [(p.severity, p.days) for p in prefs] == [(4, 2)]
    assert isinstance(prefs[0], m.SLAPreference)

    updated = api.update_sla_settings_v2(
        [{"id": rid, "days": 1}, {"sla_group_id": gid, "severity": 5, "days": 1}],
        fields="ok sla_preferences { severity days }",
    )
    assert isinstance(updated, m.UpdateSLAV2)
    assert sorted((p.severity, p.days) for p in updated.sla_preferences) == [(4, 1), (5, 1)]
    assert sent(emu, "update_sla_settings_v2")[0]["sla_settings"][1] == {
        "sla_group_id": gid,
        "severity": 5,
        "days": 1,
    }

    gone = api.delete_sla_rule(rid)
    assert isinstance(gone, m.DeleteSLAStatus)
    assert gone.ok is True
    assert [p.severity for p in api.sla_preferences(sla_group_id=gid, fields="severity").to_list()] == [5]


@scenario("ticket_sla_rules", "add_ticket_sla_rule", "edit_ticket_sla_rule", "enable_ticket_sla_rule")
@scenario("delete_ticket_sla_rule")
def _ticket_sla_lifecycle(api: Api, emu: Emulator) -> None:
    added = api.add_ticket_sla_rule(
        {"name": "jira p1", "days": 2, "provider_type": "JIRA", "enabled": False},
        fields="ticket_sla_rule { id }",
    )
    assert isinstance(added, m.AddTicketSLARule)
    rid = added.ticket_sla_rule.id
    edited = api.edit_ticket_sla_rule(rid, {"days": 1}, fields="ticket_sla_rule { days provider_type }")
    assert isinstance(edited, m.EditTicketSLARule)
    assert (edited.ticket_sla_rule.days, edited.ticket_sla_rule.provider_type) == (1, "JIRA")
    on = api.enable_ticket_sla_rule(rid, True, fields="ok ticket_sla_rule { enabled }")
    assert isinstance(on, m.EnableTicketSLARule)
    assert on.ticket_sla_rule.enabled is True
    listed = api.ticket_sla_rules(name="jira p1", enabled=True, fields="id days").to_list()
    assert [(r.id, r.days) for r in listed] == [(rid, 1)]
    assert isinstance(listed[0], m.TicketSLARule)
    gone = api.delete_ticket_sla_rule(rid)
    assert isinstance(gone, m.DeleteTicketSLARule)
    assert gone.ok is True
    assert api.ticket_sla_rules(name="jira p1").to_list() == []


# ---------------------------------------------------------------- scopes and filters


@scenario("new_finding_scope_v2", "update_finding_scope_v2", "delete_finding_scope_v2")
@scenario("create_scope_group", "edit_scope_group", "delete_scope_group")
def _scope_lifecycle(api: Api, emu: Emulator) -> None:
    scope = api.new_finding_scope_v2(
        {"name": "aws", "filter": {"field": "cloud_provider", "condition": "in", "value": ["AWS"]}},
        fields="ok finding_scope { id type filter }",
    )
    assert isinstance(scope, m.NewFindingScopeV2)
    sid = scope.finding_scope.id
    assert scope.finding_scope.type == "SCOPE"
    assert scope.finding_scope.filter == {"field": "cloud_provider", "condition": "in", "value": ["AWS"]}
    upd = api.update_finding_scope_v2(sid, {"description": "all AWS"}, fields="finding_scope { description }")
    assert isinstance(upd, m.UpdateFindingScopeV2)
    assert upd.finding_scope.description == "all AWS"

    group = api.create_scope_group(
        "cloud team", scope_ids=[sid], users=["a@acme.example"], fields="scope_group { id }"
    )
    assert isinstance(group, m.CreateScopeGroup)
    gid = group.scope_group.id
    edited = api.edit_scope_group(gid, name="cloud", fields="scope_group { name users scopes { id } }")
    assert isinstance(edited, m.EditScopeGroup)
    assert edited.scope_group.name == "cloud"
    assert edited.scope_group.users == ["a@acme.example"]
    assert [s.id for s in edited.scope_group.scopes] == [sid]
    assert isinstance(edited.scope_group.scopes[0], m.FindingFilter)

    gone = api.delete_scope_group(gid)
    assert isinstance(gone, m.DeleteScopeGroup)
    assert gone.ok is True
    dropped = api.delete_finding_scope_v2(sid)
    assert isinstance(dropped, m.DeleteFindingScopeV2)
    assert dropped.ok is True
    assert sid not in [s.id for s in api.finding_filters(type="SCOPE").to_list()]


@scenario("new_finding_filter_v2", "update_finding_filter_v2", "delete_finding_filter_v2")
def _filter_lifecycle(api: Api, emu: Emulator) -> None:
    tree = {"operator": "or", "operands": [{"field": "severity", "condition": "in", "value": ["5"]}]}
    made = api.new_finding_filter_v2(
        {"name": "crit", "filter": tree}, fields="ok finding_filter { id filter }"
    )
    assert isinstance(made, m.NewFindingFilterV2)
    fid = made.finding_filter.id
    assert made.finding_filter.filter == tree
    upd = api.update_finding_filter_v2(fid, {"name": "critical"}, fields="finding_filter { name filter }")
    assert isinstance(upd, m.UpdateFindingFilterV2)
    assert (upd.finding_filter.name, upd.finding_filter.filter) == ("critical", tree)
    gone = api.delete_finding_filter_v2(fid)
    assert isinstance(gone, m.DeleteFindingFilterV2)
    assert gone.ok is True
    assert fid not in [f.id for f in api.finding_filters().to_list()]


@scenario("new_finding_filter", "update_finding_filter", "delete_finding_filter")
def _deprecated_filter_lifecycle(api: Api, emu: Emulator) -> None:
    tree = {"field": "cve", "condition": "contains", "value": "CVE-2021"}
    with pytest.warns(DeprecationWarning, match="new_finding_filter_v2"):
        made = api.new_finding_filter("old", tree, description="v1", fields="ok finding_filter { id filter }")
    assert isinstance(made, m.NewFindingFilterV2)
    assert made.finding_filter.filter == tree
    fid = made.finding_filter.id
    assert isinstance(sent(emu, "new_finding_filter")[0]["filter"], str)  # JSONString on the wire
    with pytest.warns(DeprecationWarning, match="update_finding_filter_v2"):
        upd = api.update_finding_filter(fid, name="older", fields="finding_filter { name }")
    assert isinstance(upd, m.UpdateFindingFilterV2)
    assert upd.finding_filter.name == "older"
    with pytest.warns(DeprecationWarning, match="delete_finding_filter_v2"):
        gone = api.delete_finding_filter(fid)
    assert isinstance(gone, m.DeleteFindingFilterV2)
    assert gone.ok is True


@scenario("set_user_sla_and_comment")
def _user_sla(api: Api, emu: Emulator) -> None:
    due = datetime(2027, 3, 1, 12, 0, tzinfo=timezone.utc)
    done = api.set_user_sla_and_comment(
        due, "waiting for vendor patch", finding_ids=[11, 12], fields="ok updated_count"
    )
    assert isinstance(done, m.UpdateUserSLAWithComment)
    assert done.updated_count == 2
    f = api.finding(11, fields="comments { edges { node { text } } }")
    assert "waiting for vendor patch" in [c.text for c in f.comments]
    view = api.findings_view(filters={"field": "id", "condition": "in", "value": [12]}, fields="id due_date")
    assert [v.due_date for v in view.to_list()] == [due]
    assert sent(emu, "set_user_sla_and_comment")[0]["due_date"].startswith("2027-03-01T12:00:00")


# ---------------------------------------------------------------- the tests


@pytest.mark.parametrize("name", sorted(OPS))
def test_operation(name: str, api: Api, emulator: Emulator) -> None:
    with warnings.catch_warnings():
        # Deprecated operations run inside other lifecycles; their own scenarios assert the warning.
        if name not in {
            "new_finding_filter",
            "update_finding_filter",
            "delete_finding_filter",
            "get_resources",
        }:
            warnings.simplefilter("error")
        SCENARIOS[name](api, emulator)
    assert name in [r["operation_name"] for r in emulator.request_log()], f"{name} was never sent"


def test_every_operation_has_a_scenario() -> None:
    assert set(SCENARIOS) == set(OPS)


def _spec_operations() -> tuple[set[str], set[str], dict[str, str]]:
    text = SPEC.read_text()

    def table(heading: str) -> set[str]:
        section = text.split(heading, 1)[1].split("\n### ", 1)[0].split("\n## ", 1)[0]
        return set(re.findall(r"^\| ([a-z_0-9]+) \|", section, flags=re.M))

    queries = table("### Queries")
    mutations = table("### Mutations")
    # The v2 filter operations are named in prose after the table.
    mutations |= set(re.findall(r"\b([a-z_]+_finding_filter_v2)\b", text))
    versioning = text.split("## Versioning", 1)[1]
    deprecated = dict(re.findall(r"^\| ([a-z_]+) \| ([a-z_0-9]+) \|$", versioning, flags=re.M))
    deprecated.pop("Deprecated", None)
    return queries, mutations, deprecated


def test_catalog_covers_every_operation_of_the_spec() -> None:
    queries, mutations, deprecated = _spec_operations()
    assert len(queries) == 13
    assert len(mutations) == 32
    assert {n for n, op in OPS.items() if op["kind"] == "query"} == queries
    assert {n for n, op in OPS.items() if op["kind"] == "mutation"} == mutations
    assert {n: op["deprecated"] for n, op in OPS.items() if op["deprecated"]} == deprecated
    for name in OPS:
        for cls in (secfindings.Client, secfindings.AsyncClient):
            assert callable(getattr(cls, name)), f"{cls.__name__}.{name}"


def test_catalog_arguments_match_the_emulator_schema(emulator: Emulator) -> None:
    from graphql import build_schema, print_type

    schema = build_schema(emulator.sdl())
    paging = {"offset", "before", "after", "first", "last"}
    for name, op in OPS.items():
        root = schema.query_type if op["kind"] == "query" else schema.mutation_type
        assert root is not None
        field = root.fields[name]
        served = {a: str(t.type) for a, t in field.args.items() if a not in paging}
        # A served default (e.g. `= false`) makes a non-null argument optional for the caller.
        assert dict(op["args"]) == served, name
        assert bool(field.deprecation_reason) == bool(op["deprecated"]), name
        result = print_type(field.type) if not hasattr(field.type, "name") else field.type.name
        if op["returns"] == "connection":
            conn = schema.get_type(result)
            node = conn.fields["edges"].type.of_type.of_type.fields["node"].type  # type: ignore[union-attr]
            assert node.name == op["type"], name
        else:
            assert result == op["type"], name


def test_generated_methods_match_the_catalog() -> None:
    import importlib.util

    path = Path(__file__).resolve().parents[1] / "scripts" / "gen_operations.py"
    spec = importlib.util.spec_from_file_location("gen_operations", path)
    assert spec is not None
    assert spec.loader is not None
    gen = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gen)
    assert gen.TARGET.read_text() == gen.generate(), "run: python scripts/gen_operations.py"


def test_signatures_follow_the_graphql_arguments() -> None:
    sig = inspect.signature(secfindings.Client.findings_view)
    assert list(sig.parameters) == [
        "self",
        "filters_config",
        "sort",
        "filters",
        "after",
        "page_size",
        "limit",
        "fields",
    ]
    assert all(p.kind is p.KEYWORD_ONLY for n, p in sig.parameters.items() if n != "self")
    finding = inspect.signature(secfindings.Client.finding)
    assert finding.parameters["id"].kind is inspect.Parameter.POSITIONAL_OR_KEYWORD
    assert inspect.iscoroutinefunction(secfindings.AsyncClient.finding)
    assert not inspect.iscoroutinefunction(secfindings.AsyncClient.findings_view)
    assert secfindings.Client.finding.__doc__ is not None
    assert "DeprecationWarning" in (secfindings.Client.get_resources.__doc__ or "")


def test_deprecation_warning_points_at_the_caller(either: Either) -> None:
    with pytest.warns(DeprecationWarning, match="get_resources_ch") as record:
        either.run(either.client.get_resources(limit=1).to_list())
    assert record[0].filename == __file__


def test_bad_arguments_send_nothing(either: Either, emulator: Emulator) -> None:
    client, run = either.client, either.run
    emulator.clear_request_log()
    with pytest.raises(ValidationError, match=r"must be a bool"):
        run(client.activate_scoring_rule("U2NvcmluZ1J1bGU6MQ==", "yes"))
    with pytest.raises(ValidationError, match=r"Int range"):
        run(client.add_sla_group("g", priority=2**31))
    with pytest.raises(ValidationError, match=r"did you mean \"filtersjson\""):
        client.findings_view(filters_config={"filterjson": "{}"})
    with pytest.raises(ValidationError, match=r"timezone-aware"):
        run(client.set_user_sla_and_comment(datetime(2027, 1, 1), "c", finding_ids=[1]))
    with pytest.raises(ValidationError, match=r"did you mean \"name\""):
        run(client.add_scoring_rule({"nmae": "x"}))
    with pytest.raises(ValidationError, match=r"page_size must be between 1 and 100"):
        client.scoring_rules(page_size=101)
    with pytest.raises(ValidationError, match=r"fields=\.\.\.\) has unbalanced"):
        run(client.finding(1, fields="id { title"))
    with pytest.raises(ValidationError, match="not both"):
        client.findings_view(filters_config={"filtersjson": "{}"}, filters={"field": "id"})
    with pytest.raises(TypeError):
        run(client.finding(1, nope=2))
    assert emulator.request_log() == []


def test_unselected_field_says_how_to_select_it(either: Either) -> None:
    client, run = either.client, either.run
    rule = run(client.scoring_rules(limit=1).to_list())[0]
    assert isinstance(rule.id, str)
    assert isinstance(rule.name, str)  # in the default selection (with a schema), as the state is
    with pytest.raises(AttributeError, match=r"ScoringRule\.description was not selected"):
        _ = rule.description
    # "*" is every scalar field of the server's type; objects are asked for by name.
    full = run(client.scoring_rules(limit=1, fields="*").to_list())[0]
    assert isinstance(full.name, str)
    assert "filters_config" not in full
    nested = run(client.scoring_rules(limit=1, fields="name filters_config { filtersjson }").to_list())[0]
    assert isinstance(nested.filters_config, m.FiltersConfigOutput)


def test_fields_accepts_a_list_and_extra_fields_come_back_raw(either: Either) -> None:
    f = either.run(either.client.finding(2, fields=["id_int", "title", "finding_score { score }"]))
    assert f.id_int == 2
    assert isinstance(f.finding_score.score, float)
    with pytest.raises(AttributeError, match="not selected"):
        _ = f.description


def test_resume_a_typed_paginator_from_its_cursor(either: Either) -> None:
    either.client.pages_per_request = 1  # the server's cursor, any selection
    first = either.client.findings_view(page_size=50, limit=50)
    head = [f.id_int for f in either.items(first)]
    rest = [f.id_int for f in either.items(either.client.findings_view(after=first.cursor, fields="id_int"))]
    assert head + rest == list(range(1, 301))
    # By default in batches: the walk's own cursor (sfb1:...), which resumes a batched walk,
    # whose selection needs id (a typed error, not a walk, without it).
    batched = either.make()
    first = batched.findings_view(page_size=50, limit=50)
    head = [f.id_int for f in either.items(first)]
    assert first.cursor.startswith("sfb1:")
    rest = [f.id_int for f in either.items(batched.findings_view(after=first.cursor, fields="id id_int"))]
    assert head + rest == list(range(1, 301))
    with pytest.raises(ValidationError, match="needs `id` in the selection"):
        either.items(batched.findings_view(after=first.cursor, fields="id_int"))


def test_a_typed_walk_and_a_typed_call(either: Either) -> None:
    pager = either.client.scoring_rules(fields="id name")
    names = [r.name for r in either.items(pager)]
    assert len(names) == 3
    f = either.run(either.client.finding(1))
    assert isinstance(f, m.Finding)


def test_default_selections_are_valid_against_the_emulator_schema(emulator: Emulator) -> None:
    from graphql import build_schema, parse, validate

    from secfindings._native import prepare_operation

    schema = build_schema(emulator.sdl())
    samples = {
        "ID": "1",
        "String": "x",
        "Boolean": True,
        "DateTime": "2026-01-01T00:00:00Z",
        "JSONString": {"field": "id", "condition": "in", "value": [1]},
        "TimeScales": "DAY",
        "AggregateFunctions": "COUNT",
    }
    for name, op in OPS.items():
        args = {a: samples.get(t.strip("[]!"), {}) for a, t in op["args"] if t.endswith("!")}
        doc = prepare_operation(name, args).query
        assert validate(schema, parse(doc)) == [], (name, doc)
        if op["kind"] == "mutation":
            assert op["selection"] == "ok", name


def test_a_mutation_is_not_resent_after_a_5xx(either: Either, emulator: Emulator) -> None:
    client, run = either.client, either.run
    emulator.clear_request_log()
    emulator.inject("status", 1, status=503)
    with pytest.raises(secfindings.APIStatusError) as e:
        run(client.activate_scoring_rule("U2NvcmluZ1J1bGU6MQ==", True))
    assert e.value.status_code == 503
    assert len(emulator.request_log()) == 1
    # A query is: the same fault, then the answer.
    emulator.inject("status", 1, status=503)
    assert run(client.finding(1)).id_int == 1


@pytest.mark.parametrize(("page_size", "stop", "more"), [(50, 11, 5), (40, 55, 3)])
def test_resume_after_a_break_mid_page_loses_nothing(
    either: Either, page_size: int, stop: int, more: int
) -> None:
    pager = either.client.findings_view(page_size=page_size, fields="id_int")
    head = [f.id_int for f in either.items(pager, limit=stop)]  # a break, mid-page
    assert head == list(range(1, stop + 1))
    rest = either.client.findings_view(after=pager.cursor, fields="id_int", limit=more)
    assert [f.id_int for f in either.items(rest)] == list(range(stop + 1, stop + 1 + more))
    assert repr(pager).startswith(f"<{type(pager).__name__}[FindingsView] lazy, cursor=")
    assert type(pager).__name__ == ("Paginator" if either.kind == "sync" else "AsyncPaginator")


def test_fields_star_in_a_list_and_bad_fields(either: Either) -> None:
    client = either.client
    full = either.run(client.scoring_rules(fields=["*"], limit=1).to_list())[0]
    assert isinstance(full.name, str)
    with pytest.raises(ValidationError, match="do not combine"):
        client.scoring_rules(fields=["*", "id"])
    with pytest.raises(ValidationError, match="list of str"):
        client.scoring_rules(fields=[1])  # type: ignore[list-item]


def test_a_finding_that_does_not_exist_is_not_found(either, emulator):
    with pytest.raises(secfindings.NotFoundError, match="does not exist") as info:
        either.run(either.client.finding(99999))
    assert isinstance(info.value, secfindings.GraphQLError)
    assert info.value.errors[0]["path"] == ["finding"]
    # Other GraphQL errors from the server stay plain GraphQLErrors.
    raw = either.make(schema="off")
    with pytest.raises(secfindings.GraphQLError) as info:
        either.run(raw.execute("{ no_such_field }"))
    assert not isinstance(info.value, secfindings.NotFoundError)


def test_a_misspelt_keyword_names_the_client_and_suggests_the_right_one(either):
    client, name = either.client, either.name
    with pytest.raises(TypeError, match=rf"^{name}\.findings_view\(\) .* \(did you mean 'filters'\?\)$"):
        client.findings_view(filter={})
    with pytest.raises(TypeError, match=rf"^{name}\.findings_view\(\) .* \(did you mean 'sort'\?\)"):
        client.findings_view(sortt="SCORE_DESC")
    with pytest.raises(TypeError, match=rf"^{name}\.finding\(\) missing 1 required"):
        either.run(client.finding())
    assert either.run(client.finding(1)).id_int == 1


def test_catalog_schema_tables_match_the_schema_file() -> None:
    """The catalog's argument and input tables are generated from schema/schema.graphql."""
    root = Path(__file__).resolve().parents[1]
    proc = subprocess.run(
        [sys.executable, str(root / "scripts" / "gen_schema_tables.py"), "--check"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr + " (run: python scripts/gen_schema_tables.py)"

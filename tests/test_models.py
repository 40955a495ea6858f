"""The typed result models (secfindings.models): pure Python, over dicts shaped like real responses."""

from __future__ import annotations

import copy
import datetime as dt
import json
import pickle
import re
import subprocess
import sys
import typing
from pathlib import Path
from typing import Annotated, Any

import pytest
from graphql import (
    GraphQLEnumType,
    GraphQLList,
    GraphQLNonNull,
    GraphQLObjectType,
    GraphQLScalarType,
    NoUnusedFragmentsRule,
    build_schema,
    parse,
    specified_rules,
    validate,
)

import secfindings.models as models
from secfindings._pages import PageInfo
from secfindings.models import (
    CHResource,
    Connection,
    FindingFilter,
    FindingsView,
    GenerateScopes,
    JSONString,
    Model,
    ScopeHierarchy,
    ScopeNode,
    SLAGroup,
    Ticket,
    model_for,
    registry,
)
from secfindings.models import Finding as FindingModel
from secfindings.models._base import _parse_datetime

SDL_PATH = Path(__file__).parents[1] / "schema/schema.graphql"

LONG_DESCRIPTION = "## Disk encryption is not enabled\n\n" + "The volumes are not encrypted at rest. " * 200

FILTER_TEXT = (
    '{"operator":"and","operands":[{"field":"severity","condition":"in","value":["4","5"]},'
    '{"field":"actual_status","condition":"","value":{"field":"category","condition":"in","value":["OPEN"]}}]}'
)


def finding_data() -> dict[str, Any]:
    """A ``finding`` response as the emulator sends it (every field selected)."""
    return {
        "id": "RmluZGluZzoz",
        "id_int": 3,
        "finding_id": "P-628220",
        "last_reported_time": "2025-06-06T22:05:34+00:00",
        "discovered_time": "2024-07-24T06:34:35Z",
        "cloud_provider": "GCP",
        "original_status": "",
        "cloud_account": "acme-web-prod-381204",
        "package_name": None,
        "datasource": {
            "id": "RGF0YXNvdXJjZTo1",
            "id_int": 5,
            "friendly_name": "Prisma Cloud",
            "source": "Prisma Cloud",
            "datasource_type": "prisma_cloud",
        },
        "main_resource": {
            "id": "Q0hSZXNvdXJjZTox",
            "id_int": 1,
            "resource_name": "gce-orders-prod-35",
            "resource_type": "VIRTUAL_MACHINE",
            "region": "europe-west3",
            "tags": {"app": "orders", "env": "prod"},
            "findings_count": 4,
            "first_seen": "2023-12-18T08:15:46+00:00",
            "last_seen": "2025-06-07T22:09:32+00:00",
        },
        "title": "Disk encryption is not enabled on the production order-processing virtual machine",
        "finding_score": {"score": 2, "severity": 2, "original_score": None},
        "age": 318,
        "description": LONG_DESCRIPTION,
        "status": {
            "id": "U3RhdHVzOjI=",
            "id_int": 2,
            "key": "11",
            "title": "Open",
            "category": "OPEN",
            "type": "SYSTEM",
            "description": "Triaged and awaiting remediation.",
        },
        "tickets": {
            "edges": [
                {
                    "cursor": "YXJyYXljb25uZWN0aW9uOjA=",
                    "node": {
                        "id": "VGlja2V0OjE=",
                        "id_int": 1,
                        "external_id": "SEC-101",
                        "status": "BACKLOG",
                        "created_time": "2025-01-02T03:04:05.123+00:00",
                    },
                },
                {
                    "cursor": "YXJyYXljb25uZWN0aW9uOjE=",
                    "node": {"id": "VGlja2V0OjI=", "id_int": 2, "external_id": "SEC-102", "status": "DONE"},
                },
            ],
            "pageInfo": {
                "hasNextPage": True,
                "hasPreviousPage": False,
                "startCursor": "YXJyYXljb25uZWN0aW9uOjA=",
                "endCursor": "YXJyYXljb25uZWN0aW9uOjE=",
            },
            "total_count": 7,
        },
        "comments": {"edges": [], "pageInfo": {"hasNextPage": False, "endCursor": None}},
        "attachments": {"edges": []},
        "additional_data": {
            "id": "RmluZGluZ0FkZGl0aW9uYWxEYXRhOjM=",
            "data": '{"region": "europe-west3", "tags": {"app": "orders"}, "first_observed": "2024-07-24"}',
        },
    }


def scope_hierarchy_data() -> dict[str, Any]:
    """A ``scope_hierarchy`` response with nested nodes and a scope_groups connection."""
    return {
        "generated_time": "2025-06-08T12:00:01+00:00",
        "total_findings": 20,
        "nodes": [
            {
                "id": "U2NvcGVHcm91cDox",
                "name": "Cloud teams",
                "node_type": "SCOPE_GROUP",
                "findings_count": 20,
                "children": [
                    {"id": "RmluZGluZ0ZpbHRlcjo1", "name": "AWS", "node_type": "SCOPE", "findings_count": 10},
                    None,
                ],
            },
            {"id": None, "name": "Unscoped", "node_type": "UNSCOPED", "findings_count": 0, "children": []},
        ],
        "scope_groups": {
            "edges": [
                {
                    "cursor": "c1",
                    "node": {
                        "id": "U2NvcGVHcm91cDox",
                        "id_int": 1,
                        "name": "Cloud teams",
                        "scopes": [
                            {"id": "RmluZGluZ0ZpbHRlcjo1", "id_int": 5, "name": "AWS", "filter": FILTER_TEXT},
                        ],
                        "users": ["alice@example.com"],
                    },
                },
                {"cursor": "c2", "node": None},
            ],
            "pageInfo": {"hasNextPage": False, "endCursor": "c2"},
        },
    }


# ---------------------------------------------------------------------------------- construction


def test_construction_stores_the_dict_without_copying_or_parsing():
    data = finding_data()
    data["discovered_time"] = "not a date"  # must not fail until it is read
    f = FindingModel(data)
    assert f._data is data
    assert f._cache is None
    with pytest.raises(
        ValueError, match=r"Finding\.discovered_time: 'not a date' is not an ISO 8601 DateTime"
    ):
        _ = f.discovered_time


def test_conversion_is_lazy_and_cached():
    data = finding_data()
    f = FindingModel(data)
    first = f.discovered_time
    assert first is f.discovered_time
    assert f.finding_score is f.finding_score
    assert f.tickets is f.tickets
    # The raw data is left as the server sent it.
    assert data["discovered_time"] == "2024-07-24T06:34:35Z"
    assert isinstance(data["finding_score"], dict)


def test_instances_have_no_dict_and_are_read_only():
    for cls in registry.values():
        instance = cls({})
        assert not hasattr(instance, "__dict__"), cls
    f = FindingModel(finding_data())
    with pytest.raises(AttributeError):
        f.title = "changed"  # type: ignore[misc]


# ---------------------------------------------------------------------------------- scalars


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2024-07-24T06:34:35Z", dt.datetime(2024, 7, 24, 6, 34, 35, tzinfo=dt.timezone.utc)),
        ("2024-07-24T06:34:35z", dt.datetime(2024, 7, 24, 6, 34, 35, tzinfo=dt.timezone.utc)),
        ("2024-07-24T06:34:35+00:00", dt.datetime(2024, 7, 24, 6, 34, 35, tzinfo=dt.timezone.utc)),
        (
            "2024-07-24T08:34:35+02:00",
            dt.datetime(2024, 7, 24, 8, 34, 35, tzinfo=dt.timezone(dt.timedelta(hours=2))),
        ),
        (
            "2024-07-24T01:04:35-05:30",
            dt.datetime(2024, 7, 24, 1, 4, 35, tzinfo=dt.timezone(-dt.timedelta(hours=5, minutes=30))),
        ),
        ("2024-07-24T06:34:35.123Z", dt.datetime(2024, 7, 24, 6, 34, 35, 123000, tzinfo=dt.timezone.utc)),
        ("2024-07-24T06:34:35", dt.datetime(2024, 7, 24, 6, 34, 35, tzinfo=dt.timezone.utc)),
        ("2024-07-24 06:34:35+0000", dt.datetime(2024, 7, 24, 6, 34, 35, tzinfo=dt.timezone.utc)),
        ("2024-07-24T06:34:35.1234567Z", dt.datetime(2024, 7, 24, 6, 34, 35, 123456, tzinfo=dt.timezone.utc)),
    ],
)
def test_datetimes_are_aware(text, expected):
    f = FindingModel({"discovered_time": text})
    value = f.discovered_time
    assert value == expected
    assert value.utcoffset() == expected.utcoffset()
    assert value.tzinfo is not None


def _tz(hours: int = 0, minutes: int = 0) -> dt.timezone:
    return dt.timezone(dt.timedelta(hours=hours, minutes=minutes))


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2024-07-24T06:34:35Z", dt.datetime(2024, 7, 24, 6, 34, 35, tzinfo=_tz())),
        ("2024-07-24T06:34:35+0530", dt.datetime(2024, 7, 24, 6, 34, 35, tzinfo=_tz(5, 30))),
        ("2024-07-24T06:34:35-03", dt.datetime(2024, 7, 24, 6, 34, 35, tzinfo=_tz(-3))),
        ("2024-07-24T06:34:35.5+00:00", dt.datetime(2024, 7, 24, 6, 34, 35, 500000, tzinfo=_tz())),
        ("2024-07-24T06:34:35,1234567Z", dt.datetime(2024, 7, 24, 6, 34, 35, 123456, tzinfo=_tz())),
        ("2024-07-24T06:34", dt.datetime(2024, 7, 24, 6, 34, tzinfo=_tz())),
    ],
)
def test_datetime_spellings_python_3_10_refuses_are_read_by_the_core(text, expected):
    # Python 3.10's fromisoformat rejects these spellings; the core's parser reads them.
    value = _parse_datetime("X.t", text)
    assert value == expected
    assert value.utcoffset() == expected.utcoffset()


def test_naive_datetime_object_is_taken_as_utc():
    value = _parse_datetime("X.t", dt.datetime(2025, 1, 1, 12, 0))
    assert value.tzinfo is dt.timezone.utc


def test_float_fields_turn_ints_into_floats_and_ints_stay_ints():
    f = FindingModel(finding_data())
    assert f.finding_score.score == 2.0
    assert type(f.finding_score.score) is float
    assert type(f.finding_score.severity) is int
    assert type(f.age) is int


def test_null_stays_none_for_every_kind():
    f = FindingModel({"package_name": None, "discovered_time": None, "finding_score": None, "tickets": None})
    assert f.package_name is None
    assert f.discovered_time is None
    assert f.finding_score is None
    assert f.tickets is None
    assert FindingFilter({"filter": None}).filter is None


def test_generic_scalar_is_passed_through_unchanged():
    data = finding_data()
    resource = FindingModel(data).main_resource
    assert isinstance(resource, CHResource)
    assert resource.tags is data["main_resource"]["tags"]


# ---------------------------------------------------------------------------------- JSONString


def test_jsonstring_is_decoded_on_access():
    f = FindingModel(finding_data())
    assert f.additional_data.data == {
        "region": "europe-west3",
        "tags": {"app": "orders"},
        "first_observed": "2024-07-24",
    }
    rule = FindingFilter({"id": "x", "filter": FILTER_TEXT})
    assert rule.filter["operator"] == "and"
    assert rule.filter["operands"][1]["value"] == {"field": "category", "condition": "in", "value": ["OPEN"]}


def test_jsonstring_already_decoded_is_passed_through():
    value = {"a": 1}
    assert FindingFilter({"filter": value}).filter is value


def test_jsonstring_that_is_not_json_names_the_field():
    f = FindingFilter({"filter": "{not json"})
    with pytest.raises(
        ValueError, match=r"FindingFilter\.filter is a JSONString but its value is not valid JSON"
    ):
        _ = f.filter
    with pytest.raises(ValueError, match=r"FindingFilter\.filter"):
        f.to_dict()


# ---------------------------------------------------------------------------------- selection errors


def test_unselected_field_says_how_to_select_it():
    f = FindingModel({"id": "RmluZGluZzoz", "id_int": 3, "title": "t"})
    with pytest.raises(AttributeError) as info:
        _ = f.description
    message = str(info.value)
    assert message.startswith("Finding.description was not selected in this request; add `description`")
    assert 'fields="*"' in message
    with pytest.raises(AttributeError, match=r"add `status \{ id .*\}` to the selection"):
        _ = f.status
    with pytest.raises(AttributeError, match=r"add `tickets \{ edges \{ node \{ id .*\} \} \}`"):
        _ = f.tickets
    assert not hasattr(f, "description")
    assert getattr(f, "description", "fallback") == "fallback"


def test_unselected_nested_field_names_its_class():
    f = FindingModel({"finding_score": {"score": 1.5}})
    with pytest.raises(AttributeError, match=r"^FindingScore\.original_score was not selected"):
        _ = f.finding_score.original_score


def test_unknown_field_error():
    f = FindingModel(finding_data())
    with pytest.raises(AttributeError, match=r"^'Finding' object has no field 'titel'$"):
        _ = f.titel  # type: ignore[attr-defined]


def test_private_and_dunder_names_are_never_fields():
    f = FindingModel({"_secret": 1, "__weird__": 2})
    with pytest.raises(AttributeError):
        _ = f._secret  # type: ignore[attr-defined]
    with pytest.raises(AttributeError):
        _ = f.__weird__  # type: ignore[attr-defined]


def test_an_extra_selected_object_reads_as_a_generic_model_at_any_depth():
    extra = {"nested": [1, 2], "deeper": {"level": 3, "items": [{"k": "a"}, {"k": "b"}]}}
    f = FindingModel({"id": "x", "risk_factors": extra, "cve": "CVE-2024-1"})
    g = f.risk_factors  # type: ignore[attr-defined]
    assert isinstance(g, models.GenericModel)
    assert g.nested == [1, 2]
    assert g.deeper.level == 3
    assert [i.k for i in g.deeper.items] == ["a", "b"]
    assert g.to_dict() == extra
    assert "GenericModel(" in repr(g)
    assert f.cve == "CVE-2024-1"  # type: ignore[attr-defined]
    with pytest.raises(AttributeError, match="no field 'missing'"):
        _ = g.missing


def test_contains_and_dir():
    f = FindingModel({"id": "x", "title": "t", "cve": "CVE-1"})
    assert "title" in f
    assert "description" not in f
    names = dir(f)
    assert {"title", "description", "tickets", "cve", "to_dict", "selection"} <= set(names)


# ---------------------------------------------------------------------------------- nesting


def test_nested_models():
    f = FindingModel(finding_data())
    assert f.finding_score.severity == 2
    assert f.finding_score.original_score is None
    assert f.datasource.friendly_name == "Prisma Cloud"
    assert f.main_resource.resource_name == "gce-orders-prod-35"
    assert f.main_resource.first_seen == dt.datetime(2023, 12, 18, 8, 15, 46, tzinfo=dt.timezone.utc)
    assert f.status.category == "OPEN"
    assert type(f.status).__name__ == "Status"


def test_lists_of_models_recursive_and_with_nulls():
    h = ScopeHierarchy(scope_hierarchy_data())
    root = h.nodes[0]
    assert isinstance(root, ScopeNode)
    assert root.children[0].name == "AWS"
    assert root.children[1] is None
    assert h.nodes[1].id is None
    assert h.generated_time.tzinfo is not None


def test_list_of_scalars_is_the_raw_list():
    data = {"datasource_tags_values": ["prod", "data"]}
    assert FindingsView(data).datasource_tags_values == ["prod", "data"]


def test_nested_value_of_the_wrong_shape_is_a_clear_error():
    with pytest.raises(ValueError, match=r"Finding\.finding_score: expected a JSON object for FindingScore"):
        _ = FindingModel({"finding_score": 3}).finding_score


def test_mutation_result_models():
    group = models.AddSLAGroup(
        {
            "ok": True,
            "sla_group": {"id": "U0xBR3JvdXA6MQ==", "id_int": 1, "sla_rules": [{"id": "x", "days": 7}]},
        }
    )
    assert group.ok is True
    assert isinstance(group.sla_group, SLAGroup)
    assert group.sla_group.sla_rules[0].days == 7
    assert type(group.sla_group.sla_rules[0]).__name__ == "SLAPreference"


# ---------------------------------------------------------------------------------- Connection


def test_connection_nodes_len_iter_and_index():
    tickets = FindingModel(finding_data()).tickets
    assert isinstance(tickets, Connection)
    assert len(tickets) == 2
    assert all(isinstance(t, Ticket) for t in tickets)
    assert [t.external_id for t in tickets] == ["SEC-101", "SEC-102"]
    assert tickets[0].created_time == dt.datetime(2025, 1, 2, 3, 4, 5, 123000, tzinfo=dt.timezone.utc)
    assert tickets[-1].status == "DONE"
    assert [t.id_int for t in tickets[0:1]] == [1]
    assert tickets.nodes is tickets.nodes
    assert tickets.total_count == 7


def test_connection_page_info():
    f = FindingModel(finding_data())
    assert f.tickets.page_info == PageInfo(
        has_next_page=True,
        has_previous_page=False,
        start_cursor="YXJyYXljb25uZWN0aW9uOjA=",
        end_cursor="YXJyYXljb25uZWN0aW9uOjE=",
    )
    # Partly selected: missing flags are False, missing cursors None.
    assert f.comments.page_info == PageInfo(False, False, None, None)
    assert f.attachments.page_info is None
    assert f.comments.total_count is None
    assert len(f.attachments) == 0
    assert not f.attachments


def test_connection_skips_null_nodes():
    groups = ScopeHierarchy(scope_hierarchy_data()).scope_groups
    assert len(groups) == 1
    assert groups[0].scopes[0].filter["operator"] == "and"


def test_connection_without_edges_says_so():
    conn = FindingModel({"tickets": {"total_count": 3}}).tickets
    assert conn.total_count == 3
    with pytest.raises(AttributeError, match=r"Connection\[Ticket\]\.edges was not selected"):
        _ = conn.nodes
    with pytest.raises(AttributeError, match="was not selected"):
        len(conn)
    assert repr(conn) == "Connection[Ticket](total_count=3)"


def test_connection_with_edges_but_no_node_says_so():
    conn = FindingModel({"tickets": {"edges": [{"cursor": "c"}]}}).tickets
    with pytest.raises(AttributeError, match=r"edges \{ node \} was not selected"):
        list(conn)


def test_connection_equality_pickle_and_to_dict():
    data = finding_data()
    conn = FindingModel(data).tickets
    assert conn == Connection(data["tickets"], Ticket)
    assert conn != Connection(data["tickets"], models.Comment)
    assert conn != Connection(data["comments"], Ticket)
    assert pickle.loads(pickle.dumps(conn)) == conn
    assert copy.deepcopy(conn) == conn
    assert conn.to_dict() == data["tickets"]
    assert conn.to_dict() is not data["tickets"]


def test_connection_repr_is_short():
    text = repr(FindingModel(finding_data()).tickets)
    assert text.startswith("Connection[Ticket]([Ticket(id_int=1, ")
    assert "total_count=7" in text
    assert len(text) < 200


# ---------------------------------------------------------------------------------- to_dict


def test_to_dict_is_json_ready_and_equals_the_input_but_for_jsonstrings():
    data = finding_data()
    out = FindingModel(data).to_dict()
    json.dumps(out)  # must not raise
    decoded = out["additional_data"].pop("data")
    assert decoded == json.loads(data["additional_data"]["data"])
    expected = copy.deepcopy(data)
    del expected["additional_data"]["data"]
    assert out == expected
    # DateTimes stay ISO text, as sent.
    assert out["discovered_time"] == "2024-07-24T06:34:35Z"


def test_to_dict_is_a_deep_copy():
    data = finding_data()
    f = FindingModel(data)
    out = f.to_dict()
    out["finding_score"]["score"] = 99
    out["tickets"]["edges"][0]["node"]["status"] = "CHANGED"
    out["main_resource"]["tags"]["app"] = "changed"
    assert data["finding_score"]["score"] == 2
    assert data["tickets"]["edges"][0]["node"]["status"] == "BACKLOG"
    assert f.main_resource.tags["app"] == "orders"


def test_to_dict_decodes_jsonstrings_deep_inside_connections_and_lists():
    data = scope_hierarchy_data()
    out = ScopeHierarchy(data).to_dict()
    json.dumps(out)
    scope = out["scope_groups"]["edges"][0]["node"]["scopes"][0]
    assert scope["filter"] == json.loads(FILTER_TEXT)
    assert out["scope_groups"]["edges"][1] == {"cursor": "c2", "node": None}
    assert out["nodes"] == data["nodes"]


def test_to_dict_keeps_extra_fields_and_works_after_access():
    f = FindingModel({"id": "x", "cve": ["CVE-1"], "finding_score": {"score": 1}})
    _ = f.finding_score.score
    assert f.to_dict() == {"id": "x", "cve": ["CVE-1"], "finding_score": {"score": 1}}


# ---------------------------------------------------------------------------------- repr, eq, pickle


def test_repr_is_short_and_identifying():
    text = repr(FindingModel(finding_data()))
    assert text.startswith("Finding(id_int=3, title='Disk encryption is not enabled on the p\u2026'")
    assert "RmluZGluZzoz" not in text  # the global id is noise next to id_int
    assert "encrypted at rest" not in text
    assert text.endswith(", ...)")
    assert len(text) < 300


def test_repr_of_small_models_and_results():
    assert repr(models.Status({"key": "11", "title": "Open"})) == "Status(title='Open', key='11')"
    assert repr(models.DeleteScoringRule({"ok": True})) == "DeleteScoringRule(ok=True)"
    result = models.AddScoringRule(
        {"ok": True, "scoring_rule": {"id": "U2M6MQ==", "id_int": 1, "name": "Boost"}}
    )
    assert repr(result) == "AddScoringRule(ok=True, scoring_rule=ScoringRule(id_int=1, name='Boost', ...))"
    assert repr(FindingModel({})) == "Finding()"


def test_equality():
    data = finding_data()
    assert FindingModel(data) == FindingModel(finding_data())
    assert FindingModel(data) != FindingModel({**data, "title": "other"})
    assert models.Status({"id": "x"}) != models.Ticket({"id": "x"})
    assert FindingModel(data) != data
    with pytest.raises(TypeError):
        hash(FindingModel(data))


@pytest.mark.parametrize("clone", [copy.copy, copy.deepcopy, lambda m: pickle.loads(pickle.dumps(m))])
def test_copy_and_pickle_round_trip(clone):
    f = FindingModel(finding_data())
    _ = f.discovered_time, f.finding_score, f.tickets  # fill the cache first
    other = clone(f)
    assert type(other) is FindingModel
    assert other == f
    assert other.discovered_time == f.discovered_time
    assert other.tickets[0].external_id == "SEC-101"
    assert other.finding_score.score == 2.0


def test_pickled_nested_model_round_trips():
    h = ScopeHierarchy(scope_hierarchy_data())
    node = pickle.loads(pickle.dumps(h.nodes[0]))
    assert node == h.nodes[0]
    assert node.children[0].findings_count == 10


# ---------------------------------------------------------------------------------- selection()


def _balanced(text: str) -> bool:
    depth = 0
    for ch in text:
        depth += {"{": 1, "}": -1}.get(ch, 0)
        if depth < 0:
            return False
    return depth == 0


def test_selection_of_finding():
    text = FindingModel.selection()
    assert _balanced(text)
    assert text.startswith("id id_int finding_id last_reported_time discovered_time ")
    assert "finding_score { score severity original_score }" in text
    assert "main_resource { id id_int resource_id resource_name " in text
    assert "tickets { edges { node { id id_int external_id " in text
    assert "} } pageInfo { hasNextPage endCursor } }" in text
    assert "additional_data { id data }" in text


def test_selection_depth():
    assert FindingModel.selection(0) == (
        "id id_int finding_id last_reported_time discovered_time cloud_provider original_status "
        "cloud_account package_name title age description"
    )
    shallow = GenerateScopes.selection(1)
    assert shallow == "ok scope_hierarchy { generated_time total_findings }"
    deep = GenerateScopes.selection(3)
    assert _balanced(deep)
    assert "nodes { id name node_type findings_count children { id name node_type findings_count } }" in deep
    assert "scopes { id id_int name description type filter " in deep
    with pytest.raises(ValueError, match="depth"):
        FindingModel.selection(-1)


@pytest.fixture(scope="module")
def schema():
    return build_schema(SDL_PATH.read_text(encoding="utf-8"))


@pytest.mark.parametrize("name", sorted(registry))
@pytest.mark.parametrize("depth", [0, 1, 2, 3])
def test_selection_is_valid_graphql_for_the_emulator_schema(schema, name, depth):
    cls = registry[name]
    document = parse(f"fragment F on {name} {{ {cls.selection(depth)} }}")
    rules = [r for r in specified_rules if r is not NoUnusedFragmentsRule]
    assert validate(schema, document, rules) == []


# ---------------------------------------------------------------------------------- registry


BRIEF_NAMES = [
    "FindingEvent",
    "RuleEvent",
    "Finding",
    "FindingsView",
    "FindingScore",
    "Datasource",
    "CHResource",
    "Status",
    "Ticket",
    "Comment",
    "Attachment",
    "FindingAdditionalData",
    "FiltersConfigOutput",
    "FindingFilter",
    "ScopeGroup",
    "ScopeHierarchy",
    "ScopeNode",
    "ScoringRule",
    "StatusRuleObject",
    "SLAGroup",
    "SLAPreference",
    "TicketSLARule",
    "RemediationQueue",
    "ActivateScoringRule",
    "AddScoringRule",
    "EditScoringRule",
    "DeleteScoringRule",
    "AddSLAGroup",
    "AddSLARule",
    "EditSLARule",
    "ActivateSLAStatus",
    "DeleteSLAStatus",
    "UpdateSLAV2",
    "UpdateUserSLAWithComment",
    "AddStatusRule",
    "EditStatusRule",
    "EnableStatusRule",
    "DeleteStatusRule",
    "AddTicketSLARule",
    "EditTicketSLARule",
    "EnableTicketSLARule",
    "DeleteTicketSLARule",
    "CreateScopeGroup",
    "EditScopeGroup",
    "DeleteScopeGroup",
    "GenerateScopes",
    "NewFindingScopeV2",
    "UpdateFindingScopeV2",
    "DeleteFindingScopeV2",
    "NewFindingFilterV2",
    "UpdateFindingFilterV2",
    "DeleteFindingFilterV2",
]


def _model_classes() -> set[type[Model]]:
    found: set[type[Model]] = set()
    todo = list(Model.__subclasses__())
    while todo:
        cls = todo.pop()
        if cls.__module__.startswith("secfindings.models"):
            found.add(cls)
        todo.extend(cls.__subclasses__())
    return found


def test_registry_covers_every_model_class():
    assert sorted(registry) == sorted(BRIEF_NAMES)
    # GenericModel stands for types the package does not model: it has no GraphQL type name.
    generic = {c for c in _model_classes() if issubclass(c, models.GenericModel)}
    assert set(registry.values()) == _model_classes() - generic
    for name, cls in registry.items():
        assert cls.__name__ == name
        assert model_for(name) is cls
        assert getattr(models, name) is cls


def test_model_for_unknown_name():
    with pytest.raises(KeyError, match=r"no model for GraphQL type 'Findng' \(did you mean 'Finding'\?\)"):
        model_for("Findng")
    with pytest.raises(KeyError, match="no model for GraphQL type 'PageInfo'"):
        model_for("PageInfo")


def test_all_is_sorted_and_importable():
    assert models.__all__ == sorted(models.__all__)
    for name in models.__all__:
        assert hasattr(models, name), name
    assert set(registry) | {
        "Connection",
        "GenericModel",
        "JSONString",
        "Model",
        "model_for",
        "registry",
    } == set(models.__all__)


def test_field_names_do_not_shadow_model_attributes():
    # A GraphQL field named like a method (to_dict, selection, ...) would be unreachable.
    for cls in registry.values():
        for name in cls.declared_fields():
            assert not hasattr(Model, name), f"{cls.__name__}.{name}"


def test_import_builds_no_field_tables():
    code = (
        "import secfindings.models as m, secfindings.models._base as b\n"
        "assert not b._TABLES, b._TABLES\n"
        "m.Finding({'title': 't'}).title\n"
        "assert list(b._TABLES) == [m.Finding], b._TABLES\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_mypy_sees_the_declared_fields(tmp_path):
    snippet = tmp_path / "snippet.py"
    snippet.write_text(
        "from secfindings.models import Finding\n"
        "f = Finding({})\n"
        "reveal_type(f.discovered_time)\n"
        "reveal_type(f.tickets)\n"
        "reveal_type(f.finding_score.original_score)\n"
        "f.titel\n",
        encoding="utf-8",
    )
    proc = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--cache-dir", str(tmp_path / "cache"), str(snippet)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        check=False,
    )
    out = proc.stdout
    assert 'snippet.py:3: note: Revealed type is "datetime.datetime"' in out, out
    assert "snippet.py:4: note: Revealed type is " in out, out
    assert "Connection[secfindings.models.findings.Ticket]" in out, out
    assert re.search(r'snippet\.py:5: note: Revealed type is "(builtins\.)?float \| None"', out), out
    assert 'snippet.py:6: error: "Finding" has no attribute "titel"' in out, out


# ---------------------------------------------------------------------------------- SDL drift

SPEC_FINDING_FIELDS = {
    "id",
    "id_int",
    "finding_id",
    "last_reported_time",
    "discovered_time",
    "cloud_provider",
    "original_status",
    "cloud_account",
    "package_name",
    "datasource",
    "main_resource",
    "title",
    "finding_score",
    "age",
    "description",
}
FINDING_EXTRAS = {"status", "tickets", "comments", "attachments", "additional_data"}

# Fields the spec documents without calling them nullable, typed non-Optional although the SDL
# (like graphene's) makes them nullable.
NON_OPTIONAL_BY_SPEC = (
    {("Finding", f) for f in (SPEC_FINDING_FIELDS | FINDING_EXTRAS) - {"package_name"}}
    | {("FindingScore", "score"), ("FindingScore", "severity")}
    | {("Datasource", "friendly_name"), ("CHResource", "resource_name")}
)

SCALARS: dict[str, Any] = {
    "ID": str,
    "String": str,
    "Int": int,
    "Float": float,
    "Boolean": bool,
    "DateTime": dt.datetime,
    "Date": dt.date,
    "GenericScalar": Any,
}


def _split_optional(hint: Any) -> tuple[Any, bool]:
    if typing.get_origin(hint) in (typing.Union, getattr(__import__("types"), "UnionType", None)):
        args = [a for a in typing.get_args(hint) if a is not type(None)]
        if len(args) == 1 and len(typing.get_args(hint)) == 2:
            return args[0], True
    return hint, False


def _check_type(gql_type: Any, hint: Any, where: str) -> None:
    """Checks a field's Python hint (Optional already removed) against its SDL type."""
    if isinstance(gql_type, GraphQLNonNull):
        gql_type = gql_type.of_type
    if isinstance(gql_type, GraphQLList):
        assert typing.get_origin(hint) is list, f"{where}: SDL list, model {hint}"
        (item,) = typing.get_args(hint)
        item, _ = _split_optional(item)
        _check_type(gql_type.of_type, item, f"{where}[]")
        return
    if isinstance(gql_type, GraphQLEnumType):
        assert hint is str, f"{where}: enum {gql_type.name} should be str, model {hint}"
    elif isinstance(gql_type, GraphQLScalarType):
        if gql_type.name == "JSONString":
            assert typing.get_origin(hint) is Annotated, f"{where}: JSONString, model {hint}"
            assert hint == JSONString, f"{where}: JSONString, model {hint}"
        else:
            assert gql_type.name in SCALARS, f"{where}: unmapped scalar {gql_type.name}"
            assert hint is SCALARS[gql_type.name], (
                f"{where}: {gql_type.name} should be {SCALARS[gql_type.name]}"
            )
    elif isinstance(gql_type, GraphQLObjectType) and gql_type.name.endswith("Connection"):
        assert typing.get_origin(hint) is Connection, f"{where}: SDL {gql_type.name}, model {hint}"
        edge = gql_type.fields["edges"].type
        while not isinstance(edge, GraphQLObjectType):
            edge = edge.of_type
        node = edge.fields["node"].type
        assert typing.get_args(hint) == (registry[node.name],), f"{where}: nodes {node.name}, model {hint}"
    elif isinstance(gql_type, GraphQLObjectType):
        assert hint is registry.get(gql_type.name), f"{where}: SDL {gql_type.name}, model {hint}"
    else:  # pragma: no cover - interfaces and unions are not used as field types
        pytest.fail(f"{where}: unexpected SDL type {gql_type}")


@pytest.mark.parametrize("name", sorted(registry))
def test_models_match_the_emulator_sdl(schema, name):
    cls = registry[name]
    sdl_type = schema.type_map.get(name)
    assert isinstance(sdl_type, GraphQLObjectType), f"{name} is not an object type of the SDL"
    hints = typing.get_type_hints(cls, include_extras=True)
    declared = {k: v for k, v in hints.items() if not k.startswith("_")}
    assert list(declared) == list(cls.declared_fields())
    if name == "Finding":
        assert set(declared) == SPEC_FINDING_FIELDS | FINDING_EXTRAS
        assert set(declared) <= set(sdl_type.fields)
    else:
        assert set(declared) == set(sdl_type.fields), f"{name}: model and SDL fields differ"
    for field_name, hint in declared.items():
        where = f"{name}.{field_name}"
        gql_type = sdl_type.fields[field_name].type
        inner, optional = _split_optional(hint)
        if isinstance(gql_type, GraphQLNonNull) or (name, field_name) in NON_OPTIONAL_BY_SPEC:
            assert not optional, f"{where} should not be Optional"
        else:
            assert optional, f"{where} is nullable in the SDL, so the model should say `| None`"
        _check_type(gql_type, inner, where)


def test_finding_matches_the_spec_table():
    # The spec (shared/spec) lists exactly these fields of Finding, with package_name nullable.
    hints = typing.get_type_hints(FindingModel, include_extras=True)
    assert _split_optional(hints["package_name"]) == (str, True)
    assert _split_optional(hints["last_reported_time"]) == (dt.datetime, False)
    assert _split_optional(hints["main_resource"]) == (CHResource, False)
    score_hints = typing.get_type_hints(models.FindingScore)
    assert _split_optional(score_hints["original_score"]) == (float, True)
    assert _split_optional(score_hints["score"]) == (float, False)

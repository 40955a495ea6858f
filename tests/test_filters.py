"""The findings filter builder and validator (secfindings.filters)."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest
from tests.servers import http as hostile
from tests.servers.http import HostileServer

import secfindings
import secfindings.filters as filters_module
from secfindings.errors import SecFindingsError, ValidationError
from secfindings.filters import (
    CONDITIONS,
    Condition,
    Field,
    Filter,
    Group,
    all_of,
    any_of,
    field,
    filter_tree,
)

# The filter text of the emulator's seeded "Critical and high open findings" filter, which
# follows the examples of the fact sheet (section 6.3).
SEEDED_FILTER = (
    '{"operator":"and","operands":[{"field":"severity","condition":"in","value":["4","5"]},'
    '{"field":"actual_status","condition":"","value":{"field":"category","condition":"in","value":["OPEN"]}}]}'
)

A = field("a").equals(1)
B = field("b").equals(2)
C = field("c").equals(3)
D = field("d").equals(4)


# ---------------------------------------------------------------------------------- builder


@pytest.mark.parametrize(
    ("built", "expected"),
    [
        (field("id").in_([123]), {"field": "id", "condition": "in", "value": [123]}),
        (field("severity").in_(["3", "4"]), {"field": "severity", "condition": "in", "value": ["3", "4"]}),
        (field("severity").not_in(("1",)), {"field": "severity", "condition": "not_in", "value": ["1"]}),
        (field("title").equals("x"), {"field": "title", "condition": "equals", "value": "x"}),
        (field("title").not_equals("x"), {"field": "title", "condition": "not_equals", "value": "x"}),
        (field("title").contains("public"), {"field": "title", "condition": "contains", "value": "public"}),
        (
            field("title").not_contains("test"),
            {"field": "title", "condition": "not_contains", "value": "test"},
        ),
        (field("cve").exists(), {"field": "cve", "condition": "exists", "value": "true"}),
        (field("cve").exists(True), {"field": "cve", "condition": "exists", "value": "true"}),
        (field("cve").exists(False), {"field": "cve", "condition": "exists", "value": "false"}),
        (
            field("tags_values").overlap(["a"]),
            {"field": "tags_values", "condition": "overlap", "value": ["a"]},
        ),
        (
            field("tags_values").not_overlapping(["a"]),
            {"field": "tags_values", "condition": "notoverlapping", "value": ["a"]},
        ),
        (
            field("tags_values").overlap_ilike(["Prod"]),
            {"field": "tags_values", "condition": "overlapilikelist", "value": ["Prod"]},
        ),
        (
            field("tags_values").not_overlap_ilike(["Prod"]),
            {"field": "tags_values", "condition": "notoverlapilikelist", "value": ["Prod"]},
        ),
        (
            field("actual_status").where(field("category").in_(["OPEN"])),
            {
                "field": "actual_status",
                "condition": "",
                "value": {"field": "category", "condition": "in", "value": ["OPEN"]},
            },
        ),
        (
            field("actual_status").where(field("key").in_(["11", "12"])),
            {
                "field": "actual_status",
                "condition": "",
                "value": {"field": "key", "condition": "in", "value": ["11", "12"]},
            },
        ),
    ],
)
def test_leaves_match_the_fact_sheet_shapes(built, expected):
    assert built.to_dict() == expected
    assert filter_tree(built) == expected
    assert filter_tree(expected) == expected


def test_the_seeded_filter_is_built_exactly():
    built = field("severity").in_(["4", "5"]) & field("actual_status").where(field("category").in_(["OPEN"]))
    assert built.to_json() == SEEDED_FILTER
    assert built.to_dict() == json.loads(SEEDED_FILTER)
    assert filter_tree(SEEDED_FILTER) == json.loads(SEEDED_FILTER)


def test_generators_and_tuples_become_lists():
    built = field("severity").in_(str(s) for s in (4, 5))
    assert built.to_dict()["value"] == ["4", "5"]
    assert built.value == ("4", "5")


# ---------------------------------------------------------------------------------- & and |


def test_and_or_build_groups():
    assert (A & B).to_dict() == {"operator": "and", "operands": [A.to_dict(), B.to_dict()]}
    assert (A | B).to_dict() == {"operator": "or", "operands": [A.to_dict(), B.to_dict()]}


def test_same_operator_chains_are_flattened():
    assert Group("and", (A, B, C)) == A & B & C
    assert Group("and", (A, B, C)) == A & (B & C)
    assert Group("and", (A, B, C, D)) == (A & B) & (C & D)
    assert Group("or", (A, B, C)) == A | B | C
    assert all_of(A & B, C) == Group("and", (A, B, C))
    assert any_of(A, B | C) == Group("or", (A, B, C))


def test_different_operators_nest():
    assert Group("or", (Group("and", (A, B)), C)) == (A & B) | C
    assert Group("and", (Group("or", (A, B)), C)) == (A | B) & C
    assert ((A | B) & C).to_dict() == {
        "operator": "and",
        "operands": [{"operator": "or", "operands": [A.to_dict(), B.to_dict()]}, C.to_dict()],
    }


def test_all_of_any_of_edge_cases():
    assert all_of(A) is A
    assert any_of(A) is A
    with pytest.raises(ValidationError, match=r"all_of\(\) needs at least one filter"):
        all_of()
    with pytest.raises(ValidationError, match=r"any_of\(\) needs at least one filter"):
        any_of()
    with pytest.raises(ValidationError, match="argument 1: expected a Filter, got dict"):
        all_of(A, {"field": "x"})  # type: ignore[arg-type]


def test_combining_with_a_non_filter_is_a_type_error():
    with pytest.raises(TypeError):
        _ = A & {"field": "x"}  # type: ignore[operator]
    with pytest.raises(TypeError):
        _ = A | "x"  # type: ignore[operator]


def test_a_filter_has_no_truth_value():
    # `A and B` would silently mean B.
    with pytest.raises(TypeError, match=r"combine filters with & and \|"):
        bool(A)
    with pytest.raises(TypeError):
        _ = A and B


# ---------------------------------------------------------------------------------- value semantics


def test_filters_are_immutable_hashable_and_compare_by_value():
    assert field("a").in_([1, 2]) == field("a").in_((1, 2))
    assert field("a").in_([1, 2]) != field("a").in_([2, 1])
    assert field("a").equals(1) != field("a").not_equals(1)
    assert len({A & B, A & B, A | B}) == 2
    with pytest.raises(dataclasses.FrozenInstanceError):
        A.value = 5  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        field("x").name = "y"  # type: ignore[misc]


def test_repr_is_the_python_that_builds_it():
    built = (
        field("severity").in_(["4", "5"])
        & field("actual_status").where(field("category").in_(["OPEN"]))
        & (field("cve").exists(False) | field("tags_values").not_overlap_ilike(["x"]))
    )
    text = repr(built)
    assert text == (
        "all_of(field('severity').in_(['4', '5']), "
        "field('actual_status').where(field('category').in_(['OPEN'])), "
        "any_of(field('cve').exists(False), field('tags_values').not_overlap_ilike(['x'])))"
    )
    namespace = {"field": field, "all_of": all_of, "any_of": any_of}
    assert eval(text, namespace) == built


def test_filter_tree_of_a_built_filter_round_trips():
    built = (A | B) & field("actual_status").where(field("key").in_(["11"]) | field("key").exists())
    tree = filter_tree(built)
    assert filter_tree(tree) == tree
    assert filter_tree(json.dumps(tree)) == tree


# ---------------------------------------------------------------------------------- builder errors


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda: field("severity").in_("3"), r"field\('severity'\)\.in_\(\) takes a list of values, not str"),
        (lambda: field("severity").overlap(3), r"overlap\(\) takes a list of values, not int"),
        (
            lambda: field("a").in_([[1]]),
            r"in_\(\) value must be a str, number, bool, date, datetime or None, got list",
        ),
        (
            lambda: field("a").equals([1]),
            r"equals\(\) value must be a str, number, bool, date, datetime or None, got list",
        ),
        (lambda: field("a").contains({"x": 1}), r"contains\(\) value must be"),
        (lambda: field("a").exists("yes"), r"exists\(\) takes a bool"),
        (lambda: field("a").where({"field": "x"}), r"where\(\) takes a Filter, got dict"),
        (lambda: field(""), "a filter field name must be a non-empty str"),
        (lambda: Condition("a", "equal", 1), r"unknown condition 'equal' \(did you mean 'equals'\?\)"),
        (lambda: Condition("a", "", 1), "needs a Filter as value"),
        (lambda: Group("xor", (A,)), "operator must be 'and' or 'or'"),  # type: ignore[arg-type]
        (lambda: Group("and", ()), "needs at least one operand"),
        (lambda: Group("and", ({"field": "a"},)), r"operands\[0\]: expected a Filter, got dict"),  # type: ignore[arg-type]
    ],
)
def test_builder_rejects_bad_values(make, message):
    with pytest.raises(ValidationError, match=message):
        make()


def test_validation_error_is_a_secfindings_value_error():
    with pytest.raises(SecFindingsError):
        field("a").in_("x")
    with pytest.raises(ValueError):  # noqa: PT011 - the type is the point here
        filter_tree({"field": "a"})


# ---------------------------------------------------------------------------------- filter_tree


def test_filter_tree_returns_a_fresh_copy():
    tree = {"operator": "or", "operands": [{"field": "a", "condition": "in", "value": [1]}]}
    out = filter_tree(tree)
    assert out == tree
    out["operands"][0]["value"].append(2)
    assert tree["operands"][0]["value"] == [1]


def test_filter_tree_parses_operands_given_as_json_text():
    tree = {"operator": "and", "operands": ['{"field": "a", "condition": "equals", "value": 1}', B.to_dict()]}
    assert filter_tree(tree) == {"operator": "and", "operands": [A.to_dict(), B.to_dict()]}


def test_filter_tree_accepts_filters_inside_dict_trees():
    assert filter_tree({"operator": "and", "operands": [A, B.to_dict()]}) == (A & B).to_dict()


def test_filter_tree_sends_exists_bools_as_text():
    out = filter_tree({"field": "cve", "condition": "exists", "value": True})
    assert out == {"field": "cve", "condition": "exists", "value": "true"}
    out = filter_tree({"field": "cve", "condition": "exists", "value": False})
    assert out["value"] == "false"
    assert filter_tree({"field": "cve", "condition": "exists", "value": "True"})["value"] == "True"


def _leaf(cond: str = "equals", value: object = 1, name: object = "a") -> dict[str, object]:
    return {"field": name, "condition": cond, "value": value}


@pytest.mark.parametrize(
    ("tree", "message"),
    [
        (
            {"operator": "and", "operands": [_leaf("in", [1]), _leaf("equal")]},
            "invalid filter: operands[1]: unknown condition 'equal' (did you mean 'equals'?)",
        ),
        (
            {"operator": "and", "operands": [{"operator": "or", "operands": [_leaf(), _leaf("in", "x")]}]},
            "invalid filter: operands[0].operands[1].value: condition 'in' needs a list of values, got str",
        ),
        (
            {
                "operator": "and",
                "operands": [{"field": "actual_status", "condition": "", "value": _leaf("inn")}],
            },
            "invalid filter: operands[0].value: unknown condition 'inn' (did you mean 'in'?)",
        ),
        (
            {"operator": "AND", "operands": [_leaf()]},
            "invalid filter: operator: must be 'and' or 'or', got 'AND' (did you mean 'and'?)",
        ),
        (
            {"operator": "xor", "operands": [_leaf()]},
            "invalid filter: operator: must be 'and' or 'or', got 'xor'",
        ),
        ({"operator": "and", "operands": []}, "invalid filter: operands: must not be empty"),
        (
            {"operator": "and", "operands": _leaf()},
            "invalid filter: operands: must be a list of filters, got dict",
        ),
        ({"operands": [_leaf()]}, "invalid filter: (root): a group needs 'operator' ('and' or 'or')"),
        (
            {"operator": "or"},
            "invalid filter: (root): a group needs 'operands' (a non-empty list of filters)",
        ),
        (
            {"operator": "or", "operand": [_leaf()]},
            "invalid filter: (root): unexpected key 'operand' (did you mean 'operands'?)",
        ),
        (
            {"operator": "and", "operands": [_leaf()], "field": "a"},
            "invalid filter: (root): a node is either a group (operator, operands) or a leaf",
        ),
        (
            {"field": "a", "condition": "in"},
            "invalid filter: (root): a leaf needs 'value' (it has ['condition', 'field'])",
        ),
        (_leaf(name=""), "invalid filter: field: must be a non-empty str, got ''"),
        (_leaf(name=3), "invalid filter: field: must be a non-empty str, got 3"),
        (_leaf(cond=None), "invalid filter: condition: must be a str, got NoneType"),
        (
            _leaf("in", [1, {"x": 1}]),
            "invalid filter: value[1]: must be a str, number, bool, date, datetime or None, got dict",
        ),
        (_leaf("equals", [1]), "invalid filter: value: condition 'equals' takes one value, got list"),
        (
            _leaf("equals", _leaf()),
            "invalid filter: value: condition 'equals' takes one value; "
            "for a relation filter use condition ''",
        ),
        (
            _leaf("", ["OPEN"]),
            "invalid filter: value: a relation filter (condition '') needs a filter as value, got list",
        ),
        (
            _leaf("exists", 1),
            "invalid filter: value: condition 'exists' needs true/false or 'true'/'false', got 1",
        ),
        (
            {"operator": "or", "operands": [["a"]]},
            "invalid filter: operands[0]: expected a filter object (dict), got list",
        ),
        ({"severity": "3"}, "invalid filter: (root): expected a group {'operator', 'operands'} or a leaf"),
        ("{not json", "invalid filter: (root): a filter given as text must be JSON"),
        (
            {"operator": "and", "operands": ["[1"]},
            "invalid filter: operands[0]: a filter given as text must be JSON",
        ),
    ],
)
def test_filter_tree_names_the_bad_node(tree, message):
    with pytest.raises(ValidationError) as info:
        filter_tree(tree)
    assert str(info.value).startswith(message), str(info.value)


def test_every_known_condition_is_accepted():
    assert {
        "in",
        "not_in",
        "equals",
        "not_equals",
        "contains",
        "not_contains",
        "exists",
        "overlap",
        "notoverlapping",
        "overlapilikelist",
        "notoverlapilikelist",
        "gt",
        "gte",
        "lt",
        "lte",
    } == CONDITIONS
    for cond in CONDITIONS:
        value = "true" if cond == "exists" else [1] if cond in ("in", "not_in") or "overlap" in cond else 1
        assert filter_tree(_leaf(cond, value)) == _leaf(cond, value)


def test_unknown_conditions_pass_unless_they_look_like_typos():
    assert filter_tree(_leaf("between", [1, 2])) == _leaf("between", [1, 2])
    assert field("score").condition("between", [1, 2]).to_dict() == _leaf("between", [1, 2], "score")
    assert field("score").gte(7).to_dict() == _leaf("gte", 7, "score")
    with pytest.raises(ValidationError, match="did you mean 'contains'"):
        filter_tree(_leaf("contans", "x"))


def test_public_names():
    assert filters_module.__all__ == sorted(filters_module.__all__)
    for name in filters_module.__all__:
        assert hasattr(filters_module, name)
    assert issubclass(Condition, Filter)
    assert issubclass(Group, Filter)
    assert not issubclass(Field, Filter)


def test_dates_and_aware_datetimes_are_sent_as_iso_text_and_naive_ones_refused(client):
    import datetime as dt

    since = dt.datetime(2025, 5, 20, tzinfo=dt.timezone.utc)
    built = field("last_reported_time").gte(since)
    assert built.to_dict()["value"] == "2025-05-20T00:00:00+00:00"
    assert field("due_date").in_([dt.date(2030, 1, 31)]).to_dict()["value"] == ["2030-01-31"]
    tree = filter_tree({"field": "discovered_time", "condition": "lt", "value": dt.date(2025, 1, 1)})
    assert tree["value"] == "2025-01-01"
    with pytest.raises(ValidationError, match="naive datetime"):
        field("last_reported_time").gte(dt.datetime(2025, 5, 20))
    with pytest.raises(ValidationError, match=r"value\[0\]: is a naive datetime"):
        filter_tree({"field": "due_date", "condition": "in", "value": [dt.datetime(2025, 1, 1)]})
    # Against the emulator: the same findings as the ISO text gives.
    recent = client.findings_view(filters=built, fields="id_int last_reported_time").to_list()
    as_text = client.findings_view(
        filters=field("last_reported_time").gte("2025-05-20T00:00:00+00:00"), fields="id_int"
    ).to_list()
    assert [f.id_int for f in recent] == [f.id_int for f in as_text]
    assert recent
    assert all(f.last_reported_time >= since for f in recent)


# ---------------------------------------------------------------------------------- deep trees

LEAF = {"field": "a", "condition": "equals", "value": 1}


def deep_filter_dict(depth: int) -> dict[str, Any]:
    node: dict[str, Any] = LEAF
    for _ in range(depth):
        node = {"operator": "and", "operands": [node]}
    return node


def deep_filter_text(depth: int) -> str:
    # Built as text: json.dumps itself recurses too deep on a tree this deep.
    return '{"operator": "and", "operands": [' * depth + json.dumps(LEAF) + "]}" * depth


def deep_filter(depth: int) -> secfindings.filters.Filter:
    """``depth`` nested groups. ``&`` flattens ``(a & b) & c`` into one group, so the groups
    alternate ``any_of`` / ``all_of``, which cannot be flattened."""
    f = secfindings.field("a").equals(0)
    for i in range(1, depth + 1):
        combine = secfindings.any_of if i % 2 else secfindings.all_of
        f = combine(f, secfindings.field("a").equals(i))
    return f


@pytest.mark.reliability_input
class TestDeepFilters:
    def test_and_flattens(self) -> None:
        a, b, c = (secfindings.field("a").equals(i) for i in range(3))
        assert (a & b) & c == secfindings.all_of(a, b, c)

    @pytest.mark.parametrize("form", ["dict", "json"])
    def test_filter_tree_5000_deep(self, form: str) -> None:
        value = deep_filter_dict(5000) if form == "dict" else deep_filter_text(5000)
        with pytest.raises(
            ValidationError, match=r"^invalid filter: it nests too deeply \(does it contain itself\?\)$"
        ):
            filter_tree(value)

    def test_a_3000_deep_filter_is_refused_before_sending(self, server: HostileServer) -> None:
        f = deep_filter(3000)
        depth, node = 0, f
        while isinstance(node, secfindings.filters.Group):
            depth, node = depth + 1, node.operands[0]
        assert depth == 3000
        c = hostile.client(server)
        with pytest.raises(ValidationError):
            next(iter(c.findings_view(filters=f)), None)
        assert server.api_requests == []

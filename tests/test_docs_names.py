"""The methods the guides name exist: a guide that names `activate_status_rule` (the method is
`enable_status_rule`) sends its reader to an AttributeError. Names written as
`add_/edit_/delete_scoring_rule` stand for each of them."""

from __future__ import annotations

import re

import pytest
from tests.docs_code import ROOT

import secfindings

VERBS = "add|edit|activate|enable|delete|new|update|create|set|save"
#: `add_/edit_/activate_/delete_scoring_rule`, or a single `enable_status_rule`.
NAMED = re.compile(rf"`((?:(?:{VERBS})_/)*(?:{VERBS})_[a-z0-9_]+)(?:\(\))?`")
GUIDES = sorted((ROOT / "docs" / "guides").glob("*.md"))


def names_in(text: str) -> list[str]:
    found = []
    for m in NAMED.finditer(text):
        *prefixes, last = m.group(1).split("/")
        verb, rest = re.match(rf"({VERBS})_(.*)", last).groups()  # type: ignore[union-attr]
        found += [f"{p}{rest}" for p in prefixes] + [f"{verb}_{rest}"]
    return found


def test_the_pattern_expands_the_short_forms() -> None:
    assert names_in("`add_/edit_/delete_scoring_rule` and `enable_status_rule()`") == [
        "add_scoring_rule",
        "edit_scoring_rule",
        "delete_scoring_rule",
        "enable_status_rule",
    ]


@pytest.mark.parametrize("page", GUIDES, ids=[p.name for p in GUIDES])
def test_every_method_a_guide_names_exists(page: object) -> None:
    text = page.read_text(encoding="utf-8")  # type: ignore[attr-defined]
    missing = [n for n in names_in(text) if not hasattr(secfindings.Client, n)]
    assert missing == [], f"{page}: no such method: {missing}"


def test_the_calling_guide_names_every_mutation() -> None:
    text = (ROOT / "docs" / "guides" / "calling.md").read_text(encoding="utf-8")
    named = set(names_in(text))
    if "(and their `_v2`)" in text:  # the finding filters' _v2 forms
        named |= {n + "_v2" for n in named if n.endswith("_finding_filter")}
    mutations = {op["name"] for op in secfindings._native.catalog() if op["kind"] == "mutation"}
    assert mutations - named == set()

"""Shared fixtures. The `emulator`, `client` and `async_client` fixtures come from the package's
pytest plugin (secfindings.testing.pytest_plugin), the same ones users get."""

from __future__ import annotations

import pytest

FINDING_QUERY = """
query GetFinding($id: ID!) {
  finding(id: $id) { id id_int title finding_score { score severity } }
}
"""

PAGE_QUERY = """
query Page($first: Int, $after: String, $filters: FiltersConfigInput, $sort: [FindingsViewSortEnum]) {
  findings_view(first: $first, after: $after, filters_config: $filters, sort: $sort) {
    edges { cursor node { id id_int title } }
    pageInfo { hasNextPage endCursor }
  }
}
"""

ADD_RULE = """
mutation Add($rule: ScoringRuleInput!) {
  add_scoring_rule(scoring_rule: $rule) { ok }
}
"""


@pytest.fixture
def secfindings_emulator_options() -> dict[str, object]:
    return {"findings": 300, "seed": 7}

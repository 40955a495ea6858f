"""The rule collections and the other lists (scoring_rules, status_rules, sla_groups, ...) by
default select what a rule is: its name, whether it is on, what it does and the conditions it
applies to (the filter JSON), not only its id; in `to_list()` and in `secfindings export`."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

import pytest

#: operation -> fields each default row must carry (beyond the id), as the emulator serves them.
EXPECTED = {
    "scoring_rules": ["name", "active", "method", "value", "filters_config"],
    "status_rules": ["name", "enabled", "status_key", "filters_config"],
    "sla_groups": ["name", "priority", "filters_config"],
    "sla_preferences": ["name", "severity", "days", "active", "filters_config"],
    "ticket_sla_rules": ["name", "enabled", "days", "filters_config"],
    "finding_filters": ["name", "type", "filter"],
    "remediation_queues": ["title", "state", "status", "filters_config"],
    "get_resources_ch": ["resource_name", "resource_type", "cloud_provider"],
}


@pytest.mark.parametrize("operation", sorted(EXPECTED))
def test_to_list_of_a_collection_gives_more_than_ids(emulator: Any, client: Any, operation: str) -> None:
    emulator.clear_request_log()
    rows = [r.to_dict() for r in getattr(client, operation)().to_list()]
    assert rows
    for row in rows:
        for field in ["id", *EXPECTED[operation]]:
            assert field in row, (operation, field, row)
    names = [r.get("name", r.get("title", r.get("resource_name"))) for r in rows]
    assert all(isinstance(n, str) and n for n in names), names
    sent = emulator.request_log()[-1]["query"]
    if "filters_config" in EXPECTED[operation]:
        assert "filters_config { filtersjson }" in sent


def test_the_conditions_are_the_rules_filter_json(client: Any) -> None:
    rules = client.status_rules().to_list()
    conditions = [json.loads(r.filters_config.filtersjson) for r in rules if r.filters_config.filtersjson]
    assert conditions
    assert all("operator" in c or "field" in c for c in conditions)


def test_export_scoring_rules_writes_name_state_and_conditions(emulator: Any, tmp_path: Any) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SECFINDINGS_")}
    env.update(
        SECFINDINGS_API_TOKEN=emulator.create_api_token(),
        SECFINDINGS_BASE_URL=emulator.base_url,
        SECFINDINGS_AUTH_URL=emulator.auth_url,
    )
    out = subprocess.run(
        [sys.executable, "-m", "secfindings", "export", "scoring_rules", "--out", "-", "--no-progress"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    rows = [json.loads(line) for line in out.stdout.splitlines()]
    assert len(rows) == 3
    for row in rows:
        assert set(row) >= {"id", "name", "active", "method", "value", "filters_config"}, row
        assert isinstance(row["name"], str)
        assert isinstance(row["active"], bool)
    assert any(row["filters_config"]["filtersjson"] for row in rows)


def test_without_a_schema_the_catalog_default_stays_the_id(emulator: Any) -> None:
    """schema="off" asks only for what the spec documents (the catalog's own default): a
    field the production schema might lack would fail the whole request."""
    with emulator.client(schema="off") as c:
        (row, *_) = [r.to_dict() for r in c.scoring_rules().to_list()]
    assert set(row) == {"id"}

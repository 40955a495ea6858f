"""The emulator's two models of the service: ``default`` (ours) and ``known`` (only what the
public facts show), over real HTTP."""

from __future__ import annotations

import datetime as dt
import json

import pytest

from secfindings import Client, GraphQLError
from secfindings.testing import Emulator

VIEW = "query($f: FiltersConfigInput) { findings_view(filters_config: $f) { edges { node { id } } } }"
SEVERE = {"filtersjson": json.dumps({"field": "severity", "condition": "in", "value": ["5"]})}


def test_a_profile_is_checked() -> None:
    with pytest.raises(ValueError, match="profile must be one of default, known"):
        Emulator(10, profile="nope")  # type: ignore[arg-type]


def test_the_known_schema_lacks_what_the_facts_do_not_show() -> None:
    with Emulator(50, profile="known") as emu, emu.client() as client:
        schema = client.schema()
        assert schema is not None
        view = set(schema.fields("FindingsView"))
        assert {"id_int", "title", "score", "actual_status", "sla_status"} <= view
        assert not view & {"severity", "due_date", "last_reported_time", "original_score"}
        assert "total_count" not in schema.fields("FindingConnection")
        # The default selection follows the server: a plain walk works.
        assert len(client.findings_view().to_list()) == 50
        # What the facts confirm works: the severity filter, offset paging.
        page = client.execute(
            "query($f: FiltersConfigInput) { findings_view(first: 3, offset: 2, filters_config: $f) "
            "{ edges { node { id_int } } } }",
            {"f": SEVERE},
        )
        assert len(page["findings_view"]["edges"]) == 3


@pytest.mark.parametrize(
    ("condition", "value", "message"),
    [("gte", 3, "Unknown filter condition"), ("lt", 3, "Unknown filter condition")],
)
def test_the_known_profile_refuses_range_conditions(condition: str, value: int, message: str) -> None:
    with Emulator(50, profile="known") as emu, emu.client(schema="off") as client:
        f = {"filtersjson": json.dumps({"field": "id", "condition": condition, "value": value})}
        with pytest.raises(GraphQLError, match=message):
            client.execute(VIEW, {"f": f})
        lrt = {"filtersjson": json.dumps({"field": "last_reported_time", "condition": "in", "value": ["x"]})}
        with pytest.raises(GraphQLError, match="Unknown filter field"):
            client.execute(VIEW, {"f": lrt})


def test_a_new_server_on_a_used_url_is_learned_afresh() -> None:
    # A known emulator on the port a default one used must not be checked with its schema.
    with Emulator(20) as first:
        with first.client(schema="live") as c:
            assert "due_date" in c.schema().fields("FindingsView")  # type: ignore[union-attr]
        port = first.port
    with Emulator(20, port=port, profile="known") as second, second.client() as c:
        assert "due_date" not in c.schema().fields("FindingsView")  # type: ignore[union-attr]


def test_a_created_finding_is_open_and_not_overdue(client: Client, emulator: Emulator) -> None:
    new_id, _ = emulator.create_finding(5)
    node = client.execute(
        "query($f: FiltersConfigInput) { findings_view(filters_config: $f) { edges { node { sla_status "
        "remediation_sub_phase actual_status { category } } } } }",
        {"f": {"filtersjson": json.dumps({"field": "id", "condition": "in", "value": [new_id]})}},
    )["findings_view"]["edges"][0]["node"]
    # Due in 7 days (3 on a production account): at risk, never overdue or closed at birth.
    want = {"sla_status": "AT_RISK", "remediation_sub_phase": "NEW", "actual_status": {"category": "OPEN"}}
    assert node == want
    fixed_id, _ = emulator.create_finding(
        3, status="FIXED", due_date=dt.datetime(2020, 1, 1, tzinfo=dt.timezone.utc)
    )
    assert client.finding(fixed_id, fields="id status { category }").status.category == "FIXED"
    with pytest.raises(ValueError, match="aware"):
        emulator.create_finding(3, due_date=dt.datetime(2020, 1, 1))


def test_a_new_server_on_a_used_url_is_probed_afresh() -> None:
    """What the walk plan's probes found of a server is forgotten with its schema when a new
    emulator answers at the same URL."""
    from secfindings import _plan

    with Emulator(20) as first, first.client(schema="off") as c:
        assert _plan.capable(c, _plan.ID_RANGE) is True
        port, url = first.port, first.base_url
    with Emulator(20, port=port, profile="known") as second, second.client(schema="off") as c:
        assert second.base_url == url
        assert _plan.capable(c, _plan.ID_RANGE) is False

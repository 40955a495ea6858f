"""Quickstart: the most severe findings, grouped, one finding in full, and a scoring rule's life.

Runs against the real API when SECFINDINGS_API_TOKEN and SECFINDINGS_BASE_URL are set
(SECFINDINGS_REGION or SECFINDINGS_AUTH_URL choose the identity provider), and otherwise against
the embedded emulator, so it works offline on a fresh machine. Against the real API it only reads.
"""

from __future__ import annotations

import os
import sys
import time
from collections import Counter

import secfindings
from secfindings import field


def read(client: secfindings.Client) -> None:
    # Severity 4 and 5 that are still open, in the API's filter language, built in Python.
    severe = field("severity").in_(["4", "5"]) & field("actual_status").where(field("category").in_(["OPEN"]))
    started = time.perf_counter()
    findings = client.findings_view(filters=severe, sort="SCORE_DESC").to_list()
    elapsed = time.perf_counter() - started
    print(f"{len(findings)} open findings of severity 4-5, fetched in {elapsed:.2f}s")
    for cloud, n in Counter(f.cloud_provider for f in findings).most_common():
        print(f"  {cloud or '(none)':<12} {n}")
    print("top 5 by score:")
    for f in findings[:5]:
        print(f"  {f.score or 0:>6.2f}  #{f.id_int:<6} {(f.title or '')[:70]}")
    if findings:
        finding = client.finding(findings[0].id)
        print(f"\nfinding #{finding.id_int}: {finding.title}")
        print(f"  discovered {finding.discovered_time:%Y-%m-%d %H:%M %Z}, age {finding.age} days")
        source, resource = finding.datasource.friendly_name, finding.main_resource.resource_name
        print(f"  datasource {source}, resource {resource}")
        print(f"  score {finding.finding_score.score} (severity {finding.finding_score.severity})")


def write(client: secfindings.Client) -> None:
    """A scoring rule's lifecycle: add, activate, see the effect, delete (emulator only)."""
    target = field("title").contains("Log4Shell")
    added = client.add_scoring_rule(
        {
            "name": "Log4Shell is always critical",
            "method": "SET",
            "value": 10.0,
            "active": False,
            "filters_config": {"filtersjson": target},
        },
        fields="ok scoring_rule { id }",  # mutations select only `ok` by default
    )
    # The schema lets a mutation's result omit the rule (`ScoringRule | None`): say so if it does.
    if added.scoring_rule is None:
        raise RuntimeError("add_scoring_rule answered without the rule")
    rule_id = added.scoring_rule.id
    on = client.activate_scoring_rule(
        rule_id, True, fields="ok scoring_rule { name active affected_findings }"
    )
    if on.scoring_rule is not None:
        rule = on.scoring_rule
        print(
            f"\nscoring rule {rule.name!r}: active={rule.active}, "
            f"applied to {rule.affected_findings} findings"
        )
    client.delete_scoring_rule(rule_id)


def main() -> int:
    if os.environ.get("SECFINDINGS_API_TOKEN") and os.environ.get("SECFINDINGS_BASE_URL"):
        with secfindings.Client() as client:
            print(f"Using the API at {client.base_url}")
            read(client)
        return 0
    from secfindings.testing import Emulator

    with Emulator(findings=5_000, seed=7) as emu, emu.client() as client:
        print(f"Using the embedded emulator at {emu.base_url} (set SECFINDINGS_API_TOKEN and")
        print("SECFINDINGS_BASE_URL to use the real API)\n")
        read(client)
        write(client)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""A scoring rule's and a status rule's life: add, activate, edit, list, delete, and the effect.

    python examples/rules_lifecycle.py

Against the embedded emulator (the default) every step runs, and the findings the rules match
are counted before and after, to show what activating a rule does.

This script writes. With SECFINDINGS_API_TOKEN and SECFINDINGS_BASE_URL set it refuses to run
unless given --yes-write-to-production, and even then it never activates its rules: activation
rewrites the scores or statuses of every matching finding, and deleting the rule afterwards does
not restore them. There it adds the rules inactive, edits, lists and deletes them.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections import Counter
from typing import TypeVar

import secfindings
from secfindings import ScoringRuleInput, StatusRuleInput, field

# Mutations select only `ok` unless asked; these are the fields worth printing.
SCORING_FIELDS = "id id_int name method value round_function priority active affected_findings"
STATUS_FIELDS = "id id_int name status_key status { title category } priority enabled affected_findings"
PREFIX = "secfindings example:"
T = TypeVar("T")


def present(value: T | None) -> T:
    """The rule in a mutation's result: the schema lets a result leave it out (``ScoringRule |
    None``), and this script cannot go on without it."""
    if value is None:
        raise RuntimeError("the server answered without the rule")
    return value


def status_title(rule: secfindings.models.StatusRuleObject) -> str | None:
    return rule.status.title if rule.status else None


def scores(client: secfindings.Client, target: secfindings.Filter) -> str:
    rows = client.findings_view(filters=target, fields="id score").to_list()
    mean = sum(r.score or 0.0 for r in rows) / len(rows) if rows else 0.0
    return f"{len(rows)} findings, mean score {mean:.2f}"


def statuses(client: secfindings.Client, target: secfindings.Filter) -> str:
    rows = client.findings_view(filters=target, fields="id actual_status { title }").to_list()
    counts = Counter(r.actual_status.title if r.actual_status else None for r in rows)
    return ", ".join(f"{n} {title}" for title, n in counts.most_common())


def scoring_rule_lifecycle(client: secfindings.Client, activate: bool) -> None:
    print("== scoring rule")
    target = field("title").contains("publicly accessible")
    print(f"matching findings before: {scores(client, target)}")
    rule: ScoringRuleInput = {
        "name": f"{PREFIX} exposure raises the score",
        "description": "Publicly accessible resources are one point riskier.",
        "method": "INCREASE",
        "value": 1.0,
        "round_function": "ROUND",
        "priority": 50,
        # Created inactive: nothing changes until it is switched on on purpose.
        "active": False,
        "filters_config": {"filtersjson": target},
    }
    added = client.add_scoring_rule(rule, fields=f"ok scoring_rule {{ {SCORING_FIELDS} }}")
    r = present(added.scoring_rule)
    print(f"added   #{r.id_int} {r.name!r}: {r.method} {r.value}, active={r.active}")
    try:
        if activate:
            on = client.activate_scoring_rule(r.id, True, fields=f"ok scoring_rule {{ {SCORING_FIELDS} }}")
            now = present(on.scoring_rule)
            print(f"activated: active={now.active}, changed {now.affected_findings} findings")
            print(f"matching findings now: {scores(client, target)}")
        # An edit sends only the keys that change.
        edited = client.edit_scoring_rule(
            r.id, {"method": "SET", "value": 9.0}, fields=f"ok scoring_rule {{ {SCORING_FIELDS} }}"
        )
        e = present(edited.scoring_rule)
        print(f"edited  #{e.id_int}: {e.method} {e.value}, active={e.active}, changed {e.affected_findings}")
        if activate:
            print(f"matching findings now: {scores(client, target)}")
        print("scoring rules:")
        for s in client.scoring_rules(fields=SCORING_FIELDS):
            mark = "*" if s.id == r.id else " "
            print(
                f" {mark} #{s.id_int:<3} {'on ' if s.active else 'off'} {s.method:<8} {s.value:>5} {s.name}"
            )
    finally:
        # Whatever failed above, leave no rule behind.
        deleted = client.delete_scoring_rule(r.id)
        print(f"deleted #{r.id_int}: ok={deleted.ok}")
    left = [s.id_int for s in client.scoring_rules(fields="id id_int")]
    print(f"scoring rules left: {left} (#{r.id_int} gone: {r.id_int not in left})")
    if activate:
        # The API's contract: scores already assigned by a deleted rule stay as they are.
        print(f"matching findings after the delete: {scores(client, target)}")


def status_rule_lifecycle(client: secfindings.Client, enable: bool) -> None:
    print("\n== status rule")
    target = field("title").contains("Missing rate limiting")
    print(f"matching findings before: {statuses(client, target)}")
    rule: StatusRuleInput = {
        "name": f"{PREFIX} accept missing rate limiting",
        "description": "Rate limiting is enforced at the gateway.",
        "status_key": "30",  # Risk accepted (category IGNORED)
        "priority": 50,
        "enabled": False,
        "filters_config": {"filtersjson": target},
    }
    added = client.add_status_rule(rule, fields=f"ok status_rule {{ {STATUS_FIELDS} }}")
    r = present(added.status_rule)
    print(f"added   #{r.id_int} {r.name!r}: sets {status_title(r)!r}, enabled={r.enabled}")
    try:
        if enable:
            # Status rules are switched with enable_status_rule (scoring rules: activate_...).
            on = client.enable_status_rule(r.id, True, fields=f"ok status_rule {{ {STATUS_FIELDS} }}")
            state = present(on.status_rule)
            print(f"enabled: enabled={state.enabled}, changed {state.affected_findings} findings")
            print(f"matching findings now: {statuses(client, target)}")
        edited = client.edit_status_rule(
            r.id, {"status_key": "31"}, fields=f"ok status_rule {{ {STATUS_FIELDS} }}"
        )
        e = present(edited.status_rule)
        category = e.status.category if e.status else None
        print(f"edited  #{e.id_int}: sets {status_title(e)!r} ({category}), enabled={e.enabled}")
        if enable:
            print(f"matching findings now: {statuses(client, target)}")
        print("status rules:")
        for s in client.status_rules(fields=STATUS_FIELDS):
            mark = "*" if s.id == r.id else " "
            sets = s.status.title if s.status else s.status_key
            print(f" {mark} #{s.id_int:<3} {'on ' if s.enabled else 'off'} -> {sets:<15} {s.name}")
    finally:
        deleted = client.delete_status_rule(r.id)
        print(f"deleted #{r.id_int}: ok={deleted.ok}")
    left = [s.id_int for s in client.status_rules(fields="id id_int")]
    print(f"status rules left: {left} (#{r.id_int} gone: {r.id_int not in left})")
    try:
        client.delete_status_rule(r.id)
    except secfindings.GraphQLError as exc:
        # Deleting twice is an error from the server, not a silent ok.
        print(f"deleting it again: GraphQLError: {exc.errors[0].get('message') if exc.errors else exc}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--yes-write-to-production",
        action="store_true",
        help="allow adding, editing and deleting (never activating) rules on the real API",
    )
    args = parser.parse_args(argv)
    if os.environ.get("SECFINDINGS_API_TOKEN") and os.environ.get("SECFINDINGS_BASE_URL"):
        if not args.yes_write_to_production:
            print(
                "refusing to write to the real API (SECFINDINGS_API_TOKEN and SECFINDINGS_BASE_URL "
                "are set);\n"
                "unset them to use the embedded emulator, or pass --yes-write-to-production",
                file=sys.stderr,
            )
            return 2
        with secfindings.Client() as client:
            print(f"Using the API at {client.base_url}: rules are added inactive and deleted again\n")
            scoring_rule_lifecycle(client, activate=False)
            status_rule_lifecycle(client, enable=False)
        return 0
    from secfindings.testing import Emulator

    with Emulator(findings=5_000, seed=7) as emu, emu.client() as client:
        print(f"Using the embedded emulator at {emu.base_url}\n")
        scoring_rule_lifecycle(client, activate=True)
        status_rule_lifecycle(client, enable=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

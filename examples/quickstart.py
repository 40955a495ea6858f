"""Quickstart: the most severe findings, grouped, and one finding in full.

Runs against the real API when SECFINDINGS_API_TOKEN and SECFINDINGS_BASE_URL are set
(SECFINDINGS_REGION or SECFINDINGS_AUTH_URL choose the identity provider), and otherwise against
the embedded emulator, so it works offline on a fresh machine.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections import Counter

import secfindings

SEVERE = """
query Severe($first: Int, $after: String, $filters: FiltersConfigInput) {
  findings_view(first: $first, after: $after, filters_config: $filters) {
    edges { node { id id_int title score cloud_provider cloud_account resource_name age } }
    pageInfo { hasNextPage endCursor }
  }
}
"""

FINDING = """
query Finding($id: ID!) {
  finding(id: $id) {
    id id_int finding_id title discovered_time last_reported_time cloud_provider cloud_account
    original_status package_name age description
    datasource { friendly_name } main_resource { resource_name }
    finding_score { score severity original_score }
  }
}
"""


def run(client: secfindings.Client) -> None:
    # Severity 4 and 5, in the filter language of the API (a JSON text inside filters_config).
    flt = {"field": "severity", "condition": "in", "value": ["4", "5"]}
    started = time.perf_counter()
    severe = client.paginate(SEVERE, {"filters": {"filtersjson": json.dumps(flt)}}, page_size=100).to_list()
    elapsed = time.perf_counter() - started
    print(f"{len(severe)} severe findings (severity 4-5) fetched in {elapsed:.2f}s")
    by_cloud = Counter(f["cloud_provider"] for f in severe)
    for cloud, n in by_cloud.most_common():
        print(f"  {cloud or '(none)':<12} {n}")
    top = sorted(severe, key=lambda f: f["score"] or 0, reverse=True)[:5]
    print("top 5 by score:")
    for f in top:
        print(f"  {f['score']:>6.1f}  #{f['id_int']:<6} {f['title'][:70]}")
    if top:
        finding = client.execute(FINDING, {"id": top[0]["id"]})["finding"]
        print(f"\nfinding #{finding['id_int']}: {finding['title']}")
        print(f"  discovered {finding['discovered_time']}, age {finding['age']} days")
        source, resource = finding["datasource"]["friendly_name"], finding["main_resource"]["resource_name"]
        print(f"  datasource {source}, resource {resource}")
        first_line = (finding["description"] or "").strip().splitlines()[:1]
        print(f"  {first_line[0] if first_line else ''}")


def main() -> int:
    if os.environ.get("SECFINDINGS_API_TOKEN") and os.environ.get("SECFINDINGS_BASE_URL"):
        with secfindings.Client() as client:
            print(f"Using the API at {client.base_url}")
            run(client)
        return 0
    from secfindings.testing import Emulator

    with Emulator(findings=5_000, seed=7) as emu, emu.client() as client:
        print(f"Using the embedded emulator at {emu.base_url} (set SECFINDINGS_API_TOKEN and")
        print("SECFINDINGS_BASE_URL to use the real API)\n")
        run(client)
    return 0


if __name__ == "__main__":
    sys.exit(main())

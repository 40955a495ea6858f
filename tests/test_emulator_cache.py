"""The emulator's optional response cache (for benchmarks) never serves stale data."""

from __future__ import annotations

import pytest

from secfindings.testing import Emulator


def test_cached_answers_are_identical_and_a_mutation_invalidates_them() -> None:
    with Emulator(findings=50, response_cache=True) as emu, emu.client() as c:
        q = "query Q($n: String) { scoring_rules(name: $n) { edges { node { id name } } } }"
        first = c.execute(q, {"n": "cache"})
        assert first == c.execute(q, {"n": "cache"})
        assert first["scoring_rules"]["edges"] == []
        c.add_scoring_rule({"name": "cache me", "method": "SET", "value": 1.0})
        after = c.execute(q, {"n": "cache"})
        assert [e["node"]["name"] for e in after["scoring_rules"]["edges"]] == ["cache me"]
        # Requests served from the cache are still logged and counted.
        assert len([r for r in emu.request_log() if r["operation_name"] == "Q"]) == 3
        assert emu.stats()["api_requests"] == 4


def test_cache_is_per_customer_and_still_authenticates() -> None:
    """Two customers ask the same query: the second gets an answer of its own, not the first's
    cached bytes. The probe is a change made through the emulator's control side, which does
    not pass through the API's mutation path (so it leaves acme's cached entry in place): a cache
    keyed without the customer would hand globex acme's answer from before the change."""
    import secfindings

    q = "{ finding(id: 1) { finding_score { severity } } }"
    with Emulator(findings=50, response_cache=True) as emu:
        with emu.client(customer="acme") as a, emu.client(customer="globex") as g:
            before = a.execute(q)["finding"]["finding_score"]["severity"]
            emu.update_finding(1, severity=1 if before != 1 else 2)
            after = g.execute(q)["finding"]["finding_score"]["severity"]
            assert after != before, "globex was served acme's cached answer"
            assert after == (1 if before != 1 else 2)
        with (
            secfindings.Client(jwt="not.a.jwt", base_url=emu.base_url) as bad,
            pytest.raises(secfindings.AuthenticationError),
        ):
            bad.execute(q)

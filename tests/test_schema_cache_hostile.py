"""The live schema against what a server or a shared disk can throw at it (issue 19): a schema so
large that building it and suggesting from it takes seconds, and a disk cache file that is a
FIFO, a huge sparse file, JSON nested 100,000 deep, a link out of the folder, someone else's
file, or sits in a folder anyone can write to. Servers are the tests' own, on 127.0.0.1."""

from __future__ import annotations

import copy
import json
import logging
import os
import shutil
import stat
import subprocess
import threading
import tracemalloc
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import graphql
import pytest
from tests.servers import http as hostile
from tests.servers.http import HostileServer, Request, Response

import secfindings
from secfindings import _live, _native, _schema, _schema_cache
from secfindings.testing import Emulator

pytestmark = pytest.mark.reliability_hostile


@pytest.fixture(autouse=True)
def fresh_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """Each test starts with empty memory and disk caches of its own (a private folder)."""
    folder = tmp_path / "cache"
    folder.mkdir(mode=0o700)
    monkeypatch.setenv("SECFINDINGS_SCHEMA_CACHE", str(folder))
    monkeypatch.delenv("SECFINDINGS_SCHEMA_TTL", raising=False)
    _live._MEMORY.clear()
    _schema_cache._WARNED.clear()
    yield folder
    _live._MEMORY.clear()


def served(introspection: dict[str, Any], root: Callable[[Request], Response] | None = None) -> HostileServer:
    """A server answering the client's introspection with ``introspection``, anything else with
    ``root(req)`` (default: an empty ``data``)."""
    server = HostileServer()
    body = json.dumps({"data": introspection}).encode()

    def api(req: Request) -> Response:
        if req.json().get("operationName") == "IntrospectionQuery":
            return Response.text(body, content_type="application/json")
        return root(req) if root else Response.of_json({"data": {"items": []}})

    server.api = api
    return server


def introspection_with_enum(values: int, name: str = "Big") -> dict[str, Any]:
    small = graphql.build_schema(f"enum {name} {{ V0 }} type Query {{ items(sort: [{name}]): [String] }}")
    intro = dict(graphql.introspection_from_schema(small))
    for t in intro["__schema"]["types"]:
        if t["name"] == name:
            t["enumValues"] = [
                {
                    "name": f"VALUE_{i}_DESC",
                    "description": None,
                    "isDeprecated": False,
                    "deprecationReason": None,
                }
                for i in range(values)
            ]
    return intro


def live_client(server: HostileServer) -> secfindings.Client:
    return hostile.client(server, schema="live")


# ------------------------------------------------------------------------------ a huge schema


def test_a_schema_beyond_the_limits_is_refused_with_a_clear_warning(
    fresh_cache: Path, caplog: pytest.LogCaptureFixture
) -> None:
    huge = introspection_with_enum(_schema.MAX_TYPE_MEMBERS + 1)
    caplog.set_level(logging.INFO, logger="secfindings.schema")
    with served(huge) as server, live_client(server) as c:
        schema = c.schema()
        assert schema is not None
        assert schema.source == "built-in"
        warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
        assert len(warnings) == 1
        assert (
            "'Big' has 5,001 values (the client accepts at most 5,000 per type)" in warnings[0].getMessage()
        )
        assert list(fresh_cache.iterdir()) == []  # not kept
        assert c.execute("{ __typename }") == {"items": []}  # checked against the built-in one
    many_types = introspection_with_enum(1)
    extra = copy.deepcopy(next(t for t in many_types["__schema"]["types"] if t["name"] == "Big"))
    for i in range(_schema.MAX_TYPES):
        many_types["__schema"]["types"].append({**extra, "name": f"Extra{i}"})
    with pytest.raises(_schema.SchemaTooLarge, match="types"):
        _schema.Schema("x", "server", introspection=many_types)


def test_a_misspelt_value_of_a_large_enum_looks_at_a_bounded_number_of_candidates(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    big = introspection_with_enum(_schema.MAX_TYPE_MEMBERS)
    compared: list[int] = []
    real_core = _native.suggestions
    real_suggestions = graphql.type.definition.suggestion_list

    def counting_core(word: str, candidates: Any, *args: Any) -> list[str]:
        compared.append(len(candidates))
        return real_core(word, candidates, *args)

    def counting_suggestions(word: str, options: Any) -> list[str]:
        compared.append(len(options))
        return real_suggestions(word, options)

    monkeypatch.setattr(_native, "suggestions", counting_core)
    monkeypatch.setattr(graphql.type.definition, "suggestion_list", counting_suggestions)
    doc = "query Q($s: [Big]) { items(sort: $s) }"
    with served(big) as server, live_client(server) as c:
        assert c.execute(doc, {"s": ["VALUE_4999_DESC"]}) == {"items": []}
        sent = len(server.api_requests)
        with pytest.raises(
            secfindings.ValidationError, match=r"'VALUE_12_DESK' is not a value of the enum Big"
        ):
            c.execute(doc, {"s": ["VALUE_12_DESK"]})
        with pytest.raises(
            secfindings.ValidationError, match=r"Did you mean the enum value 'VALUE_4999_DESC'"
        ):
            c.execute(doc, {"s": ["value_4999_desc"]})
        assert len(server.api_requests) == sent
    # The suggestion path ran through the core, which compares at most
    # MAX_SUGGESTION_CANDIDATES of them (src/core/suggest.rs's test with 5,000 names).
    assert compared


# ------------------------------------------------------------------------------ the disk cache


def cache_file(folder: Path, emu: Emulator) -> Path:
    return folder / (_schema_cache.hashlib.sha256(emu.base_url.encode()).hexdigest()[:32] + ".json")


def fresh_client_schema(emu: Emulator) -> secfindings.Schema:
    _live._MEMORY.clear()
    with emu.client(schema="live") as c:
        schema = c.schema()
    assert schema is not None
    return schema


def assert_rewritten(path: Path, emu: Emulator) -> None:
    """The bad file was replaced by a good one, which the next process reads."""
    st = os.lstat(path)
    assert stat.S_ISREG(st.st_mode)
    assert st.st_size < _schema_cache.MAX_CACHE_BYTES
    assert fresh_client_schema(emu).source == "disk cache"


def test_a_fifo_in_place_of_the_cache_file_does_not_hang(fresh_cache: Path) -> None:
    with Emulator(findings=5) as emu:
        path = cache_file(fresh_cache, emu)
        os.mkfifo(path)
        result: list[Any] = []
        worker = threading.Thread(target=lambda: result.append(fresh_client_schema(emu)), daemon=True)
        worker.start()
        worker.join(60)  # a guard against a hang, not a timing assertion
        if worker.is_alive():  # release the reader blocked on the FIFO, then fail
            os.close(os.open(path, os.O_WRONLY | os.O_NONBLOCK))
            worker.join(10)
            pytest.fail("the first call hung on a FIFO in the cache folder")
        assert result[0].source == "server"
        assert_rewritten(path, emu)


def test_a_huge_sparse_cache_file_is_not_read(fresh_cache: Path) -> None:
    with Emulator(findings=5) as emu:
        path = cache_file(fresh_cache, emu)
        with open(path, "wb") as f:
            f.truncate(512 << 20)  # sparse: no disk space, but 512 MiB to whoever reads it
        tracemalloc.start()
        try:
            schema = fresh_client_schema(emu)
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        assert schema.source == "server"
        assert peak < 128 << 20, f"{peak:,} bytes at the peak: the file was read"
        assert_rewritten(path, emu)


def test_json_nested_100000_deep_is_discarded_and_rewritten(fresh_cache: Path) -> None:
    with Emulator(findings=5) as emu:
        path = cache_file(fresh_cache, emu)
        path.write_text("[" * 100_000 + "]" * 100_000)
        assert fresh_client_schema(emu).source == "server"
        assert fresh_client_schema(emu).source == "disk cache"
        path.write_text('{"format": 1, "introspection": ' + "[" * 100_000 + "]" * 100_000 + "}")
        assert fresh_client_schema(emu).source == "server"
        assert_rewritten(path, emu)


def test_a_link_out_of_the_folder_is_not_followed(fresh_cache: Path, tmp_path: Path) -> None:
    with Emulator(findings=5) as emu:
        fresh_client_schema(emu)
        path = cache_file(fresh_cache, emu)
        outside = tmp_path / "elsewhere.json"
        shutil.copy(path, outside)  # a valid cache file, but not in the folder
        before = outside.read_bytes()
        path.unlink()
        path.symlink_to(outside)
        assert fresh_client_schema(emu).source == "server"
        assert not path.is_symlink()
        assert outside.read_bytes() == before  # what the link pointed to is left alone
        assert_rewritten(path, emu)


def give_to_another_user(path: Path) -> None:
    """chown to uid 54321: directly as root, else through `sudo -n` (CI has it: .ci/run installs
    packages with it). Skipped where neither works (a conftest hook fails the skip under $CI).
    The file stays readable by us (0644), so that what refuses it is the owner check, not a
    failed open."""
    path.chmod(0o644)
    if os.geteuid() == 0:
        os.chown(path, 54321, 54321)
        return
    sudo = shutil.which("sudo")
    if sudo is None:
        pytest.skip("chown to another user needs root or sudo")
    done = subprocess.run([sudo, "-n", "chown", "54321:54321", str(path)], capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip(f"chown to another user needs root or a password-less sudo: {done.stderr.strip()}")


@pytest.mark.skipif(not hasattr(os, "geteuid"), reason="POSIX owners")
def test_a_cache_file_of_another_user_is_not_trusted(fresh_cache: Path) -> None:
    with Emulator(findings=5) as emu:
        fresh_client_schema(emu)
        path = cache_file(fresh_cache, emu)
        give_to_another_user(path)
        assert os.stat(path).st_uid == 54321
        assert fresh_client_schema(emu).source == "server"
        assert os.stat(path).st_uid == os.geteuid()


def test_a_world_writable_cache_folder_is_not_used(
    fresh_cache: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with Emulator(findings=5) as emu:
        fresh_client_schema(emu)
        path = cache_file(fresh_cache, emu)
        kept = path.read_bytes()
        fresh_cache.chmod(0o777)
        with caplog.at_level(logging.WARNING, logger="secfindings.schema"):
            assert fresh_client_schema(emu).source == "server"
            assert fresh_client_schema(emu).source == "server"
        warned = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
        assert len(warned) == 1  # once per folder
        assert f"{fresh_cache} is writable by every user: it is not used" in warned[0]
        assert path.read_bytes() == kept  # neither read nor written
        fresh_cache.chmod(0o1777)  # sticky (like /tmp): others cannot replace our files
        assert fresh_client_schema(emu).source == "disk cache"


def test_the_hash_is_documented_as_integrity_not_authenticity() -> None:
    doc = _schema_cache._digest.__doc__ or ""
    assert "integrity, not authenticity" in doc

"""After fork(), a client from the parent refuses clearly; a new client in the child works."""

import os
import sys
import warnings

import pytest
from tests.conftest import FINDING_QUERY

pytestmark = [
    pytest.mark.skipif(sys.platform == "win32", reason="fork() is POSIX only"),
    pytest.mark.reliability_fault,
]


def test_fork_child_gets_a_working_runtime(emulator, client):
    client.execute(FINDING_QUERY, {"id": 1})  # the parent's runtime is running
    token = emulator.create_api_token(name="child")
    r, w = os.pipe()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # 3.12+: fork with threads
        pid = os.fork()
    if pid == 0:  # child: report through the pipe, never return into pytest
        code = 1
        try:
            import secfindings

            try:
                client.execute(FINDING_QUERY, {"id": 1})
                verdict = "parent client worked"
            except secfindings.ClientClosedError as e:
                verdict = "refused" if "another process" in str(e) else f"wrong message: {e}"
            fresh = secfindings.Client(
                token, base_url=emulator.base_url, auth_url=emulator.auth_url, timeout=10
            )
            got = fresh.execute(FINDING_QUERY, {"id": 2})["finding"]["id_int"]
            os.write(w, f"{verdict};{got}".encode())
            code = 0
        finally:
            os._exit(code)
    os.close(w)
    with os.fdopen(r) as f:
        out = f.read()
    _, status = os.waitpid(pid, 0)
    assert os.WEXITSTATUS(status) == 0, out
    assert out == "refused;2"


def test_fork_child_can_use_a_new_async_client(emulator, async_client):
    import asyncio

    asyncio.run(async_client.execute(FINDING_QUERY, {"id": 1}))  # the parent's loop had a queue
    token = emulator.create_api_token(name="async-child")
    r, w = os.pipe()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        pid = os.fork()
    if pid == 0:
        code = 1
        try:
            import secfindings

            async def run() -> int:
                async with secfindings.AsyncClient(
                    token, base_url=emulator.base_url, auth_url=emulator.auth_url, timeout=10
                ) as ac:
                    got = await ac.execute(FINDING_QUERY, {"id": 3})
                    items = [f.id_int async for f in ac.findings_view(limit=5, fields="id_int")]
                    return got["finding"]["id_int"] * 100 + len(items)

            os.write(w, str(asyncio.run(run())).encode())
            code = 0
        finally:
            os._exit(code)
    os.close(w)
    with os.fdopen(r) as f:
        out = f.read()
    _, status = os.waitpid(pid, 0)
    assert os.WEXITSTATUS(status) == 0, out
    assert out == "305"

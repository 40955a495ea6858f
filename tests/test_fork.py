"""After fork(), a client from the parent refuses clearly; a new client in the child works."""

import os
import sys
import warnings

import pytest
from tests.conftest import FINDING_QUERY

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="fork() is POSIX only")


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

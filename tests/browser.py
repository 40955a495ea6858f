"""Headless Chromium (Debian's ``/usr/bin/chromium``) driven over the DevTools protocol through
``--remote-debugging-pipe`` (file descriptors 3 and 4, NUL-separated JSON; no websocket package
needed): open a local page, wait until it says its charts are drawn, and collect what a test
asserts on: console errors, uncaught exceptions, every request that left the page's own file,
and a screenshot. Name resolution is mapped to nothing (``--host-resolver-rules``), so a page that
tries the network fails there too, and the request is still seen in the log."""

from __future__ import annotations

import base64
import contextlib
import json
import os
import selectors
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

CHROMIUM = os.environ.get("SECFINDINGS_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
#: Requests that do not leave the page: its own file, inline data, blobs.
LOCAL = ("file:", "data:", "blob:", "about:")


@dataclass
class PageRun:
    console_errors: list[str] = field(default_factory=list)
    exceptions: list[str] = field(default_factory=list)
    requests: list[str] = field(default_factory=list)
    ready: Any = None
    render_seconds: float = 0.0
    screenshot: bytes = b""

    @property
    def off_page(self) -> list[str]:
        return [u for u in self.requests if not u.startswith(LOCAL)]


class Chromium:
    """One headless browser; :meth:`open` a page in a fresh tab."""

    def __init__(self, width: int = 1280, height: int = 2400) -> None:
        self.profile = tempfile.mkdtemp(prefix="secfindings-chromium-")
        to_child_r, self._to_child = os.pipe()
        self._from_child, from_child_w = os.pipe()

        def fds() -> None:  # in the child: the pipe's ends as fds 3 and 4 (copies first: either
            # may already be 3 or 4)
            a, b = os.dup(to_child_r), os.dup(from_child_w)
            os.dup2(a, 3)
            os.dup2(b, 4)

        self.proc = subprocess.Popen(
            [
                CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--remote-debugging-pipe",
                f"--user-data-dir={self.profile}", "--host-resolver-rules=MAP * ~NOTFOUND",
                "--no-first-run", "--disable-extensions", "--disable-background-networking",
                "--disable-component-update", "--disable-sync", "--disable-default-apps",
                "--hide-scrollbars", f"--window-size={width},{height}", "about:blank",
            ],
            preexec_fn=fds,
            pass_fds=(3, 4),  # kept open past close_fds, which runs after preexec_fn
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )  # fmt: skip
        os.close(to_child_r)
        os.close(from_child_w)
        self._buf = b""
        self._id = 0
        self._events: list[dict[str, Any]] = []
        self._sel = selectors.DefaultSelector()
        self._sel.register(self._from_child, selectors.EVENT_READ)

    def close(self) -> None:
        with contextlib.suppress(Exception):  # closing anyway
            self.send("Browser.close", timeout=5)
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        for fd in (self._to_child, self._from_child):
            with contextlib.suppress(OSError):
                os.close(fd)
        shutil.rmtree(self.profile, ignore_errors=True)

    def __enter__(self) -> Chromium:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------------- protocol

    def _read(self, deadline: float) -> dict[str, Any]:
        while b"\0" not in self._buf:
            left = deadline - time.monotonic()
            if left <= 0 or not self._sel.select(left):
                raise TimeoutError("chromium did not answer in time")
            chunk = os.read(self._from_child, 1 << 20)
            if not chunk:
                raise ConnectionError("chromium closed its pipe")
            self._buf += chunk
        raw, self._buf = self._buf.split(b"\0", 1)
        message: dict[str, Any] = json.loads(raw)
        return message

    def send(self, method: str, params: dict[str, Any] | None = None, session: str | None = None,
             timeout: float = 60) -> dict[str, Any]:  # fmt: skip
        self._id += 1
        message: dict[str, Any] = {"id": self._id, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = session
        os.write(self._to_child, json.dumps(message).encode() + b"\0")
        deadline = time.monotonic() + timeout
        while True:
            got = self._read(deadline)
            if got.get("id") == self._id:
                if "error" in got:
                    raise RuntimeError(f"{method}: {got['error']}")
                result: dict[str, Any] = got.get("result", {})
                return result
            self._events.append(got)

    def wait_for(self, method: str, timeout: float = 60) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        for i, e in enumerate(self._events):
            if e.get("method") == method:
                return self._events.pop(i)
        while True:
            got = self._read(deadline)
            if got.get("method") == method:
                return got
            self._events.append(got)

    # ------------------------------------------------------------------------- a page

    def open(self, path: Path, ready: str, timeout: float = 60) -> PageRun:
        """Open ``path`` in a fresh tab, wait for the JavaScript expression ``ready`` (a promise
        or a value) and take a full-page screenshot."""
        target = self.send("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = self.send("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        for domain in ("Runtime", "Log", "Network", "Page"):
            self.send(f"{domain}.enable", session=session)
        self._events.clear()
        run = PageRun()
        start = time.perf_counter()
        self.send("Page.navigate", {"url": path.resolve().as_uri()}, session=session)
        self.wait_for("Page.loadEventFired", timeout)
        value = self.send(
            "Runtime.evaluate",
            {"expression": ready, "awaitPromise": True, "returnByValue": True},
            session=session,
            timeout=timeout,
        )
        run.render_seconds = time.perf_counter() - start
        if "exceptionDetails" in value:
            run.exceptions.append(json.dumps(value["exceptionDetails"])[:500])
        run.ready = value.get("result", {}).get("value")
        metrics = self.send("Page.getLayoutMetrics", session=session)
        size = metrics.get("cssContentSize") or metrics["contentSize"]
        shot = self.send(
            "Page.captureScreenshot",
            {"format": "png", "captureBeyondViewport": True,
             "clip": {"x": 0, "y": 0, "width": size["width"], "height": size["height"], "scale": 1}},
            session=session,
        )  # fmt: skip
        run.screenshot = base64.b64decode(shot["data"])
        for e in self._events:
            method, params = e.get("method"), e.get("params", {})
            if method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert"):
                run.console_errors.append(json.dumps(params.get("args"))[:300])
            elif method == "Runtime.exceptionThrown":
                run.exceptions.append(json.dumps(params.get("exceptionDetails"))[:500])
            elif method == "Log.entryAdded" and params.get("entry", {}).get("level") == "error":
                run.console_errors.append(params["entry"].get("text", "")[:300])
            elif method == "Network.requestWillBeSent":
                run.requests.append(params.get("request", {}).get("url", ""))
        self.send("Target.closeTarget", {"targetId": target})
        return run

"""Headless Chromium driven over the DevTools protocol on a pipe (standard library only).

``--remote-debugging-pipe`` makes Chromium read commands on fd 3 and write replies
and events on fd 4, each a JSON message ended by a NUL byte: no websocket, no
port, no download. The flags keep it off the network (this machine has none, and
Chromium's background services would otherwise wait on refused connections).
"""
from __future__ import annotations

import base64
import fcntl
import json
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

BINARY = shutil.which("chromium") or "/usr/bin/chromium"
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--remote-debugging-pipe"]


def available() -> bool:
    return os.path.exists(BINARY)


class Browser:
    """One Chromium process with one page; ``events`` collects what the page reported."""

    def __init__(self, width: int = 1100, height: int = 900) -> None:
        self._profile = tempfile.mkdtemp(prefix="opbench-chromium-")
        to_child_r, self._to_child = os.pipe()
        self._from_child, from_child_w = os.pipe()

        def wire() -> None:  # in the child: the pipes become fds 3 and 4 (inheritable)
            # Moved above 10 first: a pipe may already sit on fd 3 or 4.
            high = [fcntl.fcntl(fd, fcntl.F_DUPFD, 10) for fd in (to_child_r, from_child_w)]
            os.dup2(high[0], 3)
            os.dup2(high[1], 4)

        self.proc = subprocess.Popen(
            [BINARY, *FLAGS, f"--user-data-dir={self._profile}", f"--window-size={width},{height}",
             "about:blank"],
            preexec_fn=wire, close_fds=False, stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL)
        os.close(to_child_r)
        os.close(from_child_w)
        self._buffer = b""
        self._next_id = 0
        self.events: list[dict[str, Any]] = []
        target = self.call("Target.createTarget", url="about:blank")["targetId"]
        self.session = self.call("Target.attachToTarget", targetId=target,
                                 flatten=True)["sessionId"]
        for domain in ("Page", "Runtime", "Log"):
            self.page(f"{domain}.enable")
        self.page("Emulation.setDeviceMetricsOverride", width=width, height=height,
                  deviceScaleFactor=1, mobile=False)

    def _send(self, message: dict[str, Any]) -> int:
        self._next_id += 1
        message["id"] = self._next_id
        os.write(self._to_child, json.dumps(message).encode() + b"\0")
        return self._next_id

    def _receive(self, deadline: float) -> dict[str, Any]:
        while b"\0" not in self._buffer:
            if time.monotonic() > deadline:
                raise TimeoutError("Chromium did not answer in time")
            chunk = os.read(self._from_child, 1 << 16)
            if not chunk:
                raise RuntimeError("Chromium closed the pipe (exited)")
            self._buffer += chunk
        raw, _, self._buffer = self._buffer.partition(b"\0")
        return json.loads(raw)  # type: ignore[no-any-return]

    def _wait(self, pred: Any, timeout: float) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while True:
            message = self._receive(deadline)
            if pred(message):
                return message
            if "method" in message:
                self.events.append(message)

    def call(self, method: str, timeout: float = 30, session: str | None = None,
             **params: Any) -> dict[str, Any]:
        message: dict[str, Any] = {"method": method, "params": params}
        if session:
            message["sessionId"] = session
        sent = self._send(message)
        reply = self._wait(lambda m: m.get("id") == sent, timeout)
        if "error" in reply:
            raise RuntimeError(f"{method}: {reply['error']}")
        return reply.get("result", {})  # type: ignore[no-any-return]

    def page(self, method: str, **params: Any) -> dict[str, Any]:
        return self.call(method, session=self.session, **params)

    def open(self, path: Path, timeout: float = 30) -> None:
        """Loads ``path``; ``errors()`` then reports this page's errors only."""
        self.events = []
        self.page("Page.navigate", url=path.resolve().as_uri())
        loaded = [e for e in self.events if e.get("method") == "Page.loadEventFired"]
        if not loaded:
            self._wait(lambda m: m.get("method") == "Page.loadEventFired", timeout)
        self.events = [e for e in self.events if e.get("method") != "Page.loadEventFired"]

    def evaluate(self, expression: str) -> Any:
        result = self.page("Runtime.evaluate", expression=expression, returnByValue=True)
        if "exceptionDetails" in result:
            raise RuntimeError(f"{expression}: {result['exceptionDetails']}")
        return result["result"].get("value")

    def hover(self, x: float, y: float) -> None:
        self.page("Input.dispatchMouseEvent", type="mouseMoved", x=x, y=y)

    def errors(self) -> list[str]:
        """Console errors, uncaught exceptions and failed loads the page reported."""
        self.evaluate("1")  # drains events queued before now
        out = []
        for e in self.events:
            method, params = e.get("method"), e.get("params", {})
            if method == "Runtime.exceptionThrown":
                details = params.get("exceptionDetails", {})
                out.append(details.get("exception", {}).get("description")
                           or details.get("text", "exception"))
            elif method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert"):
                out.append(json.dumps(params.get("args", []))[:500])
            elif method == "Log.entryAdded" and params.get("entry", {}).get("level") == "error":
                out.append(params["entry"].get("text", ""))
        return out

    def screenshot(self, path: Path) -> None:
        data = self.page("Page.captureScreenshot", format="png")["data"]
        path.write_bytes(base64.b64decode(data))

    def close(self) -> None:
        try:
            self.call("Browser.close", timeout=10)
        except (RuntimeError, TimeoutError, OSError):
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        os.close(self._to_child)
        os.close(self._from_child)
        shutil.rmtree(self._profile, ignore_errors=True)

    def __enter__(self) -> Browser:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

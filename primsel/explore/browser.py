"""Drive a headless Chromium over the DevTools protocol, to check and time the explorer site.

Used by the explorer's tests and by ``benchmarks/explorer_load.py``. Needs a Chromium (Debian's
``chromium`` package, or ``$PRIMSEL_CHROMIUM``) and the ``websocket-client`` package (the
``dev`` extra). The browser is started with its own empty profile directory, no network services
and the DevTools endpoint on a loopback port chosen by the system; it is stopped (and the profile
removed) when the :class:`Chromium` context ends.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

__all__ = ["BrowserError", "Chromium", "find_chromium"]

#: Command names tried, in order, when ``$PRIMSEL_CHROMIUM`` is not set.
CANDIDATES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
#: Flags of the headless browser (no sandbox: CI runs as root).
FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-extensions", "--remote-debugging-port=0")


class BrowserError(RuntimeError):
    """The browser could not be started or did not answer (the message says why)."""


def find_chromium() -> str | None:
    """Path of a Chromium executable (``$PRIMSEL_CHROMIUM`` first), or None."""
    chosen = os.environ.get("PRIMSEL_CHROMIUM")
    if chosen:
        return shutil.which(chosen) or (chosen if os.access(chosen, os.X_OK) else None)
    return next((path for path in map(shutil.which, CANDIDATES) if path), None)


class Chromium:
    """A headless Chromium with one page, driven over the DevTools protocol.

    Parameters
    ----------
    executable : the browser (default :func:`find_chromium`).
    width, height : viewport size in CSS pixels.
    timeout : seconds to wait for the browser to start and for each answer.

    Attributes
    ----------
    errors : console errors, uncaught exceptions and failed loads seen so far (texts).
    """

    def __init__(self, executable: str | None = None, width: int = 1400, height: int = 900,
                 timeout: float = 30.0) -> None:
        self.executable = executable or find_chromium()
        if self.executable is None:
            raise BrowserError("no Chromium found (install Debian's chromium, or set PRIMSEL_CHROMIUM)")
        self.width, self.height, self.timeout = width, height, timeout
        self.errors: list[str] = []
        self._next = 0
        self._process: subprocess.Popen[bytes] | None = None
        self._profile: str | None = None
        self._socket: Any = None

    def __enter__(self) -> Chromium:
        import websocket

        self._profile = tempfile.mkdtemp(prefix="primsel-chromium-")
        self._process = subprocess.Popen(
            [self.executable, *FLAGS, f"--user-data-dir={self._profile}", f"--window-size={self.width},{self.height}",
             "about:blank"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
        try:
            port = self._port()
            deadline = time.monotonic() + self.timeout
            while True:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=self.timeout) as answer:
                    pages = [t for t in json.load(answer) if t.get("type") == "page"]
                if pages or time.monotonic() > deadline:
                    break
                time.sleep(0.1)
            if not pages:
                raise BrowserError("the browser opened no page")
            self._socket = websocket.create_connection(pages[0]["webSocketDebuggerUrl"], timeout=self.timeout,
                                                       suppress_origin=True)
            for domain in ("Page", "Runtime", "Log"):
                self.send(f"{domain}.enable")
            self.send("Emulation.setDeviceMetricsOverride",
                      {"width": self.width, "height": self.height, "deviceScaleFactor": 1, "mobile": False})
        except BaseException:
            self.__exit__()
            raise
        return self

    def __exit__(self, *exc_info: object) -> None:
        if self._socket is not None:
            try:
                self._socket.close()
            except Exception:  # already closed by the browser
                pass
            self._socket = None
        if self._process is not None:
            self._process.terminate()
            try:
                self._process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait(timeout=10)
            self._process = None
        if self._profile is not None:
            shutil.rmtree(self._profile, ignore_errors=True)
            self._profile = None

    def _port(self) -> int:
        """The DevTools port, from the profile's DevToolsActivePort file."""
        marker = Path(self._profile) / "DevToolsActivePort"
        deadline = time.monotonic() + self.timeout
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                raise BrowserError(f"{self.executable} exited with status {self._process.returncode} at start")
            try:
                return int(marker.read_text().split()[0])
            except (OSError, ValueError, IndexError):
                time.sleep(0.05)
        raise BrowserError(f"{self.executable} did not open its DevTools port within {self.timeout:g} s")

    def send(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        """Send one DevTools command and return its result; events seen meanwhile are recorded.

        Raises
        ------
        BrowserError : the command failed, or no answer came within the timeout.
        """
        self._next += 1
        ident = self._next
        self._socket.send(json.dumps({"id": ident, "method": method, "params": params or {}}))
        deadline = time.monotonic() + self.timeout
        while time.monotonic() < deadline:
            message = json.loads(self._socket.recv())
            if message.get("id") == ident:
                if "error" in message:
                    raise BrowserError(f"{method}: {message['error'].get('message')}")
                return message.get("result", {})
            self._event(message)
        raise BrowserError(f"{method}: no answer within {self.timeout:g} s")

    def _event(self, message: dict[str, Any]) -> None:
        method, params = message.get("method"), message.get("params", {})
        if method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert"):
            self.errors.append("console: " + " ".join(str(a.get("value", a.get("description", ""))) for a in params.get("args", [])))
        elif method == "Runtime.exceptionThrown":
            details = params.get("exceptionDetails", {})
            self.errors.append("exception: " + str(details.get("exception", {}).get("description") or details.get("text")))
        elif method == "Log.entryAdded" and params.get("entry", {}).get("level") == "error":
            entry = params["entry"]
            self.errors.append(f"log: {entry.get('text')} {entry.get('url', '')}".strip())

    def evaluate(self, expression: str) -> Any:
        """The value of a JavaScript expression in the page (promises are awaited).

        Raises
        ------
        BrowserError : the expression threw.
        """
        result = self.send("Runtime.evaluate", {"expression": expression, "returnByValue": True, "awaitPromise": True})
        if "exceptionDetails" in result:
            details = result["exceptionDetails"]
            raise BrowserError(f"{expression!r} threw: {details.get('exception', {}).get('description') or details.get('text')}")
        return result.get("result", {}).get("value")

    def wait_for(self, expression: str, timeout: float | None = None) -> Any:
        """Poll a JavaScript expression until it is truthy; returns its value.

        Raises
        ------
        BrowserError : still falsy after ``timeout`` seconds (default: the browser's timeout).
        """
        deadline = time.monotonic() + (self.timeout if timeout is None else timeout)
        while True:
            value = self.evaluate(expression)
            if value:
                return value
            if time.monotonic() > deadline:
                raise BrowserError(f"{expression!r} still false after {timeout or self.timeout:g} s; errors: {self.errors}")
            time.sleep(0.02)

    def open(self, url: str) -> None:
        """Load ``url`` as a new document (via about:blank, so a changed #fragment reloads too)."""
        self.send("Page.navigate", {"url": "about:blank"})
        self.wait_for("document.readyState === 'complete' && location.href === 'about:blank'")
        self.send("Page.navigate", {"url": url})

    def screenshot(self, path: str | os.PathLike[str], full_page: bool = False) -> None:
        """Save a PNG of the viewport (or of the whole page, up to 4000 pixels high)."""
        params: dict[str, Any] = {"format": "png"}
        if full_page:
            height = min(int(self.evaluate("document.documentElement.scrollHeight")), 4000)
            params["clip"] = {"x": 0, "y": 0, "width": self.width, "height": height, "scale": 1}
            params["captureBeyondViewport"] = True
        data = self.send("Page.captureScreenshot", params)["data"]
        Path(path).write_bytes(base64.b64decode(data))

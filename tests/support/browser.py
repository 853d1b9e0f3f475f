"""Headless Chromium for the book tests, driven over the DevTools protocol through a pipe.

With `--remote-debugging-pipe`, Chromium reads protocol commands from file descriptor 3 and writes
replies and events to descriptor 4, one JSON object per message, each ended by a NUL byte. That
needs no websocket client and no debugging port, only the standard library. Chromium's own log
(`--enable-logging=stderr`) is no substitute: it prints console.log and console.error at the same
level and says nothing about an image or script that failed to load.
"""

from __future__ import annotations

import base64
import functools
import http.server
import json
import os
import select
import shutil
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

FLAGS = [
    "--headless",
    "--no-sandbox",  # we run as root in a container
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-quic",
    # No host name resolves, so a page that reaches for a CDN fails here as it would offline,
    # even on a machine with network. Only the local test server stays reachable.
    "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1",
    "--window-size=1280,2000",
]

# Runs in the page once it has loaded: waits for MathJax to finish typesetting (at most 10 s, the
# budget `--virtual-time-budget=10000` would give), then for every image, lazy ones included.
SETTLE = """(async () => {
    const timeout = new Promise(resolve => setTimeout(resolve, 10000));
    if (window.MathJax && MathJax.startup && MathJax.startup.promise) {
        await Promise.race([MathJax.startup.promise, timeout]);
    }
    const images = [...document.images];
    images.forEach(img => { img.loading = "eager"; });
    await Promise.race([Promise.all(images.map(img => img.decode().catch(() => null))), timeout]);
    return images.map(img => [img.currentSrc || img.src, img.complete ? img.naturalWidth : 0]);
})()"""


# Runs after each Tab of `Chromium.open(tabs=n)`: the element that has the focus, and whether a
# sighted keyboard user sees where it is (an outline or a shadow drawn because of :focus-visible,
# inside the window), once the page's transitions have run.
FOCUSED = """(async () => {
    // the theme animates focus rings and the skip link into view: judge the end of the animation
    await Promise.all(document.getAnimations().map(animation => animation.finished.catch(() => null)));
    const target = href => {  // where an in-page link leads: "main", "div", ... or null
        const found = href.startsWith("#") && href.length > 1 ? document.getElementById(href.slice(1)) : null;
        return found ? found.tagName.toLowerCase() : null;
    };
    const el = document.activeElement;
    if (!el || el === document.body) return null;
    const drawn = node => {  // an outline or a shadow: the element's own, or a part's (a toggle's chevron)
        const style = getComputedStyle(node);
        return (style.outlineStyle !== "none" && parseFloat(style.outlineWidth) > 0)
            || (style.boxShadow && style.boxShadow !== "none");
    };
    const ring = drawn(el) ? el : [...el.querySelectorAll("*")].find(drawn);
    const box = (ring || el).getBoundingClientRect();
    const label = el.getAttribute("aria-label") || el.innerText || el.textContent || el.getAttribute("title") || "";
    return {tag: el.tagName.toLowerCase(), text: label.replace(/\\s+/g, " ").trim().slice(0, 60),
            href: el.getAttribute("href"), math: !!el.closest("mjx-container"),
            visible: el.matches(":focus-visible") && !!ring && box.width > 0 && box.height > 0,
            inside: box.bottom > 0 && box.top < window.innerHeight && box.right > 0 && box.left < window.innerWidth,
            target: target(el.getAttribute("href") || "")};
})()"""


# MathJax's speech, as a reader turns it on in its menu (`Chromium.open(before=SPEECH_ON)`; the menu
# keeps its settings in localStorage). SPOKEN then waits until every formula has its spoken text
# (aria-label, from the a11y/ and sre/ files beside MathJax) and counts them.
SPEECH_ON = "localStorage.setItem('MathJax-Menu-Settings', JSON.stringify({explorer: true}));"
SPOKEN = """(async () => {
    const pause = ms => new Promise(resolve => setTimeout(resolve, ms));
    const formulas = () => [...document.querySelectorAll("mjx-container")];
    for (let i = 0; i < 300 && !formulas().every(f => f.getAttribute("aria-label")); i++) {
        await pause(100);
    }
    return {formulas: formulas().length, spoken: formulas().filter(f => f.getAttribute("aria-label")).length,
            mathml: formulas().filter(f => f.querySelector("mjx-assistive-mml")).length,
            errors: document.querySelectorAll("mjx-merror").length};
})()"""

def news(seconds: float) -> str:
    """A probe: what the open course page's status region comes to say, waited for ``seconds`` at most
    (open the page with a Chromium whose timeout is longer)."""
    return f"""(async () => {{
    for (let i = 0; i < {int(seconds * 2)} && !document.getElementById("updates").textContent.trim(); i++) {{
        await new Promise(resolve => setTimeout(resolve, 500));
    }}
    return document.getElementById("updates").textContent.trim();
}})()"""


SPEECH_UNSAVED = "localStorage.removeItem('MathJax-Menu-Settings');"  # a reader who never turned it on
# ... or as a reader turns it on there while reading (the menu's Accessibility > Activate sets this
# variable): the page typesets again, and every formula must come back spoken.
SPEECH_FROM_MENU = """(async () => {
    await MathJax.startup.promise;
    MathJax.startup.document.menu.menu.pool.lookup("explorer").setValue(true);
    const pause = ms => new Promise(resolve => setTimeout(resolve, ms));
    const formulas = () => [...document.querySelectorAll("mjx-container")];
    for (let i = 0; i < 300 && !(formulas().length && formulas().every(f => f.getAttribute("aria-label"))); i++) {
        await pause(100);
    }
    return {formulas: formulas().length, spoken: formulas().filter(f => f.getAttribute("aria-label")).length};
})()"""

# JupyterLab's menu bar labels, once its shell is there (null after a minute without it).
LAB_MENUS = """new Promise(done => { const started = Date.now(); (function wait() {
    const labels = [...document.querySelectorAll(".lm-MenuBar-itemLabel")].map(e => e.textContent);
    if (labels.length > 3) done(labels);
    else if (Date.now() - started > 60000) done(null);
    else setTimeout(wait, 200); })(); })"""


class ChromiumMissing(RuntimeError):
    pass


@dataclass
class Page:
    """What a reader's browser ended up with after opening `url`."""

    url: str
    dom: str  # document.documentElement.outerHTML after MathJax and the images have settled
    images: list[tuple[str, int]]  # (src, naturalWidth); 0 means the image did not load
    errors: list[str]  # console errors, uncaught exceptions, failed loads
    requests: list[str]  # every URL the page asked for
    probe: object = None  # what the `probe` expression given to `open` evaluated to in the page
    focus: list = None  # with `tabs=n`: what had the focus after each of n presses of Tab (FOCUSED)


class Chromium:
    """One headless Chromium; `open` loads each page in a fresh tab and reports on it."""

    def __init__(self, executable: str = "chromium", timeout: float = 60.0):
        path = shutil.which(executable)
        if path is None:
            raise ChromiumMissing(
                f"{executable!r} is not on PATH; the book's browser test needs it. "
                "Install it with `make chromium` (apt-get install chromium)."
            )
        self.timeout = timeout
        self._profile = tempfile.TemporaryDirectory(prefix="chromium-profile-")
        self._log = tempfile.TemporaryFile()
        commands_r, commands_w = os.pipe()
        replies_r, replies_w = os.pipe()
        # bash moves our two pipe ends to descriptors 3 and 4, then becomes Chromium (dash, the
        # usual /bin/sh, cannot redirect descriptors above 9). os.pipe() hands out the lowest
        # free descriptors, so commands_r < replies_w: the first redirection cannot overwrite
        # the source of the second.
        self._process = subprocess.Popen(
            ["bash", "-c", f'exec "$0" "$@" 3<&{commands_r} 4>&{replies_w}', path, *FLAGS,
             f"--user-data-dir={self._profile.name}", "--remote-debugging-pipe",
             "about:blank"],  # a first tab that stays open: closing the last tab quits Chromium
            pass_fds=(commands_r, replies_w),
            stdin=subprocess.DEVNULL, stdout=self._log, stderr=self._log,
        )
        os.close(commands_r)
        os.close(replies_w)
        self._commands = os.fdopen(commands_w, "wb", buffering=0)
        self._replies = replies_r
        self._buffer = b""
        self._events: list[dict] = []
        self._last_id = 0

    def __enter__(self) -> Chromium:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        try:
            self._call("Browser.close")
        except (OSError, RuntimeError, TimeoutError):
            pass
        try:
            self._process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()
        self._commands.close()
        os.close(self._replies)
        self._log.close()
        self._profile.cleanup()

    def open(self, url: str, screenshot: Path | None = None, width: int = 1280, probe: str | None = None,
             color_scheme: str | None = None, tabs: int = 0, before: str | None = None) -> Page:
        """Load `url` in a fresh tab `width` px wide and report on it. `color_scheme` ("light",
        "dark") is the reader's `prefers-color-scheme`; `before` runs in the page before its own
        scripts (a setting the reader saved, say); `tabs` presses Tab that many times after `probe`."""
        target = self._call("Target.createTarget", url="about:blank")["targetId"]
        session = self._call("Target.attachToTarget", targetId=target, flatten=True)["sessionId"]
        try:
            for domain in ("Page", "Runtime", "Log", "Network"):
                self._call(f"{domain}.enable", session=session)
            self._call("Page.setLifecycleEventsEnabled", session=session, enabled=True)
            # A tab in a 1280x2000 window shows a little less than that; pin the viewport.
            self._call("Emulation.setDeviceMetricsOverride", session=session,
                       width=width, height=2000, deviceScaleFactor=1, mobile=width < 600)
            if color_scheme is not None:
                self._call("Emulation.setEmulatedMedia", session=session,
                           features=[{"name": "prefers-color-scheme", "value": color_scheme}])
            if before is not None:
                self._call("Page.addScriptToEvaluateOnNewDocument", session=session, source=before)
            self._events.clear()
            navigation = self._call("Page.navigate", session=session, url=url)
            if "errorText" in navigation:
                raise RuntimeError(f"could not open {url}: {navigation['errorText']}")
            # The load event of this navigation, not of the blank page the tab started with.
            self._wait_for(lambda event: event.get("sessionId") == session
                           and event["method"] == "Page.lifecycleEvent"
                           and event["params"]["name"] == "load"
                           and event["params"]["loaderId"] == navigation["loaderId"])
            images = self._evaluate(SETTLE, session)
            dom = self._evaluate("document.documentElement.outerHTML", session)
            probed = self._evaluate(probe, session) if probe else None
            focus = []
            for _ in range(tabs):
                for kind in ("keyDown", "keyUp"):
                    self._call("Input.dispatchKeyEvent", session=session, type=kind, key="Tab", code="Tab",
                               windowsVirtualKeyCode=9, nativeVirtualKeyCode=9)
                focus.append(self._evaluate(FOCUSED, session))
            if screenshot is not None:
                png = self._call("Page.captureScreenshot", session=session, format="png")["data"]
                screenshot.parent.mkdir(parents=True, exist_ok=True)
                screenshot.write_bytes(base64.b64decode(png))
            events = [event for event in self._events if event.get("sessionId") == session]
            return Page(url, dom, [tuple(image) for image in images], _errors(events), _requests(events), probed,
                        focus)
        finally:
            self._call("Target.closeTarget", targetId=target)

    def _evaluate(self, expression: str, session: str):
        reply = self._call("Runtime.evaluate", session=session, expression=expression,
                           awaitPromise=True, returnByValue=True)
        if "exceptionDetails" in reply:
            raise RuntimeError(f"script failed in the page: {reply['exceptionDetails']}")
        return reply["result"]["value"]

    def _call(self, method: str, session: str | None = None, **params) -> dict:
        """Send one command and return its result; events that arrive meanwhile are kept."""
        self._last_id += 1
        message = {"id": self._last_id, "method": method, "params": params}
        if session is not None:
            message["sessionId"] = session
        self._commands.write(json.dumps(message).encode() + b"\0")
        while True:
            reply = self._receive()
            if reply.get("id") == self._last_id:
                if "error" in reply:
                    raise RuntimeError(f"{method} failed: {reply['error'].get('message')}")
                return reply["result"]

    def _wait_for(self, wanted: Callable[[dict], bool]) -> dict:
        """The first event, already received or still to come, for which `wanted` is true."""
        for event in self._events:  # it may have come in while we waited for a reply
            if wanted(event):
                return event
        while True:
            message = self._receive()
            if "method" in message and wanted(message):
                return message

    def _receive(self) -> dict:
        deadline = time.monotonic() + self.timeout
        while b"\0" not in self._buffer:
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not select.select([self._replies], [], [], remaining)[0]:
                raise TimeoutError(f"Chromium sent nothing for {self.timeout:.0f} s{self._tail()}")
            chunk = os.read(self._replies, 1 << 16)
            if not chunk:
                raise RuntimeError(f"Chromium exited{self._tail()}")
            self._buffer += chunk
        message, _, self._buffer = self._buffer.partition(b"\0")
        decoded = json.loads(message)
        if "method" in decoded:
            self._events.append(decoded)
        return decoded

    def _tail(self) -> str:
        self._log.seek(0)
        return "; its log ends:\n" + self._log.read().decode(errors="replace")[-2000:]


class Tab:
    """One page in a browser context of its own (its own cookies): a person at their browser."""

    def __init__(self, chromium: Chromium, base: str):
        self.c, self.base = chromium, base
        context = chromium._call("Target.createBrowserContext")["browserContextId"]
        target = chromium._call("Target.createTarget", url="about:blank", browserContextId=context)["targetId"]
        self.session = chromium._call("Target.attachToTarget", targetId=target, flatten=True)["sessionId"]
        for domain in ("Page", "Runtime", "Network"):
            chromium._call(f"{domain}.enable", session=self.session)

    def go(self, path: str) -> None:
        navigation = self.c._call("Page.navigate", session=self.session, url=self.base + path)
        assert "errorText" not in navigation, f"{path}: {navigation['errorText']}"

    def js(self, expression: str):
        reply = self.c._call("Runtime.evaluate", session=self.session, expression=expression, awaitPromise=True,
                             returnByValue=True)
        if "exceptionDetails" in reply:
            raise RuntimeError(f"{expression[:80]}: {reply['exceptionDetails'].get('text')}")
        return reply["result"].get("value")

    def until(self, expression: str, what: str, timeout: float = 120):
        """The expression's value once it is truthy in the page (which may still be loading)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                value = self.js(f"document.readyState === 'complete' && !!({expression})")
            except RuntimeError:  # the page changed under the evaluation (a redirect, a click)
                value = None
            if value:
                return value
            time.sleep(0.2)
        raise AssertionError(f"{what}: not there after {timeout:.0f} s (at {self.js('location.href')})")

    def click(self, selector: str, what: str) -> None:
        self.until(f"document.querySelector({json.dumps(selector)})", what)
        self.js(f"document.querySelector({json.dumps(selector)}).click()")

    def log_in(self, user: str, password: str) -> None:
        """The hub's login form, filled in and sent."""
        self.go("/hub/login?next=%2Fhub%2Fhome")
        self.until("document.querySelector('#username_input')", "the login form")
        self.js(f"document.querySelector('#username_input').value = {json.dumps(user)};"
                f"document.querySelector('#password_input').value = {json.dumps(password)};"
                "document.querySelector('#login_submit').click()")
        self.until("!location.pathname.startsWith('/hub/login')", f"{user} logged in")

    def requests(self) -> list[str]:
        return [e["params"]["request"]["url"] for e in self.c._events
                if e.get("sessionId") == self.session and e["method"] == "Network.requestWillBeSent"]

    def screenshot(self, path: Path) -> None:
        """What the person sees now, as a PNG (a test's artefact)."""
        png = self.c._call("Page.captureScreenshot", session=self.session, format="png")["data"]
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(base64.b64decode(png))



def _errors(events: list[dict]) -> list[str]:
    errors = []
    for event in events:
        method, params = event["method"], event.get("params", {})
        if method == "Runtime.exceptionThrown":
            details = params["exceptionDetails"]
            errors.append(details.get("exception", {}).get("description") or details["text"])
        elif method == "Runtime.consoleAPICalled" and params["type"] in ("error", "assert"):
            args = params["args"]
            errors.append(" ".join(str(arg.get("value", arg.get("description", ""))) for arg in args))
        elif method == "Log.entryAdded" and params["entry"]["level"] == "error":
            entry = params["entry"]
            # The browser, not the page, asks for /favicon.ico; a book opened from disk never does.
            if not entry.get("url", "").endswith("/favicon.ico"):
                errors.append(f"{entry['text']} ({entry.get('url', '')})")
    return errors


def _requests(events: list[dict]) -> list[str]:
    return [event["params"]["request"]["url"] for event in events
            if event["method"] == "Network.requestWillBeSent"]


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format, *args) -> None:  # one line per request would drown pytest's output
        pass


@contextmanager
def serve(directory: Path) -> Iterator[str]:
    """Serve `directory` on 127.0.0.1 at a free port from a background thread; yield its base URL."""
    handler = functools.partial(_QuietHandler, directory=str(directory))
    with http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler) as server:
        thread = threading.Thread(target=server.serve_forever, daemon=True)
        thread.start()
        try:
            yield f"http://127.0.0.1:{server.server_port}/"
        finally:
            server.shutdown()
            thread.join()

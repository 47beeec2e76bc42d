"""A small client of the Chrome DevTools Protocol over the system's chromium, for the console's
browser test. Uses Debian's python3-websocket only; starts the browser headless with a throwaway
profile and never downloads anything.
"""

import base64
import json
import os
import shutil
import subprocess
import tempfile
import time
import urllib.request

import websocket


class CdpError(Exception):
    pass


def find_chromium():
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    raise CdpError("no chromium on PATH: install Debian's chromium (compose/dev deps does)")


class Browser:
    """One headless chromium and one page of it."""

    def __init__(self, width=1280, height=900, timeout_s=20.0):
        self.profile = tempfile.mkdtemp(prefix="aclaim-chromium-")
        argv = [find_chromium(), "--headless=new", "--disable-gpu", "--no-first-run",
                "--no-default-browser-check", "--disable-extensions", "--disable-sync",
                "--disable-background-networking", "--disable-dev-shm-usage",
                "--remote-debugging-address=127.0.0.1", "--remote-debugging-port=0",
                f"--user-data-dir={self.profile}", f"--window-size={width},{height}",
                "about:blank"]
        if os.geteuid() == 0:
            argv.insert(1, "--no-sandbox")  # chromium refuses to run as root with its sandbox
        self.log = open(os.path.join(self.profile, "chromium.log"), "wb")
        self.proc = subprocess.Popen(argv, stdout=self.log, stderr=subprocess.STDOUT)
        self.timeout_s = timeout_s
        self.next_id = 1
        self.events = []
        port_file = os.path.join(self.profile, "DevToolsActivePort")
        deadline = time.monotonic() + timeout_s
        while not (os.path.exists(port_file) and os.path.getsize(port_file) > 0):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise CdpError("chromium did not open its DevTools port; see " + self.log.name)
            time.sleep(0.05)
        with open(port_file, encoding="ascii") as f:
            port = int(f.readline().strip())
        targets = []
        while not targets:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=5) as r:
                targets = [t for t in json.load(r) if t.get("type") == "page"]
            if not targets and time.monotonic() > deadline:
                raise CdpError("chromium has no page target")
            time.sleep(0.05)
        self.ws = websocket.create_connection(targets[0]["webSocketDebuggerUrl"],
                                              timeout=timeout_s, suppress_origin=True)
        for domain in ("Page", "Runtime", "Log"):
            self.call(domain + ".enable")
        self.call("Emulation.setDeviceMetricsOverride", width=width, height=height,
                  deviceScaleFactor=1, mobile=False)

    def close(self):
        try:
            self.ws.close()
        except Exception:  # the browser may already be gone; closing is best effort
            pass
        self.proc.terminate()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.log.close()
        shutil.rmtree(self.profile, ignore_errors=True)

    def call(self, method, **params):
        msg_id = self.next_id
        self.next_id += 1
        self.ws.send(json.dumps({"id": msg_id, "method": method, "params": params}))
        while True:
            msg = json.loads(self.ws.recv())
            if msg.get("id") == msg_id:
                if "error" in msg:
                    raise CdpError(f"{method}: {msg['error']}")
                return msg.get("result", {})
            if "method" in msg:
                self.events.append(msg)

    def evaluate(self, expression):
        """The value of a JavaScript expression (awaited if it is a promise)."""
        r = self.call("Runtime.evaluate", expression=expression, returnByValue=True,
                      awaitPromise=True)
        if "exceptionDetails" in r:
            raise CdpError(f"{expression!r} threw: {r['exceptionDetails']}")
        return r["result"].get("value")

    def wait_for(self, expression, what, timeout_s=None):
        deadline = time.monotonic() + (timeout_s or self.timeout_s)
        while True:
            try:
                value = self.evaluate(expression)
            except CdpError:
                value = None  # the page is still loading: its document may not exist yet
            if value:
                return value
            if time.monotonic() > deadline:
                raise CdpError(f"timed out waiting for {what} ({expression})")
            time.sleep(0.05)

    def navigate(self, url):
        self.call("Page.navigate", url=url)

    def errors(self):
        """Console errors, uncaught exceptions and browser-logged errors (CSP violations, failed
        loads) seen since the last call, as text; drains them."""
        self.drain()
        out = []
        for e in self.events:
            m, p = e["method"], e.get("params", {})
            if m == "Runtime.exceptionThrown":
                out.append("exception: " + json.dumps(p.get("exceptionDetails", {}))[:500])
            elif m == "Runtime.consoleAPICalled" and p.get("type") in ("error", "assert"):
                out.append("console.error: " + json.dumps(p.get("args", []))[:500])
            elif m == "Log.entryAdded" and p.get("entry", {}).get("level") == "error":
                entry = p["entry"]
                out.append(f"log: {entry.get('text')} {entry.get('url', '')}")
        self.events = []
        return out

    def drain(self):
        """Reads the events already sent without blocking."""
        self.ws.settimeout(0.01)
        try:
            while True:
                msg = json.loads(self.ws.recv())
                if "method" in msg:
                    self.events.append(msg)
        except (websocket.WebSocketTimeoutException, BlockingIOError):
            pass
        finally:
            self.ws.settimeout(self.timeout_s)

    def click(self, selector):
        """A real mouse click at the centre of the element."""
        box = self.evaluate(
            f"(() => {{ const e = document.querySelector({json.dumps(selector)});"
            " if (!e) return null; e.scrollIntoView({block: 'center'});"
            " const r = e.getBoundingClientRect();"
            " return {x: r.x + r.width / 2, y: r.y + r.height / 2}; })()")
        if not box:
            raise CdpError("nothing to click at " + selector)
        for kind in ("mousePressed", "mouseReleased"):
            self.call("Input.dispatchMouseEvent", type=kind, x=box["x"], y=box["y"],
                      button="left", clickCount=1)

    def screenshot(self, path):
        data = self.call("Page.captureScreenshot", format="png")["data"]
        with open(path, "wb") as f:
            f.write(base64.b64decode(data))
        return path

#!/usr/bin/env python3
"""The dashboard of `tessera serve` in headless Chromium, driven over the DevTools protocol:
load the page, give the secret, add a DASH MPD and a plain URL through the form, see both rows
complete, pause and remove a slow download with the row's buttons, take a screenshot.

Everything is on 127.0.0.1 (`tessera demo --serve` is the origin). Prints one line per check and
'N passed, M failed'; exits 1 when a check failed.
"""

from __future__ import annotations

import argparse
import base64
import json
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import websocket

sys.path.insert(0, str(Path(__file__).parent))
from aria2p_acceptance import SECRET, eventually, free_port, loopback_env, read_line_matching, start_origin, start_tessera, stop  # noqa: E402


class Page:
    """One Chromium tab over the DevTools protocol."""

    def __init__(self, url: str) -> None:
        self.socket = websocket.create_connection(url, timeout=30, suppress_origin=True)
        self.next_id = 0

    def send(self, method: str, params: dict | None = None) -> dict:
        self.next_id += 1
        self.socket.send(json.dumps({"id": self.next_id, "method": method, "params": params or {}}))
        while True:
            message = json.loads(self.socket.recv())
            if message.get("id") == self.next_id:
                if "error" in message:
                    raise RuntimeError(f"{method}: {message['error']}")
                return message.get("result", {})

    def evaluate(self, expression: str):
        result = self.send("Runtime.evaluate", {"expression": expression, "returnByValue": True, "awaitPromise": True})
        if "exceptionDetails" in result:
            raise RuntimeError(f"{expression}: {result['exceptionDetails']}")
        return result.get("result", {}).get("value")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--tessera", required=True)
    parser.add_argument("--chromium", default=shutil.which("chromium") or shutil.which("chromium-browser"))
    parser.add_argument("--screenshot", default="dashboard.png")
    args = parser.parse_args()
    if not args.chromium:
        print("chromium is not installed (apt-get install chromium)", file=sys.stderr)
        return 2

    passed = failed = 0

    def check(name: str, condition: bool, detail: str = "") -> None:
        nonlocal passed, failed
        if condition:
            passed += 1
            print(f"[dashboard] ok    {name}", flush=True)
        else:
            failed += 1
            print(f"[dashboard] FAIL  {name} {detail}", flush=True)

    origin, origin_url = start_origin(args.tessera)
    with tempfile.TemporaryDirectory(prefix="serve-dashboard-") as directory:
        work = Path(directory)
        daemon, port = start_tessera(args.tessera, work)
        debug_port = free_port()
        browser = subprocess.Popen(
            [args.chromium, "--headless=new", "--no-sandbox", "--disable-gpu", "--no-first-run", "--no-proxy-server",
             f"--remote-debugging-port={debug_port}", f"--user-data-dir={work / 'chromium'}", "--window-size=1280,800",
             "about:blank"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=loopback_env())
        try:
            def targets():
                with urllib.request.urlopen(f"http://127.0.0.1:{debug_port}/json/list", timeout=5) as response:
                    return [t for t in json.load(response) if t.get("type") == "page"]
            pages = eventually(targets, timeout=60, interval=0.2)
            if not pages:
                raise RuntimeError("Chromium did not start")
            page = Page(pages[0]["webSocketDebuggerUrl"])
            page.send("Page.enable")
            page.send("Page.navigate", {"url": f"http://127.0.0.1:{port}/"})
            loaded = eventually(lambda: page.evaluate("document.readyState === 'complete' && !!document.getElementById('add-form')"), timeout=30)
            check("the page loads", bool(loaded))
            check("without the secret it asks for it", bool(eventually(
                lambda: "secret" in (page.evaluate("document.getElementById('message').textContent") or ""), timeout=30)))
            page.evaluate(f"document.getElementById('secret-input').value = {json.dumps(SECRET)};"
                          "document.getElementById('secret-form').requestSubmit(); true")

            def add(uri: str) -> None:
                page.evaluate(f"document.getElementById('add-input').value = {json.dumps(uri)};"
                              "document.getElementById('add-form').requestSubmit(); true")

            check("the secret opens the event stream", bool(eventually(
                lambda: page.evaluate("document.getElementById('message').className") != "error", timeout=30)))
            add(f"{origin_url}/dash/demo/stream.mpd")
            check("the form added the MPD: its row appears", bool(eventually(
                lambda: page.evaluate("[...document.querySelectorAll('tr.task td:nth-child(2)')].some(td => td.textContent === 'dash')"),
                timeout=30)))
            add(f"{origin_url}/bytes/2000000/dashboard-plain.bin")
            completed = eventually(
                lambda: page.evaluate("document.querySelectorAll('tr.task[data-state=\"completed\"]').length") == 2, timeout=60)
            check("both rows complete, live", bool(completed),
                  str(page.evaluate("[...document.querySelectorAll('tr')].map(r => r.dataset.state)")))
            plugins = page.evaluate("[...document.querySelectorAll('tr.task td:nth-child(2)')].map(td => td.textContent).sort()")
            check("the rows name their plugins", plugins == ["dash", "direct"], str(plugins))
            check("the rows list their files, relative to the download root", bool(eventually(
                lambda: page.evaluate("[...document.querySelectorAll('tr.task .files')].map(td => td.textContent).sort()")
                == ["Tessera DASH fixture/v720.mp4\nTessera DASH fixture/a128.m4a", "dashboard-plain.bin"], timeout=10)),
                str(page.evaluate("[...document.querySelectorAll('tr.task .files')].map(td => td.textContent).sort()")))

            # A Metalink URL: a group row, its files as rows under it.
            add(f"{origin_url}/metalink/release.meta4")
            check("a Metalink is a group row that completes, its tasks under it", bool(eventually(
                lambda: page.evaluate("document.querySelector('tr.group')?.dataset.state") == "completed"
                and page.evaluate("document.querySelectorAll('tr.child').length") >= 2, timeout=60)),
                str(page.evaluate("[...document.querySelectorAll('tr')].map(r => r.className + ':' + r.dataset.state)")))

            # A slow download (the daemon's global limit is 4M/s): pause it, then remove it, with the row's buttons.
            add(f"{origin_url}/bytes/{1 << 30}/dashboard-large.bin")
            row = "document.querySelector('tr.task[data-id*=\"dashboard-large\"]')"
            check("the large download is downloading", bool(eventually(
                lambda: page.evaluate(f"{row}?.dataset.state") == "downloading", timeout=30)))
            page.evaluate(f"[...{row}.querySelectorAll('button')].find(b => b.textContent === 'Pause').click(); true")
            check("Pause pauses it", bool(eventually(lambda: page.evaluate(f"{row}?.dataset.state") == "paused", timeout=30)))
            page.evaluate(f"[...{row}.querySelectorAll('button')].find(b => b.textContent === 'Resume').click(); true")
            check("Resume resumes it", bool(eventually(
                lambda: page.evaluate(f"{row}?.dataset.state") in ("downloading", "waiting", "resolving"), timeout=30)))
            check("after resuming it shows its bytes and speed again", bool(eventually(
                lambda: page.evaluate(f"{row}?.children[4].textContent.endsWith('/s') && !{row}.children[3].textContent.trim().startsWith('0 B')"),
                timeout=30)))
            page.evaluate("document.getElementById('message').textContent = ''; true")
            shot = page.send("Page.captureScreenshot", {"format": "png", "captureBeyondViewport": True})
            Path(args.screenshot).write_bytes(base64.b64decode(shot["data"]))
            check("the screenshot is saved", Path(args.screenshot).stat().st_size > 10_000, args.screenshot)
            page.evaluate(f"[...{row}.querySelectorAll('button')].find(b => b.textContent === 'Remove').click(); true")
            check("Remove removes it", bool(eventually(lambda: page.evaluate(f"{row} === null"), timeout=30)))
        except Exception as error:
            check("the steps ran to the end", False, repr(error))
        finally:
            browser.terminate()
            try:
                browser.wait(timeout=30)
            except subprocess.TimeoutExpired:
                browser.kill()
                browser.wait()
            stop(daemon, "tessera", None)
    stop(origin, "origin", None)
    print(f"{passed} passed, {failed} failed")
    return 0 if failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Drives a download daemon with aria2p, a client nobody here wrote: `tessera serve`, and (with
--target aria2c or both) aria2c --enable-rpc, through the same steps.

Steps: getVersion (and a wrong secret refused), a call over the WebSocket; add a large URL (under
a global rate limit), see it active, pause it, unpause it, remove it; complete a plain URL, a DASH
MPD and a Metalink (addMetalink); check files on disk; the WebSocket notifications seen through
aria2p's listener; getGlobalStat, tellStopped, changeGlobalOption, purgeDownloadResult. For
tessera also: SIGTERM with /events open ends it cleanly, and a download survives a restart under
its GID. Everything is served by `tessera demo --serve` on 127.0.0.1; nothing leaves the machine.

aria2c does not know DASH: for it the MPD is an ordinary URL and the step checks that the document
itself was downloaded (the note in the output says so).

Prints one line per check and a closing 'N passed, M failed'; exits 1 when a check failed.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import aria2p
import requests
import websocket
from aria2p import ClientException

aria2p_connection_errors = requests.exceptions.RequestException

SECRET = "acceptance-secret"
RATE = "4M"  # Global limit: the large download stays active long enough to pause it.
LARGE = 1 << 30
PLAIN = 1_000_000


def loopback_env() -> dict:
    env = {k: v for k, v in os.environ.items() if not k.lower().endswith("_proxy")}
    env["no_proxy"] = env["NO_PROXY"] = "127.0.0.1,localhost"
    return env


os.environ.clear()
os.environ.update(loopback_env())


class Checks:
    def __init__(self, target: str) -> None:
        self.target = target
        self.passed = 0
        self.failed = 0

    def check(self, name: str, condition: bool, detail: str = "") -> bool:
        if condition:
            self.passed += 1
            print(f"[{self.target}] ok    {name}", flush=True)
        else:
            self.failed += 1
            print(f"[{self.target}] FAIL  {name} {detail}", flush=True)
        return condition


def eventually(condition, timeout: float = 60.0, interval: float = 0.1):
    """The first true value of condition() within timeout, else its last value."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            value = condition()
        except (ClientException, OSError, aria2p_connection_errors):
            value = None
        if value or time.monotonic() >= deadline:
            return value
        time.sleep(interval)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def read_line_matching(process: subprocess.Popen, pattern: str, timeout: float = 60.0) -> re.Match:
    deadline = time.monotonic() + timeout
    seen = []
    while time.monotonic() < deadline:
        line = process.stdout.readline()
        if not line:
            if process.poll() is not None:
                break
            continue
        seen.append(line)
        match = re.search(pattern, line)
        if match:
            return match
    raise RuntimeError(f"no line matching {pattern!r}; got: {''.join(seen)[-2000:]}")


def start_origin(tessera: str) -> tuple[subprocess.Popen, str]:
    origin = subprocess.Popen([tessera, "demo", "--serve", "--port", "0"], stdout=subprocess.PIPE, text=True, env=loopback_env())
    match = read_line_matching(origin, r"Serving the demo content on (http://127\.0\.0\.1:\d+)")
    return origin, match.group(1)


def start_tessera(tessera: str, work: Path) -> tuple[subprocess.Popen, int]:
    command = [
        tessera, "serve", "--rpc-listen-port", "0", "--rpc-secret", SECRET, "--dir", str(work / "downloads"),
        "--state-dir", str(work / "state"), "--max-overall-download-limit", RATE, "--proxy", "",
    ]
    daemon = subprocess.Popen(command, stdout=subprocess.PIPE, text=True, env=loopback_env())
    match = read_line_matching(daemon, r"listening on http://127\.0\.0\.1:(\d+)")
    return daemon, int(match.group(1))


def start_aria2c(aria2c: str, work: Path) -> tuple[subprocess.Popen, int]:
    port = free_port()
    (work / "downloads").mkdir(parents=True, exist_ok=True)
    command = [
        aria2c, "--enable-rpc", f"--rpc-listen-port={port}", f"--rpc-secret={SECRET}", f"--dir={work / 'downloads'}",
        f"--max-overall-download-limit={RATE}", "--no-conf", "--quiet", "--check-certificate=false",
        "--allow-overwrite=true", "--auto-file-renaming=false",
    ]
    log = (work / "aria2c.log").open("w")
    daemon = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, text=True, env=loopback_env())
    client = aria2p.Client(host="http://127.0.0.1", port=port, secret=SECRET)
    if not eventually(lambda: client.get_version(), timeout=20):
        daemon.kill()
        daemon.wait()
        raise RuntimeError("aria2c did not answer")
    return daemon, port


def status(api: aria2p.API, gid: str) -> str | None:
    try:
        return api.client.tell_status(gid, ["status"])["status"]
    except ClientException:
        return None


def completed_length(api: aria2p.API, gid: str) -> int:
    return int(api.client.tell_status(gid, ["completedLength"])["completedLength"])


def wait_complete(api: aria2p.API, gid: str, timeout: float = 120.0) -> bool:
    return eventually(lambda: status(api, gid) in ("complete", "error"), timeout=timeout) and status(api, gid) == "complete"


def metalink_document(origin: str) -> str:
    files = []
    for name, size in (("release-acceptance.tar", 300_000), ("notes-acceptance.txt", 120_000)):
        url = f"{origin}/bytes/{size}/{name}"
        with urllib.request.urlopen(url, timeout=30) as response:
            digest = hashlib.sha256(response.read()).hexdigest()
        files.append(
            f'  <file name="{name}">\n    <size>{size}</size>\n    <hash type="sha-256">{digest}</hash>\n'
            f'    <url priority="1">{origin}/missing/{name}</url>\n    <url priority="2">{url}</url>\n  </file>\n')
    return '<?xml version="1.0" encoding="UTF-8"?>\n<metalink xmlns="urn:ietf:params:xml:ns:metalink">\n' + "".join(files) + "</metalink>\n"


def drive(target: str, api: aria2p.API, origin: str, work: Path) -> Checks:
    checks = Checks(target)
    client = api.client

    version = client.get_version()
    checks.check("getVersion answers", "version" in version, str(version))
    try:
        aria2p.Client(host=client.host, port=client.port, secret="wrong").get_version()
        checks.check("a wrong secret is refused", False, "the call went through")
    except ClientException as error:
        checks.check("a wrong secret is refused", "Unauthorized" in str(error), str(error))

    # A call over the WebSocket /jsonrpc (where the notifications come from too).
    socket_ = websocket.create_connection(f"ws://127.0.0.1:{client.port}/jsonrpc", timeout=10, suppress_origin=True)
    try:
        socket_.send(json.dumps({"jsonrpc": "2.0", "id": "ws", "method": "aria2.getGlobalStat", "params": [f"token:{SECRET}"]}))
        answer = {}
        for _ in range(50):
            answer = json.loads(socket_.recv())
            if answer.get("id") == "ws":
                break
        checks.check("getGlobalStat over the WebSocket", "numActive" in answer.get("result", {}), str(answer))
        socket_.send(json.dumps({"jsonrpc": "2.0", "id": "ws2", "method": "aria2.getGlobalStat", "params": ["token:wrong"]}))
        for _ in range(50):
            answer = json.loads(socket_.recv())
            if answer.get("id") == "ws2":
                break
        checks.check("a wrong secret is refused over the WebSocket", answer.get("error", {}).get("message") == "Unauthorized", str(answer))
    finally:
        socket_.close()

    # aria2's notifications over the WebSocket /jsonrpc, recorded while the steps run.
    notifications: list[tuple[str, str]] = []

    def recorder(kind: str):
        return lambda _api, gid: notifications.append((kind, gid))

    api.listen_to_notifications(
        threaded=True, on_download_start=recorder("start"), on_download_pause=recorder("pause"),
        on_download_stop=recorder("stop"), on_download_complete=recorder("complete"), on_download_error=recorder("error"),
        timeout=1, handle_signals=False)
    try:
        return drive_steps(target, api, origin, work, checks, notifications)
    finally:
        api.stop_listening()


def drive_steps(target: str, api: aria2p.API, origin: str, work: Path, checks: Checks, notifications: list) -> Checks:
    client = api.client
    # Add, status, pause, unpause, remove: a large file under the global rate limit.
    large = api.add_uris([f"{origin}/bytes/{LARGE}/large-acceptance.bin"])
    checks.check("addUri returns a 16-hex GID", re.fullmatch(r"[0-9a-f]{16}", large.gid) is not None, large.gid)
    active = eventually(lambda: status(api, large.gid) == "active" and completed_length(api, large.gid) > 0, timeout=30)
    checks.check("the large download becomes active and makes progress", bool(active), str(status(api, large.gid)))
    checks.check("tellActive lists it", large.gid in [d.gid for d in api.get_downloads() if d.status == "active"])
    result = api.pause([large.live])
    checks.check("pause", result == [True], str(result))
    checks.check("it is paused", bool(eventually(lambda: status(api, large.gid) == "paused", timeout=30)), str(status(api, large.gid)))
    paused_at = completed_length(api, large.gid)
    result = api.resume([large.live])
    checks.check("unpause", result == [True], str(result))
    resumed = eventually(lambda: status(api, large.gid) == "active" and completed_length(api, large.gid) > paused_at, timeout=30)
    checks.check("it is active again and goes on from where it was", bool(resumed), str(status(api, large.gid)))
    result = api.remove([large.live])
    checks.check("remove", result == [True], str(result))
    checks.check(
        "after remove (and removeDownloadResult) the GID is gone or removed",
        bool(eventually(lambda: status(api, large.gid) in (None, "removed"), timeout=30)), str(status(api, large.gid)))

    # A plain URL.
    plain = api.add_uris([f"{origin}/bytes/{PLAIN}/plain-acceptance.bin"])
    checks.check("plain URL completes", wait_complete(api, plain.gid), str(status(api, plain.gid)))
    plain.update()
    path = Path(plain.files[0].path)
    checks.check("plain URL: the file is there, whole", path.is_file() and path.stat().st_size == PLAIN, str(path))
    checks.check("plain URL: totalLength", plain.total_length == PLAIN, str(plain.total_length))
    checks.check("WebSocket: onDownloadStart and onDownloadPause for the large download", bool(eventually(
        lambda: ("start", large.gid) in notifications and ("pause", large.gid) in notifications, timeout=10)), str(notifications))
    checks.check("WebSocket: onDownloadComplete for the plain URL", bool(eventually(
        lambda: ("complete", plain.gid) in notifications, timeout=10)), str(notifications))

    # A DASH MPD.
    mpd = api.add_uris([f"{origin}/dash/demo/stream.mpd"])
    checks.check("DASH MPD completes", wait_complete(api, mpd.gid), str(status(api, mpd.gid)))
    mpd.update()
    paths = [Path(f.path) for f in mpd.files]
    if target == "tessera":
        checks.check("DASH: one file per representation (video and audio)", len(paths) == 2, str(paths))
        checks.check("DASH: the files are there", all(p.is_file() and p.stat().st_size > 0 for p in paths), str(paths))
    else:
        print(f"[{target}] note  aria2c does not know DASH: the MPD is downloaded as a plain file", flush=True)
        checks.check("DASH (as a plain URL): the MPD document is there", len(paths) == 1 and paths[0].is_file(), str(paths))

    # A Metalink, given as a document (addMetalink): two files with SHA-256 hashes, each with a
    # mirror that fails (404) listed before the one that works.
    document = work / "release.meta4"
    document.write_text(metalink_document(origin))
    downloads = api.add_metalink(document)
    checks.check("addMetalink returns one download per file", len(downloads) >= 2, str(len(downloads)))
    for download in downloads:
        checks.check(f"Metalink file {download.gid} completes", wait_complete(api, download.gid), str(status(api, download.gid)))
        download.update()
        file = download.files[0]
        checks.check(
            f"Metalink file {Path(file.path).name} is there, whole",
            Path(file.path).is_file() and Path(file.path).stat().st_size == file.length, str(file.path))

    # Global state.
    stats = api.get_stats()
    checks.check("getGlobalStat: nothing active", stats.num_active == 0, str(stats._struct))
    checks.check("getGlobalStat: the finished downloads are stopped", stats.num_stopped >= 2 + len(downloads), str(stats._struct))
    stopped = [d["gid"] for d in client.tell_stopped(0, 100, ["gid", "status"])]
    checks.check("tellStopped lists the finished downloads", {plain.gid, mpd.gid}.issubset(stopped), str(stopped))
    checks.check(
        "changeGlobalOption max-overall-download-limit",
        client.change_global_option({"max-overall-download-limit": "0"}) == "OK")
    checks.check("getGlobalOption reports it", client.get_global_option()["max-overall-download-limit"] == "0")
    checks.check("purgeDownloadResult", client.purge_download_result() == "OK")
    checks.check("after the purge nothing is stopped", api.get_stats().num_stopped == 0, str(api.get_stats()._struct))
    return checks


def restart_steps(tessera: str, origin: str, work: Path, checks: Checks) -> None:
    """tessera only: a download survives a restart of the daemon under the same GID, and resumes."""
    daemon, port = start_tessera(tessera, work)
    try:
        api = aria2p.API(aria2p.Client(host="http://127.0.0.1", port=port, secret=SECRET, timeout=30))
        large = api.add_uris([f"{origin}/bytes/{LARGE}/large-restart.bin"])
        checks.check("restart: the download makes progress", bool(eventually(
            lambda: status(api, large.gid) == "active" and completed_length(api, large.gid) > 0, timeout=30)))
    finally:
        stop(daemon, "tessera (before the restart)", checks)
    daemon, port = start_tessera(tessera, work)
    try:
        api = aria2p.API(aria2p.Client(host="http://127.0.0.1", port=port, secret=SECRET, timeout=30))
        checks.check("restart: the same GID is known, and the download resumes", bool(eventually(
            lambda: status(api, large.gid) == "active" and completed_length(api, large.gid) > 0, timeout=30)),
            str(status(api, large.gid)))
        checks.check("restart: remove", api.remove([api.get_download(large.gid)]) == [True])
        checks.check("aria2.shutdown answers OK", api.client.shutdown() == "OK")
        try:
            code = daemon.wait(timeout=60)
        except subprocess.TimeoutExpired:
            code = None
        checks.check("aria2.shutdown stops the daemon cleanly", code == 0, f"exit status {code}")
    finally:
        if daemon.poll() is None:
            stop(daemon, "tessera (after the restart)", checks)


def stop(process: subprocess.Popen, name: str, checks: Checks | None, events_url: str | None = None) -> None:
    # With an event stream open (as a dashboard keeps one): SIGTERM still ends the daemon.
    stream = urllib.request.urlopen(events_url, timeout=30) if events_url else None
    process.send_signal(signal.SIGTERM)
    try:
        code = process.wait(timeout=60)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
        code = None
    if stream is not None:
        stream.close()
    if checks is not None:
        checks.check(f"{name} stops cleanly on SIGTERM" + (" with /events open" if events_url else ""), code == 0, f"exit status {code}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--tessera", required=True, help="the tessera executable")
    parser.add_argument("--aria2c", default=shutil.which("aria2c"), help="the aria2c executable")
    parser.add_argument("--target", choices=["tessera", "aria2c", "both"], default="both")
    args = parser.parse_args()

    targets = ["tessera", "aria2c"] if args.target == "both" else [args.target]
    if "aria2c" in targets and not args.aria2c:
        print("aria2c is not installed (apt-get install aria2)", file=sys.stderr)
        return 2
    passed = failed = 0
    origin, origin_url = start_origin(args.tessera)
    try:
        for target in targets:
            with tempfile.TemporaryDirectory(prefix=f"serve-acceptance-{target}-") as directory:
                work = Path(directory)
                daemon, port = start_tessera(args.tessera, work) if target == "tessera" else start_aria2c(args.aria2c, work)
                checks = Checks(target)
                try:
                    api = aria2p.API(aria2p.Client(host="http://127.0.0.1", port=port, secret=SECRET, timeout=30))
                    checks = drive(target, api, origin_url, work)
                except Exception as error:  # A crash of the steps is a failure, reported as such.
                    checks.check("the steps ran to the end", False, repr(error))
                finally:
                    if target == "tessera":
                        stop(daemon, target, checks, events_url=f"http://127.0.0.1:{port}/events?token={SECRET}")
                    else:
                        stop(daemon, target, None)
                if target == "tessera":
                    try:
                        restart_steps(args.tessera, origin_url, work, checks)
                    except Exception as error:
                        checks.check("the restart steps ran to the end", False, repr(error))
                passed += checks.passed
                failed += checks.failed
    finally:
        stop(origin, "origin", None)
    print(f"{passed} passed, {failed} failed")
    return 0 if failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())

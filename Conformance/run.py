#!/usr/bin/env python3
"""Differential conformance check of Tessera's plugins against oracles nobody here wrote.

* DASH: for every MPD in Conformance/dash, the ordered segment URLs of every representation
  from `tessera resolve --json --all-segments --format all` against the fragment lists of
  `yt-dlp -J` (its generic extractor parses a direct .mpd URL).
* Metalink: every document in Conformance/metalink downloaded by `aria2c` and by `tessera get`;
  the relative output paths, their bytes (sha-256) and both exit codes must agree.
* HLS: every variant and rendition of every playlist in Conformance/hls downloaded by yt-dlp's
  native HLS downloader (`-f FORMAT_ID --downloader native`) and by `tessera get --format NAME`;
  both files must be the same bytes, and the plaintext concatenation of the segments generated
  here (the ground truth).

Everything is served by a loopback HTTP server (127.0.0.1, a random port, Range requests
answered with 206); no traffic goes anywhere else (proxy variables are cleared, both tools are
told to use no proxy).

Usage: run.py --tessera PATH [--only dash|metalink|hls] [--keep] [--verbose]
Prints a table and `conformance: N/M cases equal`; exits 0 when all are equal, 1 otherwise.
"""
from __future__ import annotations

import argparse
import concurrent.futures
import hashlib
import http.server
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
from pathlib import Path

HERE = Path(__file__).resolve().parent
YT_DLP_VERSION = "2026.10.26"
# What the virtualenv holds. pycryptodomex: yt-dlp's HLS downloader decrypts AES-128 with it; without
# it yt-dlp hands AES-128 playlists to ffmpeg when there is one (then it is not its own downloader
# any more), else decrypts in pure Python (~160 KB/s). run.py encrypts the HLS corpus with it too,
# in the virtualenv's Python.
VENV_REQUIREMENTS = [f"yt-dlp=={YT_DLP_VERSION}", "pycryptodomex==3.24.2"]
TOOL_TIMEOUT = 60  # seconds, for one run of one tool on one case

# Cases where the oracle itself cannot do what the case asks. They are not compared with the
# oracle; Tessera's output is checked against the document's own published hashes instead, and
# the oracle's behaviour is reported. They are not counted in N/M.
ORACLE_LIMITS = {
    "corrupt-primary.meta4":
        "aria2c retries the same mirror on a piece-hash mismatch (--max-tries times) and then aborts "
        "with exit 1; it never fails over to the priority-2 mirror",
    "fmp4-sequence-iv.m3u8":
        "yt-dlp gives the EXT-X-MAP section a media sequence number of its own, so every segment after "
        "it is decrypted with the next segment's sequence-number IV (the first 16-byte block of each comes "
        "out wrong; here only its 16th byte, as 31 and 32 differ only there)",
    "discontinuity-maps.m3u8":
        "yt-dlp refuses an EXT-X-MAP after the first media segment ('Initialization fragment found "
        "after media fragments, unable to download')",
}


# ----------------------------------------------------------------------------------------------
# Environment


def venv_dir() -> Path:
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(cache) / "tessera-conformance" / "venv"


def ensure_yt_dlp() -> Path:
    """The yt-dlp of a virtualenv outside the repository, created (once) with the pinned versions."""
    venv = venv_dir()
    exe = venv / "bin" / "yt-dlp"
    stamp = venv / "yt-dlp.version"
    wanted = " ".join(VENV_REQUIREMENTS)
    if exe.exists() and stamp.exists() and stamp.read_text().strip() == wanted:
        return exe
    print(f"conformance: creating {venv} with {wanted}", flush=True)
    venv.parent.mkdir(parents=True, exist_ok=True)
    if not (venv / "bin" / "python").exists():
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", "-q", "--disable-pip-version-check",
                    *VENV_REQUIREMENTS], check=True)
    stamp.write_text(wanted + "\n")
    return exe


def loopback_env(home: Path) -> dict:
    """The environment for the tools: no proxies, no user configuration, loopback only."""
    env = {k: v for k, v in os.environ.items() if not k.lower().endswith("_proxy")}
    env["no_proxy"] = env["NO_PROXY"] = "127.0.0.1,localhost"
    env["HOME"] = str(home)
    env["XDG_CONFIG_HOME"] = str(home / "config")
    env["XDG_DATA_HOME"] = str(home / "data")
    env["XDG_CACHE_HOME"] = str(home / "cache")
    return env


def run_tool(argv, env, timeout=TOOL_TIMEOUT):
    started = time.monotonic()
    try:
        proc = subprocess.run(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=timeout)
        return proc.returncode, proc.stdout.decode("utf-8", "replace"), proc.stderr.decode("utf-8", "replace"), \
            time.monotonic() - started
    except subprocess.TimeoutExpired as error:
        out = (error.stdout or b"").decode("utf-8", "replace")
        err = (error.stderr or b"").decode("utf-8", "replace") + f"\n(timed out after {timeout} s)"
        return -9, out, err, time.monotonic() - started


# ----------------------------------------------------------------------------------------------
# Loopback HTTP server with Range support


class Origin:
    """Routes (path -> resource) and a request log, shared with the handler threads."""

    def __init__(self):
        self.routes: dict[str, dict] = {}
        self.log: list[tuple[str, str, int, int]] = []  # (path, range header, status, body bytes)
        self.lock = threading.Lock()
        self.server = None
        self.port = 0

    @property
    def origin(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def add(self, path: str, body: bytes | None = None, content_type="application/octet-stream", status=200):
        self.routes[path] = {"body": body, "type": content_type, "status": status}

    def take_log(self):
        with self.lock:
            log, self.log = self.log, []
        return log

    def start(self):
        origin = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            server_version = "TesseraConformance/1"

            def log_message(self, *args):  # quiet
                pass

            def _record(self, status, sent):
                with origin.lock:
                    origin.log.append((urllib.parse.urlsplit(self.path).path, self.headers.get("Range", ""), status, sent))

            def _plain(self, status, text=""):
                data = text.encode()
                self.send_response(status)
                self.send_header("Content-Type", "text/plain")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(data)
                self._record(status, 0)

            def do_HEAD(self):
                self.do_GET()

            def do_GET(self):
                path = urllib.parse.unquote(urllib.parse.urlsplit(self.path).path)
                route = origin.routes.get(path)
                if route is None or route["status"] == 404:
                    return self._plain(404, "not found\n")
                body = route["body"]
                size = len(body)
                status, start, end = 200, 0, size - 1
                header = self.headers.get("Range")
                if header:
                    match = re.fullmatch(r"\s*bytes\s*=\s*(\d*)\s*-\s*(\d*)\s*", header)
                    if not match or (match.group(1) == "" and match.group(2) == ""):
                        pass  # unparsable or multi-range: ignore the header, answer 200 (RFC 9110 14.2)
                    else:
                        first, last = match.group(1), match.group(2)
                        if first == "":  # suffix range
                            length = int(last)
                            start, end = max(0, size - length), size - 1
                        else:
                            start = int(first)
                            end = min(int(last), size - 1) if last else size - 1
                        if start >= size or end < start:
                            self.send_response(416)
                            self.send_header("Content-Range", f"bytes */{size}")
                            self.send_header("Content-Length", "0")
                            self.end_headers()
                            return self._record(416, 0)
                        status = 206
                chunk = body[start:end + 1]
                self.send_response(status)
                self.send_header("Content-Type", route["type"])
                self.send_header("Content-Length", str(len(chunk)))
                self.send_header("Accept-Ranges", "bytes")
                self.send_header("Last-Modified", "Mon, 18 Mar 2024 09:30:00 GMT")
                self.send_header("ETag", '"%s"' % hashlib.sha1(body).hexdigest()[:16])
                if status == 206:
                    self.send_header("Content-Range", f"bytes {start}-{end}/{size}")
                self.end_headers()
                sent = 0
                if self.command != "HEAD":
                    try:
                        self.wfile.write(chunk)
                        sent = len(chunk)
                    except (BrokenPipeError, ConnectionResetError):
                        pass
                self._record(status, sent)

        class Server(http.server.ThreadingHTTPServer):
            daemon_threads = True
            allow_reuse_address = True

        self.server = Server(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def stop(self):
        if self.server:
            self.server.shutdown()
            self.server.server_close()


# ----------------------------------------------------------------------------------------------
# Results


class Case:
    def __init__(self, kind, name):
        self.kind, self.name = kind, name
        self.equal = False
        self.limited = None  # the oracle limitation, for cases checked against published hashes only
        self.summary = ""
        self.details: list[str] = []

    def fail(self, summary, *details):
        self.equal = False
        self.summary = summary
        self.details.extend(details)
        return self


# ----------------------------------------------------------------------------------------------
# DASH against yt-dlp


def ytdlp_tracks(info: dict) -> tuple[dict, list[str]]:
    """{key: (absolute URLs in order, ranges exposed)} from yt-dlp's -J document.

    Formats are keyed by format_id (the Representation@id for a direct .mpd URL; for several
    periods, the first period's id of the merged format). Subtitles have no format_id: they are
    keyed `sub:<lang>#<n>` (n-th subtitle track of that language, document order).
    """
    tracks, notes = {}, []

    def urls_of(f):
        if "fragments" in f:
            base = f.get("fragment_base_url") or ""
            urls, ranges = [], 0
            for fragment in f["fragments"]:
                if "url" in fragment:
                    urls.append(fragment["url"])
                else:
                    # yt-dlp's downloader: urljoin(fragment_base_url, path).
                    urls.append(urllib.parse.urljoin(base, fragment["path"]))
                if "range" in fragment or "byte_range" in fragment:
                    ranges += 1
            return urls, ranges
        return [f["url"]], 0

    for f in info.get("formats") or []:
        tracks[f["format_id"]] = urls_of(f)
    for lang, entries in (info.get("subtitles") or {}).items():
        for n, f in enumerate(entries):
            tracks[f"sub:{lang}#{n}"] = urls_of(f)
    return tracks, notes


def tessera_tracks(document: dict) -> dict:
    """{key: (segments: [(primary URL, range)], output name)} from `tessera resolve --json`."""
    tracks = {}
    sub_counts: dict[str, int] = {}
    for entity in document.get("entities", []):
        for output in entity.get("outputs", []):
            media = output.get("media") or {}
            rid = media.get("id", output["name"])
            if media.get("kind") == "subtitles":
                lang = media.get("language") or "und"
                n = sub_counts.get(lang, 0)
                sub_counts[lang] = n + 1
                key = f"sub:{lang}#{n}"
            else:
                key = rid
            segments = [(s["urls"][0], s.get("range")) for s in output["segments"]]
            tracks[key] = (segments, output["name"])
    return tracks


def fmt_range(r):
    if not r:
        return ""
    if "length" in r:
        return f" bytes {r['offset']}-{r['offset'] + r['length'] - 1}"
    return f" bytes {r['offset']}-"


def check_dash(mpd: Path, origin: Origin, tessera: str, ytdlp: Path, env: dict, verbose: bool) -> Case:
    case = Case("dash", mpd.name)
    url = f"{origin.origin}/dash/{mpd.name}"
    rc, out, err, _ = run_tool([str(ytdlp), "-J", "--no-warnings", "--allow-unplayable-formats", "--ignore-config",
                                "--no-cache-dir", "--proxy", "", "--socket-timeout", "10", url], env)
    if rc != 0:
        return case.fail("yt-dlp failed", f"yt-dlp exit {rc}: {err.strip()[-600:]}")
    info = json.loads(out)
    rc, out, err, _ = run_tool([tessera, "resolve", "--json", "--all-segments", "--format", "all", "--proxy", "", url],
                               env)
    try:
        document = json.loads(out)
    except json.JSONDecodeError:
        return case.fail("tessera failed", f"tessera exit {rc}: {err.strip()[-600:]}")
    if rc != 0 or document.get("errors"):
        return case.fail("tessera failed", f"tessera exit {rc}: {json.dumps(document.get('errors'))} {err.strip()[-300:]}")
    oracle, _ = ytdlp_tracks(info)
    ours = tessera_tracks(document)
    if set(oracle) != set(ours):
        case.fail("representations differ",
                  f"only yt-dlp: {sorted(set(oracle) - set(ours))}; only tessera: {sorted(set(ours) - set(oracle))}")
    compared = segments = ranges_tessera = ranges_oracle = 0
    for key in sorted(set(oracle) & set(ours)):
        expected, oracle_ranges = oracle[key]
        got, name = ours[key]
        got_urls = [u for u, _ in got]
        ranges_tessera += sum(1 for _, r in got if r)
        ranges_oracle += oracle_ranges
        compared += 1
        if expected != got_urls:
            first = next((i for i, (a, b) in enumerate(zip(expected, got_urls)) if a != b), min(len(expected), len(got_urls)))
            exp = expected[first] if first < len(expected) else "(none)"
            gotten = (got_urls[first] + fmt_range(got[first][1])) if first < len(got_urls) else "(none)"
            case.fail(f"{key}: segment {first + 1} differs",
                      f"representation {key} ({name}): yt-dlp {len(expected)} segments, tessera {len(got_urls)}; "
                      f"first difference at segment {first + 1} (1 = initialization when there is one):",
                      f"    yt-dlp:  {exp}", f"    tessera: {gotten}")
        else:
            segments += len(expected)
        if verbose:
            case.details.append(f"  {key}: {len(expected)} yt-dlp / {len(got_urls)} tessera segments")
    if not case.summary:
        case.equal = True
        note = ""
        if ranges_tessera and not ranges_oracle:
            note = f"; URLs only: {ranges_tessera} tessera byte ranges not exposed by yt-dlp"
        case.summary = f"{compared} representations, {segments} segments equal{note}"
    return case


# ----------------------------------------------------------------------------------------------
# Metalink against aria2c


def blob_bytes(seed: str, size: int) -> bytes:
    out = bytearray()
    i = 0
    while len(out) < size:
        out += hashlib.sha256(f"{seed}:{i}".encode()).digest()
        i += 1
    return bytes(out[:size])


HASHES = {"md5": "md5", "sha-1": "sha1", "sha1": "sha1", "sha-256": "sha256", "sha256": "sha256",
          "sha-512": "sha512", "sha512": "sha512"}


def expand_metalink(text: str, blobs: dict[str, bytes], origin: str) -> str:
    """Fills in {{ORIGIN}}, {{size:B}}, {{<hash>:B}}, {{pieces:<hash>:<len>:B}} (v4) and
    {{pieces-v3:<hash>:<len>:B}} (v3, numbered) from the generated blobs."""

    def piece_lines(algorithm, length, blob, numbered, indent):
        data = blobs[blob]
        lines = []
        for index, offset in enumerate(range(0, len(data), length)):
            digest = hashlib.new(HASHES[algorithm], data[offset:offset + length]).hexdigest()
            piece = f' piece="{index}"' if numbered else ""
            lines.append(f'{indent}<hash{piece}>{digest}</hash>')
        return "\n".join(lines)

    def replace(match):
        parts = match.group(1).split(":")
        if parts == ["ORIGIN"]:
            return origin
        if parts[0] == "size":
            return str(len(blobs[parts[1]]))
        if parts[0] in ("pieces", "pieces-v3"):
            return piece_lines(parts[1], int(parts[2]), parts[3], parts[0] == "pieces-v3", "      ")
        return hashlib.new(HASHES[parts[0]], blobs[parts[1]]).hexdigest()

    return re.sub(r"\{\{([^}]+)\}\}", replace, text)


def tree(root: Path) -> dict[str, str]:
    files = {}
    if root.exists():
        for path in sorted(root.rglob("*")):
            if path.is_file():
                files[path.relative_to(root).as_posix()] = hashlib.sha256(path.read_bytes()).hexdigest()
    return files


def mirror_traffic(log, paths) -> str:
    """Bytes and requests per mirror path, for the report."""
    parts = []
    for path in paths:
        entries = [e for e in log if e[0] == path]
        if entries:
            statuses = sorted({e[2] for e in entries})
            parts.append(f"{path}: {len(entries)} req, {sum(e[3] for e in entries)} B, status {statuses}")
    return "; ".join(parts) or "no mirror traffic"


def check_metalink(doc: Path, origin: Origin, tessera: str, aria2c: str, env: dict, work: Path,
                   expected: dict[str, bytes], mirrors: list[str], verbose: bool) -> Case:
    case = Case("metalink", doc.name)
    url = f"{origin.origin}/metalink/{doc.name}"
    base = work / doc.stem
    a_dir, b_dir, state = base / "aria2c", base / "tessera", base / "tessera-state"
    for d in (a_dir, b_dir, state):
        d.mkdir(parents=True, exist_ok=True)
    origin.take_log()
    rc_a, out_a, err_a, t_a = run_tool([aria2c, "--no-conf", "--dir", str(a_dir), "--allow-overwrite=false",
                                    "--check-integrity=true", "--follow-metalink=mem", "--all-proxy=",
                                    "--async-dns=false", "--enable-color=false", "--console-log-level=warn", "--summary-interval=0",
                                    "--download-result=hide", "--retry-wait=1", "--max-tries=3", url], env)
    log_a = origin.take_log()
    rc_b, _, err_b, t_b = run_tool([tessera, "get", url, "-o", str(b_dir), "--state-dir", str(state), "--no-cache",
                                    "--proxy", "", "-q"], env)
    log_b = origin.take_log()
    files_a, files_b = tree(a_dir), tree(b_dir)
    want = {name: hashlib.sha256(data).hexdigest() for name, data in expected.items()}
    problems = []
    if rc_a != 0:
        # aria2c reports its errors on standard output.
        said = [line.strip() for line in (out_a + err_a).splitlines()
                if "ERROR" in line or "Exception" in line or "errorCode" in line]
        problems.append(f"aria2c exit {rc_a}: {' | '.join(dict.fromkeys(said))[-500:]}")
    if rc_b != 0:
        problems.append(f"tessera exit {rc_b}: {err_b.strip()[-400:]}")
    if files_a != files_b:
        only_a = sorted(set(files_a) - set(files_b))
        only_b = sorted(set(files_b) - set(files_a))
        differing = sorted(n for n in set(files_a) & set(files_b) if files_a[n] != files_b[n])
        problems.append(f"outputs differ: only aria2c {only_a}; only tessera {only_b}; different bytes {differing}")
    for who, files in (("aria2c", files_a), ("tessera", files_b)):
        wrong = sorted(n for n, digest in want.items() if files.get(n) != digest)
        if wrong:
            problems.append(f"{who}: not the published bytes for {wrong}")
    traffic = [f"aria2c  ({t_a:.1f} s, exit {rc_a}): {mirror_traffic(log_a, mirrors)}",
               f"tessera ({t_b:.1f} s, exit {rc_b}): {mirror_traffic(log_b, mirrors)}"]
    limit = ORACLE_LIMITS.get(doc.name)
    if limit and problems:
        # Judge Tessera by the published hashes alone; report what aria2c did.
        ours = [p for p in problems if p.startswith("tessera")]
        case.limited = limit
        case.equal = not ours
        case.summary = ("tessera: published bytes, exit 0" if not ours else ours[0]) + f"; oracle limited: {limit}"
        case.details.extend(problems + traffic)
        return case
    if problems:
        case.fail(problems[0].split(":")[0], *problems, *traffic)
    else:
        case.equal = True
        total = sum(len(d) for d in expected.values())
        case.summary = f"{len(files_a)} files, {total} bytes equal, both exit 0"
        if verbose or "corrupt" in doc.name or "dead" in doc.name:
            case.details.extend(traffic)
    return case


def metalink_expectations(text: str) -> list[tuple[str, str]]:
    """(file name, blob) pairs: which blob each <file> must end up as (its sha-256 placeholder)."""
    pairs = []
    for match in re.finditer(r'<file name="([^"]+)">(.*?)</file>', text, re.S):
        blob = re.search(r"\{\{sha-?256:([^}]+)\}\}", match.group(2))
        pairs.append((match.group(1), blob.group(1)))
    return pairs


# ----------------------------------------------------------------------------------------------
# HLS against yt-dlp's native HLS downloader, both judged by the generated plaintext

# Run in the virtualenv's Python (pycryptodomex): raw AES-128-CBC of already padded data.
# Reads [[key hex, iv hex, data hex], ...] as JSON on standard input, writes the ciphertexts the same way.
AES_SCRIPT = """
import json, sys
from Cryptodome.Cipher import AES
jobs = json.load(sys.stdin)
json.dump([AES.new(bytes.fromhex(k), AES.MODE_CBC, bytes.fromhex(iv)).encrypt(bytes.fromhex(d)).hex() for k, iv, d in jobs],
          sys.stdout)
"""

HLS_TYPE = "application/vnd.apple.mpegurl"


def pkcs7(data: bytes) -> bytes:
    pad = 16 - len(data) % 16
    return data + bytes([pad]) * pad


def hls_key(seed: str) -> bytes:
    return hashlib.sha256(seed.encode()).digest()[:16]


def hls_iv(route: dict) -> bytes:
    """The route's explicit IV (`0x…`, as in the playlist) or its media sequence number, big-endian."""
    if "iv" in route:
        return bytes.fromhex(route["iv"][2:].zfill(32))
    return route["sequence"].to_bytes(16, "big")


def hls_routes(spec: dict, python: Path, env: dict) -> dict[str, bytes]:
    """{path: served bytes} from content.json: blobs concatenated, AES-128-CBC + PKCS#7 where a key is given."""
    blobs = {name: blob_bytes(f"hls:{name}", size) for name, size in spec["blobs"].items()}
    served, jobs = {}, []
    for path, route in spec["routes"].items():
        if isinstance(route, list):
            served[path] = b"".join(blobs[b] for b in route)
        elif "blobs" not in route:
            served[path] = hls_key(spec["keys"][route["key"]])
        else:
            plain = b"".join(blobs[b] for b in route["blobs"])
            jobs.append((path, [hls_key(spec["keys"][route["key"]]).hex(), hls_iv(route).hex(), pkcs7(plain).hex()]))
    if jobs:
        proc = subprocess.run([str(python), "-c", AES_SCRIPT], input=json.dumps([j for _, j in jobs]).encode(),
                              stdout=subprocess.PIPE, env=env, check=True)
        for (path, _), cipher in zip(jobs, json.loads(proc.stdout)):
            served[path] = bytes.fromhex(cipher)
    return served


def first_difference(a: bytes, b: bytes) -> int:
    """The offset of the first byte where a and b differ (the shorter length when one is a prefix)."""
    n = min(len(a), len(b))
    if a[:n] == b[:n]:
        return n
    low, high = 0, n  # a[:low] == b[:low], a[:high] != b[:high]
    while high - low > 4096:
        middle = (low + high) // 2
        if a[low:middle] == b[low:middle]:
            low = middle
        else:
            high = middle
    return next(i for i in range(low, high) if a[i] != b[i])


def describe_bytes(data: bytes | None) -> str:
    return "no file" if data is None else f"{len(data)} B sha-256 {hashlib.sha256(data).hexdigest()[:16]}"


def ytdlp_hls_args(ytdlp: Path) -> list[str]:
    return [str(ytdlp), "--ignore-config", "--no-cache-dir", "--proxy", "", "--socket-timeout", "10", "--no-warnings"]


def check_hls(playlist: Path, outputs: list[dict], origin: Origin, tessera: str, ytdlp: Path, env: dict, work: Path,
              truth: dict[str, bytes], verbose: bool) -> list[Case]:
    """One case per variant / rendition of one playlist."""
    url = f"{origin.origin}/hls/{playlist.name}"
    base = work / playlist.stem
    cases = [Case("hls", f"{playlist.name}:{o['tessera']}") for o in outputs]

    # yt-dlp: its format_id for each media playlist (matched by the playlist URL it lists).
    rc, out, err, _ = run_tool([*ytdlp_hls_args(ytdlp), "-J", url], env)
    formats = {}
    if rc == 0:
        for f in json.loads(out).get("formats") or []:
            path = urllib.parse.urlsplit(f["url"]).path
            formats[path] = f["format_id"]
    else:
        for case in cases:
            case.details.append(f"yt-dlp -J exit {rc}: {err.strip()[-300:]}")
    # Tessera: the file each identifier becomes (output name relative to the download directory).
    rc, out, err, _ = run_tool([tessera, "resolve", "--json", "--format", "all", "--proxy", "", url], env)
    names = {}
    try:
        document = json.loads(out)
        for entity in document.get("entities", []):
            for output in entity.get("outputs", []):
                names[(output.get("media") or {}).get("id", output["name"])] = output["name"]
        listed = sorted(names)
        if rc != 0 or document.get("errors"):
            for case in cases:
                case.details.append(f"tessera resolve exit {rc}: {json.dumps(document.get('errors'))[-400:]}")
    except json.JSONDecodeError:
        listed = []
        for case in cases:
            case.details.append(f"tessera resolve exit {rc}: {err.strip()[-300:]}")
    extra = sorted(set(names) - {o["tessera"] for o in outputs})
    unmatched = sorted(fid for path, fid in formats.items()
                       if path not in {f"/hls/{o['playlist']}" for o in outputs})

    limit = ORACLE_LIMITS.get(playlist.name)
    for n, (case, expected) in enumerate(zip(cases, outputs)):
        want = truth[expected["playlist"]]
        format_id = formats.get(f"/hls/{expected['playlist']}")
        # yt-dlp's native downloader, one format at a time.
        got_y, note_y = None, ""
        if format_id is None:
            note_y = f"yt-dlp lists no format for {expected['playlist']} (it has {sorted(formats.values())})"
        else:
            y_dir = base / f"yt-dlp-{n}"
            rc, out, err, t_y = run_tool([*ytdlp_hls_args(ytdlp), "-f", format_id, "--downloader", "native", "--fixup", "never",
                                          "--no-part", "--no-mtime", "--abort-on-unavailable-fragments",
                                          "--fragment-retries", "0", "--retries", "0", "--no-progress",
                                          "-o", str(y_dir / "out.%(ext)s"), url], env)
            files = sorted(p for p in y_dir.glob("out.*") if p.is_file()) if y_dir.exists() else []
            if rc == 0 and len(files) == 1:
                got_y = files[0].read_bytes()
            else:
                said = [line.strip() for line in err.splitlines() if "ERROR" in line] or err.strip().splitlines()[-1:]
                note_y = f"yt-dlp -f {format_id} exit {rc}: {' | '.join(said)[-400:]}"
        # Tessera, one output at a time.
        got_t, note_t = None, ""
        identifier = expected["tessera"]
        if identifier not in names:
            note_t = f"tessera lists no output {identifier!r} (it has {listed})"
        else:
            t_dir, state = base / f"tessera-{n}", base / f"tessera-state-{n}"
            rc, out, err, t_t = run_tool([tessera, "get", "--format", identifier, "-o", str(t_dir), "--state-dir", str(state),
                                          "--no-cache", "--proxy", "", "-q", url], env)
            target = t_dir / names[identifier]
            files = sorted(p.relative_to(t_dir).as_posix() for p in t_dir.rglob("*") if p.is_file()) if t_dir.exists() else []
            if rc == 0 and target.is_file():
                got_t = target.read_bytes()
                if files != [names[identifier]]:
                    note_t = f"tessera wrote {files}, expected only {names[identifier]}"
            else:
                note_t = f"tessera get --format {identifier} exit {rc}: {err.strip()[-400:]} (files: {files})"
        case.details.insert(0, f"yt-dlp -f {format_id}: {describe_bytes(got_y)}; tessera {names.get(identifier, identifier)}: "
                               f"{describe_bytes(got_t)}; ground truth {describe_bytes(want)}")
        y_ok, t_ok = got_y == want, got_t == want
        problems = [p for p in (note_y, note_t) if p]
        if got_y is not None and got_t is not None and got_y != got_t:
            offset = first_difference(got_y, got_t)
            side = "yt-dlp" if y_ok else "tessera" if t_ok else "neither"
            problems.insert(0, f"bytes differ from offset {offset}; ground truth matches {side}")
        if got_y is not None and got_y == got_t and not y_ok:
            problems.insert(0, f"both tools agree but differ from the ground truth at offset {first_difference(got_y, want)}")
        else:
            for who, got, ok in (("yt-dlp", got_y, y_ok), ("tessera", got_t, t_ok)):
                if got is not None and not ok:
                    problems.append(f"{who} differs from the ground truth at offset {first_difference(got, want)}")
        if limit and not y_ok:
            # Judge Tessera by the ground truth alone; report what yt-dlp did.
            ours = [p for p in problems if p.startswith("tessera")]
            case.limited = limit
            case.equal = t_ok and not ours
            case.summary = ("tessera: ground truth, " + describe_bytes(got_t) if case.equal else (ours or problems)[0]) \
                + f"; oracle limited: {limit}"
            case.details.extend(problems)
            continue
        if problems or not (y_ok and t_ok):
            case.fail(problems[0] if problems else "not the ground truth", *problems[1:])
        else:
            case.equal = True
            case.summary = f"{len(want)} bytes equal (yt-dlp format {format_id}), ground truth"
            if not verbose:
                case.details.clear()
    if extra or unmatched:
        cases[0].details.append(f"not compared: tessera outputs {extra}, yt-dlp formats {unmatched}")
    return cases


def run_hls(corpus: Path, origin: Origin, tessera: str, ytdlp: Path, env: dict, work: Path, keep: bool,
            verbose: bool) -> list[Case]:
    spec = json.loads((corpus / "hls" / "content.json").read_text())
    for path, data in hls_routes(spec, ytdlp.parent / "python", env).items():
        origin.add(path, data)
    hostport = urllib.parse.urlsplit(origin.origin).netloc
    for path in sorted((corpus / "hls").rglob("*.m3u8")):
        rel = path.relative_to(corpus / "hls").as_posix()
        text = path.read_text().replace("{{ORIGIN}}", origin.origin).replace("{{HOSTPORT}}", hostport)
        origin.add(f"/hls/{rel}", text.encode(), HLS_TYPE)
        if keep:
            (work / "served" / "hls" / rel).parent.mkdir(parents=True, exist_ok=True)
            (work / "served" / "hls" / rel).write_text(text)
    # The ground truth: each media playlist's segments in plaintext, concatenated.
    truth = {}
    for outputs in spec["cases"].values():
        for o in outputs:
            truth[o["playlist"]] = b"".join(blob_bytes(f"hls:{b}", spec["blobs"][b]) for b in o["content"])
    playlists = [p for p in sorted((corpus / "hls").glob("*.m3u8")) if p.name in spec["cases"]]
    # Two playlists at a time (the tools mostly wait on their own start-up and on the loopback).
    with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
        futures = [pool.submit(check_hls, p, spec["cases"][p.name], origin, tessera, ytdlp, env, work, truth, verbose)
                   for p in playlists]
        results = []
        for future in futures:
            for case in future.result():
                print_case(case)
                results.append(case)
    return results


# ----------------------------------------------------------------------------------------------


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tessera", required=True, help="the tessera binary")
    parser.add_argument("--only", choices=["dash", "metalink", "hls"])
    parser.add_argument("--keep", action="store_true", help="keep the temporary directory")
    parser.add_argument("--verbose", "-v", action="store_true")
    parser.add_argument("--corpus", default=str(HERE), help="a directory with dash/, metalink/ and hls/ (default: beside run.py)")
    args = parser.parse_args()
    tessera = os.path.abspath(args.tessera)
    corpus = Path(args.corpus).resolve()
    started = time.monotonic()

    work = Path(tempfile.mkdtemp(prefix="tessera-conformance-"))
    env = loopback_env(work / "home")
    origin = Origin()
    origin.start()
    cases: list[Case] = []
    versions = []
    try:
        rc, out, _, _ = run_tool([tessera, "--version"], env)
        versions.append(f"tessera {out.strip()}")
        if args.only in (None, "dash"):
            ytdlp = ensure_yt_dlp()
            versions.append(f"yt-dlp {run_tool([str(ytdlp), '--version'], env)[1].strip()}")
            mpds = sorted((corpus / "dash").glob("*.mpd"))
            for mpd in mpds:
                text = mpd.read_text().replace("{{ORIGIN}}", origin.origin)
                origin.add(f"/dash/{mpd.name}", text.encode(), "application/dash+xml")
            for mpd in mpds:
                cases.append(check_dash(mpd, origin, tessera, ytdlp, env, args.verbose))
                print_case(cases[-1])
        if args.only in (None, "metalink"):
            aria2c = shutil.which("aria2c")
            if not aria2c:
                print("conformance: aria2c not found (apt-get install aria2)", file=sys.stderr)
                return 2
            versions.append(run_tool([aria2c, "--version"], env)[1].splitlines()[0])
            spec = json.loads((corpus / "metalink" / "content.json").read_text())
            blobs = {name: blob_bytes(b["seed"], b["size"]) for name, b in spec["blobs"].items()}
            for path, route in spec["routes"].items():
                if route.get("status") == 404:
                    origin.add(path, None, status=404)
                    continue
                data = bytearray(blobs[route["blob"]])
                if "corrupt" in route:
                    length, index = route["corrupt"]
                    for i in range(index * length + 1000, index * length + 1016):
                        data[i] ^= 0xFF
                origin.add(path, bytes(data))
            docs = sorted(list((corpus / "metalink").glob("*.meta4")) + list((corpus / "metalink").glob("*.metalink")))
            for doc in docs:
                raw = doc.read_text()
                text = expand_metalink(raw, blobs, origin.origin)
                kind = "application/metalink4+xml" if doc.suffix == ".meta4" else "application/metalink+xml"
                origin.add(f"/metalink/{doc.name}", text.encode(), kind)
                if args.keep:
                    (work / "served").mkdir(exist_ok=True)
                    (work / "served" / doc.name).write_text(text)
            for doc in docs:
                raw = doc.read_text()
                expected = {name: blobs[blob] for name, blob in metalink_expectations(raw)}
                mirrors = [urllib.parse.urlsplit(urllib.parse.urljoin(f"{origin.origin}/metalink/{doc.name}", u)).path
                           for u in re.findall(r"<url[^>]*>([^<]+)</url>", raw.replace("{{ORIGIN}}", origin.origin))]
                cases.append(check_metalink(doc, origin, tessera, aria2c, env, work, expected, mirrors, args.verbose))
                print_case(cases[-1])
        if args.only in (None, "hls") and (corpus / "hls" / "content.json").exists():
            ytdlp = ensure_yt_dlp()
            if not any(v.startswith("yt-dlp") for v in versions):
                versions.append(f"yt-dlp {run_tool([str(ytdlp), '--version'], env)[1].strip()}")
            cases.extend(run_hls(corpus, origin, tessera, ytdlp, env, work, args.keep, args.verbose))
    finally:
        origin.stop()
        if args.keep:
            print(f"conformance: kept {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)

    compared = [c for c in cases if not c.limited]
    limited = [c for c in cases if c.limited]
    equal = sum(1 for c in compared if c.equal)
    print()
    print("  " + " | ".join(versions))
    width = max((len(c.name) for c in cases), default=10)
    print(f"  {'kind':<9} {'case':<{width}}  result")
    for c in cases:
        print(f"  {c.kind:<9} {c.name:<{width}}  {label(c)}: {c.summary}")
    print(f"  ({time.monotonic() - started:.1f} s)")
    for c in limited:
        judge = "the ground truth" if c.kind == "hls" else "the published hashes"
        print(f"  not counted: {c.name} ({'tessera right' if c.equal else 'TESSERA WRONG'} by {judge}; {c.limited})")
    print(f"conformance: {equal}/{len(compared)} cases equal")
    ok = compared and equal == len(compared) and all(c.equal for c in limited)
    return 0 if ok else 1


def label(case: Case) -> str:
    if case.limited:
        return "ORACLE-LIMITED" if case.equal else "DIFFERENT"
    return "EQUAL" if case.equal else "DIFFERENT"


def print_case(case: Case):
    print(f"[{label(case)}] {case.kind} {case.name}: {case.summary}", flush=True)
    for line in case.details:
        print(f"    {line}", flush=True)


if __name__ == "__main__":
    sys.exit(main())

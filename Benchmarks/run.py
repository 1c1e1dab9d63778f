#!/usr/bin/env python3
"""Benchmarks of Tessera against the tools that do the same job, served by a local nginx.

Scenarios (everything on /dev/shm, served over 127.0.0.1, 16 transfers in flight; kill: 4):
  p1     2,000 files x 64 KiB   engine: tessera-engine-bench vs curl --parallel vs aria2c
  p2     one 1 GiB file          engine: single-stream throughput, same tools
  p3     DASH, 600 x 128 KiB video + 600 x 16 KiB audio      `tessera get` vs yt-dlp (native)
  p4     HLS, master + one variant of 600 x 128 KiB segments `tessera get` vs yt-dlp (native)
  p5     Metalink 4, 8 files x 32 MiB, 2 mirrors each        `tessera get` vs aria2c
  p1cli  the p1 files through `tessera get -i` (defaults, and -j 16 -N 16) vs curl vs aria2c
  p2cli  the p2 file through `tessera get URL` vs curl vs aria2c -x 16 -s 16
  p3big  DASH, 2,000 x 256 KiB video + 2,000 x 32 KiB audio  `tessera get` vs curl --parallel
  p6     DASH, 2 x 50,000 segments of 512 bytes              `tessera get` vs curl --parallel
  kill   a 256 MiB file (plain and as 256 DASH segments) SIGKILLed --kills times, resumed (opt-in)
  p7     resolving an MPD of 2 x 200,000 segments         `tessera resolve` vs `yt-dlp -J` (opt-in)
  p8     resolving an HLS playlist of 999,999 segments    `tessera resolve`, peak RSS (opt-in)
  ml1k, ml5k, ml20k  Metalink of 1,000 / 5,000 / 20,000 files x 512 bytes  `tessera get` vs aria2c (opt-in)

After --warmup untimed rounds, each tool runs --runs times per scenario, interleaved within each
round (the order rotates from round to round). Wall time is measured around the child; CPU
(user+sys) and peak RSS come from wait4(). Outputs are checked after every run. The scenarios
after p5 also count the requests the origin saw (nginx's access log). Results are printed as
Markdown tables and written to Benchmarks/results/latest.json. Python 3 stdlib only.
"""

import argparse
import hashlib
import importlib.util
import itertools
import json
import os
import platform
import random
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
PARALLEL = 16
KIB, MIB = 1 << 10, 1 << 20
P1_COUNT, P1_SIZE = 2000, 64 * KIB
P2_SIZE = 1 << 30
P3_SEGMENTS, P3_VIDEO_SEGMENT, P3_AUDIO_SEGMENT = 600, 128 * KIB, 16 * KIB
P3_VIDEO_INIT, P3_AUDIO_INIT = 1500, 700
P4_SEGMENTS, P4_SEGMENT = 600, 128 * KIB
P5_FILES, P5_SIZE, P5_PIECE = 8, 32 * MIB, 4 * MIB
P5_JOBS = 8
P3BIG_SEGMENTS, P3BIG_VIDEO_SEGMENT, P3BIG_AUDIO_SEGMENT = 2000, 256 * KIB, 32 * KIB
P6_SEGMENTS, P6_SEGMENT = 50000, 512
# P7: resolving an MPD of 2 x 200,000 SegmentTemplate segments; P8: an HLS playlist at the segment
# limit; ML*: Metalink documents of many small files (the curve 1k / 5k / 20k).
P7_SEGMENTS = 200000
P8_SEGMENTS = 999999
ML_COUNTS = {"ml1k": 1000, "ml5k": 5000, "ml20k": 20000}
ML_SIZE = 512
# The crash test: a file downloaded at KILL_RATE over KILL_CONNECTIONS, SIGKILLed --kills times at
# random moments, then run to completion. The delays are drawn from [KILL_DELAY_MIN, KILL_DELAY_MAX]
# and scaled down together when they add up to more than KILL_BUDGET of the file's time at the rate
# (6.4 s), so every kill lands mid-download.
KILL_SIZE, KILL_SEGMENT = 256 * MIB, 1 * MIB
KILL_RATE, KILL_RATE_BYTES, KILL_CONNECTIONS = "40M", 40 * MIB, 4
KILL_DELAY_MIN, KILL_DELAY_MAX, KILL_BUDGET = 0.2, 0.6, 0.7
KILL_FINAL_TIMEOUT = 300
ACCESS_LOG = "access.log"  # in the temporary directory; see nginx.conf.template
PROXY_VARIABLES = ("http_proxy", "https_proxy", "all_proxy", "ftp_proxy", "no_proxy")
DEFAULT_SCENARIOS = ("p1", "p2", "p3", "p4", "p5", "p1cli", "p2cli", "p3big", "p6")
OPT_IN_SCENARIOS = ("kill", "p7", "p8", "ml1k", "ml5k", "ml20k")  # 3 minutes at --runs 5: --scenarios all, or name it
ALL_SCENARIOS = DEFAULT_SCENARIOS + OPT_IN_SCENARIOS
PLAIN_SCENARIOS = {"p1", "p2", "p1cli", "p2cli"}

# Per scenario: the tools in table order, the reference of the ratio column, and the targets
# (label, tool, reference, metric, comparison, bound[, goal]). With a reference, the measured value
# is the ratio of the two tools' figures (METRICS), else the tool's own figure. "counted": the
# requests the origin saw are counted from nginx's access log.
SCENARIOS = {
    "p1": {"tools": ["tessera", "curl", "aria2c"], "reference": "curl",
           "title": "P1: %d files x %d KiB (engine)" % (P1_COUNT, P1_SIZE // KIB),
           "targets": [("Tessera wall <= 1.2x curl", "tessera", "curl", "wall", "<=", 1.2),
                       ("aria2c wall >= 3x Tessera", "aria2c", "tessera", "wall", ">=", 3.0)]},
    "p2": {"tools": ["tessera", "curl", "aria2c"], "reference": "curl",
           "title": "P2: one %d MiB file (engine)" % (P2_SIZE // MIB),
           "targets": [("Tessera throughput >= 90% of curl", "tessera", "curl", "throughput", ">=", 0.9)]},
    "p3": {"tools": ["tessera", "yt-dlp"], "reference": "yt-dlp",
           "title": "P3: DASH, %d x %d KiB video + %d x %d KiB audio (`tessera get`)"
                    % (P3_SEGMENTS, P3_VIDEO_SEGMENT // KIB, P3_SEGMENTS, P3_AUDIO_SEGMENT // KIB),
           "targets": [("Tessera wall <= 0.8x yt-dlp", "tessera", "yt-dlp", "wall", "<=", 0.8)]},
    "p4": {"tools": ["tessera", "yt-dlp"], "reference": "yt-dlp",
           "title": "P4: HLS, %d x %d KiB segments (`tessera get`)" % (P4_SEGMENTS, P4_SEGMENT // KIB),
           "targets": [("Tessera wall <= 0.8x yt-dlp", "tessera", "yt-dlp", "wall", "<=", 0.8)]},
    "p5": {"tools": ["tessera", "aria2c"], "reference": "aria2c",
           "title": "P5: Metalink, %d files x %d MiB, 2 mirrors each (`tessera get`)" % (P5_FILES, P5_SIZE // MIB),
           "targets": [("Tessera wall <= 1.1x aria2c", "tessera", "aria2c", "wall", "<=", 1.1)]},
    "p1cli": {"tools": ["tessera (defaults)", "tessera -j16 -N16", "curl", "aria2c"], "reference": "curl",
              "title": "P1cli: %d files x %d KiB (`tessera get -i`)" % (P1_COUNT, P1_SIZE // KIB),
              "counted": True,
              "targets": [("tessera (defaults): exactly one request per file", "tessera (defaults)", None,
                           "requests_per_file", "==", 1.0),
                          ("tessera -j16 -N16: exactly one request per file", "tessera -j16 -N16", None,
                           "requests_per_file", "==", 1.0),
                          ("tessera -j16 -N16 wall <= 1.0x curl", "tessera -j16 -N16", "curl", "wall", "<=", 1.0),
                          ("tessera -j16 -N16 CPU <= 2x curl's", "tessera -j16 -N16", "curl", "cpu", "<=", 2.0),
                          ("tessera (defaults) wall <= 1.2x curl", "tessera (defaults)", "curl", "wall", "<=", 1.2)]},
    "p2cli": {"tools": ["tessera", "curl", "aria2c"], "reference": "curl",
              "title": "P2cli: one %d MiB file (`tessera get URL`)" % (P2_SIZE // MIB),
              "counted": True,
              "targets": [("Tessera wall <= 0.8x curl", "tessera", "curl", "wall", "<=", 0.8, 0.6),
                          ("Tessera sends no HEAD", "tessera", None, "head", "==", 0),
                          ("Tessera sends one GET per connection", "tessera", None, "gets_per_connection", "==", 1.0)]},
    "p3big": {"tools": ["tessera", "curl"], "reference": "curl",
              "title": "P3big: DASH, %d x %d KiB video + %d x %d KiB audio (`tessera get` vs curl on the segment URLs)"
                       % (P3BIG_SEGMENTS, P3BIG_VIDEO_SEGMENT // KIB, P3BIG_SEGMENTS, P3BIG_AUDIO_SEGMENT // KIB),
              "counted": True,
              "targets": [("Tessera wall <= 1.1x curl", "tessera", "curl", "wall", "<=", 1.1)]},
    "p6": {"tools": ["tessera", "curl"], "reference": "curl",
           "title": "P6: DASH, 2 x %d segments of %d bytes (`tessera get` vs curl on the segment URLs)"
                    % (P6_SEGMENTS, P6_SEGMENT),
           "counted": True, "rss_line": True,
           "targets": [("Tessera wall <= 1.0x curl", "tessera", "curl", "wall", "<=", 1.0),
                       ("Tessera peak RSS < 100 MB", "tessera", None, "rss_mb", "<", 100)]},
    "p7": {"tools": ["tessera", "yt-dlp"], "reference": "yt-dlp",
           "title": "P7: resolving an MPD of 2 x %d SegmentTemplate segments (`tessera resolve --json` vs `yt-dlp -J`)"
                    % P7_SEGMENTS,
           "rss_line": True,
           "targets": [("Tessera wall < 1 s", "tessera", None, "wall", "<", 1.0, 0.45),
                       ("Tessera peak RSS < 200 MB", "tessera", None, "rss_mb", "<", 200, 100)]},
    "p8": {"tools": ["tessera"], "reference": None,
           "title": "P8: resolving an HLS playlist of %d segments, at the limit (`tessera resolve`)" % P8_SEGMENTS,
           "rss_line": True,
           "targets": [("Tessera peak RSS < 200 MB", "tessera", None, "rss_mb", "<", 200)]},
    "kill": {"tools": ["tessera", "tessera (DASH)", "aria2c", "curl"], "reference": None,
             "title": "Kill: a %d MiB file at %s/s, SIGKILLed and resumed" % (KILL_SIZE // MIB, KILL_RATE),
             "counted": True,
             "targets": [("tessera: final file identical", "tessera", None, "identical", "==", 100),
                         ("tessera: origin bytes / size <= 1.05", "tessera", None, "origin_ratio", "<=", 1.05, 1.01),
                         ("tessera (DASH): final file identical", "tessera (DASH)", None, "identical", "==", 100),
                         ("tessera (DASH): origin bytes / size <= 1.05", "tessera (DASH)", None, "origin_ratio",
                          "<=", 1.05, 1.01)]},
}
for _name, _count in ML_COUNTS.items():
    SCENARIOS[_name] = {"tools": ["tessera", "aria2c"], "reference": "aria2c", "rss_line": True,
                        "title": "%s: a Metalink document of %d files x %d bytes (`tessera get` vs aria2c)"
                                 % (_name.upper(), _count, ML_SIZE),
                        "targets": []}
CLI_SCENARIOS = {"p3", "p4", "p5", "p1cli", "p2cli", "p3big", "p6", "kill", "p7", "p8"} | set(ML_COUNTS)
RESOLVE_SCENARIOS = {"p7", "p8"}
# A target's metric: the key of the summary row it reads, and how its measured value is printed
# when it is not a ratio. Counts read the worst run ("_max"), so one bad run shows.
METRICS = {
    "wall": ("wall_s", "%.3f s"),
    "cpu": ("cpu_s", "%.3f s CPU"),
    "throughput": ("throughput_mib_s", None),
    "rss_mb": ("max_rss_mb", "%.0f MB"),
    "requests_per_file": ("requests_per_file_max", "%.3f requests per file (worst run)"),
    "head": ("head_max", "%d HEAD (worst run)"),
    "gets_per_connection": ("gets_per_connection_max", "%.2f GET per connection (worst run)"),
    "origin_ratio": ("origin_ratio", "%.3f"),
    "identical": ("identical_percent", "identical in %.0f%% of the rounds"),
}


class BenchError(Exception):
    pass


def log(message):
    print(message, file=sys.stderr, flush=True)


def sha256_file(path):
    digest = hashlib.sha256()
    with open(path, "rb") as file:
        while True:
            block = file.read(4 * MIB)
            if not block:
                return digest.hexdigest()
            digest.update(block)


def ensure_yt_dlp():
    """yt-dlp from the virtualenv of Conformance/run.py, created with its pinned version if missing.
    Uses Conformance/run.py's own ensure_yt_dlp(), so both use one yt-dlp; if that module cannot be
    loaded, the same steps are done here with the version pinned there."""
    path = os.path.join(REPO, "Conformance", "run.py")
    stdout = sys.stdout
    sys.stdout = sys.stderr  # progress lines, away from the tables
    try:
        try:
            spec = importlib.util.spec_from_file_location("tessera_conformance", path)
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
            ensure = module.ensure_yt_dlp
        except Exception as error:  # a module being edited, say: do its steps here
            log("note: using Conformance/run.py's yt-dlp steps directly (%s)" % error)
            ensure = ensure_yt_dlp_here
        return str(ensure())
    except (subprocess.CalledProcessError, OSError) as error:
        raise BenchError("could not set up yt-dlp for the benchmark: %s" % error)
    finally:
        sys.stdout = stdout


def ensure_yt_dlp_here():
    """Conformance/run.py's steps, for when that module cannot be loaded: the virtualenv
    $XDG_CACHE_HOME (or ~/.cache)/tessera-conformance/venv with the yt-dlp version pinned there.
    An existing yt-dlp of that version is used as it is; the virtualenv's version stamp is left
    to Conformance/run.py."""
    with open(os.path.join(REPO, "Conformance", "run.py")) as file:
        match = re.search(r'^YT_DLP_VERSION\s*=\s*"([^"]+)"', file.read(), re.M)
    if not match:
        raise BenchError("no YT_DLP_VERSION in Conformance/run.py")
    version = match.group(1)
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    venv = os.path.join(cache, "tessera-conformance", "venv")
    exe = os.path.join(venv, "bin", "yt-dlp")
    if os.access(exe, os.X_OK):
        done = subprocess.run([exe, "--version"], capture_output=True, text=True)
        if done.returncode == 0 and done.stdout.strip() == version:
            return exe
    log("creating %s with yt-dlp==%s" % (venv, version))
    os.makedirs(os.path.dirname(venv), exist_ok=True)
    if not os.path.exists(os.path.join(venv, "bin", "python")):
        subprocess.run([sys.executable, "-m", "venv", venv], check=True)
    subprocess.run([os.path.join(venv, "bin", "python"), "-m", "pip", "install", "-q",
                    "--disable-pip-version-check", "yt-dlp==%s" % version], check=True)
    return exe


# MARK: - Files and server

def write_random(path, size):
    chunk = 16 * MIB
    with open(path, "wb") as file:
        left = size
        while left:
            piece = min(chunk, left)
            file.write(os.urandom(piece))
            left -= piece


def free_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def start_nginx(tmp, root, workers):
    nginx = shutil.which("nginx") or next(
        (p for p in ("/usr/sbin/nginx", "/sbin/nginx") if os.access(p, os.X_OK)), None)
    if not nginx:
        raise BenchError("nginx not found: install it (apt-get install nginx-light)")
    built = subprocess.run([nginx, "-V"], capture_output=True, text=True).stderr
    temp_paths = ["    client_body_temp_path %s/nginx-client_body;" % tmp]
    for module in ("proxy", "fastcgi", "uwsgi", "scgi"):
        if "--without-http_%s_module" % module not in built:
            temp_paths.append("    %s_temp_path %s/nginx-%s;" % (module, tmp, module))
    port = free_port()
    with open(os.path.join(HERE, "nginx.conf.template")) as file:
        config = file.read()
    counted = "|".join(name for name, spec in SCENARIOS.items() if spec.get("counted"))
    for key, value in {"TMP": tmp, "ROOT": root, "PORT": str(port), "WORKERS": str(workers),
                       "TEMP_PATHS": "\n".join(temp_paths), "COUNTED": counted}.items():
        config = config.replace("@%s@" % key, value)
    config_path = os.path.join(tmp, "nginx.conf")
    with open(config_path, "w") as file:
        file.write(config)
    process = subprocess.Popen([nginx, "-p", tmp, "-c", config_path, "-g", "daemon off;"],
                               stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                               stderr=open(os.path.join(tmp, "nginx-stderr.log"), "wb"))
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        if process.poll() is not None:
            with open(os.path.join(tmp, "nginx-stderr.log"), errors="replace") as file:
                raise BenchError("nginx exited at start: " + file.read().strip())
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return process, port
        except OSError:
            time.sleep(0.05)
    stop_nginx(process)
    raise BenchError("nginx did not start listening on port %d" % port)


def stop_nginx(process):
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


class AccessLog:
    """nginx's access log of the counted scenarios (ACCESS_LOG in the temporary directory), one
    line per request: method, status, $bytes_sent, $connection, $request_uri. nginx appends a
    line when a request ends (a client killed mid-transfer included); read() returns the lines
    appended since the previous read()."""

    def __init__(self, path):
        self.path = path
        self.offset = 0

    def settled_size(self):
        """The log's length once nginx has stopped appending: two equal readings 50 ms apart (at
        most 5 s), so the last requests of a client that just exited or was killed are in."""
        last, deadline = -1, time.monotonic() + 5
        while True:
            size = os.path.getsize(self.path) if os.path.exists(self.path) else 0
            if size == last or time.monotonic() > deadline:
                return size
            last = size
            time.sleep(0.05)

    def read(self):
        """The requests logged since the previous read(), as dicts (method, status, bytes, connection,
        uri without its query); only complete lines."""
        end = self.settled_size()
        if end <= self.offset:
            return []
        with open(self.path, "rb") as file:
            file.seek(self.offset)
            data = file.read(end - self.offset)
        data = data[:data.rfind(b"\n") + 1]
        self.offset += len(data)
        entries = []
        for line in data.decode(errors="replace").splitlines():
            fields = line.split(" ", 4)
            if len(fields) != 5:
                raise BenchError("unexpected line in the nginx access log: %r" % line)
            method, status, sent, connection, uri = fields
            entries.append({"method": method, "status": int(status), "bytes": int(sent),
                            "connection": int(connection), "uri": uri.split("?", 1)[0]})
        return entries


def count_requests(scenario, entries):
    """What the origin saw during one run: requests by method, connections, bytes sent, and, over
    the scenario's payload URIs (its files or segments, not its manifest), requests and bytes per
    payload."""
    payload = scenario["payload_uris"]
    on_payload = [entry for entry in entries if entry["uri"] in payload]
    get = sum(1 for entry in entries if entry["method"] == "GET")
    head = sum(1 for entry in entries if entry["method"] == "HEAD")
    connections = len({entry["connection"] for entry in entries})
    origin = sum(entry["bytes"] for entry in on_payload)
    return {"requests": len(entries), "get": get, "head": head, "other_methods": len(entries) - get - head,
            "not_2xx": sum(1 for entry in entries if not 200 <= entry["status"] < 300),
            "connections": connections, "bytes_sent": sum(entry["bytes"] for entry in entries),
            "payload_requests": len(on_payload), "payload_uris_requested": len({e["uri"] for e in on_payload}),
            "requests_per_file": len(on_payload) / len(payload),
            "gets_per_connection": get / connections if connections else 0.0,
            "origin_bytes": origin, "origin_ratio": origin / scenario["bytes"]}


def requests_text(counts):
    return ("%d requests (GET %d, HEAD %d), %d connections, %.3f per file, origin %.3fx"
            % (counts["requests"], counts["get"], counts["head"], counts["connections"],
               counts["requests_per_file"], counts["origin_ratio"]))


# MARK: - Scenarios

def random_bytes(size, ts_like=False):
    data = bytearray(os.urandom(size))
    if ts_like:  # MPEG-TS-like: a sync byte at the start of every 188-byte packet
        data[0::188] = b"\x47" * len(range(0, size, 188))
    return bytes(data)


def write_file(path, data, mode=0o644):
    os.makedirs(os.path.dirname(path), mode=0o755, exist_ok=True)
    with open(path, "wb") as file:
        file.write(data)
    os.chmod(path, mode)


def make_dirs_readable(directory):
    for parent, dirs, _ in os.walk(directory):
        os.chmod(parent, 0o755)


# The MPD of the DASH scenarios: SegmentTemplate $Number$ from 1, 2-second segments, one
# representation per adaptation set; `init` is the initialization attribute (with its trailing
# space) or nothing.
MPD_HEAD = """<?xml version="1.0" encoding="UTF-8"?>
<MPD xmlns="urn:mpeg:dash:schema:mpd:2011" profiles="urn:mpeg:dash:profile:isoff-live:2011"
     type="static" mediaPresentationDuration="PT%dS" minBufferTime="PT2S">
  <Period id="0">
"""
MPD_SETS = {
    "video": """    <AdaptationSet id="%(index)d" contentType="video" mimeType="video/mp4" segmentAlignment="true">
      <Representation id="%(id)s" bandwidth="%(bandwidth)d" codecs="avc1.64001f" width="1280" height="720" frameRate="25">
        <SegmentTemplate timescale="1000" duration="2000" startNumber="1"
                         %(init)smedia="%(folder)sseg-$Number$.m4s"/>
      </Representation>
    </AdaptationSet>
""",
    "audio": """    <AdaptationSet id="%(index)d" contentType="audio" mimeType="audio/mp4" lang="en" segmentAlignment="true">
      <Representation id="%(id)s" bandwidth="%(bandwidth)d" codecs="mp4a.40.2" audioSamplingRate="48000">
        <SegmentTemplate timescale="48000" duration="96000" startNumber="1"
                         %(init)smedia="%(folder)sseg-$Number$.m4s"/>
      </Representation>
    </AdaptationSet>
""",
}
MPD_TAIL = """  </Period>
</MPD>
"""
# DASH scenarios of two tracks: segments per track, video init and segment size, audio init and
# segment size.
DASH_SIZES = {
    "p3": (P3_SEGMENTS, P3_VIDEO_INIT, P3_VIDEO_SEGMENT, P3_AUDIO_INIT, P3_AUDIO_SEGMENT),
    "p3big": (P3BIG_SEGMENTS, P3_VIDEO_INIT, P3BIG_VIDEO_SEGMENT, P3_AUDIO_INIT, P3BIG_AUDIO_SEGMENT),
    "p6": (P6_SEGMENTS, P3_VIDEO_INIT, P6_SEGMENT, P3_AUDIO_INIT, P6_SEGMENT),
}


def write_dash(directory, tracks):
    """Writes the segments of each track and `directory`/stream.mpd. A track is a dict: kind ("video"
    or "audio"), id, folder ("video/" or ""), init (bytes or None) and segments (an iterable of
    bytes). Returns per track: kind, id, the relative paths in playback order (init first), the
    total size and the sha-256 of the concatenation."""
    written, sets, seconds = [], [], 0
    for index, track in enumerate(tracks):
        digest, total, paths, bandwidth = hashlib.sha256(), 0, [], 0
        init_part = [("%sinit.mp4" % track["folder"], track["init"])] if track["init"] is not None else []
        numbered = (("%sseg-%d.m4s" % (track["folder"], number), data)
                    for number, data in enumerate(track["segments"], 1))
        for index_in_track, (path, data) in enumerate(itertools.chain(init_part, numbered)):
            write_file(os.path.join(directory, path), data)
            digest.update(data)
            total += len(data)
            paths.append(path)
            if index_in_track == len(init_part):  # the first media segment, 2 s long
                bandwidth = len(data) * 8 // 2
        seconds = max(seconds, (len(paths) - len(init_part)) * 2)
        init = 'initialization="%sinit.mp4" ' % track["folder"] if track["init"] is not None else ""
        sets.append(MPD_SETS[track["kind"]] % {"index": index, "id": track["id"], "bandwidth": bandwidth,
                                               "init": init, "folder": track["folder"]})
        written.append({"kind": track["kind"], "id": track["id"], "paths": paths, "size": total,
                        "digest": digest.hexdigest()})
    write_file(os.path.join(directory, "stream.mpd"), (MPD_HEAD % seconds + "".join(sets) + MPD_TAIL).encode())
    return written


def file_chunks(path, size):
    """The pieces of a file, `size` bytes each (the last one shorter)."""
    with open(path, "rb") as file:
        while True:
            data = file.read(size)
            if not data:
                return
            yield data


def prepare_plain(scenario, tmp, base):
    """P1/P2 and their CLI versions: random files, a URL list and the path of curl's config."""
    name, directory = scenario["name"], scenario["source"]
    if name in ("p1", "p1cli"):
        names = ["f%04d.bin" % i for i in range(P1_COUNT)]
        for file_name in names:
            write_file(os.path.join(directory, file_name), os.urandom(P1_SIZE))
        sizes = {file_name: P1_SIZE for file_name in names}
    else:
        names = ["big.bin"]
        write_random(os.path.join(directory, names[0]), P2_SIZE)
        os.chmod(os.path.join(directory, names[0]), 0o644)
        sizes = {names[0]: P2_SIZE}
    urls = ["%s/%s" % (base, file_name) for file_name in names]
    url_list = os.path.join(tmp, "%s-urls.txt" % name)
    with open(url_list, "w") as file:
        file.write("\n".join(urls) + "\n")
    scenario.update(urls=urls, url_list=url_list, curl_config=os.path.join(tmp, "%s-curl.cfg" % name),
                    sizes=sizes, bytes=sum(sizes.values()),
                    payload_uris={"/%s/%s" % (name, file_name) for file_name in names})


def prepare_dash(scenario, tmp, base):
    """P3, P3big, P6: a video and an audio track of random init + segments and their stream.mpd.
    P3big and P6 also give curl the segment URLs (segment_tracks, curl_config)."""
    name = scenario["name"]
    count, video_init, video_segment, audio_init, audio_segment = DASH_SIZES[name]
    tracks = write_dash(scenario["source"], [
        {"kind": "video", "id": "v1", "folder": "video/", "init": random_bytes(video_init),
         "segments": (random_bytes(video_segment) for _ in range(count))},
        {"kind": "audio", "id": "a1", "folder": "audio/", "init": random_bytes(audio_init),
         "segments": (random_bytes(audio_segment) for _ in range(count))}])
    scenario.update(input="%s/stream.mpd" % base, formats=("v1", "a1"),
                    contents={track["digest"]: (track["size"], "%s track" % track["kind"]) for track in tracks},
                    bytes=sum(track["size"] for track in tracks),
                    payload_uris={"/%s/%s" % (name, path) for track in tracks for path in track["paths"]})
    if name != "p3":
        scenario.update(base=base, segment_tracks=tracks, segment_tools=("curl",),
                        curl_config=os.path.join(tmp, "%s-curl.cfg" % name))


def prepare_kill(scenario, base):
    """The crash test: a random KILL_SIZE file (big.bin) and the same bytes as a one-track DASH
    presentation of KILL_SEGMENT segments without an init segment (seg/stream.mpd)."""
    directory = scenario["source"]
    big = os.path.join(directory, "big.bin")
    write_random(big, KILL_SIZE)
    os.chmod(big, 0o644)
    digest = sha256_file(big)
    tracks = write_dash(os.path.join(directory, "seg"), [
        {"kind": "video", "id": "v1", "folder": "", "init": None, "segments": file_chunks(big, KILL_SEGMENT)}])
    if tracks[0]["digest"] != digest:
        raise BenchError("kill: the segments do not add up to big.bin")
    scenario.update(url="%s/big.bin" % base, input="%s/seg/stream.mpd" % base,
                    contents={digest: (KILL_SIZE, "the %d MiB file" % (KILL_SIZE // MIB))}, bytes=KILL_SIZE,
                    payload_uris={"/kill/big.bin"} | {"/kill/seg/%s" % path for path in tracks[0]["paths"]})


def prepare(name, tmp, root, port):
    """Creates the served files of a scenario. Returns a dict with the source directory, the inputs,
    the expected outputs, the bytes a run moves and the URIs of the payload (for the request counts)."""
    base = "http://127.0.0.1:%d/%s" % (port, name)
    directory = os.path.join(root, name)
    os.makedirs(directory, exist_ok=True)
    scenario = {"name": name, "source": directory}
    if name in PLAIN_SCENARIOS:
        prepare_plain(scenario, tmp, base)
    elif name in DASH_SIZES:
        prepare_dash(scenario, tmp, base)
    elif name == "kill":
        prepare_kill(scenario, base)
    elif name == "p4":
        digest, total, lines = hashlib.sha256(), 0, []
        for number in range(P4_SEGMENTS):
            data = random_bytes(P4_SEGMENT, ts_like=True)
            write_file(os.path.join(directory, "v0", "seg-%d.ts" % number), data)
            digest.update(data)
            total += len(data)
            lines += ["#EXTINF:2.000,", "seg-%d.ts" % number]
        media = ["#EXTM3U", "#EXT-X-VERSION:3", "#EXT-X-TARGETDURATION:2", "#EXT-X-MEDIA-SEQUENCE:0",
                 "#EXT-X-PLAYLIST-TYPE:VOD"] + lines + ["#EXT-X-ENDLIST"]
        write_file(os.path.join(directory, "v0", "index.m3u8"), ("\n".join(media) + "\n").encode())
        master = ["#EXTM3U", "#EXT-X-VERSION:3",
                  '#EXT-X-STREAM-INF:BANDWIDTH=%d,RESOLUTION=1280x720,CODECS="avc1.64001f,mp4a.40.2"'
                  % (P4_SEGMENT * 8 // 2 * 105 // 100), "v0/index.m3u8"]
        write_file(os.path.join(directory, "master.m3u8"), ("\n".join(master) + "\n").encode())
        scenario.update(input="%s/master.m3u8" % base,
                        contents={digest.hexdigest(): (total, "variant")}, bytes=total)
    elif name == "p7":
        tracks = []
        for kind, mime, codecs in (("v", "video/mp4", "avc1.64001f"), ("a", "audio/mp4", "mp4a.40.2")):
            tracks.append('<AdaptationSet mimeType="%s"><SegmentTemplate media="%s/$Number%%06d$.m4s" '
                          'initialization="%s/init.mp4" duration="2" timescale="1" startNumber="1"/>'
                          '<Representation id="%s1" bandwidth="500000" codecs="%s"/></AdaptationSet>'
                          % (mime, kind, kind, kind, codecs))
        document = ('<?xml version="1.0"?>\n<MPD xmlns="urn:mpeg:dash:schema:mpd:2011" type="static" '
                    'mediaPresentationDuration="PT%dS" minBufferTime="PT2S" '
                    'profiles="urn:mpeg:dash:profile:isoff-live:2011"><Period>%s</Period></MPD>\n'
                    % (2 * P7_SEGMENTS, "".join(tracks)))
        write_file(os.path.join(directory, "long.mpd"), document.encode())
        scenario.update(input="%s/long.mpd" % base, bytes=0)
    elif name == "p8":
        lines = ["#EXTM3U", "#EXT-X-VERSION:3", "#EXT-X-TARGETDURATION:2", "#EXT-X-PLAYLIST-TYPE:VOD"]
        for number in range(P8_SEGMENTS):
            lines += ["#EXTINF:2.000,", "seg-%07d.ts" % number]
        write_file(os.path.join(directory, "long.m3u8"), ("\n".join(lines + ["#EXT-X-ENDLIST"]) + "\n").encode())
        scenario.update(input="%s/long.m3u8" % base, bytes=0)
    elif name in ML_COUNTS:
        entries, files = [], {}
        for index in range(ML_COUNTS[name]):
            file_name = "f%05d.bin" % index
            data = os.urandom(ML_SIZE)
            write_file(os.path.join(directory, "f", file_name), data)
            digest = hashlib.sha256(data).hexdigest()
            files[file_name] = (ML_SIZE, digest)
            entries.append('<file name="%s"><size>%d</size><hash type="sha-256">%s</hash><url>%s/f/%s</url></file>'
                           % (file_name, ML_SIZE, digest, base, file_name))
        document = ('<?xml version="1.0" encoding="UTF-8"?>\n<metalink xmlns="urn:ietf:params:xml:ns:metalink">\n'
                    "%s\n</metalink>\n" % "\n".join(entries))
        write_file(os.path.join(directory, "many.meta4"), document.encode())
        scenario.update(input="%s/many.meta4" % base, files=files, bytes=ML_COUNTS[name] * ML_SIZE)
    elif name == "p5":
        entries, files = [], {}
        for index in range(1, P5_FILES + 1):
            file_name = "file-%d.bin" % index
            first = os.path.join(directory, "m1", file_name)
            os.makedirs(os.path.dirname(first), exist_ok=True)
            write_random(first, P5_SIZE)
            os.chmod(first, 0o644)
            second = os.path.join(directory, "m2", file_name)
            os.makedirs(os.path.dirname(second), exist_ok=True)
            os.link(first, second)  # identical content, another path
            pieces = []
            with open(first, "rb") as file:
                whole = hashlib.sha256()
                while True:
                    piece = file.read(P5_PIECE)
                    if not piece:
                        break
                    whole.update(piece)
                    pieces.append(hashlib.sha256(piece).hexdigest())
            files[file_name] = (P5_SIZE, whole.hexdigest())
            entries.append("""  <file name="%s">
    <size>%d</size>
    <hash type="sha-256">%s</hash>
    <pieces length="%d" type="sha-256">
%s
    </pieces>
    <url priority="1">%s/m1/%s</url>
    <url priority="1">%s/m2/%s</url>
  </file>""" % (file_name, P5_SIZE, whole.hexdigest(), P5_PIECE,
                "\n".join("      <hash>%s</hash>" % h for h in pieces), base, file_name, base, file_name))
        document = ('<?xml version="1.0" encoding="UTF-8"?>\n<metalink xmlns="urn:ietf:params:xml:ns:metalink">\n'
                    "  <published>2025-01-01T00:00:00Z</published>\n%s\n</metalink>\n" % "\n".join(entries))
        write_file(os.path.join(directory, "release.meta4"), document.encode())
        scenario.update(input="%s/release.meta4" % base, files=files, bytes=P5_FILES * P5_SIZE)
    else:
        raise BenchError("unknown scenario %s" % name)
    make_dirs_readable(directory)
    return scenario


CURL_PARALLEL = ["curl", "-q", "--parallel", "--parallel-max", str(PARALLEL), "-s", "-S", "--fail",
                 "--noproxy", "*"]


def tessera_get(binaries, inputs, out, state):
    """`tessera get INPUTS` with the options of every CLI scenario: output, a state directory of its
    own, no segment cache, no proxy, quiet, no merging (yt-dlp's runs do not merge either)."""
    return ([binaries["tessera_cli"], "get"] + inputs
            + ["-d", out, "--state-dir", state, "--no-cache", "--proxy", "", "-q", "--no-merge"])


def plain_commands(scenario, out, state, binaries):
    """P1/P2 (the engine bench) and P1cli/P2cli (`tessera get`), with curl and aria2c."""
    name = scenario["name"]
    with open(scenario["curl_config"], "w") as file:
        for url, file_name in zip(scenario["urls"], scenario["sizes"]):
            file.write('url = "%s"\noutput = "%s"\n' % (url, os.path.join(out, file_name)))
    curl = list(CURL_PARALLEL)
    if name in ("p1", "p1cli"):
        curl += ["-K", scenario["curl_config"]]
    else:
        curl += ["-o", os.path.join(out, "big.bin"), scenario["urls"][0]]
    aria2 = ["aria2c", "--no-conf", "-j", str(PARALLEL), "-x1", "-s1", "-i", scenario["url_list"],
             "-d", out, "--console-log-level=warn", "--summary-interval=0", "--file-allocation=none",
             "--allow-overwrite=true", "--auto-file-renaming=false", "-q"]
    if name in ("p1", "p2"):
        return {
            "tessera": [binaries["tessera"], "--input", scenario["url_list"], "--dir", out,
                        "--parallel", str(PARALLEL)]
                       + (["--threads", str(binaries["engine_threads"])] if binaries.get("engine_threads") else []),
            "curl": curl,
            "aria2c": aria2,
        }
    if name == "p1cli":
        listed = tessera_get(binaries, ["-i", scenario["url_list"]], out, state)
        return {"tessera (defaults)": listed, "tessera -j16 -N16": listed + ["-j", "16", "-N", "16"],
                "curl": curl, "aria2c": aria2}
    # One file over 16 connections: -k 1M lets aria2c split it (and split again what is left as
    # connections free up).
    aria2 = ["aria2c", "--no-conf", "-x", str(PARALLEL), "-s", str(PARALLEL), "-k", "1M", "-d", out,
             "--console-log-level=warn", "--summary-interval=0", "--file-allocation=none",
             "--allow-overwrite=true", "--auto-file-renaming=false", "--download-result=hide", "-q",
             scenario["urls"][0]]
    return {"tessera": tessera_get(binaries, [scenario["urls"][0]], out, state), "curl": curl, "aria2c": aria2}


def segment_curl(scenario, out):
    """curl fetching every segment URL of a DASH scenario (init segments included) into
    `out`/video/… and `out`/audio/…, 16 at once, from a config file."""
    with open(scenario["curl_config"], "w") as file:
        for track in scenario["segment_tracks"]:
            for path in track["paths"]:
                file.write('url = "%s/%s"\noutput = "%s"\n' % (scenario["base"], path, os.path.join(out, path)))
    return CURL_PARALLEL + ["--create-dirs", "-K", scenario["curl_config"]]


def kill_commands(scenario, out, state, binaries):
    """The crash test: each command resumes what the same command left in `out` (and `state`)."""
    limit = ["--limit-rate", KILL_RATE, "-N", str(KILL_CONNECTIONS)]
    return {
        "tessera": tessera_get(binaries, [scenario["url"]], out, state) + limit,
        "tessera (DASH)": tessera_get(binaries, [scenario["input"]], out, state) + limit,
        # -c: resume from the .aria2 control file (or, without one, from the file's length).
        "aria2c": ["aria2c", "--no-conf", "-c", "-x", str(KILL_CONNECTIONS), "-s", str(KILL_CONNECTIONS),
                   "--max-overall-download-limit=%s" % KILL_RATE, "--file-allocation=none", "-d", out,
                   "--console-log-level=warn", "--summary-interval=0", "--download-result=hide", "-q",
                   scenario["url"]],
        # -C -: resume from the length of the output file.
        "curl": ["curl", "-q", "-s", "-S", "--fail", "--noproxy", "*", "-C", "-", "--limit-rate", KILL_RATE,
                 "-o", os.path.join(out, "big.bin"), scenario["url"]],
    }


def commands(scenario, out, state, binaries):
    """The command line of each tool for a scenario, writing into `out`."""
    name = scenario["name"]
    if name in PLAIN_SCENARIOS:
        return plain_commands(scenario, out, state, binaries)
    if name == "kill":
        return kill_commands(scenario, out, state, binaries)
    if name in RESOLVE_SCENARIOS:
        # The whole document, every segment, as `yt-dlp -J` prints it (to /dev/null).
        tessera = [binaries["tessera_cli"], "resolve", "--json", scenario["input"]]
        if name == "p8":
            return {"tessera": tessera}
        ytdlp = [binaries["yt-dlp"], "--ignore-config", "--no-cache-dir", "--proxy", "", "-J", scenario["input"]]
        return {"tessera": tessera, "yt-dlp": ytdlp}
    tessera = tessera_get(binaries, [scenario["input"]], out, state)
    if name in ML_COUNTS:
        aria2 = ["aria2c", "--no-conf", "-d", out, "-j", str(PARALLEL), "--follow-metalink=mem", "--all-proxy=",
                 "--file-allocation=none", "--console-log-level=warn", "--summary-interval=0",
                 "--download-result=hide", "-q", scenario["input"]]
        return {"tessera": tessera + ["-j", str(PARALLEL)], "aria2c": aria2}
    if name == "p5":
        tessera += ["-j", str(P5_JOBS)]
    tessera += ["-N", str(PARALLEL)]
    if name in ("p3big", "p6"):
        return {"tessera": tessera, "curl": segment_curl(scenario, out)}
    if name in ("p3", "p4"):
        # Native downloader (no ffmpeg), 16 fragments at once; each selected format written on
        # its own (no merge), raw fragments concatenated (--fixup never, no post-processing).
        ytdlp = [binaries["yt-dlp"], "--ignore-config", "--no-cache-dir", "--proxy", "", "--no-progress",
                 "--quiet", "--no-warnings", "--downloader", "native", "-N", str(PARALLEL),
                 "--no-part", "--fixup", "never", "--no-mtime",
                 "-o", os.path.join(out, "%(format_id)s.%(ext)s")]
        if name == "p3":
            ytdlp += ["-f", ",".join(scenario["formats"])]
        ytdlp.append(scenario["input"])
        return {"tessera": tessera, "yt-dlp": ytdlp}
    # 8 files at once x 2 connections each (one per mirror) = 16 connections, like -j 8 -N 16.
    # --min-split-size=4M (the piece length): aria2c's default 20M would keep each 32 MiB file on
    # one connection. Piece hashes are checked while downloading, the whole-file hash at the end.
    aria2 = ["aria2c", "--no-conf", "-d", out, "-j", str(P5_JOBS), "-x", "2", "-s", "2",
             "--min-split-size=%dM" % (P5_PIECE // MIB), "--check-integrity=true", "--follow-metalink=mem",
             "--all-proxy=", "--file-allocation=none", "--console-log-level=warn", "--summary-interval=0",
             "--download-result=hide", "-q", scenario["input"]]
    return {"tessera": tessera, "aria2c": aria2}


# Runs one tool and reports its wall time and wait4() usage. A separate small process does the
# fork and wait4: a child's ru_maxrss includes the memory of the image it had before exec(), so
# forking from this (large) script would report our RSS for any tool smaller than us; the small
# launcher puts that floor at a few MiB, below every tool measured here.
LAUNCHER = """
import os, sys, time
argv = sys.argv[1:]
start = time.perf_counter()
pid = os.fork()
if pid == 0:
    try:
        os.dup2(os.open(os.devnull, os.O_WRONLY), 1)
        os.execvp(argv[0], argv)
    finally:
        os._exit(127)
_, status, usage = os.wait4(pid, 0)
wall = time.perf_counter() - start
os.write(1, ("%d %r %r %d" % (os.waitstatus_to_exitcode(status), wall,
                               usage.ru_utime + usage.ru_stime, usage.ru_maxrss)).encode())
"""


def run_child(argv, env, stderr_path):
    """Returns (exit code, wall s, CPU s, peak RSS MiB) of `argv`."""
    with open(stderr_path, "wb") as stderr:
        launcher = subprocess.Popen([sys.executable, "-I", "-S", "-c", LAUNCHER] + argv, env=env,
                                    stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=stderr,
                                    start_new_session=True)
        try:
            output, _ = launcher.communicate()
        except BaseException:
            os.killpg(launcher.pid, signal.SIGKILL)
            launcher.wait()
            raise
    fields = output.decode().split()
    if launcher.returncode != 0 or len(fields) != 4:
        return 127, 0.0, 0.0, 0.0
    code, wall, cpu, rss_kib = int(fields[0]), float(fields[1]), float(fields[2]), int(fields[3])
    return code, wall, cpu, rss_kib / 1024


def same_bytes(first, second):
    """Whether two files hold the same bytes (read in 4 MiB blocks)."""
    with open(first, "rb") as a, open(second, "rb") as b:
        while True:
            block = a.read(4 * MIB)
            if block != b.read(4 * MIB):
                return False
            if not block:
                return True


def verify_plain(scenario, out):
    """Sizes of all files, and the content of samples: P1 every 100th file's first and last MiB,
    P2 the first and last MiB. The CLI scenarios are checked more closely: P1cli as P1 and no other
    files in the output (no leftover partial files), P2cli the whole file byte for byte."""
    for name, size in scenario["sizes"].items():
        path = os.path.join(out, name)
        try:
            actual = os.path.getsize(path)
        except OSError:
            return "missing output %s" % name
        if actual != size:
            return "%s has %d bytes, expected %d" % (name, actual, size)
    names = list(scenario["sizes"])
    samples = names if scenario["name"] == "p2" else names[:: max(1, len(names) // 20)]
    for name in samples:
        source, copy = os.path.join(scenario["source"], name), os.path.join(out, name)
        size = scenario["sizes"][name]
        for offset in sorted({0, max(0, size - MIB)}):
            with open(source, "rb") as a, open(copy, "rb") as b:
                a.seek(offset)
                b.seek(offset)
                if a.read(MIB) != b.read(MIB):
                    return "%s differs from the source near byte %d" % (name, offset)
    if scenario["name"] == "p2cli" and not same_bytes(os.path.join(scenario["source"], "big.bin"),
                                                      os.path.join(out, "big.bin")):
        return "big.bin differs from the source"
    if scenario["name"] in ("p1cli", "p2cli"):
        extra = sorted(set(output_files(out)) - set(scenario["sizes"]))
        if extra:
            return "unexpected files in the output: %s" % extra[:10]
    return None


def verify_segment_files(scenario, out):
    """curl's copies of the segment URLs: exactly the served paths, and per track the concatenation
    of init + segments in order with the track's sha-256."""
    found = output_files(out)
    expected = [path for track in scenario["segment_tracks"] for path in track["paths"]]
    missing = [path for path in expected if path not in found]
    extra = sorted(set(found) - set(expected))
    if missing or extra:
        return "segment files: %d missing (%s), %d unexpected (%s)" % (
            len(missing), missing[:5], len(extra), extra[:5])
    for track in scenario["segment_tracks"]:
        digest = hashlib.sha256()
        for path in track["paths"]:
            with open(found[path], "rb") as file:
                digest.update(file.read())
        if digest.hexdigest() != track["digest"]:
            return "the %s segments differ from the served ones" % track["kind"]
    return None


def output_files(out):
    found = {}
    for parent, _, names in os.walk(out):
        for name in names:
            path = os.path.join(parent, name)
            found[os.path.relpath(path, out)] = path
    return found


def verify(scenario, out, tool=None):
    """None when the outputs are right, else what is wrong. P3/P4 (and P3big, P6, kill with
    `tessera get`): the files, whatever their names, must be exactly the expected contents (sha-256
    of init + segments, in order) and nothing else; curl in P3big/P6: the segment files; P5: the
    document's file names with their sha-256."""
    if scenario["name"] in PLAIN_SCENARIOS:
        return verify_plain(scenario, out)
    if scenario["name"] in RESOLVE_SCENARIOS:
        return None  # nothing is written; the exit status says whether it resolved
    if tool in scenario.get("segment_tools", ()):
        return verify_segment_files(scenario, out)
    found = output_files(out)
    if "files" in scenario:
        for name, (size, digest) in scenario["files"].items():
            if name not in found:
                return "missing output %s (have %s)" % (name, sorted(found)[:10])
            if os.path.getsize(found[name]) != size:
                return "%s has %d bytes, expected %d" % (name, os.path.getsize(found[name]), size)
            if sha256_file(found[name]) != digest:
                return "%s: sha-256 differs from the document's" % name
        extra = sorted(set(found) - set(scenario["files"]))
        return "unexpected files in the output: %s" % extra if extra else None
    wanted = dict(scenario["contents"])
    extra = []
    for relative, path in sorted(found.items()):
        size = os.path.getsize(path)
        digest = sha256_file(path) if any(size == s for s, _ in wanted.values()) else None
        if digest in wanted:
            del wanted[digest]
        else:
            extra.append("%s (%d bytes)" % (relative, size))
    if wanted or extra:
        return "outputs %s: missing %s; unexpected %s" % (
            sorted(found), ["%s, %d bytes" % (label, size) for size, label in wanted.values()] or "nothing",
            extra or "nothing")
    return None


def clear(directory):
    shutil.rmtree(directory, ignore_errors=True)
    os.makedirs(directory)


def bench(scenario, tools, runs, warmup, tmp, env, access_log=None):
    """Runs every tool `runs` times (after `warmup` untimed rounds), interleaved, checking the
    outputs of every run; with an access log, also counts the requests of every run."""
    out = os.path.join(tmp, "out")
    state = os.path.join(tmp, "state")
    stderr_path = os.path.join(tmp, "tool-stderr.txt")
    results = {tool: [] for tool in tools}
    names = list(tools)
    for round_number in range(1 - warmup, runs + 1):
        # Every tool takes every place in the order in turn, so drifts in the machine's state
        # (page allocation, host memory reclaim) are shared rather than always hitting one tool.
        shift = (round_number - 1) % len(names)
        for tool in names[shift:] + names[:shift]:
            argv = tools[tool]
            clear(out)
            clear(state)
            if access_log:
                access_log.read()  # whatever came before this run
            code, wall, cpu, rss = run_child(argv, env, stderr_path)
            counts = count_requests(scenario, access_log.read()) if access_log else None
            with open(stderr_path, errors="replace") as file:
                stderr = file.read().strip()
            if code != 0:
                raise BenchError("%s %s run %d exited with %d: %s\n  command: %s"
                                 % (scenario["name"], tool, round_number, code, stderr[-2000:], " ".join(argv)))
            problem = verify(scenario, out, tool)
            if problem:
                raise BenchError("%s %s run %d: %s\n  command: %s"
                                 % (scenario["name"], tool, round_number, problem, " ".join(argv)))
            if round_number >= 1:
                results[tool].append({"wall_s": wall, "cpu_s": cpu, "max_rss_mib": rss})
                if counts:
                    results[tool][-1]["requests"] = counts
            log("  %s %-9s %-8s wall %7.3f s  cpu %7.3f s  rss %6.1f MiB%s"
                % (scenario["name"], "round %d/%d" % (round_number, runs) if round_number >= 1 else "warm-up",
                   tool, wall, cpu, rss, "  " + requests_text(counts) if counts else ""))
    clear(out)
    clear(state)
    return results


# MARK: - Crash test

def kill_delays(rng, kills):
    """When to kill each of `kills` runs, in seconds after its start: uniform in [KILL_DELAY_MIN,
    KILL_DELAY_MAX], scaled down together when they add up to more than KILL_BUDGET of the time the
    whole file takes at KILL_RATE, so that the download cannot be over before the last kill."""
    delays = [rng.uniform(KILL_DELAY_MIN, KILL_DELAY_MAX) for _ in range(kills)]
    budget = KILL_BUDGET * KILL_SIZE / KILL_RATE_BYTES
    scale = min(1.0, budget / sum(delays)) if delays else 1.0
    return [delay * scale for delay in delays]


def kill_group(process):
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except ProcessLookupError:  # it has just ended and been reaped
        pass


def run_for(argv, env, seconds, stderr):
    """Runs `argv` in a session of its own and SIGKILLs that process group after `seconds` (a timer
    thread, so the moment is exact). Returns (exit code, or None when the kill ended it; wall s)."""
    start = time.perf_counter()
    process = subprocess.Popen(argv, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                               stderr=stderr, start_new_session=True)
    timer = threading.Timer(seconds, kill_group, (process,))
    timer.start()
    try:
        process.wait()
    except BaseException:
        kill_group(process)
        process.wait()
        raise
    finally:
        timer.cancel()
    wall = time.perf_counter() - start
    return (None if process.returncode == -signal.SIGKILL else process.returncode), wall


def identical_output(scenario, out):
    """Whether one of the output files holds exactly the served bytes."""
    (digest, (size, _)), = scenario["contents"].items()
    return any(os.path.getsize(path) == size and sha256_file(path) == digest
               for path in output_files(out).values())


def kill_round(scenario, tool, argv, delays, tmp, env, access_log):
    """One tool through the crash test: started, SIGKILLed after each delay and started again on
    the same output and state directories, then run to completion. Returns the round's record:
    kills that landed, the run the download had ended before (if it did), whether the final file
    is identical, what went wrong, the origin's bytes (nginx's $bytes_sent over the payload URIs,
    all runs) and the wall time of all runs together."""
    out, state = os.path.join(tmp, "out"), os.path.join(tmp, "state")
    stderr_path = os.path.join(tmp, "tool-stderr.txt")
    clear(out)
    clear(state)
    access_log.read()
    walls, kills, finished_before, problem, final_wall = [], 0, None, None, None
    with open(stderr_path, "wb") as stderr:
        for number, delay in enumerate(delays, 1):
            code, wall = run_for(argv, env, delay, stderr)
            walls.append(wall)
            if code is None:
                kills += 1
                continue
            if code == 0:
                finished_before = number
            else:
                problem = "run %d exited with %d before its kill" % (number, code)
            break
        else:
            code, final_wall = run_for(argv, env, KILL_FINAL_TIMEOUT, stderr)
            walls.append(final_wall)
            if code is None:
                problem = "the final run did not end within %d s" % KILL_FINAL_TIMEOUT
            elif code != 0:
                problem = "the final run exited with %d" % code
    counts = count_requests(scenario, access_log.read())
    if problem:
        with open(stderr_path, errors="replace") as file:
            problem += ": " + (file.read().strip()[-500:] or "no message")
    else:
        problem = verify(scenario, out, tool)
    return {"kills": kills, "finished_before_kill": finished_before, "identical": identical_output(scenario, out),
            "problem": problem, "origin_bytes": counts["origin_bytes"], "origin_ratio": counts["origin_ratio"],
            "requests": counts, "wall_s": sum(walls), "final_wall_s": final_wall, "runs": len(walls),
            "delays_s": delays}


def kill_bench(scenario, tools, rounds, seed, kills, tmp, env, access_log):
    """The crash test, `rounds` times per tool, interleaved like bench(); every tool of a round gets
    the same kill moments (drawn from a random.Random(seed))."""
    rng = random.Random(seed)
    names = list(tools)
    results = {tool: [] for tool in names}
    for round_number in range(1, rounds + 1):
        delays = kill_delays(rng, kills)
        log("  kill round %d/%d: kills at %s s" % (round_number, rounds, ", ".join("%.2f" % d for d in delays)))
        shift = (round_number - 1) % len(names)
        for tool in names[shift:] + names[:shift]:
            record = kill_round(scenario, tool, tools[tool], delays, tmp, env, access_log)
            results[tool].append(record)
            log("  kill %-9s %-14s %2d kills%s, identical %s, origin %.3fx, %d requests, wall %.2f s%s"
                % ("round %d/%d" % (round_number, rounds), tool, record["kills"],
                   " (done before kill %d)" % record["finished_before_kill"] if record["finished_before_kill"] else "",
                   "yes" if record["identical"] else "NO", record["origin_ratio"], record["requests"]["requests"],
                   record["wall_s"], "; " + record["problem"] if record["problem"] else ""))
    for directory in ("out", "state"):
        clear(os.path.join(tmp, directory))
    return results


# MARK: - Report

COUNT_KEYS = ("get", "head", "connections", "requests_per_file", "gets_per_connection", "origin_ratio")


def summarize(scenario, results):
    """Per tool the medians of the runs (and the worst run of the request counts, "_max")."""
    summary = {}
    for tool, runs in results.items():
        row = {key: statistics.median(run[key] for run in runs) for key in ("wall_s", "cpu_s", "max_rss_mib")}
        row["throughput_mib_s"] = scenario["bytes"] / MIB / row["wall_s"]
        row["max_rss_mb"] = row["max_rss_mib"] * MIB / 1e6
        if runs and "requests" in runs[0]:
            for key in COUNT_KEYS:
                row[key] = statistics.median(run["requests"][key] for run in runs)
                row[key + "_max"] = max(run["requests"][key] for run in runs)
        summary[tool] = row
    reference = summary.get(SCENARIOS[scenario["name"]]["reference"])
    for row in summary.values():
        row["wall_ratio_to_reference"] = row["wall_s"] / reference["wall_s"] if reference else None
    return summary


def summarize_kill(results):
    """Per tool over the rounds: medians of origin bytes / size and wall, the fewest kills that
    landed, the share of rounds with an identical file, and what went wrong."""
    summary = {}
    for tool, rounds in results.items():
        finals = [record["final_wall_s"] for record in rounds if record["final_wall_s"] is not None]
        summary[tool] = {
            "kills": min(record["kills"] for record in rounds),
            "finished_before_kill": [record["finished_before_kill"] for record in rounds
                                     if record["finished_before_kill"]],
            "identical_percent": 100.0 * sum(record["identical"] for record in rounds) / len(rounds),
            "origin_ratio": statistics.median(record["origin_ratio"] for record in rounds),
            "origin_bytes": statistics.median(record["origin_bytes"] for record in rounds),
            "extra_mib_per_kill": statistics.median([(record["origin_bytes"] - KILL_SIZE) / MIB / record["kills"]
                                                     for record in rounds if record["kills"]] or [None]),
            "requests": statistics.median(record["requests"]["requests"] for record in rounds),
            "head": statistics.median(record["requests"]["head"] for record in rounds),
            "wall_s": statistics.median(record["wall_s"] for record in rounds),
            "final_wall_s": statistics.median(finals) if finals else None,
            "problems": sorted({record["problem"] for record in rounds if record["problem"]}),
        }
    return summary


def check_targets(name, summary):
    """Each target of the scenario, PASS or MISS (n/a when a tool is missing), with the measured
    value and, for targets with a goal, whether the goal is met."""
    checks = []
    for target in SCENARIOS[name]["targets"]:
        label, tool, reference, metric, op, bound = target[:6]
        goal = target[6] if len(target) > 6 else None
        key = METRICS[metric][0]
        if tool not in summary or (reference is not None and reference not in summary):
            checks.append({"target": label, "measured": None, "status": "n/a"})
            continue
        measured = summary[tool][key] / summary[reference][key] if reference is not None else summary[tool][key]
        check = {"target": label, "metric": metric, "relative_to": reference, "measured": measured,
                 "status": "PASS" if compare(measured, op, bound) else "MISS"}
        if goal is not None:
            check.update(goal=goal, goal_met=compare(measured, op, goal))
        checks.append(check)
    return checks


def compare(value, op, bound):
    return {"<=": value <= bound, ">=": value >= bound, "<": value < bound,
            "==": abs(value - bound) < 1e-9}[op]


def measured_text(check):
    """The measured value of a check as printed: a ratio (or a percentage when the target is one),
    else the metric's own format."""
    if check["measured"] is None:
        return "n/a"
    if check["relative_to"] is not None:
        return "%.0f%%" % (check["measured"] * 100) if "%" in check["target"] else "%.2fx" % check["measured"]
    return METRICS[check["metric"]][1] % check["measured"]


def target_lines(checks):
    lines = []
    for check in checks:
        goal = ""
        if "goal" in check:
            bound = "%.2fx" % check["goal"] if check["relative_to"] else "%g" % check["goal"]
            goal = "; goal %s: %s" % (bound, "met" if check["goal_met"] else "not met")
        lines.append("- %s: **%s** (measured %s%s)" % (check["target"], check["status"], measured_text(check), goal))
    return lines


def markdown(name, summary, checks):
    spec = SCENARIOS[name]
    counted = spec.get("counted")
    header = ["tool", "wall median (s)", "CPU median (s)", "peak RSS median (MiB)",
              "wall ratio to %s" % spec["reference"], "throughput (MiB/s)"]
    if counted:
        header += ["GET", "HEAD", "connections", "requests per file", "origin bytes / payload"]
    lines = ["### %s, %d in flight" % (spec["title"], PARALLEL), "",
             "| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    for tool, row in summary.items():
        ratio = row["wall_ratio_to_reference"]
        cells = [tool, "%.3f" % row["wall_s"], "%.3f" % row["cpu_s"], "%.1f" % row["max_rss_mib"],
                 "%.2f" % ratio if ratio is not None else "n/a", "%.0f" % row["throughput_mib_s"]]
        if counted:
            cells += ["%d" % row["get"], "%d" % row["head"], "%d" % row["connections"],
                      "%.3f" % row["requests_per_file"], "%.3f" % row["origin_ratio"]]
        lines.append("| " + " | ".join(cells) + " |")
    lines.append("")
    if counted:
        lines += ["Requests as nginx logged them (medians over the runs); requests per file: requests for "
                  "the payload URIs (files or segments, not manifests) / their number.", ""]
    if spec.get("rss_line"):
        lines += ["**Peak RSS** (median): " + ", ".join("%s %.1f MiB (%.0f MB)" % (tool, row["max_rss_mib"],
                                                                                row["max_rss_mb"])
                                                      for tool, row in summary.items()), ""]
    lines += target_lines(checks)
    return "\n".join(lines) + "\n"


def kill_markdown(summary, checks, kills, seed, rounds):
    header = ["tool", "kills", "final identical", "origin bytes / size", "extra MiB per kill", "requests",
              "HEAD", "total wall (s)", "final run wall (s)"]
    lines = ["### %s: %d kills at random moments (seed %d), median of %d round%s"
             % (SCENARIOS["kill"]["title"], kills, seed, rounds, "" if rounds == 1 else "s"), "",
             "| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    notes = []
    for tool, row in summary.items():
        identical = "yes" if row["identical_percent"] == 100 else (
            "no" if row["identical_percent"] == 0 else "%.0f%% of rounds" % row["identical_percent"])
        cells = [tool, "%d" % row["kills"], identical, "%.3f" % row["origin_ratio"],
                 "%.1f" % row["extra_mib_per_kill"] if row["extra_mib_per_kill"] is not None else "n/a",
                 "%d" % row["requests"],
                 "%d" % row["head"], "%.2f" % row["wall_s"],
                 "%.2f" % row["final_wall_s"] if row["final_wall_s"] is not None else "n/a"]
        lines.append("| " + " | ".join(cells) + " |")
        if row["finished_before_kill"]:
            notes.append("- %s: the download was over before kill %s (fewer kills landed)"
                         % (tool, ", ".join(str(k) for k in row["finished_before_kill"])))
        notes += ["- %s: %s" % (tool, problem) for problem in row["problems"]]
    lines.append("")
    lines += ["Origin bytes: the sum of nginx's $bytes_sent for the file's URI (the segments' for "
              "tessera (DASH)) over all runs, killed ones included, / %d MiB; extra MiB per kill: (origin "
              "bytes - size) / kills. Bytes still in the sockets' buffers when a client is killed count as "
              "sent." % (KILL_SIZE // MIB), ""]
    lines += notes + ([""] if notes else [])
    lines += target_lines(checks)
    return "\n".join(lines) + "\n"


def summary_table(report):
    """Every target of the run in one table: scenario, target, measured, PASS or MISS."""
    lines = ["### Every target", "", "| scenario | target | measured | result |", "|---|---|---|---|"]
    for name, entry in report["scenarios"].items():
        for check in entry["targets"]:
            status = check["status"]
            if "goal" in check:
                status += " (goal %s)" % ("met" if check["goal_met"] else "not met")
            lines.append("| %s | %s | %s | %s |" % (name, check["target"], measured_text(check), status))
    return "\n".join(lines) + "\n"


def tool_versions(binaries):
    versions = {"tessera_binary": binaries.get("tessera"), "tessera_cli_binary": binaries.get("tessera_cli")}
    probes = [("curl", ["curl", "--version"]), ("aria2c", ["aria2c", "--version"]), ("nginx", ["nginx", "-v"])]
    if binaries.get("tessera_cli"):
        probes.append(("tessera_cli", [binaries["tessera_cli"], "--version"]))
    if binaries.get("yt-dlp"):
        probes.append(("yt-dlp", [binaries["yt-dlp"], "--version"]))
    for tool, argv in probes:
        try:
            done = subprocess.run(argv, capture_output=True, text=True)
            versions[tool] = ((done.stdout or done.stderr).splitlines() or [""])[0]
        except OSError:
            versions[tool] = None
    return versions


# MARK: - Main

def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=5, help="runs per tool and scenario (default 5)")
    parser.add_argument("--warmup", type=int, default=1, help="untimed rounds before the runs (default 1)")
    parser.add_argument("--scenarios", default=",".join(DEFAULT_SCENARIOS),
                        help="comma-separated, of %s, or all (default %s; opt-in: %s)"
                             % (",".join(ALL_SCENARIOS), ",".join(DEFAULT_SCENARIOS), ",".join(OPT_IN_SCENARIOS)))
    parser.add_argument("--kills", type=int, default=10,
                        help="kill: SIGKILLs per tool before the final run (default 10)")
    parser.add_argument("--seed", type=int, default=1, help="kill: seed of the random kill moments (default 1)")
    parser.add_argument("--keep", action="store_true", help="keep the temporary directory")
    parser.add_argument("--tessera", default=os.path.join(REPO, ".build/release/tessera-engine-bench"),
                        help="path of the tessera-engine-bench binary (p1, p2)")
    parser.add_argument("--tessera-cli", default=os.path.join(REPO, ".build/release/tessera"),
                        help="path of the tessera CLI (p3, p4, p5 and the scenarios after them)")
    parser.add_argument("--baseline-cli", dest="baseline_cli", default=None,
                        help="an earlier build of the tessera command line, run with the same command lines in "
                             "the same rounds (rows marked [baseline]): before and after in one run")
    parser.add_argument("--yt-dlp", dest="yt_dlp", default=None,
                        help="a yt-dlp to use instead of the one in the conformance virtualenv")
    parser.add_argument("--engine-threads", type=int, default=None,
                        help="engine threads of tessera-engine-bench in p1 and p2 (default: the library's, one; "
                             "`tessera` runs two on two cores or more)")
    parser.add_argument("--nginx-workers", type=int, default=1, help="nginx worker processes (default 1)")
    parser.add_argument("--output", default=os.path.join(HERE, "results", "latest.json"),
                        help="where the JSON results go")
    args = parser.parse_args()

    scenarios = [s.strip().lower() for s in args.scenarios.split(",") if s.strip()]
    scenarios = [n for s in scenarios for n in (ALL_SCENARIOS if s == "all" else (s,))]
    if not scenarios or any(s not in SCENARIOS for s in scenarios):
        parser.error("--scenarios takes a comma-separated list of %s, or all" % ",".join(ALL_SCENARIOS))
    scenarios = list(dict.fromkeys(scenarios))
    if args.runs < 1 or args.warmup < 0:
        parser.error("--runs must be at least 1 and --warmup at least 0")
    if args.kills < 0:
        parser.error("--kills must be at least 0")
    binaries = {}
    if {"p1", "p2"} & set(scenarios):
        binaries["tessera"] = os.path.abspath(args.tessera)
        binaries["engine_threads"] = args.engine_threads
        if not os.access(binaries["tessera"], os.X_OK):
            raise BenchError("no tessera-engine-bench at %s: build it with "
                             "`swift build -c release --product tessera-engine-bench`" % binaries["tessera"])
    if CLI_SCENARIOS & set(scenarios):
        binaries["tessera_cli"] = os.path.abspath(args.tessera_cli)
        if not os.access(binaries["tessera_cli"], os.X_OK):
            raise BenchError("no tessera CLI at %s: build it with "
                             "`swift build -c release --product tessera`" % binaries["tessera_cli"])
    if {"p3", "p4", "p7"} & set(scenarios):
        binaries["yt-dlp"] = os.path.abspath(args.yt_dlp) if args.yt_dlp else ensure_yt_dlp()
        if not os.access(binaries["yt-dlp"], os.X_OK):
            raise BenchError("no yt-dlp at %s" % binaries["yt-dlp"])
    missing = set()
    for tool in ("curl", "aria2c"):
        if not shutil.which(tool):
            log("warning: %s not found, skipped (apt-get install %s)" % (tool, "aria2" if tool == "aria2c" else tool))
            missing.add(tool)

    env = {k: v for k, v in os.environ.items() if k.lower() not in PROXY_VARIABLES}
    shm = "/dev/shm" if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK) else None
    if shm is None:
        log("warning: /dev/shm is not writable; using the default temporary directory (results will be noisier)")
    tmp = tempfile.mkdtemp(prefix="tessera-bench-", dir=shm)
    os.chmod(tmp, 0o755)  # nginx workers may run as another user
    root = os.path.join(tmp, "www")
    os.makedirs(root, mode=0o755)
    os.chmod(root, 0o755)
    # yt-dlp and the tessera CLI get a home of their own: no user configuration, no shared state.
    home = os.path.join(tmp, "home")
    os.makedirs(home)
    tool_env = dict(env, HOME=home, XDG_CONFIG_HOME=os.path.join(home, "config"),
                    XDG_DATA_HOME=os.path.join(home, "data"), XDG_CACHE_HOME=os.path.join(home, "cache"))
    nginx = None
    report = {"date": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "runs": args.runs, "warmup_rounds": args.warmup,
              "parallel": PARALLEL,
              "machine": {"cpus": os.cpu_count(), "platform": platform.platform()},
              "versions": tool_versions(binaries), "scenarios": {}}
    tables = []
    try:
        nginx, port = start_nginx(tmp, root, args.nginx_workers)
        log("nginx on 127.0.0.1:%d, files in %s" % (port, tmp))
        access_log = AccessLog(os.path.join(tmp, ACCESS_LOG))
        baseline_merges = bool(args.baseline_cli) and "--no-merge" in subprocess.run(
            [os.path.abspath(args.baseline_cli), "get", "--help"], capture_output=True, text=True).stdout
        for name in scenarios:
            started = time.monotonic()
            log("%s: generating files" % name)
            scenario = prepare(name, tmp, root, port)
            every = commands(scenario, os.path.join(tmp, "out"), os.path.join(tmp, "state"), binaries)
            tools = {tool: every[tool] for tool in SCENARIOS[name]["tools"] if tool not in missing}
            if args.baseline_cli:
                # The same command lines with an earlier build, in the same rounds: before and
                # after, measured side by side.
                for tool, argv in list(tools.items()):
                    if argv and argv[0] == binaries.get("tessera_cli"):
                        # (A build before merging has no --no-merge, and merges nothing.)
                        tools[tool + " [baseline]"] = ([os.path.abspath(args.baseline_cli)]
                                                       + [a for a in argv[1:] if a != "--no-merge" or baseline_merges])
            entry = {"title": SCENARIOS[name]["title"], "bytes": scenario["bytes"],
                     "reference": SCENARIOS[name]["reference"], "input": scenario.get("input"), "commands": tools}
            if name == "kill":
                results = kill_bench(scenario, tools, args.runs, args.seed, args.kills, tmp, tool_env, access_log)
                summary = summarize_kill(results)
                checks = check_targets(name, summary)
                entry.update(seed=args.seed, kills=args.kills, url=scenario["url"])
                tables.append(kill_markdown(summary, checks, args.kills, args.seed, args.runs))
            else:
                results = bench(scenario, tools, args.runs, args.warmup, tmp,
                                env if name in ("p1", "p2") else tool_env,
                                access_log if SCENARIOS[name].get("counted") else None)
                summary = summarize(scenario, results)
                checks = check_targets(name, summary)
                tables.append(markdown(name, summary, checks))
            entry.update(runs=results, median=summary, targets=checks, elapsed_s=time.monotonic() - started)
            report["scenarios"][name] = entry
            log("%s: done in %.0f s" % (name, entry["elapsed_s"]))
            if not args.keep:
                shutil.rmtree(scenario["source"], ignore_errors=True)
    finally:
        if nginx is not None:
            stop_nginx(nginx)
        if args.keep:
            log("kept %s" % tmp)
        else:
            shutil.rmtree(tmp, ignore_errors=True)

    os.makedirs(os.path.dirname(args.output), exist_ok=True)
    with open(args.output, "w") as file:
        json.dump(report, file, indent=2)
        file.write("\n")
    print("\n".join(tables))
    print(summary_table(report))
    print("Results written to %s" % os.path.relpath(args.output))


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    try:
        main()
    except BenchError as error:
        log("error: %s" % error)
        sys.exit(1)
    except KeyboardInterrupt:
        log("interrupted")
        sys.exit(130)

#!/usr/bin/env python3
"""Benchmarks of Tessera against the tools that do the same job, served by a local nginx.

Scenarios (everything on /dev/shm, served over 127.0.0.1, 16 transfers in flight):
  p1  2,000 files x 64 KiB   engine: tessera-engine-bench vs curl --parallel vs aria2c
  p2  one 1 GiB file          engine: single-stream throughput, same tools
  p3  DASH, 600 x 128 KiB video + 600 x 16 KiB audio      `tessera get` vs yt-dlp (native)
  p4  HLS, master + one variant of 600 x 128 KiB segments `tessera get` vs yt-dlp (native)
  p5  Metalink 4, 8 files x 32 MiB, 2 mirrors each        `tessera get` vs aria2c

After --warmup untimed rounds, each tool runs --runs times per scenario, interleaved within each
round (the order rotates from round to round). Wall time is measured around the child; CPU
(user+sys) and peak RSS come from wait4(). Outputs are checked after every run. Results are
printed as Markdown tables and written to Benchmarks/results/latest.json. Python 3 stdlib only.
"""

import argparse
import hashlib
import importlib.util
import json
import os
import platform
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
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
PROXY_VARIABLES = ("http_proxy", "https_proxy", "all_proxy", "ftp_proxy", "no_proxy")
ALL_SCENARIOS = ("p1", "p2", "p3", "p4", "p5")

# Per scenario: the tools in table order, the reference of the ratio column, and the targets
# (label, tool, reference, metric, comparison, bound).
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
}
CLI_SCENARIOS = {"p3", "p4", "p5"}


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
    for key, value in {"TMP": tmp, "ROOT": root, "PORT": str(port), "WORKERS": str(workers),
                       "TEMP_PATHS": "\n".join(temp_paths)}.items():
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


def prepare(name, tmp, root, port):
    """Creates the served files of a scenario. Returns a dict with the source directory, the inputs,
    the expected outputs and the bytes a run moves."""
    base = "http://127.0.0.1:%d/%s" % (port, name)
    directory = os.path.join(root, name)
    os.makedirs(directory, exist_ok=True)
    scenario = {"name": name, "source": directory}
    if name in ("p1", "p2"):
        if name == "p1":
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
                        sizes=sizes, bytes=sum(sizes.values()))
    elif name == "p3":
        tracks = {}
        for track, init_size, segment_size in (("video", P3_VIDEO_INIT, P3_VIDEO_SEGMENT),
                                                ("audio", P3_AUDIO_INIT, P3_AUDIO_SEGMENT)):
            digest, total = hashlib.sha256(), 0
            parts = [("%s/init.mp4" % track, random_bytes(init_size))]
            parts += [("%s/seg-%d.m4s" % (track, number), random_bytes(segment_size))
                      for number in range(1, P3_SEGMENTS + 1)]
            for path, data in parts:
                write_file(os.path.join(directory, path), data)
                digest.update(data)
                total += len(data)
            tracks[track] = (total, digest.hexdigest())
        seconds = P3_SEGMENTS * 2
        manifest = """<?xml version="1.0" encoding="UTF-8"?>
<MPD xmlns="urn:mpeg:dash:schema:mpd:2011" profiles="urn:mpeg:dash:profile:isoff-live:2011"
     type="static" mediaPresentationDuration="PT%dS" minBufferTime="PT2S">
  <Period id="0">
    <AdaptationSet id="0" contentType="video" mimeType="video/mp4" segmentAlignment="true">
      <Representation id="v1" bandwidth="%d" codecs="avc1.64001f" width="1280" height="720" frameRate="25">
        <SegmentTemplate timescale="1000" duration="2000" startNumber="1"
                         initialization="video/init.mp4" media="video/seg-$Number$.m4s"/>
      </Representation>
    </AdaptationSet>
    <AdaptationSet id="1" contentType="audio" mimeType="audio/mp4" lang="en" segmentAlignment="true">
      <Representation id="a1" bandwidth="%d" codecs="mp4a.40.2" audioSamplingRate="48000">
        <SegmentTemplate timescale="48000" duration="96000" startNumber="1"
                         initialization="audio/init.mp4" media="audio/seg-$Number$.m4s"/>
      </Representation>
    </AdaptationSet>
  </Period>
</MPD>
""" % (seconds, P3_VIDEO_SEGMENT * 8 // 2, P3_AUDIO_SEGMENT * 8 // 2)
        write_file(os.path.join(directory, "stream.mpd"), manifest.encode())
        scenario.update(input="%s/stream.mpd" % base, formats=("v1", "a1"),
                        contents={digest: (size, "%s track" % track) for track, (size, digest) in tracks.items()},
                        bytes=sum(size for size, _ in tracks.values()))
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


def commands(scenario, out, state, binaries):
    """The command line of each tool for a scenario, writing into `out`."""
    name = scenario["name"]
    if name in ("p1", "p2"):
        with open(scenario["curl_config"], "w") as file:
            for url, file_name in zip(scenario["urls"], scenario["sizes"]):
                file.write('url = "%s"\noutput = "%s"\n' % (url, os.path.join(out, file_name)))
        curl = ["curl", "-q", "--parallel", "--parallel-max", str(PARALLEL), "-s", "-S", "--fail",
                "--noproxy", "*"]
        if name == "p1":
            curl += ["-K", scenario["curl_config"]]
        else:
            curl += ["-o", os.path.join(out, "big.bin"), scenario["urls"][0]]
        aria2 = ["aria2c", "--no-conf", "-j", str(PARALLEL), "-x1", "-s1", "-i", scenario["url_list"],
                 "-d", out, "--console-log-level=warn", "--summary-interval=0", "--file-allocation=none",
                 "--allow-overwrite=true", "--auto-file-renaming=false", "-q"]
        return {
            "tessera": [binaries["tessera"], "--input", scenario["url_list"], "--dir", out,
                        "--parallel", str(PARALLEL)],
            "curl": curl,
            "aria2c": aria2,
        }
    tessera = [binaries["tessera_cli"], "get", scenario["input"], "-o", out, "--state-dir", state,
               "--no-cache", "--proxy", "", "-q"]
    if name == "p5":
        tessera += ["-j", str(P5_JOBS)]
    tessera += ["-N", str(PARALLEL)]
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


def verify_plain(scenario, out):
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
    return None


def output_files(out):
    found = {}
    for parent, _, names in os.walk(out):
        for name in names:
            path = os.path.join(parent, name)
            found[os.path.relpath(path, out)] = path
    return found


def verify(scenario, out):
    """None when the outputs are right, else what is wrong. P3/P4: the files, whatever their
    names, must be exactly the expected contents (sha-256 of init + segments, in order) and
    nothing else; P5: the document's file names with their sha-256."""
    if scenario["name"] in ("p1", "p2"):
        return verify_plain(scenario, out)
    found = output_files(out)
    if scenario["name"] == "p5":
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


def bench(scenario, tools, runs, warmup, tmp, env):
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
            code, wall, cpu, rss = run_child(argv, env, stderr_path)
            with open(stderr_path, errors="replace") as file:
                stderr = file.read().strip()
            if code != 0:
                raise BenchError("%s %s run %d exited with %d: %s\n  command: %s"
                                 % (scenario["name"], tool, round_number, code, stderr[-2000:], " ".join(argv)))
            problem = verify(scenario, out)
            if problem:
                raise BenchError("%s %s run %d: %s\n  command: %s"
                                 % (scenario["name"], tool, round_number, problem, " ".join(argv)))
            if round_number >= 1:
                results[tool].append({"wall_s": wall, "cpu_s": cpu, "max_rss_mib": rss})
            log("  %s %-9s %-8s wall %7.3f s  cpu %7.3f s  rss %6.1f MiB"
                % (scenario["name"], "round %d/%d" % (round_number, runs) if round_number >= 1 else "warm-up",
                   tool, wall, cpu, rss))
    clear(out)
    clear(state)
    return results


# MARK: - Report

def summarize(scenario, results):
    summary = {}
    for tool, runs in results.items():
        row = {key: statistics.median(run[key] for run in runs) for key in ("wall_s", "cpu_s", "max_rss_mib")}
        row["throughput_mib_s"] = scenario["bytes"] / MIB / row["wall_s"]
        summary[tool] = row
    reference = summary.get(SCENARIOS[scenario["name"]]["reference"])
    for row in summary.values():
        row["wall_ratio_to_reference"] = row["wall_s"] / reference["wall_s"] if reference else None
    return summary


def check_targets(name, summary):
    checks = []
    for label, tool, reference, metric, op, bound in SCENARIOS[name]["targets"]:
        if tool not in summary or reference not in summary:
            checks.append({"target": label, "measured": None, "status": "n/a"})
            continue
        key = "wall_s" if metric == "wall" else "throughput_mib_s"
        measured = summary[tool][key] / summary[reference][key]
        passed = measured <= bound if op == "<=" else measured >= bound
        checks.append({"target": label, "measured": measured, "status": "PASS" if passed else "MISS"})
    return checks


def markdown(name, summary, checks):
    spec = SCENARIOS[name]
    header = ["tool", "wall median (s)", "CPU median (s)", "peak RSS median (MiB)",
              "wall ratio to %s" % spec["reference"], "throughput (MiB/s)"]
    lines = ["### %s, %d in flight" % (spec["title"], PARALLEL), "",
             "| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    for tool, row in summary.items():
        ratio = row["wall_ratio_to_reference"]
        cells = [tool, "%.3f" % row["wall_s"], "%.3f" % row["cpu_s"], "%.1f" % row["max_rss_mib"],
                 "%.2f" % ratio if ratio is not None else "n/a", "%.0f" % row["throughput_mib_s"]]
        lines.append("| " + " | ".join(cells) + " |")
    lines.append("")
    for check in checks:
        measured = "n/a" if check["measured"] is None else (
            "%.0f%%" % (check["measured"] * 100) if "%" in check["target"] else "%.2fx" % check["measured"])
        lines.append("- %s: **%s** (measured %s)" % (check["target"], check["status"], measured))
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
    parser.add_argument("--scenarios", default=",".join(ALL_SCENARIOS),
                        help="comma-separated, of p1,p2,p3,p4,p5 (default all)")
    parser.add_argument("--keep", action="store_true", help="keep the temporary directory")
    parser.add_argument("--tessera", default=os.path.join(REPO, ".build/release/tessera-engine-bench"),
                        help="path of the tessera-engine-bench binary (p1, p2)")
    parser.add_argument("--tessera-cli", default=os.path.join(REPO, ".build/release/tessera"),
                        help="path of the tessera CLI (p3, p4, p5)")
    parser.add_argument("--yt-dlp", dest="yt_dlp", default=None,
                        help="a yt-dlp to use instead of the one in the conformance virtualenv")
    parser.add_argument("--nginx-workers", type=int, default=1, help="nginx worker processes (default 1)")
    parser.add_argument("--output", default=os.path.join(HERE, "results", "latest.json"),
                        help="where the JSON results go")
    args = parser.parse_args()

    scenarios = [s.strip().lower() for s in args.scenarios.split(",") if s.strip()]
    if not scenarios or any(s not in SCENARIOS for s in scenarios):
        parser.error("--scenarios takes a comma-separated list of %s" % ",".join(ALL_SCENARIOS))
    scenarios = list(dict.fromkeys(scenarios))
    if args.runs < 1 or args.warmup < 0:
        parser.error("--runs must be at least 1 and --warmup at least 0")
    binaries = {}
    if {"p1", "p2"} & set(scenarios):
        binaries["tessera"] = os.path.abspath(args.tessera)
        if not os.access(binaries["tessera"], os.X_OK):
            raise BenchError("no tessera-engine-bench at %s: build it with "
                             "`swift build -c release --product tessera-engine-bench`" % binaries["tessera"])
    if CLI_SCENARIOS & set(scenarios):
        binaries["tessera_cli"] = os.path.abspath(args.tessera_cli)
        if not os.access(binaries["tessera_cli"], os.X_OK):
            raise BenchError("no tessera CLI at %s: build it with "
                             "`swift build -c release --product tessera`" % binaries["tessera_cli"])
    if {"p3", "p4"} & set(scenarios):
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
        for name in scenarios:
            log("%s: generating files" % name)
            scenario = prepare(name, tmp, root, port)
            every = commands(scenario, os.path.join(tmp, "out"), os.path.join(tmp, "state"), binaries)
            tools = {tool: every[tool] for tool in SCENARIOS[name]["tools"] if tool not in missing}
            results = bench(scenario, tools, args.runs, args.warmup, tmp,
                            env if name in ("p1", "p2") else tool_env)
            summary = summarize(scenario, results)
            checks = check_targets(name, summary)
            report["scenarios"][name] = {"title": SCENARIOS[name]["title"], "bytes": scenario["bytes"],
                                         "reference": SCENARIOS[name]["reference"],
                                         "input": scenario.get("input"),
                                         "commands": tools, "runs": results, "median": summary,
                                         "targets": checks}
            tables.append(markdown(name, summary, checks))
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

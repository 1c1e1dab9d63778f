#!/usr/bin/env python3
"""Live recording: tessera against streamlink on the same live origin, in one run.

The origin is `tessera-test-helper live-origin` (Tests/Helpers): real ffmpeg-made segments
published on the real clock with a sliding window, on 127.0.0.1. Both clients record the same
stream at the same time (each with its own User-Agent); the origin's log tells which segments
each asked for. Per client: segments recorded, duplicate requests, gaps (segments missing
between the first and the last), requests past the end, whether the file decodes (frames ffprobe
counts), CPU time. A last run measures tessera's CPU while it records one 8 Mbit/s stream.

  python3 Benchmarks/live/compare.py --tessera .build/release/tessera \
      --helper .build/debug/tessera-test-helper --streamlink .build/live-bench/venv/bin/streamlink
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time


def start_origin(helper, options):
    process = subprocess.Popen([helper, "live-origin"] + options, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    info = json.loads(process.stdout.readline())
    return process, info


def stop_origin(process):
    process.stdin.close()
    lines = process.stdout.read().strip().splitlines()
    process.wait()
    return json.loads(lines[-1])


def frames(path):
    if not path or not os.path.exists(path):
        return 0
    out = subprocess.run(["ffprobe", "-v", "error", "-select_streams", "v:0", "-count_frames", "-show_entries",
                          "stream=nb_read_frames", "-of", "csv=p=0", path], capture_output=True, text=True).stdout
    first = next((line for line in out.splitlines() if line.strip()), "0")
    try:
        return int(first.strip().strip(","))
    except ValueError:
        return 0


def run_client(command):
    """Starts a client; returns (process, start time)."""
    return subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True), time.monotonic()


def wait_client(process, started, timeout):
    try:
        _, status, usage = os.wait4(process.pid, 0) if timeout is None else wait_with_timeout(process, timeout)
    except ChildProcessError:
        status, usage = 0, None
    elapsed = time.monotonic() - started
    cpu = (usage.ru_utime + usage.ru_stime) if usage else float("nan")
    process.returncode = os.waitstatus_to_exitcode(status) if usage else process.returncode
    return elapsed, cpu


def wait_with_timeout(process, timeout):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        pid, status, usage = os.wait4(process.pid, os.WNOHANG)
        if pid:
            return pid, status, usage
        time.sleep(0.05)
    process.terminate()
    return os.wait4(process.pid, 0)


def analyse(requests, agent, total, track=0):
    asked = [r["index"] for r in requests if r["agent"].startswith(agent) and r["track"] == track]
    unique = sorted(set(asked))
    inside = [i for i in unique if i < total]
    gaps = 0
    if inside:
        gaps = len(set(range(inside[0], inside[-1] + 1)) - set(inside))
    return {"segments": len(inside), "duplicates": len(asked) - len(unique), "gaps": gaps,
            "pastEnd": len([i for i in asked if i >= total]), "first": inside[0] if inside else None,
            "last": inside[-1] if inside else None}


def scenario(name, args, origin_options, tessera_extra, streamlink_extra, dash=False, with_streamlink=True):
    work = tempfile.mkdtemp(prefix="tessera-live-bench-")
    origin, info = start_origin(args.helper, origin_options)
    url, total = info["url"], info["total"]
    tessera_out = os.path.join(work, "tessera")
    tessera = [args.tessera, "get", "--no-merge", "--json", "-d", tessera_out, "--state-dir", os.path.join(work, "state"),
               "--user-agent", "tessera-bench", "--proxy", "", "--no-config"] + tessera_extra + [url]
    streamlink_file = os.path.join(work, "streamlink.ts")
    streamlink = [args.streamlink, "--http-header", "User-Agent=streamlink-bench", "--hls-live-edge", "3", "--force",
                  "-o", streamlink_file] + streamlink_extra + [("dash://" if dash else "") + url, "best"]
    clients = [("tessera", tessera)] + ([("streamlink", streamlink)] if with_streamlink else [])
    running = [(label, *run_client(command)) for label, command in clients]
    results = {}
    for label, process, started in running:
        elapsed, cpu = wait_client(process, started, args.timeout)
        results[label] = {"seconds": round(elapsed, 1), "cpu": round(cpu, 2), "status": process.returncode}
    log = stop_origin(origin)
    tessera_files = []
    for root, _, names in os.walk(tessera_out):
        tessera_files += [os.path.join(root, n) for n in names if not root.endswith(".tessera/work") and ".tessera" not in root]
    video = next((f for f in tessera_files if f.endswith((".ts", ".mp4"))), None)
    results["tessera"].update(analyse(log["requests"], "tessera", total))
    results["tessera"]["frames"] = frames(video)
    if with_streamlink:
        results["streamlink"].update(analyse(log["requests"], "streamlink", total))
        results["streamlink"]["frames"] = frames(streamlink_file)
    results["_total"] = total
    shutil.rmtree(work, ignore_errors=True)
    return name, results


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tessera", required=True)
    parser.add_argument("--helper", required=True)
    parser.add_argument("--streamlink", required=True)
    parser.add_argument("--timeout", type=float, default=180)
    parser.add_argument("--segments", type=int, default=30)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--cpu-only", action="store_true", help="Only the 8 Mbit/s CPU run.")
    parser.add_argument("--only", help="Only the streams whose name has this text (and the CPU run).")
    args = parser.parse_args()
    n = str(args.segments)
    plan = [
        ("HLS, ends (#EXT-X-ENDLIST)", ["format=hls", "segments=" + n], [], False),
        ("HLS, AES-128 keys rotating every 5, discontinuity every 7", ["format=hls", "segments=" + n, "keys=5", "discontinuity=7"], [], False),
        ("HLS, video + audio rendition", ["format=hls", "segments=" + n, "audio=1"], [], False),
        ("DASH $Number$, turns static at the end", ["format=dash-number", "segments=" + n], [], True),
        ("DASH $Number$, announces its duration", ["format=dash-number", "segments=" + n, "dash-ending=duration"], [], True),
        ("DASH SegmentTimeline, turns static", ["format=dash-timeline", "segments=" + n], [], True),
        # streamlink starts a SegmentTimeline at its oldest segment: tessera from the start too.
        ("DASH SegmentTimeline, turns static (tessera --live-from-start)", ["format=dash-timeline", "segments=" + n], ["--live-from-start"], True),
    ]
    runs = []
    for name, origin_options, extra, dash in plan:
        if args.cpu_only or (args.only and args.only not in name):
            continue
        runs.append(scenario(name, args, origin_options, extra, [], dash=dash))
    cpu = scenario("CPU: one 8 Mbit/s HLS stream, 60 s (2 MB segments of 2 s)", args,
                   ["format=hls", "segments=36", "media=2000000", "segment-seconds=2"], [], [], with_streamlink=True)
    runs.append(cpu)
    if args.json:
        print(json.dumps(dict(runs), indent=2))
        return
    print("| stream | client | segments | duplicates | gaps | past the end | frames decoded | wall s | CPU s |")
    print("|---|---|---|---|---|---|---|---|---|")
    for name, results in runs:
        for client in ("tessera", "streamlink"):
            r = results.get(client)
            if not r:
                continue
            print(f"| {name} | {client} | {r['segments']} | {r['duplicates']} | {r['gaps']} | {r['pastEnd']} | {r['frames']} | {r['seconds']} | {r['cpu']} |")
    name, results = cpu
    t = results["tessera"]
    print(f"\ntessera CPU while recording the 8 Mbit/s stream: {t['cpu']} s over {t['seconds']} s = {100 * t['cpu'] / max(t['seconds'], 0.001):.2f} % of one core")


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Engine benchmark: Tessera's CurlEngine against curl and aria2c, served by a local nginx.

Scenarios (everything on /dev/shm, served over 127.0.0.1, 16 transfers in flight):
  p1  2,000 files x 64 KiB   (per-transfer overhead)
  p2  one 1 GiB file          (single-stream throughput)

After --warmup untimed rounds, each tool runs --runs times per scenario, interleaved within each
round (the order rotates from round to round). Wall time is measured around the child; CPU
(user+sys) and peak RSS come from wait4(). Outputs are checked after every run. Results are
printed as Markdown tables and written to Benchmarks/results/latest.json. Python 3 stdlib only.
"""

import argparse
import json
import os
import platform
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
MIB = 1 << 20
P1_COUNT, P1_SIZE = 2000, 64 * 1024
P2_SIZE = 1 << 30
PROXY_VARIABLES = ("http_proxy", "https_proxy", "all_proxy", "ftp_proxy", "no_proxy")
TARGETS = {
    "p1": [
        ("Tessera wall <= 1.2x curl", "tessera", "curl", "wall", "<=", 1.2),
        ("aria2c wall >= 3x Tessera", "aria2c", "tessera", "wall", ">=", 3.0),
    ],
    "p2": [("Tessera throughput >= 90% of curl", "tessera", "curl", "throughput", ">=", 0.9)],
}


class BenchError(Exception):
    pass


def log(message):
    print(message, file=sys.stderr, flush=True)


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

def prepare(scenario, tmp, root, port):
    """Creates the served files of a scenario; returns its URL list, expected outputs and bytes."""
    base = "http://127.0.0.1:%d" % port
    directory = os.path.join(root, scenario)
    os.makedirs(directory, exist_ok=True)
    if scenario == "p1":
        names = ["f%04d.bin" % i for i in range(P1_COUNT)]
        for name in names:
            with open(os.path.join(directory, name), "wb") as file:
                file.write(os.urandom(P1_SIZE))
        sizes = {name: P1_SIZE for name in names}
    else:
        names = ["big.bin"]
        write_random(os.path.join(directory, names[0]), P2_SIZE)
        sizes = {names[0]: P2_SIZE}
    os.chmod(directory, 0o755)
    for name in names:
        os.chmod(os.path.join(directory, name), 0o644)
    urls = ["%s/%s/%s" % (base, scenario, name) for name in names]
    url_list = os.path.join(tmp, "%s-urls.txt" % scenario)
    with open(url_list, "w") as file:
        file.write("\n".join(urls) + "\n")
    curl_config = os.path.join(tmp, "%s-curl.cfg" % scenario)
    return {"name": scenario, "source": directory, "urls": urls, "url_list": url_list,
            "curl_config": curl_config, "sizes": sizes, "bytes": sum(sizes.values())}


def commands(scenario, out, tessera):
    """The command line of each tool for a scenario, writing into `out`."""
    with open(scenario["curl_config"], "w") as file:
        for url, name in zip(scenario["urls"], scenario["sizes"]):
            file.write('url = "%s"\noutput = "%s"\n' % (url, os.path.join(out, name)))
    curl = ["curl", "-q", "--parallel", "--parallel-max", str(PARALLEL), "-s", "-S", "--fail",
            "--noproxy", "*"]
    if scenario["name"] == "p1":
        curl += ["-K", scenario["curl_config"]]
    else:
        curl += ["-o", os.path.join(out, "big.bin"), scenario["urls"][0]]
    aria2 = ["aria2c", "--no-conf", "-j", str(PARALLEL), "-x1", "-s1", "-i", scenario["url_list"],
             "-d", out, "--console-log-level=warn", "--summary-interval=0", "--file-allocation=none",
             "--allow-overwrite=true", "--auto-file-renaming=false", "-q"]
    return {
        "tessera": [tessera, "--input", scenario["url_list"], "--dir", out, "--parallel", str(PARALLEL)],
        "curl": curl,
        "aria2c": aria2,
    }


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


def verify(scenario, out):
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


def clear(directory):
    shutil.rmtree(directory, ignore_errors=True)
    os.makedirs(directory)


def bench(scenario, tools, runs, warmup, tmp, env):
    out = os.path.join(tmp, "out")
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
            code, wall, cpu, rss = run_child(argv, env, stderr_path)
            with open(stderr_path, errors="replace") as file:
                stderr = file.read().strip()
            if code != 0:
                raise BenchError("%s %s run %d exited with %d: %s\n  command: %s"
                                 % (scenario["name"], tool, round_number, code, stderr[-2000:], " ".join(argv)))
            problem = verify(scenario, out)
            if problem:
                raise BenchError("%s %s run %d: %s" % (scenario["name"], tool, round_number, problem))
            if round_number >= 1:
                results[tool].append({"wall_s": wall, "cpu_s": cpu, "max_rss_mib": rss})
            log("  %s %-9s %-8s wall %7.3f s  cpu %7.3f s  rss %6.1f MiB"
                % (scenario["name"], "round %d/%d" % (round_number, runs) if round_number >= 1 else "warm-up",
                   tool, wall, cpu, rss))
    clear(out)
    return results


# MARK: - Report

def summarize(scenario, results):
    summary = {}
    for tool, runs in results.items():
        row = {key: statistics.median(run[key] for run in runs) for key in ("wall_s", "cpu_s", "max_rss_mib")}
        row["throughput_mib_s"] = scenario["bytes"] / MIB / row["wall_s"]
        summary[tool] = row
    curl = summary.get("curl")
    for row in summary.values():
        row["wall_ratio_to_curl"] = row["wall_s"] / curl["wall_s"] if curl else None
    return summary


def check_targets(name, summary):
    checks = []
    for label, tool, reference, metric, op, bound in TARGETS[name]:
        if tool not in summary or reference not in summary:
            checks.append({"target": label, "measured": None, "status": "n/a"})
            continue
        key = "wall_s" if metric == "wall" else "throughput_mib_s"
        measured = summary[tool][key] / summary[reference][key]
        passed = measured <= bound if op == "<=" else measured >= bound
        checks.append({"target": label, "measured": measured, "status": "PASS" if passed else "MISS"})
    return checks


def markdown(name, summary, checks):
    title = {"p1": "P1: %d files x %d KiB" % (P1_COUNT, P1_SIZE // 1024),
             "p2": "P2: one %d MiB file" % (P2_SIZE // MIB)}[name]
    header = ["tool", "wall median (s)", "CPU median (s)", "peak RSS median (MiB)", "wall ratio to curl"]
    if name == "p2":
        header.append("throughput (MiB/s)")
    lines = ["### %s, %d in flight" % (title, PARALLEL), "",
             "| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    for tool, row in summary.items():
        ratio = row["wall_ratio_to_curl"]
        cells = [tool, "%.3f" % row["wall_s"], "%.3f" % row["cpu_s"], "%.1f" % row["max_rss_mib"],
                 "%.2f" % ratio if ratio is not None else "n/a"]
        if name == "p2":
            cells.append("%.0f" % row["throughput_mib_s"])
        lines.append("| " + " | ".join(cells) + " |")
    lines.append("")
    for check in checks:
        measured = "n/a" if check["measured"] is None else (
            "%.0f%%" % (check["measured"] * 100) if "%" in check["target"] else "%.2fx" % check["measured"])
        lines.append("- %s: **%s** (measured %s)" % (check["target"], check["status"], measured))
    return "\n".join(lines) + "\n"


def tool_versions(tessera):
    versions = {"tessera_binary": tessera}
    for tool, argv in (("curl", ["curl", "--version"]), ("aria2c", ["aria2c", "--version"]),
                       ("nginx", ["nginx", "-v"])):
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
    parser.add_argument("--scenarios", default="p1,p2", help="comma-separated: p1,p2 (default both)")
    parser.add_argument("--keep", action="store_true", help="keep the temporary directory")
    parser.add_argument("--tessera", default=os.path.join(REPO, ".build/release/tessera-engine-bench"),
                        help="path of the tessera-engine-bench binary")
    parser.add_argument("--nginx-workers", type=int, default=1, help="nginx worker processes (default 1)")
    parser.add_argument("--output", default=os.path.join(HERE, "results", "latest.json"),
                        help="where the JSON results go")
    args = parser.parse_args()

    scenarios = [s.strip() for s in args.scenarios.split(",") if s.strip()]
    if not scenarios or any(s not in TARGETS for s in scenarios):
        parser.error("--scenarios takes p1, p2 or p1,p2")
    if args.runs < 1 or args.warmup < 0:
        parser.error("--runs must be at least 1 and --warmup at least 0")
    tessera = os.path.abspath(args.tessera)
    if not os.access(tessera, os.X_OK):
        raise BenchError("no tessera-engine-bench at %s: build it with "
                         "`swift build -c release --product tessera-engine-bench`" % tessera)
    tool_order = ["tessera", "curl", "aria2c"]
    for tool in ("curl", "aria2c"):
        if not shutil.which(tool):
            log("warning: %s not found, skipped (apt-get install %s)" % (tool, "aria2" if tool == "aria2c" else tool))
            tool_order.remove(tool)

    env = {k: v for k, v in os.environ.items() if k.lower() not in PROXY_VARIABLES}
    shm = "/dev/shm" if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK) else None
    if shm is None:
        log("warning: /dev/shm is not writable; using the default temporary directory (results will be noisier)")
    tmp = tempfile.mkdtemp(prefix="tessera-bench-", dir=shm)
    os.chmod(tmp, 0o755)  # nginx workers may run as another user
    root = os.path.join(tmp, "www")
    os.makedirs(root, mode=0o755)
    os.chmod(root, 0o755)
    nginx = None
    report = {"date": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "runs": args.runs, "warmup_rounds": args.warmup,
              "parallel": PARALLEL,
              "machine": {"cpus": os.cpu_count(), "platform": platform.platform()},
              "versions": tool_versions(tessera), "scenarios": {}}
    tables = []
    try:
        nginx, port = start_nginx(tmp, root, args.nginx_workers)
        log("nginx on 127.0.0.1:%d, files in %s" % (port, tmp))
        for name in scenarios:
            log("%s: generating files" % name)
            scenario = prepare(name, tmp, root, port)
            every = commands(scenario, os.path.join(tmp, "out"), tessera)
            tools = {tool: every[tool] for tool in tool_order}
            results = bench(scenario, tools, args.runs, args.warmup, tmp, env)
            summary = summarize(scenario, results)
            checks = check_targets(name, summary)
            report["scenarios"][name] = {"bytes": scenario["bytes"], "files": len(scenario["sizes"]),
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

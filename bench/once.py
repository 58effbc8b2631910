#!/usr/bin/env python3
"""Benchmark of `fxagent --once` with every CPU busy.

Runs the agent N times for D seconds while one CPU-bound workload per CPU
runs, and prints, per run and as medians: the agent's own CPU time while
recording (as a share of one CPU), the time from the end of recording to the
file written (symbolization + encoding + gzip), and the agent's peak RSS.
Figures, not a pass/fail test. Needs root (perf_event_open system-wide).

usage: bench/once.py [--build DIR] [--runs N] [--duration SECONDS]
"""
import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

STATS = re.compile(r"stats: recorded ([\d.]+) s, agent cpu while recording ([\d.]+) ms "
                   r"\(([\d.]+)% of one cpu\), symbolize\+write ([\d.]+) ms, (\d+) samples, "
                   r"(\d+) frames, (\d+) stacks, (\d+) objects")


def run_once(agent, workload, duration, out):
    ncpu = os.cpu_count() or 1
    busy = [subprocess.Popen([workload, str(duration + 10)]) for _ in range(ncpu)]
    try:
        time.sleep(0.5)
        t0 = time.monotonic()
        proc = subprocess.Popen([agent, "--once", "--duration", f"{duration}s", "--output", out,
                                 "--verbose"], stderr=subprocess.PIPE, text=True)
        _, status, ru = os.wait4(proc.pid, 0)
        wall = time.monotonic() - t0
        err = proc.stderr.read()
        if os.waitstatus_to_exitcode(status) != 0:
            sys.exit(f"fxagent failed:\n{err}")
        m = STATS.search(err)
        if not m:
            sys.exit(f"no stats line in fxagent's output:\n{err}")
        return {
            "cpu_ms": float(m.group(2)),
            "cpu_pct": float(m.group(3)),
            "write_ms": float(m.group(4)),
            "samples": int(m.group(5)),
            "frames": int(m.group(6)),
            "objects": int(m.group(8)),
            "rss_mb": ru.ru_maxrss / 1024.0,
            "total_cpu_s": ru.ru_utime + ru.ru_stime,
            "wall_s": wall,
            "bytes": os.path.getsize(out),
        }
    finally:
        for b in busy:
            b.kill()
            b.wait()


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(here, "..", "build"))
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--duration", type=int, default=30)
    a = ap.parse_args()
    agent = os.path.join(a.build, "fxagent")
    workload = os.path.join(a.build, "tests", "workloads", "fx-hot-ab")
    for p in (agent, workload):
        if not os.access(p, os.X_OK):
            sys.exit(f"{p} is missing: build first (cmake -S . -B build && make -C build)")
    if os.geteuid() != 0:
        sys.exit("run as root: system-wide perf_event_open needs it")
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(a.runs):
            r = run_once(agent, workload, a.duration, os.path.join(tmp, f"run{i}.json.gz"))
            rows.append(r)
            print(f"run {i + 1}/{a.runs}: agent cpu while recording {r['cpu_ms']:.1f} ms "
                  f"({r['cpu_pct']:.3f}% of one cpu), symbolize+write {r['write_ms']:.0f} ms, "
                  f"peak rss {r['rss_mb']:.1f} MB, {r['samples']} samples, "
                  f"{r['bytes']} bytes", flush=True)
    med = {k: statistics.median(r[k] for r in rows) for k in rows[0]}
    print()
    print(f"fxagent --once, {a.duration} s, {os.cpu_count()} CPUs busy, median of {a.runs} runs")
    print("| figure | median | min | max |")
    print("|---|---|---|---|")
    for key, label, fmt in (
            ("cpu_pct", "agent CPU while recording (% of one CPU)", "{:.3f}"),
            ("cpu_ms", "agent CPU while recording (ms)", "{:.1f}"),
            ("write_ms", "end of recording to file written (ms)", "{:.0f}"),
            ("rss_mb", "peak RSS (MB)", "{:.1f}"),
            ("total_cpu_s", "agent CPU in all (s)", "{:.2f}"),
            ("samples", "samples", "{:.0f}"),
            ("bytes", "file size (bytes)", "{:.0f}")):
        vals = [r[key] for r in rows]
        print(f"| {label} | {fmt.format(med[key])} | {fmt.format(min(vals))} | "
              f"{fmt.format(max(vals))} |")


if __name__ == "__main__":
    main()

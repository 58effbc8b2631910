#!/usr/bin/env python3
"""Benchmark of user-stack unwinding: DWARF against frame pointers.

Side by side in one run, repeated (median of --runs): one fx-bench-work per CPU
(qsort with a callback: stacks through libc, which has no frame pointers) runs
for D seconds with no profiler, under `fxagent --once --unwind fp`, and under
`--unwind dwarf`, the order rotating each round. Prints the workload's
throughput in each mode and its slowdown against no profiler, the agent's CPU
while recording (share of one CPU), and in dwarf mode the per-sample unwind
time (median and 99th percentile) and the share of truncated stacks.
Figures, not a pass/fail test. Needs root.

usage: bench/unwind.py [--build DIR] [--runs N] [--duration SECONDS]
"""
import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

STATS = re.compile(r"agent cpu while recording ([\d.]+) ms \(([\d.]+)% of one cpu\).*?"
                   r"(\d+) samples")
DWARF = re.compile(r"dwarf unwinds (\d+), median ([\d.]+) us, p99 ([\d.]+) us, "
                   r"truncated (\d+)")


def run(build, mode, duration, out):
    ncpu = os.cpu_count() or 1
    work = os.path.join(build, "bench", "fx-bench-work")
    agent = None
    if mode != "none":
        agent = subprocess.Popen([os.path.join(build, "fxagent"), "--once", "--unwind", mode,
                                  "--duration", f"{int((duration + 1.5) * 1000)}ms", "--output", out,
                                  "--verbose"], stderr=subprocess.PIPE, text=True)
        time.sleep(0.5)
    workers = [subprocess.Popen([work, str(duration)], stdout=subprocess.PIPE, text=True)
               for _ in range(ncpu)]
    ops = 0
    for w in workers:
        line = w.communicate()[0]
        ops += int(line.split()[1])
    r = {"ops_s": ops / duration}
    if agent:
        err = agent.communicate()[1]
        if agent.returncode != 0:
            sys.exit(f"fxagent --unwind {mode} failed:\n{err}")
        m = STATS.search(err)
        r["cpu_pct"] = float(m.group(2))
        r["samples"] = int(m.group(3))
        d = DWARF.search(err)
        if d:
            r["median_us"] = float(d.group(2))
            r["p99_us"] = float(d.group(3))
            r["truncated_pct"] = 100.0 * int(d.group(4)) / max(1, int(d.group(1)))
    return r


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(here, "..", "build"))
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--duration", type=float, default=10)
    a = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("run as root: system-wide perf_event_open needs it")
    modes = ["none", "fp", "dwarf"]
    res = {m: [] for m in modes}
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(a.runs):
            order = modes[i % 3:] + modes[:i % 3]
            for mode in order:
                r = run(a.build, mode, a.duration, os.path.join(tmp, f"{mode}{i}.json.gz"))
                res[mode].append(r)
                print(f"round {i + 1} {mode:5}: {r}", flush=True)
    base = statistics.median(r["ops_s"] for r in res["none"])
    spread = 100.0 * (max(r["ops_s"] for r in res["none"]) -
                      min(r["ops_s"] for r in res["none"])) / base
    print()
    print(f"fx-bench-work x {os.cpu_count()} for {a.duration:g} s, median of {a.runs} rounds")
    print(f"no-profiler throughput varied by {spread:.1f}% across rounds (the machine's noise)")
    print("| mode | workload ops/s | slowdown vs none, paired per round | agent CPU "
          "(% of one CPU) | unwind median | unwind p99 | truncated |")
    print("|---|---|---|---|---|---|---|")
    for mode in modes:
        rows = res[mode]
        ops = statistics.median(r["ops_s"] for r in rows)
        # Each round's runs are back to back: compare within a round.
        slow = statistics.median(100.0 * (1 - r["ops_s"] / n["ops_s"])
                                 for r, n in zip(rows, res["none"]))
        cpu = statistics.median(r["cpu_pct"] for r in rows) if mode != "none" else None
        med = statistics.median(r["median_us"] for r in rows) if mode == "dwarf" else None
        p99 = statistics.median(r["p99_us"] for r in rows) if mode == "dwarf" else None
        tr = statistics.median(r["truncated_pct"] for r in rows) if mode == "dwarf" else None
        print(f"| {mode} | {ops:.0f} | {slow:+.2f}% | "
              f"{'-' if cpu is None else f'{cpu:.3f}'} | "
              f"{'-' if med is None else f'{med:.1f} us'} | "
              f"{'-' if p99 is None else f'{p99:.1f} us'} | "
              f"{'-' if tr is None else f'{tr:.2f}%'} |")


if __name__ == "__main__":
    main()

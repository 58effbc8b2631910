#!/usr/bin/env python3
"""Benchmark of the agent (daemon mode) with N cgroup targets.

Makes N cgroups under the cgroup2 mount, one CPU-bound fx-bench-work in each,
runs `fxagent` with one `cgroup:` target per cgroup and W-second windows for D
seconds, and prints: the agent's CPU (share of one CPU) and RSS sampled every
few seconds (to see that it stays flat), the time the sampler thread spent on
each window rotation (average and maximum, from the agent's own stats), and
the chunk bytes per sample. Figures, not a pass/fail test. Needs root.

usage: bench/daemon.py [--build DIR] [--targets N] [--duration S] [--window W]
"""
import argparse
import glob
import gzip
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time

ROT = re.compile(r"stats: windows (\d+), chunks (\d+), chunk errors (\d+), samples (\d+), "
                 r"rotation avg ([\d.]+) us max ([\d.]+) us, rotation cpu avg ([\d.]+) us "
                 r"max ([\d.]+) us")


def cgroup2_mount():
    with open("/proc/self/mountinfo") as f:
        mounts = [line.split(" - ")[0].split()[4] for line in f
                  if " - cgroup2 " in line]
    for want in ("/sys/fs/cgroup", "/sys/fs/cgroup/unified"):
        if want in mounts:
            return want
    if not mounts:
        sys.exit("no cgroup2 mount")
    return mounts[0]


def cpu_s(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def rss_mb(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024.0
    return 0.0


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(here, "..", "build"))
    ap.add_argument("--targets", type=int, default=10)
    ap.add_argument("--duration", type=int, default=300)
    ap.add_argument("--window", type=int, default=10)
    a = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("run as root")
    mount = cgroup2_mount()
    agent = os.path.join(a.build, "fxagent")
    work = os.path.join(a.build, "bench", "fx-bench-work")
    names = [f"fxbench-{os.getpid()}-{i}" for i in range(a.targets)]
    procs = []
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "chunks")
        cfg = os.path.join(tmp, "fxagent.yaml")
        with open(cfg, "w") as f:
            f.write(f"window:\n  seconds: {a.window}\noutput:\n  directory: {out}\ntargets:\n")
            for n in names:
                f.write(f"  - name: {n}\n    cgroup: /{n}\n")
        try:
            for n in names:
                os.mkdir(os.path.join(mount, n))
                p = subprocess.Popen([work, str(a.duration + 30)], stdout=subprocess.DEVNULL)
                procs.append(p)
                with open(os.path.join(mount, n, "cgroup.procs"), "w") as f:
                    f.write(str(p.pid))
            ag = subprocess.Popen([agent, "--config", cfg, "--verbose"],
                                  stderr=subprocess.PIPE, text=True)
            time.sleep(2)
            series = []
            t0, c0 = time.monotonic(), cpu_s(ag.pid)
            step = max(5, a.duration // 30)
            while time.monotonic() - t0 < a.duration:
                time.sleep(step)
                if ag.poll() is not None:
                    sys.exit(f"fxagent exited {ag.returncode}:\n{ag.stderr.read()}")
                series.append((time.monotonic() - t0, cpu_s(ag.pid), rss_mb(ag.pid)))
                print(f"t={series[-1][0]:5.0f} s  agent cpu {series[-1][1]:.2f} s  "
                      f"rss {series[-1][2]:.1f} MB", flush=True)
            t1, c1 = time.monotonic(), cpu_s(ag.pid)
            ag.send_signal(signal.SIGINT)
            err = ag.communicate(timeout=120)[1]
        finally:
            for p in procs:
                p.kill()
                p.wait()
            for n in names:
                try:
                    os.rmdir(os.path.join(mount, n))
                except OSError:
                    pass
        m = ROT.search(err)
        chunks = glob.glob(os.path.join(out, "*.json.gz"))
        nbytes = sum(os.path.getsize(c) for c in chunks)
        nsamples = 0
        for c in chunks:
            with gzip.open(c, "rt") as f:
                nsamples += json.load(f)["meta"]["fxagent"]["samples"]
    rss = [r for _, _, r in series]
    half = rss[len(rss) // 2:]
    print()
    print(f"fxagent, {a.targets} cgroup targets each running fx-bench-work, {a.window} s "
          f"windows, {a.duration} s")
    print("| figure | value |")
    print("|---|---|")
    print(f"| agent CPU | {100 * (c1 - c0) / (t1 - t0):.3f}% of one CPU |")
    print(f"| RSS first / last / max of the second half | {rss[0]:.1f} / {rss[-1]:.1f} / "
          f"{max(half):.1f} MB |")
    if m:
        print(f"| windows, chunks (errors) | {m.group(1)}, {m.group(2)} ({m.group(3)}) |")
        print(f"| rotation pause, wall clock, avg / max | {m.group(5)} / {m.group(6)} us |")
        print(f"| rotation pause, sampler thread CPU, avg / max | {m.group(7)} / "
              f"{m.group(8)} us |")
    print(f"| chunk bytes per sample | {nbytes / max(1, nsamples):.1f} ({nbytes} bytes, "
          f"{nsamples} samples, {len(chunks)} chunks) |")


if __name__ == "__main__":
    main()

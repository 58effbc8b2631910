# SPDX-License-Identifier: MIT
"""Shared helpers of the benchmarks (python3 standard library only).

A section module (overhead.py, scale.py, symbolize.py, stripped.py, daemon.py,
stackcopy.py, output.py, upload.py) has `add_args(ap)` for its own options and `run(ctx, a)` that
returns its Markdown lines; `section_main(module)` runs one alone, and run.py
runs them all. Figures, not tests: nothing here fails on a slow result.

What the helpers measure and why that way:
- CPU of a process while it runs: the sum of /proc/PID/task/*/schedstat (ns on
  a CPU, per thread) read at two instants; /proc/PID/stat counts in 10 ms ticks,
  too coarse for an agent that spends a few ms per second.
- CPU of a whole run: wait4()'s rusage of the child (user + system).
- Peak RSS: VmHWM polled from /proc/PID/status while the process lives, not
  ru_maxrss: a child's ru_maxrss keeps the RSS its forking parent (this
  Python) had before exec.
- Steady RSS: the median of VmRSS polled over the second half of the
  measured interval.
"""

import argparse
import datetime
import gzip
import json
import os
import platform
import re
import signal
import statistics
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
NCPU = os.cpu_count() or 1


class Ctx:
    """Paths and the run's shape, shared by every section."""

    def __init__(self, build, quick=False, log=None):
        self.build = os.path.abspath(build)
        self.quick = quick
        self.agent = os.path.join(self.build, "fxagent")
        self.work = os.path.join(self.build, "bench", "fx-bench-work")
        self.sym = os.path.join(self.build, "bench", "fx-bench-sym")
        self.churn = os.path.join(self.build, "tests", "workloads", "fx-churn")
        self.cpp = os.path.join(self.build, "bench", "fx-bench-cpp")
        self.log = log or (lambda msg: print(msg, file=sys.stderr, flush=True))

    def need(self, *paths):
        for p in paths:
            if not os.access(p, os.X_OK):
                sys.exit(f"{p} is missing: build first (cmake -S . -B {self.build} "
                         f"-DBUILD_TESTING=ON && make -C {self.build} -j2)")


def need_root():
    if os.geteuid() != 0:
        sys.exit("run as root: system-wide perf_event_open needs it")


# ---------------------------------------------------------------- the machine

def _first(path, pattern):
    try:
        with open(path) as f:
            for line in f:
                m = re.match(pattern, line)
                if m:
                    return m.group(1).strip()
    except OSError:
        pass
    return "?"


def _proc_ticks():
    ticks = {}
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/stat") as f:
                head, tail = f.read().rsplit(")", 1)
            fields = tail.split()
            ticks[int(pid)] = (head.split("(", 1)[1], int(fields[11]) + int(fields[12]))
        except (OSError, ValueError, IndexError):
            pass
    return ticks


def busy_others(seconds=1.0, min_pct=10.0):
    """Processes other than ours that used >= @min_pct of a CPU over @seconds."""
    a = _proc_ticks()
    time.sleep(seconds)
    b = _proc_ticks()
    hz = os.sysconf("SC_CLK_TCK")
    out = []
    for pid, (name, t) in b.items():
        if pid in a and pid != os.getpid():
            pct = 100.0 * (t - a[pid][1]) / hz / seconds
            if pct >= min_pct:
                out.append((pct, name))
    return ", ".join(f"{n} {p:.0f}%" for p, n in sorted(out, reverse=True)) or "none"


def machine():
    """What the figures were taken on, and how busy it was when they started."""
    try:
        with open("/etc/debian_version") as f:
            debian = f.read().strip()
    except OSError:
        debian = "?"
    mem_kib = _first("/proc/meminfo", r"MemTotal:\s+(\d+)")
    load = os.getloadavg()
    return {
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "cpu": _first("/proc/cpuinfo", r"model name\s*:\s*(.*)"),
        "vcpus": NCPU,
        "mem_gib": int(mem_kib) / 1048576 if mem_kib.isdigit() else 0,
        "kernel": platform.release(),
        "debian": debian,
        "load": "%.2f %.2f %.2f" % load,
        "busy": busy_others(),
    }


def machine_lines(m, extra=""):
    return [f"Machine: {m['cpu']}, {m['vcpus']} vCPUs, {m['mem_gib']:.0f} GiB, "
            f"Debian {m['debian']}, Linux {m['kernel']}. Date: {m['date']}. "
            f"Load average at the start: {m['load']}; other processes busy then "
            f"(share of one CPU): {m['busy']}.{extra}", ""]


# ----------------------------------------------------------- process figures

def task_cpu_ns(pid):
    """ns on a CPU of all live threads of @pid (0 if it is gone)."""
    total = 0
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return 0
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                total += int(f.read().split()[0])
        except (OSError, ValueError, IndexError):
            pass
    return total


def status_kib(pid, key):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith(key + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return None


class Watch:
    """Polls VmHWM and VmRSS of a process every @period seconds until stop()."""

    def __init__(self, pid, period=0.1):
        self.pid = pid
        self.period = period
        self.hwm_kib = 0
        self.rss = []  # (monotonic time, VmRSS KiB)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._poll, daemon=True)
        self._thread.start()

    def _poll(self):
        while not self._stop.is_set():
            hwm = status_kib(self.pid, "VmHWM")
            rss = status_kib(self.pid, "VmRSS")
            if hwm is not None:
                self.hwm_kib = max(self.hwm_kib, hwm)
            if rss is not None:
                self.rss.append((time.monotonic(), rss))
            self._stop.wait(self.period)

    def stop(self):
        self._stop.set()
        self._thread.join()

    def steady_kib(self, t0, t1):
        """Median VmRSS over the second half of [t0, t1]."""
        mid = (t0 + t1) / 2
        vals = [r for t, r in self.rss if mid <= t <= t1]
        return statistics.median(vals) if vals else None


def wait_rusage(proc):
    """Waits for a Popen child with wait4: (exit code, user + system CPU s)."""
    _, status, ru = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    return proc.returncode, ru.ru_utime + ru.ru_stime


def start_work(ctx, n, seconds, paths=1, cgroup=None):
    """@n fx-bench-work; with @cgroup (a cgroup2 directory), each moved into
    it before it runs."""
    args = [ctx.work, f"{seconds:g}"] + ([str(paths)] if paths > 1 else [])

    def enter():
        with open(os.path.join(cgroup, "cgroup.procs"), "w") as f:
            f.write(str(os.getpid()))
    return [subprocess.Popen(args, stdout=subprocess.PIPE, text=True,
                             preexec_fn=enter if cgroup else None) for _ in range(n)]


def cgroup2_root():
    """Where the cgroup2 hierarchy is mounted, or None."""
    try:
        with open("/proc/self/mounts") as f:
            for ln in f:
                parts = ln.split()
                if len(parts) > 2 and parts[2] == "cgroup2":
                    return parts[1]
    except OSError:
        pass
    return None


def work_ops(procs):
    """Waits for fx-bench-work processes; the sum of the ops they report."""
    ops = 0
    for p in procs:
        out = p.communicate()[0]
        if p.returncode != 0 or not out.startswith("ops "):
            sys.exit(f"fx-bench-work failed ({p.returncode}): {out!r}")
        ops += int(out.split()[1])
    return ops


def kill_all(procs):
    for p in procs:
        if p.poll() is None:
            p.kill()
        p.wait()


def stop(proc, timeout=120):
    """SIGINT, then the wait (SIGKILL if it does not end); the exit code. Its
    pipes are left to whoever reads them."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGINT)
    try:
        return proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        return proc.wait()


# ------------------------------------------------------------ agent outputs

ONCE_STATS = re.compile(
    r"stats: recorded ([\d.]+) s, agent cpu while recording ([\d.]+) ms \(([\d.]+)% of one "
    r"cpu\), symbolize\+write ([\d.]+) ms, (\d+) samples, (\d+) frames, (\d+) stacks, "
    r"(\d+) objects, peak rss ([\d.]+) MiB")
DWARF_STATS = re.compile(r"stats: dwarf unwinds (\d+), median ([\d.]+) us, p99 ([\d.]+) us, "
                         r"truncated (\d+)")
DAEMON_STATS = re.compile(
    r"stats: windows (\d+)(?: \(stretched \d+\))?, chunks (\d+), chunk errors (\d+), "
    r"samples (\d+), rotation avg "
    r"([\d.]+) us max ([\d.]+) us, rotation cpu avg ([\d.]+) us max ([\d.]+) us, peak rss "
    r"([\d.]+) MiB")


def chunk_figures(path):
    """Samples, distinct stacks (stackTable rows) and frames of one chunk."""
    with gzip.open(path, "rt", encoding="utf-8") as f:
        p = json.load(f)
    meta = p["meta"].get("fxagent", {})
    shared = p["shared"]
    return {
        "samples": meta.get("samples", sum(t["samples"]["length"] for t in p["threads"])),
        "truncated": meta.get("truncated", 0),
        "lost": meta.get("lost", 0),
        "stacks": shared["stackTable"]["length"],
        "frames": shared["frameTable"]["length"],
        "threads": len(p["threads"]),
        "bytes": os.path.getsize(path),
    }


def perf_samples(perf, path):
    out = subprocess.run([perf, "report", "-i", path, "--stats"], capture_output=True,
                         text=True).stdout
    m = re.search(r"SAMPLE events:\s+(\d+)", out)
    return int(m.group(1)) if m else 0


# ------------------------------------------------------------------ figures

def med(vals):
    vals = [v for v in vals if v is not None]
    return statistics.median(vals) if vals else None


def spread_pct(vals):
    """(max - min) / median, in percent: the noise of a series."""
    m = med(vals)
    return 100.0 * (max(vals) - min(vals)) / m if vals and m else 0.0


def f(v, fmt="{:.1f}", none="-"):
    return none if v is None else fmt.format(v)


def aim(ok, what):
    return f"{'met' if ok else 'NOT met'}: {what}"


def table(head, rows):
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    out += ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]
    return out + [""]


def common_args(ap):
    ap.add_argument("--build", default=os.path.join(HERE, "..", "build"),
                    help="the CMake build directory (default: build/)")
    ap.add_argument("--quick", action="store_true",
                    help="a short smoke run: figures too rough to quote")


def section_main(module, doc):
    """`python3 bench/<section>.py`: one section alone, with the machine on top."""
    ap = argparse.ArgumentParser(description=doc,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    common_args(ap)
    module.add_args(ap)
    a = ap.parse_args()
    ctx = Ctx(a.build, a.quick)
    m = machine()
    lines = module.run(ctx, a)
    print()
    print("\n".join(machine_lines(m) + lines))

#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Scale: the agent (daemon mode, whole system) as processes and stacks grow.

Scenarios, each T seconds with W-second windows (`fxagent --window W
--output-dir DIR --verbose`, DWARF unwinding, the default): 1, 10 and 100
busy fx-bench-work processes; 10 of them each going through 4096 call paths
(about 4096 times the distinct stacks); fx-churn at 1000 short-lived
processes per second (fork + exec, half of them dlopen a library; the rate
it reached is shown); and one busy fx-bench-cpp per CPU, a C++ program
whose own DWARF is 8 MiB (the standard library's templates instantiated
for its types); and one busy fx-bench-work per CPU beside two Node.js
processes and, where Java is installed (Debian's openjdk-17), one Java
process, all computing: the big binaries servers run.

Per scenario: the agent's CPU per W-second interval (median and maximum over
the intervals; every interval holds one window's sampling and the writing of
the one before), steady RSS (median VmRSS over the second half) and peak RSS
(the agent's own VmHWM at exit), per window (median over the chunks):
samples, distinct stacks (stackTable rows: prefix-tree nodes) and frames,
the processes whose unwinding state the agent held (its -v log), chunk bytes
per sample, the share of truncated stacks, the samples lost (rings that
overflowed) and the longest rotation pause of the sampling thread (wall clock,
and its CPU time: with more busy processes than CPUs the agent waits for a
CPU like everyone else).

--only N,... runs only those scenarios (1-based, in the order above), and
then also prints the steady RSS each busy process added.

What keeps the agent's memory down in these scenarios (steady RSS 17-27 MiB,
peak 27-37 MiB with 5 s windows on 2026-11-27; the Node.js and Java one the
highest), largest first:
- big debug files (libc's from libc6-dbg: 10 MB of heap once inflated) are
  inflated once into a file of the agent's and mapped, their pages given
  back (MADV_DONTNEED) once the object's addresses are answered;
- libdw's tables (units, line tables, abbreviations: 1-3 times the sections
  as a window's addresses touch CUs) are freed after each object's
  look-ups, and the next window builds only what its new addresses need;
  within one object's look-ups, once they pass a fifth of max_memory (the
  bound doubling each time, for a CU bigger than it);
- kernel symbols take 12 bytes a symbol, names compressed 64 to a block
  (1.7 MB for 120,000 symbols);
- function tables take 12 bytes a function, their names left in the file's
  string table and read (pread) the first time a window names the function:
  node's 150,000 symbols and 7.5 MB of names cost 1-2 MB, not 20;
- the files the unwind rules are compiled from are mapped by the agent and
  their pages given back after every window (node's .eh_frame is 2.7 MB);
- malloc maps blocks of 128 KiB and more on their own (a fixed threshold),
  so a symbol table read once does not leave the heap fragmented;
- the compiled unwind rules need no libdwfl state per process (a Dwfl per
  process took 100 busy processes to 83 MiB).
Inflated debug copies are written at the first run that needs them: run a
scenario once before quoting its peak. fx-churn's truncated stacks vary
between 1.7% and 2.0% from run to run of one build; ld.so's entry code as
the outermost frame keeps them that low.

Two builds compare best alternating on a quiet machine: `--seconds 20
--window 5`, each build in turn, quoting a round with nothing else running
(a compiler beside the bench varies one build's figures 2x).

usage: bench/scale.py [--build DIR] [--quick] [--seconds T] [--window W] [--only N,...]
"""
import glob
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fxbench as fb  # noqa: E402

DWFL = re.compile(r"dwarf: (\d+) processes cached")
CHURN_RATE = 1000
# fx-churn says how many it started only when it ends by itself: it runs
# the scenario's length and a little more (0.5 s before the agent starts).
CHURN_EXTRA = 1


def add_args(ap):
    ap.add_argument("--seconds", type=int, help="per scenario (default 60; --quick 12)")
    ap.add_argument("--window", type=int, help="window seconds (default 10; --quick 3)")
    ap.add_argument("--only", help="scenarios to run, 1-based (1,2,3: 1, 10, 100 busy "
                    "processes); default all")


def scenarios(ctx, t):
    n = fb.NCPU
    return [
        ("1 busy process", lambda: fb.start_work(ctx, 1, t + 30)),
        ("10 busy processes", lambda: fb.start_work(ctx, 10, t + 30)),
        ("100 busy processes", lambda: fb.start_work(ctx, 100, t + 30)),
        ("10 busy processes, 4096 call paths each",
         lambda: fb.start_work(ctx, 10, t + 30, paths=4096)),
        (f"fx-churn, {CHURN_RATE} processes/s asked ({n} CPUs)",
         lambda: [subprocess.Popen([ctx.churn, str(t + CHURN_EXTRA), str(CHURN_RATE)],
                                   stdout=subprocess.PIPE, text=True)]),
        (f"{n} busy C++ processes, {cpp_debug_mib(ctx):.1f} MiB of DWARF in the binary",
         lambda: [subprocess.Popen([ctx.cpp, str(t + 30)], stdout=subprocess.PIPE, text=True)
                  for _ in range(n)]),
        (f"{n} busy processes beside 2 Node.js{' and 1 Java' if shutil.which('java') else ''}"
         " computing", lambda: fb.start_work(ctx, n, t + 30) + runtimes(t + 30)),
    ]


NODE_WORK = ("function f(n){return n<2?n:f(n-1)+f(n-2)}; const end=Date.now()+%d;"
             "while(Date.now()<end){f(22); const a=[]; for(let i=0;i<1e4;i++)a.push(Math.sqrt(i));"
             "a.sort()}")
JAVA_WORK = """public class FxBenchJava { public static void main(String[] a) {
  long end = System.currentTimeMillis() + Long.parseLong(a[0]); long x = 0;
  while (System.currentTimeMillis() < end) { java.util.ArrayList<Integer> l = new java.util.ArrayList<>();
    for (int i = 0; i < 100000; i++) l.add(i * 7 % 1000); java.util.Collections.sort(l); x += l.get(5); }
  System.out.println(x); } }
"""


def runtimes(seconds):
    """Two Node.js processes and, where Java is installed, one Java
    process computing: big binaries (node 100 MB with 7.5 MB of names,
    libjvm 20 MB) whose symbols the agent reads."""
    node = shutil.which("node")
    if not node:
        sys.exit("node is missing: apt-get install nodejs")
    procs = [subprocess.Popen([node, "-e", NODE_WORK % (seconds * 1000)],
                              stdout=subprocess.DEVNULL) for _ in range(2)]
    java = shutil.which("java")
    if java:
        src = os.path.join(tempfile.mkdtemp(prefix="fxbench-java-"), "FxBenchJava.java")
        with open(src, "w") as f:
            f.write(JAVA_WORK)
        procs.append(subprocess.Popen([java, src, str(seconds * 1000)],
                                      stdout=subprocess.DEVNULL))
    return procs


def cpp_debug_mib(ctx):
    """The size of fx-bench-cpp's own debug sections."""
    out = subprocess.run(["readelf", "-SW", ctx.cpp], capture_output=True, text=True).stdout
    total = 0
    for line in out.splitlines():
        if ".debug_" in line and "]" in line:
            total += int(line.split("]", 1)[1].split()[4], 16)
    return total / 1048576.0


def run_one(ctx, make, t, w, tmp):
    out = os.path.join(tmp, "chunks")
    work = make()
    try:
        time.sleep(0.5)
        ag = subprocess.Popen([ctx.agent, "--window", str(w), "--output-dir", out, "--verbose"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        err = []
        drain = threading.Thread(target=lambda: err.append(ag.stderr.read()), daemon=True)
        drain.start()
        watch = fb.Watch(ag.pid, 0.25)
        t0 = time.monotonic()
        marks = [(t0, fb.task_cpu_ns(ag.pid))]
        while marks[-1][0] - t0 < t - 0.01:
            time.sleep(max(0.0, t0 + w * len(marks) - time.monotonic()))
            if ag.poll() is not None:
                drain.join()
                sys.exit(f"fxagent exited {ag.returncode}:\n{''.join(err)}")
            marks.append((time.monotonic(), fb.task_cpu_ns(ag.pid)))
        t1 = marks[-1][0]
        fb.stop(ag)
        drain.join()
        watch.stop()
        started = None
        if work and work[0].args[0] == ctx.churn:
            o = work[0].communicate(timeout=t + 60)[0]
            m = re.match(r"\s*(\d+)", o or "")
            started = int(m.group(1)) if m else None
    finally:
        fb.kill_all(work)
    err = "".join(err)
    st = fb.DAEMON_STATS.search(err)
    if not st:
        sys.exit(f"no stats line in fxagent's output:\n{err}")
    cpu = [100.0 * (c1 - c0) / 1e9 / (b - a) for (a, c0), (b, c1) in zip(marks, marks[1:])]
    chunks = [fb.chunk_figures(c) for c in sorted(glob.glob(os.path.join(out, "*.json.gz")))]
    samples = sum(c["samples"] for c in chunks)
    return {
        "cpu_med": fb.med(cpu), "cpu_max": max(cpu), "intervals": len(cpu),
        "steady_mib": (watch.steady_kib(t0, t1) or 0) / 1024.0,
        "peak_mib": max(float(st.group(9)), watch.hwm_kib / 1024.0),
        "rot_max_us": float(st.group(6)),
        "rot_cpu_max_us": float(st.group(8)),
        "samples": fb.med([c["samples"] for c in chunks]),
        "stacks": fb.med([c["stacks"] for c in chunks]),
        "frames": fb.med([c["frames"] for c in chunks]),
        "dwfl": fb.med([int(x) for x in DWFL.findall(err)]),
        "bps": sum(c["bytes"] for c in chunks) / max(1, samples),
        "truncated_pct": 100.0 * sum(c["truncated"] for c in chunks) / max(1, samples),
        "lost": sum(c["lost"] for c in chunks),
        "chunks": len(chunks),
        "started": started,
        "elapsed": t1 - t0,
    }


def run(ctx, a):
    t = a.seconds or (12 if ctx.quick else 60)
    w = a.window or (3 if ctx.quick else 10)
    ctx.need(ctx.agent, ctx.work, ctx.churn, ctx.cpp)
    fb.need_root()
    rows, got = [], []
    churn_note = ""
    todo = list(enumerate(scenarios(ctx, t), 1))
    if getattr(a, "only", None):
        want = {int(x) for x in a.only.split(",")}
        todo = [(i, s) for i, s in todo if i in want]
    for _, (name, make) in todo:
        with tempfile.TemporaryDirectory(prefix="fxbench-") as tmp:
            r = run_one(ctx, make, t, w, tmp)
        ctx.log(f"scale: {name}: " + ", ".join(f"{k} {v:.4g}" for k, v in r.items()
                                                 if isinstance(v, (int, float))))
        if r["started"] is not None:
            rate = r["started"] / (t + CHURN_EXTRA)
            name = f"{name}: {rate:.0f}/s reached"
            churn_note = (f" fx-churn asked for {CHURN_RATE} processes/s reached {rate:.0f}/s "
                          f"here (each burns about 2 ms of CPU, at most 64 at once).")
        got.append(r)
        rows.append([name, f"{r['cpu_med']:.2f}% / {r['cpu_max']:.2f}%",
                     f"{r['steady_mib']:.1f} MiB", f"{r['peak_mib']:.1f} MiB",
                     f"{r['samples']:.0f}", f"{r['stacks']:.0f}", f"{r['frames']:.0f}",
                     fb.f(r["dwfl"], "{:.0f}"), f"{r['bps']:.1f}",
                     f"{r['truncated_pct']:.2f}%", f"{r['lost']}",
                     f"{r['rot_max_us'] / 1000:.2f} / {r['rot_cpu_max_us'] / 1000:.2f} ms"])
    lines = ["### Scale", "",
             f"`bench/scale.py`: the agent on the whole system (DWARF unwinding), {w} s "
             f"windows, {t} s per scenario. Agent CPU: per {w} s interval, median / max "
             f"over the {t // w} intervals, as a share of one CPU. Per window: medians over "
             f"the chunks.{churn_note}", ""]
    lines += fb.table(["workload", "agent CPU, median / max", "steady RSS", "peak RSS",
                       "samples per window", "distinct stacks", "frames",
                       "processes unwound (cached)", "chunk bytes per sample",
                       "truncated stacks", "lost samples (all windows)",
                       "longest rotation pause: wall / CPU"], rows)
    if len(got) < 5:
        # Some scenarios only: the busy-process ones, and what each process added.
        busy = {1: 1, 2: 10, 3: 100}
        pts = [(busy[i], r["steady_mib"]) for (i, _), r in zip(todo, got) if i in busy]
        if len(pts) >= 2:
            (n0, m0), (n1, m1) = pts[0], pts[-1]
            lines += [f"Steady RSS grew by {(m1 - m0) * 1024 / (n1 - n0):.0f} KiB per busy "
                      f"process from {n0} to {n1}.", ""]
        return lines
    one, ten, hundred, paths = got[:4]
    lines += [f"From 1 to 100 busy processes the agent's CPU went from {one['cpu_med']:.2f}% "
              f"to {hundred['cpu_med']:.2f}% of one CPU and its steady RSS from "
              f"{one['steady_mib']:.0f} to {hundred['steady_mib']:.0f} MiB; with 4096 call "
              f"paths in each of 10 processes (distinct stacks per window "
              f"{ten['stacks']:.0f} -> {paths['stacks']:.0f}), CPU went from "
              f"{ten['cpu_med']:.2f}% to {paths['cpu_med']:.2f}% and steady RSS from "
              f"{ten['steady_mib']:.0f} to {paths['steady_mib']:.0f} MiB. Whole-system "
              f"figures: other processes running on the machine count too.", ""]
    over = [row[0] for row, r in zip(rows, got) if r["steady_mib"] >= 50]
    peak = max(r["peak_mib"] for r in got)
    lines += [f"Aims: steady RSS under 50 MiB ("
              f"{fb.aim(not over, 'in every workload' if not over else 'over it with ' + ', '.join(over))}), "
              f"peak RSS under 50 MiB ({fb.aim(peak < 50, f'{peak:.1f} MiB at most')}).", ""]
    return lines


if __name__ == "__main__":
    fb.section_main(sys.modules[__name__], __doc__)

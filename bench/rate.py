#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Rate: a big host's sample rate, emulated on this machine, under each recorder.

N CPUs sampled at 99 Hz make 99 x N samples a second; this machine's CPUs
make as many at 99 x N / NCPU Hz each (the kernel's per-event cost does not
depend on which CPU takes it), with every ring scaled by the same ratio (an emulated ring takes
N / NCPU CPUs' samples). For each emulated host (this machine, 32, 64, 128
CPUs), one fx-bench-work per CPU (qsort with a callback: stacks through libc)
runs D seconds under each recorder in turn, the order rotating by round:

- `fxagent --once` with DWARF unwinding by compiled rules (the default);
- the same with `--unwind libdwfl`: every sample through libdwfl, as before
  the rules;
- `perf record -a --call-graph dwarf` (8 KiB stack copies; it unwinds
  nothing while recording: `perf report` does that later).

Per recorder, medians over the rounds: samples, its CPU while the workload
ran (share of one CPU, from its threads' schedstat), CPU per sample, samples
lost (rings that overflowed: fxagent's own count, perf's LOST records),
stacks cut short (fxagent). The agent sizes its rings for the rate itself
(ringplan.h: 2 x 200 ms of records, at most 64 MiB); perf is given the same
bytes with `-m`.

perf record costs more than the agent at these rates because it writes
every 8 KiB stack copy to its file (and unwinds nothing until `perf report`).

The rules agree with libdwfl frame by frame (`--unwind check`,
integration.unwind_check: Debian's stripped python3.11, xz, perl, sqlite3 and
fx-bench-work, all frames the same and every sample walked by the rules
alone; the test workloads, 93% of samples by the rules, fx-dbgframe's
.debug_frame-only code being libdwfl's), and unit.test_cfitab compares every
.eh_frame row of libc with binutils' readelf (7 of 23,757 rows left to
libdwfl: signal frames, getcontext's saved registers). The rules take 4
bytes a row and 12 bytes a function listed in .eh_frame_hdr, compiled the
first time a sample lands in the function: 272-675 KiB for the whole system,
compiled in 1-3 ms over a recording.

usage: bench/rate.py [--build DIR] [--quick] [--rounds N] [--duration S] [--hosts 32,64,128]
"""
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

RECORDERS = {
    "fxagent dwarf (rules)": ("fx", ["--unwind", "dwarf"]),
    "fxagent libdwfl": ("fx", ["--unwind", "libdwfl"]),
    "perf dwarf": ("perf", ["--call-graph", "dwarf"]),
}
LEAD, TAIL = 1.0, 0.5
# What the agent's ring plan gives in DWARF mode (16 KiB copies): 1 MiB a
# CPU at 99 Hz, growing with the rate, at most 64 MiB; perf gets as much.
BASE_RING = 1 << 20
MAX_RING = 64 << 20
LOST = re.compile(r"(\d+) samples were lost")
BY = re.compile(r"unwound by tables (\d+), by libdwfl (\d+)")


def add_args(ap):
    ap.add_argument("--rounds", type=int, help="rounds (default 3; --quick 1)")
    ap.add_argument("--duration", type=float,
                    help="seconds of workload per run (default 15; --quick 4)")
    ap.add_argument("--hosts", help="emulated host CPU counts (default 32,64,128)")


def hosts(a):
    more = [int(x) for x in (a.hosts or "32,64,128").split(",") if x.strip()]
    return [fb.NCPU] + [n for n in more if n > fb.NCPU]


def ring_bytes(n):
    r = BASE_RING * max(1, n // fb.NCPU)
    return min(r, MAX_RING)


def perf_lost(perf, path):
    out = subprocess.run([perf, "report", "-i", path, "--stats"], capture_output=True,
                         text=True).stdout
    m = re.search(r"LOST events:\s+(\d+)", out)
    lost = re.search(r"LOST_SAMPLES events:\s+(\d+)", out)
    return (int(m.group(1)) if m else 0) + (int(lost.group(1)) if lost else 0)


def run_one(ctx, name, n, dur, tmp):
    tool, extra = RECORDERS[name]
    hz = round(99 * n / fb.NCPU)
    rec = dur + LEAD + TAIL
    ring = ring_bytes(n)
    if tool == "fx":
        out = os.path.join(tmp, "r.json.gz")
        cmd = [ctx.agent, "--once", *extra, "--frequency", str(hz),
               "--duration", f"{int(rec * 1000)}ms", "--output", out, "--verbose"]
    else:
        out = os.path.join(tmp, "r.data")
        pages = ring // 4096
        cmd = [ctx.perf, "record", "-F", str(hz), "-a", "-m", str(pages), *extra, "-o", out,
               "--", "sleep", f"{rec:g}"]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    err = []
    drain = threading.Thread(target=lambda: err.append(proc.stderr.read()), daemon=True)
    drain.start()
    time.sleep(LEAD)
    c0 = fb.task_cpu_ns(proc.pid)
    t0 = time.monotonic()
    fb.work_ops(fb.start_work(ctx, fb.NCPU, dur))
    t1 = time.monotonic()
    c1 = fb.task_cpu_ns(proc.pid)
    code, _ = fb.wait_rusage(proc)
    drain.join()
    err = "".join(err)
    if code != 0:
        ctx.log(f"rate: {' '.join(cmd)} failed ({code}):\n{err[-2000:]}")
        return None
    r = {"cpu_pct": 100.0 * (c1 - c0) / 1e9 / (t1 - t0), "cpu_ns": c1 - c0}
    if tool == "fx":
        m = fb.ONCE_STATS.search(err)
        if not m:
            sys.exit(f"no stats line in fxagent's output:\n{err}")
        r["samples"] = int(m.group(5))
        lost = LOST.search(err)
        r["lost"] = int(lost.group(1)) if lost else 0
        d = fb.DWARF_STATS.search(err)
        r["truncated_pct"] = 100.0 * int(d.group(4)) / max(1, int(d.group(1))) if d else None
        r["unwind_med_us"] = float(d.group(2)) if d else None
        b = BY.search(err)
        r["by_rules_pct"] = (100.0 * int(b.group(1)) / max(1, int(b.group(1)) + int(b.group(2)))
                             if b else None)
    else:
        r["samples"] = fb.perf_samples(ctx.perf, out)
        r["lost"] = perf_lost(ctx.perf, out)
        r["truncated_pct"] = r["unwind_med_us"] = r["by_rules_pct"] = None
    # While the workload ran: the samples of that span, by the rate.
    span_samples = hz * fb.NCPU * (t1 - t0)
    r["us_per_sample"] = (c1 - c0) / 1e3 / max(1.0, min(span_samples, r["samples"]))
    os.unlink(out)
    return r


def run(ctx, a):
    rounds = a.rounds or (1 if ctx.quick else 3)
    dur = a.duration or (4 if ctx.quick else 15)
    ctx.need(ctx.agent, ctx.work)
    ctx.perf = shutil.which("perf")
    if not ctx.perf:
        sys.exit("perf is missing: apt-get install linux-perf")
    fb.need_root()
    names = list(RECORDERS)
    rows = []
    summary = []
    for n in hosts(a):
        res = {k: [] for k in names}
        with tempfile.TemporaryDirectory(prefix="fxbench-") as tmp:
            for i in range(rounds):
                for k in names[i % len(names):] + names[:i % len(names)]:
                    r = run_one(ctx, k, n, dur, tmp)
                    ctx.log(f"rate: {n} CPUs, round {i + 1}/{rounds}, {k}: {r}")
                    if r:
                        res[k].append(r)
        hz = round(99 * n / fb.NCPU)
        for k in names:
            runs = res[k]
            if not runs:
                rows.append([f"{n}", f"{hz} Hz", k, "failed"] + ["-"] * 6)
                continue
            med = {key: fb.med([r[key] for r in runs]) for key in runs[0]}
            rows.append([f"{n}" + (" (this machine)" if n == fb.NCPU else ""), f"{hz} Hz", k,
                         f"{med['samples']:.0f}", f"{med['cpu_pct']:.2f}%",
                         f"{med['us_per_sample']:.2f} us", f"{med['lost']:.0f}",
                         fb.f(med["truncated_pct"], "{:.2f}%"),
                         fb.f(med["unwind_med_us"], "{:.1f} us"),
                         fb.f(med["by_rules_pct"], "{:.1f}%")])
        rules = res["fxagent dwarf (rules)"]
        dwfl = res["fxagent libdwfl"]
        if rules and dwfl:
            x = fb.med([r["cpu_pct"] for r in rules])
            y = fb.med([r["cpu_pct"] for r in dwfl])
            summary.append(f"- {n} CPUs ({hz} Hz a CPU here): the rules' CPU {x:.2f}% against "
                           f"libdwfl's {y:.2f}% of one CPU ({x / y:.2f}x).")
    head = ["host CPUs emulated", "rate per CPU here", "recorder", "samples",
            "CPU, % of one CPU", "CPU per sample", "lost", "truncated", "unwind median",
            "walked by the rules alone"]
    return (["### Sample rate of big hosts", "",
             f"`bench/rate.py`: {dur:g} s of one fx-bench-work per CPU under each recorder, "
             f"{rounds} rounds, order rotating; medians. Rings: the agent's own plan for the "
             f"rate; perf's the same bytes (1 MiB times host CPUs / {fb.NCPU}, at most "
             f"64 MiB).", ""]
            + fb.table(head, rows) + summary + [""])


if __name__ == "__main__":
    fb.section_main(sys.modules[__name__], __doc__)

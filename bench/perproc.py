#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Per process: what the agent's memory grows by for each busy process.

One cgroup holds N CPU-bound fx-bench-work processes (N = 1, 10, 100 by
default); the agent (daemon mode, DWARF unwinding, the default) samples it
as its one `cgroup:` target with W-second windows for T seconds per N. A
cgroup target keeps the rest of the machine (other users' builds and tests)
out of the figures, which a whole-system run (bench/scale.py) counts.

Per N: steady RSS (median VmRSS over the second half), peak RSS, the
processes whose unwinding state the agent held and what the caches held
at the last window (fxagent_cache_entries / _bytes of the metrics file);
then the steady RSS each process added, from the smallest N to the largest.

With the compiled unwind rules (shared by every process that maps a file)
no busy process needs libdwfl state, and memory grows by about 4 KiB a busy
process: its process-table entry (1-2 KiB with its mappings) and malloc's
slack; the object table grows by nothing (every process maps the same
files). With a Dwfl per process (what `--unwind libdwfl` keeps: its modules
and their parsed CFI) memory grew by about 400 KiB a busy process, up to 256
processes (about 100 MiB at that bound). A process that stops running gives
its entry, and any Dwfl, back after a whole idle window.

usage: bench/perproc.py [--build DIR] [--quick] [--procs 1,10,100] [--seconds T] [--window W]
"""
import os
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import daemon  # noqa: E402
import fxbench as fb  # noqa: E402


def add_args(ap):
    ap.add_argument("--procs", default="1,10,100", help="busy processes per run (1,10,100)")
    ap.add_argument("--seconds", type=int, help="per run (default 30; --quick 10)")
    ap.add_argument("--window", type=int, help="window seconds (default 5; --quick 2)")


def run_one(ctx, mount, n, t, w, tmp):
    name = f"fxbench-perproc-{os.getpid()}-{n}"
    cg = os.path.join(mount, name)
    out = os.path.join(tmp, "chunks")
    cfg = os.path.join(tmp, "fxagent.yaml")
    prom = os.path.join(tmp, "fxagent.prom")
    daemon.write_config(cfg, w, out, prom, [("work", name)])
    os.mkdir(cg)
    work = []
    try:
        for _ in range(n):
            work.append(daemon.start_in_cgroup(ctx, cg, t + 30))
        ag = subprocess.Popen([ctx.agent, "--config", cfg], stderr=subprocess.PIPE, text=True)
        err = []
        drain = threading.Thread(target=lambda: err.append(ag.stderr.read()), daemon=True)
        drain.start()
        watch = fb.Watch(ag.pid, 0.25)
        t0 = time.monotonic()
        while time.monotonic() - t0 < t:
            time.sleep(0.5)
            if ag.poll() is not None:
                drain.join()
                sys.exit(f"fxagent exited {ag.returncode}:\n{''.join(err)}")
        t1 = time.monotonic()
        caches = daemon.cache_figures(prom)
        fb.stop(ag)
        drain.join()
        watch.stop()
    finally:
        fb.kill_all(work)
        try:
            os.rmdir(cg)
        except OSError:
            pass
    return {"steady_mib": (watch.steady_kib(t0, t1) or 0) / 1024.0,
            "peak_mib": watch.hwm_kib / 1024.0, "caches": caches}


def run(ctx, a):
    t = a.seconds or (10 if ctx.quick else 30)
    w = a.window or (2 if ctx.quick else 5)
    ns = [int(x) for x in a.procs.split(",")]
    ctx.need(ctx.agent, ctx.work)
    fb.need_root()
    mount = daemon.cgroup2_mount()
    rows, got = [], []
    for n in ns:
        with tempfile.TemporaryDirectory(prefix="fxbench-") as tmp:
            r = run_one(ctx, mount, n, t, w, tmp)
        ctx.log(f"perproc: {n} processes: steady {r['steady_mib']:.1f} MiB, peak "
                f"{r['peak_mib']:.1f} MiB, caches {r['caches']}")
        got.append(r)
        c = r["caches"]
        rows.append([str(n), f"{r['steady_mib']:.1f} MiB", f"{r['peak_mib']:.1f} MiB",
                     fb.f(c.get("unwind", (None, None))[0], "{:.0f}"),
                     ", ".join(f"{k} {e:.0f} ({b / 1024:.0f} KiB)" for k, (e, b) in c.items()
                               if k in ("processes", "threads", "objects") and b is not None)])
    lines = ["### Per process", "",
             f"`bench/perproc.py`: the agent with one `cgroup:` target holding N busy "
             f"`fx-bench-work` (DWARF unwinding), {w} s windows, {t} s per N.", ""]
    lines += fb.table(["busy processes", "steady RSS", "peak RSS",
                       "processes unwound (cached)", "tables at the last window"], rows)
    if len(got) >= 2:
        d = (got[-1]["steady_mib"] - got[0]["steady_mib"]) * 1024 / (ns[-1] - ns[0])
        lines += [f"Steady RSS grew by {d:.0f} KiB per busy process from {ns[0]} to {ns[-1]}.",
                  ""]
    return lines


if __name__ == "__main__":
    fb.section_main(sys.modules[__name__], __doc__)

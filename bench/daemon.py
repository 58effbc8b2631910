#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The agent (daemon mode) with N cgroup targets.

Makes N cgroups under the cgroup2 mount, one CPU-bound fx-bench-work in each,
runs `fxagent` with one `cgroup:` target per cgroup and W-second windows for D
seconds, and prints: the agent's CPU (share of one CPU, from its threads'
schedstat) and RSS sampled along the run (to see that it stays flat), the
time the sampler thread spent on each window rotation (average and maximum,
from the agent's own stats), the chunk bytes per sample, and where the
resident memory was at the last window (fxagent_memory_bytes{part} of the
metrics file, and malloc's own counts), with what each cache held then
(fxagent_cache_entries and fxagent_cache_bytes). --max-memory sets
symbolization.max_memory (the default: the config's default).

Where the memory goes: the files mapped (the agent's code and its 50
libraries: libcurl alone 6 MiB of them once loaded, libcrypto 3 MiB) are the
largest part, then malloc's arenas. glibc's second arena is the publisher's:
with MALLOC_ARENA_MAX=1 its memory moves to the main heap and the total stays
the same (38.3-38.4 MiB against 38.5 MiB, two runs each, alternating), so
bounding arenas does not lower it.

--max-memory 8MiB against the default 32 MiB, with libc's DWARF read into the
heap (13.5 MiB: no usable debuginfod_cache for the mapped copies): at 8 MiB
libc's DWARF is read again in every window that has a new libc address, about
0.3 s of CPU a window (bench/symbolize.py's 67 ms is the cold look-up of 2000
addresses alone). It saved 7-13 MiB between windows at 30 s windows and next
to nothing at 5 s ones, cost 4.5 times the CPU at 30 s windows and 11-17
times at 5 s, and the peak was higher (45.7 against 40.3 MiB). The peak is
what a host must have room for, so the default stays 32 MiB.

usage: bench/daemon.py [--build DIR] [--quick] [--targets N] [--duration S] [--window W]
                       [--max-memory SIZE]
"""
import glob
import os
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fxbench as fb  # noqa: E402


def add_args(ap):
    ap.add_argument("--targets", type=int, default=10)
    ap.add_argument("--duration", type=int, help="seconds (default 300 alone, 60 in run.py; "
                    "--quick 12)")
    ap.add_argument("--window", type=int, help="window seconds (default 10; --quick 3)")
    ap.add_argument("--max-memory", help="symbolization.max_memory, as the config writes it "
                    "(8MiB, ...; default: the config's default)")


def cgroup2_mount():
    with open("/proc/self/mountinfo") as f:
        mounts = [line.split(" - ")[0].split()[4] for line in f if " - cgroup2 " in line]
    for want in ("/sys/fs/cgroup", "/sys/fs/cgroup/unified"):
        if want in mounts:
            return want
    if not mounts:
        sys.exit("no cgroup2 mount")
    return mounts[0]


def memory_parts(path):
    """{part: bytes} of fxagent_memory_bytes, then malloc's used and free bytes and
    its thread arenas, from the agent's metrics file; {} without one."""
    out = {}
    try:
        with open(path) as f:
            for line in f:
                if line.startswith("fxagent_memory_bytes{part=\""):
                    out[line.split('"')[1]] = float(line.split()[-1])
                elif line.startswith(("fxagent_malloc_used_bytes ", "fxagent_malloc_free_bytes ")):
                    out["malloc " + line.split("_")[2]] = float(line.split()[-1])
                elif line.startswith("fxagent_malloc_arenas "):
                    out["thread arenas"] = int(float(line.split()[-1]))
    except OSError:
        pass
    return out


def cache_figures(path):
    """{cache: (entries, bytes or None)} of the fxagent_cache_* series of the
    agent's metrics file; {} without one."""
    entries, nbytes = {}, {}
    try:
        with open(path) as f:
            for line in f:
                for name, into in (("fxagent_cache_entries{", entries),
                                   ("fxagent_cache_bytes{", nbytes)):
                    if line.startswith(name):
                        into[line.split('"')[1]] = float(line.split()[-1])
    except OSError:
        pass
    return {c: (n, nbytes.get(c)) for c, n in entries.items()}


def write_config(path, window, out, prom, targets, max_memory=None):
    """The daemon's config at @path: @window-second windows into @out, the
    metrics file @prom, one target per (name, cgroup) of @targets."""
    with open(path, "w") as f:
        f.write(f"window:\n  seconds: {window}\noutput:\n  directory: {out}\n"
                f"metrics:\n  textfile: {prom}\n")
        if max_memory:
            f.write(f"symbolization:\n  max_memory: {max_memory}\n")
        f.write("targets:\n")
        for name, cg in targets:
            f.write(f"  - name: {name}\n    cgroup: /{cg}\n")


def start_in_cgroup(ctx, cgroup_dir, seconds):
    """A busy fx-bench-work for @seconds, moved into @cgroup_dir."""
    p = subprocess.Popen([ctx.work, str(seconds)], stdout=subprocess.DEVNULL)
    with open(os.path.join(cgroup_dir, "cgroup.procs"), "w") as f:
        f.write(str(p.pid))
    return p


def run(ctx, a):
    dur = a.duration or (12 if ctx.quick else getattr(ctx, "daemon_seconds", 300))
    win = a.window or (3 if ctx.quick else 10)
    ctx.need(ctx.agent, ctx.work)
    fb.need_root()
    mount = cgroup2_mount()
    names = [f"fxbench-{os.getpid()}-{i}" for i in range(a.targets)]
    procs = []
    with tempfile.TemporaryDirectory(prefix="fxbench-") as tmp:
        out = os.path.join(tmp, "chunks")
        cfg = os.path.join(tmp, "fxagent.yaml")
        prom = os.path.join(tmp, "fxagent.prom")
        write_config(cfg, win, out, prom, [(n, n) for n in names], a.max_memory)
        try:
            for n in names:
                os.mkdir(os.path.join(mount, n))
                procs.append(start_in_cgroup(ctx, os.path.join(mount, n), dur + 30))
            ag = subprocess.Popen([ctx.agent, "--config", cfg, "--verbose"],
                                  stderr=subprocess.PIPE, text=True)
            err = []
            drain = threading.Thread(target=lambda: err.append(ag.stderr.read()), daemon=True)
            drain.start()
            time.sleep(2)
            series = []
            t0, c0 = time.monotonic(), fb.task_cpu_ns(ag.pid)
            step = max(2, dur // 30)
            while time.monotonic() - t0 < dur:
                time.sleep(step)
                if ag.poll() is not None:
                    drain.join()
                    sys.exit(f"fxagent exited {ag.returncode}:\n{''.join(err)}")
                series.append((time.monotonic() - t0, fb.task_cpu_ns(ag.pid),
                               (fb.status_kib(ag.pid, "VmRSS") or 0) / 1024.0))
                ctx.log(f"daemon: t={series[-1][0]:5.0f} s  agent cpu "
                        f"{(series[-1][1] - c0) / 1e9:.2f} s  rss {series[-1][2]:.1f} MiB")
            t1, c1 = time.monotonic(), fb.task_cpu_ns(ag.pid)
            mem = memory_parts(prom)
            caches = cache_figures(prom)
            fb.stop(ag)
            drain.join()
        finally:
            fb.kill_all(procs)
            for n in names:
                try:
                    os.rmdir(os.path.join(mount, n))
                except OSError:
                    pass
        err = "".join(err)
        m = fb.DAEMON_STATS.search(err)
        chunks = [fb.chunk_figures(c) for c in glob.glob(os.path.join(out, "*.json.gz"))]
    nbytes = sum(c["bytes"] for c in chunks)
    nsamples = sum(c["samples"] for c in chunks)
    rss = [r for _, _, r in series]
    half = rss[len(rss) // 2:]
    rows = [["agent CPU", f"{100 * (c1 - c0) / 1e9 / (t1 - t0):.3f}% of one CPU"],
            ["RSS first / last / max of the second half",
             f"{rss[0]:.1f} / {rss[-1]:.1f} / {max(half):.1f} MiB"]]
    if m:
        # The kernel updates the high-water mark lazily: a VmRSS seen earlier
        # can exceed the VmHWM read at exit.
        rows += [["peak RSS", f"{max(float(m.group(9)), max(rss)):.1f} MiB"],
                 ["windows, chunks (errors)", f"{m.group(1)}, {m.group(2)} ({m.group(3)})"],
                 ["rotation pause, wall clock, avg / max", f"{m.group(5)} / {m.group(6)} us"],
                 ["rotation pause, sampler thread CPU, avg / max",
                  f"{m.group(7)} / {m.group(8)} us"]]
    if mem:
        rows.append(["memory at the last window, MiB", ", ".join(
            f"{k} {v / 1048576:.1f}" if k != "thread arenas" else f"{v} {k}"
            for k, v in mem.items())])
    if caches:
        rows.append(["caches at the last window: entries (MiB)", ", ".join(
            f"{c} {n:.0f}" + (f" ({b / 1048576:.2f})" if b is not None else "")
            for c, (n, b) in caches.items())])
    rows.append(["chunk bytes per sample", f"{nbytes / max(1, nsamples):.1f} ({nbytes} bytes, "
                 f"{nsamples} samples, {len(chunks)} chunks)"])
    rot = float(m.group(6)) / 1000 if m else None
    grow = rss[-1] - rss[0]
    aims = [f"Aims: RSS under 50 MiB ({fb.aim(max(rss) < 50, f'{max(rss):.1f} MiB')}) and "
            f"flat ({fb.aim(grow < 0.1 * rss[0], f'{grow:+.1f} MiB from first to last')}), "
            f"rotation pause under 1 ms "
            f"({fb.aim(rot is not None and rot < 1, fb.f(rot, '{:.2f} ms at most'))}).", ""]
    lines = ["### Cgroup targets", "",
             f"`bench/daemon.py`: the agent with {a.targets} `cgroup:` targets, one "
             f"`fx-bench-work` in each (every CPU busy), {win} s windows, for {dur} s"
             + (f", symbolization.max_memory {a.max_memory}" if a.max_memory else "") + ".",
             ""]
    return lines + fb.table(["figure", "value"], rows) + aims


if __name__ == "__main__":
    fb.section_main(sys.modules[__name__], __doc__)

#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Rate: a big host's sample rate, emulated on this machine, under each recorder.

N CPUs sampled at 99 Hz make 99 x N samples a second; this machine's CPUs
make as many at 99 x N / NCPU Hz each (the kernel's per-event cost does not
depend on which CPU takes it), with every ring scaled by the same ratio (an emulated ring takes
N / NCPU CPUs' samples). For each emulated host (this machine, 32, 64, 128
CPUs), one fx-bench-work per CPU (qsort with a callback: stacks through libc)
runs D seconds under each recorder in turn, the order rotating by round:

- the agent as users run it, a daemon: whole system, 10 s windows; the
  workload runs whole windows (its duration rounded up, at least 2), and the
  agent's threads are counted from the chunk of the window before it to the
  chunk of its last: sampling, unwinding, symbolizing, encoding, compressing
  and writing, all threads; publishing per sample from the agent's own
  counter (fxagent_publish_cpu_seconds_total over fxagent_samples_total);
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

With `--baseline DIR` (another build, e.g. of the commit before a change),
its daemon runs beside this build's in the same rounds, whole system and
with the workload's cgroup: rows "... (baseline)" and a line of ratios, the
side-by-side figures a change's cost is judged by. `--recorders` picks
recorders by name (a comma-separated list of substrings).

usage: bench/rate.py [--build DIR] [--quick] [--rounds N] [--duration S] [--hosts 32,64,128]
                     [--baseline DIR] [--recorders daemon,perf]
"""
import gzip
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import zlib

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fxbench as fb  # noqa: E402

RECORDERS = {
    "fxagent daemon": ("fxd", []),
    "fxagent daemon, the workload's cgroup": ("fxd", ["cgroup"]),
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
DAEMON_WINDOW = 10
BY = re.compile(r"unwound by tables (\d+), by libdwfl (\d+)")


def add_args(ap):
    ap.add_argument("--rounds", type=int, help="rounds (default 3; --quick 1)")
    ap.add_argument("--duration", type=float,
                    help="seconds of workload per run (default 15; --quick 4)")
    ap.add_argument("--hosts", help="emulated host CPU counts (default 32,64,128)")
    ap.add_argument("--baseline", help="another build directory whose daemon runs beside "
                    "this one's in the same rounds")
    ap.add_argument("--recorders", help="only the recorders whose names hold one of these "
                    "comma-separated words")


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


def thread_cpu_ns(pid):
    """{thread name: ns on a CPU} of @pid's live threads."""
    out = {}
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return out
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/comm") as f:
                name = f.read().strip()
            with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                out[name] = out.get(name, 0) + int(f.read().split()[0])
        except (OSError, ValueError, IndexError):
            pass
    return out


def metrics(path):
    out = {}
    try:
        with open(path) as f:
            for ln in f:
                m = re.match(r"^(fxagent_[a-z_]+) (\S+)$", ln)
                if m:
                    out[m[1]] = float(m[2])
    except OSError:
        pass
    return out


def gzip_levels(path):
    """[(level, compressed bytes, best of 5 ms)] for the JSON of chunk @path,
    fed to zlib (the agent's: Debian's zlib1g) in 64 KiB pieces as the agent
    feeds it."""
    with gzip.open(path, "rb") as f:
        raw = f.read()
    out = []
    for level, piece in ((1, 65536), (2, 65536), (4, 65536), (6, 65536), (1, 16384),
                         (1, 262144)):
        best, size = None, 0
        for _ in range(5):
            t = time.perf_counter()
            z = zlib.compressobj(level, zlib.DEFLATED, 31, 8)
            size = sum(len(z.compress(raw[i:i + piece])) for i in range(0, len(raw), piece))
            size += len(z.flush())
            el = time.perf_counter() - t
            best = el if best is None else min(best, el)
        out.append((level, piece, len(raw), size, best * 1e3))
    return out


def run_daemon(ctx, n, dur, tmp, cgroup=False, agent=None):
    """The agent as users run it: whole system, 10 s windows, every thread
    counted over whole windows. The workload starts at a window boundary and
    runs @dur rounded up to whole windows; the agent's CPU is taken when the
    chunk of the window before is written and when the last one's is, so
    what writing the workload's windows cost is in it.

    With @cgroup, the workload runs in a cgroup of its own and the agent
    samples that cgroup alone: the agent's own threads are not sampled at
    the emulated rate. A real N-CPU host samples them at 99 Hz, as every
    thread; the whole-system emulation samples them N / NCPU times as often,
    and symbolizes their long tail of addresses every window."""
    hz = round(99 * n / fb.NCPU)
    out = os.path.join(tmp, "chunks")
    prom = os.path.join(tmp, "fxagent.prom")
    cfg = os.path.join(tmp, "fxagent.yaml")
    os.makedirs(out, exist_ok=True)
    # the daemon before in this directory left its counters
    if os.path.exists(prom):
        os.unlink(prom)
    cg = None
    with open(cfg, "w") as f:
        f.write(f"sampling:\n  frequency: {hz}\nwindow:\n  seconds: {DAEMON_WINDOW}\n"
                f"output:\n  directory: {out}\nmetrics:\n  textfile: {prom}\n")
        if cgroup:
            root = fb.cgroup2_root()
            if not root:
                ctx.log("rate: no cgroup2 hierarchy mounted: no row for the workload's cgroup")
                return None
            name = f"fxbench-rate-{os.getpid()}"
            cg = os.path.join(root, name)
            os.makedirs(cg, exist_ok=True)
            f.write(f"targets:\n  - name: work\n    cgroup: /{name}\n")
    try:
        return daemon_runs(ctx, agent or ctx.agent, n, dur, tmp, cfg, out, prom, cg)
    finally:
        if cg:
            try:
                os.rmdir(cg)
            except OSError as e:
                ctx.log(f"rate: cannot remove {cg}: {e}")


def daemon_runs(ctx, agent, n, dur, tmp, cfg, out, prom, cg):
    proc = subprocess.Popen([agent, "--config", cfg], stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)
    err = []
    drain = threading.Thread(target=lambda: err.append(proc.stderr.read()), daemon=True)
    drain.start()

    def chunks():
        # the metrics are written after the chunk: counting files would
        # read the counters of the window before
        return int(metrics(prom).get("fxagent_chunks_written_total", 0))

    def wait_chunks(k, until):
        while chunks() < k and time.time() < until and proc.poll() is None:
            time.sleep(0.02)
        return chunks() >= k

    windows = max(2, -(-int(dur) // DAEMON_WINDOW))
    try:
        # the first (partial) window written: the agent is steady
        if not wait_chunks(1, time.time() + 3 * DAEMON_WINDOW):
            ctx.log(f"rate: the daemon wrote no chunk: {''.join(err)[-2000:]}")
            return None
        b0 = (time.time() // DAEMON_WINDOW + 1) * DAEMON_WINDOW
        have = chunks()
        time.sleep(max(0.0, b0 - time.time()))
        work = fb.start_work(ctx, fb.NCPU, windows * DAEMON_WINDOW, cgroup=cg)
        ok = wait_chunks(have + 1, b0 + DAEMON_WINDOW)
        c0, m0 = thread_cpu_ns(proc.pid), metrics(prom)
        fb.work_ops(work)
        ok = ok and wait_chunks(have + 1 + windows, b0 + (windows + 3) * DAEMON_WINDOW)
        c1, m1 = thread_cpu_ns(proc.pid), metrics(prom)
    finally:
        code = fb.stop(proc)
        drain.join()
    if not ok or code != 0:
        ctx.log(f"rate: the daemon failed (exit {code}, chunks {chunks()}):\n"
                f"{''.join(err)[-2000:]}")
        return None
    span = windows * DAEMON_WINDOW

    def d(k):
        return m1.get(k, 0) - m0.get(k, 0)
    # the biggest chunk, for the gzip levels
    names = sorted(os.listdir(out), key=lambda x: os.path.getsize(os.path.join(out, x)))
    big = os.path.join(tmp, f"big-{n}.json.gz")
    if names:
        os.replace(os.path.join(out, names[-1]), big)
    for x in os.listdir(out):
        os.unlink(os.path.join(out, x))
    total = sum(c1.values()) - sum(c0.values())
    pub = c1.get("fx-publish", 0) - c0.get("fx-publish", 0)
    samples = d("fxagent_samples_total")
    return {"cpu_pct": 100.0 * total / 1e9 / span, "cpu_ns": total,
            "publish_pct": 100.0 * pub / 1e9 / span,
            "sampling_pct": 100.0 * (total - pub) / 1e9 / span,
            "samples": samples, "lost": d("fxagent_lost_samples_total"),
            "us_per_sample": total / 1e3 / max(1.0, samples),
            "publish_us_per_sample": d("fxagent_publish_cpu_seconds_total") * 1e6
            / max(1.0, samples),
            "truncated_pct": 100.0 * d("fxagent_truncated_stacks_total") / max(1.0, samples),
            "unwind_med_us": None, "by_rules_pct": None}


def run_one(ctx, name, n, dur, tmp):
    tool, extra = RECORDERS[name]
    if tool == "fxd":
        return run_daemon(ctx, n, dur, tmp, cgroup="cgroup" in extra,
                          agent=ctx.baseline if "baseline" in extra else None)
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
    ctx.baseline = None
    if a.baseline:
        ctx.baseline = os.path.join(os.path.abspath(a.baseline), "fxagent")
        ctx.need(ctx.baseline)
        for k in ("fxagent daemon", "fxagent daemon, the workload's cgroup"):
            RECORDERS[f"{k} (baseline)"] = (RECORDERS[k][0], RECORDERS[k][1] + ["baseline"])
        names = list(RECORDERS)
    if a.recorders:
        words = [w.strip() for w in a.recorders.split(",") if w.strip()]
        names = [k for k in names if any(w in k for w in words)]
    rows = []
    summary = []
    aims = []
    levels = None
    for n in hosts(a):
        res = {k: [] for k in names}
        with tempfile.TemporaryDirectory(prefix="fxbench-") as tmp:
            for i in range(rounds):
                for k in names[i % len(names):] + names[:i % len(names)]:
                    r = run_one(ctx, k, n, dur, tmp)
                    ctx.log(f"rate: {n} CPUs, round {i + 1}/{rounds}, {k}: {r}")
                    if r:
                        res[k].append(r)
            big = os.path.join(tmp, f"big-{n}.json.gz")
            if n == hosts(a)[-1] and os.path.exists(big):
                levels = (n, gzip_levels(big))
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
        for k in ("fxagent daemon", "fxagent daemon, the workload's cgroup"):
            new, base = res.get(k), res.get(f"{k} (baseline)")
            if new and base:
                def ratio(key):
                    return fb.med([r[key] for r in new]) / max(1e-9, fb.med([r[key] for r in base]))
                summary.append(
                    f"- {n} CPUs, {k[len('fxagent '):]}: this build against the baseline "
                    f"{ratio('cpu_pct'):.2f}x the CPU (sampling {ratio('sampling_pct'):.2f}x, "
                    f"fx-publish {ratio('publish_pct'):.2f}x), medians "
                    f"{fb.med([r['cpu_pct'] for r in new]):.2f}% against "
                    f"{fb.med([r['cpu_pct'] for r in base]):.2f}% of one CPU.")
        dmn, perf = res.get("fxagent daemon"), res.get("perf dwarf")
        if dmn:
            x = fb.med([r["cpu_pct"] for r in dmn])
            pub = fb.med([r["publish_us_per_sample"] for r in dmn])
            lost = max(r["lost"] for r in dmn)
            pf = fb.med([r["cpu_pct"] for r in perf]) if perf else None
            summary.append(
                f"- {n} CPUs, the daemon: {x:.2f}% of one CPU (sampling "
                f"{fb.med([r['sampling_pct'] for r in dmn]):.2f}%, fx-publish "
                f"{fb.med([r['publish_pct'] for r in dmn]):.2f}%), publishing {pub:.2f} us a "
                f"sample by its own counter, {lost:.0f} lost at most; perf "
                f"{fb.f(pf, '{:.2f}%')} in the same run.")
            limit = {64: 1.2, 128: 2.5}.get(n)
            if limit:
                aims.append(fb.aim(x <= limit and lost == 0,
                                   f"{n} CPUs: the daemon at most {limit:g}% of one CPU, none "
                                   f"lost ({x:.2f}%, {lost:.0f} lost)"))
            if n == 64:
                aims.append(fb.aim(pub <= 0.5, f"{n} CPUs: publishing at most 0.5 us a sample "
                                   f"({pub:.2f} us)"))
        own = res.get("fxagent daemon, the workload's cgroup")
        if own:
            summary.append(
                f"- {n} CPUs, the daemon sampling the workload's cgroup alone (its own threads "
                f"not sampled at {hz} Hz, as on a real {n}-CPU host): "
                f"{fb.med([r['cpu_pct'] for r in own]):.2f}% of one CPU (sampling "
                f"{fb.med([r['sampling_pct'] for r in own]):.2f}%, fx-publish "
                f"{fb.med([r['publish_pct'] for r in own]):.2f}%), publishing "
                f"{fb.med([r['publish_us_per_sample'] for r in own]):.2f} us a sample.")
        rules = res.get("fxagent dwarf (rules)")
        dwfl = res.get("fxagent libdwfl")
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
            + fb.table(head, rows) + summary + [""]
            + [a + ("  " if i + 1 < len(aims) else "") for i, a in enumerate(aims)]
            + ([""] if aims else []) + level_lines(levels))


def level_lines(levels):
    """What each gzip level makes of the biggest daemon chunk."""
    if not levels:
        return []
    n, rows = levels
    ref = [r for r in rows if r[0] == 6][0]
    return ([f"gzip levels on the {n}-CPU daemon's biggest chunk ({rows[0][2] / 1e6:.1f} MB "
             "of JSON; Python's zlib, the same library; best of 5; the agent writes level "
             "1 in 64 KiB pieces):", ""]
            + fb.table(["level", "pieces", "compressed", "vs level 6", "time", "vs level 6"],
                       [[str(lv), f"{piece // 1024} KiB", f"{size / 1024:.0f} KiB",
                         f"{size / ref[3]:.2f}x", f"{ms:.1f} ms", f"{ms / ref[4]:.2f}x"]
                        for lv, piece, _, size, ms in rows])
            + [""])


if __name__ == "__main__":
    fb.section_main(sys.modules[__name__], __doc__)

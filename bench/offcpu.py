#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Off-CPU time: what recording waits costs, at 1,000, 20,000 and 100,000
context switches a second.

fx-bench-switch makes the switches (pairs of threads passing a byte through
pipes); the rate is the kernel's count (/proc/PID/task/*/status), not its.
For each rate, in turns, R rounds, each S seconds once settled:
- the switcher alone;
- the daemon, whole system, 10 s windows, without off-CPU;
- the daemon with sampling.off_cpu at its defaults (min_block the sampling interval, 10.1 ms; budget 250
  sampled waits a second per CPU);
- `perf record -a -e sched:sched_switch --call-graph dwarf` (every switch
  with a stack copy, perf's way without BPF); and `perf record --off-cpu` when
  this perf has it (Debian's is built without BPF skeletons: said so).
Per run: the CPU of every thread of the agent (or perf), as a share of one
CPU, from /proc/PID/task/*/schedstat over the S seconds; the BPF program's
own time (run_time_ns of its fd, kernel.bpf_stats_enabled on for the run),
which the kernel charges to the threads that switch; the switcher's own CPU
per switch against the run without a profiler; and the waits recorded and
timed without their stacks (the metrics file). Medians of the rounds.

With off_cpu on, whether each thread's time adds up: for every thread of
fx-bench-switch that lived through the measured interval (the same tid and
start time in /proc at both its ends) and every chunk whose window lies
within it, on-CPU (its CPU samples x meta.interval) plus off-CPU (the
weights, ms, of its "(off-CPU)" track) against the chunk's length
(meta.fxagent windowEnd - windowStart): the share of these (thread, chunk)
pairs within 15%, their median and worst sum/length, and those chunks'
meta.fxagent.offCpu: the waits timed without a stack (the budget binding)
and the waits lost. --quick runs 1 s windows so that some fit in its 5 s.

usage: bench/offcpu.py [--build DIR] [--quick] [--seconds S] [--rounds R]
"""
import gzip
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fxbench as fb  # noqa: E402

RATES = (1000, 20000, 100000)
# The issue's rule: on + off within SPREAD of the chunk's length for SHARE of
# the (thread, chunk) pairs.
SPREAD = 0.15
SHARE = 0.90


def add_args(ap):
    ap.add_argument("--seconds", type=int, help="measured per run (default 20; --quick 5)")
    ap.add_argument("--rounds", type=int, help="per rate and setting (default 3; --quick 1)")


def switches(pid):
    n = 0
    try:
        for t in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{t}/status") as f:
                n += sum(int(ln.split()[1]) for ln in f if "ctxt_switches" in ln)
    except (OSError, ValueError):
        pass
    return n


def bpf_run_ns(pid):
    """run_time_ns of the BPF programs @pid holds (0 without)."""
    total = 0
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return 0
    for fd in fds:
        try:
            if os.readlink(f"/proc/{pid}/fd/{fd}") != "anon_inode:bpf-prog":
                continue
            with open(f"/proc/{pid}/fdinfo/{fd}") as f:
                m = re.search(r"^run_time_ns:\s+(\d+)", f.read(), re.M)
            total += int(m[1]) if m else 0
        except OSError:
            pass
    return total


def threads_started(pid):
    """{tid: start time (ticks since boot)} of @pid's threads."""
    out = {}
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return out
    for t in tids:
        try:
            with open(f"/proc/{pid}/task/{t}/stat") as f:
                stat = f.read()
            out[int(t)] = int(stat[stat.rindex(")") + 2:].split()[19])
        except (OSError, ValueError, IndexError):
            pass
    return out


def chunk_threads(path):
    """meta and {(pid, tid): [on-CPU samples, off-CPU ms, name]} of a chunk:
    CPU tracks weigh samples (each one interval), off-CPU tracks ("NAME
    (off-CPU)") milliseconds."""
    with gzip.open(path, "rt", encoding="utf-8") as f:
        p = json.load(f)
    out = {}
    for th in p["threads"]:
        try:
            key = (int(th["pid"]), int(th["tid"]))
        except (KeyError, TypeError, ValueError):
            continue
        s = th["samples"]
        w = s.get("weight")
        total = sum(w) if w else s["length"]
        row = out.setdefault(key, [0, 0.0, th.get("name", "")])
        kind = s.get("weightType", "samples")
        if kind == "tracing-ms":
            row[1] += total
        elif kind == "samples":
            row[0] += total
    return p["meta"], out


def adds_up(outdir, pid, tids, a_ms, b_ms):
    """The (thread, chunk) pairs of @pid's threads @tids over the chunks in
    @outdir whose windows lie within [a_ms, b_ms] (wall clock): (pairs, the
    chunks' meta.fxagent.offCpu, chunks outside)."""
    pairs, offcpu, outside = [], [], 0
    names = sorted(os.listdir(outdir)) if os.path.isdir(outdir) else []
    for name in names:
        if not name.endswith(".json.gz"):
            continue
        meta, rows = chunk_threads(os.path.join(outdir, name))
        fx = meta.get("fxagent", {})
        start, end = fx.get("windowStart"), fx.get("windowEnd")
        if start is None or end is None or not (a_ms <= start < end <= b_ms):
            outside += 1
            continue
        offcpu.append(fx.get("offCpu") or {})
        for tid in tids:
            on_n, off, tname = rows.get((pid, tid), [0, 0.0, "(no track)"])
            pairs.append({"tid": tid, "main": tid == pid, "name": tname, "seq": fx.get("seq"),
                          "on": on_n * meta["interval"], "off": off, "len": end - start})
    return pairs, offcpu, outside


def pct(part, whole):
    return fb.f(100.0 * part / whole if whole else None, "{:.1f}%")


def metric(path, name):
    try:
        with open(path) as f:
            m = re.search(rf"^{name} (\S+)$", f.read(), re.M)
        return float(m[1]) if m else None
    except OSError:
        return None


def one(ctx, tmp, rate, mode, seconds, settle, window):
    """One run: figures of the profiler (mode: None, 'agent', 'offcpu', 'perf')."""
    sw = subprocess.Popen([ctx.switch, str(rate), str(seconds + settle + 20)])
    prof = None
    prom = os.path.join(tmp, f"m-{mode}.prom")
    chunks = os.path.join(tmp, f"chunks-{mode}")
    for old in (prom, chunks):
        if os.path.isdir(old):
            shutil.rmtree(old)
        elif os.path.exists(old):
            os.unlink(old)
    if mode in ("agent", "offcpu"):
        cfg = os.path.join(tmp, f"{mode}.yaml")
        with open(cfg, "w") as f:
            f.write(f"window:\n  seconds: {window}\noutput:\n  directory: {chunks}\n"
                    f"metrics:\n  textfile: {prom}\n"
                    f"sampling:\n  off_cpu:\n    enabled: {'true' if mode == 'offcpu' else 'false'}\n")
        prof = subprocess.Popen([ctx.agent, "--config", cfg], stderr=subprocess.DEVNULL)
    elif mode == "perf":
        prof = subprocess.Popen(["perf", "record", "-q", "-a", "-e", "sched:sched_switch",
                                 "--call-graph", "dwarf", "-o", os.path.join(tmp, "perf.data")],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(settle)
    lived0, w0 = threads_started(sw.pid), time.time() * 1000.0
    t0, s0, c0 = time.monotonic(), switches(sw.pid), fb.task_cpu_ns(sw.pid)
    p0 = fb.task_cpu_ns(prof.pid) if prof else 0
    b0 = bpf_run_ns(prof.pid) if prof else 0
    time.sleep(seconds)
    t1, s1, c1 = time.monotonic(), switches(sw.pid), fb.task_cpu_ns(sw.pid)
    p1 = fb.task_cpu_ns(prof.pid) if prof else 0
    b1 = bpf_run_ns(prof.pid) if prof else 0
    w1, lived1 = time.time() * 1000.0, threads_started(sw.pid)
    out = {"rate": (s1 - s0) / (t1 - t0), "sw_ns": (c1 - c0) / max(1, s1 - s0),
           "cpu_pct": 100.0 * (p1 - p0) / 1e9 / (t1 - t0) if prof else None,
           "bpf_pct": 100.0 * (b1 - b0) / 1e9 / (t1 - t0) if prof else None}
    if prof:
        fb.stop(prof)
    sw.kill()
    sw.wait()
    if mode == "offcpu":
        out["waits"] = metric(prom, "fxagent_offcpu_waits_total")
        out["unstacked"] = metric(prom, "fxagent_offcpu_unstacked_total")
        out["unstacked_s"] = metric(prom, "fxagent_offcpu_unstacked_seconds_total")
        out["lost"] = metric(prom, "fxagent_offcpu_lost_total")
        out["lost_s"] = metric(prom, "fxagent_offcpu_lost_seconds_total")
        # The threads that lived through the measured interval: all of the
        # switcher's, which starts them at once and ends them at its kill.
        tids = sorted(t for t in lived0 if lived1.get(t) == lived0[t])
        out["pairs"], out["offcpu"], out["outside"] = adds_up(chunks, sw.pid, tids, w0, w1)
        for x in out["pairs"]:
            r = (x["on"] + x["off"]) / x["len"]
            if abs(r - 1) > SPREAD:
                ctx.log(f"offcpu: {rate}/s: thread {x['tid']}{' (main)' if x['main'] else ''} "
                        f"{x['name']!r}, chunk {x['seq']}: on {x['on']:.0f} ms + off "
                        f"{x['off']:.0f} ms of {x['len']:.0f} ms: {r:.3f}")
    if mode == "perf":
        try:
            out["mib_s"] = os.path.getsize(os.path.join(tmp, "perf.data")) / 2**20 / (t1 - t0)
            os.unlink(os.path.join(tmp, "perf.data"))
        except OSError:
            out["mib_s"] = None
    return out


def perf_has_off_cpu():
    """Whether this perf records --off-cpu: one built without BPF skeletons
    says it ignores the option (and exits 0)."""
    p = subprocess.run(["perf", "record", "--off-cpu", "-o", "/dev/null", "--", "true"],
                       capture_output=True, text=True, timeout=60)
    said = [ln.strip() for ln in p.stderr.splitlines() if "off-cpu" in ln]
    return p.returncode == 0 and not any("ignored" in ln for ln in said), \
        (said or [p.stderr.strip()])[0]


def run(ctx, a):
    seconds = a.seconds or (5 if ctx.quick else 20)
    rounds = a.rounds or (1 if ctx.quick else 3)
    # past the first window's end (10 s): its first symbolization reads
    # cold debug info, which the steady state does not
    settle = 3 if ctx.quick else 12
    window = 1 if ctx.quick else 10
    ctx.switch = os.path.join(ctx.build, "bench", "fx-bench-switch")
    ctx.need(ctx.agent, ctx.switch)
    fb.need_root()
    lines = ["### Off-CPU time", ""]
    with open("/proc/sys/kernel/bpf_stats_enabled") as f:
        stats_was = f.read().strip()
    with open("/proc/sys/kernel/bpf_stats_enabled", "w") as f:
        f.write("1")
    rows, modes = [], (None, "agent", "offcpu", "perf")
    sums = []
    aims = []
    try:
        with tempfile.TemporaryDirectory(prefix="fxbench-offcpu-", dir="/var/tmp") as tmp:
            for rate in RATES:
                res = {m: [] for m in modes}
                for r in range(rounds):
                    for m in (modes if r % 2 == 0 else modes[::-1]):
                        ctx.log(f"offcpu: {rate}/s, {m or 'no profiler'} ({r + 1}/{rounds})")
                        res[m].append(one(ctx, tmp, rate, m, seconds, settle, window))
                base_ns = fb.med([x["sw_ns"] for x in res[None]])
                limit = {20000: 1.0, 100000: 3.0}.get(rate)
                on_cpu = fb.med([v["cpu_pct"] for v in res["offcpu"]])
                on_bpf = fb.med([v["bpf_pct"] for v in res["offcpu"]]) or 0
                cpu_only = fb.med([v["cpu_pct"] for v in res["agent"]])
                if limit and on_cpu is not None and cpu_only is not None:
                    # What recording waits costs (perf's figure is that alone):
                    # the agent's threads over its CPU-only run, and the program.
                    own = on_cpu - cpu_only + on_bpf
                    aims.append(fb.aim(own <= limit, f"at {rate:,}/s recording waits at most "
                                       f"{limit:g}% of one CPU ({own:.2f}%: the agent's "
                                       f"threads {on_cpu:.2f}% less {cpu_only:.2f}% CPU only, "
                                       f"and the BPF program's {on_bpf:.2f}%)"))
                    aims.append(fb.aim(on_cpu + on_bpf <= limit,
                                       f"at {rate:,}/s the whole agent with off-CPU on, CPU "
                                       f"profiling included, at most {limit:g}% "
                                       f"({on_cpu + on_bpf:.2f}%)"))
                # Whether each thread's on + off adds up to its chunks' lengths.
                x = res["offcpu"]
                pairs = [p for v in x for p in v["pairs"]]
                ratios = [(p["on"] + p["off"]) / p["len"] for p in pairs]
                ok = sum(abs(r - 1) <= SPREAD for r in ratios)
                oc = [c for v in x for c in v["offcpu"]]

                def tot(k):
                    return sum(c.get(k) or 0 for c in oc)
                waits, unst, lost = tot("waits"), tot("unstacked"), tot("lost")
                bound_runs = sum(1 for v in x if any((c.get("unstacked") or 0) > 0
                                                     for c in v["offcpu"]))
                worst = max(ratios, key=lambda r: abs(r - 1)) if ratios else None
                share = 100.0 * ok / len(ratios) if ratios else None
                sums.append([f"{rate:,}",
                             f"{len(oc)} ({sum(v['outside'] for v in x)} outside)",
                             f"{len(pairs)} ({len(pairs) // max(1, len(oc))} threads)",
                             f"{ok} ({fb.f(share, '{:.0f}%')})",
                             fb.f(fb.med(ratios), "{:.3f}"), fb.f(worst, "{:.3f}"),
                             f"{waits:.0f} ({tot('ms') / 1000:.1f} s)",
                             f"{unst:.0f}, {pct(unst, waits)} ({tot('unstackedMs') / 1000:.1f} s, "
                             f"{pct(tot('unstackedMs'), tot('ms'))})",
                             f"{lost:.0f}, {pct(lost, waits + lost)} "
                             f"({tot('lostMs') / 1000:.1f} s)",
                             f"{'yes' if unst > 0 else 'no'} ({bound_runs} of {len(x)} runs)"])
                if rate == 100000:
                    aims.append(fb.aim(
                        bool(ratios) and ok >= SHARE * len(ratios) and unst > 0,
                        f"at {rate:,}/s on-CPU + off-CPU within {SPREAD:.0%} of the chunk's "
                        f"length for at least {SHARE:.0%} of the (thread, chunk) pairs, with "
                        f"the budget binding ({ok} of {len(ratios)}, "
                        f"{fb.f(share, '{:.0f}%')}; {unst:.0f} of {waits:.0f} waits "
                        "without a stack)"))
                for m in modes:
                    x = res[m]
                    cpu = fb.med([v["cpu_pct"] for v in x])
                    bpf = fb.med([v["bpf_pct"] for v in x])
                    sw_ns = fb.med([v["sw_ns"] for v in x])
                    extra = ""
                    if m == "offcpu":
                        extra = (f"{fb.f(fb.med([v['waits'] for v in x]), '{:.0f}')} waits, "
                                 f"{fb.f(fb.med([v['unstacked'] for v in x]), '{:.0f}')} without stacks "
                                 f"({fb.f(fb.med([v['unstacked_s'] for v in x]), '{:.1f}')} s), "
                                 f"{fb.f(fb.med([v['lost'] for v in x]), '{:.0f}')} lost "
                                 f"({fb.f(fb.med([v['lost_s'] for v in x]), '{:.1f}')} s)")
                    elif m == "perf":
                        extra = f"{fb.f(fb.med([v['mib_s'] for v in x]), '{:.0f}')} MiB/s written"
                    rows.append([f"{rate:,}" if m is None else "",
                                 fb.f(fb.med([v["rate"] for v in x]), "{:,.0f}"),
                                 {None: "no profiler", "agent": "fxagent, CPU only",
                                  "offcpu": "fxagent, off_cpu on",
                                  "perf": "perf sched_switch dwarf"}[m],
                                 fb.f(cpu, "{:.2f}%"), fb.f(bpf, "{:.2f}%"),
                                 fb.f(None if cpu is None else cpu + (bpf or 0), "{:.2f}%"),
                                 fb.f(sw_ns / 1000.0, "{:.1f}") if sw_ns else "-",
                                 fb.f(100.0 * (sw_ns - base_ns) / base_ns, "{:+.0f}%")
                                 if m and sw_ns and base_ns else "", extra])
    finally:
        with open("/proc/sys/kernel/bpf_stats_enabled", "w") as f:
            f.write(stats_was)
    has, why = perf_has_off_cpu()
    lines += [f"fx-bench-switch at each rate, {seconds} s measured per run after {settle} s, "
              f"{rounds} rounds in turns; medians. Profiler CPU: every thread of the agent "
              "(perf), a share of one CPU; BPF: the off-CPU program's own time, which the "
              "kernel charges to the threads that switch; switcher us/switch: its CPU per "
              "switch, and against no profiler. "
              + ("`perf record --off-cpu` works here but is not run yet." if has else
                 f"`perf record --off-cpu`: not in this perf (`{why}`)."), ""]
    lines += ["The BPF column is measured with kernel.bpf_stats_enabled, which times each run "
              "of the program: an empty program on the same tracepoint measured about 90 ns a "
              "run here, of the about 210 ns the off-CPU program's runs take. The switcher's CPU per "
              "switch moves by 20-40% between runs with no profiler: too noisy to show the "
              "program's cost.", ""]
    lines += fb.table(["switches/s asked", "seen", "profiler", "profiler CPU", "BPF",
                       "together", "switcher us/switch", "vs none", "recorded"], rows)
    lines += [f"Does each thread's time add up, with off_cpu on: the chunks ({window} s "
              "windows) that lie within a measured interval, all rounds; for each thread of "
              "fx-bench-switch that lived through it (its main thread, asleep in "
              "pthread_join, included), on-CPU (CPU samples x meta.interval) plus off-CPU "
              "(its off-CPU track's ms) against the chunk's length; waits, without a stack "
              f"and lost: those chunks' meta.fxagent.offCpu. Within: |sum/length - 1| <= "
              f"{SPREAD:.0%}; worst: the farthest from 1.", ""]
    lines += fb.table(["switches/s asked", "chunks", "(thread, chunk) pairs",
                       f"within {SPREAD:.0%}", "median sum/length", "worst", "waits shown",
                       "without a stack (share of waits, of time)",
                       "lost (share of waits)", "budget bound"], sums)
    lines += [a + ("  " if i + 1 < len(aims) else "") for i, a in enumerate(aims)] + [""]
    return lines


if __name__ == "__main__":
    fb.section_main(sys.modules[__name__], __doc__)

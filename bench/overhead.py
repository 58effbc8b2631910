#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Overhead: fxagent against perf record on a CPU-bound workload on every CPU.

Each round runs one fx-bench-work per CPU (qsort with a callback: stacks
through libc, which has no frame pointers) for D seconds under each recorder
in turn, the order rotating by round: no profiler, `fxagent --once --unwind
fp`, `fxagent --once --unwind dwarf` (the default), `perf record -F 99 -a -g`,
the same with `-z`, and `perf record -F 99 -a --call-graph dwarf`. Each
recorder starts 1 s before the workload and stops 0.5 s after it.

Per recorder, as the median over the rounds: the workload's throughput (sorts
per second) and its ratio to the same round's run without a profiler; the
recorder's CPU while the workload ran (share of one CPU and of the machine)
and over its whole run (start, recording, writing its file); its peak RSS
(VmHWM) and steady RSS (median VmRSS over the second half of the workload).
The same runs give the output section's file sizes (output.py).

usage: bench/overhead.py [--build DIR] [--quick] [--rounds N] [--duration S]
"""
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fxbench as fb  # noqa: E402

# name -> (tool, extra arguments); the order is the first round's.
RECORDERS = {
    "none": (None, []),
    "fxagent fp": ("fx", ["--unwind", "fp"]),
    "fxagent dwarf": ("fx", ["--unwind", "dwarf"]),
    "perf -g": ("perf", ["-g"]),
    "perf -g -z": ("perf", ["-g", "-z"]),
    "perf dwarf": ("perf", ["--call-graph", "dwarf"]),
}
LEAD, TAIL = 1.0, 0.5


def add_args(ap):
    ap.add_argument("--rounds", type=int, help="rounds (default 5; --quick 1)")
    ap.add_argument("--duration", type=float,
                    help="seconds of workload per run (default 30; --quick 5)")


def shape(ctx, a):
    rounds = a.rounds or (1 if ctx.quick else 5)
    dur = a.duration or (5 if ctx.quick else 30)
    return rounds, dur


def run_one(ctx, name, dur, out):
    tool, extra = RECORDERS[name]
    rec = dur + LEAD + TAIL
    if tool == "fx":
        cmd = [ctx.agent, "--once", *extra, "--duration", f"{int(rec * 1000)}ms", "--output",
               out, "--verbose"]
    elif tool == "perf":
        cmd = [ctx.perf, "record", "-F", "99", "-a", *extra, "-o", out, "--", "sleep",
               f"{rec:g}"]
    proc, err = None, []
    if tool:
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                text=True)
        # Drained all along: a full pipe would stall the recorder.
        drain = threading.Thread(target=lambda: err.append(proc.stderr.read()), daemon=True)
        drain.start()
    # Polled in every mode, so that the polling costs the workload the same.
    watch = fb.Watch(proc.pid if proc else os.getpid())
    time.sleep(LEAD)
    c0 = fb.task_cpu_ns(proc.pid) if proc else 0
    t0 = time.monotonic()
    ops = fb.work_ops(fb.start_work(ctx, fb.NCPU, dur))
    t1 = time.monotonic()
    c1 = fb.task_cpu_ns(proc.pid) if proc else 0
    r = {"ops_s": ops / dur}
    if proc:
        code, total = fb.wait_rusage(proc)
        drain.join()
        watch.stop()
        err = "".join(err)
        if code != 0:
            # Counted and shown, not fatal: a recorder that fails is a finding.
            why = [line for line in err.splitlines() if line.strip()
                   and not line.startswith("[ perf record")]
            ctx.log(f"overhead: {' '.join(cmd)} failed ({code}):\n{err[-2000:]}")
            if os.path.exists(out):
                os.unlink(out)
            return {"ops_s": r["ops_s"], "failed": f"exit {code}: {why[-1] if why else ''}"}
        r.update(cpu_pct=100.0 * (c1 - c0) / 1e9 / (t1 - t0), cpu_total_s=total,
                 peak_mib=watch.hwm_kib / 1024.0,
                 steady_mib=(watch.steady_kib(t0, t1) or 0) / 1024.0,
                 bytes=os.path.getsize(out))
        if tool == "fx":
            m = fb.ONCE_STATS.search(err)
            if not m:
                sys.exit(f"no stats line in fxagent's output:\n{err}")
            r.update(samples=int(m.group(5)), write_ms=float(m.group(4)),
                     stacks=int(m.group(7)),
                     peak_mib=max(r["peak_mib"], float(m.group(9))))
            d = fb.DWARF_STATS.search(err)
            if d:
                r.update(unwind_med_us=float(d.group(2)), unwind_p99_us=float(d.group(3)),
                         truncated_pct=100.0 * int(d.group(4)) / max(1, int(d.group(1))))
        else:
            r["samples"] = fb.perf_samples(ctx.perf, out)
        os.unlink(out)
    else:
        watch.stop()
    return r


def measure(ctx, a, names):
    """Rounds of runs of the recorders @names; {name: [result per round]}."""
    rounds, dur = shape(ctx, a)
    ctx.need(ctx.agent, ctx.work)
    ctx.perf = shutil.which("perf")
    if not ctx.perf:
        sys.exit("perf is missing: apt-get install linux-perf")
    fb.need_root()
    res = {n: [] for n in names}
    with tempfile.TemporaryDirectory(prefix="fxbench-") as tmp:
        for i in range(rounds):
            order = names[i % len(names):] + names[:i % len(names)]
            for n in order:
                ext = ".json.gz" if RECORDERS[n][0] == "fx" else ".data"
                r = run_one(ctx, n, dur, os.path.join(tmp, f"r{i}{ext}"))
                res[n].append(r)
                ctx.log(f"overhead: round {i + 1}/{rounds} {n}: " +
                        ", ".join(f"{k} {v:.4g}" if isinstance(v, float) else f"{k} {v}"
                                  for k, v in r.items()))
    return res


def recordings(ctx, a, with_none=True):
    """The runs, measured once per run of the suite (output.py reuses them)."""
    cache = getattr(ctx, "recordings", None)
    if cache is None or (with_none and "none" not in cache):
        names = [n for n in RECORDERS if with_none or n != "none"]
        cache = ctx.recordings = measure(ctx, a, names)
    return cache


def compare(res):
    """fxagent against its peer, said plainly, whichever way it goes."""
    out = []
    for fx, perf in (("fxagent fp", "perf -g"), ("fxagent dwarf", "perf dwarf")):
        if not res.get(fx) or not res.get(perf):
            continue
        said = []
        for key, what in (("cpu_pct", "CPU while the workload ran"),
                          ("cpu_total_s", "CPU over the whole run"),
                          ("peak_mib", "peak RSS")):
            x = fb.med([r[key] for r in res[fx]])
            y = fb.med([r[key] for r in res[perf]])
            if x and y:
                more = "the same" if abs(x / y - 1) < 0.005 else "more" if x > y else "less"
                said.append(f"{what} {x / y:.2f}x ({more})")
        tx = fb.med([r["ops_s"] for r in res[fx]])
        ty = fb.med([r["ops_s"] for r in res[perf]])
        said.append(f"workload throughput {100 * (tx / ty - 1):+.1f}%")
        out.append(f"- {fx} against `{perf}`: " + ", ".join(said) + ".")
    return out + [""] if out else []


def ok_runs(res):
    """The runs that worked, with the failures' messages apart."""
    good, bad = {}, {}
    for n, runs in res.items():
        good[n] = [r for r in runs if "failed" not in r]
        bad[n] = [r["failed"] for r in runs if "failed" in r]
    return good, bad


def failures(bad, rounds):
    out = [f"- {n} failed in {len(msgs)} of {rounds} runs ({'; '.join(sorted(set(msgs)))})"
           + ("; its figures are those of the other runs." if len(msgs) < rounds else ".")
           for n, msgs in bad.items() if msgs]
    return out + [""] if out else []


def run(ctx, a):
    rounds, dur = shape(ctx, a)
    res, bad = ok_runs(recordings(ctx, a))
    if not res["none"]:
        sys.exit("no run without a profiler")
    none = [r["ops_s"] for r in res["none"]]
    base = fb.med(none)
    noise = fb.spread_pct(none)
    rows = []
    full = recordings(ctx, a)
    for n, runs in res.items():
        if not runs:
            rows.append([n, "failed in every run"] + ["-"] * 6)
            continue
        # Paired by round; a round whose run failed drops out.
        ratio = fb.med([r["ops_s"] / z["ops_s"] for r, z in zip(full[n], full["none"])
                        if "failed" not in r])
        cpu = fb.med([r.get("cpu_pct") for r in runs])
        rows.append([
            n, f"{fb.med([r['ops_s'] for r in runs]):.0f}",
            "1" if n == "none" else f"{ratio:.3f} ({100 * (ratio - 1):+.1f}%)",
            fb.f(cpu, "{:.2f}%"), fb.f(None if cpu is None else cpu / fb.NCPU, "{:.3f}%"),
            fb.f(fb.med([r.get("cpu_total_s") for r in runs]), "{:.2f} s"),
            fb.f(fb.med([r.get("peak_mib") for r in runs]), "{:.1f} MiB"),
            fb.f(fb.med([r.get("steady_mib") for r in runs]), "{:.1f} MiB"),
        ])
    lines = [f"### Overhead", "",
             f"`bench/overhead.py`: one `fx-bench-work` per CPU ({fb.NCPU}; qsort with a "
             f"callback, stacks through libc) for {dur:g} s under each recorder, order "
             f"rotating, {rounds} round{'s' * (rounds > 1)}; medians. Throughput ratio: "
             f"median of each round's ratio to that round's run without a profiler. "
             f"Recorder CPU while the workload ran: from its threads' schedstat; whole run: "
             f"wait4 (start, recording {dur + LEAD + TAIL:g} s, writing the file; "
             f"`perf record`'s own, not `perf report`'s). Peak RSS: VmHWM; steady: median "
             f"VmRSS over the workload's second half.", ""]
    lines += fb.table(["recorder", "workload sorts/s", "vs none", "recorder CPU, % of one CPU",
                       "% of the machine", "recorder CPU, whole run", "peak RSS",
                       "steady RSS"], rows)
    lines += [f"Without a profiler the throughput varied by {noise:.1f}% across rounds "
              f"(max - min over the median): a ratio closer to 1 than that is noise."
              if rounds > 1 else "One round: no estimate of the noise.", ""]
    lines += failures(bad, rounds)
    lines += compare(res)
    fx = [n for n in res if n.startswith("fxagent") and res[n]]
    if "fxagent dwarf" not in fx:
        return lines
    rows = []
    for n in fx:
        runs = res[n]
        rows.append([n, f"{fb.med([r['samples'] for r in runs]):.0f}",
                     f"{fb.med([r['stacks'] for r in runs]):.0f}",
                     f"{fb.med([r['write_ms'] for r in runs]):.0f} ms",
                     fb.f(fb.med([r.get('unwind_med_us') for r in runs]), "{:.1f} us"),
                     fb.f(fb.med([r.get('unwind_p99_us') for r in runs]), "{:.1f} us"),
                     fb.f(fb.med([r.get('truncated_pct') for r in runs]), "{:.2f}%")])
    lines += ["fxagent's own figures from the same runs (its `--verbose` stats lines):", ""]
    lines += fb.table(["mode", "samples", "distinct stacks", "end of recording to file "
                       "written", "unwind per sample, median", "p99", "truncated stacks"],
                      rows)
    cpu = fb.med([r["cpu_pct"] for r in res["fxagent dwarf"]])
    write = max(fb.med([r["write_ms"] for r in res[n]]) for n in fx)
    unwind = fb.med([r.get("unwind_med_us") for r in res["fxagent dwarf"]])
    peak = max(fb.med([r["peak_mib"] for r in res[n]]) for n in fx)
    lines += [f"Aims: recording under 1% of one CPU ({fb.aim(cpu < 1, f'{cpu:.2f}%')}), "
              f"symbolization plus writing under 2 s ({fb.aim(write < 2000, f'{write:.0f} ms')}), "
              f"median unwind under 10 us "
              f"({fb.aim(unwind is not None and unwind < 10, fb.f(unwind, '{:.1f} us'))}), "
              f"peak RSS under 50 MiB ({fb.aim(peak < 50, f'{peak:.1f} MiB')}).", ""]
    return lines


if __name__ == "__main__":
    fb.section_main(sys.modules[__name__], __doc__)

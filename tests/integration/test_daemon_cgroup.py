# SPDX-License-Identifier: MIT
"""Daemon targets: each target's chunks hold its own processes and nothing else.

Four busy processes, three of them the same binary (fx-hot-ab) so that only the
cgroup tells them apart:
  cg    `cgroup: /fxtest-P-0`                  fx-hot-ab in that cgroup
  unit  `systemd_unit: fxtest-P.service`       fx-hot-ab in /system.slice/fxtest-P.service
  deep  `systemd_unit: fxtest-P-deep`          fx-hot-ab in /fxtest-P-1/fxtest-P-deep.service
                                               (short name, found by searching the tree)
  sys   `process: fx-syscalls`                 fx-syscalls, left in the test's own cgroup
Windows of 2 s, about 7 s of run, SIGINT. Every chunk of a target has samples of
its process only (the agent's marker thread has none), in every window of 0.5 s
or more; 99 samples per second of CPU each process had (polled from the
kernel), within 3.5 standard errors of a count plus a poll period at each end
and 3; the global and per-target labels are in meta.fxagent.labels; cg's
fx-hot-ab is symbolized (hot_a and hot_b hold at least 90% of its samples,
hot_a the larger, under main -> hot_caller), raw and in profiler-cli. How
exact the split is, hot_ab checks against perf: four busy processes share two
CPUs here, and the split their samples show moves (hot_a 60.7-65.1% of 70 in
one CI run).
"""

import math
import os
import time

import fxtest
from fxdaemon import CpuPoller, Daemon, HZ, check_chunk, spawn_in, with_cgroups

WINDOW = 2


def run(t, cg):
    me = os.getpid()
    t.note(f"cgroup2 mount: {cg.mount}")
    cg_rel = f"/fxtest-{me}-0"
    unit = f"fxtest-{me}.service"
    deep_rel = f"/fxtest-{me}-1/fxtest-{me}-deep.service"
    if not os.path.isdir(cg.path("/system.slice")):
        cg.make("/system.slice")
    cg.make(cg_rel)
    cg.make(f"/system.slice/{unit}")
    cg.make(f"/fxtest-{me}-1")
    cg.make(deep_rel)

    procs = {
        "cg": spawn_in(t, cg.path(cg_rel), "fx-hot-ab", 60),
        "unit": spawn_in(t, cg.path(f"/system.slice/{unit}"), "fx-hot-ab", 60),
        "deep": spawn_in(t, cg.path(deep_rel), "fx-hot-ab", 60),
        "sys": t.workload("fx-syscalls", 60),
    }
    pid_of = {k: p.pid for k, p in procs.items()}
    t.note("pids: " + ", ".join(f"{k} {v}" for k, v in pid_of.items()))
    poll = CpuPoller(pid_of.values())
    poll.start()
    config = f"""window:
  seconds: {WINDOW}
labels:
  env: fxtest
targets:
  - name: cg
    cgroup: {cg_rel}
    labels: {{tier: inner}}
  - name: sys
    process: fx-syscalls
  - name: unit
    systemd_unit: {unit}
  - name: deep
    systemd_unit: fxtest-{me}-deep
"""
    d = Daemon(t, "targets", config)
    d.wait_started()
    first = math.ceil(time.time() / WINDOW) * WINDOW
    time.sleep(max(0.0, first + 2 * WINDOW + 0.8 - time.time()))
    rc = d.stop()
    poll.stop()
    t.kill_processes()
    t.require(rc == 0, f"fxagent exited {rc} after SIGINT; log: {d.text()[-2000:]}")

    chunks = d.chunks()
    t.require(set(chunks) == set(procs), f"chunks of targets {sorted(chunks)}, want "
              f"{sorted(procs)}; log: {d.text()[-2000:]}")
    seqs = {k: [s for s, _ in v] for k, v in chunks.items()}
    t.check(all(s == seqs["cg"] for s in seqs.values()),
            f"targets have chunks of different windows: {seqs}")
    t.check(seqs["cg"] == list(range(seqs["cg"][0], seqs["cg"][0] + len(seqs["cg"]))),
            f"seq numbers {seqs['cg']} are not consecutive")
    t.check(len(seqs["cg"]) >= 3, f"{len(seqs['cg'])} windows, want at least 3")

    best = {}  # target -> (samples of its process, path) of its busiest chunk
    for target, lst in sorted(chunks.items()):
        want_pid = str(pid_of[target])
        n_total, cpu_total = 0, 0.0
        a_total = b_total = 0
        line = []
        for seq, path in lst:
            prof = t.load(path)
            fx = check_chunk(t, prof, target, seq, path)
            name = os.path.basename(path)
            labels = fx["labels"]
            want_labels = {"host": os.uname().nodename, "env": "fxtest"}
            if target == "cg":
                want_labels["tier"] = "inner"
            t.check(labels == want_labels, f"{name}: labels {labels}, want {want_labels}")
            # The agent's marker thread (no samples) aside, only the target's process.
            others = sorted({(th["pid"], th["name"]) for th in prof.threads if prof.weight([th])
                             and str(th["pid"]) != want_pid})
            t.check(not others, f"{name}: samples of other processes than {target}'s "
                    f"{want_pid}: {others[:10]}")
            ths = prof.threads_of(want_pid)
            n = prof.weight(ths)
            secs = (fx["windowEnd"] - fx["windowStart"]) / 1000
            if secs >= 0.5:
                t.check(n > 0, f"{name}: no sample of {target}'s process {want_pid} in a "
                        f"{secs:.2f} s window")
            cpu = poll.seconds(int(want_pid), fx["windowStart"], fx["windowEnd"])
            n_total += n
            cpu_total += cpu
            line.append(f"{n}/{HZ * cpu:.0f}")
            if n > best.get(target, (-1,))[0]:
                best[target] = (n, path)
            if target != "sys":
                a_total += prof.weight(ths, prof.has_func("hot_a"))
                b_total += prof.weight(ths, prof.has_func("hot_b"))
                for fn in ("hot_a", "hot_b"):
                    bad = [prof.stack_names(st) for th in ths for st, _ in prof.samples(th)
                           if fn in prof.stack_names(st) and not
                           fxtest.contains(prof.stack_names(st), ["main", "hot_caller", fn])]
                    t.check(len(bad) <= 0.1 * max(n, 1), f"{name}: {len(bad)} {fn} stacks "
                            f"without main -> hot_caller -> {fn}, e.g. {bad[:1]}")
        want = HZ * cpu_total
        t.note(f"{target}: samples/expected per window {' '.join(line)}; total {n_total} for "
               f"{cpu_total:.2f} s of CPU, want {want:.0f}")
        tol = 3.5 * want ** 0.5 + HZ * 2 * poll.period + 3
        t.check(abs(n_total - want) <= tol,
                f"{target}: {n_total} samples of pid {want_pid}, want {want:.0f} +- {tol:.0f} "
                f"({HZ} Hz x {cpu_total:.2f} s of its CPU)")
        if target != "sys" and n_total:
            a, b = 100 * a_total / n_total, 100 * b_total / n_total
            t.note(f"{target}: hot_a {a:.1f}%, hot_b {b:.1f}%")
            # What this asserts is that each target's frames are named, in
            # the right order of size (see the docstring).
            t.check(a + b >= 90 and a > b,
                    f"{target}: hot_a {a:.1f}% / hot_b {b:.1f}% of {n_total} samples, want "
                    f"both together >= 90 and hot_a the larger: not symbolized?")

    # Through the profiler's loader: the cg chunk and the process-target chunk.
    for target, fns in (("cg", ("hot_a", "hot_b", "hot_caller")), ("sys", ("syscall_loop",))):
        n, path = best[target]
        cli = t.cli(path, target)
        rows = cli.threads()
        pids = {str(r["pid"]) for r in rows if r["pid"] is not None}
        handles = cli.handles(pid=pid_of[target])
        t.check(handles, f"profiler-cli {os.path.basename(path)}: no thread of pid "
                f"{pid_of[target]}; threads {[(r['pid'], r['name']) for r in rows]}")
        if handles:
            funcs = cli.functions(handles)
            missing = [fn for fn in fns if fn not in funcs]
            t.check(not missing, f"profiler-cli {os.path.basename(path)}: no {missing}; "
                    f"functions {sorted(funcs)[:20]}")
        t.note(f"profiler-cli {target}: {n} samples, processes {sorted(pids)}")
        cli.stop()


fxtest.main(with_cgroups(run))

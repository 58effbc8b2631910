# SPDX-License-Identifier: MIT
"""Restarted services keep being profiled: cgroup and systemd-unit targets are
resolved again at every window.

Two targets, `cgroup: /fxtest-P-0` and `systemd_unit: fxtest-P-r.service` (in
/system.slice), each with a busy fx-hot-ab; 2 s windows.
1. quick restart (as systemd does it): kill the workload, rmdir, mkdir the same
   path (a new cgroup id), start a new workload inside. Every window from the
   first boundary after the re-creation on holds the new process, and only it
   (targets are resolved at rotation: the window of the restart may miss it).
2. slow restart: kill, rmdir, and leave the path missing across a window
   boundary, then re-create it with a third workload. The window without the
   cgroup has no samples but is still written (seq numbers stay consecutive), and
   the windows after the re-creation hold the third process.
"""

import math
import os
import time

import fxtest
from fxdaemon import CpuPoller, Daemon, EPS_MS, HZ, check_chunk, spawn_in, with_cgroups

WINDOW = 2


def now_ms():
    return time.time() * 1000.0


def sleep_until(sec):
    time.sleep(max(0.0, sec - time.time()))


def run(t, cg):
    me = os.getpid()
    t.note(f"cgroup2 mount: {cg.mount}")
    if not os.path.isdir(cg.path("/system.slice")):
        cg.make("/system.slice")
    unit = f"fxtest-{me}-r.service"
    rels = {"svc": f"/fxtest-{me}-0", "unit": f"/system.slice/{unit}"}
    for rel in rels.values():
        cg.make(rel)
    gen = {k: [] for k in rels}  # target -> [(Popen, start ms, end ms)]
    polls = []

    def start(k):
        p = spawn_in(t, cg.path(rels[k]), "fx-hot-ab", 60)
        poll = CpuPoller([p.pid])
        poll.start()
        polls.append(poll)
        gen[k].append([p, now_ms(), None, poll])

    def kill(k):
        g = gen[k][-1]
        g[0].kill()
        g[0].wait()
        g[2] = now_ms()
        g[3].stop()

    for k in rels:
        start(k)
    config = f"""window:
  seconds: {WINDOW}
targets:
  - name: svc
    cgroup: {rels['svc']}
  - name: unit
    systemd_unit: {unit}
"""
    d = Daemon(t, "restart", config)
    d.wait_started()
    b0 = math.ceil(time.time() / WINDOW) * WINDOW
    # One complete window of the first processes, then the quick restart.
    sleep_until(b0 + WINDOW + 0.5)
    for k in rels:
        kill(k)
        cg.remove(rels[k])
        cg.make(rels[k])
        start(k)
    quick_ms = now_ms()
    # Two windows of the second processes, then the slow restart.
    b1 = math.ceil(quick_ms / 1000 / WINDOW) * WINDOW
    sleep_until(b1 + WINDOW + 0.5)
    for k in rels:
        kill(k)
        cg.remove(rels[k])
    gone_ms = now_ms()
    # Missing for the whole window [b1 + 2W, b1 + 3W).
    sleep_until(b1 + 3 * WINDOW + 0.3)
    for k in rels:
        cg.make(rels[k])
        start(k)
    slow_ms = now_ms()
    b2 = math.ceil(slow_ms / 1000 / WINDOW) * WINDOW
    sleep_until(b2 + WINDOW + 0.8)
    rc = d.stop()
    for poll in polls:
        poll.stop()
    t.kill_processes()
    t.require(rc == 0, f"fxagent exited {rc} after SIGINT; log: {d.text()[-2000:]}")

    chunks = d.chunks()
    t.require(set(chunks) == set(rels), f"chunks of targets {sorted(chunks)}, want "
              f"{sorted(rels)}; log: {d.text()[-2000:]}")
    for k, lst in sorted(chunks.items()):
        seqs = [s for s, _ in lst]
        t.check(seqs == list(range(seqs[0], seqs[0] + len(seqs))),
                f"{k}: seq numbers {seqs} are not consecutive")
        pids = [str(g[0].pid) for g in gen[k]]
        t.note(f"{k}: pids {pids}; quick restart at +{(quick_ms - b0 * 1000) / 1000:.2f} s, "
               f"gone from +{(gone_ms - b0 * 1000) / 1000:.2f} s, back at "
               f"+{(slow_ms - b0 * 1000) / 1000:.2f} s (after the boundary at {b0})")
        for seq, path in lst:
            prof = t.load(path)
            fx = check_chunk(t, prof, k, seq, path)
            name = os.path.basename(path)
            a, b = fx["windowStart"], fx["windowEnd"]
            got = {pid: prof.weight(prof.threads_of(pid)) for pid in pids}
            # A killed workload's threads that the kernel has already let go of
            # are still sampled in the target's cgroup until their last switch,
            # with pid -1: the agent names them "exiting". Inside the target.
            others = sorted({(th["pid"], th["name"]) for th in prof.threads
                             if prof.weight([th]) and str(th["pid"]) not in pids
                             and (str(th["pid"]), th["name"]) != ("4294967295", "exiting")})
            t.check(not others, f"{name}: samples of processes outside the target: "
                    f"{others[:10]}")
            # Which generation ran through this whole window, if any.
            whole = [i for i, g in enumerate(gen[k])
                     if g[1] <= a and (g[2] is None or g[2] >= b)]
            want = ""
            if whole:
                i = whole[0]
                cpu = gen[k][i][3].seconds(gen[k][i][0].pid, a, b)
                want = f", want {HZ * cpu:.0f} ({HZ} Hz x {cpu:.2f} s CPU)"
                if b - a >= 500:
                    t.check(got[pids[i]] > 0,
                            f"{name}: no sample of process #{i + 1} ({pids[i]}), which ran "
                            f"in the target's cgroup for the whole window "
                            f"{a / 1000 % 60:.2f}..{b / 1000 % 60:.2f} s")
                    t.check(abs(got[pids[i]] - HZ * cpu) <= 0.2 * HZ * cpu + 3,
                            f"{name}: {got[pids[i]]} samples of process #{i + 1}{want}")
            t.note(f"  seq {seq} {a / 1000 % 60:6.2f}..{b / 1000 % 60:6.2f}: "
                   + ", ".join(f"#{i + 1} {got[p]}" for i, p in enumerate(pids)) + want)
        # Windows after each re-creation hold the new process.
        after = {1: b1 * 1000, 2: b2 * 1000}
        for i, since in after.items():
            n = 0
            for seq, path in lst:
                prof = fxtest.Profile(path)
                if prof.data["meta"]["fxagent"]["windowStart"] >= since - EPS_MS:
                    n += prof.weight(prof.threads_of(pids[i]))
            t.check(n > 0, f"{k}: no sample of process #{i + 1} ({pids[i]}) after its "
                    "cgroup was re-created")

    # The window without the cgroup is written, empty, and loads in the profiler.
    gap = [(seq, path) for seq, path in chunks["svc"]
           if fxtest.Profile(path).data["meta"]["fxagent"]["windowStart"] >= gone_ms
           and fxtest.Profile(path).data["meta"]["fxagent"]["windowEnd"] <= slow_ms]
    if t.check(gap, "svc: no chunk for the window the cgroup was missing"):
        seq, path = gap[0]
        prof = fxtest.Profile(path)
        t.check(prof.weight(prof.threads) == 0, f"{os.path.basename(path)}: samples in a "
                "window without the cgroup")
        cli = t.cli(path, f"empty{seq}")
        cli.threads()
        cli.stop()
    seq, path = chunks["svc"][-2]
    cli = t.cli(path, "last")
    handles = cli.handles(pid=gen["svc"][-1][0].pid)
    t.check(handles, f"profiler-cli {os.path.basename(path)}: no thread of the last process")
    if handles:
        funcs = cli.functions(handles)
        t.check("hot_a" in funcs and "hot_b" in funcs,
                f"profiler-cli {os.path.basename(path)}: functions {sorted(funcs)[:20]}")
    cli.stop()


fxtest.main(with_cgroups(run))

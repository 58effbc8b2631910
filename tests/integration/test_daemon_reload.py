# SPDX-License-Identifier: MIT
"""Reloads (SIGHUP) that change what is sampled, through each way the daemon
applies a config: two cgroups A and B, each with a busy fx-hot-ab, and
fx-syscalls outside both; 1 s windows.

  1. target a: `cgroup: A`
  2. reload -> target b: `cgroup: B` and target s: `process: fx-syscalls`
     (cgroup events swapped, the root cgroup added for the process target,
     the same perf events kept)
  3. reload -> no targets, 99 Hz -> 49 Hz (the whole system: events reopened)

Each chunk holds only its target's processes; a's chunks end where b's begin
(and b's where the system's begin), seq runs on without a gap; after the last
reload, chunks are 49 Hz (interval 20.4 ms) and hold all three processes; the
agent exits 0 on SIGTERM.
"""

import os
import signal
import time

import fxtest
from fxdaemon import Daemon, EPS_MS, check_chunk, spawn_in, with_cgroups


def wait_for_target(t, d, name, timeout=6):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if name in d.chunks(running=True):
            return True
        time.sleep(0.1)
    return False


def run(t, cg):
    me = os.getpid()
    a_rel, b_rel = f"/fxtest-{me}-a", f"/fxtest-{me}-b"
    cg.make(a_rel)
    cg.make(b_rel)
    pa = spawn_in(t, cg.path(a_rel), "fx-hot-ab", 60)
    pb = spawn_in(t, cg.path(b_rel), "fx-hot-ab", 60)
    ps = t.workload("fx-syscalls", 60)
    pids = {"a": {pa.pid}, "b": {pb.pid}, "s": {ps.pid}}
    t.note(f"pids: a {pa.pid}, b {pb.pid}, fx-syscalls {ps.pid}")

    d = Daemon(t, "reload", f"window:\n  seconds: 1\ntargets:\n  - name: a\n"
               f"    cgroup: {a_rel}\n")
    d.wait_started()
    t.require(wait_for_target(t, d, "a"), f"no chunk of a; log: {d.text()[-1500:]}")
    time.sleep(1.5)
    out = f"output:\n  directory: {d.out}\n"
    with open(d.config, "w") as f:
        f.write(f"window:\n  seconds: 1\ntargets:\n  - name: b\n    cgroup: {b_rel}\n"
                f"  - name: s\n    process: fx-syscalls\n" + out)
    d.p.send_signal(signal.SIGHUP)
    t.require(wait_for_target(t, d, "b"), f"no chunk of b after the reload; log: "
              f"{d.text()[-1500:]}")
    time.sleep(2.5)
    with open(d.config, "w") as f:
        f.write("window:\n  seconds: 1\nsampling:\n  frequency: 49\n" + out)
    d.p.send_signal(signal.SIGHUP)
    t.require(wait_for_target(t, d, "system"), f"no whole-system chunk after the second "
              f"reload; log: {d.text()[-1500:]}")
    time.sleep(2.5)
    rc = d.stop(signal.SIGTERM)
    t.check(rc == 0, f"fxagent exited {rc} after SIGTERM")
    log = d.text()
    t.check("perf events opened again" in log, "the switch to the whole system did not "
            f"reopen the perf events: {log[-1500:]}")

    chunks = d.chunks()
    t.require(set(chunks) == {"a", "b", "s", "system"}, f"targets {sorted(chunks)}")
    by_seq = {}
    for target, lst in chunks.items():
        for seq, path in lst:
            by_seq.setdefault(seq, []).append((target, path))
    seqs = sorted(by_seq)
    t.check(seqs == list(range(len(seqs))), f"seq numbers {seqs} have gaps")
    order = {"a": 0, "b": 1, "s": 1, "system": 2}
    prev_end, prev_phase = None, 0
    for seq in seqs:
        phases = {order[tg] for tg, _ in by_seq[seq]}
        t.check(len(phases) == 1, f"seq {seq} has chunks of {by_seq[seq]}")
        phase = phases.pop()
        t.check(phase >= prev_phase, f"seq {seq}: {by_seq[seq]} after a later config's chunks")
        ends = set()
        for target, path in by_seq[seq]:
            prof = t.load(path)
            fx = check_chunk(t, prof, target, seq, path)
            name = os.path.basename(path)
            ends.add((fx["windowStart"], fx["windowEnd"]))
            if prev_end is not None:
                t.check(abs(fx["windowStart"] - prev_end) <= EPS_MS,
                        f"{name}: starts at {fx['windowStart']}, the window before ended at "
                        f"{prev_end}")
            got = {int(th["pid"]) for th in prof.threads if prof.weight([th]) > 0}
            length = fx["windowEnd"] - fx["windowStart"]
            # A reload cuts the window at its end (a few ms late at most):
            # no sliver of a window with the old config after it.
            if seq not in (seqs[0], seqs[-1]):
                t.check(length >= 500, f"{name}: a window of {length:.1f} ms")
            interval = prof.data["meta"]["interval"]
            if target == "system":
                t.check(abs(interval - 1000 / 49) < 0.01, f"{name}: interval {interval}, "
                        "want 49 Hz")
                if length >= 900:
                    want = pids["a"] | pids["b"] | pids["s"]
                    t.check(want <= got, f"{name}: the whole system lacks "
                            f"{sorted(want - got)}")
            else:
                t.check(abs(interval - 1000 / 99) < 0.01, f"{name}: interval {interval}")
                t.check(got <= pids[target], f"{name}: samples of {sorted(got - pids[target])}"
                        f", not of target {target}")
                if length >= 900:
                    t.check(got, f"{name}: no samples of its target")
        t.check(len(ends) == 1, f"seq {seq}: windows {ends} differ between targets")
        prev_end = max(e for _, e in ends)
        prev_phase = phase


if __name__ == "__main__":
    fxtest.main(with_cgroups(run))

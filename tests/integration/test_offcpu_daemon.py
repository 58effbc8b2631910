# SPDX-License-Identifier: MIT
"""Off-CPU time in the daemon, per cgroup target: fx-waits in one cgroup (target
`waits`, `off_cpu: true`), fx-hot-ab in another (target `hot`, off-CPU off, as
sampling.off_cpu.enabled is by default). Windows of 2 s, about 7 s of run.
waits's chunks hold fx-waits's waits on its own "(off-CPU)" tracks, and no
other process's; hot's chunks hold no wait at all; each chunk says what it
counted (meta.fxagent.offCpu, on waits's only); the metrics file counts the
waits; and `fxagent view --merge all` of waits's chunks gives one
"HOST (off-CPU)" track holding every chunk's waits, the CPU tracks apart."""

import os
import re
import subprocess
import time

import fxtest
from fxdaemon import Daemon, with_cgroups

WINDOW = 2


def off_tracks(prof):
    return [th for th in prof.threads if th["samples"].get("weightType") == "tracing-ms"]


def run(t, cg):
    fxtest.skip_without_btf()
    me = os.getpid()
    waits_rel, hot_rel = f"/fxtest-{me}-waits", f"/fxtest-{me}-hot"
    cg.make(waits_rel)
    cg.make(hot_rel)

    def joiner(rel):
        def join():
            with open(os.path.join(cg.path(rel), "cgroup.procs"), "w") as f:
                f.write(str(os.getpid()))
        return join

    waits = t.spawn([os.path.join(t.workloads, "fx-waits"), "30", "/var/tmp"],
                    preexec_fn=joiner(waits_rel), stdin=subprocess.PIPE,
                    stdout=subprocess.DEVNULL, text=True)
    hot = t.spawn([os.path.join(t.workloads, "fx-hot-ab"), "30"], preexec_fn=joiner(hot_rel))
    waits.stdin.write("g")
    waits.stdin.flush()
    metrics = os.path.join(t.work, "fxagent.prom")
    d = Daemon(t, "daemon", f"""
window:
  seconds: {WINDOW}
metrics:
  textfile: {metrics}
targets:
  - name: waits
    cgroup: {waits_rel}
    off_cpu: true
  - name: hot
    cgroup: {hot_rel}
""", "-v")
    d.wait_started()
    time.sleep(3.5 * WINDOW)
    t.require(d.stop() == 0, f"fxagent exited {d.p.returncode}: {d.text()[-2000:]}")
    t.check("off-CPU time is not recorded" not in d.text(),
            "the agent did not record off-CPU time: " +
            "".join(ln for ln in d.text().splitlines(True) if "off-CPU" in ln))
    chunks = d.chunks()
    t.require(chunks.get("waits") and chunks.get("hot"),
              f"chunks of waits and hot, have {sorted(chunks)}")

    total_ms, seen_sleep, n_off = 0.0, 0.0, 0
    for seq, path in chunks["waits"]:
        prof = t.load(path)
        meta = prof.data["meta"]["fxagent"].get("offCpu")
        t.check(meta is not None, f"waits chunk {seq}: no meta.fxagent.offCpu")
        for th in off_tracks(prof):
            n_off += 1
            t.check(str(th["pid"]) == str(waits.pid),
                    f"waits chunk {seq}: off-CPU track {th['name']!r} of pid {th['pid']}, "
                    f"not fx-waits's {waits.pid}")
            t.check(th["name"].endswith(" (off-CPU)"), f"track named {th['name']!r}")
            for st, w in prof.samples(th):
                total_ms += w
                n = prof.stack_names(st)
                if "wait_sleep" in n and "do_nanosleep" in n:
                    seen_sleep += w
        if meta is not None and off_tracks(prof):
            got = sum(prof.weight([th]) for th in off_tracks(prof))
            t.check(abs(meta["ms"] - got) <= 0.001 * max(1, meta["waits"]),
                    f"waits chunk {seq}: meta says {meta['ms']} ms, tracks hold {got:.3f}")
    t.note(f"waits: {n_off} off-CPU tracks in {len(chunks['waits'])} chunks, {total_ms:.1f} ms, "
           f"{seen_sleep:.1f} ms in wait_sleep > ... > do_nanosleep")
    # fx-sleeper sleeps 7 ms at a time between bits of work; on a machine
    # short of CPU it gets to sleep less often, but some ten times at least.
    t.check(seen_sleep >= 10 * 7, f"only {seen_sleep:.1f} ms of wait_sleep recorded")

    for seq, path in chunks["hot"]:
        prof = t.load(path)
        t.check(not off_tracks(prof), f"hot chunk {seq} holds waits: "
                f"{[th['name'] for th in off_tracks(prof)]}")
        t.check("offCpu" not in prof.data["meta"]["fxagent"],
                f"hot chunk {seq} has meta.fxagent.offCpu")
        # The first window ends at the next wall-clock boundary: started
        # just before one, it lasts a few ms and may hold no sample at all.
        fx = prof.data["meta"]["fxagent"]
        span_s = (fx["windowEnd"] - fx["windowStart"]) / 1000.0
        t.check(span_s < 0.5 or any(str(th["pid"]) == str(hot.pid) for th in prof.threads),
                f"hot chunk {seq} ({span_s:.3f} s) has no fx-hot-ab")

    with open(metrics) as f:
        text = f.read()
    m = re.search(r"^fxagent_offcpu_waits_total (\S+)$", text, re.M)
    t.check(m and float(m[1]) > 0, "metrics: fxagent_offcpu_waits_total "
            f"{m and m[1]!r}, want > 0")
    t.check(re.search(r"^fxagent_offcpu_wait_seconds_total \S+$", text, re.M),
            "metrics: no fxagent_offcpu_wait_seconds_total")

    merged = os.path.join(t.work, "merged.json.gz")
    p = t.run_agent("view", d.out, "--target", "waits", "--merge", "all", "--output", merged)
    t.require(p.returncode == 0, f"fxagent view exited {p.returncode}: {p.stderr[-1000:]}")
    mp = t.load(merged)
    tracks = off_tracks(mp)
    t.check(len(tracks) == 1 and tracks[0]["name"].endswith(" (off-CPU)"),
            f"view --merge all: off-CPU tracks {[th['name'] for th in tracks]}")
    got = sum(mp.weight([th]) for th in tracks)
    t.note(f"view --merge all: {[th['name'] for th in tracks]} {got:.3f} ms")
    t.check(abs(got - total_ms) <= 0.001 * max(1, n_off) + 1e-6 * total_ms,
            f"view --merge all: {got:.3f} ms of waits, the chunks hold {total_ms:.3f}")


fxtest.main(with_cgroups(run))

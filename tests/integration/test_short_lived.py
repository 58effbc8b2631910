# SPDX-License-Identifier: MIT
"""Short-lived processes, system-wide: 150 fx-short runs of ~20 ms CPU each, every
one gone before the recording ends, are attributed by name with short_burn.
Also: without --include-idle there is no idle (pid 0) thread.

The recording (`--once` for up to LIMIT s) is ended by SIGINT once the last run
has exited, as a user ends a snapshot: a slow machine takes longer over the
runs and is recorded longer, and the runs need no deadline of their own but
the test's (150 runs take 3.5 s on a quiet machine of this kind, 12 s in a
cgroup of half a CPU)."""

import os
import signal
import subprocess
import time

import fxtest

LIMIT = 120
RUNS = 150


def body(t):
    short = os.path.join(t.workloads, "fx-short")
    t.require(os.access(short, os.X_OK), f"workload {short} is not built")
    log = os.path.join(t.work, "short.agent.log")
    agent = t.spawn([t.agent, "--once", "--duration", f"{LIMIT}s",
                     "--output", os.path.join(t.work, "short.json.gz")],
                    stderr=open(log, "w"))
    # The first run starts once the agent has its perf events open (it
    # enables them right after), not after a guessed pause.
    t.require(fxtest.wait_for(lambda: fxtest.perf_events_open(agent.pid), 30),
              f"fxagent opened no perf event within {fxtest.scaled(30):.0f} s; see {log}")
    time.sleep(0.1)
    started = time.monotonic()
    loop = t.spawn(["sh", "-c", f'for i in $(seq {RUNS}); do "$0" 20; done', short])
    try:
        loop.wait(timeout=fxtest.scaled(LIMIT - 10))
    except subprocess.TimeoutExpired:
        raise fxtest.Stop(f"{RUNS} x fx-short 20 did not finish within "
                          f"{fxtest.scaled(LIMIT - 10):.0f} s")
    t.note(f"{RUNS} runs of fx-short took {time.monotonic() - started:.1f} s")
    t.require(agent.poll() is None, f"fxagent ended ({agent.returncode}) before the runs did")
    agent.send_signal(signal.SIGINT)
    try:
        rc = agent.wait(timeout=fxtest.scaled(60))
    except subprocess.TimeoutExpired:
        raise fxtest.Stop(f"fxagent --once did not end within {fxtest.scaled(60):.0f} s of "
                          "SIGINT")
    t.require(rc == 0, f"fxagent --once (system-wide) exited {rc}; see short.agent.log")
    prof = t.load(os.path.join(t.work, "short.json.gz"))

    ths = prof.threads_named("fx-short")
    pids = {th["pid"] for th in ths}
    t.note(f"{len(pids)} fx-short processes of {RUNS} in the profile")
    t.check(len(pids) >= RUNS / 2, f"only {len(pids)} of {RUNS} fx-short processes appear by "
            f"name (each ran ~20 ms, ~2 samples)")
    share = prof.share(ths, prof.has_func("short_burn"))
    t.check(share >= 60, f"short_burn in {share:.1f}% of the fx-short samples, want >= 60; "
            f"e.g. {[prof.stack_names(st) for st, _ in prof.samples(ths[0])][:2] if ths else ''}")
    idle = [(th["pid"], th["name"]) for th in prof.threads if str(th["pid"]) == "0"]
    t.check(not idle, f"without --include-idle the profile has idle threads {idle[:4]}")

    cli = t.cli(prof.path, "short")
    handles = cli.handles(name="fx-short")
    t.require(handles, "profiler-cli thread list: no fx-short thread")
    funcs = cli.functions(handles)
    r = funcs.get("short_burn")
    if t.check(r is not None,
               f"profiler-cli: no short_burn in fx-short; have {sorted(funcs)[:20]}"):
        t.check(r["totalPercentage"] >= 60,
                f"profiler-cli: short_burn total {r['totalPercentage']:.1f}% of fx-short")


fxtest.main(body)

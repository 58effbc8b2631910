# SPDX-License-Identifier: MIT
"""Short-lived processes, system-wide: 150 fx-short runs of ~20 ms CPU each, every
one gone long before the recording ends, are attributed by name with short_burn.
Also: without --include-idle there is no idle (pid 0) thread."""

import os
import subprocess
import time

import fxtest

SECONDS = 6
RUNS = 150


def body(t):
    short = os.path.join(t.workloads, "fx-short")
    t.require(os.access(short, os.X_OK), f"workload {short} is not built")
    agent = t.spawn([t.agent, "--once", "--duration", f"{SECONDS}s",
                     "--output", os.path.join(t.work, "short.json.gz")],
                    stderr=open(os.path.join(t.work, "short.agent.log"), "w"))
    time.sleep(1)  # let the agent open its events before the first run
    loop = t.spawn(["sh", "-c", f'for i in $(seq {RUNS}); do "$0" 20; done', short])
    try:
        loop.wait(timeout=SECONDS)
    except subprocess.TimeoutExpired:
        t.check(False, f"{RUNS} x fx-short 20 did not finish within {SECONDS} s")
    try:
        rc = agent.wait(timeout=SECONDS + 60)
    except subprocess.TimeoutExpired:
        raise fxtest.Stop(f"fxagent --duration {SECONDS}s did not end within {SECONDS + 60} s")
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

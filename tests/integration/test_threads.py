# SPDX-License-Identifier: MIT
"""fx-threads: three worker threads named with pthread_setname_np show by name,
in one process (fx-threads), each with its own function."""

import time

import fxtest

SECONDS = 4
WORKERS = {"fx-worker-1": "work_one", "fx-worker-2": "work_two", "fx-worker-3": "work_three"}


def body(t):
    w = t.workload("fx-threads", SECONDS + 30)
    time.sleep(0.3)
    prof = t.record("threads", SECONDS, pids=[w.pid], measure=[w.pid])
    t.kill_processes()

    ths = prof.threads_of(w.pid)
    t.require(ths, f"no thread of pid {w.pid} (fx-threads) in the profile")
    names = sorted(th["name"] for th in ths)
    t.note(f"pid {w.pid} threads: {names}")
    tids = set()
    for name, fn in WORKERS.items():
        mine = prof.threads_named(name)
        if not t.check(len(mine) == 1, f"{len(mine)} threads named {name!r}, want 1; "
                       f"pid {w.pid} has {names}"):
            continue
        th = mine[0]
        tids.add(th["tid"])
        t.check(str(th["pid"]) == str(w.pid), f"{name} has pid {th['pid']!r}, want {w.pid}")
        t.check(th["tid"] != w.pid, f"{name} has the main thread's tid")
        t.check(th["processName"] == "fx-threads",
                f"{name}: processName {th['processName']!r}, want 'fx-threads'")
        t.check(th["isMainThread"] is False, f"{name} is marked isMainThread")
        # Equal work in each: about a third of the process's samples apiece.
        # At least half of what its own CPU time in the recording gives.
        n, total = prof.weight([th]), prof.weight(ths)
        least = fxtest.min_samples(prof.thread_cpu_s(w.pid, th["tid"]))
        t.check(n >= least and n >= 0.2 * total,
                f"{name}: {n} of the process's {total} samples, want about a third and at "
                f"least {least} for {prof.thread_cpu_s(w.pid, th['tid']):.2f} CPU s")
        share = prof.share([th], prof.has_func(fn))
        t.check(share >= 90, f"{name}: {fn} in {share:.1f}% of its samples, want >= 90")
    t.check(len(tids) == len(WORKERS), f"worker tids {sorted(tids)} are not distinct")

    cli = t.cli(prof.path, "threads")
    rows = [r for r in cli.threads() if str(r["pid"]) == str(w.pid)]
    t.check(len({r["processIndex"] for r in rows}) == 1,
            f"profiler-cli puts the threads of pid {w.pid} in several processes: "
            f"{[(r['name'], r['processIndex']) for r in rows]}")
    for name, fn in WORKERS.items():
        row = [r for r in rows if r["name"] == name]
        if not t.check(row, f"profiler-cli thread list: no {name} in pid {w.pid}; "
                       f"have {[r['name'] for r in rows]}"):
            continue
        funcs = cli.functions(row[0]["threadHandle"])
        top = max(funcs.values(), key=lambda r: r["selfSamples"], default=None)
        t.check(top is not None and top["name"] == fn,
                f"profiler-cli: {name}'s top self function is "
                f"{top and top['name']!r}, want {fn!r}")


fxtest.main(body)

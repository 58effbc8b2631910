# SPDX-License-Identifier: MIT
"""fx-hot-ab under `fxagent --once --pid`: the process is there by name, only it is
recorded, about 99 samples a second, hot_a ~70% and hot_b ~30% of its samples, each
under main -> hot_caller."""

import time

import fxtest

SECONDS = 5


def body(t):
    w = t.workload("fx-hot-ab", SECONDS + 30)
    time.sleep(0.3)
    cpu0, wall0 = fxtest.cpu_seconds(w.pid), time.monotonic()
    prof = t.record("hot_ab", SECONDS, pids=[w.pid])
    cpu1, wall1 = fxtest.cpu_seconds(w.pid), time.monotonic()
    t.kill_processes()

    # A thread without samples (the agent's own, carrying its markers) is fine.
    others = sorted({(th["pid"], th["name"]) for th in prof.threads if prof.weight([th])}
                    - {(str(w.pid), "fx-hot-ab")})
    t.check(not others, f"--pid {w.pid}: the profile also has samples of {others[:10]}")
    ths = prof.threads_of(w.pid)
    t.require(ths, f"no thread of pid {w.pid} in the profile; threads: "
              f"{[(th['pid'], th['name']) for th in prof.threads][:20]}")
    main = [th for th in ths if th["tid"] == w.pid]
    t.require(main, f"pid {w.pid}: no thread with tid == pid")
    th = main[0]
    t.check(th["name"] == "fx-hot-ab", f"thread name {th['name']!r}, want 'fx-hot-ab' (comm)")
    t.check(th["processName"] == "fx-hot-ab",
            f"processName {th['processName']!r}, want 'fx-hot-ab'")
    t.check(th["isMainThread"] is True, "the tid == pid thread is not isMainThread")

    # 99 samples per second of CPU the process had while recorded. Other work on
    # the machine can take CPU from it, so count its CPU share over the agent's run.
    n = prof.weight(ths)
    want = 99 * SECONDS * (cpu1 - cpu0) / (wall1 - wall0)
    t.check(0.8 * want <= n <= 1.15 * want,
            f"{n} samples of fx-hot-ab in {SECONDS} s at 99 Hz; it had "
            f"{100 * (cpu1 - cpu0) / (wall1 - wall0):.0f}% of a CPU, so want about {want:.0f}")
    interval = prof.data["meta"]["interval"]
    t.check(fxtest.near(interval, 1000 / 99, 0.01), f"meta.interval {interval}, want 1000/99")

    a = prof.share(ths, prof.has_func("hot_a"))
    b = prof.share(ths, prof.has_func("hot_b"))
    t.note(f"raw: {n} samples, hot_a {a:.1f}%, hot_b {b:.1f}%")
    tol = fxtest.share_tol(70, n, 7)
    t.check(fxtest.near(a, 70, tol),
            f"raw JSON: hot_a in {a:.1f}% of {n} samples, want 70 +- {tol:.1f}")
    t.check(fxtest.near(b, 30, tol),
            f"raw JSON: hot_b in {b:.1f}% of {n} samples, want 30 +- {tol:.1f}")

    # The whole path: a missing hot_caller means the unwinder lost a frame.
    for fn in ("hot_a", "hot_b"):
        with_fn = [st for th_ in ths for st, _ in prof.samples(th_)
                   if fn in prof.stack_names(st)]
        good = [st for st in with_fn
                if fxtest.contains(prof.stack_names(st), ["main", "hot_caller", fn])]
        if with_fn:
            pct = 100 * len(good) / len(with_fn)
            t.check(pct >= 90, f"only {pct:.1f}% of the {fn} stacks run main -> hot_caller -> "
                    f"{fn}; e.g. {prof.stack_names(with_fn[0])}")

    cli = t.cli(prof.path, "hot_ab")
    handles = cli.handles(pid=w.pid)
    t.require(handles, f"profiler-cli thread list has no thread of pid {w.pid}")
    rows = [r for r in cli.threads() if str(r["pid"]) == str(w.pid)]
    t.check(any(r["name"] == "fx-hot-ab" for r in rows),
            f"profiler-cli thread list: pid {w.pid} threads are named {[r['name'] for r in rows]}")
    funcs = cli.functions(handles)
    for fn, want_pct in (("hot_a", 70), ("hot_b", 30)):
        r = funcs.get(fn)
        if t.check(r is not None, f"profiler-cli thread functions: no {fn}; have "
                   f"{sorted(funcs)[:20]}"):
            t.check(fxtest.near(r["totalPercentage"], want_pct, tol),
                    f"profiler-cli: {fn} total {r['totalPercentage']:.1f}%, "
                    f"want {want_pct} +- {tol:.1f}")
    tree = cli.top_down(handles)
    paths = {p: node for p, node in fxtest.tree_paths(tree)}
    for fn in ("hot_a", "hot_b"):
        t.check(any(p[-3:] == ("main", "hot_caller", fn) for p in paths),
                f"profiler-cli top-down tree has no main > hot_caller > {fn} path")


fxtest.main(body)

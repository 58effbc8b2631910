# SPDX-License-Identifier: MIT
"""DWARF unwinding of threads and of code loaded after the agent started.

- fx-threads: each worker's stacks reach the thread's start in libc (clone3 /
  start_thread) through worker_main and the worker's own function.
- fx-dlopen, started once the agent has its events open: spins in warm_up for
  a second (the agent unwinds the process), then dlopen()s libfxplug.so,
  built without frame pointers, and spends the rest in its plug_hot through
  call_plugin: >= 90% of plug_hot's samples have main > call_plugin above it,
  so the unwinder took in the new module. Frame-pointer figures are printed
  for the record.

Sample counts (a worker's, warm_up's, plug_hot's) are at least half of what
the thread's or phase's own CPU time in the recording gives at 99 Hz, less
3.5 standard errors (fxtest.min_samples): a slow or loaded machine gives the
workload less CPU, and the agent fewer samples, alike.
"""

import os
import subprocess
import time

import fxtest

THREAD_SECONDS = 3
DLOPEN_SECONDS = 3.5
WARM_UP = 1.0  # fx-dlopen's warm-up, wall-clock seconds (fx_dlopen.c)
WORKERS = {"fx-worker-1": "work_one", "fx-worker-2": "work_two", "fx-worker-3": "work_three"}
LIBC = "libc.so.6"


def reaches_start(fn):
    """clone*/start_thread > worker_main > fn. Without libc's debug symbols the
    start frames have no name but their offset in libc (libc.so.6+0x...)."""
    def pred(names):
        if fn not in names or "worker_main" not in names:
            return False
        outer = names[:names.index("worker_main")]
        return bool(outer) and all(
            "start_thread" in n or "clone" in n or n.startswith(LIBC + "+0x") for n in outer)
    return pred


def thread_shares(prof, pid):
    out = {}
    for name, fn in WORKERS.items():
        ths = [th for th in prof.threads_named(name) if str(th["pid"]) == str(pid)]
        pred = reaches_start(fn)
        out[name] = (prof.weight(ths), prof.share(ths, lambda st: pred(prof.user_names(st))),
                     ths)
    return out


def threads(t):
    w = t.workload("fx-threads", 2 * THREAD_SECONDS + 30)
    time.sleep(0.3)
    dw = t.record("threads-dwarf", THREAD_SECONDS, pids=[w.pid], measure=[w.pid])
    fp = t.record("threads-fp", THREAD_SECONDS - 1, pids=[w.pid], extra=["--unwind", "fp"])
    t.kill_processes()
    t.require(dw.threads_of(w.pid), f"no thread of pid {w.pid} (fx-threads) in the profile")
    got, fgot = thread_shares(dw, w.pid), thread_shares(fp, w.pid)
    for name, fn in WORKERS.items():
        n, pct, ths = got[name]
        t.note(f"fx-threads {name}: dwarf {n} samples, start > worker_main > {fn} {pct:.1f}%; "
               f"fp {fgot[name][0]} samples, {fgot[name][1]:.1f}%")
        # Half of what the thread's own CPU time in the recording gives.
        cpu = sum(dw.thread_cpu_s(w.pid, th["tid"]) for th in ths)
        least = fxtest.min_samples(cpu, fxtest.HZ)
        if not t.check(n >= least, f"dwarf: {name}: {n} samples for {cpu:.2f} CPU s, want "
                       f">= {least}"):
            continue
        bad = next((dw.stack_names(st) for th in ths for st, _ in dw.samples(th)
                    if not reaches_start(fn)(dw.user_names(st))), [])
        t.check(pct >= 95, f"dwarf: {name}: only {pct:.1f}% of the samples run "
                f"start_thread/clone > worker_main > {fn}, want >= 95; e.g. {bad}")

    cli = t.cli(dw.path, "threads")
    for name, fn in WORKERS.items():
        handles = cli.handles(pid=w.pid, name=name)
        if not t.check(handles, f"profiler-cli: no thread {name} in pid {w.pid}"):
            continue
        tree = cli.top_down(handles)
        pred = reaches_start(fn)
        # Paths that end in fn: one per distinct stack of the worker.
        pct = sum(nd["totalPercentage"] for p, nd in fxtest.tree_paths(tree)
                  if p[-1] == fn and pred(list(p)))
        t.check(pct >= 90, f"profiler-cli: {name}: start_thread/clone > worker_main > {fn} "
                f"total {pct:.1f}%, want >= 90")


def dlopen_run(t, tag, extra=()):
    """fx-dlopen started once a system-wide `fxagent --once` has its perf events
    open. Returns (profile, pid, CPU s of its warm-up second, CPU s after it)."""
    out = os.path.join(t.work, tag + ".json.gz")
    ms = round((DLOPEN_SECONDS + 2) * 1000)
    cmd = [t.agent, "--once", "--duration", f"{ms}ms", "--output", out, *extra]
    t.note("+ " + " ".join(cmd))
    log = os.path.join(t.work, tag + ".agent.log")
    agent = t.spawn(cmd, stderr=open(log, "w"))
    t.require(fxtest.wait_for(lambda: fxtest.perf_events_open(agent.pid), 30),
              f"fxagent opened no perf event within {fxtest.scaled(30):.0f} s; see {log}")
    time.sleep(0.1)
    started = time.time() * 1000
    w = t.workload("fx-dlopen", DLOPEN_SECONDS)
    poll = fxtest.CpuPoller([w.pid])
    poll.start()
    t.require(w.wait(timeout=fxtest.scaled(DLOPEN_SECONDS + 30)) == 0,
              f"fx-dlopen exited {w.returncode} (libfxplug.so missing?)")
    poll.stop()
    try:
        agent.wait(timeout=fxtest.scaled(60))
    except subprocess.TimeoutExpired:
        raise fxtest.Stop(f"fxagent --duration {ms}ms did not end; see {log}")
    t.require(agent.returncode == 0, f"fxagent exited {agent.returncode}; see {log}")
    # fx-dlopen spends its first wall-clock second in warm_up.
    warm = poll.seconds(w.pid, started, started + 1000 * WARM_UP)
    rest = poll.seconds(w.pid, started + 1000 * WARM_UP, time.time() * 1000)
    return t.load(out), w.pid, warm, rest


def plugin_path_share(prof, pid):
    ths = prof.threads_of(pid)
    stacks = [(prof.user_names(st), wt) for th in ths for st, wt in prof.samples(th)]
    hot = [(n, wt) for n, wt in stacks if "plug_hot" in n]
    good = sum(wt for n, wt in hot
               if any(n[i:i + 3] == ["main", "call_plugin", "plug_hot"] for i in range(len(n))))
    total = sum(wt for _, wt in hot)
    return (sum(wt for n, wt in stacks if "warm_up" in n), total,
            100.0 * good / total if total else 0.0, hot)


def dlopen(t):
    prof, pid, warm_cpu, rest_cpu = dlopen_run(t, "dlopen-dwarf")
    fprof, fpid, _, _ = dlopen_run(t, "dlopen-fp", ["--unwind", "fp"])
    warm, n, pct, hot = plugin_path_share(prof, pid)
    _, fn_hot, fpct, _ = plugin_path_share(fprof, fpid)
    t.note(f"fx-dlopen: dwarf {warm} samples in warm_up ({warm_cpu:.2f} CPU s), {n} in "
           f"plug_hot ({rest_cpu:.2f} CPU s after), main > call_plugin > plug_hot {pct:.1f}%; "
           f"fp {fn_hot} in plug_hot, {fpct:.1f}%")
    # Half of what the process's CPU time in each phase gives (min_samples).
    least = fxtest.min_samples(warm_cpu, fxtest.HZ)
    t.check(warm >= least, f"fx-dlopen: {warm} samples in warm_up for {warm_cpu:.2f} CPU s "
            f"(want >= {least}): the agent did not see the process before its dlopen, so "
            "the test proves nothing")
    least = fxtest.min_samples(rest_cpu, fxtest.HZ)
    t.require(n >= least, f"fx-dlopen: {n} samples in plug_hot for {rest_cpu:.2f} CPU s, "
              f"want >= {least}")
    bad = next((names for names, _ in hot if "call_plugin" not in names), [])
    t.check(pct >= 90, f"dwarf: only {pct:.1f}% of plug_hot's samples have main > call_plugin "
            f"above it, want >= 90; e.g. {bad}")
    libs = [lib for lib in prof.data["libs"] if lib["name"] == "libfxplug.so"]
    t.check(libs, f"no lib libfxplug.so in the profile; libs: "
            f"{[lib['name'] for lib in prof.data['libs']]}")

    cli = t.cli(prof.path, "dlopen")
    handles = cli.handles(pid=pid)
    t.require(handles, f"profiler-cli thread list has no thread of pid {pid} (fx-dlopen)")
    funcs = cli.functions(handles)
    hot_r, call_r = funcs.get("plug_hot"), funcs.get("call_plugin")
    if t.check(hot_r and call_r, f"profiler-cli: plug_hot or call_plugin missing; have "
               f"{sorted(funcs)[:30]}"):
        t.check(call_r["totalPercentage"] >= 0.9 * hot_r["totalPercentage"],
                f"profiler-cli: call_plugin total {call_r['totalPercentage']:.1f}%, plug_hot "
                f"{hot_r['totalPercentage']:.1f}%: call_plugin is missing above plug_hot")


def body(t):
    threads(t)
    dlopen(t)


fxtest.main(body)

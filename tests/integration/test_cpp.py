# SPDX-License-Identifier: MIT
"""fx-cpp: the hot C++ function shows demangled (fxwork::Crunch<int>::run(int)),
and no mangled _Z name is left in the process's stacks."""

import time

import fxtest

SECONDS = 4


def body(t):
    w = t.workload("fx-cpp", SECONDS + 30)
    time.sleep(0.3)
    prof = t.record("cpp", SECONDS, pids=[w.pid])
    t.kill_processes()

    ths = prof.threads_of(w.pid)
    t.require(ths, f"no thread of pid {w.pid} (fx-cpp) in the profile")
    seen = {n for th in ths for st, _ in prof.samples(th) for n in prof.stack_names(st)}
    hot = sorted(n for n in seen if "fxwork::" in n and "run" in n)
    t.note(f"fxwork names: {hot}")
    t.check(hot, f"no demangled fxwork::...run name in the samples; names: {sorted(seen)[:20]}")
    t.check(all(n.startswith("fxwork::Crunch<int>::run") for n in hot),
            f"demangled names {hot}, want fxwork::Crunch<int>::run(int)")
    mangled = sorted(n for n in seen if n.startswith("_Z"))
    t.check(not mangled, f"mangled names left in fx-cpp's samples: {mangled[:10]}")
    if hot:
        share = prof.share(ths, lambda st: hot[0] in prof.stack_names(st))
        t.check(share >= 90, f"{hot[0]} in {share:.1f}% of the samples, want >= 90")

    cli = t.cli(prof.path, "cpp")
    handles = cli.handles(pid=w.pid)
    t.require(handles, f"profiler-cli thread list has no thread of pid {w.pid}")
    funcs = cli.functions(handles)
    t.check(any("fxwork::" in n and "run" in n for n in funcs),
            f"profiler-cli thread functions: no fxwork::...run; have {sorted(funcs)[:20]}")
    t.check(not [n for n in funcs if n.startswith("_Z")],
            f"profiler-cli shows mangled names: {[n for n in funcs if n.startswith('_Z')]}")


fxtest.main(body)

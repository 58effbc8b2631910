# SPDX-License-Identifier: MIT
"""fx-vdso spends its time in clock_gettime, in the vDSO, which has no file on
disk: the agent reads its own copy of the vDSO image, so these stacks unwind
through it to main (not truncated) and its frames are named."""

import time

import fxtest

SECONDS = 3


def body(t):
    w = t.workload("fx-vdso", SECONDS + 20)
    time.sleep(0.3)
    prof = t.record("vdso", SECONDS, pids=[w.pid])
    t.cleanup()
    ths = prof.threads_of(w.pid)
    t.require(ths, f"no thread of pid {w.pid} (fx-vdso)")
    n = prof.weight(ths)
    t.require(n > 100, f"only {n} samples of fx-vdso")
    whole = prof.share(ths, lambda st: fxtest.contains(prof.stack_names(st),
                                                       ["main", "read_clocks"]))
    t.note(f"{n} samples, main > read_clocks in {whole:.1f}%")
    t.check(whole >= 95, f"main > read_clocks in only {whole:.1f}% of fx-vdso's samples: "
            "stacks through the vDSO are cut short")

    libs = prof.data["libs"]
    vdso = [i for i, lib in enumerate(libs) if lib["name"] == "[vdso]"]
    t.require(vdso, f"no [vdso] lib in the profile: {[lib['name'] for lib in libs]}")
    t.check(libs[vdso[0]]["codeId"], "the [vdso] lib has no build-id")
    leaf = [prof.stack_names(st)[-1] for th in ths for st, _ in prof.samples(th) if st is not None]
    named = [x for x in leaf if "clock_gettime" in x]
    t.check(len(named) >= 0.5 * len(leaf), f"only {len(named)} of {len(leaf)} leaf frames are "
            f"clock_gettime; e.g. {sorted(set(leaf))[:10]}")

    truncated = prof.recording()["truncated"]
    t.check(truncated <= 0.02 * n, f"{truncated} of {n} stacks truncated")

    cli = t.cli(prof.path, "vdso")
    funcs = cli.functions(cli.handles(pid=w.pid))
    t.check("read_clocks" in funcs and funcs["read_clocks"]["totalPercentage"] >= 95,
            f"profiler-cli: read_clocks total {funcs.get('read_clocks', {}).get('totalPercentage')}")


fxtest.main(body)

# SPDX-License-Identifier: MIT
"""Truncated DWARF walks are counted, and what they found is kept.

- fx-deep spins in deep_hot under 2000 frames of deep_down (over 200 KiB of
  stack). With `--stack-bytes 4096` no walk gets near main: the recording
  marker's `truncated` is about the number of samples, yet each sample keeps
  the frames the copy did hold (deep_hot under deep_down).
- fx-hot-ab, shallow, with the default stack copy (16 KiB): (almost) no walk is
  truncated.
"""

import time

import fxtest

SECONDS = 3


def deep(t):
    w = t.workload("fx-deep", SECONDS + 30)
    time.sleep(0.3)
    prof = t.record("deep-4k", SECONDS, pids=[w.pid], extra=["--stack-bytes", "4096"],
                    measure=[w.pid])
    t.kill_processes()
    rec = prof.recording()
    ths = prof.threads_of(w.pid)
    t.require(ths, f"no thread of pid {w.pid} (fx-deep) in the profile")
    n = prof.weight(ths)
    hot = prof.share(ths, prof.has_func("deep_hot"))
    main = prof.share(ths, prof.has_func("main"))
    depths = sorted(prof.stack_names(st).count("deep_down") for th in ths
                    for st, _ in prof.samples(th))
    median = depths[len(depths) // 2] if depths else 0
    t.note(f"fx-deep, --stack-bytes 4096: {n} samples, marker {rec}, deep_hot {hot:.1f}%, "
           f"main {main:.1f}%, median {median} deep_down frames per stack")
    least = fxtest.min_samples(prof.cpu_s(w.pid))
    t.require(n >= least, f"fx-deep: only {n} samples for {prof.cpu_s(w.pid):.2f} CPU s in "
              f"the recording (at least {least})")
    t.check(rec["samples"] == n, f"marker samples {rec['samples']}, but fx-deep has {n} "
            "samples (only it was recorded)")
    t.check(rec["truncated"] > 0, f"marker truncated {rec['truncated']}: no walk of fx-deep's "
            "200 KiB stack was counted as cut short by a 4 KiB copy")
    t.check(rec["truncated"] >= 0.95 * n and rec["truncated"] <= n,
            f"marker truncated {rec['truncated']} of {n} samples: want nearly all (>= 95%)")
    t.check(main <= 1, f"main in {main:.1f}% of fx-deep's samples: the walk cannot reach it "
            "through a 4 KiB copy of a 200 KiB stack")
    t.check(hot >= 95, f"deep_hot in only {hot:.1f}% of fx-deep's samples: a truncated walk "
            "lost the frames it found")
    # 4 KiB hold about 30 of deep_down's frames (128 bytes each).
    t.check(median >= 10, f"median {median} deep_down frames per stack: the truncated walk "
            "kept too few of the frames the copy held")

    cli = t.cli(prof.path, "deep")
    funcs = cli.functions(cli.handles(pid=w.pid))
    for fn in ("deep_hot", "deep_down"):
        r = funcs.get(fn)
        if t.check(r is not None, f"profiler-cli: no function {fn}; have {sorted(funcs)[:20]}"):
            t.check(r["totalPercentage"] >= 95,
                    f"profiler-cli: {fn} total {r['totalPercentage']:.1f}%, want >= 95")


def shallow(t):
    w = t.workload("fx-hot-ab", SECONDS + 30)
    time.sleep(0.3)
    prof = t.record("hot-ab-default", SECONDS, pids=[w.pid], measure=[w.pid])
    t.kill_processes()
    rec = prof.recording()
    ths = prof.threads_of(w.pid)
    n = prof.weight(ths)
    main = prof.share(ths, prof.has_func("main"))
    t.note(f"fx-hot-ab, default stack copy: {n} samples, marker {rec}, main {main:.1f}%")
    least = fxtest.min_samples(prof.cpu_s(w.pid))
    t.require(n >= least, f"fx-hot-ab: only {n} samples for {prof.cpu_s(w.pid):.2f} CPU s in "
              f"the recording (at least {least})")
    t.check(rec["truncated"] <= 0.02 * rec["samples"],
            f"marker truncated {rec['truncated']} of {rec['samples']} samples: a shallow "
            "stack should unwind whole in 16 KiB (want <= 2%)")
    t.check(main >= 98, f"main in only {main:.1f}% of fx-hot-ab's samples")


def body(t):
    deep(t)
    shallow(t)


fxtest.main(body)

# SPDX-License-Identifier: MIT
"""The compiled unwind rules against libdwfl, sample by sample.

`fxagent --once --unwind check -v` unwinds every sample twice, with the rules
compiled from .eh_frame (the default) and with libdwfl alone, and prints how
many of libdwfl's frames the rules gave too (the same address at the same
depth, up to the first difference) and how many samples came out the same,
truncation included. Two recordings of SECONDS each, of these processes only:

- Debian's own binaries, stripped as shipped (python3.11, xz with liblzma,
  perl, sqlite3: what test_stripped_perf runs) and bench/'s fx-bench-work
  (qsort with a callback: stacks through libc);
- the test workloads that unwinding has tests for: no frame pointers, lld's
  layout, .debug_frame only (which the rules leave to libdwfl), threads,
  dlopen, C++, PLT stubs, the vDSO, deep recursion, qsort, libc calls.

Each: at least half the samples the processes' own CPU time in the recording
gives at 99 Hz less 3.5 standard errors (fxtest.min_samples), at least
MIN_DEPTH frames compared a sample, at least 99.9% of them the same,
and (Debian's binaries) at least MIN_BY_TABLES of the samples walked by the
rules alone: a check where libdwfl did everything would prove nothing.
"""

import os
import re
import subprocess

import fxtest
import test_stripped_perf as sp

SECONDS = 8
# Frames compared per sample, at the least: every workload's stacks are
# deeper than this (main and what it calls, and libc's start above it).
MIN_DEPTH = 3
AGREE = 99.9
MIN_BY_TABLES = 0.9

CHECK = re.compile(r"unwind check: (\d+) of (\d+) samples the same as libdwfl's, "
                   r"(\d+) of (\d+) frames")
TABLES = re.compile(r"unwound by tables (\d+), by libdwfl (\d+)")
WORKLOADS = ("fx-nofp", "fx-lld", "fx-dbgframe", "fx-threads", "fx-dlopen", "fx-cpp", "fx-plt",
             "fx-vdso", "fx-deep", "fx-qsort", "fx-libc")


def start_debian(t):
    pids = []
    for tag, argv, stdin in sp.programs(t):
        if isinstance(stdin, list):
            cat = t.spawn(["cat", *stdin], stdout=subprocess.PIPE)
            p = t.spawn(argv, stdin=cat.stdout, stdout=subprocess.DEVNULL)
            cat.stdout.close()
        elif stdin is not None:
            p = t.spawn(argv, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True)
            p.stdin.write(stdin)
            p.stdin.flush()
        else:
            p = t.spawn(argv, stdout=subprocess.DEVNULL)
        t.note(f"{tag}: pid {p.pid}")
        pids.append(p.pid)
    bench = os.path.join(os.path.dirname(t.agent), "bench", "fx-bench-work")
    t.require(os.access(bench, os.X_OK), f"{bench} is not built")
    pids.append(t.spawn([bench, "60"]).pid)
    return pids


def check(t, tag, pids, min_by_tables):
    prof = t.record(tag, SECONDS, pids=pids, extra=["--unwind", "check", "--verbose"],
                    measure=pids)
    cpu = sum(prof.cpu_s(pid) for pid in pids)
    with open(os.path.join(t.work, tag + ".agent.log"), encoding="utf-8") as f:
        log = f.read()
    m = CHECK.search(log)
    t.require(m, f"{tag}: no 'unwind check' line in the agent's log")
    same, samples, fsame, frames = map(int, m.groups())
    m = TABLES.search(log)
    t.require(m, f"{tag}: no 'unwound by tables' line in the agent's log")
    by_tables, by_libdwfl = map(int, m.groups())
    pct = 100.0 * fsame / frames if frames else 0.0
    share = by_tables / max(1, by_tables + by_libdwfl)
    print(f"{tag}: {fsame} of {frames} frames the same ({pct:.3f}%), {same} of {samples} "
          f"samples; by the rules alone {by_tables}, by libdwfl {by_libdwfl} "
          f"({100 * share:.1f}% by the rules)")
    least = fxtest.min_samples(cpu, fxtest.HZ)
    t.check(samples >= least, f"{tag}: only {samples} samples compared; the processes used "
            f"{cpu:.2f} CPU s in the recording (at least {least} expected)")
    t.check(frames >= MIN_DEPTH * samples,
            f"{tag}: only {frames} frames compared for {samples} samples (< {MIN_DEPTH} each)")
    t.check(pct >= AGREE, f"{tag}: {pct:.3f}% of libdwfl's frames the same (< {AGREE}%)")
    t.check(share >= min_by_tables,
            f"{tag}: {100 * share:.1f}% of samples walked by the rules alone "
            f"(< {100 * min_by_tables:.0f}%)")


def body(t):
    check(t, "debian", start_debian(t), MIN_BY_TABLES)
    t.kill_processes()
    pids = [t.workload(name, SECONDS + 30).pid for name in WORKLOADS]
    # fx-dbgframe has only .debug_frame: its samples are libdwfl's, so no
    # share is asked of this group, only agreement.
    check(t, "workloads", pids, 0.0)


if __name__ == "__main__":
    fxtest.main(body)

# SPDX-License-Identifier: MIT
"""CPython 3.13's trampolines unwound with the CFI it writes in its jitdump.

`python3.13 -X perf_jit fib.py` runs each Python function through a small
trampoline of its own in anonymous executable memory and appends, for each,
a CODE_UNWINDING_INFO (its .eh_frame) and a CODE_LOAD (`py::QUALNAME:FILE`)
to /tmp/jit-PID.dump, which it maps so that profilers find it. The
trampoline keeps no frame pointer: without its CFI a DWARF walk stops at the
first one. fxagent (--once -p) and `perf record --call-graph dwarf` (no
`perf inject --jit`) sample it over the same seconds. Checked:
- the JIT lib's names come from the jitdump;
- at least 95% of fxagent's stacks are whole, to _start, through every
  trampoline: `py::fib` under `py::work` under `py::main` under the
  interpreter's C frames;
- perf's do not reach _start (at most half of them: it has no CFI for the
  trampolines), which is what this adds.

CPython 3.13.0 writes the jitdump through a 4 KiB stdio buffer: the records
of the last functions first called reach the file once more code is compiled
or at exit. The workload calls each of its functions once, then imports a
few modules (as services do at start-up), then computes: its functions'
records are in the file by then. Skipped, saying so, where pyenv's 3.13 is
not installed.
"""

import os
import subprocess
import time

import fxtest
from fxjit import FIB_PY_JIT, jit_named, jit_status, perf_dwarf_reach, python, stacks

SECONDS = 3
def in_order(names, *prefixes):
    """Whether @names (outermost first) hold a frame of each prefix, in order."""
    i = 0
    for n in names:
        if i < len(prefixes) and n.startswith(prefixes[i]):
            i += 1
    return i == len(prefixes)


def body(t):
    py = python(13)
    if not py:
        print("SKIP: no CPython 3.13 here (pyenv install 3.13): -X perf_jit needs 3.13 or later")
        raise SystemExit(fxtest.SKIP)
    script = os.path.join(t.work, "fib.py")
    with open(script, "w") as f:
        f.write(FIB_PY_JIT)
    w = t.spawn([py, "-X", "perf_jit", script], cwd=t.work)
    time.sleep(1.5)  # started, imported, computing
    data = os.path.join(t.work, "python.perf.data")
    perf = t.spawn(["perf", "record", "-q", "-e", "cpu-clock", "-F", "99", "--call-graph",
                    "dwarf", "-p", str(w.pid), "-o", data, "--", "sleep", str(SECONDS)],
                   stdout=subprocess.DEVNULL,
                   stderr=open(os.path.join(t.work, "python.perf.log"), "w"))
    prof = t.record("python", SECONDS, pids=[w.pid])
    try:
        t.require(perf.wait(timeout=fxtest.scaled(60)) == 0,
                  f"perf record exited {perf.returncode}; see python.perf.log")
    except subprocess.TimeoutExpired:
        raise fxtest.Stop("perf record did not end")
    w.kill()

    st = jit_status(prof, w.pid)
    t.check(st == "jitdump", f"the JIT lib's names come from {st!r}, want 'jitdump'")
    samples = stacks(prof, w.pid)
    total = sum(wt for *_, wt in samples)
    whole = sum(wt for names, _, wt in samples if names and names[0] == "_start")
    nested = sum(wt for names, _, wt in samples
                 if in_order(names, "_start", "py::main:", "py::work:", "py::fib:"))
    frames, named = jit_named(prof, w.pid)
    perf_n, perf_whole = perf_dwarf_reach(t, data)
    t.note(f"{os.path.basename(py)}: fxagent {total} samples, {whole} whole to _start, "
           f"{nested} with _start > py::main > py::work > py::fib; {named} of {frames} JIT "
           f"frames named; perf --call-graph dwarf: {perf_whole} of {perf_n} reach _start")
    t.require(total >= 20, f"only {total} samples of the interpreter")
    t.check(whole >= 0.95 * total, f"{whole} of {total} stacks reach _start")
    t.check(nested >= 0.95 * total,
            f"{nested} of {total} stacks hold _start > py::main > py::work > py::fib")
    t.check(frames and named >= 0.95 * frames, f"{named} of {frames} JIT frames named")
    t.require(perf_n >= 20, f"perf recorded only {perf_n} samples")
    t.check(perf_whole <= 0.5 * perf_n,
            f"perf alone reached _start in {perf_whole} of {perf_n} samples: the check "
            f"that fxagent adds something is moot")


if __name__ == "__main__":
    fxtest.main(body)

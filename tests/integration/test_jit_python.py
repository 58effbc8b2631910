# SPDX-License-Identifier: MIT
"""CPython 3.12's perf trampolines, named from its perf map.

`python3.12 -X perf fib.py` runs each Python function through a small
trampoline of its own in anonymous executable memory, and appends
`py::QUALNAME:FILE` for it to /tmp/perf-PID.map. fxagent (--once -p) samples
it. Checked:
- every sample's stack holds `py::fib:…/fib.py` (the interpreter runs fib
  the whole time), and every frame in the JIT code is named from the map;
- the JIT lib says its names came from the perf map.
Whole stacks through the trampolines need their unwinding information
(3.13's -X perf_jit writes it): not checked here. Skipped, saying so, where
pyenv's 3.12 is not installed.
"""

import os
import time

import fxtest
from fxjit import jit_named, jit_status, python, stacks

SECONDS = 3
FIB_PY = """\
def fib(n):
    return n if n < 2 else fib(n - 1) + fib(n - 2)


def work():
    s = 0
    while True:
        s += fib(22)


work()
"""


def body(t):
    py = python(12)
    if not py:
        print("SKIP: no CPython 3.12 here (pyenv install 3.12): -X perf needs 3.12 or later")
        raise SystemExit(fxtest.SKIP)
    script = os.path.join(t.work, "fib.py")
    with open(script, "w") as f:
        f.write(FIB_PY)
    w = t.spawn([py, "-X", "perf", script], cwd=t.work)
    time.sleep(1.0)
    prof = t.record("python", SECONDS, pids=[w.pid])
    w.kill()

    st = jit_status(prof, w.pid)
    t.check(st == "perf map", f"the JIT lib's names come from {st!r}, want 'perf map'")
    samples = stacks(prof, w.pid)
    total = sum(wt for *_, wt in samples)
    with_fib = sum(wt for names, _, wt in samples
                   if any(n.startswith("py::fib:") and n.endswith("fib.py") for n in names))
    jit_frames, jit_named_n = jit_named(prof, w.pid)
    t.note(f"python {os.path.basename(py)}: {total} samples, {with_fib} with py::fib; "
           f"{jit_named_n} of {jit_frames} JIT frames named")
    t.require(total >= 20, f"only {total} samples of the interpreter")
    t.check(with_fib >= 0.95 * total, f"{with_fib} of {total} stacks hold py::fib")
    t.check(jit_frames and jit_named_n == jit_frames,
            f"{jit_named_n} of {jit_frames} JIT frames named from the perf map")


if __name__ == "__main__":
    fxtest.main(body)

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

import glob
import os
import re
import time

import fxtest

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


def python312():
    for p in sorted(glob.glob("/root/.pyenv/versions/3.12*/bin/python3.12")) + \
            ["/usr/bin/python3.12", "/usr/local/bin/python3.12"]:
        if os.access(p, os.X_OK):
            return p
    return None


def jit_status(prof, pid):
    for k, v in prof.data["meta"]["fxagent"].get("symbols", {}).items():
        if k.startswith(f"[jit pid {pid}]"):
            return v
    return None


def body(t):
    py = python312()
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
    s = prof.data["shared"]
    ft, fu, rt, strs = s["frameTable"], s["funcTable"], s["resourceTable"], s["stringArray"]
    lib = next((i for i, lb in enumerate(prof.data["libs"])
                if lb["name"] == f"[jit pid {w.pid}]"), None)
    total = with_fib = jit_frames = jit_named = 0
    for th in prof.threads_of(w.pid):
        for stack, wt in prof.samples(th):
            frames = prof.stack_frames(stack)
            names = [strs[fu["name"][ft["func"][f]]] for f in frames]
            total += wt
            with_fib += wt if any(n.startswith("py::fib:") and n.endswith("fib.py")
                                  for n in names) else 0
            for f, n in zip(frames, names):
                res = fu["resource"][ft["func"][f]]
                if res is not None and res >= 0 and rt["lib"][res] == lib:
                    jit_frames += wt
                    jit_named += wt if not re.fullmatch(r"0x[0-9a-f]+", n) else 0
    t.note(f"python {os.path.basename(py)}: {total} samples, {with_fib} with py::fib; "
           f"{jit_named} of {jit_frames} JIT frames named")
    t.require(total >= 20, f"only {total} samples of the interpreter")
    t.check(with_fib >= 0.95 * total, f"{with_fib} of {total} stacks hold py::fib")
    t.check(jit_frames and jit_named == jit_frames,
            f"{jit_named} of {jit_frames} JIT frames named from the perf map")


if __name__ == "__main__":
    fxtest.main(body)

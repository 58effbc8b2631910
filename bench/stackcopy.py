#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Stack copy: how many stacks stay whole at each sampling.stack_bytes.

In DWARF mode (the default) each sample carries the user registers and a copy
of the top `stack_bytes` of the user stack; a walk that needs more of the
stack than the copy holds stops early and is counted as truncated. The copy
is most of a record (16384 of about 17.7 KiB), so it sets the perf rings'
size and the memory they lock (ringplan.h).

Per workload, one process runs while five agents sample it at once, one per
size (`fxagent --once -p PID -F HZ --stack-bytes N --verbose`, N = 2048,
4096, 8192, 16384, 32768): the five see the same run. Each agent's own
counter gives the figure ("stats: dwarf unwinds U, ..., truncated T" of
--verbose): whole = 1 - T / U. A walk also stops for reasons the copy does
not change (no CFI for an address): those show as the same share at every
size. Workloads: fx-bench-work (qsort through libc, the overhead bench's),
python3 (the interpreter, stripped, on two small programs: library calls
in a loop, and a recursion that goes through C at every level), and the
test workloads of tests/workloads that run on their own (fx-deep recurses
200 KiB deep on purpose: no copy holds it).

Also per size: the ring per CPU the agent picks at 99 Hz (from `--check-config`
with that stack_bytes) and what the rings lock on a 128-CPU host (128 x
(ring + a 4 KiB page)), and the agent's CPU per sample (the median over the
workloads: copying and reading the bigger records costs too).

The pick: the smallest size at which every workload that some size keeps
>= 99% whole does keep >= 99% whole.

usage: bench/stackcopy.py [--build DIR] [--quick] [--seconds S] [--frequency HZ]
"""
import os
import re
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fxbench as fb  # noqa: E402

SIZES = [2048, 4096, 8192, 16384, 32768]
DEFAULT = 16384
AIM = 99.0
RING = re.compile(r"perf ring per CPU: ([\d.]+) (KiB|MiB|GiB)")
UNITS = {"KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30}

# Library calls from Python code in a loop: the C stack is the interpreter's
# own frames under main (3.11 runs Python-to-Python calls in one C frame).
PY_LOOP = """
import json, re, sys, time
end = time.monotonic() + float(sys.argv[1])
data = [{"id": i, "name": "n%d" % i, "tags": ["a", "b", str(i)]} for i in range(200)]
pat = re.compile(r"(\\w+)-(\\d+)")
text = "abc-123 def-456 " * 50
def fib(n):
    return n if n < 2 else fib(n - 1) + fib(n - 2)
while time.monotonic() < end:
    fib(15)
    json.loads(json.dumps(data))
    sorted(data, key=lambda d: (d["name"][::-1], d["id"]))
    pat.findall(text)
"""

# A tree walked through map(): every level re-enters the interpreter from C
# (map -> the function -> _PyEval_EvalFrameDefault), as callbacks, key
# functions and decorators written in C do.
PY_NESTED = """
import sys, time
end = time.monotonic() + float(sys.argv[1])
def walk(depth):
    if depth == 0:
        return sum(i * i for i in range(40))
    return sum(map(walk, (depth - 1, depth - 1)))
while time.monotonic() < end:
    walk(10)
"""


def add_args(ap):
    ap.add_argument("--seconds", type=float,
                    help="seconds sampled per workload (default 8; --quick 3)")
    ap.add_argument("--frequency", type=int, default=999,
                    help="samples per second (default 999: more samples per second of run)")


def workloads(ctx):
    wl = os.path.join(ctx.build, "tests", "workloads")
    out = [("fx-bench-work", lambda s: [ctx.work, f"{s:g}"]),
           ("python3: library calls", lambda s: ["python3", "-c", PY_LOOP, f"{s:g}"]),
           ("python3: 10 levels through C", lambda s: ["python3", "-c", PY_NESTED, f"{s:g}"])]
    for name in ("fx-hot-ab", "fx-qsort", "fx-libc", "fx-cpp", "fx-inline", "fx-threads",
                 "fx-nofp", "fx-lld", "fx-syscalls", "fx-deep"):
        path = os.path.join(wl, name)
        if os.access(path, os.X_OK):
            out.append((name, lambda s, p=path: [p, f"{s:g}"]))
    return out


def ring_at_99(ctx, size, tmp):
    """The ring per CPU in bytes that --check-config states for @size at 99 Hz."""
    conf = os.path.join(tmp, f"stack{size}.yaml")
    with open(conf, "w") as f:
        f.write(f"sampling:\n  stack_bytes: {size}\n")
    p = subprocess.run([ctx.agent, "--check-config", conf, "--output-dir",
                        os.path.join(tmp, "chunks")], capture_output=True, text=True)
    m = RING.search(p.stdout)
    if p.returncode != 0 or not m:
        sys.exit(f"--check-config said no ring size ({p.returncode}):\n{p.stdout}{p.stderr}")
    return float(m.group(1)) * UNITS[m.group(2)]


def sample_one(ctx, argv, secs, hz, tmp):
    """Five agents, one per size, on one run of @argv: {size: figures}."""
    work = subprocess.Popen(argv(secs + 3), stdout=subprocess.DEVNULL)
    agents, errs, drains = {}, {}, []
    try:
        time.sleep(0.5)  # python3 imports its modules
        for n in SIZES:
            cmd = [ctx.agent, "--once", "-p", str(work.pid), "-F", str(hz), "--stack-bytes",
                   str(n), "-d", f"{int(secs * 1000)}ms", "-o",
                   os.path.join(tmp, f"s{n}.json.gz"), "--verbose"]
            agents[n] = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                         text=True)
            errs[n] = []
            # Drained all along: a full pipe would stall the agent.
            t = threading.Thread(target=lambda p=agents[n], e=errs[n]: e.append(p.stderr.read()),
                                 daemon=True)
            t.start()
            drains.append(t)
        for p in agents.values():
            p.wait(timeout=secs + 120)
        for t in drains:
            t.join()
    finally:
        fb.kill_all([work] + list(agents.values()))
    res = {}
    for n in SIZES:
        err = "".join(errs[n])
        d, o = fb.DWARF_STATS.search(err), fb.ONCE_STATS.search(err)
        if agents[n].returncode != 0 or not d or not o:
            sys.exit(f"fxagent --stack-bytes {n} failed ({agents[n].returncode}):\n"
                     f"{err[-3000:]}")
        unwinds, trunc = int(d.group(1)), int(d.group(4))
        samples = int(o.group(5))
        res[n] = {"unwinds": unwinds, "truncated": trunc,
                  "whole": 100.0 * (unwinds - trunc) / unwinds if unwinds else None,
                  "us_per_sample": float(o.group(2)) * 1000.0 / samples if samples else None}
    return res


def pick(results):
    """The smallest size keeping >= AIM% whole on every workload that some
    size keeps so; and the workloads no size does."""
    fits = [w for w, r in results.items() if any((r[n]["whole"] or 0) >= AIM for n in SIZES)]
    for n in SIZES:
        if all(results[w][n]["whole"] >= AIM for w in fits):
            return n, [w for w in results if w not in fits]
    return None, [w for w in results if w not in fits]


def size(b):
    for unit in ("GiB", "MiB"):
        if b >= UNITS[unit] and b % UNITS[unit] == 0:
            return f"{b // UNITS[unit]} {unit}"
    return f"{b / UNITS['MiB']:.2f} MiB" if b >= 16 * UNITS["MiB"] else f"{b // 1024} KiB"


def run(ctx, a):
    secs = a.seconds or (3 if ctx.quick else 8)
    ctx.need(ctx.agent, ctx.work)
    fb.need_root()
    results, rings = {}, {}
    with tempfile.TemporaryDirectory(prefix="fxbench-") as tmp:
        for n in SIZES:
            rings[n] = ring_at_99(ctx, n, tmp)
        for name, argv in workloads(ctx):
            results[name] = sample_one(ctx, argv, secs, a.frequency, tmp)
            ctx.log(f"stackcopy: {name}: " + ", ".join(
                f"{n} {fb.f(r['whole'], '{:.2f}')}% of {r['unwinds']}"
                for n, r in results[name].items()))
    head = ["workload"] + [f"{n}" for n in SIZES]
    rows = [[name] + [f"{fb.f(r[n]['whole'], '{:.1f}')}% ({r[n]['unwinds']})" for n in SIZES]
            for name, r in results.items()]
    rows.append(["ring per CPU at 99 Hz"] + [size(int(rings[n])) for n in SIZES])
    rows.append(["locked on 128 CPUs"] + [size(int(128 * (rings[n] + 4096))) for n in SIZES])
    rows.append(["agent CPU per sample, median"] + [
        f"{fb.med([r[n]['us_per_sample'] for r in results.values()]):.1f} us" for n in SIZES])
    best, never = pick(results)
    lines = ["### Stack copy size", "",
             f"`bench/stackcopy.py`: the share of whole stacks (not truncated) per "
             f"`sampling.stack_bytes`, each workload sampled for {secs:g} s at {a.frequency} Hz "
             f"by five agents at once (samples unwound in parentheses).", ""]
    lines += fb.table(head, rows)
    if best is None:
        lines.append(f"No size keeps >= {AIM:g}% of stacks whole on every workload.")
    else:
        said = "the default" if best == DEFAULT else f"the default is {DEFAULT}"
        lines.append(f"Smallest size keeping >= {AIM:g}% of stacks whole on every workload: "
                     f"{best} ({said})." +
                     (f" Not whole at any size (deeper than 32 KiB or not unwindable): "
                      f"{', '.join(never)}." if never else ""))
    return lines + [""]


if __name__ == "__main__":
    fb.section_main(sys.modules[__name__], __doc__)

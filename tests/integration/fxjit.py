# SPDX-License-Identifier: MIT
"""What the JIT tests read from a profile: a process's JIT lib ("[jit pid
N]"), where its names came from, and its samples' stacks by name."""

import glob
import os
import re
import subprocess

ADDRESS = re.compile(r"0x[0-9a-f]+")


def jit_lib(prof, pid):
    """The index of @pid's JIT lib in the profile's libs, or None."""
    for i, lib in enumerate(prof.data["libs"]):
        if lib["name"] == f"[jit pid {pid}]":
            return i
    return None


def jit_status(prof, pid):
    """Where the names of @pid's JIT lib came from (meta.fxagent.symbols), or None."""
    for k, v in prof.data["meta"]["fxagent"].get("symbols", {}).items():
        if k.startswith(f"[jit pid {pid}]"):
            return v
    return None


def stacks(prof, pid):
    """[(names outermost first, lib of each frame, weight)] of @pid's samples
    with a stack."""
    s = prof.data["shared"]
    ft, fu, rt, strs = s["frameTable"], s["funcTable"], s["resourceTable"], s["stringArray"]
    out = []
    for th in prof.threads_of(pid):
        for stack, w in prof.samples(th):
            frames = prof.stack_frames(stack)
            if not frames:
                continue
            names, libs = [], []
            for f in frames:
                names.append(strs[fu["name"][ft["func"][f]]])
                res = fu["resource"][ft["func"][f]]
                libs.append(rt["lib"][res] if res is not None and res >= 0 else None)
            out.append((names, libs, w))
    return out


def jit_named(prof, pid):
    """(frames in @pid's JIT code, those of them named, not an address),
    counted by sample weight."""
    lib = jit_lib(prof, pid)
    frames = named = 0
    for names, libs, w in stacks(prof, pid):
        for n, lb in zip(names, libs):
            if lb is not None and lb == lib:
                frames += w
                named += w if not ADDRESS.fullmatch(n) else 0
    return frames, named


def perf_dwarf_reach(t, data, name="_start"):
    """Of the samples of `perf record --call-graph dwarf` in @data, (how
    many, how many of their stacks reach the frame @name), from `perf script`."""
    out = subprocess.run(["perf", "script", "-i", data, "-F", "ip,sym"], capture_output=True,
                         text=True, timeout=120)
    t.require(out.returncode == 0, f"perf script exited {out.returncode}")
    samples = reach = 0
    frames = []
    for ln in out.stdout.splitlines() + [""]:
        if ln.strip():
            frames.append(ln.split()[1] if len(ln.split()) > 1 else "")
        elif frames:
            samples += 1
            reach += name in frames
            frames = []
    return samples, reach


# The workloads: fib in a loop, as each runtime's tests and bench/jit.py run it.
FIB_JS = """\
function fib(n) { return n < 2 ? n : fib(n - 1) + fib(n - 2); }
function work() { let s = 0; for (;;) { s += fib(25); } }
work();
"""

# CPython 3.13 writes its jitdump through a 4 KiB stdio buffer: each function
# runs once, then imports (as services do at start-up) push their trampolines'
# records to the file, then the loop.
FIB_PY_JIT = """\
import time


def fib(n):
    return n if n < 2 else fib(n - 1) + fib(n - 2)


def work(seconds):
    end = time.monotonic() + seconds
    while True:
        fib(20)
        if time.monotonic() >= end:
            break


def main():
    work(0)
    import argparse, asyncio, decimal, email.message, http.client, json, logging, unittest
    work(3600)


main()
"""

FIB_JAVA = """\
public class Fib {
    static int fib(int n) { return n < 2 ? n : fib(n - 1) + fib(n - 2); }
    public static void main(String[] a) { long s = 0; for (;;) { s += fib(25); } }
}
"""


def python(minor):
    """CPython 3.@minor (pyenv's, else Debian's), or None."""
    for p in sorted(glob.glob(f"/root/.pyenv/versions/3.{minor}*/bin/python3.{minor}")) + \
            [f"/usr/bin/python3.{minor}", f"/usr/local/bin/python3.{minor}"]:
        if os.access(p, os.X_OK):
            return p
    return None

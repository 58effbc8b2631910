#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""JIT code: what naming and unwinding it costs the agent, per runtime.

The runtimes on the machine (each left out, saying so, when absent) compute
fib in a loop, started as docs/usage.md says:
- node --perf-basic-prof --perf-prof (Node 20: a perf map of ~2 MB and a
  jitdump that carries .eh_frame for each piece of code);
- python3.13 -X perf_jit (a jitdump with .eh_frame per trampoline);
- python3.12 -X perf (a perf map);
- java -XX:+PreserveFramePointer, then `jcmd PID Compiler.perfmap` (a
  snapshot perf map).

--once: for each runtime, `fxagent --once -v -d S -p PID` with
symbolization.jit on and off, in turns (on off off on on off ...), R rounds
each. Per setting, the medians of: the agent's CPU for the whole run (wait4:
user + system; recording, symbolizing, writing), its peak RSS (VmHWM,
polled), symbolize+write (its own figure), the JIT frames named (share of
the frames in the runtime's JIT code) and the stacks whole to _start.

Daemon: all the runtimes at once, whole system, W-second windows for T
seconds, once with each setting: the agent's CPU (every thread, schedstat)
from its first chunk to its last, as a share of one CPU, and its steady and
peak RSS.

usage: bench/jit.py [--build DIR] [--quick] [--seconds S] [--rounds R]
"""
import glob
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fxbench as fb  # noqa: E402

sys.path.insert(0, os.path.join(fb.HERE, "..", "tests", "integration"))
import fxjit  # noqa: E402
import fxtest  # noqa: E402



def add_args(ap):
    ap.add_argument("--seconds", type=int, help="per --once run (default 5; --quick 2)")
    ap.add_argument("--rounds", type=int, help="per setting and runtime (default 3; --quick 1)")
    ap.add_argument("--daemon-seconds", type=int, help="per daemon run (default 40; --quick 12)")


def start_runtimes(ctx, tmp):
    """[(name, Popen)] of the runtimes found, computing; and the absent ones' names."""
    got, absent = [], []
    node, py13, py12 = shutil.which("node"), fxjit.python(13), fxjit.python(12)
    java = {n: shutil.which(n) for n in ("javac", "java", "jcmd")}
    with open(os.path.join(tmp, "fib.js"), "w") as f:
        f.write(fxjit.FIB_JS)
    with open(os.path.join(tmp, "fib.py"), "w") as f:
        f.write(fxjit.FIB_PY_JIT)
    if node:
        got.append(("node --perf-basic-prof --perf-prof",
                    subprocess.Popen([node, "--perf-basic-prof", "--perf-prof", "fib.js"],
                                     cwd=tmp)))
    else:
        absent.append("node")
    for tag, py, flag in (("python3.13 -X perf_jit", py13, "perf_jit"),
                          ("python3.12 -X perf", py12, "perf")):
        if py:
            got.append((tag, subprocess.Popen([py, "-X", flag, "fib.py"], cwd=tmp)))
        else:
            absent.append(tag.split()[0])
    if all(java.values()):
        with open(os.path.join(tmp, "Fib.java"), "w") as f:
            f.write(fxjit.FIB_JAVA)
        subprocess.run([java["javac"], "Fib.java"], cwd=tmp, check=True, timeout=120)
        jp = subprocess.Popen([java["java"], "-XX:+PreserveFramePointer", "-cp", tmp, "Fib"],
                              cwd=tmp, stdout=subprocess.DEVNULL)
        got.append(("java -XX:+PreserveFramePointer", jp))
    else:
        absent.append("java (openjdk-17-jdk-headless)")
    time.sleep(3)  # compiled (C2 too) by then
    for tag, p in got:
        if tag.startswith("java"):
            subprocess.run([java["jcmd"], str(p.pid), "Compiler.perfmap"], capture_output=True,
                           timeout=60)
    return got, absent


def write_configs(tmp):
    paths = {}
    for on in (True, False):
        paths[on] = os.path.join(tmp, f"jit-{'on' if on else 'off'}.yaml")
        with open(paths[on], "w") as f:
            f.write(f"symbolization:\n  jit: {'true' if on else 'false'}\n")
    return paths


def once(ctx, cfg, pid, seconds, out):
    """One --once run: its figures."""
    p = subprocess.Popen([ctx.agent, "--config", cfg, "--once", "-v", "-d", f"{seconds}s",
                          "-p", str(pid), "-o", out], stderr=subprocess.PIPE, text=True)
    err = []
    drain = threading.Thread(target=lambda: err.append(p.stderr.read()), daemon=True)
    drain.start()
    watch = fb.Watch(p.pid, 0.05)
    code, cpu_s = fb.wait_rusage(p)
    watch.stop()
    drain.join()
    if code != 0:
        sys.exit(f"fxagent --once exited {code}:\n{''.join(err)[-2000:]}")
    m = fb.ONCE_STATS.search("".join(err))
    prof = fxtest.Profile(out)
    frames, named = fxjit.jit_named(prof, pid)
    samples = fxjit.stacks(prof, pid)
    total = sum(w for *_, w in samples)
    whole = sum(w for names, _, w in samples if "_start" in names or "start_thread" in names)
    return {"cpu_ms": cpu_s * 1000.0, "peak_mib": watch.hwm_kib / 1024.0,
            "symwrite_ms": float(m.group(4)) if m else None,
            "named_pct": 100.0 * named / frames if frames else None,
            "whole_pct": 100.0 * whole / total if total else None}


def daemon_run(ctx, on, seconds, window, tmp):
    out = os.path.join(tmp, f"chunks-{on}")
    cfg = os.path.join(tmp, f"daemon-{on}.yaml")
    with open(cfg, "w") as f:
        f.write(f"window:\n  seconds: {window}\noutput:\n  directory: {out}\n"
                f"symbolization:\n  jit: {'true' if on else 'false'}\n")
    ag = subprocess.Popen([ctx.agent, "--config", cfg], stderr=subprocess.DEVNULL)
    watch = fb.Watch(ag.pid, 0.25)
    first = last = None

    def chunks():
        try:
            return len([n for n in os.listdir(out) if n.endswith(".json.gz")])
        except OSError:
            return 0
    t_end = time.monotonic() + seconds
    seen = 0
    while time.monotonic() < t_end + window:
        n = chunks()
        if n > seen:
            now = (time.monotonic(), fb.task_cpu_ns(ag.pid))
            first = first or now
            last = now
            seen = n
        if time.monotonic() > t_end and first and last is not first and n > 1:
            break
        time.sleep(0.1)
    fb.stop(ag)
    watch.stop()
    if not first or last is first:
        return None
    return {"cpu_pct": 100.0 * (last[1] - first[1]) / 1e9 / (last[0] - first[0]),
            "steady_mib": (watch.steady_kib(first[0], last[0]) or 0) / 1024.0,
            "peak_mib": watch.hwm_kib / 1024.0, "windows": seen - 1}


def run(ctx, a):
    seconds = a.seconds or (2 if ctx.quick else 5)
    rounds = a.rounds or (1 if ctx.quick else 3)
    dsec = a.daemon_seconds or (12 if ctx.quick else 40)
    window = 3 if ctx.quick else 5
    ctx.need(ctx.agent)
    fb.need_root()
    lines = ["### JIT code", ""]
    with tempfile.TemporaryDirectory(prefix="fxbench-jit-") as tmp:
        got, absent = start_runtimes(ctx, tmp)
        cfgs = write_configs(tmp)
        rows = []
        try:
            for tag, p in got:
                res = {True: [], False: []}
                order = [True, False, False, True] * rounds
                for i, on in enumerate(order[:2 * rounds]):
                    ctx.log(f"jit: {tag}, jit {'on' if on else 'off'} ({i + 1}/{2 * rounds})")
                    res[on].append(once(ctx, cfgs[on], p.pid, seconds,
                                        os.path.join(tmp, f"once-{i}.json.gz")))
                for on in (True, False):
                    r = res[on]
                    rows.append([tag if on else "", "on" if on else "off",
                                 fb.f(fb.med([x["cpu_ms"] for x in r]), "{:.0f}"),
                                 fb.f(fb.med([x["peak_mib"] for x in r])),
                                 fb.f(fb.med([x["symwrite_ms"] for x in r]), "{:.0f}"),
                                 fb.f(fb.med([x["named_pct"] for x in r]), "{:.0f}%"),
                                 fb.f(fb.med([x["whole_pct"] for x in r]), "{:.0f}%")])
            drows = []
            for on in (True, False):
                ctx.log(f"jit: daemon, every runtime, jit {'on' if on else 'off'}")
                d = daemon_run(ctx, on, dsec, window, tmp)
                drows.append(["on" if on else "off"] +
                             ([fb.f(d["cpu_pct"], "{:.2f}%"), fb.f(d["steady_mib"]),
                               fb.f(d["peak_mib"]), str(d["windows"])] if d else ["-"] * 4))
        finally:
            for _, p in got:
                p.kill()
                p.wait()
                for f in glob.glob(f"/tmp/perf-{p.pid}.map") + glob.glob(f"/tmp/jit-{p.pid}.dump"):
                    os.unlink(f)
    lines += [f"`fxagent --once -d {seconds}s -p PID` of each runtime computing fib, "
              f"symbolization.jit on and off in turns, {rounds} rounds each; medians. CPU: "
              "the agent's whole run (wait4). Named: the frames in the JIT code with a "
              "name; whole: the stacks that reach _start (start_thread for Java's "
              "thread)." + (f" Not on this machine: {', '.join(absent)}." if absent else ""),
              ""]
    lines += fb.table(["runtime", "jit", "agent CPU ms", "peak RSS MiB", "symbolize+write ms",
                       "JIT frames named", "stacks whole"], rows)
    lines += [f"The daemon, whole system, with all of them computing at once: {window} s "
              f"windows for {dsec} s; CPU of every thread of the agent from its first chunk "
              "to its last, as a share of one CPU.", ""]
    lines += fb.table(["jit", "agent CPU", "steady RSS MiB", "peak RSS MiB", "windows"], drows)
    return lines


if __name__ == "__main__":
    fb.section_main(sys.modules[__name__], __doc__)

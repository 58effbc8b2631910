# SPDX-License-Identifier: MIT
"""Java 17's compiled methods, named from the perf map `jcmd PID
Compiler.perfmap` writes.

Fib.java computes fib(25) in a loop under `java -XX:+PreserveFramePointer`;
once C2 has compiled it, `jcmd PID Compiler.perfmap` writes a snapshot of the
compiled code to /tmp/perf-PID.map. fxagent (--once -p) samples it. Checked:
- at least 90% of the samples' innermost frames are `int Fib.fib(int)`,
  and at least 95% of the frames in the JIT code are named from the map (a
  snapshot: the agent asks the JVM for a fresh one when code compiled after
  it is sampled, see test_jit_java_fresh.py);
- at least 95% of the stacks reach the thread's start (start_thread) through
  the JIT frames: HotSpot keeps rbp chains with PreserveFramePointer;
- the JIT lib says its names came from the perf map.
Skipped, saying so, where javac, java or jcmd is missing (openjdk-17-jdk-headless).
"""

import os
import shutil
import subprocess
import time

import fxtest
from fxjit import FIB_JAVA, jit_named, jit_status, stacks

SECONDS = 3
def body(t):
    tools = {n: shutil.which(n) for n in ("javac", "java", "jcmd")}
    if not all(tools.values()):
        print(f"SKIP: no {', '.join(n for n, p in tools.items() if not p)} here "
              "(apt-get install openjdk-17-jdk-headless)")
        raise SystemExit(fxtest.SKIP)
    with open(os.path.join(t.work, "Fib.java"), "w") as f:
        f.write(FIB_JAVA)
    subprocess.run([tools["javac"], "Fib.java"], cwd=t.work, check=True, timeout=120)
    w = t.spawn([tools["java"], "-XX:+PreserveFramePointer", "-cp", t.work, "Fib"],
                cwd=t.work, stdout=subprocess.DEVNULL)
    time.sleep(fxtest.scaled(3))  # compiled by C2 by then
    p = subprocess.run([tools["jcmd"], str(w.pid), "Compiler.perfmap"], capture_output=True,
                       text=True, timeout=fxtest.scaled(60))
    t.require(p.returncode == 0, f"jcmd Compiler.perfmap exited {p.returncode}: "
              f"{(p.stdout + p.stderr)[-400:]}")
    prof = t.record("java", SECONDS, pids=[w.pid])
    w.kill()
    try:
        os.unlink(f"/tmp/perf-{w.pid}.map")
    except OSError:
        pass

    st = jit_status(prof, w.pid)
    t.check(st == "perf map", f"the JIT lib's names come from {st!r}, want 'perf map'")
    samples = stacks(prof, w.pid)
    total = sum(wt for *_, wt in samples)
    fib = sum(wt for names, _, wt in samples if names[-1] == "int Fib.fib(int)")
    reach = sum(wt for names, _, wt in samples if "start_thread" in names)
    jit_frames, jit_named_n = jit_named(prof, w.pid)
    t.note(f"java: {total} samples, {fib} in Fib.fib, {reach} reach start_thread; "
           f"{jit_named_n} of {jit_frames} JIT frames named")
    t.require(total >= 20, f"only {total} samples of the JVM")
    t.check(fib >= 0.9 * total, f"{fib} of {total} samples in int Fib.fib(int)")
    t.check(reach >= 0.95 * total, f"{reach} of {total} stacks reach start_thread")
    # The map is a snapshot; code compiled after jcmd wrote it is named
    # from the one the agent asks for (test_jit_java_fresh.py).
    t.check(jit_frames and jit_named_n >= 0.95 * jit_frames,
            f"{jit_named_n} of {jit_frames} JIT frames named from the perf map")


if __name__ == "__main__":
    fxtest.main(body)

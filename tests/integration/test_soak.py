# SPDX-License-Identifier: MIT
"""Soak: the daemon at 99 Hz with 10 s windows for FX_SOAK_SECONDS (120 s in
CI; 1800 s for the figures in docs/testing.md) while a steady mix runs: fx-hot-ab,
fx-threads, and every 2 s a burst of short-lived processes and a process that
dlopens a library (fx-dlopen). Each burst runs a new binary: a copy of
fx-short with a build-id of its own, deleted once it has run, as a build or a
deploy makes new binaries all the time.

The mix runs in a cgroup of its own, the agent's one target. Whole system, the
agent rightly names every program the machine runs, and its memory follows
them (a browser or Node.js started meanwhile moved it from 30 to 58 MiB on one
machine): such a test cannot tell a leak from a foreign program. In target
mode only the mix is sampled and named, so the figures below are the agent's
own. (The side-band, process starts and mappings, is still read for the whole
system, as targets need.)

- every window is written: seq consecutive, windows contiguous, one per 10 s;
- the agent's RSS and open fds are flat: after the first two windows (caches
  warm), the median RSS of the last third of the run (one reading a second)
  is within 4 MiB of the median of the first third (medians: a window's end
  makes a spike of the publisher's batch that one reading may catch and the
  next not; a leak moves the median), and the median count of the agent's fds on
  files that no live process maps within 16 (they come and go with the
  processes of a window; the fds on binaries that live processes map are
  what a process table holds, the ones beyond are what a leak would add
  to). Both series are printed, one point per window;
- no fd is left on the binary of a burst that ended three windows before the
  end (an fd kept per binary ever seen adds one a burst).
"""

import os
import signal
import statistics
import subprocess
import threading
import time

import fxtest
from fxdaemon import Daemon, EPS_MS, check_chunk, spawn_in, with_cgroups

WINDOW = 10


def run(t, cg):
    seconds = int(os.environ.get("FX_SOAK_SECONDS", "120"))
    t.require(seconds >= 6 * WINDOW, f"FX_SOAK_SECONDS={seconds}: want at least {6 * WINDOW}")
    rel = f"/fxtest-{os.getpid()}-soak"
    where = cg.make(rel)
    procs = os.path.join(where, "cgroup.procs")

    def join():
        with open(procs, "w") as f:
            f.write(str(os.getpid()))

    spawn_in(t, where, "fx-hot-ab", seconds + 30)
    spawn_in(t, where, "fx-threads", seconds + 30)
    d = Daemon(t, "soak", f"window:\n  seconds: {WINDOW}\n"
               f"targets:\n  - name: soak\n    cgroup: {rel}\n")
    d.wait_started()
    stop = threading.Event()

    def churn():
        short = os.path.join(t.workloads, "fx-short")
        dl = os.path.join(t.workloads, "fx-dlopen")
        n = 0
        while not stop.wait(2.0):
            n += 1
            exe = os.path.join(t.work, f"fx-short-{n}")
            fxtest.fresh_binary(short, exe)
            kids = [subprocess.Popen([exe, "5"], preexec_fn=join) for _ in range(20)]
            kids.append(subprocess.Popen([dl, "1.5"], preexec_fn=join))
            for k in kids:
                k.wait()
            os.unlink(exe)
            ended[exe] = time.time()
        t.note(f"{n} bursts, each of a new fx-short binary")

    ended = {}  # a burst's binary -> when its processes had all exited
    ch = threading.Thread(target=churn, daemon=True)
    ch.start()
    series = []  # (time, rss KiB, fds), one a second
    start = time.time()
    while time.time() - start < seconds:
        t.require(d.p.poll() is None, f"fxagent exited {d.p.returncode}: {d.text()[-1500:]}")
        rss, fds = fxtest.rss_and_fds(d.p.pid)
        live = fxtest.mapped_files()
        extra = sum(p.startswith("/") and p not in live for p in fxtest.open_files(d.p.pid))
        series.append((time.time(), rss, fds, extra))
        time.sleep(1.0)
    stop.set()
    ch.join()
    held = fxtest.open_files(d.p.pid)
    now = time.time()
    old = {exe for exe, ts in ended.items() if now - ts > 3 * WINDOW}
    on_old = sorted({os.path.basename(p) for p in held if p in old})
    t.note(f"fds on burst binaries: {sum(p in ended for p in held)} on the "
           f"{len(ended) - len(old)} of the last {3 * WINDOW} s, {len(on_old)} on the "
           f"{len(old)} older ones")
    t.check(not on_old, f"fds left on {len(on_old)} binaries whose processes ended more "
            f"than {3 * WINDOW} s ago: {on_old[:5]}")
    rc = d.stop(signal.SIGTERM)
    t.kill_processes()
    t.check(rc == 0, f"fxagent exited {rc}")

    per_window = {}
    for ts, rss, fds, extra in series:
        per_window[int(ts // WINDOW)] = (rss, fds, extra)
    t.note("RSS KiB per window: " + " ".join(str(r) for r, _, _ in per_window.values()))
    t.note("open fds per window: " + " ".join(str(n) for _, n, _ in per_window.values()))
    t.note("of them on files no live process maps: " +
           " ".join(str(x) for _, _, x in per_window.values()))
    warm = [p for ts, *p in series if ts >= start + 2 * WINDOW]
    third = max(1, len(warm) // 3)
    first, last = warm[:third], warm[-third:]
    r1, r3 = (statistics.median(r for r, _, _ in first),
              statistics.median(r for r, _, _ in last))
    f1, f3 = statistics.median(x for _, _, x in first), statistics.median(x for _, _, x in last)
    t.note(f"largest RSS: first third {max(r for r, _, _ in first)} KiB, last third "
           f"{max(r for r, _, _ in last)} KiB")
    t.note(f"median RSS: first third {r1:.0f} KiB, last third {r3:.0f} KiB; median fds on files no "
           f"live process maps {f1:.0f}, {f3:.0f}; median open fds "
           f"{statistics.median(n for _, n, _ in first):.0f}, "
           f"{statistics.median(n for _, n, _ in last):.0f}")
    if os.environ.get("FX_SANITIZED"):
        t.note("RSS not checked: ASan's quarantine holds freed memory (LeakSanitizer "
               "checks for leaks instead)")
    else:
        t.check(r3 <= r1 + 4096, f"the median RSS grew from {r1:.0f} KiB (first third) to "
                f"{r3:.0f} KiB (last third) over {seconds} s")
    t.check(f3 <= f1 + 16, f"the median of fds on files no live process maps grew from "
            f"{f1:.0f} to {f3:.0f} over {seconds} s")

    lst = d.chunks().get("soak", [])
    seqs = [s for s, _ in lst]
    t.check(seqs == list(range(len(seqs))), f"seq {seqs}: a window is missing")
    t.check(len(lst) >= seconds // WINDOW, f"{len(lst)} chunks in {seconds} s of "
            f"{WINDOW} s windows")
    prev = None
    for seq, path in lst:
        # Lint and read back every tenth chunk and the last: the rest only raw.
        prof = t.load(path) if seq % 10 == 0 or seq == seqs[-1] else fxtest.Profile(path)
        fx = check_chunk(t, prof, "soak", seq, path)
        if prev is not None:
            t.check(abs(prev - fx["windowStart"]) <= EPS_MS, f"seq {seq}: not contiguous")
        prev = fx["windowEnd"]


if __name__ == "__main__":
    fxtest.main(with_cgroups(run))

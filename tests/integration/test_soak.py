# SPDX-License-Identifier: MIT
"""Soak: the daemon at 99 Hz with 10 s windows for FX_SOAK_SECONDS (120 s in
CI; 1800 s for the figures in the README), whole system, while a steady mix
runs: fx-hot-ab, fx-threads, and every 2 s a burst of short-lived processes
(fx-short) and a process that dlopens a library (fx-dlopen).

- every window is written: seq consecutive, windows contiguous, one per 10 s;
- the agent's RSS and open fds are flat: after the first two windows (caches
  warm), the largest RSS of the last third of the run is within 4 MiB of the
  largest of the first third, and the fds within 8; both series are printed,
  one point per window.
"""

import os
import signal
import subprocess
import threading
import time

import fxtest
from fxdaemon import Daemon, EPS_MS, check_chunk

WINDOW = 10


def status(pid):
    with open(f"/proc/{pid}/status") as f:
        rss = next(int(ln.split()[1]) for ln in f if ln.startswith("VmRSS:"))
    return rss, len(os.listdir(f"/proc/{pid}/fd"))


def body(t):
    seconds = int(os.environ.get("FX_SOAK_SECONDS", "120"))
    t.require(seconds >= 6 * WINDOW, f"FX_SOAK_SECONDS={seconds}: want at least {6 * WINDOW}")
    t.workload("fx-hot-ab", seconds + 30)
    t.workload("fx-threads", seconds + 30)
    d = Daemon(t, "soak", f"window:\n  seconds: {WINDOW}\n")
    d.wait_started()
    stop = threading.Event()

    def churn():
        short = os.path.join(t.workloads, "fx-short")
        dl = os.path.join(t.workloads, "fx-dlopen")
        while not stop.wait(2.0):
            kids = [subprocess.Popen([short, "5"]) for _ in range(20)]
            kids.append(subprocess.Popen([dl, "1.5"]))
            for k in kids:
                k.wait()

    ch = threading.Thread(target=churn, daemon=True)
    ch.start()
    series = []  # (time, rss KiB, fds), one a second
    start = time.time()
    while time.time() - start < seconds:
        t.require(d.p.poll() is None, f"fxagent exited {d.p.returncode}: {d.text()[-1500:]}")
        series.append((time.time(), *status(d.p.pid)))
        time.sleep(1.0)
    stop.set()
    ch.join()
    rc = d.stop(signal.SIGTERM)
    t.kill_processes()
    t.check(rc == 0, f"fxagent exited {rc}")

    per_window = {}
    for ts, rss, fds in series:
        per_window[int(ts // WINDOW)] = (rss, fds)
    t.note("RSS KiB per window: " + " ".join(str(r) for r, _ in per_window.values()))
    t.note("open fds per window: " + " ".join(str(n) for _, n in per_window.values()))
    warm = [p for ts, *p in series if ts >= start + 2 * WINDOW]
    third = max(1, len(warm) // 3)
    first, last = warm[:third], warm[-third:]
    r1, r3 = max(r for r, _ in first), max(r for r, _ in last)
    f1, f3 = max(n for _, n in first), max(n for _, n in last)
    t.note(f"largest RSS: first third {r1} KiB, last third {r3} KiB; fds {f1}, {f3}")
    if os.environ.get("FX_SANITIZED"):
        t.note("RSS not checked: ASan's quarantine holds freed memory (LeakSanitizer "
               "checks for leaks instead)")
    else:
        t.check(r3 <= r1 + 4096, f"RSS grew from {r1} to {r3} KiB over {seconds} s")
    t.check(f3 <= f1 + 8, f"open fds grew from {f1} to {f3} over {seconds} s")

    lst = d.chunks().get("system", [])
    seqs = [s for s, _ in lst]
    t.check(seqs == list(range(len(seqs))), f"seq {seqs}: a window is missing")
    t.check(len(lst) >= seconds // WINDOW, f"{len(lst)} chunks in {seconds} s of "
            f"{WINDOW} s windows")
    prev = None
    for seq, path in lst:
        # Lint and read back every tenth chunk and the last: the rest only raw.
        prof = t.load(path) if seq % 10 == 0 or seq == seqs[-1] else fxtest.Profile(path)
        fx = check_chunk(t, prof, "system", seq, path)
        if prev is not None:
            t.check(abs(prev - fx["windowStart"]) <= EPS_MS, f"seq {seq}: not contiguous")
        prev = fx["windowEnd"]


if __name__ == "__main__":
    fxtest.main(body)

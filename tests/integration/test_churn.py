# SPDX-License-Identifier: MIT
"""Process churn: the daemon (2 s windows) while fx-churn starts 300
short-lived processes a second for 10 s (each a fork and exec, half of them
dlopen()ing libfxplug.so), about 3000 in all. fx-churn runs in a cgroup of its
own, the agent's one target: what else the machine runs meanwhile (compilers,
say) would grow the agent's caches and hide what the churn does to them.

- no window is lost: 6 or more chunks, seq consecutive, windows contiguous;
- short-lived processes appear by name: every whole window of the churn has
  fx-churn-kid threads, most samples in churn_burn and in the dlopen'ed
  plug_hot (the rest in exec and the dynamic loader), and every frame of
  fx-churn and libfxplug.so named;
- the state of dead processes is released: the agent's RSS, sampled every
  0.2 s, stays flat once its caches are warm (from the second window of the
  churn on it grows by less than 8 MiB and 25%), and within three windows of
  the churn's end no fd is left open on its files: the object cache, the
  unwinder and the symbolizer all give back what dead processes used.
The series are printed.
"""

import os
import re
import subprocess
import threading
import time

import fxtest
from fxdaemon import Daemon, EPS_MS, check_chunk, with_cgroups

WINDOW = 2
CHURN_S = 10
RATE = 300
# Frames of the kids' own code left unnamed. (A sample inside execve has the
# old image's return address as its only user frame: "0x7f...", as in perf.)
OURS = re.compile(r"^(fx-churn|libfxplug\.so)\+0x")


class Sampler(threading.Thread):
    """The agent's VmRSS (KiB) and open fds every `period` s: [(t, rss, fds)]."""

    def __init__(self, pid, period=0.2):
        super().__init__(daemon=True)
        self.pid, self.period, self.series, self.done = pid, period, [], False

    def run(self):
        while not self.done:
            try:
                rss, fds = fxtest.rss_and_fds(self.pid)
            except (OSError, StopIteration):
                break
            self.series.append((time.time(), rss, fds))
            time.sleep(self.period)

    def stop(self):
        self.done = True
        self.join()


def run(t, cg):
    rel = f"/fxtest-{os.getpid()}-churn"
    procs = os.path.join(cg.make(rel), "cgroup.procs")
    d = Daemon(t, "churn", f"window:\n  seconds: {WINDOW}\n"
               f"targets:\n  - name: churn\n    cgroup: {rel}\n")
    d.wait_started()
    mem = Sampler(d.p.pid)
    mem.start()
    exe = os.path.join(t.workloads, "fx-churn")
    t.require(os.access(exe, os.X_OK), f"{exe} is not built")

    def join():
        with open(procs, "w") as f:
            f.write(str(os.getpid()))

    start = time.time()
    churn = subprocess.run([exe, str(CHURN_S), str(RATE)], capture_output=True, text=True,
                           timeout=CHURN_S + 60, preexec_fn=join)
    end = time.time()
    t.require(churn.returncode == 0, f"fx-churn exited {churn.returncode}: {churn.stderr}")
    kids = int(churn.stdout.strip() or 0)
    t.note(f"fx-churn started {kids} processes in {end - start:.1f} s")
    t.check(kids >= 1000, f"only {kids} processes started")
    kid_files = [os.path.realpath(os.path.join(t.workloads, n))
                 for n in ("fx-churn", "libfxplug.so")]

    def fds_on_kid_files():
        held = [os.path.realpath(p) for p in fxtest.open_files(d.p.pid)]
        return {os.path.basename(k): held.count(k) for k in kid_files}

    at_end = fds_on_kid_files()
    # The last churn window is written, then the next one, which nothing of
    # the churn used: its objects' fds go then (the symbolizer keeps an
    # object one window more).
    deadline = time.time() + 3 * WINDOW + 2
    left = at_end
    while time.time() < deadline and any(left.values()):
        time.sleep(0.2)
        left = fds_on_kid_files()
    gone_after = time.time() - end
    mem.stop()
    rc = d.stop()
    t.check(rc == 0, f"fxagent exited {rc}")

    lst = d.chunks().get("churn", [])
    seqs = [s for s, _ in lst]
    t.check(seqs == list(range(len(seqs))), f"seq {seqs}: a window is missing")
    t.check(len(lst) >= (end - start) / WINDOW + 1, f"{len(lst)} chunks for "
            f"{end - start + WINDOW:.0f} s of 2 s windows")
    prev = None
    windows = []
    for seq, path in lst:
        prof = t.load(path)
        fx = check_chunk(t, prof, "churn", seq, path)
        if prev is not None:
            t.check(abs(prev - fx["windowStart"]) <= EPS_MS, f"seq {seq}: not contiguous")
        prev = fx["windowEnd"]
        windows.append((fx["windowStart"] / 1000, fx["windowEnd"] / 1000))
        if fx["windowStart"] / 1000 >= start and fx["windowEnd"] / 1000 <= end:
            kid = prof.threads_named("fx-churn-kid")
            burn = prof.weight(kid, prof.has_func("churn_burn"))
            plug = prof.weight(kid, prof.has_func("plug_hot"))
            t.note(f"seq {seq}: {len(kid)} fx-churn-kid threads, {burn} samples in churn_burn, "
                   f"{plug} in plug_hot, of {prof.weight(kid)}")
            t.check(len(kid) >= 10, f"seq {seq}: {len(kid)} fx-churn-kid threads")
            t.check(burn > 0 and plug > 0, f"seq {seq}: churn_burn {burn}, plug_hot {plug}")
            t.check(prof.weight(kid) > 0 and (burn + plug) / prof.weight(kid) > 0.5,
                    f"seq {seq}: {burn + plug} of {prof.weight(kid)} kid samples in "
                    "churn_burn or plug_hot")
            unnamed = {n for th in kid for st, _ in prof.samples(th)
                       for n in prof.stack_names(st) if OURS.search(n)}
            t.check(not unnamed, f"seq {seq}: frames of fx-churn or libfxplug.so without a "
                    f"name: {sorted(unnamed)[:5]}")

    series = mem.series
    t.note("agent RSS KiB / fds every 0.2 s: " +
           " ".join(f"{r}/{n}" for _, r, n in series))
    t.require(series, "no RSS samples of the agent")
    # Warm: from the second churn window on.
    warm_from = start + WINDOW * 1.5
    warm = [(r, n) for ts, r, n in series if warm_from <= ts <= end]
    t.require(len(warm) > 10, f"{len(warm)} RSS samples during the churn")
    r0 = warm[0][0]
    rmax = max(r for r, _ in warm)
    t.note(f"RSS during the churn: from {r0} KiB, at most {rmax} KiB; fds "
           f"{min(n for _, n in warm)}..{max(n for _, n in warm)}")
    if os.environ.get("FX_SANITIZED"):
        t.note("RSS not checked: ASan's quarantine holds freed memory (LeakSanitizer "
               "checks for leaks instead)")
    else:
        t.check(rmax - r0 < 8192 and rmax < r0 * 1.25,
                f"the agent's RSS grew from {r0} to {rmax} KiB during the churn")
    t.note(f"agent fds on fx-churn's files: {at_end} as the churn ended, {left} "
           f"{gone_after:.1f} s later")
    t.check(not any(left.values()), f"fds left open on the dead processes' files "
            f"{gone_after:.1f} s after the churn: {left}")


if __name__ == "__main__":
    fxtest.main(with_cgroups(run))

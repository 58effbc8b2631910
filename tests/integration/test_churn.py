# SPDX-License-Identifier: MIT
"""Process churn: the daemon (2 s windows) while fx-churn starts 300
short-lived processes a second (100 in a sanitizer build) for 10 s, twice (each a fork and exec, half of
them dlopen()ing libfxplug.so). fx-churn runs in a cgroup of its own, the
agent's one target: what else the machine runs meanwhile (compilers, say)
would grow the agent's caches and hide what the churn does to them.

- no window is lost: seq consecutive, windows contiguous and covering both
  churns (a writer behind stretches windows: their count is not checked);
- short-lived processes appear by name: every whole window of a churn has
  fx-churn-kid threads with samples in churn_burn and in the dlopen'ed
  plug_hot, and every frame of fx-churn and libfxplug.so is named;
- their time is where it was spent, as perf sees it: perf records the
  target cgroup at 99 Hz through both churns (`perf record -a -G`: cgroup
  events per CPU, as the agent's target), and the kids are the processes
  fx-churn forked (perf's FORK records; in the
  agent's chunks, every process of the target cgroup but fx-churn). Of the
  kids' samples, the share whose user leaf is the kids' work (churn_burn,
  the plug-in's plug_hot, and what they call of their own) is the same in
  the agent's chunks as in perf's, within 3.5 standard errors of the
  difference of two samplings of that many samples, plus 2 points. (The
  kids' own CPU count, getrusage, is no reference: it holds fork, exec and
  the loader, which a 99 Hz clock samples in a share that depends on the
  machine; perf on the same processes in the same run meets the same
  clock.)
- the state of dead processes is released: the second churn is the first one
  again, so once the agent's caches are warm from the first its RSS (sampled
  every 0.2 s) does not grow: the median RSS of the second churn is within
  4 MiB and 15% of the first's. Medians, not peaks: each window's end adds
  a spike of a few MiB for the publisher's batch, whose height depends on
  where the window ends fall in the churn. And once two windows after the
  second churn are written (the symbolizer keeps an object one window
  more), no fd is left open on its files: the object cache, the unwinder
  and the symbolizer all give back what dead processes used.
The series are printed.
"""

import calendar
import os
import re
import statistics
import subprocess
import threading
import time

import fxtest
from fxdaemon import CHUNK_RE, HZ, Daemon, EPS_MS, check_chunk, with_cgroups

WINDOW = 2
CHURN_S = 10
# A sanitizer build handles records 2-3 times slower, and at 300 new
# processes a second on two CPUs it loses whole windows to full rings: it is
# given a load it can carry, a third of it, for the same assertions.
RATE = int(300 / fxtest.TIME_SCALE)
# Frames of the kids' own code left unnamed. (A sample inside execve has the
# old image's return address as its only user frame: "0x7f...", as in perf.)
OURS = re.compile(r"^(fx-churn|libfxplug\.so)\+0x")
# The kids' work: the functions of their 2 ms burn and what it calls of its own
# (inlined or not). A leaf in libc or the vDSO (the clock it reads) is neither
# tool's work; each tool counts it the same way.
WORK = {"churn_burn", "churn_plugin", "plug_hot", "cpu_now", "wl_touch"}


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


def churn_once(t, exe, procs):
    """One fx-churn run in the target cgroup: (start, end, kids, kids' CPU s,
    fx-churn's pid)."""
    def join():
        with open(procs, "w") as f:
            f.write(str(os.getpid()))

    start = time.time()
    churn = subprocess.Popen([exe, str(CHURN_S), str(RATE)], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True, preexec_fn=join)
    try:
        out, err = churn.communicate(timeout=fxtest.scaled(CHURN_S + 60))
    except subprocess.TimeoutExpired:
        churn.kill()
        churn.wait()
        raise fxtest.Stop(f"fx-churn did not end within {fxtest.scaled(CHURN_S + 60):.0f} s")
    end = time.time()
    t.require(churn.returncode == 0, f"fx-churn exited {churn.returncode}: {err}")
    kids, cpu = out.split()
    kids, cpu = int(kids), float(cpu)
    t.note(f"fx-churn started {kids} processes in {end - start:.1f} s; they used "
           f"{cpu:.2f} CPU s, {2 * kids / 1000:.2f} of them in their work")
    # The rate asked is a target: a machine forks as fast as it can (about 290
    # a second on a quiet machine of this kind, 45 on half a CPU). What the
    # checks below need is churn at all: every 2 s window with dozens of kids.
    t.check(kids >= 20 * CHURN_S, f"only {kids} processes started in {CHURN_S} s")
    return start, end, kids, cpu, churn.pid


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
    perf = fxtest.PerfRecord(t, cgroup=rel).start()
    runs = [churn_once(t, exe, procs) for _ in range(2)]
    perf.stop()
    end = runs[-1][1]
    kid_files = [os.path.realpath(os.path.join(t.workloads, n))
                 for n in ("fx-churn", "libfxplug.so")]

    def fds_on_kid_files():
        held = [os.path.realpath(p) for p in fxtest.open_files(d.p.pid)]
        return {os.path.basename(k): held.count(k) for k in kid_files}

    def windows_after_end():
        """Chunks written of windows that began after the churn ended."""
        n = 0
        for _, path in d.chunks(running=True).get("churn", []):
            m = CHUNK_RE.match(os.path.basename(path))
            n += m and calendar.timegm(time.strptime(m["ts"], "%Y%m%dT%H%M%SZ")) >= end
        return n

    at_end = fds_on_kid_files()
    # The last churn window is written, then the next one, which nothing of
    # the churn used: its objects' fds go then. Waited for as chunks, not as
    # time: a slow machine writes them later.
    t.require(fxtest.wait_for(lambda: windows_after_end() >= 2, 6 * WINDOW, 0.2),
              f"no two windows after the churn were written in {6 * WINDOW} s")
    fxtest.wait_for(lambda: not any(fds_on_kid_files().values()), WINDOW, 0.2)
    left = fds_on_kid_files()
    gone_after = time.time() - end
    mem.stop()
    rc = d.stop()
    t.check(rc == 0, f"fxagent exited {rc}")

    lst = d.chunks().get("churn", [])
    seqs = [s for s, _ in lst]
    t.check(seqs == list(range(len(seqs))), f"seq {seqs}: a window is missing")
    t.require(lst, "no chunk written")
    prev = first = None
    whole = [0] * len(runs)  # windows inside each churn
    work = total = 0
    parents = {r[4] for r in runs}
    for seq, path in lst:
        prof = t.load(path)
        fx = check_chunk(t, prof, "churn", seq, path)
        if prev is not None:
            t.check(abs(prev - fx["windowStart"]) <= EPS_MS, f"seq {seq}: not contiguous")
        first = fx["windowStart"] if first is None else first
        prev = fx["windowEnd"]
        # Every window counts for the share: kids live only during a churn.
        kids_all = [th for th in prof.threads if int(th["pid"]) not in parents]
        for th in kids_all:
            for st, w in prof.samples(th):
                total += w
                work += w * (fxtest.user_leaf(prof, st) in WORK)
        a, b = fx["windowStart"] / 1000, fx["windowEnd"] / 1000
        inside = [i for i, r in enumerate(runs) if a >= r[0] and b <= r[1]]
        if not inside:
            continue
        whole[inside[0]] += 1
        kid = prof.threads_named("fx-churn-kid")
        burn = prof.weight(kid, prof.has_func("churn_burn"))
        plug = prof.weight(kid, prof.has_func("plug_hot"))
        t.note(f"seq {seq}: {len(kid)} fx-churn-kid threads, {burn} samples in churn_burn, "
               f"{plug} in plug_hot, of {prof.weight(kid)}")
        t.check(len(kid) >= 10, f"seq {seq}: {len(kid)} fx-churn-kid threads")
        t.check(burn > 0 and plug > 0, f"seq {seq}: churn_burn {burn}, plug_hot {plug}")
        unnamed = {n for th in kid for st, _ in prof.samples(th)
                   for n in prof.stack_names(st) if OURS.search(n)}
        t.check(not unnamed, f"seq {seq}: frames of fx-churn or libfxplug.so without a "
                f"name: {sorted(unnamed)[:5]}")

    # No time lost: the contiguous windows cover both churns. A writer
    # behind (a sanitizer build on a loaded machine) stretches windows, so
    # their count says nothing.
    t.check(first <= runs[0][0] * 1000 + EPS_MS and prev >= end * 1000 - EPS_MS,
            f"the windows cover {first / 1000:.1f} to {prev / 1000:.1f}, the churns ran "
            f"{runs[0][0]:.1f} to {end:.1f}")
    # The checks of names need a window inside a churn; a writer far behind
    # may stretch every window of one churn past its end.
    t.check(sum(whole) >= 1, f"windows wholly inside the churns: {whole}; want one at least")

    # Before its exec a kid is named fx-churn, after its prctl fx-churn-kid.
    leaves = perf.leaves(comms=("fx-churn", "fx-churn-kid"))
    kids = {child for child, parent in perf.forks if parent in parents and child != parent}
    p_kids = [leaf for pid, leaf in leaves if pid in kids]
    p_work, p_total = sum(leaf in WORK for leaf in p_kids), len(p_kids)
    got = 100.0 * work / total if total else 0.0
    want = 100.0 * p_work / p_total if p_total else 0.0
    tol = fxtest.diff_tol(got, total, want, p_total)
    t.note(f"the kids' samples with their user leaf in their work: fxagent {work} of {total} "
           f"({got:.1f}%), perf {p_work} of {p_total} ({want:.1f}%), tolerance {tol:.1f}; "
           f"fx-churn's own count: {2 * sum(r[2] for r in runs)} ms of work in "
           f"{sum(r[3] for r in runs):.2f} CPU s")
    t.require(p_total >= fxtest.min_samples(sum(r[3] for r in runs), HZ),
              f"perf has {p_total} samples of the kids, who used "
              f"{sum(r[3] for r in runs):.2f} CPU s: perf did not see them")
    t.check(total >= fxtest.min_samples(sum(r[3] for r in runs), HZ),
            f"fxagent has {total} samples of the kids, who used "
            f"{sum(r[3] for r in runs):.2f} CPU s")
    t.check(total > 0 and fxtest.near(got, want, tol),
            f"{got:.1f}% of the kids' samples ({total}) have their user leaf in their work in "
            f"fxagent's chunks, {want:.1f}% of {p_total} in perf's of the same processes "
            f"(tolerance {tol:.1f} points)")

    series = mem.series
    t.note("agent RSS KiB / fds every 0.2 s: " +
           " ".join(f"{r}/{n}" for _, r, n in series))
    t.require(series, "no RSS samples of the agent")
    medians = []
    for start_, end_, *_ in runs:
        during = [r for ts, r, _ in series if start_ <= ts <= end_]
        t.require(len(during) > 10, f"{len(during)} RSS samples during a churn")
        medians.append(statistics.median(during))
    t.note(f"median RSS: {medians[0]:.0f} KiB in the first churn, {medians[1]:.0f} KiB in "
           f"the second")
    if os.environ.get("FX_SANITIZED"):
        t.note("RSS not checked: ASan's quarantine holds freed memory (LeakSanitizer "
               "checks for leaks instead)")
    else:
        t.check(medians[1] - medians[0] < 4096 and medians[1] < medians[0] * 1.15,
                f"the agent's median RSS was {medians[1]:.0f} KiB in the second churn, "
                f"{medians[0]:.0f} KiB in the first: the state of dead processes stays")
    t.note(f"agent fds on fx-churn's files: {at_end} as the churn ended, {left} "
           f"{gone_after:.1f} s later")
    t.check(not any(left.values()), f"fds left open on the dead processes' files "
            f"{gone_after:.1f} s after the churn: {left}")


if __name__ == "__main__":
    fxtest.main(with_cgroups(run))

# SPDX-License-Identifier: MIT
"""Big processes, each under a 5 s `fxagent --once` of the whole system:

- fx-manythreads: a process with 2000 threads (mt-0 ... mt-1999), each waking
  every second to burn about 0.1 ms in thread_burn (a sixth of a CPU in all,
  so that half a CPU leaves the agent room). About a hundred get samples:
  at least half of how many the threads' own CPU times in the recording
  should give at 99 Hz (a thread that ran c s is sampled with probability
  1 - exp(-99 c)), less 3.5 standard errors; each such thread is its own named
  thread of that process in the profile, and their stacks are whole (rooted
  in start_thread > worker, whether in thread_burn, the sleep or the loop)
  but for those the agent counted truncated, and most are in thread_burn;
- fx-maps: a process with 5000 separate anonymous executable mappings (5000
  MMAP2 records, 5000 lines of /proc/PID/maps) spinning in maps_hot: its
  samples are whole (main > maps_hot), and at least fxtest.min_samples of its
  CPU time in the recording.
The agent exits 0 each time; its CPU time and peak RSS are printed. The
workloads run until the test ends them, when the recording ends: making 2000
threads takes most of ten seconds on half a CPU, so a lifetime counted from
their start ended them during the recording.
"""

import math
import os
import re
import select
import subprocess
import time

import fxtest

THREADS = 2000
REGIONS = 5000


def record(t, tag, exe, *args):
    w = subprocess.Popen([os.path.join(t.workloads, exe), "3600", *map(str, args)],
                         stdout=subprocess.PIPE, text=True)
    t._procs.append(w)
    # It prints its count once all threads or maps are made.
    t.require(select.select([w.stdout], [], [], fxtest.scaled(60))[0],
              f"{exe} did not get ready within {fxtest.scaled(60):.0f} s")
    ready = w.stdout.readline().strip()
    t.require(ready == str(args[0]), f"{exe} did not get ready: {ready!r}")
    out = os.path.join(t.work, f"{tag}.json.gz")
    log = os.path.join(t.work, f"{tag}.log")
    start = time.monotonic()
    with open(log, "w") as f:
        a = subprocess.Popen([t.agent, "--once", "-d", "5s", "-o", out, "-v"],
                             stdout=subprocess.DEVNULL, stderr=f)
    # The recording ends when the agent frees its perf events (before it
    # symbolizes): the workload's CPU is taken then, and the workload ended,
    # so that on half a CPU its 2000 threads do not starve the agent's work.
    fxtest.wait_for(lambda: fxtest.perf_events_open(a.pid), 30)
    before = fxtest.thread_cpu_ns(w.pid)
    fxtest.wait_for(lambda: not fxtest.perf_events_open(a.pid), 60)
    after = fxtest.thread_cpu_ns(w.pid)
    w.kill()
    w.wait()
    # wait4: the agent's own CPU time.
    _, status, ru = os.wait4(a.pid, 0)
    a.returncode = os.waitstatus_to_exitcode(status)
    took = time.monotonic() - start
    with open(log) as f:
        err = f.read()
    # Not ru_maxrss: it keeps the forked Python's peak from before exec.
    m = re.search(r"peak rss ([\d.]+) MiB", err)
    t.note(f"{tag}: agent exit {a.returncode}, {took:.1f} s wall, "
           f"{ru.ru_utime + ru.ru_stime:.2f} s CPU, peak RSS {m[1] if m else '?'} MiB")
    for ln in err.splitlines():
        if "stats:" in ln:
            t.note("  " + ln)
    t.require(a.returncode == 0, f"{tag}: fxagent --once exited {a.returncode}: {err[-1500:]}")
    # CPU seconds of each thread over the recording (from when the agent's
    # events were open to when they were freed).
    cpu = {tid: (ns - before.get(tid, 0)) / 1e9 for tid, ns in after.items()}
    return t.load(out), w.pid, cpu


def body(t):
    prof, pid, cpu = record(t, "threads", "fx-manythreads", THREADS)
    th = prof.threads_of(pid)
    sampled = [x for x in th if prof.weight([x]) > 0]
    names = {x["name"] for x in sampled}
    expect = sum(1 - math.exp(-fxtest.HZ * c) for c in cpu.values())
    least = max(1, int(expect / 2 - 3.5 * expect ** 0.5))
    t.note(f"fx-manythreads: {len(sampled)} threads with samples, {len(names)} names; "
           f"the threads' CPU times say {expect:.0f} ({sum(cpu.values()):.2f} CPU s)")
    t.check(len(sampled) >= least, f"only {len(sampled)} of {THREADS} threads have samples; "
            f"their CPU times in the recording say {expect:.0f} (at least {least})")
    bad = sorted(n for n in names if not re.fullmatch(r"mt-\d+|fx-manythreads", n))
    t.check(not bad, f"threads named {bad[:5]}")
    t.check(len(names) == len(sampled), "two threads of the profile share a name: "
            f"{len(sampled)} threads, {len(names)} names")
    # A thread's CPU is its burn, its wake-up and sleep (how much of that
    # depends on the machine's scheduler) and its loop's check of the time,
    # so a stack is whole when the walk reached the thread's root: clone3 >
    # start_thread > worker as the outermost user frames. A stack that is
    # not whole must be one the agent counted as truncated.
    def whole(st):
        return fxtest.contains(prof.user_names(st)[:3], ["start_thread", "worker"])

    n = prof.weight(th)
    broken = n - prof.weight(th, whole)
    for s in sorted({" > ".join(prof.stack_names(st)) for x in th
                     for st, _ in prof.samples(x) if not whole(st)})[:5]:
        t.note(f"fx-manythreads: not whole: {s}")
    burn = prof.share(th, lambda st: whole(st) and "thread_burn" in prof.user_names(st))
    cut = prof.recording()["truncated"]
    t.note(f"fx-manythreads: {n} samples, {broken} not whole, {burn:.0f}% worker > "
           f"thread_burn; the agent counted {cut} truncated stacks in all")
    t.check(broken <= cut, f"{broken} of fx-manythreads' {n} samples are not rooted in "
            f"start_thread > worker, and the agent counted only {cut} truncated stacks")
    t.check(burn > 50, f"only {burn:.0f}% of fx-manythreads' samples are in thread_burn, "
            "where its threads spend most of their CPU")

    prof, pid, cpu = record(t, "maps", "fx-maps", REGIONS)
    th = prof.threads_of(pid)
    whole = prof.share(th, lambda st: fxtest.contains(prof.user_names(st),
                                                       ["main", "maps_hot"]))
    t.note(f"fx-maps: {prof.weight(th)} samples, {whole:.0f}% main > maps_hot")
    least = fxtest.min_samples(sum(cpu.values()))
    t.check(prof.weight(th) >= least, f"{prof.weight(th)} samples of fx-maps, which used "
            f"{sum(cpu.values()):.2f} CPU s in the recording (at least {least})")
    t.check(whole > 90, f"{whole:.0f}% of fx-maps' samples are main > maps_hot")


if __name__ == "__main__":
    fxtest.main(body)

# SPDX-License-Identifier: MIT
"""Ring overflow: the daemon with an 8 KiB ring per CPU (sampling.ring_size),
DWARF stacks with 4 KiB stack copies (so the ring holds one sample at a time)
at 10 kHz, 1 s windows, while two fx-hot-ab keep both CPUs busy: the kernel
overwrites nothing, it drops samples and says how many.

- the agent warns at start that its rings are too small;
- the drops are counted: meta.fxagent.lost, the FxRecording marker's lost and
  the metrics file's fxagent_lost_samples_total agree and are not zero;
- the agent keeps going: every window is written (seq consecutive, windows
  contiguous, covering the 5.5 s it ran; a writer slowed by the load, as under
  the sanitizers, may write fewer, longer windows, which is by design), the samples it did keep still show fx-hot-ab's functions, and
  it exits 0 on SIGTERM.
"""

import os
import re
import signal
import time

import fxtest
from fxdaemon import Daemon, EPS_MS, check_chunk


def body(t):
    metrics = os.path.join(t.work, "fxagent.prom")
    pids = [t.workload("fx-hot-ab", 30).pid for _ in range(2)]
    d = Daemon(t, "ring", "window:\n  seconds: 1\nsampling:\n  ring_size: 8KiB\n"
               "  frequency: 10000\n  unwind: dwarf\n  stack_bytes: 4096\n"
               f"metrics:\n  textfile: {metrics}\n")
    d.wait_started()
    time.sleep(5.5)
    rc = d.stop(signal.SIGTERM)
    t.kill_processes()
    t.check(rc == 0, f"fxagent exited {rc} after SIGTERM")
    log = d.text()
    t.check("hold fewer than 32 of the largest records" in log,
            f"no warning about the ring size: {log[-1000:]}")

    lst = d.chunks().get("system", [])
    seqs = [s for s, _ in lst]
    t.check(len(lst) >= 2 and seqs == list(range(len(seqs))),
            f"chunks {seqs}: windows missing")
    first = None
    lost = kept = 0
    prev = None
    for seq, path in lst:
        prof = t.load(path)
        fx = check_chunk(t, prof, "system", seq, path)  # meta == FxRecording marker
        name = os.path.basename(path)
        if prev is not None:
            t.check(abs(prev - fx["windowStart"]) <= EPS_MS, f"{name}: not contiguous")
        else:
            first = fx["windowStart"]
        prev = fx["windowEnd"]
        lost += fx["lost"]
        kept += fx["samples"]
        mine = [th for pid in pids for th in prof.threads_of(pid)]
        hot = prof.share(mine, prof.has_func("hot_caller"))
        t.note(f"{name}: {fx['samples']} samples kept, {fx['lost']} lost; fx-hot-ab "
               f"{prof.weight(mine)}, {hot:.0f}% in hot_caller")
        if fx["windowEnd"] - fx["windowStart"] >= 900:
            t.check(fx["lost"] > 0, f"{name}: nothing lost with an 8 KiB ring at 10 kHz")
            t.check(hot > 90, f"{name}: {hot:.0f}% of fx-hot-ab's samples in hot_caller")
    t.note(f"{kept} samples kept, {lost} lost in all")
    # The agent ran 5.5 s after saying it samples; its first window may start
    # up to a window before that notice, so the chunks cover at least 5 s.
    if first is not None:
        t.check(prev - first >= 5000 - EPS_MS,
                f"the chunks cover {prev - first:.0f} ms of the 5.5 s the agent ran")
    with open(metrics) as f:
        m = re.search(r"^fxagent_lost_samples_total (\d+)$", f.read(), re.M)
    t.check(m and int(m[1]) == lost, f"fxagent_lost_samples_total "
            f"{m[1] if m else None}, the chunks say {lost}")


if __name__ == "__main__":
    fxtest.main(body)

# SPDX-License-Identifier: MIT
"""The daemon when writing chunks falls behind the windows: the output
directory is on a small ext4 file system of the test's own (a loop device)
that the test freezes (fsfreeze) for FREEZE seconds while fx-hot-ab runs,
1 s windows, the fx-hot-ab process as the one target.

- at most three windows close while the writer is stuck (the one it is
  writing and two waiting); then the open window stays open, and after the
  thaw one chunk covers the rest of the freeze (over 1 s long);
- no sample is lost for it: every chunk's count of fx-hot-ab's samples is
  99 per second of the CPU it used in that chunk's window (polled from /proc
  every 20 ms), within 3.5 standard errors of a count plus a poll period at
  each end and 3, and the windows tile the time (each starts where the last
  ended, on whole seconds);
- the log says it once, `fxagent_windows_stretched_total` counts it, and
  SIGINT after the thaw ends the agent with status 0.
Skipped (77) where the kernel cannot mount an ext4 image on a loop device.
"""

import os
import re
import subprocess
import time

import fxtest
from fxdaemon import HZ, CpuPoller, Daemon, check_chunk

FREEZE = 8
MAX_CLOSED = 3  # the window being written and two waiting


def count_tol(want, poll):
    return 3.5 * want ** 0.5 + HZ * 2 * poll.period + 3


def sh(*cmd):
    return subprocess.run(cmd, capture_output=True, text=True)


def body(t):
    img = os.path.join(t.work, "disk.img")
    mnt = os.path.join(t.work, "disk")
    os.makedirs(mnt)
    with open(img, "wb") as f:
        f.truncate(64 << 20)
    p = sh("mkfs.ext4", "-q", "-F", img)
    t.require(p.returncode == 0, f"mkfs.ext4: {p.stderr}")
    p = sh("mount", "-o", "loop", img, mnt)
    if p.returncode != 0:
        print(f"SKIP: cannot mount an ext4 image on a loop device here: {p.stderr.strip()}")
        raise SystemExit(fxtest.SKIP)
    frozen = False
    try:
        w = t.workload("fx-hot-ab", 60)
        poll = CpuPoller([w.pid])
        poll.start()
        metrics = os.path.join(t.work, "fxagent.prom")
        d = Daemon(t, "behind", "window:\n  seconds: 1\n"
                   f"metrics:\n  textfile: {metrics}\n"
                   f"targets:\n  - name: hot\n    pid: {w.pid}\n",
                   out=os.path.join(mnt, "chunks"))
        d.wait_started()
        fxtest.wait_for(lambda: len(d.chunks(running=True).get("hot", [])) >= 2, 10, 0.1)
        f0 = time.time() * 1000
        p = sh("fsfreeze", "-f", mnt)
        t.require(p.returncode == 0, f"fsfreeze -f: {p.stderr}")
        frozen = True
        time.sleep(FREEZE)
        f1 = time.time() * 1000
        p = sh("fsfreeze", "-u", mnt)
        frozen = p.returncode != 0
        t.require(not frozen, f"fsfreeze -u: {p.stderr}")
        # The writer catches up: a chunk written 1.5 s after the thaw.
        def caught_up():
            lst = d.chunks(running=True).get("hot", [])
            return lst and os.path.getmtime(lst[-1][1]) * 1000 > f1 + 1500
        fxtest.wait_for(caught_up, 15, 0.1)
        rc = d.stop()
        poll.stop()
        t.kill_processes()
        t.check(rc == 0, f"fxagent exited {rc} after SIGINT: {d.text()[-1500:]}")
    finally:
        if frozen:
            sh("fsfreeze", "-u", mnt)
        t.kill_processes()

    try:
        chunks = d.chunks().get("hot", [])
        windows = []
        for seq, path in chunks:
            prof = t.load(path)
            windows.append((seq, check_chunk(t, prof, "hot", seq, path), prof))
    finally:
        sh("umount", mnt)
    t.require(len(windows) >= 4, f"{len(windows)} chunks: {d.text()[-1500:]}")

    rows, ends_in_freeze, longest = [], 0, 0
    total_n, total_cpu = 0, 0.0
    for i, (seq, fx, prof) in enumerate(windows):
        a, b = fx["windowStart"], fx["windowEnd"]
        if i > 0:
            t.check(a == windows[i - 1][1]["windowEnd"],
                    f"seq {seq}: starts at {a}, not where seq {windows[i - 1][0]} ended")
            t.check(a % 1000 == 0, f"seq {seq}: starts at {a}, not on a whole second")
        if 0 < i < len(windows) - 1:
            longest = max(longest, b - a)
        if f0 < b <= f1:
            ends_in_freeze += 1
        n = prof.weight(prof.threads_of(w.pid))
        cpu = poll.seconds(w.pid, a, b)
        want = HZ * cpu
        tol = count_tol(want, poll)
        total_n, total_cpu = total_n + n, total_cpu + cpu
        rows.append(f"seq {seq}: {a - f0:+.0f}..{b - f0:+.0f} ms from the freeze, "
                    f"{n} samples, cpu {cpu:.3f} s -> want {want:.0f} +- {tol:.0f}")
        t.check(abs(n - want) <= tol, f"seq {seq}: {n} samples of fx-hot-ab, want {want:.0f} "
                f"+- {tol:.0f} ({HZ} Hz x {cpu:.3f} s of its CPU in {a}..{b})")
    for r in rows:
        t.note(r)
    t.note(f"frozen for {(f1 - f0) / 1000:.1f} s: {ends_in_freeze} windows closed in it; "
           f"the longest whole window {longest / 1000:.0f} s; {total_n} samples for "
           f"{total_cpu:.2f} s of CPU")
    t.check(ends_in_freeze <= MAX_CLOSED,
            f"{ends_in_freeze} windows closed in the {FREEZE} s the writer was stuck, want at "
            f"most {MAX_CLOSED} (one written, two waiting)")
    t.check(longest >= 2000, f"no window was kept open while the writer was stuck: the "
            f"longest lasted {longest} ms")
    text = d.text()
    said = len(re.findall(r"writing chunks takes longer than the windows last", text))
    t.check(said == 1, f"the log says the writer is behind {said} times, want once: "
            f"{text[-1500:]}")
    m = re.search(r"^fxagent_windows_stretched_total (\d+)", open(metrics).read(), re.M)
    t.check(m and int(m[1]) >= 1, f"fxagent_windows_stretched_total {m[1] if m else None}, "
            "want at least 1")


if __name__ == "__main__":
    fxtest.main(body)

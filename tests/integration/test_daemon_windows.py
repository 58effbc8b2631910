# SPDX-License-Identifier: MIT
"""The daemon's windows in whole-system mode (no targets), 2 s each, with a busy
fx-hot-ab, stopped by SIGINT after at least 3 complete windows.

- one chunk per window named system-<start>-<seq>, seq numbers consecutive;
- complete windows start on a multiple of 2000 ms and last 2000 ms; each window
  ends where the next one starts; the first one ends on a boundary, the last one
  (cut short by SIGINT) starts on one, and the agent exits 0 having written it;
- every sample lies inside its own window and none is in two windows;
- fx-hot-ab has about 99 samples per second of CPU it used in each window
  (its CPU time polled from /proc while the agent runs, every 20 ms): within
  3.5 standard errors of a count, plus what the polling leaves uncertain
  (a poll period at each end) and 3; the sum likewise;
- the chunk's counters agree (meta.fxagent, the FxRecording marker, the samples);
- every chunk loads in profiler-cli, and the biggest shows hot_a and hot_b with
  the shares the file holds (within 0.1 point), hot_a above hot_b. (How exact
  the split is, hot_ab checks against perf.)
"""

import math
import os
import time

import fxtest
from fxdaemon import HZ, CpuPoller, Daemon, EPS_MS, check_chunk

WINDOW = 2
FULL = 3


def count_tol(want, poll):
    """Tolerance of a sample count against HZ x CPU time: 3.5 standard errors
    of a count, a poll period of CPU at each end of the span, and 3."""
    return 3.5 * want ** 0.5 + HZ * 2 * poll.period + 3


def on_boundary(ms):
    # Window bounds on the wall clock are whole milliseconds, written exactly, so
    # that a collector can join windows by equality (end of one == start of next).
    return ms % (WINDOW * 1000) == 0


def body(t):
    w = t.workload("fx-hot-ab", 60)
    poll = CpuPoller([w.pid])
    poll.start()
    d = Daemon(t, "system", f"window:\n  seconds: {WINDOW}\n")
    d.wait_started()
    # Stop 0.8 s into the window after FULL complete ones.
    first = math.ceil(time.time() / WINDOW) * WINDOW
    stop_at = first + FULL * WINDOW + 0.8
    time.sleep(max(0.0, stop_at - time.time()))
    sigint_ms = time.time() * 1000
    rc = d.stop()
    poll.stop()
    t.kill_processes()
    t.require(rc == 0, f"fxagent exited {rc} after SIGINT; log: {d.text()[-2000:]}")

    chunks = d.chunks()
    t.require(set(chunks) == {"system"},
              f"chunk targets {sorted(chunks)}, want only 'system' (no targets configured)")
    lst = chunks["system"]
    seqs = [s for s, _ in lst]
    t.check(seqs == list(range(seqs[0], seqs[0] + len(seqs))), f"seq numbers {seqs} are not "
            "consecutive")
    t.check(seqs[0] == 0, f"the first chunk has seq {seqs[0]}, want 0")

    windows = []  # (seq, fx, prof)
    for seq, path in lst:
        prof = t.load(path)
        windows.append((seq, check_chunk(t, prof, "system", seq, path), prof))
    t.require(len(windows) >= FULL + 2, f"{len(windows)} chunks, want {FULL} complete windows "
              f"and a partial one on each side")

    full = 0
    for i, (seq, fx, prof) in enumerate(windows):
        a, b = fx["windowStart"], fx["windowEnd"]
        name = os.path.basename(prof.path)
        if i > 0:
            prev = windows[i - 1][1]["windowEnd"]
            t.check(prev == a, f"{name}: windowStart {a!r} is not the previous "
                    f"window's end {prev!r}")
        if i == 0:
            t.check(on_boundary(b), f"{name}: the first window ends at {b!r}, not on a "
                    f"{WINDOW} s boundary")
        elif i == len(windows) - 1:
            t.check(on_boundary(a), f"{name}: the last window starts at {a!r}, not on a "
                    f"{WINDOW} s boundary")
            t.check(sigint_ms - 50 <= b <= sigint_ms + 1000,
                    f"{name}: the last window ends at {b:.1f}, SIGINT was sent at "
                    f"{sigint_ms:.1f}")
        else:
            full += 1
            t.check(on_boundary(a), f"{name}: windowStart {a!r} is not a multiple of "
                    f"{WINDOW * 1000} ms")
            t.check(b - a == WINDOW * 1000,
                    f"{name}: a complete window lasts {b - a!r} ms, want {WINDOW * 1000}")
        # The wall-clock text the profiler shows ends on the window's end second.
        if abs(b - round(b / 1000) * 1000) <= EPS_MS:
            marks = [m for th in prof.threads for m in th["markers"]["data"]
                     if m and m.get("type") == "FxRecording"]
            want = time.strftime("%H:%M:%SZ", time.gmtime(round(b / 1000)))
            t.check(marks and str(marks[0].get("wallclock", "")).endswith(want),
                    f"{name}: FxRecording wallclock "
                    f"{marks[0].get('wallclock') if marks else None!r} does not end at {want}")
        # Written soon after its window closed.
        late = os.stat(prof.path).st_mtime - b / 1000
        t.check(late < fxtest.scaled(5), f"{name}: written {late:.1f} s after its window ended")
    t.check(full >= FULL, f"{full} complete windows, want at least {FULL}")

    # Every sample inside its window; none in two windows.
    times = {}
    for seq, fx, prof in windows:
        pe = prof.data["meta"]["profilingEndTime"]
        out = [(th["name"], tm) for th in prof.threads
               for tm in fxtest.sample_times(th["samples"])
               if not -EPS_MS <= tm <= pe + EPS_MS]
        t.check(not out, f"seq {seq}: {len(out)} sample times outside the window 0..{pe}: "
                f"{out[:5]}")
        for th in prof.threads:
            times.setdefault(th["tid"], []).extend(fx["windowStart"] + tm
                                                   for tm in fxtest.sample_times(th["samples"]))
    dups = 0
    for tid, ts in times.items():
        ts.sort()
        dups += sum(1 for x, y in zip(ts, ts[1:]) if y - x < 0.05)
    t.check(dups == 0, f"{dups} samples appear twice (same thread, same time)")

    # fx-hot-ab: 99 samples per second of its CPU, window by window.
    total_n, total_cpu = 0, 0.0
    rows = []
    for i, (seq, fx, prof) in enumerate(windows):
        ths = prof.threads_of(w.pid)
        n = prof.weight(ths)
        cpu = poll.seconds(w.pid, fx["windowStart"], fx["windowEnd"])
        want = HZ * cpu
        total_n += n
        total_cpu += cpu
        rows.append(f"seq {seq}: {(fx['windowEnd'] - fx['windowStart']) / 1000:.3f} s, "
                    f"fx-hot-ab {n} samples, cpu {cpu:.3f} s -> want {want:.0f}; "
                    f"lost {fx['lost']} truncated {fx['truncated']}")
        tol = count_tol(want, poll)
        t.check(abs(n - want) <= tol,
                f"seq {seq}: {n} samples of fx-hot-ab, want {want:.0f} +- {tol:.0f} "
                f"({HZ} Hz x {cpu:.3f} s of its CPU in the window)")
        t.check(fx["lost"] == 0, f"seq {seq}: {fx['lost']} samples lost")
        if 0 < i < len(windows) - 1:
            t.check(n > 0 and len(ths) == 1 and ths[0]["name"] == "fx-hot-ab",
                    f"seq {seq}: fx-hot-ab threads {[(th['name'], th['tid']) for th in ths]}")
    for r in rows:
        t.note(r)
    want = HZ * total_cpu
    t.note(f"all windows: {total_n} samples of fx-hot-ab, {total_cpu:.3f} s of its CPU, "
           f"want {want:.0f} ({100 * (total_n - want) / want:+.1f}%)")
    tol = count_tol(want, poll)
    t.check(abs(total_n - want) <= tol,
            f"{total_n} samples of fx-hot-ab over all windows, want {want:.0f} +- {tol:.0f}")

    # The profiler loads every chunk; the biggest one shows the 70/30 split.
    biggest = max(windows, key=lambda x: x[2].weight(x[2].threads_of(w.pid)))
    for seq, fx, prof in windows:
        cli = t.cli(prof.path, f"seq{seq}")
        rows = [r for r in cli.threads() if str(r["pid"]) == str(w.pid)]
        if prof.weight(prof.threads_of(w.pid)):
            t.check(rows, f"profiler-cli: seq {seq} has no thread of fx-hot-ab")
        if seq == biggest[0] and rows:
            funcs = cli.functions(",".join(r["threadHandle"] for r in rows))
            ths = prof.threads_of(w.pid)
            n = prof.weight(ths)
            raw = {fn: prof.share(ths, prof.has_func(fn)) for fn in ("hot_a", "hot_b")}
            for fn in ("hot_a", "hot_b"):
                r = funcs.get(fn)
                if t.check(r is not None, f"profiler-cli seq {seq}: no {fn}"):
                    t.note(f"profiler-cli seq {seq}: {fn} {r['totalPercentage']:.1f}%, "
                           f"the file {raw[fn]:.1f}% of {n} samples")
                    t.check(fxtest.near(r["totalPercentage"], raw[fn], 0.1),
                            f"profiler-cli seq {seq}: {fn} {r['totalPercentage']:.1f}%, the "
                            f"file has it in {raw[fn]:.1f}% of {n} samples")
            t.check(raw["hot_a"] > raw["hot_b"],
                    f"seq {seq}: hot_a {raw['hot_a']:.1f}% is not above hot_b "
                    f"{raw['hot_b']:.1f}%")
        cli.stop()


fxtest.main(body)

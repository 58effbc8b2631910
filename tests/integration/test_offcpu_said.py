# SPDX-License-Identifier: MIT
"""What the off-CPU side shows and leaves out is said in several places, with
the same numbers: the chunk (meta.fxagent.offCpu), the "Off-CPU waits" marker
(FxOffCpu) on the Recording marker's track, `--once`'s warning on stderr and
its -v stats and "wrote" lines, the daemon's log (once when an episode of
windows with waits over the budget begins, once when it ends) and the metrics
textfile. This test reads them all and says which number differs where.

1. fx-waits under `fxagent --once --off-cpu -v` with sampling.off_cpu.budget
   1, so the budget binds: the warning, the stats line, meta and the marker
   give the same counts and the same times (to the printed precision); the
   "wrote" line's samples and waits are the Recording marker's and meta's;
   the off-CPU tracks' weights add up to meta's ms. Then with a budget no run
   reaches: no unstacked wait, and no warning unless meta counts a wait left
   out.
2. The daemon, 1 s windows, fx-waits in a cgroup target with budget 1 for
   about 3 s, then the target idle for 2 more windows: one "off-CPU: window
   N" line per episode that begins, with window N's chunk's numbers; one
   "within the budget again after K windows" line per episode that ends,
   with the sums over its K chunks; each "wrote" line's samples and waits
   its chunk's; the metrics file's totals the sums over all chunks."""

import os
import re
import subprocess
import time

import fxtest
from fxdaemon import Daemon, with_cgroups

SECONDS = 3
WINDOW = 1

SUMMARY_RE = re.compile(
    r"(?P<waits>\d+) waits \((?P<ms>[^)]*)\)"
    r"(?:; (?P<unstacked>\d+) of them \((?P<unstackedMs>[^)]*)\) over the budget, timed "
    r"without their own stacks: their time is on their threads' other waits in the same "
    r"state)?"
    r"(?:; (?P<lost>\d+) lost \((?P<lostMs>[^,)]*), not shown\))?")
WARN_RE = re.compile(r"^fxagent: off-CPU: (?P<sum>.*) \(sampling\.off_cpu\.budget: "
                     r"(?P<budget>\d+) a second per CPU; more shows more of their own "
                     r"stacks\)$")
STATS_RE = re.compile(r"^fxagent: stats: off-CPU: (?P<sum>.*?); the program: ")
WROTE_RE = re.compile(r"^fxagent: wrote (?P<path>.+): (?P<samples>\d+) samples, "
                      r"(?P<waits>\d+) waits, (?:(?P<threads>\d+) threads, )?"
                      r"(?P<bytes>\d+) bytes$")
EPISODE_RE = re.compile(r"^fxagent: off-CPU: window (?P<seq>\d+): (?P<sum>.*) "
                        r"\(sampling\.off_cpu\.budget: (?P<budget>\d+) a second per CPU\); "
                        r"said again when it ends$")
END_RE = re.compile(r"^fxagent: off-CPU: (?P<how>within the budget again|the agent stops "
                    r"over the budget) after (?P<k>\d+) windows: (?P<sum>.*)$")
# meta.fxagent.offCpu's keys: (count, its time)
PAIRS = (("waits", "ms"), ("unstacked", "unstackedMs"), ("lost", "lostMs"))
METRICS = (("waits", "fxagent_offcpu_waits_total"),
           ("ms", "fxagent_offcpu_wait_seconds_total"),
           ("unstacked", "fxagent_offcpu_unstacked_total"),
           ("unstackedMs", "fxagent_offcpu_unstacked_seconds_total"),
           ("lost", "fxagent_offcpu_lost_total"),
           ("lostMs", "fxagent_offcpu_lost_seconds_total"))


def duration_ms(text):
    """A summary's time ("15.5 s", "820 ms") as (ms, half its last digit in ms),
    or None if it is neither."""
    m = re.fullmatch(r"(\d+(?:\.\d)?) (s|ms)", text or "")
    if not m:
        return None
    if m[2] == "s":
        return float(m[1]) * 1000, 50.0
    return float(m[1]), 0.5


def summary_numbers(text):
    """The numbers of a summary as a dict like meta.fxagent.offCpu's (times as
    their text), or None if it is not one. A clause left out is a 0."""
    m = SUMMARY_RE.fullmatch(text)
    if not m:
        return None
    return {"waits": int(m["waits"]), "ms": m["ms"],
            "unstacked": int(m["unstacked"] or 0), "unstackedMs": m["unstackedMs"],
            "lost": int(m["lost"] or 0), "lostMs": m["lostMs"]}


def check_summary(t, where, text, want, what):
    """The summary @text (said in @where) gives @want's numbers (a dict like
    meta.fxagent.offCpu, from @what): counts exactly, times to the printed
    precision (tenths of a second from 1 s, whole ms below)."""
    got = summary_numbers(text)
    if not t.check(got is not None, f"{where}: not a summary of waits: {text!r}"):
        return
    for n, ms in PAIRS:
        t.check(got[n] == want[n], f"{where} says {got[n]} {n}, {what}.{n} is {want[n]}: "
                f"{text!r}")
        if not want[n]:
            t.check(got[ms] is None, f"{where} gives a time for {n} ({got[ms]!r}) though "
                    f"{what}.{n} is 0")
            continue
        d = duration_ms(got[ms])
        if not t.check(d, f"{where}: time of {n} {got[ms]!r} is not 'X.Y s' or 'N ms'"):
            continue
        # say_ms(): "%.1f s" from 1000 ms on, "%.0f ms" below.
        unit_ok = (d[1] == 50.0) == (want[ms] >= 1000)
        t.check(unit_ok and abs(d[0] - want[ms]) <= d[1] + 1e-6,
                f"{where} says {n} took {got[ms]}, {what}.{ms} is {want[ms]} ms: {text!r}")


def wait_lines(text, prefix):
    return [ln for ln in text.splitlines() if ln.startswith(prefix)]


def record(t, tag, budget):
    """fx-waits under `fxagent --once --off-cpu -v` with sampling.off_cpu.budget
    @budget: (Profile, the agent's stderr, the output path)."""
    cfg = os.path.join(t.work, f"{tag}.yaml")
    with open(cfg, "w") as f:
        f.write(f"sampling:\n  off_cpu:\n    enabled: true\n    budget: {budget}\n")
    waits = t.spawn([os.path.join(t.workloads, "fx-waits"), str(SECONDS + 30), "/var/tmp"],
                    stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True)
    out = os.path.join(t.work, f"{tag}.json.gz")
    log = os.path.join(t.work, f"{tag}.agent.log")
    cmd = [t.agent, "--once", "--off-cpu", "-v", "--config", cfg, "--pid", str(waits.pid),
           "-d", f"{SECONDS}s", "--output", out]
    t.note("+ " + " ".join(cmd))
    with open(log, "w") as err:
        agent = t.spawn(cmd, stderr=err)
    t.require(fxtest.wait_for(lambda: fxtest.bpf_linked(agent.pid) or agent.poll() is not None, 20)
              and agent.poll() is None,
              f"{tag}: the agent did not attach its off-CPU program; see {log}")
    waits.stdin.write("g")
    waits.stdin.flush()
    try:
        rc = agent.wait(timeout=fxtest.scaled(SECONDS + 60))
    except subprocess.TimeoutExpired:
        raise fxtest.Stop(f"{tag}: fxagent --once did not end; see {log}")
    waits.kill()
    waits.wait()
    with open(log, errors="replace") as f:
        text = f.read()
    t.require(rc == 0, f"{tag}: fxagent exited {rc}: {text[-2000:]}")
    return t.load(out), text, out


def check_once(t, tag, budget, prof, text, out):
    """Part 1's agreements for one run; returns meta.fxagent.offCpu."""
    fx = prof.data["meta"]["fxagent"]
    meta = fx.get("offCpu")
    t.require(isinstance(meta, dict), f"{tag}: no meta.fxagent.offCpu: {fx}")
    for n, ms in PAIRS:
        t.require(isinstance(meta.get(n), int) and isinstance(meta.get(ms), (int, float)),
                  f"{tag}: meta.fxagent.offCpu without integer {n} and number {ms}: {meta}")
    t.note(f"{tag}: meta.fxagent.offCpu {meta}")
    left_out = meta["unstacked"] or meta["lost"]
    # The unstacked waits are a part of those shown, their time a part of
    # theirs (the kernel's counters set each thread's time: theirs is their
    # share of it).
    t.check(meta["unstacked"] <= meta["waits"] and meta["unstackedMs"] <= meta["ms"] + 0.001,
            f"{tag}: {meta['unstacked']} waits ({meta['unstackedMs']} ms) over the budget of "
            f"{meta['waits']} shown ({meta['ms']} ms): a part larger than the whole")

    # The marker, where the Recording marker is.
    strings = prof.data["shared"]["stringArray"]
    found, rec_tracks = [], []
    for th in prof.threads:
        mk = th["markers"]
        for i, d in enumerate(mk["data"]):
            if d and d.get("type") == "FxOffCpu":
                found.append((th["name"], strings[mk["name"][i]], d))
            if d and d.get("type") == "FxRecording":
                rec_tracks.append(th["name"])
    t.require(len(found) == 1, f"{tag}: {len(found)} FxOffCpu markers, want 1: {found}")
    track, name, mark = found[0]
    t.check(name == "Off-CPU waits", f"{tag}: the FxOffCpu marker is named {name!r}")
    t.check(rec_tracks == [track], f"{tag}: the FxOffCpu marker is on {track!r}, the "
            f"Recording marker on {rec_tracks}")
    for key in ("waits", "ms", "unstacked", "unstackedMs", "lost", "lostMs"):
        t.check(mark.get(key) == meta[key], f"{tag}: marker data.{key} {mark.get(key)!r}, "
                f"meta.fxagent.offCpu.{key} {meta[key]!r}")
    check_summary(t, f"{tag}: the marker's data.summary", mark.get("summary") or "", meta,
                  "meta.fxagent.offCpu")

    # The -v stats line: always, with the marker's summary.
    stats = [STATS_RE.match(ln) for ln in text.splitlines()]
    stats = [m for m in stats if m]
    if t.check(len(stats) == 1, f"{tag}: {len(stats)} 'stats: off-CPU:' lines on stderr, "
               "want 1"):
        check_summary(t, f"{tag}: the stats line", stats[0]["sum"], meta,
                      "meta.fxagent.offCpu")
        t.check(stats[0]["sum"] == mark.get("summary"),
                f"{tag}: the stats line's summary {stats[0]['sum']!r} is not the marker's "
                f"{mark.get('summary')!r}")

    # The warning: only when a wait was left out of the stacks, then as the marker.
    warns = wait_lines(text, "fxagent: off-CPU: ")
    if left_out:
        if t.check(len(warns) == 1, f"{tag}: {len(warns)} 'off-CPU:' warnings on stderr "
                   f"with {meta['unstacked']} unstacked and {meta['lost']} lost, want 1: "
                   f"{warns}"):
            m = WARN_RE.match(warns[0])
            if t.check(m, f"{tag}: the warning is not 'off-CPU: SUMMARY "
                       f"(sampling.off_cpu.budget: ...)': {warns[0]!r}"):
                check_summary(t, f"{tag}: the stderr warning", m["sum"], meta,
                              "meta.fxagent.offCpu")
                t.check(m["sum"] == mark.get("summary"),
                        f"{tag}: the warning's summary {m['sum']!r} is not the marker's "
                        f"{mark.get('summary')!r}")
                t.check(int(m["budget"]) == budget,
                        f"{tag}: the warning says budget {m['budget']}, the config {budget}")
    else:
        t.check(not warns, f"{tag}: no wait left out (meta {meta}) but stderr says {warns}")

    # The "wrote" line: the Recording marker's samples, meta's waits.
    wrote = [WROTE_RE.match(ln) for ln in text.splitlines()]
    wrote = [m for m in wrote if m]
    if t.check(len(wrote) == 1, f"{tag}: {len(wrote)} 'wrote PATH: ...' lines, want 1"):
        w = wrote[0]
        rec = prof.recording()
        t.check(w["path"] == out, f"{tag}: wrote {w['path']!r}, the output is {out!r}")
        t.check(int(w["samples"]) == rec["samples"] == fx["samples"],
                f"{tag}: 'wrote' says {w['samples']} samples, the Recording marker "
                f"{rec['samples']}, meta.fxagent.samples {fx['samples']}")
        t.check(int(w["waits"]) == meta["waits"],
                f"{tag}: 'wrote' says {w['waits']} waits, meta.fxagent.offCpu.waits "
                f"{meta['waits']}")
        t.check(w["threads"] is not None and int(w["threads"]) == len(prof.threads),
                f"{tag}: 'wrote' says {w['threads']} threads, the profile has "
                f"{len(prof.threads)}")
        t.check(int(w["bytes"]) == os.path.getsize(out),
                f"{tag}: 'wrote' says {w['bytes']} bytes, {out} has {os.path.getsize(out)}")

    # The off-CPU tracks hold meta's time: each weight is whole microseconds.
    tracks = [th for th in prof.threads if th["samples"].get("weightType") == "tracing-ms"]
    n = sum(th["samples"]["length"] for th in tracks)
    got = sum(prof.weight([th]) for th in tracks)
    t.note(f"{tag}: {len(tracks)} off-CPU tracks, {n} waits on them, {got:.3f} ms")
    t.check(abs(got - meta["ms"]) <= 1e-6 * max(1, n) + 1e-9 * meta["ms"],
            f"{tag}: the off-CPU tracks' weights add up to {got:.6f} ms, "
            f"meta.fxagent.offCpu.ms is {meta['ms']}")
    return meta


def once(t):
    prof, text, out = record(t, "budget1", 1)
    meta = check_once(t, "budget1", 1, prof, text, out)
    t.check(meta["unstacked"] > 0, f"budget1: no wait over a budget of 1 a second per CPU: "
            f"{meta}")
    for ln in wait_lines(text, "fxagent: off-CPU: ") + wait_lines(text, "fxagent: stats: off"):
        t.note(f"budget1: {ln}")

    prof, text, out = record(t, "budget100000", 100000)
    meta = check_once(t, "budget100000", 100000, prof, text, out)
    t.check(meta["unstacked"] == 0, f"budget100000: {meta['unstacked']} waits over a budget "
            f"no run reaches: {meta}")
    if meta["lost"]:
        t.note(f"budget100000: {meta['lost']} waits lost, so the warning is said")


def daemon(t, cg):
    rel = f"/fxtest-{os.getpid()}-said"
    cg.make(rel)

    def join():
        with open(os.path.join(cg.path(rel), "cgroup.procs"), "w") as f:
            f.write(str(os.getpid()))

    # It runs SECONDS from its "g", then ends: the windows after hold no
    # wait, and the episode ends.
    waits = t.spawn([os.path.join(t.workloads, "fx-waits"), str(SECONDS), "/var/tmp"],
                    preexec_fn=join, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                    text=True)
    metrics = os.path.join(t.work, "fxagent.prom")
    d = Daemon(t, "daemon", f"""
window:
  seconds: {WINDOW}
metrics:
  textfile: {metrics}
sampling:
  off_cpu:
    budget: 1
targets:
  - name: waits
    cgroup: {rel}
    off_cpu: true
""", "-v")
    d.wait_started()
    waits.stdin.write("g")
    waits.stdin.flush()
    try:
        waits.wait(timeout=fxtest.scaled(SECONDS + 30))
    except subprocess.TimeoutExpired:
        raise fxtest.Stop("fx-waits did not end")
    time.sleep(2.5 * WINDOW)
    t.require(d.stop() == 0, f"fxagent exited {d.p.returncode}: {d.text()[-2000:]}")
    log = d.text()
    t.check("off-CPU time is not recorded" not in log,
            "the agent did not record off-CPU time: " +
            "".join(ln for ln in log.splitlines(True) if "off-CPU" in ln))
    chunks = d.chunks().get("waits") or []
    t.require(chunks, f"no chunk of target waits in {d.out}")

    metas, wrote_want = {}, {}
    for seq, path in chunks:
        prof = t.load(path)
        fx = prof.data["meta"]["fxagent"]
        meta = fx.get("offCpu")
        if not t.check(isinstance(meta, dict), f"chunk {seq}: no meta.fxagent.offCpu"):
            continue
        metas[seq] = meta
        wrote_want[path] = (seq, fx["samples"], meta["waits"])
        t.note(f"chunk {seq}: {(fx['windowEnd'] - fx['windowStart']) / 1000:.3f} s, "
               f"{fx['samples']} samples, offCpu {meta}")
        if meta["waits"] or meta["lost"]:
            marks = [dd for th in prof.threads for dd in th["markers"]["data"]
                     if dd and dd.get("type") == "FxOffCpu"]
            if t.check(len(marks) == 1, f"chunk {seq}: {len(marks)} FxOffCpu markers"):
                for key in meta:
                    t.check(marks[0].get(key) == meta[key],
                            f"chunk {seq}: marker data.{key} {marks[0].get(key)!r}, "
                            f"meta.fxagent.offCpu.{key} {meta[key]!r}")
                check_summary(t, f"chunk {seq}: the marker's data.summary",
                              marks[0].get("summary") or "", meta, f"chunk {seq}'s meta")
    t.require(metas, "no chunk with meta.fxagent.offCpu")
    t.require(any(m["unstacked"] for m in metas.values()),
              "no chunk with a wait over a budget of 1 a second per CPU")

    # Each "wrote" line: its chunk's samples and waits.
    for ln in log.splitlines():
        m = WROTE_RE.match(ln)
        if not m or m["path"] not in wrote_want:
            continue
        seq, samples, n = wrote_want.pop(m["path"])
        t.check(int(m["samples"]) == samples and int(m["waits"]) == n,
                f"chunk {seq}: the log says 'wrote' {m['samples']} samples, {m['waits']} "
                f"waits; its meta {samples} samples, {n} waits")
    t.check(not wrote_want, f"no 'wrote' line in the log for {sorted(wrote_want)}")

    # The episodes, from the chunks: a window with a wait unstacked or lost
    # begins one or goes on with it; the next without ends it.
    def over(m):
        return m is not None and (m["unstacked"] or m["lost"])

    starts, ends, episode = [], [], None
    for seq in range(min(metas), max(metas) + 1):
        m = metas.get(seq)
        if over(m):
            if episode is None:
                starts.append((seq, m))
                episode = []
            episode.append(seq)
        elif episode is not None:
            ends.append((seq, episode))
            episode = None
    # One still open when the agent stops is closed then ("the agent stops
    # over the budget after K windows").
    open_at_end = episode
    if episode is not None:
        ends.append((None, episode))
    t.note(f"episodes from the chunks: begun in windows {[s for s, _ in starts]}, ended "
           f"{[(s, len(e)) for s, e in ends]}" + (f", open at the end ({len(open_at_end)} "
                                                   "windows)" if open_at_end else ""))

    lines = wait_lines(log, "fxagent: off-CPU: ")
    for ln in lines:
        t.note(f"log: {ln}")
    begun = [EPISODE_RE.match(ln) for ln in lines if ln.startswith("fxagent: off-CPU: window")]
    ended = [END_RE.match(ln) for ln in lines
             if ln.startswith(("fxagent: off-CPU: within", "fxagent: off-CPU: the agent stops"))]
    t.check(len(begun) + len(ended) == len(lines) and all(begun) and all(ended),
            f"off-CPU lines in the log that are neither an episode's start nor its end: "
            f"{lines}")
    begun, ended = [m for m in begun if m], [m for m in ended if m]
    t.check([int(m["seq"]) for m in begun] == [s for s, _ in starts],
            f"the log says episodes began in windows {[int(m['seq']) for m in begun]}, the "
            f"chunks' meta in {[s for s, _ in starts]}")
    for m in begun:
        seq = int(m["seq"])
        t.check(int(m["budget"]) == 1, f"window {seq}'s line says budget {m['budget']}")
        if seq in metas:
            check_summary(t, f"the log's line of window {seq}", m["sum"], metas[seq],
                          f"chunk {seq}'s meta.fxagent.offCpu")
    t.check(len(ended) == len(ends), f"the log says {len(ended)} episodes ended, the chunks' "
            f"meta {len(ends)} (after windows {[(s, len(e)) for s, e in ends]})")
    for m, (seq, ep) in zip(ended, ends):
        t.check(int(m["k"]) == len(ep), f"the log says an episode ended after {m['k']} "
                f"windows; the chunks' meta: windows {ep}, ended in window {seq}")
        t.check((m["how"] == "within the budget again") == (seq is not None),
                f"the log says of the episode of windows {ep} {m['how']!r}; the chunks' "
                f"meta: " + (f"ended in window {seq}" if seq is not None else
                             "still over the budget in the last"))
        sums = {k: sum(metas[s][k] for s in ep) for k in metas[ep[0]]}
        check_summary(t, f"the log's end of the episode of windows {ep}", m["sum"], sums,
                      f"the sum of chunks {ep}'s meta.fxagent.offCpu")

    # The metrics: totals over every window, as the chunks' meta adds up.
    with open(metrics) as f:
        prom = f.read()
    for key, name in METRICS:
        m = re.search(rf"^{name} (\S+)$", prom, re.M)
        if not t.check(m, f"metrics: no {name} in {metrics}"):
            continue
        got, want = float(m[1]), sum(meta[key] for meta in metas.values())
        if key in ("waits", "unstacked", "lost"):
            t.check(got == want, f"metrics: {name} {m[1]}, the chunks' meta.fxagent.offCpu."
                    f"{key} add up to {want}")
        else:
            t.check(abs(got - want / 1000) <= 1e-6 * len(metas),
                    f"metrics: {name} {m[1]}, the chunks' meta.fxagent.offCpu.{key} add "
                    f"up to {want:.3f} ms")


def run(t, cg):
    fxtest.skip_without_btf()
    once(t)
    daemon(t, cg)


fxtest.main(with_cgroups(run))

# SPDX-License-Identifier: MIT
"""`fxagent view`: any slice of the fleet's chunks as one profile.

The agent's own chunks, two targets (fx-hot-ab as "ab", fx-threads as "thr",
2 s windows, a few of each), then:

- `--target ab` from the output directory (a progress line on a terminal,
  none in a pipe): every sample of every ab chunk is
  in the merge, per thread and per leaf function, one track per thread, none
  of thr's; checked in the file, with jq on the raw JSON and with the
  profiler's own loader (profiler-cli); `--merge processes` and `--merge all`
  keep the same samples on one track per process and one per host;
- two fake hosts (the same chunks with meta.fxagent.host and a label
  rewritten) served by a real nginx with `autoindex_format json`: the merge
  from the HTTP listing equals the merge from the directory; `--host` and
  `--label` choose one host's chunks; with two hosts, one process is two
  tracks;
- a missing window shows as a gap marker, a chunk's lost samples as a lost
  marker with its count at its time; `--from/--to` keep just the samples in
  the range; `--bucket 1s` folds samples into weighted ones with the same
  share for every function;
- bad chunks among the good (truncated gzip, garbage, a newer format
  version, not ours, bad JSON, a chunk listed twice): counted and named in
  one summary line, the rest merged.
"""

import collections
import gzip
import json
import math
import os
import shutil
import signal
import subprocess
import time
import urllib.parse
import urllib.request

import fxtest
from fxdaemon import Daemon
from fxupload import Nginx

CONFIG = ("labels:\n  env: view\n  dc: a\n"
          "targets:\n  - name: ab\n    process: fx-hot-ab\n"
          "  - name: thr\n    process: fx-threads\n"
          "window:\n  seconds: 2\n")


def load(path):
    with gzip.open(path, "rt") as f:
        return json.load(f)


def save(path, data):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with gzip.open(path, "wt") as f:
        json.dump(data, f)


def leaf_weights(d):
    """{(pid, tid): Counter(leaf function name: weight)} of a profile."""
    sh = d["shared"]
    names = sh["stringArray"]
    out = collections.defaultdict(collections.Counter)
    for th in d["threads"]:
        s = th["samples"]
        weights = s["weight"] or [1] * s["length"]
        key = (th["pid"].split("@")[0], th["tid"])
        for st, w in zip(s["stack"], weights):
            if st is None:
                out[key]["(no stack)"] += w
                continue
            func = sh["frameTable"]["func"][sh["stackTable"]["frame"][st]]
            out[key][names[sh["funcTable"]["name"][func]]] += w
    return out


def total(weights):
    return sum(sum(c.values()) for c in weights.values())


def sum_weights(paths):
    out = collections.defaultdict(collections.Counter)
    for p in paths:
        for k, c in leaf_weights(load(p)).items():
            out[k].update(c)
    return out


def markers(d):
    """[(name, data, start, end)] of every track."""
    names = d["shared"]["stringArray"]
    out = []
    for th in d["threads"]:
        m = th["markers"]
        for i in range(m["length"]):
            out.append((names[m["name"][i]], m["data"][i], m["startTime"][i], m["endTime"][i]))
    return out


def marker_tracks(d):
    """[(index of a track with markers, its on-CPU samples, the most any
    on-CPU track of its host has)]: markers belong on a host's busiest
    track, which the profiler shows by default."""
    def host(th):
        return th["pid"].split("@")[1] if "@" in th["pid"] else ""

    def on_cpu(th):
        return th["samples"].get("weightType") != "tracing-ms"

    def weight(th):
        s = th["samples"]
        return sum(s["weight"]) if s.get("weight") else s["length"]

    most = collections.Counter()
    for th in d["threads"]:
        if on_cpu(th):
            most[host(th)] = max(most[host(th)], weight(th))
    return [(i, weight(th), most[host(th)]) for i, th in enumerate(d["threads"])
            if th["markers"]["length"]]


def view(t, *args, ok=True):
    r = subprocess.run([t.agent, "view", *args], capture_output=True, text=True,
                       timeout=fxtest.scaled(120))
    t.note(f"+ fxagent view {' '.join(args)}: exit {r.returncode}; {r.stderr.strip()[-600:]}")
    if ok:
        t.require(r.returncode == 0, f"view {args} exited {r.returncode}: {r.stderr[-1500:]}")
    return r


def record(t):
    """The agent's chunks of both targets: {target: [paths in seq order]}."""
    t.workload("fx-hot-ab", 60)
    t.workload("fx-threads", 60)
    d = Daemon(t, "agent", CONFIG)
    d.wait_started()
    fxtest.wait_for(lambda: all(len(d.chunks(running=True).get(n, [])) >= 4
                                for n in ("ab", "thr")), 30)
    rc = d.stop(signal.SIGTERM)
    t.check(rc == 0, f"fxagent exited {rc} after SIGTERM")
    chunks = {n: [p for _, p in d.chunks().get(n, [])] for n in ("ab", "thr")}
    for n, paths in chunks.items():
        t.require(len(paths) >= 4, f"{len(paths)} chunks of {n}")
    return d.out, chunks


def check_target(t, out, chunks):
    merged = os.path.join(t.work, "ab.json.gz")
    r = view(t, out, "--target", "ab", "-o", merged, "--json")
    summary = json.loads(r.stdout)
    t.check(summary["chunks_merged"] == len(chunks["ab"]),
            f"merged {summary['chunks_merged']} chunks, ab has {len(chunks['ab'])}")
    t.check(summary["chunks_not_selected"] == len(chunks["thr"]),
            f"{summary['chunks_not_selected']} not selected, thr has {len(chunks['thr'])}")
    want = sum_weights(chunks["ab"])
    d = load(merged)
    got = leaf_weights(d)
    t.check(got == want, f"ab merged: {total(got)} samples on {len(got)} threads; "
            f"the chunks: {total(want)} on {len(want)}")
    keys = [(th["pid"], th["tid"]) for th in d["threads"]]
    t.check(len(keys) == len(set(keys)), f"a thread on two tracks: {sorted(keys)}")
    thr_pids = {th["pid"] for p in chunks["thr"] for th in load(p)["threads"]
                if th["samples"]["length"]}
    t.check(not thr_pids & {th["pid"] for th in d["threads"]},
            f"thr's processes in the ab merge: {thr_pids & {th['pid'] for th in d['threads']}}")
    # jq on the raw file agrees on the count.
    jq = subprocess.run(f"zcat {merged} | jq '[.threads[].samples.length] | add'", shell=True,
                        capture_output=True, text=True, timeout=60)
    t.check(jq.returncode == 0 and int(jq.stdout) == total(want),
            f"jq counts {jq.stdout.strip()!r} samples, want {total(want)} ({jq.stderr.strip()})")
    # On a terminal, a progress line; not in a pipe (above).
    tty = subprocess.run(["script", "-qec", f"{t.agent} view {out} --target ab -o "
                          f"{os.path.join(t.work, 'tty.json.gz')}", "/dev/null"],
                         capture_output=True, text=True, timeout=fxtest.scaled(60))
    n = len(chunks["ab"]) + len(chunks["thr"])
    t.check(f"view: {n}/{n} chunks" in tty.stdout and "MiB/s" in tty.stdout,
            f"no progress line on a terminal: {tty.stdout[-300:]!r}")
    t.check("chunks," not in r.stderr, f"a progress line in a pipe: {r.stderr[-300:]!r}")
    windows = [m for m in markers(d) if m[0] == "FxRecording"]
    t.check(len(windows) == len(chunks["ab"]), f"{len(windows)} window markers")
    # The markers on the busiest track, the chunks' and the merge's.
    for target in ("ab", "thr"):
        path = os.path.join(t.work, f"carrier-{target}.json.gz")
        view(t, out, "--target", target, "-o", path)
        c = load(path)
        carriers = marker_tracks(c)
        t.check(len(carriers) == 1 and carriers[0][1] == carriers[0][2] > 0,
                f"{target}: the merge's markers on tracks (index, samples, the most): "
                f"{carriers} of {[th['samples']['length'] for th in c['threads']]}")
    for p in chunks["ab"]:
        c = load(p)
        got = marker_tracks(c)
        # (a window before the workload ran has no sample: the agent's track)
        t.check(len(got) == 1 and got[0][1] == got[0][2] and
                (got[0][2] > 0 or not any(th["samples"]["length"] for th in c["threads"])),
                f"{os.path.basename(p)}: markers on (index, samples, the most): {got}")
        t.check(c["meta"]["fxagent"].get("windowMs") == 2000,
                f"{os.path.basename(p)}: windowMs {c['meta']['fxagent'].get('windowMs')}, want 2000")
    cli = t.cli(merged, "ab")
    listed = cli.threads()
    t.check(len(listed) == len(d["threads"]),
            f"profiler-cli lists {len(listed)} threads of {len(d['threads'])}")
    top = cli.functions(cli.handles(name="fx-hot-ab"))
    t.check(any("hot_a" in name for name in top),
            f"profiler-cli: no hot_a among fx-hot-ab's functions: {sorted(top)[:8]}")
    cli.stop()

    for how, want_tracks in (("processes", {th["pid"] for th in d["threads"]}), ("all", {"*"})):
        path = os.path.join(t.work, f"ab-{how}.json.gz")
        view(t, out, "--target", "ab", "--merge", how, "-o", path)
        m = load(path)
        n = total(leaf_weights(m))
        t.check(n == total(want), f"--merge {how}: {n} samples, want {total(want)}")
        tracks = len(m["threads"])
        t.check(tracks == len(want_tracks),
                f"--merge {how}: {tracks} tracks, want {len(want_tracks)}")
    return want


def make_fleet(t, chunks):
    """Two fake hosts (web-1 dc a, web-2 dc b), each with every chunk."""
    fleet = os.path.join(t.work, "nginx", "root", "fleet")
    for host, dc in (("web-1", "a"), ("web-2", "b")):
        for p in chunks["ab"] + chunks["thr"]:
            d = load(p)
            d["meta"]["fxagent"]["host"] = host
            d["meta"]["fxagent"]["labels"]["dc"] = dc
            save(os.path.join(fleet, host, os.path.basename(p)), d)
    return fleet


def check_fleet(t, chunks, want_ab):
    nginx = Nginx(t, "nginx")
    try:
        fleet = make_fleet(t, chunks)
        from_dir = os.path.join(t.work, "fleet-dir.json.gz")
        from_http = os.path.join(t.work, "fleet-http.json.gz")
        view(t, fleet, "--target", "ab", "-o", from_dir)
        view(t, nginx.url("/fleet/"), "--target", "ab", "-o", from_http)
        a, b = load(from_dir), load(from_http)
        t.check(a == b, "the merge from nginx's listing differs from the one from the directory")
        n = total(leaf_weights(a))
        t.check(n == 2 * total(want_ab), f"two hosts: {n} samples, want {2 * total(want_ab)}")
        pids = [th["pid"] for th in a["threads"]]
        t.check(all(p.endswith(("@web-1", "@web-2")) for p in pids),
                f"two hosts, yet pids without their host: {pids}")
        carriers = marker_tracks(a)
        hosts = {a["threads"][i]["pid"].split("@")[1] for i, _, _ in carriers}
        t.check(len(carriers) == 2 and hosts == {"web-1", "web-2"} and
                all(n == most > 0 for _, n, most in carriers),
                f"two hosts' markers on tracks (index, samples, the most of its host): {carriers}")
        for args in (("--host", "web-2"), ("--label", "dc=b")):
            path = os.path.join(t.work, "one-host.json.gz")
            view(t, nginx.url("/fleet/"), "--target", "ab", *args, "-o", path)
            d = load(path)
            got = leaf_weights(d)
            t.check(got == want_ab, f"{args}: {total(got)} samples, want {total(want_ab)}")
            t.check(all("web-2" in th["processName"] or "@" not in th["pid"]
                        for th in d["threads"]), f"{args}: a track of another host")
    finally:
        nginx.stop()


def check_markers_and_time(t, out, chunks):
    ab = chunks["ab"]
    holes = os.path.join(t.work, "holes")
    os.makedirs(holes)
    # the second window missing; a lost-samples marker added to the third
    kept = [p for i, p in enumerate(ab) if i != 1]
    for i, p in enumerate(kept):
        d = load(p)
        if i == 1:
            th = d["threads"][0]
            m = th["markers"]
            names = d["shared"]["stringArray"]
            names.append("FxLostSamples")
            m["name"].append(len(names) - 1)
            m["startTime"].append(500.0)
            m["endTime"].append(None)
            m["phase"].append(0)
            m["category"].append(0)
            m["data"].append({"type": "FxLostSamples", "count": 7})
            m["length"] += 1
            lost_at = d["meta"]["startTime"] + 500.0
        save(os.path.join(holes, os.path.basename(p)), d)
    path = os.path.join(t.work, "holes.json.gz")
    view(t, holes, "-o", path)
    d = load(path)
    ms = markers(d)
    gaps = [m for m in ms if m[0] == "FxGap"]
    w0, w2 = load(ab[0])["meta"]["fxagent"], load(ab[2])["meta"]["fxagent"]
    start = d["meta"]["startTime"]
    t.check(len(gaps) == 1, f"{len(gaps)} gap markers for one missing window: {gaps}")
    if gaps:
        g = gaps[0]
        t.check(abs(start + g[2] - w0["windowEnd"]) < 1 and abs(start + g[3] - w2["windowStart"]) < 1
                and g[1].get("missing") == 1 and g[1].get("target") == "ab",
                f"gap {g} is not the second window {w0['windowEnd']}..{w2['windowStart']}")
    lost = [m for m in ms if m[0] == "FxLostSamples"]
    t.check(len(lost) == 1 and lost[0][1].get("count") == 7 and
            abs(start + lost[0][2] - lost_at) < 0.01, f"lost markers {lost}, want one of 7 at {lost_at}")

    # A restart: the windows between ab[0] and ab[4] missing, and the two
    # runs' edge windows cut short (a tenth of a window left). The gap
    # counts the configured windows (meta windowMs), not the cut ones.
    restart = os.path.join(t.work, "restart")
    os.makedirs(restart)
    if len(ab) >= 5:
        a, b = load(ab[0]), load(ab[4])
        fa, fb = a["meta"]["fxagent"], b["meta"]["fxagent"]
        fa["windowStart"] = fa["windowEnd"] - 200
        fb["windowEnd"] = fb["windowStart"] + 200
        save(os.path.join(restart, "a.json.gz"), a)
        save(os.path.join(restart, "b.json.gz"), b)
        want = round((fb["windowStart"] - fa["windowEnd"]) / fa["windowMs"])
        path = os.path.join(t.work, "restart.json.gz")
        view(t, restart, "-o", path)
        gaps = [m for m in markers(load(path)) if m[0] == "FxGap"]
        t.check(len(gaps) == 1 and gaps[0][1].get("missing") == want == 3,
                f"a restart's gap: {gaps}, want one of {want} (3) windows missing")

    # --from/--to: the samples of the range, no more
    metas = [load(p) for p in ab]
    lo = metas[1]["meta"]["fxagent"]["windowStart"] + 500
    hi = metas[2]["meta"]["fxagent"]["windowEnd"] - 500
    want = 0
    for m in metas:
        for th in m["threads"]:
            want += sum(1 for x in fxtest.sample_times(th["samples"])
                        if lo <= m["meta"]["startTime"] + x < hi)
    path = os.path.join(t.work, "range.json.gz")
    view(t, out, "--target", "ab", "--from", f"{lo / 1000:.3f}", "--to", f"{hi / 1000:.3f}",
         "-o", path)
    d = load(path)
    n = total(leaf_weights(d))
    t.check(n == want, f"--from/--to: {n} samples, want {want}")
    times = [d["meta"]["startTime"] + x for th in d["threads"] for x in th["samples"]["time"]]
    t.check(all(lo <= x < hi for x in times), "--from/--to: a sample outside the range")

    # --bucket: weighted samples, the same weight per function
    plain, folded = os.path.join(t.work, "plain.json.gz"), os.path.join(t.work, "fold.json.gz")
    view(t, out, "--target", "ab", "-o", plain)
    view(t, out, "--target", "ab", "--bucket", "1s", "-o", folded)
    a, b = load(plain), load(folded)
    t.check(leaf_weights(a) == leaf_weights(b), "--bucket 1s changed a function's weight")
    na = sum(th["samples"]["length"] for th in a["threads"])
    nb = sum(th["samples"]["length"] for th in b["threads"])
    t.check(nb < na and all(th["samples"]["weight"] for th in b["threads"]
                            if th["samples"]["length"]),
            f"--bucket 1s: {nb} samples written of {na}, weights {[th['samples']['weight'] is not None for th in b['threads']]}")
    t.note(f"--bucket 1s: {na} samples written as {nb}")


def check_restart(t, chunks):
    """The agent stopped, and started again a few windows later: one FxGap
    between the runs, counting the configured windows the pause lasted
    (the runs' edge windows are cut short, and are no measure)."""
    time.sleep(3 * 2 + 1)
    d = Daemon(t, "again", CONFIG)
    d.wait_started()
    fxtest.wait_for(lambda: len(d.chunks(running=True).get("ab", [])) >= 2, 30)
    t.check(d.stop(signal.SIGTERM) == 0, "the second run did not end cleanly")
    again = [p for _, p in d.chunks().get("ab", [])]
    both = os.path.join(t.work, "restart-runs")
    os.makedirs(both)
    for p in chunks["ab"] + again:
        shutil.copy(p, both)
    a = load(chunks["ab"][-1])["meta"]["fxagent"]
    b = load(again[0])["meta"]["fxagent"]
    want = round((b["windowStart"] - a["windowEnd"]) / 2000)
    path = os.path.join(t.work, "restart-runs.json.gz")
    view(t, both, "--target", "ab", "-o", path)
    gaps = [m for m in markers(load(path)) if m[0] == "FxGap"]
    t.note(f"restart: {(b['windowStart'] - a['windowEnd']) / 1000:.1f} s between the runs, "
           f"edge windows {(a['windowEnd'] - a['windowStart']) / 1000:.2f} s and "
           f"{(b['windowEnd'] - b['windowStart']) / 1000:.2f} s; gaps {gaps}")
    t.check(len(gaps) == 1 and want >= 3 and gaps[0][1].get("missing") == want,
            f"a restart: gaps {gaps}, want one of {want} windows")


def check_bad(t, chunks):
    bad = os.path.join(t.work, "bad")
    os.makedirs(bad)
    good = chunks["ab"][:3]
    for p in good:
        shutil.copy(p, bad)
    shutil.copy(good[0], os.path.join(bad, "again.json.gz"))

    def other_window(path, seq):
        """The chunk at path as another window's: a copy is merged once."""
        d = load(path)
        d["meta"]["fxagent"]["seq"] = seq
        return d

    raw = gzip.compress(json.dumps(other_window(good[1], 1001)).encode())
    with open(os.path.join(bad, "cut.json.gz"), "wb") as f:
        f.write(raw[:len(raw) // 2])
    with open(os.path.join(bad, "garbage.json.gz"), "wb") as f:
        f.write(os.urandom(3000))
    newer = load(good[0])
    newer["meta"]["preprocessedProfileVersion"] = 99
    newer["meta"]["fxagent"]["seq"] = 999
    save(os.path.join(bad, "newer.json.gz"), newer)
    save(os.path.join(bad, "other.json.gz"), {"meta": {"preprocessedProfileVersion": 66},
                                              "threads": []})
    with gzip.open(os.path.join(bad, "broken.json.gz"), "wt") as f:
        f.write(json.dumps(other_window(good[2], 1002))[:5000])
    path = os.path.join(t.work, "bad.json.gz")
    r = view(t, bad, "-o", path, "--json")
    s = json.loads(r.stdout)
    t.check(s["chunks_merged"] == 3 and s["chunks_bad"] == 5 and s["chunks_duplicate"] == 1,
            f"bad chunks: {s}")
    line = [ln for ln in r.stderr.splitlines() if "merged 3 of 9 chunks" in ln]
    t.check(line and all(n in line[0] for n in ("cut.json.gz (truncated gzip",
                                                "garbage.json.gz (", "newer.json.gz (format version 99",
                                                "other.json.gz (not an fxagent chunk",
                                                "broken.json.gz (bad JSON", "1 duplicates")),
            f"the summary line does not name them all: {r.stderr}")
    got = leaf_weights(load(path))
    t.check(got == sum_weights(good), f"with bad chunks around: {total(got)} samples, "
            f"want {total(sum_weights(good))}")
    r = view(t, os.path.join(bad, "garbage.json.gz"), "-o", path, ok=False)
    t.check(r.returncode == 1 and "no chunk to merge" in r.stderr,
            f"only a bad chunk: exit {r.returncode}, {r.stderr.strip()}")


def check_time_forms(t, chunks):
    """Chunks give times as deltas (timeDeltas, as the agent writes them) or
    whole (time, as agents before 2026-11 did): the merge has the same sample
    times from either, and refuses a thread with both."""
    forms = os.path.join(t.work, "forms")
    os.makedirs(forms)
    a, b = chunks["ab"][1], chunks["ab"][2]
    shutil.copy(a, forms)
    old = load(b)
    for th in old["threads"]:
        s = th["samples"]
        if "timeDeltas" in s:
            s["time"] = fxtest.sample_times(s)
            del s["timeDeltas"]
    save(os.path.join(forms, "old.json.gz"), old)
    both = load(b)
    both["meta"]["fxagent"]["seq"] = 2001
    for th in both["threads"]:
        th["samples"]["time"] = fxtest.sample_times(th["samples"])
    save(os.path.join(forms, "both.json.gz"), both)

    def times(d):
        return sorted(round(d["meta"]["startTime"] + x, 6) for th in d["threads"]
                      for x in fxtest.sample_times(th["samples"]))
    want = sorted(times(load(a)) + times(load(b)))
    t.check(len(want) > 0 and any("timeDeltas" in th["samples"] for th in load(a)["threads"]),
            "the agent's chunk has no timeDeltas")
    path = os.path.join(t.work, "forms.json.gz")
    r = view(t, forms, "-o", path, "--json")
    s = json.loads(r.stdout)
    t.check(s["chunks_merged"] == 2 and s["chunks_bad"] == 1,
            f"time forms: {s}")
    t.check("both time and timeDeltas" in r.stderr,
            f"a thread with both columns not named: {r.stderr.strip()}")
    got = times(load(path))
    t.check(got == want, f"time forms: {len(got)} sample times, want {len(want)}; first "
            f"differing: {next(((x, y) for x, y in zip(got, want) if x != y), None)}")


def on_cpu_paths(d):
    """(thread, weight, [(function name, lib name)] root first) of each
    on-CPU sample of the merged profile @d."""
    sh = d["shared"]
    names, funcs, res = sh["stringArray"], sh["funcTable"], sh["resourceTable"]
    frame, prefix = sh["stackTable"]["frame"], sh["stackTable"]["prefixOffset"]

    def func(st):
        f = sh["frameTable"]["func"][frame[st]]
        r = funcs["resource"][f]
        return names[funcs["name"][f]], (names[res["name"][r]] if r is not None and r >= 0 else "")

    for th in d["threads"]:
        s = th["samples"]
        if s.get("weightType") == "tracing-ms":
            continue
        for st, w in zip(s["stack"], s["weight"] or [1] * s["length"]):
            if st is None:
                continue
            out = []
            while True:
                out.append(func(st))
                if not prefix[st]:
                    break
                st -= prefix[st]
            yield th, w, out[::-1]


def reference(d):
    """What the merged profile says, on CPU: {(process, names root first):
    weight}, and per function name its self and total weight (a sample once
    in each function on its stack)."""
    stacks, self_w, total_w = collections.Counter(), collections.Counter(), collections.Counter()
    for th, w, p in on_cpu_paths(d):
        p = [name for name, _ in p]
        stacks[(th["processName"], *p)] += w
        self_w[p[-1]] += w
        for f in set(p):
            total_w[f] += w
    return stacks, self_w, total_w


def reference_by_lib(d):
    """{(function, lib): (self, total weight)} of the on-CPU samples of merge
    @d, a function counted once in each stack it is on, as --top counts."""
    self_w, total_w = collections.Counter(), collections.Counter()
    for _, w, p in on_cpu_paths(d):
        self_w[p[-1]] += w
        for k in set(p):
            total_w[k] += w
    return {k: (self_w[k], total_w[k]) for k in total_w}


def check_exports(t, out, *fold):
    """--format folded read by speedscope's importer, --format pprof by
    `go tool pprof`, --top against profiler-cli: the merge's numbers, exactly
    (with `--bucket`, @fold, the merge's weighted samples: the weights)."""
    tag = "-folded" if fold else ""
    merged = os.path.join(t.work, f"all{tag}.json.gz")
    view(t, out, *fold, "-o", merged)
    d = load(merged)
    stacks, self_w, total_w = reference(d)
    t.require(stacks, "the merge has no on-CPU samples")
    weights = [w for th in d["threads"] for w in th["samples"]["weight"] or []]
    t.require(not fold or max(weights, default=1) > 1, f"{fold}: no sample weighs more than 1")

    folded = os.path.join(t.work, f"all{tag}.folded")
    view(t, out, *fold, "--format", "folded", "-o", folded)
    modules = os.path.dirname(os.path.dirname(t.pcli))
    r = subprocess.run(["node", os.path.join(os.path.dirname(t.lint), "speedscope_folded.mjs"),
                        os.path.join(modules, "speedscope"), folded], capture_output=True,
                       text=True, timeout=fxtest.scaled(60),
                       env=dict(os.environ, PATH=os.path.dirname(t.pcli) + ":" + os.environ["PATH"]))
    t.require(r.returncode == 0, f"speedscope's importer: exit {r.returncode}: {r.stderr[-800:]}")
    got = collections.Counter()
    for row in json.loads(r.stdout):
        got[tuple(row["stack"])] += row["weight"]
    with open(folded) as f:
        lines = f.read().splitlines()
    t.check(got == stacks, f"folded through speedscope: {sum(got.values())} samples in "
            f"{len(got)} stacks, the merge {sum(stacks.values())} in {len(stacks)}; "
            f"first differing {next(((k, got[k], stacks[k]) for k in set(got) | set(stacks) if got[k] != stacks[k]), None)}")
    t.check(len(lines) == len(got), f"folded: {len(lines)} lines, speedscope read {len(got)}")

    pprof = os.path.join(t.work, f"all{tag}.pb.gz")
    view(t, out, *fold, "--format", "pprof", "-o", pprof)
    r = subprocess.run(["go", "tool", "pprof", "-top", "-sample_index=samples", "-symbolize=none",
                        "-nodecount=1000000", "-nodefraction=0", "-edgefraction=0", pprof],
                       capture_output=True, text=True, timeout=fxtest.scaled(120),
                       env=dict(os.environ, HOME=t.work, GOCACHE=os.path.join(t.work, "gocache")))
    t.require(r.returncode == 0, f"go tool pprof -top: exit {r.returncode}: {r.stderr[-800:]}")
    t.save(f"pprof-top{tag}.txt", r.stdout)
    rows = {}
    for ln in r.stdout.splitlines():
        parts = ln.split(None, 5)
        if len(parts) == 6 and parts[0].isdigit() and parts[3].isdigit():
            rows[parts[5]] = (int(parts[0]), int(parts[3]))
    want = {f: (self_w[f], total_w[f]) for f in total_w}
    t.check(rows == want, f"go tool pprof -top: {len(rows)} functions, the merge {len(want)}; "
            f"first differing {next(((f, rows.get(f), want.get(f)) for f in set(rows) | set(want) if rows.get(f) != want.get(f)), None)}")
    t.check(f"Total samples = {sum(stacks.values())}" in r.stdout or
            f"of {sum(stacks.values())} total" in r.stdout,
            f"go tool pprof's total is not {sum(stacks.values())}: {r.stdout[:300]}")

    r = view(t, out, *fold, "--top", "100000")
    top = []
    for ln in r.stdout.splitlines()[2:]:
        parts = ln.split(None, 4)
        name, _, lib = parts[4].rpartition(" (")
        top.append(((name, lib.rstrip(")")), (int(parts[0]), int(parts[2]))))
    if fold:
        # profiler-cli 0.10.0's `thread functions` counts a weighted sample
        # once (the profiler's own call tree weighs it): the weights are
        # checked against the merge itself, function by function and lib
        # (libc's clock_gettime calls the vDSO's: one stack, two functions).
        got = {k: v for k, v in top}
        want = reference_by_lib(d)
        t.check(got == want, f"--top {fold}: not the merge's weights: {len(got)} functions, "
                f"the merge {len(want)}; first differing "
                f"{next(((k, got.get(k), want.get(k)) for k in sorted(set(got) | set(want)) if got.get(k) != want.get(k)), None)}")
    else:
        cli = t.cli(merged, "all")
        handles = ",".join(row["threadHandle"] for row in cli.threads())
        rows = cli.json("thread", "functions", "--thread", handles, "--limit", "0")["functions"]
        cli.stop()
        want = {(row["name"], row.get("library") or ""): (row["selfSamples"], row["totalSamples"])
                for row in rows if row["totalSamples"]}
        t.check(dict(top) == want, f"--top: {len(top)} functions, profiler-cli {len(want)}; "
                f"first differing {next(((k, dict(top).get(k), want.get(k)) for k in set(dict(top)) | set(want) if dict(top).get(k) != want.get(k)), None)}")
    t.check([v for _, v in top] == sorted((v for _, v in top), key=lambda v: (-v[0], -v[1])),
            "--top: not in the order of self, then total samples")
    r3 = view(t, out, *fold, "--top", "3")
    t.check(r3.stdout.splitlines()[2:] == r.stdout.splitlines()[2:5],
            f"--top 3 is not the first 3 rows: {r3.stdout}")


def check_compare(t):
    """--compare: a "deploy" that doubled hot_b's share (fx-hot-ab with hot_b
    6 times a round), before and after, as two profiles with the same tracks
    and one compare link that serves both."""
    runs = {}
    for side, rounds in (("before", 1), ("after", 6)):
        w = t.workload("fx-hot-ab", 5, rounds)
        path = os.path.join(t.work, f"once-{side}.json.gz")
        r = t.run_agent("--once", "-d", "3s", "--pid", w.pid, "-o", path)
        t.require(r.returncode == 0, f"--once ({side}): exit {r.returncode}: {r.stderr[-800:]}")
        w.wait()
        runs[side] = path
    files = {k: os.path.join(t.work, f"cmp-{k}.json.gz") for k in runs}
    view(t, runs["before"], "-o", files["before"], "--compare", runs["after"], "-o", files["after"])
    share, n, layout = {}, {}, {}
    for k, f in files.items():
        d = load(f)
        _, self_w, _ = reference(d)
        # each side holds exactly its recording's samples
        _, want, _ = reference(load(runs[k]))
        t.check(self_w == want, f"--compare: the {k} profile's functions are not its recording's")
        n[k] = sum(self_w.values())
        share[k] = self_w["hot_b"] / max(1, n[k])
        layout[k] = [(th["name"], th["pid"], th["tid"]) for th in d["threads"]]
    # hot_b's share grew (30% to 72% by the work done), by more than three
    # standard deviations of the two shares' sampling error.
    sigma = math.sqrt(sum(share[k] * (1 - share[k]) / max(1, n[k]) for k in share))
    t.note(f"--compare: hot_b's share {share['before']:.2f} of {n['before']} samples before, "
           f"{share['after']:.2f} of {n['after']} after (sigma {sigma:.3f})")
    t.require(min(n.values()) >= 30, f"--compare: too few samples to compare: {n}")
    t.check(share["after"] - share["before"] > 3 * sigma,
            f"hot_b's share {share['before']:.2f} before, {share['after']:.2f} after: no rise "
            f"beyond 3 sigma ({sigma:.3f})")
    t.check(layout["before"] == layout["after"] and layout["before"],
            f"--compare: the two sides' tracks differ: {layout}")
    # Served: one link of the profiler's compare view with both profiles.
    p = subprocess.Popen([t.agent, "view", runs["before"], "--serve", "127.0.0.1:0", "--compare",
                          runs["after"]], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        link = None
        for _ in range(50):
            ln = p.stdout.readline()
            if "/compare/?" in ln:
                link = ln.split(": ", 1)[1].strip()
                break
        t.require(link, "--compare --serve printed no compare link")
        q = urllib.parse.parse_qs(urllib.parse.urlsplit(link).query)
        entries = q.get("profiles[]", [])
        t.check(link.startswith("https://profiler.firefox.com/compare/?") and len(entries) == 2,
                f"compare link {link}")
        for k, e in zip(("before", "after"), entries):
            u = urllib.parse.urlsplit(e)
            served = urllib.parse.unquote(u.path.split("/from-url/")[1].split("/")[0])
            thread = urllib.parse.parse_qs(u.query).get("thread")
            with urllib.request.urlopen(served, timeout=10) as resp:
                body = json.loads(gzip.decompress(resp.read()))
            t.check(body == load(files[k]), f"--compare --serve: {k} served is not the file")
            t.check(thread == ["0"] and len(body["threads"]) >= 1,
                    f"{k}: thread {thread} of {len(body['threads'])}")
    finally:
        p.send_signal(signal.SIGINT)
        p.wait(timeout=30)


def body(t):
    out, chunks = record(t)
    want_ab = check_target(t, out, chunks)
    check_fleet(t, chunks, want_ab)
    check_markers_and_time(t, out, chunks)
    check_bad(t, chunks)
    check_time_forms(t, chunks)
    check_restart(t, chunks)
    check_exports(t, out)
    check_exports(t, out, "--bucket", "1s")
    check_compare(t)


if __name__ == "__main__":
    fxtest.main(body)

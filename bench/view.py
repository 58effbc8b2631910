#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""fxagent view at fleet scale: one target's hour on 60 hosts.

Real one-minute chunks first: the agent as a daemon with one target (the
fx-bench-work processes, one per CPU, all busy) and 60 s windows. From them,
3600 chunks as 60 hosts x 60 minutes would write them: each a real chunk with
its host rewritten and its times moved to its minute (the text edited, then
gzip-compressed again). Then `fxagent view DIR --merge all -o FILE --json`
on 1 chunk, 60 (one host's hour) and 3600 (the fleet's hour): wall time, peak
RSS (VmHWM), output size, samples in and samples written (folded above
--max-samples, 1,000,000 by default), median of the rounds. Last, the 3600
chunks' profile loaded by the Firefox Profiler's own loader (profiler-cli).

The merge reads chunks on a second thread, folds through a hash table and
parses numbers by hand (strtod and re-sorting every fold were most of the
time). This workload has about 7,000 distinct stacks per host
(fx-bench-work's leaves at many addresses), so 42 million samples fit in
1,000,000 only when the bucket covers the hour: the shares are exact, the
timeline is one bucket wide; `--bucket 1m` keeps minutes at the cost of a
bigger profile.

usage: bench/view.py [--build DIR] [--quick] [--rounds N] [--minutes M]
"""
import gzip
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fxbench as fb  # noqa: E402

HOSTS = 60
MINUTES = 60
TARGETS = "targets:\n  - name: work\n    process: fx-bench-work\n"


def add_args(ap):
    ap.add_argument("--rounds", type=int, default=3, help="runs of each merge (median)")
    ap.add_argument("--minutes", type=int, default=2,
                    help="real one-minute chunks to record (the copies cycle through them)")


def record(ctx, a, out):
    """Real chunks of the target: 60 s windows (10 s with --quick)."""
    window = 10 if ctx.quick else 60
    n = 1 if ctx.quick else max(1, a.minutes)
    cfg = os.path.join(out, "fxagent.yaml")
    chunks = os.path.join(out, "chunks")
    with open(cfg, "w") as f:
        f.write(TARGETS + f"window:\n  seconds: {window}\noutput:\n  directory: {chunks}\n")
    work = fb.start_work(ctx, fb.NCPU, window * (n + 1) + 10)
    agent = subprocess.Popen([ctx.agent, "--config", cfg], stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL)
    ctx.log(f"view: recording {n} window(s) of {window} s of {fb.NCPU} busy fx-bench-work")
    deadline = time.monotonic() + window * (n + 1) + 30
    found = []
    while time.monotonic() < deadline:
        found = sorted(os.listdir(chunks)) if os.path.isdir(chunks) else []
        # the first window starts with the agent: a whole one follows it
        if len([x for x in found if x.endswith(".json.gz")]) >= n + 1:
            break
        time.sleep(1)
    agent.send_signal(signal.SIGTERM)
    fb.stop(agent)
    fb.kill_all(work)
    paths = [os.path.join(chunks, x) for x in sorted(os.listdir(chunks)) if x.endswith(".json.gz")]
    return paths[1:n + 1] if len(paths) > 1 else paths


def fleet(bases, out, hosts, minutes):
    """hosts x minutes chunks from the real ones: host and times rewritten."""
    texts = []
    for p in bases:
        with gzip.open(p, "rt") as f:
            text = f.read()
        fx = json.loads(text)["meta"]["fxagent"]
        texts.append((text, fx))
    t0 = texts[0][1]["windowStart"]
    made = []
    for h in range(hosts):
        host = f"web-{h + 1:02d}"
        d = os.path.join(out, host)
        os.makedirs(d)
        for m in range(minutes):
            text, fx = texts[(h + m) % len(texts)]
            shift = t0 + m * 60000.0 - fx["windowStart"]
            new = text.replace(json.dumps(fx["host"]), json.dumps(host))
            # the chunk's times, each written once as a number
            for key in ("startTime", "windowStart", "windowEnd"):
                pat = re.compile(r'("%s":)(-?[0-9.e+]+)' % key)
                new = pat.sub(lambda mo: mo.group(1) + repr(float(mo.group(2)) + shift), new)
            new = re.sub(r'("seq":)[0-9]+', lambda mo: mo.group(1) + str(m), new, count=1)
            path = os.path.join(d, f"work-{m:04d}.json.gz")
            with open(path, "wb") as f:
                f.write(gzip.compress(new.encode(), 6))
            made.append(path)
    return made


def merge(ctx, src, out):
    """One `fxagent view` run: (wall s, peak RSS MiB, output bytes, summary)."""
    t0 = time.monotonic()
    p = subprocess.Popen([ctx.agent, "view", src, "--target", "work", "--merge", "all",
                          "-o", out, "--json"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True)
    stdout, stderr = p.communicate()
    wall = time.monotonic() - t0
    if p.returncode != 0:
        ctx.log(f"view failed ({p.returncode}): {stderr[-500:]}")
        return None
    s = json.loads(stdout)
    # its own VmHWM as it ends: a poll from here misses a short run's peak
    return wall, s["peak_rss_kib"] / 1024, os.path.getsize(out), s


def loads(ctx, path):
    """Seconds profiler-cli takes to load @path, or the error."""
    cli = os.environ.get("FX_PROFILER_CLI") or os.path.join(
        fb.HERE, "..", "build", "node", "node_modules", ".bin", "profiler-cli")
    if not os.access(cli, os.X_OK):
        return "profiler-cli not installed (scripts/install-test-deps.sh)"
    sess = tempfile.mkdtemp(prefix="fxpcli-")
    env = dict(os.environ, PROFILER_CLI_SESSION_DIR=sess, PROFILER_CLI_LOAD_TIMEOUT_MS="300000",
               PATH=os.path.dirname(cli) + os.pathsep + os.environ.get("PATH", ""))
    t0 = time.monotonic()
    r = subprocess.run([cli, "load", path], env=env, capture_output=True, text=True, timeout=600)
    took = time.monotonic() - t0
    info = subprocess.run([cli, "profile", "info"], env=env, capture_output=True, text=True,
                          timeout=120)
    subprocess.run([cli, "stop", "--all"], env=env, capture_output=True, timeout=60)
    shutil.rmtree(sess, ignore_errors=True)
    if r.returncode != 0 or "failed" in r.stdout + r.stderr:
        return f"failed: {(r.stdout + r.stderr).strip()[-300:]}"
    threads = re.search(r"contains (\d+) threads", info.stdout)
    return f"loaded in {took:.1f} s, {threads.group(1) if threads else '?'} tracks"


def run(ctx, a):
    fb.need_root()
    ctx.need(ctx.agent, ctx.work)
    tmp = tempfile.mkdtemp(prefix="fx-bench-view-")
    try:
        bases = record(ctx, a, tmp)
        if not bases:
            return ["### fxagent view", "", "The agent wrote no chunk: nothing measured.", ""]
        hosts, minutes = (6, 10) if ctx.quick else (HOSTS, MINUTES)
        ctx.log(f"view: making {hosts * minutes} chunks from {len(bases)} real one(s)")
        root = os.path.join(tmp, "fleet")
        made = fleet(bases, root, hosts, minutes)
        one = os.path.join(tmp, "one")
        os.makedirs(one)
        shutil.copy(made[0], one)
        sets = [("1 chunk", one, 1), (f"{minutes} chunks (one host)", os.path.join(root, "web-01"),
                                     minutes), (f"{len(made)} chunks ({hosts} hosts)", root,
                                                len(made))]
        rows, last = [], None
        for name, src, n in sets:
            runs = []
            for _ in range(max(1, a.rounds)):
                out = os.path.join(tmp, "merged.json.gz")
                r = merge(ctx, src, out)
                if r:
                    runs.append(r)
            if not runs:
                rows.append([name, "failed", "-", "-", "-", "-", "-"])
                continue
            s = runs[-1][3]
            in_mib = sum(os.path.getsize(os.path.join(dp, f)) for dp, _, fs in os.walk(src)
                         for f in fs) / 1048576
            rows.append([name, f"{in_mib:.1f} MiB", f"{fb.med([r[0] for r in runs]):.2f} s",
                         f"{fb.med([r[1] for r in runs]):.1f} MiB",
                         f"{fb.med([r[2] for r in runs]) / 1048576:.2f} MiB",
                         f"{s['samples']} / {s['samples_written']}",
                         f"{s['bucket_ms'] / 1000:g} s" if s["bucket_ms"] else "none"])
            last = (runs, out)
        big = fb.med([r[0] for r in last[0]]) if last else None
        rss = fb.med([r[1] for r in last[0]]) if last else None
        lines = ["### fxagent view", "",
                 f"`bench/view.py`: {len(bases)} real {'10' if ctx.quick else '60'} s chunk(s) of "
                 f"one target ({fb.NCPU} busy fx-bench-work), copied as {hosts} hosts x "
                 f"{minutes} minutes (host and times rewritten), merged with "
                 f"`fxagent view DIR --merge all -o FILE --json`; median of {a.rounds} "
                 "runs. Samples: taken / written (samples of one stack in one time bucket "
                 "fold into one weighted sample above 1,000,000).", ""]
        lines += fb.table(["chunks", "read (gzip)", "wall time", "peak RSS", "output",
                           "samples", "bucket"], rows)
        lines += [f"The {len(made)} chunks' profile in the Firefox Profiler's loader: "
                  f"{loads(ctx, last[1]) if last else 'not made'}.", "",
                  fb.aim(big is not None and big < 10 and rss is not None and rss < 200,
                         f"under 10 s and 200 MiB for {len(made)} chunks (the aim is for "
                         "3600)"), ""]
        return lines
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    fb.section_main(sys.modules[__name__], __doc__)

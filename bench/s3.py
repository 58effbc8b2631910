#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""S3: chunks per second from one agent into a bucket, and `fxagent view
s3://` for 60 and 600 objects, the store on loopback.

The store is Ceph's radosgw (Debian's Ceph 16.2: a monitor, one OSD on
memstore, radosgw), started here in a private network namespace
(tests/integration/fxceph.py) and ended when the bench ends. Needs root and
scripts/install-test-deps.sh.

1. One real chunk: the daemon, whole system, fx-bench-work on every CPU, one
   2 s window. Copies of it, each its own window (meta.fxagent rewritten), are
   the inputs.
2. Upload rate: N copies put in a fresh spool (target "big": 600; "small":
   60), then the agent started with upload.s3 (sampling at 1 Hz, 1 h windows:
   its own chunks do not count); chunks/s from the first object in the
   bucket until the spool is empty (one connection, one PUT at a time), and
   with the agent's start counted. Once each.
3. view: `fxagent view s3://BUCKET/prod/ --target T -o FILE` for the 60 and
   the 600 objects, 3 runs each: the median time (listing, 16 downloads at a
   time, merge, write) and objects/s.

radosgw answers each GET in about 42 ms on loopback (curl, one connection, 20
GETs of 9 KiB), whatever the size: the view's time is requests in flight,
not bytes. That is why view reads a bucket 16 objects at a time (an HTTP
source 4): with 4 at a time 600 objects took 6.8 s, with 16 2.2 s; the same
600 chunks from a local directory take 0.09 s. A window's chunks per host
and target every 10-60 s is far below the upload rate.

usage: bench/s3.py [--build DIR] [--quick]
"""
import gzip
import json
import os
import secrets
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "tests", "integration"))
import fxbench as fb  # noqa: E402
import fxceph  # noqa: E402

BUCKET = "bench"
PREFIX = "prod/"


def add_args(ap):
    pass


def one_chunk(ctx, tmp):
    """The bytes of one whole-system chunk of a busy machine."""
    out = os.path.join(tmp, "chunk-out")
    cfg = os.path.join(tmp, "chunk.yaml")
    with open(cfg, "w") as f:
        f.write(f"window:\n  seconds: 2\noutput:\n  directory: {out}\n")
    work = fb.start_work(ctx, os.cpu_count() or 2, 30)
    p = subprocess.Popen([ctx.agent, "--config", cfg], stderr=subprocess.DEVNULL)
    try:
        end = time.monotonic() + 30
        while time.monotonic() < end:
            done = [n for n in os.listdir(out)] if os.path.isdir(out) else []
            done = [n for n in done if n.endswith(".json.gz") and ".tmp" not in n]
            if len(done) >= 2:  # the second is a whole window
                with open(os.path.join(out, sorted(done)[1]), "rb") as f:
                    return f.read()
            time.sleep(0.2)
        sys.exit("bench/s3.py: the agent wrote no chunk in 30 s")
    finally:
        p.terminate()
        p.wait()
        fb.kill_all(work)


def variant(data, i, base_ms, target):
    """@data as window @i of @target: its own start, end and seq."""
    d = json.loads(gzip.decompress(data))
    fx = d["meta"]["fxagent"]
    span = fx["windowEnd"] - fx["windowStart"]
    fx["windowStart"] = base_ms + i * span
    fx["windowEnd"] = fx["windowStart"] + span
    fx["seq"] = i
    fx["target"] = target
    d["meta"]["startTime"] = fx["windowStart"]
    # as the agent writes it: the spool checks the text begins as its chunks do
    text = json.dumps(d, separators=(",", ":"), ensure_ascii=False)
    return gzip.compress(text.encode(), 6), fx["windowStart"], fx["windowEnd"]


def fill_spool(spool, data, n, target, base_ms):
    os.makedirs(spool, mode=0o700, exist_ok=True)
    total = 0
    for i in range(n):
        body, start, end = variant(data, i, base_ms, target)
        name = f"{int(start)}-{int(end)}-{i}-{secrets.token_hex(16)}-{target}.json.gz"
        path = os.path.join(spool, name)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(body)
        total += len(body)
    return total


def pending(spool):
    return [n for n in os.listdir(spool) if n.endswith(".json.gz")]


def upload(ctx, ceph, tmp, data, n, target, base_ms):
    spool = os.path.join(tmp, f"spool-{target}")
    nbytes = fill_spool(spool, data, n, target, base_ms)
    key = os.path.join(tmp, "key-id")
    sec = os.path.join(tmp, "secret")
    for path, text in ((key, ceph.key), (sec, ceph.secret)):
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(text)
    cfg = os.path.join(tmp, f"{target}.yaml")
    with open(cfg, "w") as f:
        f.write(f"""sampling:
  frequency: 1
window:
  seconds: 3600
output:
  directory: {tmp}/out-{target}
upload:
  s3:
    endpoint: {ceph.endpoint}
    region: {ceph.region}
    bucket: {BUCKET}
    prefix: {PREFIX}
    path_style: true
    access_key_id_file: {key}
    secret_access_key_file: {sec}
spool:
  directory: {spool}
""")
    t0 = time.monotonic()
    log = os.path.join(tmp, f"agent-{target}.log")
    with open(log, "w") as lf:
        p = subprocess.Popen([ctx.agent, "--config", cfg], stderr=lf)
    first = None
    try:
        while True:
            left = len(pending(spool))
            if left < n and first is None:
                first = time.monotonic()  # the first object is in the bucket
            if not left or time.monotonic() - t0 > 600:
                break
            time.sleep(0.005)
        took = time.monotonic() - t0
        steady = time.monotonic() - first if first else took
    finally:
        p.send_signal(2)
        p.wait()
    left = len(pending(spool))
    rejected = len(os.listdir(os.path.join(spool, "rejected")))
    if left or rejected:
        with open(log) as lf:
            sys.exit(f"bench/s3.py: {left} chunks left and {rejected} rejected of {n}: "
                     f"{lf.read()[-1500:]}")
    # chunks/s once the agent is up (the first object sent), and with its start
    return (n - 1) / steady, nbytes / took / 1e6, nbytes / n, n / took


def view(ctx, ceph, tmp, target, runs):
    env = dict(os.environ, AWS_ACCESS_KEY_ID=ceph.key, AWS_SECRET_ACCESS_KEY=ceph.secret)
    out = os.path.join(tmp, f"view-{target}.json.gz")
    times, merged = [], None
    for _ in range(runs):
        t0 = time.monotonic()
        r = subprocess.run([ctx.agent, "view", f"s3://{BUCKET}/{PREFIX}", "--endpoint",
                            ceph.endpoint, "--path-style", "--target", target, "-o", out,
                            "--json"], capture_output=True, text=True, env=env, timeout=600)
        times.append(time.monotonic() - t0)
        if r.returncode:
            sys.exit(f"bench/s3.py: view exited {r.returncode}: {r.stderr[-1000:]}")
        merged = json.loads(r.stdout)["chunks_merged"]
    return statistics.median(times), merged, times


def run(ctx, a):
    fb.need_root()
    ctx.need(ctx.agent, ctx.work)
    miss = fxceph.missing_tools()
    if miss:
        sys.exit(f"bench/s3.py: {', '.join(miss)} missing (scripts/install-test-deps.sh)")
    tmp = tempfile.mkdtemp(prefix="fx-bench-s3-")
    procs = []

    def spawn(cmd, **kw):
        p = subprocess.Popen(cmd, **kw)
        procs.append(p)
        return p

    ceph = fxceph.Cluster(tmp, spawn, log=ctx.log)
    lines = []
    ok = False
    try:
        ceph.start()
        ceph.make_bucket(BUCKET)
        data = one_chunk(ctx, tmp)
        base = int(time.time() * 1000) - 7200 * 1000
        sizes = (("small", 6 if ctx.quick else 60), ("big", 60 if ctx.quick else 600))
        rows = []
        for target, n in sizes:
            cps, mbps, avg, with_start = upload(ctx, ceph, tmp, data, n, target, base)
            rows.append([f"upload {n} chunks ({avg / 1024:.0f} KiB each)", "",
                         f"{cps:.0f} chunks/s", f"{with_start:.0f} chunks/s and "
                         f"{mbps:.1f} MB/s counting the agent's start"])
        for target, n in sizes:
            med, merged, times = view(ctx, ceph, tmp, target, 1 if ctx.quick else 3)
            rows.append([f"view s3:// --target {target} ({n} objects)", f"{med:.2f} s",
                         f"{merged / med:.0f} objects/s",
                         "runs " + " ".join(f"{x:.2f} s" for x in times)])
        lines.append(f"S3 store: radosgw (Ceph 16.2, memstore) on loopback, up in "
                     f"{ceph.startup_s:.1f} s")
        lines += fb.table(["what", "median time", "rate", "notes"], rows)
        ok = True
    finally:
        ceph.stop()
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
        if ok:
            shutil.rmtree(tmp, ignore_errors=True)
        else:
            ctx.log(f"bench/s3.py: files kept in {tmp}")
    return lines


if __name__ == "__main__":
    if os.geteuid() == 0:
        fxceph.enter_netns()
    fb.section_main(sys.modules[__name__], __doc__)

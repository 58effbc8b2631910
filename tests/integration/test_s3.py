# SPDX-License-Identifier: MIT
"""upload.s3 and `fxagent view s3://` against a real S3 store: Ceph's radosgw
(fxceph.py: a monitor, one memstore OSD and radosgw on 127.0.0.1, all in this
test's private network namespace, ended by pid when it ends).

1. Agent to bucket: the daemon with upload.s3 (path style by itself for the
   127.0.0.1 endpoint, prefix "prod/",
   credentials in files of mode 0600), targets ab (fx-hot-ab) and thr
   (fx-threads), 2 s windows, until 3 chunks of each are in the bucket, then
   SIGINT. Every chunk the agent wrote is one object, under
   prod/<target>/<YYYY>/<MM>/<DD>/<HH>/<host>/<start>-<end>-<id>.json.gz,
   byte-identical to its spool file, with its metadata (host, target, window,
   seq, chunk id, labels, format); nothing else is in the bucket; the spool
   ends empty, nothing rejected.
2. The same chunk sent again (a copy of a sent spool file put back, as after
   a crash between the PUT and the spool's bookkeeping) is the same object:
   the bucket's key count does not change.
3. A wrong secret: the store answers 403; the agent's log says
   SignatureDoesNotMatch and what it means, the chunks go to the spool's
   rejected/, none reaches the bucket.
4. The store stopped (radosgw ended) while 3 windows (6 chunks) wait in the
   spool, then
   started: every chunk arrives once; the log says it failed and recovered.
5. `--check-config --check-upload`: one signed HEAD on the bucket; exit 0
   and "accepts" with the right secret, exit 3 and "refuses these
   credentials" with a wrong one, exit 3 and "no bucket" for a bucket that
   is not there.
6. The store's clock an hour behind this host's (radosgw with libfaketime),
   `--once`: the store answers 403 RequestTimeTooSkewed; the log says the
   store's clock is 3600 s behind this host's and to set the clock; the two
   chunks (one a target) are in rejected/.
7. A bucket that is not there: 404 NoSuchBucket in the log, the chunks in
   rejected/.
8. `fxagent view s3://BUCKET/prod/ --target ab` (no --path-style: the
   127.0.0.1 endpoint is path style by itself): merges exactly ab's chunks
   and downloads none of thr's (no chunk "not selected": the listing was
   narrowed by the keys); `--host` of another host finds nothing; the merged
   profile holds every sample of ab's objects; `--since 1h` keeps them all,
   `--from` an hour ahead and `--to` an hour ago list none.
9. 1100 objects of one target (through a spool and the agent): the view
   follows ListObjectsV2's continuation token and merges all 1100.
"""

import gzip
import json
import os
import re
import shutil
import signal
import subprocess
import time

import fxceph
import fxtest
from fxdaemon import Daemon
from fxupload import SpoolWatch, pending, wrote

WINDOW = 2
BUCKET = "fleet"
PREFIX = "prod/"
KEY_RE = re.compile(r"^prod/(?P<target>[A-Za-z0-9_.-]+)/(?P<Y>\d{4})/(?P<m>\d\d)/(?P<d>\d\d)/"
                    r"(?P<H>\d\d)/(?P<host>[A-Za-z0-9_.-]+)/(?P<start>\d{8}T\d{6}Z)-"
                    r"(?P<end>\d{8}T\d{6}Z)-(?P<id>[0-9a-f]{32})\.json\.gz$")
# libfaketime itself (not the faketime command, which would stand between
# the test and radosgw's pid).
FAKETIME_LIB = "/usr/lib/x86_64-linux-gnu/faketime/libfaketimeMT.so.1"
TARGETS = ("targets:\n  - name: ab\n    process: fx-hot-ab\n"
           "  - name: thr\n    process: fx-threads\n")


def secret_file(t, name, text):
    path = os.path.join(t.work, name)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(text + "\n")
    return path


def config(t, ceph, spool, secret):
    return f"""window:
  seconds: {WINDOW}
log:
  level: info
labels:
  env: s3test
{TARGETS}upload:
  s3:
    endpoint: {ceph.endpoint}
    region: {ceph.region}
    bucket: {BUCKET}
    prefix: {PREFIX}
    access_key_id_file: {secret_file(t, "key-id", ceph.key)}
    secret_access_key_file: {secret_file(t, "secret-" + os.path.basename(spool), secret)}
  connect_timeout: 1s
  timeout: 5s
  retry: {{initial_backoff: 200ms, max_backoff: 1s}}
spool:
  directory: {spool}
"""


def start(t, ceph, tag, secret=None):
    spool = os.path.join(t.work, tag + "-spool")
    watch = SpoolWatch(spool, os.path.join(t.work, tag + "-kept"))
    d = Daemon(t, tag, config(t, ceph, spool, secret or ceph.secret))
    d.wait_started()
    return d, watch, spool


def objects(ceph):
    return ceph.list_keys(BUCKET, PREFIX)


def by_target(keys):
    out = {}
    for k in keys:
        m = KEY_RE.match(k)
        if m:
            out.setdefault(m["target"], []).append(k)
    return out


def fetch(ceph, key, dest):
    st, _, _ = ceph.curl("GET", f"/{BUCKET}/{key}", out=dest)
    return st


def check_bucket(t, ceph, d, watch, spool, tag):
    """Every chunk written is one object with its bytes and metadata."""
    written = wrote(d.text())
    keys = objects(ceph)
    t.require(written, f"{tag}: the agent's log names no chunk it wrote: {d.text()[-2000:]}")
    bad = [k for k in keys if not KEY_RE.match(k)]
    t.check(not bad, f"{tag}: keys not in the layout: {bad[:5]}")
    ids = {}
    for k in keys:
        m = KEY_RE.match(k)
        if m:
            ids.setdefault(m["id"], []).append(k)
    mine = {i: ks for i, ks in ids.items() if i in written}
    t.check(set(mine) == set(written),
            f"{tag}: chunks written but not in the bucket: {sorted(set(written) - set(mine))}")
    twice = {i: ks for i, ks in mine.items() if len(ks) != 1}
    t.check(not twice, f"{tag}: one chunk under several keys: {twice}")
    kept = watch.kept()
    host = os.uname().nodename
    checked = 0
    for cid, ks in sorted(mine.items())[:6]:
        key = ks[0]
        m = KEY_RE.match(key)
        dest = os.path.join(t.work, f"{tag}-{cid}.json.gz")
        t.check(fetch(ceph, key, dest) == 200, f"{tag}: GET {key} failed")
        with open(dest, "rb") as f:
            data = f.read()
        if cid in kept:
            with open(kept[cid], "rb") as f:
                t.check(f.read() == data, f"{tag}: {key} differs from its spool file")
        prof = json.loads(gzip.decompress(data))
        fx = prof["meta"]["fxagent"]
        t.check(fx["target"] == m["target"] and fx["host"] == host,
                f"{tag}: {key}: meta.fxagent target {fx['target']!r} host {fx['host']!r}")
        start = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(fx["windowStart"] // 1000))
        hour = time.strftime("%Y/%m/%d/%H", time.gmtime(fx["windowStart"] // 1000))
        t.check(m["start"] == start and f"{m['Y']}/{m['m']}/{m['d']}/{m['H']}" == hour,
                f"{tag}: {key}: the key's window is not windowStart {fx['windowStart']}")
        st, h = ceph.head(BUCKET, key)
        want = {"x-amz-meta-fxagent-host": host, "x-amz-meta-fxagent-target": m["target"],
                "x-amz-meta-fxagent-window-start": m["start"],
                "x-amz-meta-fxagent-window-end": m["end"],
                "x-amz-meta-fxagent-seq": str(fx["seq"]),
                "x-amz-meta-fxagent-chunk-id": cid,
                "x-amz-meta-fxagent-format": "firefox-profiler-processed-66"}
        got = {k: h.get(k) for k in want}
        t.check(st == 200 and got == want, f"{tag}: HEAD {key}: {st}, metadata {got}, "
                f"want {want}")
        t.check("env=s3test" in h.get("x-amz-meta-fxagent-labels", ""),
                f"{tag}: {key}: labels metadata {h.get('x-amz-meta-fxagent-labels')!r}")
        checked += 1
    t.check(checked >= 3, f"{tag}: only {checked} objects checked")
    t.check(not pending(spool), f"{tag}: left in the spool: {pending(spool)}")
    rej = os.listdir(os.path.join(spool, "rejected"))
    t.check(not rej, f"{tag}: rejected: {rej}")
    return mine


def run_upload(t, ceph):
    d, watch, spool = start(t, ceph, "upload")
    fxtest.wait_for(lambda: all(len(v) >= 3 for v in by_target(objects(ceph)).values())
                    and len(by_target(objects(ceph))) == 2, 8 * WINDOW, 0.5)
    rc = d.stop()
    watch.stop()
    t.require(rc == 0, f"upload: fxagent exited {rc}: {d.text()[-2000:]}")
    mine = check_bucket(t, ceph, d, watch, spool, "upload")
    t.note(f"upload: {len(mine)} chunks, one object each, "
           f"{ {k: len(v) for k, v in by_target(objects(ceph)).items()} } by target")

    # Sent again: the same key, one object.
    before = objects(ceph)
    name = sorted(os.listdir(os.path.join(t.work, "upload-kept")))[0]
    again = os.path.join(t.work, "again-spool")
    os.makedirs(again, mode=0o700)
    shutil.copy(os.path.join(t.work, "upload-kept", name), os.path.join(again, name))
    os.chmod(os.path.join(again, name), 0o600)
    d2 = Daemon(t, "again", config(t, ceph, again, ceph.secret) + "sampling:\n  frequency: 1\n")
    d2.wait_started()
    # The chunk put back, not the spool: the agent's own last window may
    # still wait there when it stops (a slow build), as it should.
    fxtest.wait_for(lambda: name not in pending(again), 10, 0.2)
    d2.stop()
    after = objects(ceph)
    t.check(name not in pending(again), f"again: {name} not sent: {d2.text()[-2000:]}")
    new = sorted(set(after) - set(before) - set(k for k in after if "again" in k))
    sent_id = name.split("-")[3]
    t.check(sum(1 for k in after if sent_id in k) == 1,
            f"again: chunk {sent_id} is under {sum(1 for k in after if sent_id in k)} keys")
    t.note(f"again: {sent_id} sent twice, one object; {len(new)} new keys from the second "
           "agent's own windows")


def run_wrong_secret(t, ceph):
    before = set(objects(ceph))
    d, watch, spool = start(t, ceph, "wrong", secret="not-the-secret-" + "x" * 20)
    rej = os.path.join(spool, "rejected")
    fxtest.wait_for(lambda: os.path.isdir(rej) and len(os.listdir(rej)) >= 2, 6 * WINDOW, 0.2)
    d.stop()
    watch.stop()
    text = d.text()
    t.check(len(os.listdir(rej)) >= 2, f"wrong: nothing in rejected/: {text[-2000:]}")
    t.check("HTTP 403 SignatureDoesNotMatch" in text and
            "the secret access key does not match the access key id" in text,
            f"wrong: the log does not say the signature was refused: {text[-2000:]}")
    t.check("not-the-secret" not in text, "wrong: the secret is in the agent's log")
    new = set(objects(ceph)) - before
    t.check(not new, f"wrong: objects written with a wrong secret: {sorted(new)[:3]}")
    t.check(not pending(spool), f"wrong: left pending, not rejected: {pending(spool)}")
    t.note(f"wrong secret: {len(os.listdir(rej))} chunks in rejected/; the log: "
           + next((ln for ln in text.splitlines() if "SignatureDoesNotMatch" in ln), "")[:300])


def run_outage(t, ceph):
    d, watch, spool = start(t, ceph, "outage")
    t.require(fxtest.wait_for(lambda: wrote(d.text()), 3 * WINDOW + 2),
              f"outage: nothing written: {d.text()[-2000:]}")
    ceph.stop_rgw()
    down = time.monotonic()
    # Three windows of the two targets.
    fxtest.wait_for(lambda: len(pending(spool)) >= 6, 10 * WINDOW, 0.1)
    during = len(pending(spool))
    ceph.start_rgw()
    t.note(f"outage: radosgw down {time.monotonic() - down:.1f} s; {during} chunks waited")
    t.check(during >= 6, f"outage: only {during} chunks waited in the spool")
    fxtest.wait_for(lambda: not pending(spool), 20, 0.2)
    t.check(not pending(spool), f"outage: still pending {pending(spool)} after the store "
            "came back")
    time.sleep(0.5)
    rc = d.stop()
    watch.stop()
    t.require(rc == 0, f"outage: fxagent exited {rc}: {d.text()[-2000:]}")
    check_bucket(t, ceph, d, watch, spool, "outage")
    text = d.text()
    t.check("cannot upload chunk" in text and "answers again" in text,
            f"outage: the log does not say it failed and recovered: {text[-2000:]}")


def run_view(t, ceph):
    keys = by_target(objects(ceph))
    out = os.path.join(t.work, "view-ab.json.gz")
    env = dict(os.environ, AWS_ACCESS_KEY_ID=ceph.key, AWS_SECRET_ACCESS_KEY=ceph.secret)
    base = [t.agent, "view", f"s3://{BUCKET}/{PREFIX}", "--endpoint", ceph.endpoint,
            "--region", ceph.region]
    r = subprocess.run(base + ["--target", "ab", "-o", out, "--json"], capture_output=True,
                       text=True, timeout=fxtest.scaled(120), env=env)
    t.require(r.returncode == 0, f"view s3://: exit {r.returncode}: {r.stderr[-2000:]}")
    summary = json.loads(r.stdout)
    t.note(f"view s3:// --target ab: {r.stderr.strip().splitlines()[-1]}")
    n_ab = len(keys.get("ab", []))
    t.check(summary.get("chunks_merged") == n_ab and summary.get("chunks_found") == n_ab,
            f"view: merged {summary.get('chunks_merged')} of {summary.get('chunks_found')} "
            f"listed; the "
            f"bucket holds {n_ab} chunks of ab (and {len(keys.get('thr', []))} of thr, which "
            "should not be listed at all)")
    t.check(not summary.get("chunks_not_selected"),
            f"view: {summary.get('chunks_not_selected')} chunks read "
            "and not selected: the listing was not narrowed")
    # Every sample of ab's objects is in the merge.
    want = 0
    for k in keys.get("ab", []):
        dest = os.path.join(t.work, "ab-" + os.path.basename(k))
        fetch(ceph, k, dest)
        with gzip.open(dest) as f:
            want += json.load(f)["meta"]["fxagent"]["samples"]
    with gzip.open(out) as f:
        merged = json.load(f)
    got = sum(sum(th["samples"]["weight"] or [1] * th["samples"]["length"])
              for th in merged["threads"])
    t.check(got == want, f"view: {got} samples merged, ab's objects hold {want}")
    r = subprocess.run(base + ["--host", "no-such-host", "-o", out, "--json"],
                       capture_output=True, text=True, timeout=fxtest.scaled(60), env=env)
    t.check(r.returncode == 1 and "merged 0 of 0 chunks" in r.stderr,
            f"view --host no-such-host: exit {r.returncode} (want 1, none listed): "
            f"{r.stderr[-500:]}")
    # Narrowed by time: all of ab's within the last hour; none from an hour
    # ahead (the listing starts after it); none before an hour ago.
    for args, want in ((["--since", "1h"], n_ab),
                       (["--from", str(int(time.time()) + 3600)], 0),
                       (["--to", str(int(time.time()) - 3600)], 0)):
        r = subprocess.run(base + ["--target", "ab", "-o", out] + args, capture_output=True,
                           text=True, timeout=fxtest.scaled(60), env=env)
        t.check(f"merged {want} of {want} chunks" in r.stderr,
                f"view --target ab {' '.join(args)}: want {want} listed and merged: "
                f"{r.stderr[-500:]}")
    # Without credentials: a clear error, no request.
    env.pop("AWS_SECRET_ACCESS_KEY")
    r = subprocess.run(base + ["-o", out], capture_output=True, text=True, timeout=60, env=env)
    t.check(r.returncode != 0 and "AWS_SECRET_ACCESS_KEY is not set" in r.stderr,
            f"view without a secret: exit {r.returncode}: {r.stderr[-500:]}")


def run_pages(t, ceph):
    """1100 objects of one target: ListObjectsV2 answers 1000 a page, so the
    view follows a continuation token. The copies of one chunk, each a window
    of its own, go in through a spool and the agent."""
    kept = sorted(os.listdir(os.path.join(t.work, "upload-kept")))
    src = next(n for n in kept if n.endswith("-ab.json.gz"))
    with open(os.path.join(t.work, "upload-kept", src), "rb") as f:
        d = json.loads(gzip.decompress(f.read()))
    spool = os.path.join(t.work, "pages-spool")
    os.makedirs(spool, mode=0o700)
    fx = d["meta"]["fxagent"]
    span = int(fx["windowEnd"] - fx["windowStart"])  # whole ms: spool names hold integers
    base_ms = int(time.time() * 1000) - 1200 * span
    n = 1100
    for i in range(n):
        fx["windowStart"] = base_ms + i * span
        fx["windowEnd"] = fx["windowStart"] + span
        fx["seq"] = i
        fx["target"] = "pages"
        d["meta"]["startTime"] = fx["windowStart"]
        body = gzip.compress(json.dumps(d, separators=(",", ":"), ensure_ascii=False).encode())
        name = (f"{fx['windowStart']}-{fx['windowEnd']}-{i}-{os.urandom(16).hex()}"
                "-pages.json.gz")
        fd = os.open(os.path.join(spool, name), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(body)
    d2 = Daemon(t, "pages", config(t, ceph, spool, ceph.secret).replace(
        TARGETS, "") + "sampling:\n  frequency: 1\n")
    d2.wait_started()
    # Drained however long a slow machine takes, while it keeps draining
    # (half a CPU sent 760 of the 1100 in 60 s).
    t0 = time.monotonic()
    fxtest.wait_drained(lambda: len(pending(spool)), 30)
    t.note(f"pages: the spool drained to {len(pending(spool))} in {time.monotonic() - t0:.1f} s")
    d2.stop()
    left = [x for x in os.listdir(spool) if x.endswith(".json.gz")]
    t.check(not left and not os.listdir(os.path.join(spool, "rejected")),
            f"pages: {len(left)} of {n} not sent, "
            f"{len(os.listdir(os.path.join(spool, 'rejected')))} rejected")
    env = dict(os.environ, AWS_ACCESS_KEY_ID=ceph.key, AWS_SECRET_ACCESS_KEY=ceph.secret)
    out = os.path.join(t.work, "view-pages.json.gz")
    r = subprocess.run([t.agent, "view", f"s3://{BUCKET}/{PREFIX}", "--endpoint", ceph.endpoint,
                        "--path-style", "--target", "pages", "-o", out, "--json"],
                       capture_output=True, text=True, timeout=fxtest.scaled(180), env=env)
    summary = json.loads(r.stdout or "{}")
    t.check(r.returncode == 0 and summary.get("chunks_found") == n and
            summary.get("chunks_merged") == n,
            f"pages: view found {summary.get('chunks_found')} and merged "
            f"{summary.get('chunks_merged')} of {n} objects (two pages): {r.stderr[-500:]}")
    t.note(f"pages: {n} objects over two pages of the listing; view: "
           f"{r.stderr.strip().splitlines()[-1] if r.stderr.strip() else ''}")


def run_no_bucket(t, ceph):
    """A PUT into a bucket that is not there: 404 NoSuchBucket, rejected/."""
    spool = os.path.join(t.work, "nobucket-spool")
    path = os.path.join(t.work, "nobucket.yaml")
    with open(path, "w") as f:
        f.write(config(t, ceph, spool, ceph.secret).replace(f"bucket: {BUCKET}",
                                                            "bucket: no-such-bucket"))
    r = t.run_agent("--config", path, "--once", "--duration", "1s", timeout=120)
    rej = os.path.join(spool, "rejected")
    got = os.listdir(rej) if os.path.isdir(rej) else []
    t.check("HTTP 404 NoSuchBucket" in r.stderr and "check upload.s3.bucket" in r.stderr,
            f"no bucket: the log does not say NoSuchBucket: {r.stderr[-1500:]}")
    t.check(len(got) == 2 and not pending(spool), f"no bucket: rejected/ holds {got}, "
            f"pending {pending(spool)}")


def run_check(t, ceph):
    for tag, secret, bucket, want_rc, want in (
            ("check-ok", ceph.secret, BUCKET, 0, "the store accepts these credentials"),
            ("check-bad", "wrong-secret-" + "y" * 20, BUCKET, 3,
             "the store refuses these credentials"),
            ("check-nobucket", ceph.secret, "no-such-bucket", 3, "no bucket no-such-bucket")):
        spool = os.path.join(t.work, tag + "-spool")
        path = os.path.join(t.work, tag + ".yaml")
        with open(path, "w") as f:
            f.write(config(t, ceph, spool, secret).replace(f"bucket: {BUCKET}",
                                                           f"bucket: {bucket}"))
        r = t.run_agent("--check-config", path, "--check-upload", timeout=60)
        out = r.stdout + r.stderr
        t.check(r.returncode == want_rc and want in out,
                f"{tag}: --check-upload exited {r.returncode} (want {want_rc}): {out[-800:]}")
        t.check("wrong-secret" not in out, f"{tag}: the secret is in the output")
        said_ok = any(ln.endswith(": ok") for ln in r.stdout.splitlines())
        t.check(said_ok == (want_rc == 0),
                f"{tag}: exit {r.returncode}, and the config is {'' if said_ok else 'not '}"
                f"said ok: {r.stdout[-400:]!r}")
        t.note(f"{tag}: exit {r.returncode}: {out.strip().splitlines()[-1][:200]}")


def run_skew(t, ceph):
    # The store's clock an hour behind (radosgw with libfaketime), not the
    # agent's: the agent runs as it is, a sanitizer build included.
    ceph.stop_rgw()
    ceph.start_rgw(env={"LD_PRELOAD": FAKETIME_LIB, "FAKETIME": "-1h",
                        "FAKETIME_DONT_FAKE_MONOTONIC": "1"})
    spool = os.path.join(t.work, "skew-spool")
    path = os.path.join(t.work, "skew.yaml")
    with open(path, "w") as f:
        f.write(config(t, ceph, spool, ceph.secret))
    try:
        r = t.run_agent("--config", path, "--once", "--duration", "1s", timeout=120)
    finally:
        ceph.stop_rgw()
        ceph.start_rgw()
    rej = os.path.join(spool, "rejected")
    got = os.listdir(rej) if os.path.isdir(rej) else []
    t.check("RequestTimeTooSkewed" in r.stderr
            and "NTP" in r.stderr,
            f"skew: the log does not say the clocks differ by an hour: {r.stderr[-1500:]}")
    m = re.search(r"the store's clock is (\d+) s behind", r.stderr)
    t.check(m and 3590 <= int(m[1]) <= 3610,
            f"skew: the skew said is not an hour: {m and m[0]}")
    t.check(len(got) == 2, f"skew: rejected/ holds {got}, want ab's and thr's one chunk")
    t.note("skew: " + next((ln for ln in r.stderr.splitlines() if "Skewed" in ln), "")[:400])


def body(t):
    miss = fxceph.missing_tools() + [x for x in (FAKETIME_LIB,) if not os.path.exists(x)]
    t.require(not miss, f"{', '.join(miss)} not installed (scripts/install-test-deps.sh "
              "installs Ceph's ceph-mon, ceph-osd and radosgw)")
    t.workload("fx-hot-ab", 600)
    t.workload("fx-threads", 600)
    ceph = fxceph.Cluster(t.work, t.spawn, log=t.note)
    try:
        ceph.start()
        ceph.make_bucket(BUCKET)
        run_upload(t, ceph)
        run_wrong_secret(t, ceph)
        run_outage(t, ceph)
        run_check(t, ceph)
        run_no_bucket(t, ceph)
        run_skew(t, ceph)
        run_view(t, ceph)
        run_pages(t, ceph)
    finally:
        ceph.stop()
        t.kill_processes()


if __name__ == "__main__":
    if os.geteuid() == 0:
        fxceph.enter_netns()
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    fxtest.main(body)

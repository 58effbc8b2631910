# SPDX-License-Identifier: MIT
"""Chunks reach a real web server unchanged, and survive its outage.

nginx runs as the test's own process: PUT stores each body under its URL (dav
module), POST keeps each request body in a file named in the access log. The
agent samples the whole system (a busy fx-hot-ab) in 2 s windows:
1. PUT, then POST, each until 3 chunks arrived, SIGINT: every chunk the agent wrote arrived once,
   byte-identical to the spool file (linked aside as it appeared), gunzips to a
   valid profile whose meta.fxagent matches the URL's target and seq; seq numbers
   are consecutive and arrived in order; the spool ends empty; one loads in
   profiler-cli with hot_a and hot_b.
2. outage: nginx is stopped (SIGTERM) while the agent runs until 3 chunks
   wait in the spool, then started again: the chunks wait in the spool, and afterwards every
   chunk id arrived exactly once, in seq order, and the spool ends empty.
"""

import os
import time

import fxtest
from fxdaemon import Daemon
from fxupload import (Nginx, SpoolWatch, URL_RE, URL_TAIL, check_body, config, pending,
                      wrote)

WINDOW = 2


def body(t):
    ng = Nginx(t, "nginx")
    try:
        run(t, ng)
    finally:
        ng.stop()
        t.kill_processes()


def received(t, ng, prefix):
    """[(time, method, uri, status, body file)] of the requests under prefix."""
    return [r for r in ng.requests() if r[2].startswith(prefix)]


def check_run(t, ng, d, watch, spool, prefix, tag):
    """The checks common to every run; returns {id: seq} of the chunks received."""
    written = wrote(d.text())
    t.require(written, f"{tag}: the agent's log names no chunk it wrote: {d.text()[-2000:]}")
    reqs = received(t, ng, prefix)
    ok = [r for r in reqs if 200 <= r[3] < 300]
    t.note(f"{tag}: the agent wrote {len(written)} chunks; nginx answered "
           f"{[r[3] for r in reqs]} to {len(reqs)} requests; {len(watch.kept())} spool files "
           f"kept for comparison; at most {watch.max_files} pending at once")
    counts = {}
    for r in ok:
        m = URL_RE.search(r[2])
        if m:
            counts[m["id"]] = counts.get(m["id"], 0) + 1
    t.check(set(counts) == set(written),
            f"{tag}: chunk ids written but never received: "
            f"{sorted(set(written) - set(counts))}; received but not written: "
            f"{sorted(set(counts) - set(written))}")
    twice = {i: n for i, n in counts.items() if n != 1}
    t.check(not twice, f"{tag}: chunks received more than once: {twice}")
    kept = watch.kept()
    t.check(len(kept) >= len(written) // 2, f"{tag}: only {len(kept)} of {len(written)} spool "
            "files could be kept for a byte comparison")
    seqs, ids = [], {}
    for _, method, uri, _, bodyfile in ok:
        got = check_body(t, ng.body(method, uri, bodyfile), uri,
                         os.path.join(t.work, tag + "-received"), written, kept)
        if got:
            seqs.append(got[0])
            ids[got[1]] = got[0]
    t.check(seqs == sorted(seqs), f"{tag}: seq numbers arrived out of order: {seqs}")
    s = sorted(set(seqs))
    t.check(s and s == list(range(s[0], s[0] + len(s))),
            f"{tag}: received seq numbers {s} are not consecutive")
    left = pending(spool)
    t.check(not left, f"{tag}: chunks left in the spool after the agent exited: {left}")
    t.check(not os.listdir(os.path.join(spool, "rejected")),
            f"{tag}: rejected chunks: {os.listdir(os.path.join(spool, 'rejected'))}")
    return ids


def start_agent(t, ng, tag, prefix, method):
    spool = os.path.join(t.work, tag + "-spool")
    watch = SpoolWatch(spool, os.path.join(t.work, tag + "-kept"))
    d = Daemon(t, tag, config(ng.url(prefix + URL_TAIL), spool, WINDOW,
                              extra_upload=f"  method: {method}\n"))
    d.wait_started()
    return d, watch, spool


def run(t, ng):
    hot = t.workload("fx-hot-ab", 60)
    for method, prefix in (("PUT", "/put/put/"), ("POST", "/post/post/")):
        tag = method.lower()
        d, watch, spool = start_agent(t, ng, tag, prefix, method)
        # Three windows: as three chunks received, not as 6 s of a machine's time.
        fxtest.wait_for(lambda: len(received(t, ng, prefix)) >= 3, 6 * WINDOW, 0.1)
        rc = d.stop()
        watch.stop()
        t.require(rc == 0, f"{tag}: fxagent exited {rc} after SIGINT: {d.text()[-2000:]}")
        ids = check_run(t, ng, d, watch, spool, prefix, tag)
        t.check(len(ids) >= 3, f"{tag}: only {len(ids)} chunks arrived in "
                f"{fxtest.scaled(6 * WINDOW):.0f} s of {WINDOW} s windows")
        if method == "PUT" and ids:
            # A whole window (not the first or last, partial ones) in the profiler.
            recv = os.path.join(t.work, tag + "-received")
            names = sorted(os.listdir(recv))
            path = os.path.join(recv, names[len(names) // 2])
            cli = t.cli(path, "put")
            handles = cli.handles(pid=hot.pid)
            if t.check(handles, f"profiler-cli {path}: no thread of fx-hot-ab ({hot.pid})"):
                funcs = cli.functions(handles)
                t.check("hot_a" in funcs and "hot_b" in funcs,
                        f"profiler-cli {path}: fx-hot-ab's functions {sorted(funcs)[:20]}")
            cli.stop()

    # The outage: nginx away for more than 3 windows while the agent runs.
    prefix = "/put/outage/"
    d, watch, spool = start_agent(t, ng, "outage", prefix, "PUT")
    t.require(fxtest.wait_for(lambda: received(t, ng, prefix), 3 * WINDOW + 2),
              f"outage: no chunk arrived before the outage: {d.text()[-2000:]}")
    before = len(received(t, ng, prefix))
    ng.stop()
    down = time.monotonic()
    # Down until three windows have waited in the spool (at least 3 windows'
    # time), however long a slow machine takes to write them.
    fxtest.wait_for(lambda: len(pending(spool)) >= 3, 6 * WINDOW, 0.1)
    during = len(pending(spool))
    ng.start()
    up = time.monotonic()
    t.note(f"outage: nginx down {up - down:.1f} s after {before} chunk(s); {during} chunks "
           "waited in the spool when it came back")
    t.check(during >= 3, f"outage: only {during} chunks waited in the spool after "
            f"{up - down:.1f} s without the collector ({WINDOW} s windows)")
    # Catching up: the backoff is at most 1 s.
    fxtest.wait_for(lambda: not pending(spool), 8, 0.1)
    caught = time.monotonic() - up
    t.check(not pending(spool), f"outage: the spool still holds {pending(spool)} "
            f"{caught:.1f} s after nginx came back")
    t.note(f"outage: the spool was empty {caught:.1f} s after nginx came back")
    time.sleep(0.5)
    rc = d.stop()
    watch.stop()
    t.require(rc == 0, f"outage: fxagent exited {rc} after SIGINT: {d.text()[-2000:]}")
    ids = check_run(t, ng, d, watch, spool, prefix, "outage")
    # Those before, those that waited, and at least the last (partial) window.
    t.check(len(ids) >= before + during + 1, f"outage: only {len(ids)} chunks arrived, "
            f"{before} before the outage and {during} waited in the spool")
    text = d.text()
    t.check("cannot upload chunk" in text and ", retrying" in text,
            f"outage: the agent's log does not say the upload failed: {text[-2000:]}")
    t.check("answers again" in text,
            f"outage: the agent's log does not say the collector answers again")


fxtest.main(body)

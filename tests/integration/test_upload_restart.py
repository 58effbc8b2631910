# SPDX-License-Identifier: MIT
"""Chunks pending in the spool survive the agent's death.

1. The agent runs (whole system, busy fx-hot-ab, 1 s windows) with its collector
   down (a closed port) and is SIGKILLed while several chunks wait in the spool.
2. It is started again on the same spool with the collector (fault_server.py) up:
   the old chunks are uploaded first, oldest first, each once, byte-identical to
   the files that waited, and valid profiles; then the new run's own chunks; the
   spool ends empty.
"""

import os
import signal
import time

import fxtest
from fxdaemon import Daemon
from fxupload import (SPOOL_RE, SpoolWatch, URL_RE, URL_TAIL, check_body, config,
                      fault_server, free_port, pending, wrote)


def body(t):
    with fault_server.Spawned(["--max-seconds", "170"]) as srv:
        try:
            run(t, srv)
        finally:
            t.kill_processes()


def run(t, srv):
    t.workload("fx-hot-ab", 60)
    spool = os.path.join(t.work, "spool")
    watch = SpoolWatch(spool, os.path.join(t.work, "kept"))
    d = Daemon(t, "down", config(f"http://127.0.0.1:{free_port()}/ok/" + URL_TAIL, spool, 1))
    d.wait_started()
    deadline = time.monotonic() + fxtest.scaled(10)
    while time.monotonic() < deadline and len(pending(spool)) < 3:
        time.sleep(0.05)
    d.p.send_signal(signal.SIGKILL)
    d.p.wait()
    old = {SPOOL_RE.match(n)["id"]: n for n in pending(spool)}
    t.note(f"killed with {len(old)} chunks pending: {sorted(old.values())}")
    t.require(len(old) >= 3, f"only {len(old)} chunks waited in the spool: {d.text()[-2000:]}")
    t.check(set(old) <= set(wrote(d.text())),
            "chunks in the spool that the killed agent's log does not name")

    d2 = Daemon(t, "up", config(srv.url("/ok/" + URL_TAIL), spool, 1))
    d2.wait_started()
    deadline = time.monotonic() + fxtest.scaled(10)
    while time.monotonic() < deadline and set(old) & {SPOOL_RE.match(n)["id"]
                                                      for n in pending(spool)}:
        time.sleep(0.1)
    # A chunk of the new run uploaded too, however long a loaded machine
    # takes to write and send it (was a fixed 1.2 s).
    def new_sent():
        sent = {URL_RE.search(e["path"])["id"] for e in srv.log() if URL_RE.search(e["path"])}
        return set(wrote(d2.text())) & sent
    t.check(fxtest.wait_for(new_sent, 10, 0.1), "no chunk of the new run uploaded within "
            f"{fxtest.scaled(10):.0f} s")
    rc = d2.stop()
    watch.stop()
    t.require(rc == 0, f"fxagent exited {rc} after SIGINT: {d2.text()[-2000:]}")
    log = [e for e in srv.log() if URL_RE.search(e["path"])]
    ids = [URL_RE.search(e["path"])["id"] for e in log]
    new = wrote(d2.text())
    t.note(f"after the restart: {len(log)} requests, statuses "
           f"{sorted({e['status'] for e in log})}; the new run wrote {len(new)} chunks")
    t.check(all(e["status"] == 200 for e in log), "a request failed")
    missing = sorted(set(old) - set(ids))
    t.check(not missing, f"old chunks never uploaded: {[old[i] for i in missing]}")
    t.check(set(new) <= set(ids), f"new chunks never uploaded: {sorted(set(new) - set(ids))}")
    twice = sorted(i for i in set(ids) if ids.count(i) > 1)
    t.check(not twice, f"chunks uploaded more than once: {twice}")
    # Oldest first: the old chunks before any new one, in seq order.
    want = sorted(old, key=lambda i: int(SPOOL_RE.match(old[i])["seq"]))
    t.check(ids[:len(old)] == want, f"upload order {ids[:len(old)]}, want the old chunks by "
            f"seq {want}")
    kept = watch.kept()
    for e in log:
        check_body(t, srv.body(e["n"]), e["path"], os.path.join(t.work, "received"),
                   kept=kept)
    t.check(not pending(spool), f"left in the spool: {pending(spool)}")


fxtest.main(body)

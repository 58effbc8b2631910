# SPDX-License-Identifier: MIT
"""The uploader against a collector that misbehaves (tests/tools/fault_server.py).

Each request carries the server's own times (CLOCK_MONOTONIC): when it was
received and when its answer went out, so a slow machine's scheduling of the
test itself enters no gap. `fxagent --once --config FILE` (fx-hot-ab only, 1 s)
sends one snapshot through the spool; the daemon runs where more chunks matter.
1. fail-then-ok:2: the chunk arrives on the third try (500, 500, 200), the same
   bytes each time, and the spool ends empty.
2. 429 with Retry-After: 2 (timeout 1 s): the next try comes >= 2 s later,
   though the backoff alone would be 200 ms; the chunk stays in the spool.
3. 400, daemon with 1 s windows: every chunk is tried exactly once, ends in
   spool/rejected/, and the log names the refusal.
4. hang with a 1 s timeout: the request is given up after ~1 s and tried again.
5. bearer token file and a configured header (-vv, debug): Authorization: Bearer
   <token>, X-Team and the X-Fxagent-* headers arrive and agree with the chunk;
   the token appears nowhere in the agent's output.
6. spool limit: collector down (a closed port), 10000 Hz whole-system samples in
   1 s windows, spool.max_bytes 1 MiB: the spool never holds more than the
   limit, the agent logs dropped chunks, and the ones left are the newest.
"""

import os
import re
import secrets

import fxtest
from fxdaemon import Daemon
from fxupload import (DROPPED_RE, SPOOL_RE, SpoolWatch, URL_RE, URL_TAIL, check_body, config,
                      fault_server, free_port, pending, wrote)

MIB = 1 << 20


def requests(srv, prefix):
    """The server's log entries of the requests whose path starts with prefix."""
    return [e for e in srv.log() if e["path"].startswith(prefix)]


def body(t):
    # The server ends itself before ctest's timeout (180 s, scaled).
    with fault_server.Spawned(["--max-seconds", str(int(fxtest.scaled(170)))]) as srv:
        try:
            run(t, srv)
        finally:
            t.kill_processes()


def once(t, srv, hot, tag, mode, timeout="3s", extra_upload="", args=()):
    """One `fxagent --once` snapshot of fx-hot-ab uploaded to /MODE/TAG/...;
    returns (CompletedProcess, spool dir, SpoolWatch, url prefix)."""
    spool = os.path.join(t.work, tag + "-spool")
    prefix = f"/{mode}/{tag}/"
    path = os.path.join(t.work, tag + ".yaml")
    with open(path, "w") as f:
        f.write(config(srv.url(prefix + URL_TAIL), spool, 1, extra_upload, timeout=timeout))
    watch = SpoolWatch(spool, os.path.join(t.work, tag + "-kept"))
    p = t.run_agent("--once", "--config", path, "--duration", "1s", "--pid", hot.pid, *args)
    watch.stop()
    t.save(tag + ".agent.log", p.stdout + p.stderr)
    return p, spool, watch, prefix


def run(t, srv):
    hot = t.workload("fx-hot-ab", 60)

    # 1. Two 500s, then 200.
    p, spool, watch, prefix = once(t, srv, hot, "fail2", "fail-then-ok:2")
    got = requests(srv, prefix)
    t.note(f"fail-then-ok:2: statuses {[e['status'] for e in got]} at "
           f"{[round(e['received'] - got[0]['received'], 2) for e in got]} s; exit "
           f"{p.returncode}")
    t.check(p.returncode == 0, f"fail-then-ok:2: fxagent --once exited {p.returncode}: "
            f"{p.stderr[-2000:]}")
    t.check([e["status"] for e in got] == [500, 500, 200],
            f"fail-then-ok:2: statuses {[e['status'] for e in got]}, want [500, 500, 200]")
    t.check(len({e["body_sha256"] for e in got}) == 1,
            "fail-then-ok:2: the tries sent different bodies")
    t.check(not pending(spool), f"fail-then-ok:2: left in the spool: {pending(spool)}")
    # What the user reads says where it went, not a count taken before it was sent.
    t.check(re.search(r"uploaded to http://\S+: \d+ samples", p.stderr) and
            "pending" not in p.stderr,
            f"fail-then-ok:2: the output does not say the profile was uploaded: "
            f"{p.stderr[-600:]!r}")
    kept = watch.kept()
    if got and got[-1]["status"] == 200:
        data = srv.body(got[-1]["n"])
        check_body(t, data, got[-1]["path"], os.path.join(t.work, "fail2-received"),
                   kept=kept, daemon=False)
        t.check(len(kept) == 1, f"fail-then-ok:2: {len(kept)} spool files seen, want 1")

    # 2. 429 with Retry-After: 2; the backoff alone would be 200 ms.
    p, spool, watch, prefix = once(t, srv, hot, "r429", "429:2", timeout="1s")
    got = requests(srv, prefix)
    # From the 429's answer to the next request: the agent had the answer no
    # sooner than the server wrote it, and the server reads the retry no sooner
    # than it came, so the gap is exact to the clock's resolution.
    gaps = [b["received"] - a["answered"] for a, b in zip(got, got[1:])]
    t.note(f"429:2: {len(got)} requests, answer-to-retry gaps {[round(g, 3) for g in gaps]} s; "
           f"exit {p.returncode}; left in the spool: {pending(spool)}")
    t.check(len(got) >= 2, f"429:2: {len(got)} requests in the 3 s --once waits, want a retry")
    # Only the first gap: when --once gives up waiting, the shipper's last round
    # on stop tries once more at once.
    t.check(gaps and gaps[0] >= 2.0 - 1e-3, f"429:2: the retry came before Retry-After's 2 s: "
            f"gaps {gaps}")
    t.check(len(pending(spool)) == 1, f"429:2: the chunk should still wait in the spool: "
            f"{pending(spool)}")
    t.check(p.returncode != 0 and "waits in" in p.stderr,
            f"429:2: --once exited {p.returncode} without saying the chunk waits in the "
            f"spool: {p.stderr[-1000:]}")

    # 3. 400, daemon: rejected once, kept in rejected/, never tried again.
    spool = os.path.join(t.work, "r400-spool")
    prefix = "/400/r400/"
    d = Daemon(t, "r400", config(srv.url(prefix + URL_TAIL), spool, 1))
    d.wait_started()
    # Three windows written, however long a slow machine takes for them.
    fxtest.wait_for(lambda: len(wrote(d.text())) >= 3, 6, 0.1)
    rc = d.stop()
    t.check(rc == 0, f"400: fxagent exited {rc} after SIGINT")
    written = wrote(d.text())
    # The server has logged every request the agent made before it exited.
    fxtest.wait_for(lambda: len(requests(srv, prefix)) >= len(written), 2, 0.1)
    got = requests(srv, prefix)
    ids = [e["headers"].get("x-fxagent-chunk-id") for e in got]
    rejected = sorted(os.listdir(os.path.join(spool, "rejected")))
    rej_ids = [SPOOL_RE.match(n)["id"] for n in rejected if SPOOL_RE.match(n)]
    t.note(f"400: {len(written)} chunks written, {len(got)} requests, {len(rejected)} in "
           "rejected/")
    t.check(len(written) >= 3, f"400: only {len(written)} chunks in "
            f"{fxtest.scaled(6):.0f} s of 1 s windows")
    t.check(sorted(ids) == sorted(written), f"400: requests per chunk {sorted(ids)}, want "
            f"each of {sorted(written)} once")
    t.check(sorted(rej_ids) == sorted(written), f"400: rejected/ holds {rejected}, want every "
            f"written chunk {sorted(written)}")
    t.check(not pending(spool), f"400: still pending: {pending(spool)}")
    t.check(re.search(r"refused chunk [0-9a-f]{32}.*HTTP 400.*bad chunk", d.text()),
            f"400: the log does not name the refusal with the server's answer: "
            f"{d.text()[-1500:]}")

    # 4. A collector that never answers: given up after the 1 s timeout, tried again.
    p, spool, watch, prefix = once(t, srv, hot, "hang", "hang", timeout="1s")
    got = requests(srv, prefix)
    gaps = [b["received"] - a["received"] for a, b in zip(got, got[1:])]
    t.note(f"hang: {len(got)} requests, gaps {[round(g, 2) for g in gaps]} s; exit "
           f"{p.returncode}")
    t.check(len(got) >= 2, f"hang: {len(got)} requests, want a retry after the timeout")
    t.check(gaps and 0.95 <= gaps[0] <= 2.5,
            f"hang: the retry came {gaps[:1]} s after the first try; want the 1 s timeout "
            "plus a backoff of at most 1 s")
    t.check(re.search(r"[Tt]ime(d )?out", p.stderr),
            f"hang: the log does not say the upload timed out: {p.stderr[-1500:]}")
    t.check(len(pending(spool)) == 1, f"hang: the chunk should still wait in the spool: "
            f"{pending(spool)}")

    # 5. Bearer token and headers; the token is never printed.
    token = "fxtok-" + secrets.token_hex(16)
    tokfile = os.path.join(t.work, "token")
    with open(tokfile, "w") as f:
        f.write(token + "\n")
    os.chmod(tokfile, 0o600)
    p, spool, watch, prefix = once(
        t, srv, hot, "auth", "ok", args=("-vv",),
        extra_upload=f"  bearer_token_file: {tokfile}\n  headers: {{X-Team: perf}}\n")
    got = requests(srv, prefix)
    t.check(p.returncode == 0, f"auth: fxagent --once exited {p.returncode}: "
            f"{p.stderr[-2000:]}")
    t.require(len(got) == 1, f"auth: {len(got)} requests, want 1")
    t.note(f"auth: headers {sorted(got[0]['headers'])}; {len(p.stderr)} bytes of "
           "-vv output without the token")
    e = got[0]
    h = e["headers"]
    t.check(h.get("authorization") == "Bearer " + token,
            f"auth: Authorization header {h.get('authorization')!r}")
    t.check(h.get("x-team") == "perf", f"auth: X-Team header {h.get('x-team')!r}")
    t.check(e["method"] == "POST", f"auth: method {e['method']} (POST is the default)")
    t.check(h.get("content-type") == "application/json" and
            h.get("content-encoding") == "gzip",
            f"auth: Content-Type {h.get('content-type')!r}, Content-Encoding "
            f"{h.get('content-encoding')!r}")
    t.check(token not in p.stdout + p.stderr, "auth: the token appears in the agent's output")
    t.check(len(p.stderr) > 200, f"auth: -vv printed almost nothing: {p.stderr!r}")
    data = srv.body(e["n"])
    got_body = check_body(t, data, e["path"], os.path.join(t.work, "auth-received"),
                          kept=watch.kept(), daemon=False)
    m = URL_RE.search(e["path"])
    if got_body and m:
        want = {"x-fxagent-host": os.uname().nodename, "x-fxagent-target": m["target"],
                "x-fxagent-seq": m["seq"], "x-fxagent-chunk-id": m["id"],
                "x-fxagent-window-start": m["start"]}
        bad = {k: (h.get(k), v) for k, v in want.items() if h.get(k) != v}
        t.check(not bad, f"auth: X-Fxagent headers (got, want): {bad}")

    # 6. The spool's bound while the collector is down.
    spool = os.path.join(t.work, "limit-spool")
    watch = SpoolWatch(spool, os.path.join(t.work, "limit-kept"))
    threads = t.workload("fx-threads", 600)  # ended with the test
    d = Daemon(t, "limit", config(f"http://127.0.0.1:{free_port()}/ok/" + URL_TAIL, spool, 1,
                                  extra="  max_bytes: 1MiB\nsampling:\n  frequency: 10000\n"))
    d.wait_started()
    # Until the first drop, while the spool keeps growing: a sanitizer build
    # writes smaller chunks (it loses more of the 10000 Hz samples), and half a
    # CPU gives fx-threads fewer samples to fill 1 MiB with.
    def to_go():
        if re.search(r"[1-9]\d* dropped", d.text()):
            return 0
        size = 0
        for n in pending(spool):
            try:
                size += os.path.getsize(os.path.join(spool, n))
            except OSError:
                pass  # dropped meanwhile
        return max(1, (1 << 20) + 1 - size)

    t.require(not fxtest.wait_drained(to_go, 20),
              f"limit: no chunk dropped, and the spool stopped growing for 20 s: "
              f"{d.text()[-1500:]}")
    # A chunk more after the first drop.
    n = len(wrote(d.text()))
    fxtest.wait_for(lambda: len(wrote(d.text())) > n, 3, 0.1)
    rc = d.stop()
    watch.stop()
    threads.kill()
    t.check(rc == 0, f"limit: fxagent exited {rc} after SIGINT")
    text = d.text()
    written = wrote(text)
    reported = [int(m["n"]) for m in DROPPED_RE.finditer(text)]
    pend = [int(x) for x in re.findall(r"pending \((\d+) bytes\)", text)]
    left = pending(spool)
    size = sum(os.path.getsize(os.path.join(spool, n)) for n in left)
    biggest = max((b for _, b in written.values()), default=0)
    t.note(f"limit: {len(written)} chunks written (largest {biggest} bytes), dropped counts "
           f"logged {reported}, pending bytes logged {pend}; at most {watch.max_bytes} bytes "
           f"in the spool at any instant; {len(left)} chunks ({size} bytes) left")
    t.check(reported and max(reported) > 0, f"limit: the log never says chunks were dropped: "
            f"{text[-2000:]}")
    t.check(pend and max(pend) <= MIB, f"limit: the agent logged {max(pend or [0])} pending "
            f"bytes, over the 1 MiB limit")
    t.check(size <= MIB, f"limit: {size} bytes left in the spool, over 1 MiB")
    # A chunk is moved in only after the oldest made room for it.
    t.check(watch.max_bytes <= MIB,
            f"limit: {watch.max_bytes} bytes in the spool at once, over 1 MiB")
    seqs = sorted(int(SPOOL_RE.match(n)["seq"]) for n in left)
    # A chunk bigger than the whole bound (a window kept open while the
    # writer was behind, at 10000 Hz) is never kept, and the log says so.
    all_seqs = sorted(int(SPOOL_RE.match(n)["seq"]) for n, b in written.values() if b <= MIB)
    t.check(seqs and seqs == all_seqs[-len(seqs):],
            f"limit: the chunks left {seqs} are not the newest of those that fit, {all_seqs}")
    for n, b in written.values():
        if b > MIB:
            t.check(f"({b} bytes) from the spool, each larger than" in text,
                    f"limit: {n} ({b} bytes, over the bound) was dropped without a word")


fxtest.main(body)

# SPDX-License-Identifier: MIT
"""What the agent sends, keeps and reads back from its own directories, tried as
an attacker and a careless administrator would.

1. A pending chunk swapped for a symlink to a 0600 secret, another for a hard
   link to it, and a garbage file and a zero-byte file under chunk names, all
   while the collector (real nginx, PUT) is down; then nginx comes back: the
   secret's bytes never arrive, the real chunks all do, and each refused file
   is in spool/rejected/ (the symlink as a symlink, the secret untouched) with
   one log line saying why.
2. A collector that accepts and never answers, upload.timeout 3 s: SIGTERM at
   three random moments, each time the agent exits within timeout + 1 s, no
   request starts after the SIGTERM, and the unsent chunks stay in the spool.
3. Output-directory mode: the temporaries of writes that a SIGKILL cut short
   are removed at start; a symlink with such a name and an unrelated file are
   left alone. A real SIGKILL mid-run leaves nothing the next start keeps.
4. A collector that answers 200 with a 1 GiB body: the chunk counts as sent,
   and the agent reads a few KiB of the answer, not the gigabyte.
5. A spool directory others can write (0777) is refused at start with its mode,
   owner and the chmod that fixes it.
"""

import os
import random
import secrets
import signal
import stat
import time

import fxtest
from fxdaemon import Daemon
from fxupload import Nginx, SPOOL_RE, URL_TAIL, config, fault_server, pending

WINDOW = 1


def wait_pending(t, spool, n, timeout):
    ok = fxtest.wait_for(lambda: len(pending(spool)) >= n, fxtest.scaled(timeout))
    t.require(ok, f"{spool}: {len(pending(spool))} chunks pending, want {n}")
    return pending(spool)


def swapped_spool(t):
    """1: symlink, hard link, garbage and empty files in place of chunks."""
    ng = Nginx(t, "nginx")
    url = ng.url("/put/swap/" + URL_TAIL)
    ng.stop()  # the collector is down: chunks wait
    spool = os.path.join(t.work, "swap-spool")
    marker = "FXSECRET-" + secrets.token_hex(16)
    secret = os.path.join(t.work, "shadow")
    with open(secret, "w") as f:
        f.write(marker + "\n")
    os.chmod(secret, 0o600)

    d = Daemon(t, "swap", config(url, spool, WINDOW, extra_upload="  method: PUT\n"))
    d.wait_started()
    names = wait_pending(t, spool, 7, 30)
    # Four of the chunks replaced (not the newest: it may still be moving in).
    victims = names[:4]
    kinds = ["symlink", "hardlink", "garbage", "empty"]
    for name, kind in zip(victims, kinds):
        path = os.path.join(spool, name)
        os.unlink(path)
        if kind == "symlink":
            os.symlink(secret, path)
        elif kind == "hardlink":
            os.link(secret, path)
        elif kind == "garbage":
            with open(path, "wb") as f:
                f.write(b"\x1f\x8b\x08garbage, not deflate " + marker.encode())
        else:
            open(path, "wb").close()
    kept = set(names[4:])
    t.note(f"swapped {dict(zip(kinds, victims))}; {len(kept)} real chunks pending")

    ng.start()
    rej = os.path.join(spool, "rejected")
    ok = fxtest.wait_for(lambda: all(os.path.lexists(os.path.join(rej, v)) for v in victims)
                         and not (kept & set(pending(spool))), fxtest.scaled(30))
    rc = d.stop(signal.SIGTERM)
    ng.stop()
    log = d.text()
    t.save("swap.agent.log", log)
    t.check(rc == 0, f"swap: the agent exited {rc}")
    t.check(ok, f"swap: after 30 s, rejected/ holds {sorted(os.listdir(rej))}, pending "
            f"{pending(spool)}")

    # What nginx stored: every real chunk, never the secret.
    stored = {}
    for root, _, files in os.walk(os.path.join(ng.root, "put", "swap")):
        for n in files:
            with open(os.path.join(root, n), "rb") as f:
                stored[n] = f.read()
    leaks = [n for n, b in stored.items() if marker.encode() in b]
    t.check(not leaks, f"swap: the secret's content arrived at the collector as {leaks}")
    t.check(stored, "swap: nothing arrived at the collector after it came back")
    ids = {SPOOL_RE.match(n)["id"] for n in kept}
    got = {n.split("-")[-1].split(".")[0] for n in stored}
    t.check(ids <= got, f"swap: real chunks {sorted(ids - got)} did not arrive")
    for v in victims:
        t.check(v.split("-")[3] not in got, f"swap: the swapped file {v} was sent")

    # Each refused file moved aside as it was; the secret untouched.
    lk = os.path.join(rej, victims[0])
    t.check(os.path.islink(lk) and os.readlink(lk) == secret,
            f"swap: the symlink is not in rejected/ as a symlink to {secret}")
    with open(secret) as f:
        t.check(f.read() == marker + "\n", "swap: the secret's content changed")
    t.check(stat.S_IMODE(os.stat(secret).st_mode) == 0o600, "swap: the secret's mode changed")
    why = {"symlink": "is a symlink", "hardlink": "hard links", "garbage": "corrupt gzip",
           "empty": "empty"}
    for name, kind in zip(victims, kinds):
        lines = [ln for ln in log.splitlines() if name in ln and "rejected/" in ln]
        t.check(len(lines) == 1 and why[kind] in lines[0],
                f"swap: {kind}: want one log line saying '{why[kind]}', got {lines}")
    t.check(marker not in log, "swap: the secret's content is in the agent's log")


def hanging_stop(t):
    """2: SIGTERM while the collector hangs, three times."""
    timeout = 3.0
    bound = timeout + 1.0
    # A sanitizer build writes its last window slower; the bound on the
    # network part stays the same.
    slack = (fxtest.TIME_SCALE - 1) * 1.0
    with fault_server.Spawned(["--max-seconds", str(int(fxtest.scaled(170))),
                               "--default", "hang"]) as srv:
        for k in range(3):
            spool = os.path.join(t.work, f"hang{k}-spool")
            d = Daemon(t, f"hang{k}", config(srv.url(f"/hang/{k}/" + URL_TAIL), spool, WINDOW,
                                             timeout=f"{int(timeout)}s"))
            d.wait_started()
            started = time.monotonic()

            def tries():
                return len([e for e in srv.log() if e["path"].startswith(f"/hang/{k}/")])

            # Somewhere in the first or second try, or the backoff between:
            # after the first try began (on a loaded machine the first chunk
            # can take a while), so that the agent knows the collector hangs.
            t.require(fxtest.wait_for(tries, 20), f"hang {k}: no upload try in 20 s")
            time.sleep(random.uniform(0.2, timeout + 1))
            wait = time.monotonic() - started
            before = tries()
            t0 = time.monotonic()
            d.p.send_signal(signal.SIGTERM)
            try:
                rc = d.p.wait(timeout=bound + slack + 30)
            except Exception:
                d.p.kill()
                rc = None
            took = time.monotonic() - t0
            after = tries()
            t.save(f"hang{k}.agent.log", d.text())
            t.note(f"hang {k}: SIGTERM {wait:.2f} s after start, {before} requests before, "
                   f"exit {rc} after {took:.2f} s (bound {bound:.1f} s), {after - before} "
                   f"requests after, {len(pending(spool))} chunks left in the spool")
            t.check(rc == 0, f"hang {k}: exit {rc}")
            t.check(took <= bound + slack, f"hang {k}: {took:.2f} s from SIGTERM to exit, "
                    f"more than upload.timeout + 1 s = {bound:.1f} s")
            t.check(after == before, f"hang {k}: {after - before} requests started after "
                    "the SIGTERM")
            t.check(pending(spool), f"hang {k}: the unsent chunks are not in the spool")


def output_temps(t):
    """3: cut-short writes of an earlier run are removed from output.directory."""
    d = Daemon(t, "temps", f"window:\n  seconds: {WINDOW}\nlog:\n  level: info\n")
    d.wait_started()
    fxtest.wait_for(lambda: d.chunks(running=True), fxtest.scaled(10))
    d.p.send_signal(signal.SIGKILL)
    d.p.wait()
    out = d.out
    stale = ["all-20261125T101010Z-000007.json.gz.tmpAb3dE9",
             "web-20261125T101011Z-000008.json.gz.tmpZZZZZZ"]
    for n in stale:
        with open(os.path.join(out, n), "wb") as f:
            f.write(b"\x1f\x8b\x08cut short")
    outside = os.path.join(t.work, "outside.json.gz.tmpQWERTY")
    with open(outside, "w") as f:
        f.write("not the agent's")
    link = "all-20261125T101012Z-000009.json.gz.tmpLnk123"
    os.symlink(outside, os.path.join(out, link))
    with open(os.path.join(out, "notes.txt"), "w") as f:
        f.write("someone's notes")
    before = set(os.listdir(out))

    d2 = Daemon(t, "temps2", f"window:\n  seconds: {WINDOW}\nlog:\n  level: info\n",
                "--output-dir", out)
    d2.wait_started()
    left = set(os.listdir(out))
    rc = d2.stop(signal.SIGTERM)
    t.save("temps2.agent.log", d2.text())
    t.note(f"output temps: before the start {sorted(before)}; after {sorted(left)}")
    t.check(rc == 0, f"temps: the second agent exited {rc}")
    for n in stale:
        t.check(n not in left, f"temps: {n} is still in output.directory after a start")
    leftover = [n for n in left if ".json.gz.tmp" in n and n != link and n in before]
    t.check(not leftover, f"temps: temporaries of the killed run left: {leftover}")
    t.check(link in left and os.path.exists(outside), "temps: a symlink named like a "
            "temporary was removed, or what it points to")
    t.check("notes.txt" in left, "temps: an unrelated file was removed")
    t.check("removed" in d2.text() and "temporary files" in d2.text(),
            "temps: the log does not say temporaries were removed")


def big_answer(t):
    """4: a 1 GiB answer is not read."""
    size = 1 << 30
    with fault_server.Spawned(["--max-seconds", str(int(fxtest.scaled(120)))]) as srv:
        spool = os.path.join(t.work, "big-spool")
        d = Daemon(t, "big", config(srv.url(f"/big:{size}/x/" + URL_TAIL), spool, WINDOW,
                                    timeout="20s"))
        d.wait_started()
        ok = fxtest.wait_for(lambda: [e for e in srv.log() if e.get("status") == 200],
                             fxtest.scaled(20))
        time.sleep(1)
        rss = fxtest.rss_and_fds(d.p.pid)[0]
        rc = d.stop(signal.SIGTERM)
        log = srv.log()
        t.save("big.agent.log", d.text())
        sent = [e.get("sent", 0) for e in log]
        t.note(f"big answer: {len(log)} requests, bytes the server could write to the agent "
               f"{sent}, agent RSS {rss / 1024:.1f} MiB")
        t.check(ok and rc == 0, f"big: no request answered, or exit {rc}")
        t.check(sent and max(sent) < 64 << 20, f"big: the server wrote {max(sent or [0])} "
                "bytes of its 1 GiB answer before the agent stopped reading; want a few KiB "
                "(and the socket buffers)")
        t.check("cannot upload chunk" not in d.text(), "big: a 200 with a long body counted as "
                "a failure")


def open_spool(t):
    """5: a spool directory others can write is refused at start."""
    spool = os.path.join(t.work, "open-spool")
    os.makedirs(spool)
    os.chmod(spool, 0o777)
    d = Daemon(t, "open", config("http://127.0.0.1:9/{id}", spool, WINDOW))
    try:
        rc = d.p.wait(timeout=fxtest.scaled(10))
    except Exception:
        rc = None
    text = d.text()
    t.note(f"open spool: exit {rc}: {text.strip()[-300:]}")
    t.check(rc not in (0, None), f"open spool: the agent started with a 0777 spool (exit {rc})")
    t.check(spool in text and "0777" in text and "chmod go-w" in text,
            f"open spool: the message does not name the directory, its mode and the fix: "
            f"{text[-500:]}")


def body(t):
    try:
        swapped_spool(t)
        hanging_stop(t)
        output_temps(t)
        big_answer(t)
        open_spool(t)
    finally:
        t.kill_processes()


if __name__ == "__main__":
    fxtest.main(body)

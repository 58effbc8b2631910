# SPDX-License-Identifier: MIT
"""Names from a real debuginfod server, on the host and at view time.

The test runs itself in a private network namespace (`unshare -n`, loopback
up): elfutils' `debuginfod` listens on every address and has no option to
choose one, so nothing it serves leaves the namespace, and the agent and the
view it starts talk to it on 127.0.0.1.

Made in the test: fx-inline (inline_helper always inlined into inline_caller,
built -O2 -g) split with `objcopy --only-keep-debug` and `strip --strip-all`;
the server indexes the debug file only. fx-hot-ab stripped, its debug file
served nowhere.

- `--once` on the stripped fx-inline with symbolization.debuginfod_urls: the
  leaf is inline_helper (inline depth 1) under inline_caller, the library's
  symbol status is "debuginfod" and its debugPath the cached file;
- the same without debuginfod (debuginfod_urls: []): the leaf is unnamed,
  "fx-inline-stripped+0x<start>", status "stripped"; `fxagent view
  --debuginfod URL` and `--debug-dir DIR` name that chunk, inline frames
  included, and say how many frames they named;
- the daemon with 2 s windows and the metrics file: hits, bytes and a miss
  (fx-hot-ab's debug file) counted;
- a server that accepts connections and never answers, and one that is
  stopped (connection refused): every window's chunk is written, none later
  than its end + the budget + 3 s, and the failures are counted as errors.
"""

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request

import fxdaemon
import fxtest

PORT = 8002


def enter_netns():
    """Run this file again in a private network namespace with loopback up."""
    if os.environ.get("FX_IN_NETNS") == "1":
        subprocess.run(["ip", "link", "set", "lo", "up"], check=True)
        return
    env = dict(os.environ, FX_IN_NETNS="1")
    os.execvpe("unshare", ["unshare", "-n", "--", sys.executable, *sys.argv], env)


def build(t):
    """(stripped fx-inline, its debug file's dir, stripped fx-hot-ab, build-id)."""
    src = os.path.join(t.workloads, "fx-inline")
    srv = os.path.join(t.work, "served")
    os.makedirs(srv)
    inl = os.path.join(t.work, "fx-inline-stripped")
    dbg = os.path.join(srv, "fx-inline.debug")
    hot = os.path.join(t.work, "fx-hot-ab-stripped")
    for cmd in (["objcopy", "--only-keep-debug", src, dbg],
                ["strip", "--strip-all", "-o", inl, src],
                ["strip", "--strip-all", "-o", hot, os.path.join(t.workloads, "fx-hot-ab")]):
        r = subprocess.run(cmd, capture_output=True, text=True)
        t.require(r.returncode == 0, f"{' '.join(cmd)}: {r.stderr}")
    out = subprocess.run(["readelf", "-n", inl], capture_output=True, text=True).stdout
    bid = [line.split()[-1] for line in out.splitlines() if "Build ID" in line]
    t.require(bid, f"no build-id in {inl}")
    return inl, srv, hot, bid[0]


def start_server(t, srv, bid):
    db = os.path.join(t.work, "debuginfod.sqlite")
    log = open(os.path.join(t.work, "debuginfod.log"), "w")
    p = t.spawn(["debuginfod", "-F", srv, "-p", str(PORT), "-d", db], stdout=log,
                stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{PORT}/buildid/{bid}/debuginfo"

    def served():
        try:
            with urllib.request.urlopen(url, timeout=2) as r:
                return r.status == 200
        except OSError:
            return False
    t.require(fxtest.wait_for(served, fxtest.scaled(30), 0.2),
              f"debuginfod did not serve {url} within 30 s; see debuginfod.log")
    return p


def leaf_chains(prof, pid):
    """Counter-like {(caller names..., leaf): weight} of the last two names."""
    out = {}
    for th in prof.threads_of(pid):
        for st, w in prof.samples(th):
            names = prof.user_names(st)
            key = tuple(names[-2:])
            out[key] = out.get(key, 0) + w
    return out


def inline_share(prof, pid):
    chains = leaf_chains(prof, pid)
    total = sum(chains.values())
    return 100.0 * chains.get(("inline_caller", "inline_helper"), 0) / max(1, total), chains


def lib_of(prof, name):
    return [lib for lib in prof.data["libs"] if lib["name"] == name]


def check_once(t, inl, url):
    cfg = os.path.join(t.work, "once.yaml")
    cache = os.path.join(t.work, "cache-once")
    with open(cfg, "w") as f:
        f.write(f"symbolization:\n  debuginfod_urls: [\"{url}\"]\n"
                f"  debuginfod_cache: {cache}\n")
    w = t.spawn([inl, "20"])
    time.sleep(0.3)
    prof = t.record("named", 3, pids=(w.pid,), extra=("--config", cfg))
    share, chains = inline_share(prof, w.pid)
    t.note(f"with debuginfod: inline_helper under inline_caller {share:.1f}%; {chains}")
    t.check(share >= 60, f"inline_helper under inline_caller: {share:.1f}% of samples, want "
            f">= 60 (the workload spends ~95% there): {chains}")
    sym = prof.data["meta"].get("fxagent", {}).get("symbols", {})
    t.check(sym.get("fx-inline-stripped") == "debuginfod",
            f"meta.fxagent.symbols: {sym}")
    libs = lib_of(prof, "fx-inline-stripped")
    t.check(libs and libs[0]["debugPath"].startswith(cache),
            f"debugPath of fx-inline-stripped not in {cache}: {libs}")
    extra = [g for g in prof.data["meta"].get("extra", []) if g.get("label") == "Symbols"]
    t.check(extra and any(e["label"] == "fx-inline-stripped" and e["value"] == "debuginfod"
                          for e in extra[0]["entries"]),
            f"no Symbols entry for fx-inline-stripped under Profile Information: {extra}")
    w.kill()


def check_view(t, inl, srv, bid, url):
    cfg = os.path.join(t.work, "none.yaml")
    with open(cfg, "w") as f:
        f.write("symbolization:\n  debuginfod_urls: []\n")
    w = t.spawn([inl, "20"])
    time.sleep(0.3)
    prof = t.record("unnamed", 3, pids=(w.pid,), extra=("--config", cfg))
    chains = leaf_chains(prof, w.pid)
    unnamed = sum(v for k, v in chains.items()
                  if k and k[-1].startswith("fx-inline-stripped+0x"))
    total = sum(chains.values())
    t.note(f"without: {chains}")
    t.check(unnamed >= 0.6 * total, f"without debug info, only {unnamed} of {total} leaves "
            "are fx-inline-stripped+0x...")
    sym = prof.data["meta"].get("fxagent", {}).get("symbols", {})
    t.check(sym.get("fx-inline-stripped") == "stripped", f"meta.fxagent.symbols: {sym}")
    w.kill()

    # The debug dir laid out as /usr/lib/debug/.build-id.
    dd = os.path.join(t.work, "debug-dir", ".build-id", bid[:2])
    os.makedirs(dd)
    os.link(os.path.join(srv, "fx-inline.debug"), os.path.join(dd, bid[2:] + ".debug"))
    env = dict(os.environ, DEBUGINFOD_CACHE_PATH=os.path.join(t.work, "cache-view"))
    for how, args in (("debuginfod", ["--debuginfod", url]),
                      ("debug-dir", ["--debug-dir", os.path.join(t.work, "debug-dir")])):
        out = os.path.join(t.work, f"view-{how}.json.gz")
        cmd = [t.agent, "view", prof.path, "-o", out, "--json", *args]
        t.note("+ " + " ".join(cmd))
        r = subprocess.run(cmd, capture_output=True, text=True, env=env,
                           timeout=fxtest.scaled(120))
        t.save(f"view-{how}.log", r.stderr)
        t.require(r.returncode == 0, f"view {how} exited {r.returncode}: {r.stderr[-2000:]}")
        summary = json.loads(r.stdout)
        t.check(summary["frames_named"] >= 1 and
                summary["frames_named"] == summary["frames_unnamed"],
                f"view {how}: named {summary['frames_named']} of {summary['frames_unnamed']}")
        t.check("named " in r.stderr, f"view {how}: no 'named' line: {r.stderr}")
        named = t.load(out)
        share, chains = inline_share(named, w.pid)
        t.note(f"view {how}: inline_helper under inline_caller {share:.1f}%")
        t.check(share >= 60, f"view {how}: inline_helper under inline_caller {share:.1f}%: "
                f"{chains}")


def metrics(path):
    out = {}
    if os.path.exists(path):
        for line in open(path):
            if line.startswith("fxagent_debuginfod_"):
                k, v = line.split()
                out[k] = float(v)
    return out


def daemon_run(t, tag, urls, procs, seconds=8, budget="2s"):
    """The daemon with 2 s windows for `seconds`; (chunks of the system target, metrics)."""
    mfile = os.path.join(t.work, f"{tag}.prom")
    cfg = ("window:\n  seconds: 2\n"
           f"symbolization:\n  debuginfod_urls: {json.dumps(urls)}\n"
           f"  debuginfod_cache: {os.path.join(t.work, 'cache-' + tag)}\n"
           f"  debuginfod_timeout: 1s\n  debuginfod_budget: {budget}\n"
           f"metrics:\n  textfile: {mfile}\n")
    ws = [t.spawn([p, "30"]) for p in procs]
    # The whole system: the workloads and every other process's libraries,
    # most of which no server here has (misses).
    d = fxdaemon.Daemon(t, tag, cfg)
    d.wait_started()
    time.sleep(seconds)
    chunks = d.chunks(running=True)
    t.check(d.stop() == 0, f"{tag}: daemon exit status {d.p.returncode}")
    for w in ws:
        w.kill()
    got = []
    for target, lst in chunks.items():
        for seq, path in lst:
            got.append((seq, path, os.stat(path).st_mtime))
    return sorted(got), metrics(mfile), d


def check_daemon(t, inl, hot, url):
    chunks, m, _ = daemon_run(t, "daemon", [url], [inl, hot])
    t.note(f"daemon with debuginfod: {len(chunks)} chunks, metrics {m}")
    t.check(m.get("fxagent_debuginfod_hits_total", 0) >= 1, f"no hit counted: {m}")
    t.check(m.get("fxagent_debuginfod_bytes_total", 0) > 0, f"no bytes counted: {m}")
    t.check(m.get("fxagent_debuginfod_misses_total", 0) >= 1,
            f"fx-hot-ab's debug file is served nowhere, yet no miss counted: {m}")
    prof = t.load(chunks[-1][1])
    sym = prof.data["meta"]["fxagent"]["symbols"]
    t.check(sym.get("fx-inline-stripped") == "debuginfod" and
            sym.get("fx-hot-ab-stripped") == "stripped", f"symbols in the last chunk: {sym}")


def check_bad_servers(t, inl):
    # Accepts and never answers.
    lsock = socket.socket()
    lsock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    lsock.bind(("127.0.0.1", 0))
    lsock.listen(64)
    held = []
    stop = threading.Event()

    def hold():
        lsock.settimeout(0.2)
        while not stop.is_set():
            try:
                held.append(lsock.accept()[0])
            except OSError:
                pass
    th = threading.Thread(target=hold, daemon=True)
    th.start()
    slow = f"http://127.0.0.1:{lsock.getsockname()[1]}"
    # Nothing listens there.
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    stopped = f"http://127.0.0.1:{s.getsockname()[1]}"
    s.close()
    try:
        for tag, url in (("slow", slow), ("stopped", stopped)):
            chunks, m, d = daemon_run(t, tag, [url], [inl], seconds=9, budget="1s")
            t.note(f"{tag} server: {len(chunks)} chunks, metrics {m}")
            t.check(len(chunks) >= 3, f"{tag} server: only {len(chunks)} chunks in 9 s of "
                    "2 s windows")
            t.check(m.get("fxagent_debuginfod_errors_total", 0) >= 1,
                    f"{tag} server: no error counted: {m}")
            for seq, path, mtime in chunks:
                fx = t.load(path).data["meta"]["fxagent"]
                late = mtime - fx["windowEnd"] / 1000.0
                t.check(late <= fxtest.scaled(1 + 3),
                        f"{tag} server: chunk {seq} written {late:.1f} s after its window "
                        "ended (budget 1 s)")
            if tag == "slow":
                t.check(held, "the slow server was never asked")
        check_stop(t, inl, slow, held)
    finally:
        stop.set()
        th.join()
        for c in held:
            c.close()
        lsock.close()


def check_stop(t, inl, slow, held):
    """SIGTERM while a request hangs on the slow server, with a 60 s timeout and
    budget: the agent ends it and exits within seconds, not at the request's
    bound."""
    cfg = ("window:\n  seconds: 3\n"
           f"symbolization:\n  debuginfod_urls: [\"{slow}\"]\n"
           f"  debuginfod_cache: {os.path.join(t.work, 'cache-stop')}\n"
           "  debuginfod_timeout: 60s\n  debuginfod_budget: 60s\n")
    w = t.spawn([inl, "60"])
    d = fxdaemon.Daemon(t, "stop", cfg)
    d.wait_started()
    before = len(held)
    # The first window's symbolization asks the server, and waits.
    t.require(fxtest.wait_for(lambda: len(held) > before, fxtest.scaled(20), 0.1),
              "no request reached the slow server in 20 s of 3 s windows")
    time.sleep(0.5)
    start = time.monotonic()
    rc = d.stop(signal.SIGTERM, timeout=70)
    took = time.monotonic() - start
    w.kill()
    t.note(f"SIGTERM with a request hanging: exit {rc} after {took:.1f} s")
    t.check(rc == 0 and took <= fxtest.scaled(5),
            f"SIGTERM while a debuginfod request hung: exit {rc} after {took:.1f} s "
            "(the request's bound is 60 s; want it cut, exit within 5 s)")


def body(t):
    for tool in ("debuginfod", "objcopy", "strip", "ip", "unshare"):
        t.require(subprocess.run(["which", tool], capture_output=True).returncode == 0,
                  f"{tool} is not installed (scripts/install-test-deps.sh installs it)")
    inl, srv, hot, bid = build(t)
    url = f"http://127.0.0.1:{PORT}"
    start_server(t, srv, bid)
    check_once(t, inl, url)
    check_view(t, inl, srv, bid, url)
    check_daemon(t, inl, hot, url)
    check_bad_servers(t, inl)


if __name__ == "__main__":
    if os.geteuid() == 0:
        enter_netns()
    fxtest.main(body)

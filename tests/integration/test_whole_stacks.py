# SPDX-License-Identifier: MIT
"""Stacks are whole whatever the frame sizes, and `truncated` counts exactly
the stacks that are not (issue 41).

The workloads, all running throughout:
- a Node.js `http` server (`node --perf-basic-prof`) on 127.0.0.1, a free
  port, whose one route computes in JavaScript for each request, under a
  bounded load from `ab` (-c 2, -n and -t bounded). Its main thread sits in
  libuv's uv__io_poll, whose frame is about 15.7 KiB (an on-stack
  epoll_event[1024]): every request it serves runs below that frame;
- fx-bigframe: main -> bf_big (a 20 KiB on-stack buffer) -> bf_outer ->
  bf_mid -> bf_leaf, spinning, built with frame pointers (as node is);
- fx-bigframe-nofp: the same program without frame pointers (as Debian
  builds code): only a stack copy that holds bf_big's 20 KiB frame can walk
  it, so with 8 or 16 KiB its stacks may end at bf_big; they must then be
  counted as truncated.

What a root is. A whole stack of a user thread ends (outermost frame) where
the code marks the return address undefined in its CFI: `_start` for a main
thread, `clone3` (glibc 2.36 starts every pthread there: start_thread runs
below it) or `clone` (the older entry, still used by posix_spawn and direct
callers) for the others. So a sample reaches a root when its outermost
non-kernel frame is one of ROOTS. `start_thread` or `__libc_start_main` as
the outermost frame means the walk stopped one frame short: not a root.
A sample of a user thread taken in the kernel still has the thread's user
registers (perf gives every task that is not a kernel thread its user
registers, at kernel entry) and so a user part; one with no user frame at
all has lost it and does not reach a root. Kernel threads (a whole stack
with no user part) cannot occur here: the recordings are by pid (-p).

Checks, each with its figures in a note:
a. node's main thread (tid == pid), `fxagent --once -p` with default
   settings, beside `perf record -g` (frame pointers) of the same processes
   over the same seconds: at least 95% of its samples reach a root, and no
   fewer (within the tolerance of two samplings) than perf's frame-pointer
   walk reaches __libc_start_call_main / _start;
b. fx-bigframe in the same recording: at least 95% of its samples reach
   _start, and hold main and bf_big (perf's frame-pointer share beside it);
   fx-bigframe-nofp's figures are noted;
c. with --stack-bytes 8192, 16384 and 32768 (and the default run of a/b),
   the FxRecording markers' `truncated` equals the number of recorded
   samples (all threads of the pids recorded) whose stack reaches no root;
   the markers' `samples` equals the samples in the profile (the same
   population) and no stack was dropped.
Every workload's sample count is checked against its own CPU time in the
recording's window (fxtest.min_samples). Skipped only where node is missing.

Before the unwinder stitches its walk onto the kernel's frame-pointer
callchain (main at 9eac04c, 2026-11-28, 2 CPUs, about 48 s), a, b and c
fail: node's main thread reached a root in 25 of 380 samples (6.6%; 352 end
at uv__io_poll) where perf's walk reached __libc_start_call_main in 390 of
391; fx-bigframe in 0 of 122 (all end at bf_big; perf 104 of 104);
`truncated` was 365 for 355 rootless stacks (node alone, 16 KiB), 287 for
284 (8 KiB), 226 for 224 (16 KiB) and 149 for 0 (32 KiB, where every stack
is whole): walks that reached _start or clone3 were counted as cut short.
"""

import os
import re
import shutil
import subprocess
import threading
import time
import urllib.request

import fxtest

SECONDS = 6       # the default run, beside perf
SIZE_SECONDS = 4  # each --stack-bytes run
SIZES = (8192, 16384, 32768)
# Outermost user frames of whole stacks (see above).
ROOTS = ("_start", "clone3", "clone")
# What perf's frame-pointer walk of a main thread reaches when it is whole:
# libc has no frame pointers, so the walk ends one frame past main, at the
# return address into __libc_start_call_main (or beyond it, at _start).
PERF_ROOTS = ("__libc_start_call_main", "__libc_start_main", "_start")

SERVER_JS = """\
const http = require('http');
// CPU per request, in JIT-compiled JavaScript below libuv's uv__io_poll.
function mix(s, i) { return (s * 31 + i) % 1000003; }
function work(n) { let s = 0; for (let i = 0; i < n; i++) s = mix(s, i); return s; }
const srv = http.createServer((req, res) => {
  res.setHeader('Content-Type', 'text/plain');
  res.end(String(work(200000)) + '\\n');
});
srv.listen(0, '127.0.0.1', () => { console.log(srv.address().port); });
"""

PERF_HEAD = re.compile(r"\s(\d+)/(\d+)\s*$")


def perf_stacks(t, data):
    """[(pid, tid, [symbols, leaf first])] of each sample in perf.data @data."""
    p = subprocess.run(["perf", "script", "-i", data, "-F", "comm,pid,tid,ip,sym"],
                       capture_output=True, text=True, timeout=fxtest.scaled(120))
    t.require(p.returncode == 0, f"perf script exited {p.returncode}: {p.stderr[-800:]}")
    out, cur = [], None
    for line in p.stdout.splitlines():
        if not line.strip():
            continue
        if not line[0].isspace():
            m = PERF_HEAD.search(line)
            cur = (int(m[1]), int(m[2]), []) if m else None
            if cur:
                out.append(cur)
        elif cur is not None:
            parts = line.split()
            cur[2].append(parts[1] if len(parts) > 1 else "")
    return out


def user_part(prof, stack):
    """Function names of a stack's non-kernel frames, outermost first."""
    return prof.user_names(stack)


def reaches_root(prof, stack):
    user = user_part(prof, stack)
    return bool(user) and user[0] in ROOTS


def outermost(prof, stack):
    user = user_part(prof, stack)
    return user[0] if user else "(no user frame)"


def tally(prof, threads):
    """(samples, reaching a root, with no user frame, {outermost frame of
    those not reaching a root: weight}) of @threads."""
    n = whole = bare = 0
    cut = {}
    for th in threads:
        for st, w in prof.samples(th):
            n += w
            if reaches_root(prof, st):
                whole += w
                continue
            if not user_part(prof, st):
                bare += w
            k = outermost(prof, st)
            cut[k] = cut.get(k, 0) + w
    return n, whole, bare, cut


def top(cut, k=4):
    return ", ".join(f"{name} {w}" for name, w in
                     sorted(cut.items(), key=lambda kv: -kv[1])[:k]) or "none"


def start_server(t, node):
    script = os.path.join(t.work, "server.js")
    with open(script, "w") as f:
        f.write(SERVER_JS)
    srv = t.spawn([node, "--perf-basic-prof", script], cwd=t.work, stdout=subprocess.PIPE,
                  stderr=open(os.path.join(t.work, "server.log"), "w"), text=True)
    port = {}

    def read_port():
        line = srv.stdout.readline().strip()
        if line.isdigit():
            port["p"] = int(line)

    # readline blocks: read it on a helper thread, wait with a deadline.
    th = threading.Thread(target=read_port, daemon=True)
    th.start()
    th.join(fxtest.scaled(20))
    t.require("p" in port, f"node server did not say its port (exit {srv.poll()}); "
              f"see server.log")
    return srv, port["p"]


def start_load(t, port, seconds):
    """ab: 2 connections, at most `seconds` and 10^6 requests (-t first: it
    implies -n 50000, which the later -n replaces)."""
    ab = shutil.which("ab")
    t.require(ab, "no ab (apache2-utils; scripts/install-test-deps.sh installs it)")
    log = open(os.path.join(t.work, "ab.log"), "w")
    return t.spawn([ab, "-q", "-r", "-s", "10", "-c", "2", "-t", str(int(seconds)),
                    "-n", "1000000", f"http://127.0.0.1:{port}/"],
                   stdout=log, stderr=subprocess.STDOUT)


def served(port):
    """One request answered (the server is up and computing)."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=5) as r:
            return r.status == 200
    except OSError:
        return False


def record_beside_perf(t, tag, pids, perf_pids):
    """`fxagent --once` of @pids with default settings for SECONDS, and
    `perf record -g` (frame pointers, 99 Hz, cpu-clock) of @perf_pids over
    the same seconds. Returns (the Profile, perf's stacks)."""
    data = os.path.join(t.work, f"{tag}.perf.data")
    perf = t.spawn(["perf", "record", "-q", "-e", "cpu-clock", "-F", str(fxtest.HZ), "-g",
                    "-p", ",".join(map(str, perf_pids)), "--no-buildid",
                    "--no-buildid-cache", "-o", data, "--", "sleep", str(SECONDS)],
                   stdout=subprocess.DEVNULL,
                   stderr=open(os.path.join(t.work, f"{tag}.perf.log"), "w"))
    prof = t.record(tag, SECONDS, pids=pids, measure=pids)
    try:
        t.require(perf.wait(timeout=fxtest.scaled(60)) == 0,
                  f"perf record exited {perf.returncode}; see {tag}.perf.log")
    except subprocess.TimeoutExpired:
        raise fxtest.Stop("perf record did not end")
    return prof, perf_stacks(t, data)


def enough_samples(t, prof, tag, what, pid, n, tid=None):
    cpu = prof.thread_cpu_s(pid, tid) if tid else prof.cpu_s(pid)
    least = fxtest.min_samples(cpu)
    t.check(n >= least, f"{tag}: {what} has {n} samples for {cpu:.2f} CPU s in the "
            f"recording's window (want at least {least})")


def check_truncated(t, tag, prof, pids):
    """c: the markers' truncated equals the samples with no root."""
    rec = prof.recording()
    meta = prof.data["meta"]["fxagent"]
    ths = [th for pid in pids for th in prof.threads_of(pid)]
    # (The agent's own track, without samples, may be there.)
    others = [th for th in prof.threads if th["samples"]["length"]
              and str(th["pid"]) not in {str(p) for p in pids}]
    n, whole, bare, cut = tally(prof, ths)
    noroot = n - whole
    t.note(f"{tag}: marker {rec}, droppedStacks {meta.get('droppedStacks')}; profile: "
           f"{n} samples, {whole} reach a root, {noroot} do not ({bare} with no user "
           f"frame); outermost frames of those: {top(cut)}")
    t.check(not others, f"{tag}: threads of pids not recorded: "
            f"{sorted({th['pid'] for th in others})}")
    t.check(rec["samples"] == n, f"{tag}: the markers count {rec['samples']} samples, the "
            f"profile holds {n}: not the same population")
    t.check(not meta.get("droppedStacks"), f"{tag}: {meta.get('droppedStacks')} stacks "
            "dropped: their samples count in `truncated` but are not in the profile")
    t.check(rec["truncated"] == noroot,
            f"{tag}: truncated {rec['truncated']} vs {noroot} stacks without a root "
            f"(of {n}; outermost frames of those: {top(cut)})")


def body(t):
    node = shutil.which("node")
    if not node:
        print("SKIP: this machine has no node (apt-get install nodejs)")
        raise SystemExit(fxtest.SKIP)
    t.require(shutil.which("perf"), "no perf (linux-perf; scripts/install-test-deps.sh)")

    total = 2 * SECONDS + len(SIZES) * SIZE_SECONDS
    # Every recording's fixed costs (symbolizing node's libraries), scaled.
    life = int(fxtest.scaled(total + 60))
    srv, port = start_server(t, node)
    t.require(fxtest.wait_for(lambda: served(port), 20), f"node server on port {port} "
              "does not answer")
    load = start_load(t, port, life)
    time.sleep(1.5)  # the route's functions compiled by then
    t.require(load.poll() is None, f"ab exited {load.returncode} at once; see ab.log")

    # a. node's main thread: default settings, node alone (the CPU is its),
    # perf beside it.
    prof, pstacks = record_beside_perf(t, "node", [srv.pid], [srv.pid])
    main_th = [th for th in prof.threads_of(srv.pid) if str(th["tid"]) == str(srv.pid)]
    t.require(main_th, f"no main thread (tid {srv.pid}) of node in the profile")
    n, whole, bare, cut = tally(prof, main_th)
    pct = 100.0 * whole / max(n, 1)
    pmain = [s for pid, tid, s in pstacks if tid == srv.pid]
    preach = sum(any(f in PERF_ROOTS for f in s) for s in pmain)
    ppct = 100.0 * preach / max(len(pmain), 1)
    pio = sum("uv__io_poll" in s for s in pmain)
    io = prof.weight(main_th, prof.has_func("uv__io_poll"))
    tol = fxtest.diff_tol(pct, n, ppct, len(pmain))
    t.note(f"a. node main thread: fxagent (default) {whole} of {n} samples reach a root "
           f"({pct:.1f}%), {io} hold uv__io_poll; outermost frames of the rest: {top(cut)}; "
           f"perf -g (frame pointers): {preach} of {len(pmain)} reach "
           f"__libc_start_call_main/_start ({ppct:.1f}%), {pio} hold uv__io_poll")
    enough_samples(t, prof, "a", "node's main thread", srv.pid, n, tid=srv.pid)
    t.require(len(pmain) > 0, "perf recorded no sample of node's main thread")
    t.check(pct >= 95, f"a. node main thread: only {pct:.1f}% of {n} stacks reach a root "
            f"(want >= 95%; outermost frames of the rest: {top(cut)})")
    t.check(pct >= ppct - tol, f"a. node main thread: fxagent reaches a root in {pct:.1f}% "
            f"of {n}, perf's frame-pointer walk in {ppct:.1f}% of {len(pmain)}: more than "
            f"{tol:.1f} points fewer")
    check_truncated(t, "c. node alone, default (16384)", prof, [srv.pid])

    # b. fx-bigframe (frame pointers), and fx-bigframe-nofp's figures: the
    # mix, default settings, perf beside it on fx-bigframe.
    fp = t.workload("fx-bigframe", life)
    nofp = t.workload("fx-bigframe-nofp", life)
    pids = [srv.pid, fp.pid, nofp.pid]
    time.sleep(0.3)
    prof, pstacks = record_beside_perf(t, "mix", pids, [fp.pid])
    ths = prof.threads_of(fp.pid)
    t.require(ths, f"no thread of fx-bigframe (pid {fp.pid}) in the profile")
    n, whole, bare, cut = tally(prof, ths)
    start = prof.weight(ths, lambda st: user_part(prof, st)[:1] == ["_start"])
    both = prof.weight(ths, lambda st: {"main", "bf_big"} <= set(prof.stack_names(st)))
    pfp = [s for pid, tid, s in pstacks if pid == fp.pid]
    preach = sum(any(f in PERF_ROOTS for f in s) for s in pfp)
    t.note(f"b. fx-bigframe: fxagent (default) {start} of {n} samples reach _start "
           f"({100.0 * start / max(n, 1):.1f}%), {both} hold main and bf_big; outermost "
           f"frames of the rest: {top(cut)}; perf -g (frame pointers): {preach} of "
           f"{len(pfp)} reach __libc_start_call_main/_start")
    enough_samples(t, prof, "b", "fx-bigframe", fp.pid, n)
    t.check(start >= 0.95 * n, f"b. fx-bigframe: {start} of {n} stacks reach _start "
            "(want >= 95%)")
    t.check(both >= 0.95 * n, f"b. fx-bigframe: {both} of {n} stacks hold main and bf_big "
            "(want >= 95%)")
    pct, ppct = 100.0 * start / max(n, 1), 100.0 * preach / max(len(pfp), 1)
    tol = fxtest.diff_tol(pct, n, ppct, len(pfp))
    t.check(pct >= ppct - tol, f"b. fx-bigframe: fxagent reaches _start in {pct:.1f}% of "
            f"{n}, perf's frame-pointer walk in {ppct:.1f}% of {len(pfp)}: more than "
            f"{tol:.1f} points fewer")
    nths = prof.threads_of(nofp.pid)
    n2, whole2, _, cut2 = tally(prof, nths)
    t.note(f"b. fx-bigframe-nofp: fxagent (default) {whole2} of {n2} samples reach a root; "
           f"outermost frames of the rest: {top(cut2)} (no frame pointers: nothing walks "
           "bf_big's 20 KiB frame from a 16 KiB copy; `truncated` must count them)")
    enough_samples(t, prof, "b", "fx-bigframe-nofp", nofp.pid, n2)
    check_truncated(t, "c. mix, default (16384)", prof, pids)

    # c. truncated counts exactly the stacks without a root.
    for size in SIZES:
        prof = t.record(f"stack-{size}", SIZE_SECONDS, pids=pids, measure=pids,
                        extra=["--stack-bytes", str(size)])
        check_truncated(t, f"c. --stack-bytes {size}", prof, pids)
        for pid, what in ((srv.pid, "node"), (fp.pid, "fx-bigframe"),
                          (nofp.pid, "fx-bigframe-nofp")):
            ths = prof.threads_of(pid)
            n, whole, _, _ = tally(prof, ths)
            enough_samples(t, prof, f"c. {size}", what, pid, n)
            if size == 32768 and what != "node":
                # The copy holds the whole stack: nothing needs stitching.
                t.check(whole >= 0.95 * n, f"c. --stack-bytes 32768: {what}: only {whole} "
                        f"of {n} stacks reach a root (want >= 95%)")
    t.require(load.poll() is None, f"ab ended early (exit {load.returncode}); see ab.log")
    t.kill_processes()


fxtest.main(body)

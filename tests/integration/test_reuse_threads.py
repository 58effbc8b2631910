# SPDX-License-Identifier: MIT
"""--reuse-threads on a thread-per-request server (issue 41).

A Python `http.server.ThreadingHTTPServer` on loopback (a new thread per
request) answers `ab` (apache2-utils) with a CPU-heavy handler,
reuse_threads_handler_burn() (PBKDF2 in OpenSSL, which runs without the GIL).
CPython 3.12 from pyenv runs it under `-X perf`, so the handler is named
(`py::reuse_threads_handler_burn`); Debian's python3 without: then the
handler is known by the native PKCS5_PBKDF2_HMAC it calls.

1. `fxagent --once -p PID` without the option: a track per request thread
   (many), every sample the agent counted on some track.
2. `fxagent view` of that file with --reuse-threads: exactly the same
   samples, on one track per thread name of the process plus its main
   thread's track (which keeps its own samples), each track in time order,
   its tid the lowest of its threads.
3. `fxagent --once -p PID --reuse-threads`: one track per thread name (the
   names /proc/PID/task/*/comm showed during the recording), every sample
   counted on a track.
In 1 and 3, 99 samples a second of the CPU time the server had (its
/proc/PID/stat, which keeps the time of its ended threads): nothing lost.
In each profile, meta.initialSelectedThreads (the thread the Firefox
Profiler selects first) is the track with the most on-CPU samples; with the
option that is the request threads' track, and it holds the handler. The
Firefox Profiler's own loader (profiler-cli) loads the merged profile.
"""

import os
import shutil
import subprocess
import threading
import time

import fxtest
from fxjit import python

SECONDS = 4
CLIENTS = 4
HANDLER = "reuse_threads_handler_burn"
NATIVE = "PKCS5_PBKDF2_HMAC"

SERVER_PY = """\
import hashlib
import http.server


def reuse_threads_handler_burn():
    return hashlib.pbkdf2_hmac("sha256", b"fxagent", b"reuse-threads", 20000)


class Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = reuse_threads_handler_burn().hex().encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


class Server(http.server.ThreadingHTTPServer):
    def handle_error(self, request, client_address):
        pass  # ab hangs up on requests in flight when its time is up


srv = Server(("127.0.0.1", 0), Handler)
print(srv.server_address[1], flush=True)
srv.serve_forever()
"""


def busiest(prof):
    """Index of the on-CPU track with the most samples (the first of equals)."""
    best, most = None, 0
    for i, th in enumerate(prof.threads):
        if th["samples"].get("weightType", "samples") != "samples":
            continue
        n = prof.weight([th])
        if n > most:
            best, most = i, n
    return best


def check_selected(t, prof, tag):
    """meta.initialSelectedThreads names the busiest on-CPU track. Returns it."""
    sel = prof.data["meta"].get("initialSelectedThreads")
    want = busiest(prof)
    t.check(sel == [want], f"{tag}: meta.initialSelectedThreads {sel}, want [{want}] (the "
            f"track with the most on-CPU samples)")
    return prof.threads[want] if want is not None else None


def check_counted(t, prof, tag):
    """Every sample the agent counted is on a track."""
    counted = prof.data["meta"]["fxagent"]["samples"]
    written = sum(th["samples"]["length"] for th in prof.threads)
    t.check(written == counted, f"{tag}: {written} samples on the tracks, the agent counted "
            f"{counted}")
    return written


def in_time_order(th):
    times = fxtest.sample_times(th["samples"])
    return all(a <= b for a, b in zip(times, times[1:]))


def handler_share(prof, th):
    return prof.share([th], lambda st: any(HANDLER in n or n == NATIVE
                                           for n in prof.stack_names(st)))


def names_seen(pid, stop, out):
    """Thread names of pid in /proc, polled until stop is set."""
    while not stop.is_set():
        for tid in os.listdir(f"/proc/{pid}/task") if os.path.isdir(f"/proc/{pid}") else []:
            try:
                with open(f"/proc/{pid}/task/{tid}/comm") as f:
                    out.add(f.read().rstrip("\n"))
            except OSError:
                pass
        stop.wait(0.02)


class ProcessCpu(fxtest.CpuPoller):
    """fxtest.CpuPoller of a process's own CPU time (/proc/PID/stat): that
    keeps the time of its threads that have ended, which a sum of its live
    threads' (CpuPoller's) loses at every request."""

    def run(self):
        tick = 1e9 / os.sysconf("SC_CLK_TCK")
        while not self.done.is_set():
            try:
                rows = []
                for p in self.pids:
                    with open(f"/proc/{p}/stat") as f:
                        fields = f.read().rsplit(")", 1)[1].split()
                    rows.append((int(fields[11]) + int(fields[12])) * tick)
            except (OSError, ValueError, IndexError):
                break
            self.times.append(time.time() * 1000.0)
            self.cpu.append(rows)
            self.done.wait(self.period)


def record(t, tag, pid, extra=()):
    """`fxagent --once -p PID` with the thread names of the process seen
    meanwhile, and its CPU time. Returns (Profile, names)."""
    stop, seen = threading.Event(), set()
    names = threading.Thread(target=names_seen, args=(pid, stop, seen), daemon=True)
    cpu = ProcessCpu([pid])
    names.start()
    cpu.start()
    try:
        prof = t.record(tag, SECONDS, pids=[pid], extra=extra)
    finally:
        stop.set()
        names.join()
        cpu.stop()
    prof.poll = cpu
    return prof, seen


def check_rate(t, prof, pid, n, tag):
    """99 samples a second of the CPU the process had in the recording (as
    test_hot_ab.py checks), and its clock's ticks (10 ms) on both ends."""
    cpu = prof.cpu_s(pid)
    want = fxtest.HZ * cpu
    tol = 3.5 * want ** 0.5 + 3 + 2 * fxtest.HZ / os.sysconf("SC_CLK_TCK")
    t.check(abs(n - want) <= tol, f"{tag}: {n} samples of the server; it had {cpu:.2f} CPU s "
            f"in the recording, so want {want:.0f} +- {tol:.0f}")


def body(t):
    ab = shutil.which("ab")
    t.require(ab, "no `ab`: install apache2-utils (scripts/install-test-deps.sh)")
    py = python(12)
    cmd = [py, "-X", "perf"] if py else ["python3"]
    script = os.path.join(t.work, "server.py")
    t.save("server.py", SERVER_PY)
    srv = t.spawn([*cmd, script], stdout=subprocess.PIPE, text=True)
    port = int(srv.stdout.readline())
    t.note(f"server: {' '.join(cmd)} (pid {srv.pid}) on 127.0.0.1:{port}")
    # Bounded: the load ends by itself after its time or its count.
    load = t.spawn([ab, "-q", "-t", str(2 * SECONDS + 20), "-n", "100000", "-c", str(CLIENTS),
                    f"http://127.0.0.1:{port}/"],
                   stdout=open(os.path.join(t.work, "ab.log"), "w"), stderr=subprocess.STDOUT)
    time.sleep(1)
    t.require(load.poll() is None, "ab ended before the recording; see ab.log")

    plain, names_a = record(t, "plain", srv.pid)
    reused, names_b = record(t, "reuse", srv.pid, extra=["--reuse-threads"])
    t.kill_processes()
    pid = str(srv.pid)

    # 1. Without the option: a track per thread.
    a_tracks = plain.threads_of(pid)
    a_n = check_counted(t, plain, "plain")
    a_pid = plain.weight(a_tracks)
    t.check(len(a_tracks) >= 10, f"plain: {len(a_tracks)} tracks of the server, want a track "
            f"per request thread (10 or more)")
    check_rate(t, plain, srv.pid, a_pid, "plain")
    check_selected(t, plain, "plain")

    # 2. The same recording through view --reuse-threads: the same samples,
    # one track per name, the main thread's apart.
    merged_path = os.path.join(t.work, "view-reuse.json.gz")
    p = t.run_agent("view", plain.path, "--reuse-threads", "-o", merged_path, timeout=120)
    t.require(p.returncode == 0, f"fxagent view --reuse-threads exited {p.returncode}: "
              f"{p.stderr.strip()[-1000:]}")
    view = t.load(merged_path)
    v_tracks = view.threads_of(pid)
    # A thread without samples (a quiet main thread) gets no track in a view.
    a_main = [th for th in a_tracks if th["tid"] == srv.pid and th["samples"]["length"]]
    a_names = {th["name"] for th in a_tracks if th["tid"] != srv.pid}
    t.check(len(v_tracks) == len(a_names) + len(a_main),
            f"view --reuse-threads: {len(v_tracks)} tracks of the server, want "
            f"{len(a_names) + len(a_main)} ({len(a_names)} names and the main thread)")
    t.check(view.weight(view.threads) == sum(plain.weight([th]) for th in plain.threads),
            f"view --reuse-threads: {view.weight(view.threads)} samples, the file has "
            f"{sum(plain.weight([th]) for th in plain.threads)}")
    for name in a_names:
        group = [th for th in a_tracks if th["name"] == name and th["tid"] != srv.pid]
        got = [th for th in v_tracks if th["name"] == name and not th["isMainThread"]]
        if not t.check(len(got) == 1, f"view: {len(got)} tracks named {name!r}, want 1"):
            continue
        t.check(plain.weight(group) == view.weight(got),
                f"view: {view.weight(got)} samples on the {name!r} track, its "
                f"{len(group)} threads had {plain.weight(group)}")
        t.check(got[0]["tid"] == min(th["tid"] for th in group),
                f"view: the {name!r} track's tid {got[0]['tid']}, want the lowest of its threads")
        t.check(in_time_order(got[0]), f"view: the {name!r} track's samples are not in "
                f"time order")
    v_main = [th for th in v_tracks if th["isMainThread"]]
    t.check([view.weight(v_main)] == [plain.weight(a_main)],
            f"view: the main thread's track has {view.weight(v_main)} samples, it had "
            f"{plain.weight(a_main)}")
    v_sel = check_selected(t, view, "view --reuse-threads")

    # 3. --once --reuse-threads: one track per thread name.
    b_tracks = reused.threads_of(pid)
    b_n = check_counted(t, reused, "reuse")
    b_pid = reused.weight(b_tracks)
    b_names = [th["name"] for th in b_tracks if th["tid"] != srv.pid]
    t.check(len(b_names) == len(set(b_names)), f"reuse: a thread name on several tracks: "
            f"{sorted(b_names)}")
    t.check(set(b_names) <= names_b, f"reuse: track names {sorted(set(b_names))}, the "
            f"process's threads were named {sorted(names_b)}")
    t.check(len(b_tracks) <= len(names_b) + 1,
            f"reuse: {len(b_tracks)} tracks of the server for {len(names_b)} thread names")
    t.check(all(in_time_order(th) for th in reused.threads), "reuse: a track's samples are "
            "not in time order")
    check_rate(t, reused, srv.pid, b_pid, "reuse")
    sel = check_selected(t, reused, "reuse")
    t.require(sel is not None, "reuse: no track has a sample")
    t.check(str(sel["pid"]) == pid and not sel["isMainThread"],
            f"reuse: the selected track is {sel['name']!r} of pid {sel['pid']} "
            f"(main: {sel['isMainThread']}), want the server's request threads")
    share = handler_share(reused, sel)
    t.check(share >= 50, f"reuse: the handler ({HANDLER} or {NATIVE}) is in {share:.0f}% of "
            f"the selected track's samples, want 50% or more")
    if py:
        t.check(any(f"py::{HANDLER}" in n for st, _ in reused.samples(sel)
                    for n in reused.stack_names(st)),
                f"reuse: no py::{HANDLER} frame on the selected track")
    t.note(f"plain: {len(a_tracks)} tracks of the server, {a_pid} of {a_n} samples, names "
           f"{sorted(names_a)}; view --reuse-threads: {len(v_tracks)} tracks, selected "
           f"{v_sel['name'] if v_sel else None!r}; --reuse-threads: {len(b_tracks)} tracks, "
           f"{b_pid} of {b_n} samples, selected {sel['name']!r} tid {sel['tid']} "
           f"({reused.weight([sel])} samples, handler {share:.0f}%)")

    # The profiler's own loader reads the merged profile, tracks as written.
    cli = t.cli(reused.path, "reuse")
    rows = [r for r in cli.threads() if str(r["pid"]) == pid]
    t.check(len(rows) == len(b_tracks), f"profiler-cli: {len(rows)} threads of the server, "
            f"the file has {len(b_tracks)}")


fxtest.main(body)

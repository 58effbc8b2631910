# SPDX-License-Identifier: MIT
"""On-CPU plus off-CPU time adds up to the recording's length, per thread,
with default settings on a busy server.

Why: a thread is at every instant either on a CPU or off it (blocked, or
runnable and waiting for one). A profile that says where its threads spent
their time must account for all of it; one that drops waits (the budget of
sampled waits binding, waits in progress not counted) shows servers as
idle where they are waiting, and that is what off-CPU time is for.

The set-up, all on 127.0.0.1, started here and stopped at the end:
- upstream: a Python http.server.ThreadingHTTPServer (a thread per
  request) whose handler sleeps 50 ms and answers a small body;
- nginx (the test's own config and prefix) with 2 worker processes,
  proxying to it, keeping connections to its clients alive;
- `ab -k -c 10` against nginx throughout;
- a sqlite writer: a Python process inserting one row per transaction
  (journal_mode WAL, synchronous FULL: every commit fsyncs) into a
  database under /var/tmp (a real disk, not a tmpfs).

1. `fxagent --once --off-cpu -d 10s`, whole system, default config
   otherwise. The threads of these processes that lived through the
   recording (the same thread, by its start time, at reads of /proc just
   before the agent starts and just after it exits: most request threads
   live 50 ms and do not count) are each the recording's length long: on
   (its CPU samples x meta.interval) plus off (the weights, ms, of its
   "(off-CPU)" track) must be within 15% of the recording's window for at
   least 90% of them. And the profile's on-CPU time of those threads
   together must be what the kernel counted for them over the same window
   (/proc/PID/task/TID/schedstat, polled during the recording and read at
   the window's edges) within 3.5 standard errors of the sample count plus
   5%: this checks the on-CPU half against the kernel's own clock, so the
   off-CPU half is what the adding up judges. The kernel's run-queue time
   and the profile's runnable waits are printed beside them, not judged.
2. The daemon, whole system, window.seconds 1, sampling.off_cpu.enabled,
   for about 6 s: over its chunks (all within the reads of /proc around
   it), each thread that lived through them adds up, on plus off summed
   over the chunks, to the sum of the chunks' lengths, within 15%, for at
   least 90% of the threads.

Every figure is printed per thread and saved in the test's work directory
(part1-threads.txt, part2-threads.txt); the schedstat columns are over the
same window (part 1) or chunks (part 2) as the profile's. Skipped only
without BTF.

A thread asleep through the whole recording counts as any other: nginx's
master sits in sigsuspend from before the agent starts to after it ends,
and its 10 s off-CPU are as much the recording's as a worker's.

Before the fix (main at 396a698, 2 CPUs, about 21 s), both parts fail:
with the default budget (250 sampled waits per second per CPU) 5,498 waits
were recorded and 11,252 dropped (165 s of waiting), and no thread adds
up: sum/length 0.21 (upstream), 0.00 (nginx master), 0.13 and 0.35 (nginx
workers), 0.65 (sqlite writer) in part 1; 0.20, 0.00, 0.42, 0.41 and 0.81
in part 2. The on-CPU half agrees with the kernel (294 samples for 296 by
schedstat). With every wait recorded (min_block 0, budget 100000) the four
threads that switch add up (0.96 to 1.004) and the master still shows
0.00: it never switches while the agent runs, so waits that began before
the agent attached must be accounted too.
"""

import bisect
import math
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time

import fxtest
from fxdaemon import Daemon
from fxupload import NGINX, free_port, wait_port

SECONDS = 10        # part 1's recording
DAEMON_SECONDS = 6  # part 2's run
WINDOW = 1          # part 2's windows
WARMUP = 1.5
# The issue's rule: on + off within SPREAD of the length for SHARE of the threads.
SPREAD = 0.15
SHARE = 0.90
CLIENTS = 10
RUNNABLE = ("[off-CPU: runnable (preempted)]", "[off-CPU: runnable (woken)]")

UPSTREAM_PY = """\
import http.server
import signal
import sys
import time


class Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        time.sleep(0.05)
        body = b"ok\\n"
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


class Server(http.server.ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request, client_address):
        pass  # a client that hung up


# Ends by itself after its life (argv[1] s), should the test not end it:
# SIGALRM's default action, without a thread of its own.
signal.alarm(int(sys.argv[1]))
srv = Server(("127.0.0.1", 0), Handler)
print(srv.server_address[1], flush=True)
srv.serve_forever()
"""

WRITER_PY = """\
import os
import sqlite3
import sys
import time

end = time.monotonic() + float(sys.argv[2])  # its life, should the test not end it
db = sqlite3.connect(os.path.join(sys.argv[1], "rows.db"), isolation_level=None)
print(db.execute("PRAGMA journal_mode=WAL").fetchone()[0], flush=True)
db.execute("PRAGMA synchronous=FULL")
db.execute("CREATE TABLE IF NOT EXISTS rows (id INTEGER PRIMARY KEY, at REAL, body TEXT)")
body = "x" * 200
while time.monotonic() < end:
    db.execute("BEGIN")
    db.execute("INSERT INTO rows (at, body) VALUES (?, ?)", (time.time(), body))
    db.execute("COMMIT")
"""


# --- /proc ---------------------------------------------------------------

def task_ids(pid):
    try:
        return [int(x) for x in os.listdir(f"/proc/{pid}/task")]
    except OSError:
        return []


def read_task(pid, tid):
    """(start time in ticks, comm, on-CPU ns, run-queue ns, timeslices) of a
    thread, or None once it is gone."""
    base = f"/proc/{pid}/task/{tid}"
    try:
        with open(base + "/stat") as f:
            stat = f.read()
        with open(base + "/schedstat") as f:
            on, rq, slices = (int(x) for x in f.read().split()[:3])
    except (OSError, ValueError):
        return None
    comm = stat[stat.index("(") + 1:stat.rindex(")")]
    start = int(stat[stat.rindex(")") + 2:].split()[19])
    return start, comm, on, rq, slices


def read_threads(pids):
    """{(pid, tid): read_task(...)} for every thread of @pids, and the wall
    clock (ms) in the middle of the reads."""
    a = time.time()
    out = {}
    for pid in pids:
        for tid in task_ids(pid):
            got = read_task(pid, tid)
            if got:
                out[(pid, tid)] = got
    return out, (a + time.time()) / 2 * 1000.0


def lived_through(before, after):
    """The threads present at both reads, as the same thread (start time)."""
    return sorted(k for k in before if k in after and after[k][0] == before[k][0])


def fs_type(path):
    """The type of the file system @path is on (its deepest mount)."""
    best, kind = "", "?"
    with open("/proc/self/mountinfo") as f:
        for ln in f:
            left, _, right = ln.partition(" - ")
            mnt = left.split()[4]
            if (path == mnt or path.startswith(mnt.rstrip("/") + "/")) and len(mnt) >= len(best):
                best, kind = mnt, right.split()[0]
    return kind


def children(pid):
    """Pids whose parent is @pid."""
    out = []
    for p in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{p}/stat") as f:
                s = f.read()
            if int(s[s.rindex(")") + 2:].split()[1]) == pid:
                out.append(int(p))
        except (OSError, ValueError, IndexError):
            pass
    return sorted(out)


class SchedPoller(threading.Thread):
    """Polls the schedstat (on-CPU ns, run-queue ns) of threads @keys ((pid,
    tid): those of the read before the agent, the only ones that can live
    through it) against the wall clock, to know each thread's over the
    recording's own window (linear between polls): the reads around the
    agent also hold its start and its symbolizing."""

    def __init__(self, keys, period=0.02):
        super().__init__(daemon=True)
        self.keys, self.period = list(keys), period
        self.times, self.rows = [], []
        self.done = threading.Event()

    def run(self):
        while not self.done.is_set():
            a = time.time()
            rows = {}
            for pid, tid in self.keys:
                got = read_task(pid, tid)
                if got:
                    rows[(pid, tid)] = (got[0], got[2], got[3])
            self.times.append((a + time.time()) / 2 * 1000.0)
            self.rows.append(rows)
            self.done.wait(self.period)

    def stop(self):
        self.done.set()
        self.join()

    def _at(self, key, start, field, ms):
        def val(i):
            r = self.rows[i].get(key)
            return r[field] if r and r[0] == start else None
        i = bisect.bisect_left(self.times, ms)
        lo, hi = max(0, min(i - 1, len(self.times) - 1)), min(i, len(self.times) - 1)
        a, b = val(lo), val(hi)
        if a is None or b is None:
            return a if b is None else b
        t0, t1 = self.times[lo], self.times[hi]
        if t1 <= t0 or ms <= t0:
            return a if ms <= t0 else b
        if ms >= t1:
            return b
        return a + (b - a) * (ms - t0) / (t1 - t0)

    def delta_ms(self, key, start, a_ms, b_ms):
        """(on-CPU ms, run-queue ms) of thread @key (its start time @start)
        between two wall-clock instants, or (None, None) if unseen there."""
        out = []
        for field in (1, 2):
            x, y = self._at(key, start, field, a_ms), self._at(key, start, field, b_ms)
            out.append(None if x is None or y is None else (y - x) / 1e6)
        return tuple(out)


# --- the set-up ----------------------------------------------------------

class Setup:
    """The upstream, nginx, ab and the sqlite writer; stop() ends them."""

    def __init__(self, t):
        self.t = t
        self.nginx = None
        self.workers = []
        self.dbdir = None

    def start(self, life):
        t = self.t
        self.dbdir = tempfile.mkdtemp(prefix="fxagent-adds-up-", dir="/var/tmp")
        ab = shutil.which("ab")
        t.require(ab, "no `ab`: install apache2-utils (scripts/install-test-deps.sh)")
        t.require(os.access(NGINX, os.X_OK), f"{NGINX} is not installed (apt-get install "
                  "nginx-light; scripts/install-test-deps.sh)")

        t.save("upstream.py", UPSTREAM_PY)
        self.upstream = t.spawn([sys.executable, os.path.join(t.work, "upstream.py"),
                                 str(int(life))],
                                stdout=subprocess.PIPE, text=True,
                                stderr=open(os.path.join(t.work, "upstream.log"), "w"))
        line = self.upstream.stdout.readline().strip()
        t.require(line.isdigit(), f"the upstream did not say its port (exit "
                  f"{self.upstream.poll()}); see upstream.log")
        self.up_port = int(line)

        self.dir = os.path.join(t.work, "nginx")
        for d in ("logs", "tmp"):
            os.makedirs(os.path.join(self.dir, d), exist_ok=True)
        self.port = free_port()
        conf = os.path.join(self.dir, "nginx.conf")
        d = self.dir
        with open(conf, "w") as f:
            f.write(f"""daemon off;
master_process on;
worker_processes 2;
user root;
pid {d}/nginx.pid;
error_log {d}/logs/error.log warn;
events {{ worker_connections 256; }}
http {{
  access_log off;
  client_body_temp_path {d}/tmp/body;
  proxy_temp_path {d}/tmp/proxy;
  fastcgi_temp_path {d}/tmp/fastcgi;
  uwsgi_temp_path {d}/tmp/uwsgi;
  scgi_temp_path {d}/tmp/scgi;
  keepalive_timeout 300s;
  keepalive_requests 1000000;
  upstream upstream {{ server 127.0.0.1:{self.up_port}; }}
  server {{
    listen 127.0.0.1:{self.port};
    location / {{ proxy_pass http://upstream; }}
  }}
}}
""")
        self.nginx = t.spawn([NGINX, "-c", conf, "-p", d + "/"],
                             stderr=open(os.path.join(d, "logs", "stderr"), "w"))
        t.require(wait_port(self.port), f"nginx does not listen on 127.0.0.1:{self.port}; "
                  f"see {d}/logs")
        self.workers = fxtest.wait_for(
            lambda: (lambda c: c if len(c) >= 2 else None)(children(self.nginx.pid)), 10) or []
        t.require(len(self.workers) == 2, f"nginx (pid {self.nginx.pid}) has worker processes "
                  f"{self.workers}, want 2")

        t.save("writer.py", WRITER_PY)
        self.writer = t.spawn([sys.executable, os.path.join(t.work, "writer.py"), self.dbdir,
                               str(int(life))],
                              stdout=subprocess.PIPE, text=True,
                              stderr=open(os.path.join(t.work, "writer.log"), "w"))
        mode = self.writer.stdout.readline().strip()
        t.require(mode == "wal", f"the sqlite writer's journal mode is {mode!r}, want wal "
                  f"(exit {self.writer.poll()}); see writer.log")

        # -t first: it implies -n 50000, which the later -n replaces.
        self.ab = t.spawn([ab, "-q", "-k", "-r", "-s", "10", "-c", str(CLIENTS),
                           "-t", str(int(life)), "-n", "100000000",
                           f"http://127.0.0.1:{self.port}/"],
                          stdout=open(os.path.join(t.work, "ab.log"), "w"),
                          stderr=subprocess.STDOUT)

    def roles(self):
        """{pid: what it is}."""
        out = {self.nginx.pid: "nginx master", self.upstream.pid: "upstream",
               self.writer.pid: "sqlite writer"}
        for w in self.workers:
            out[w] = "nginx worker"
        return out

    def rows(self):
        """Rows the writer committed so far (from a second connection)."""
        db = sqlite3.connect(os.path.join(self.dbdir, "rows.db"), timeout=10)
        try:
            return db.execute("SELECT count(*) FROM rows").fetchone()[0]
        finally:
            db.close()

    def running(self):
        """What has ended that should run ('' if all runs)."""
        gone = [name for name, p in (("upstream", self.upstream), ("nginx", self.nginx),
                                     ("sqlite writer", self.writer), ("ab", self.ab))
                if p.poll() is not None]
        gone += [f"nginx worker {w}" for w in self.workers if not os.path.exists(f"/proc/{w}")]
        return ", ".join(gone)

    def stop(self):
        """nginx by SIGTERM to its master (its workers go with it, which a
        SIGKILL of the master would leave behind), the rest by SIGKILL."""
        if self.nginx and self.nginx.poll() is None:
            self.nginx.send_signal(signal.SIGTERM)
            try:
                self.nginx.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass
        for w in self.workers:
            fxtest.wait_for(lambda: not os.path.exists(f"/proc/{w}"), 5)
            try:
                with open(f"/proc/{w}/stat") as f:
                    stat = f.read()
                ppid = int(stat.rsplit(")", 1)[1].split()[1])
                if "(nginx)" in stat and ppid in (self.nginx.pid, 1):
                    os.kill(w, signal.SIGKILL)  # our worker, left behind
            except (OSError, ValueError, IndexError):
                pass
        self.t.kill_processes()
        if self.dbdir:
            shutil.rmtree(self.dbdir, ignore_errors=True)


# --- the profile -------------------------------------------------------

def per_thread(prof):
    """{(pid, tid): [CPU samples, off-CPU ms, runnable ms]} of every track."""
    out = {}
    for th in prof.threads:
        try:
            key = (int(th["pid"]), int(th["tid"]))
        except (TypeError, ValueError):
            continue
        row = out.setdefault(key, [0, 0.0, 0.0])
        if th["samples"].get("weightType") == "tracing-ms":
            for st, w in prof.samples(th):
                row[1] += w
                names = prof.stack_names(st)
                if names and names[-1] in RUNNABLE:
                    row[2] += w
        else:
            row[0] += prof.weight([th])
    return out


def adds_up(t, tag, rows, span_ms, fname):
    """The rule: on + off within SPREAD of span_ms for SHARE of @rows, a list
    of dicts. Prints and saves the table; returns the number that add up."""
    head = (f"{'pid':>7} {'tid':>7} {'what':<14} {'comm':<16} {'on ms':>8} {'off ms':>9} "
            f"{'sum/len':>7} {'sched on':>9} {'sched rq':>9} {'runnable':>9}")
    lines = [f"{tag}: length {span_ms:.1f} ms", head]
    ok = 0
    for r in rows:
        ratio = (r["on"] + r["off"]) / span_ms if span_ms > 0 else 0.0
        r["ratio"] = ratio
        good = abs(ratio - 1) <= SPREAD
        ok += good

        def f(x):
            return "-" if x is None else f"{x:.1f}"
        lines.append(f"{r['pid']:>7} {r['tid']:>7} {r['what']:<14} {r['comm'][:16]:<16} "
                     f"{r['on']:>8.1f} {r['off']:>9.1f} {ratio:>7.3f} {f(r['sched_on']):>9} "
                     f"{f(r['sched_rq']):>9} {r['runnable']:>9.1f}{'' if good else '  <-'}")
    def total(k):
        return sum(r[k] or 0 for r in rows)
    lines.append(f"{tag}: totals: on {total('on'):.1f} ms, off {total('off'):.1f} ms, "
                 f"runnable {total('runnable'):.1f} ms in the profile; schedstat on-CPU "
                 f"{total('sched_on'):.1f} ms, run queue {total('sched_rq'):.1f} ms")
    text = "\n".join(lines)
    t.save(fname, text + "\n")
    t.note(text)
    n = len(rows)
    bad = [f"{r['what']} {r['tid']} ({r['comm']}): {r['ratio']:.2f}" for r in rows
           if abs(r["ratio"] - 1) > SPREAD]
    asleep = [f"{r['what']} {r['tid']}" for r in rows if not r["on"] and not r["off"]]
    t.check(n and ok >= SHARE * n,
            f"{tag}: on-CPU + off-CPU time adds up to the recording's length "
            f"({span_ms / 1000:.2f} s, within {SPREAD:.0%}) for only {ok} of the {n} threads "
            f"that lived through it (want at least {SHARE:.0%}); the others' sum/length: "
            f"{', '.join(bad)}" +
            (f"; {', '.join(asleep)} has neither a sample nor a wait: it slept through the "
             "whole recording, in a wait that began before the agent started" if asleep
             else ""))
    return ok


def note_offcpu(t, tag, prof):
    meta = prof.data["meta"]["fxagent"]
    t.note(f"{tag}: meta.fxagent.offCpu {meta.get('offCpu')}; samples {meta.get('samples')}, "
           f"lost {meta.get('lost')}")
    return meta.get("offCpu")


# --- the parts -----------------------------------------------------------

def part1(t, s):
    roles = s.roles()
    pids = sorted(roles)
    out = os.path.join(t.work, "once.json.gz")
    rows0 = s.rows()
    before, t_before = read_threads(pids)
    poll = SchedPoller(before)
    poll.start()
    try:
        p = t.run_agent("--once", "--off-cpu", "-d", f"{SECONDS}s", "--output", out,
                        timeout=SECONDS / fxtest.TIME_SCALE + 90)
    finally:
        poll.stop()
    after, t_after = read_threads(pids)
    rows1 = s.rows()
    t.save("once.agent.log", p.stderr)
    t.require(p.returncode == 0, f"fxagent --once --off-cpu exited {p.returncode}: "
              f"{p.stderr.strip()[-2000:]}")
    t.check("off-CPU time is not recorded" not in p.stderr,
            f"the agent did not record off-CPU time: {p.stderr.strip()[-1000:]}")
    gone = s.running()
    t.require(not gone, f"part 1: ended during the recording: {gone}")
    prof = t.load(out)
    a_ms, b_ms = prof.window_ms()
    span = b_ms - a_ms
    interval = prof.data["meta"]["interval"]
    rate = (rows1 - rows0) / max(1e-3, (t_after - t_before) / 1000)
    t.note(f"part 1: /proc read {t_before:.0f} and {t_after:.0f} (ms), the recording's window "
           f"{a_ms:.0f} to {b_ms:.0f} ({span:.1f} ms), interval {interval:.3f} ms; the sqlite "
           f"writer committed {rows1 - rows0} rows ({rate:.0f}/s)")
    t.require(t_before <= a_ms < b_ms <= t_after,
              f"part 1: the recording's window {a_ms:.0f}..{b_ms:.0f} is not within the reads "
              f"of /proc around the agent ({t_before:.0f}..{t_after:.0f})")
    t.check(rows1 > rows0, "part 1: the sqlite writer committed no row during the recording")
    note_offcpu(t, "part 1", prof)
    rec = prof.recording()
    t.note(f"part 1: FxRecording {rec}")

    got = per_thread(prof)
    keys = lived_through(before, after)
    rows = []
    for k in keys:
        on_n, off, runnable = got.get(k, [0, 0.0, 0.0])
        sched_on, sched_rq = poll.delta_ms(k, before[k][0], a_ms, b_ms)
        rows.append(dict(pid=k[0], tid=k[1], what=roles[k[0]], comm=before[k][1],
                         on_n=on_n, on=on_n * interval, off=off, runnable=runnable,
                         sched_on=sched_on, sched_rq=sched_rq,
                         read_on=(after[k][2] - before[k][2]) / 1e6,
                         read_rq=(after[k][3] - before[k][3]) / 1e6))
    whats = {r["what"] for r in rows}
    t.require({"nginx master", "nginx worker", "upstream", "sqlite writer"} <= whats,
              f"part 1: threads that lived through the recording: {keys} ({sorted(whats)})")
    adds_up(t, f"part 1 (fxagent --once --off-cpu, {SECONDS} s)", rows, span,
            "part1-threads.txt")
    t.note("part 1: schedstat between the reads around the agent (" +
           f"{(t_after - t_before) / 1000:.2f} s): " +
           ", ".join(f"{r['tid']} on {r['read_on']:.0f} rq {r['read_rq']:.0f}" for r in rows))

    # On-CPU against the kernel's clock over the same window.
    seen = [r for r in rows if r["sched_on"] is not None]
    n = sum(r["on_n"] for r in seen)
    want = sum(r["sched_on"] for r in seen) / interval
    tol = 3.5 * math.sqrt(max(want, 1)) + 0.05 * want
    rq = sum(r["sched_rq"] or 0 for r in seen)
    runnable = sum(r["runnable"] for r in seen)
    t.note(f"part 1: on-CPU of the {len(seen)} threads: {n} samples ({n * interval:.1f} ms); "
           f"schedstat says {want * interval:.1f} ms ({want:.1f} samples, tolerance "
           f"{tol:.1f}); run queue {rq:.1f} ms by schedstat, {runnable:.1f} ms runnable in "
           f"the profile; off-CPU {sum(r['off'] for r in seen):.1f} ms in the profile")
    t.check(len(seen) == len(rows), f"part 1: the schedstat poll missed threads "
            f"{[r['tid'] for r in rows if r['sched_on'] is None]}")
    t.check(abs(n - want) <= tol,
            f"part 1: {n} CPU samples of the threads that lived through the recording, but "
            f"the kernel counted {want * interval:.0f} ms of CPU for them in its window, "
            f"{want:.0f} samples' worth (more than {tol:.0f} apart)")


def part2(t, s):
    roles = s.roles()
    pids = sorted(roles)
    before, t_before = read_threads(pids)
    poll = SchedPoller(before)
    poll.start()
    try:
        d = Daemon(t, "daemon", f"""window:
  seconds: {WINDOW}
sampling:
  off_cpu:
    enabled: true
""")
        d.wait_started()
        time.sleep(DAEMON_SECONDS)
        rc = d.stop()
    finally:
        poll.stop()
    after, t_after = read_threads(pids)
    t.require(rc == 0, f"the daemon exited {rc} after SIGINT: {d.text()[-2000:]}")
    t.check("off-CPU time is not recorded" not in d.text(),
            f"the daemon did not record off-CPU time: {d.text()[-1000:]}")
    gone = s.running()
    t.require(not gone, f"part 2: ended while the daemon ran: {gone}")
    chunks = d.chunks()
    t.require(len(chunks) == 1, f"part 2: chunks of targets {sorted(chunks)}, want one "
              "(the whole system)")
    (target, lst), = chunks.items()

    keys = lived_through(before, after)
    sums = {k: [0, 0.0, 0.0] for k in keys}
    span = 0.0
    used = []
    edges = []
    interval = None
    for seq, path in lst:
        prof = t.load(path)
        a_ms, b_ms = prof.window_ms()
        if not (t_before <= a_ms < b_ms <= t_after):
            t.note(f"part 2: chunk {seq} ({a_ms:.0f}..{b_ms:.0f}) is not within the reads "
                   f"({t_before:.0f}..{t_after:.0f}): left out")
            continue
        interval = prof.data["meta"]["interval"]
        meta = prof.data["meta"]["fxagent"]
        t.note(f"part 2: chunk {seq}: {a_ms:.0f}..{b_ms:.0f} ({b_ms - a_ms:.1f} ms), "
               f"offCpu {meta.get('offCpu')}, samples {meta.get('samples')}")
        span += b_ms - a_ms
        used.append(seq)
        edges.append((a_ms, b_ms))
        got = per_thread(prof)
        for k in keys:
            row = got.get(k)
            if row:
                sums[k][0] += row[0] * interval
                sums[k][1] += row[1]
                sums[k][2] += row[2]
    t.require(used and span >= 0.5 * DAEMON_SECONDS * 1000,
              f"part 2: chunks {used} span {span:.0f} ms of a {DAEMON_SECONDS} s run")
    rows = []
    for k in keys:
        on = rq = 0.0
        for a_ms, b_ms in edges:
            x, y = poll.delta_ms(k, before[k][0], a_ms, b_ms)
            on, rq = (None if x is None or on is None else on + x,
                      None if y is None or rq is None else rq + y)
        rows.append(dict(pid=k[0], tid=k[1], what=roles[k[0]], comm=before[k][1],
                         on=sums[k][0], off=sums[k][1], runnable=sums[k][2],
                         sched_on=on, sched_rq=rq))
    t.note(f"part 2: {len(used)} chunks of target {target!r} ({span:.1f} ms) within the "
           f"reads of /proc around the daemon ({(t_after - t_before) / 1000:.2f} s)")
    adds_up(t, f"part 2 (daemon, {WINDOW} s windows, chunks {used[0]}..{used[-1]})", rows, span,
            "part2-threads.txt")


def body(t):
    fxtest.skip_without_btf()
    # Both parts, with the agent's start and symbolizing, and some room.
    life = fxtest.scaled(SECONDS + DAEMON_SECONDS + 90)
    s = Setup(t)
    try:
        s.start(life)
        time.sleep(WARMUP)
        gone = s.running()
        t.require(not gone, f"ended before the recording: {gone}; see ab.log, upstream.log, "
                  "writer.log and nginx/logs")
        t.note(f"set-up: upstream {s.upstream.pid} on port {s.up_port}, nginx {s.nginx.pid} "
               f"(workers {s.workers}) on {s.port}, sqlite writer {s.writer.pid} in "
               f"{s.dbdir} ({fs_type(s.dbdir)}), ab -k -c {CLIENTS}")
        part1(t, s)
        part2(t, s)
    finally:
        s.stop()


fxtest.main(body)

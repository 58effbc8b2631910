# SPDX-License-Identifier: MIT
"""The daemon as a Type=notify service, without systemd: the test is the
service manager. It listens on a datagram socket named by NOTIFY_SOCKET (with
WATCHDOG_USEC=1 s) while the agent runs a process target with 1 s windows and a
metrics text file, then:

- READY=1 comes first, once the agent has said it samples (its events open);
- WATCHDOG=1 comes about every half second (never a gap of 1 s);
- STATUS= comes after every window, one per chunk written;
- SIGHUP with a broken config: RELOADING=1 then READY=1, the error logged as
  FILE:LINE:COL, the agent keeps running and writing chunks of the old target;
- SIGHUP with a good config naming another target and 2 s windows:
  RELOADING=1 then READY=1; the open window is written under the old config,
  and the new target's chunks start where the old one's end, with the same
  seq sequence, 2 s aligned windows, and fx-hot-ab's functions;
- the metrics file (Prometheus text) counts the windows, chunks and samples
  that the chunks show;
- SIGTERM: STOPPING=1, exit 0, and the partial window written.
"""

import os
import re
import resource
import signal
import socket
import threading
import time

import fxtest
from fxdaemon import Daemon, EPS_MS, check_chunk


class Listener(threading.Thread):
    """The service manager's end of NOTIFY_SOCKET: (monotonic time, message)."""

    def __init__(self, path):
        super().__init__(daemon=True)
        self.path = path
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(path)
        self.sock.settimeout(0.2)
        self.msgs = []
        self.lock = threading.Lock()
        self.done = False
        self.on_ready = None

    def run(self):
        while not self.done:
            try:
                data = self.sock.recv(4096)
            except socket.timeout:
                continue
            text = data.decode("utf-8", "replace")
            if text.startswith("READY=1") and self.on_ready:
                self.on_ready()
                self.on_ready = None
            with self.lock:
                self.msgs.append((time.monotonic(), text))

    def since(self, t0):
        with self.lock:
            return [(t, m) for t, m in self.msgs if t >= t0]

    def wait_for(self, t0, pred, timeout):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            got = [m for m in self.since(t0) if pred(m[1])]
            if got:
                return got[0]
            time.sleep(0.05)
        return None

    def stop(self):
        self.done = True
        self.join()
        self.sock.close()


def config(target, window, metrics):
    return (f"window:\n  seconds: {window}\n"
            f"targets:\n  - name: {target}\n    process: fx-hot-ab\n"
            f"metrics:\n  textfile: {metrics}\n")


def read_metrics(path):
    out = {}
    with open(path) as f:
        for line in f:
            m = re.match(r"^([a-z_]+)(\{[^}]*\})? (\S+)$", line)
            if m:
                out[m[1]] = float(m[3])
    return out


def read_caches(path):
    """{series: {cache: value}} of the fxagent_cache_* series."""
    out = {}
    with open(path) as f:
        for line in f:
            m = re.match(r'^(fxagent_cache_[a-z_]+)\{cache="([a-z_]+)"\} (\S+)$', line)
            if m:
                out.setdefault(m[1], {})[m[2]] = float(m[3])
    return out


def body(t):
    sock = os.path.join(t.work, "notify.sock")
    metrics = os.path.join(t.work, "fxagent.prom")
    lis = Listener(sock)
    w = t.workload("fx-hot-ab", 60)
    d = None

    def ready_seen():
        # READY=1 only once the agent samples: its notice is already logged.
        lis.ready_logged = d is not None and "sampling " in d.text()

    lis.ready_logged = None
    lis.on_ready = ready_seen
    lis.start()
    try:
        t0 = time.monotonic()
        d = Daemon(t, "notify", config("hot", 1, metrics),
                   env={"NOTIFY_SOCKET": sock, "WATCHDOG_USEC": "1000000"})
        ready = lis.wait_for(t0, lambda m: "READY=1" in m, 15)
        t.require(ready, f"no READY=1 within 15 s; log: {d.text()[-2000:]}")
        first = lis.since(t0)[0][1]
        t.check(first.startswith("READY=1"), f"the first message is {first!r}, want READY=1")
        t.check(lis.ready_logged, "READY=1 came before the agent said it was sampling")
        time.sleep(3.2)

        # A broken config: reported, and the running one stays.
        cfg = d.config
        with open(cfg, "w") as f:
            f.write("window:\n  seconds: 1\n  bogus: 3\n")
        t_bad = time.monotonic()
        bad_wall_ms = time.time() * 1000
        d.p.send_signal(signal.SIGHUP)
        rel = lis.wait_for(t_bad, lambda m: "RELOADING=1" in m, 5)
        t.check(rel, "no RELOADING=1 after SIGHUP")
        rdy = lis.wait_for(t_bad, lambda m: m.startswith("READY=1"), 5)
        t.check(rdy and rel and rdy[0] >= rel[0], "no READY=1 after RELOADING=1 (broken config)")

        def after_bad():
            return [s for s, p in d.chunks(running=True).get("hot", [])
                    if fxtest.Profile(p).data["meta"]["fxagent"]["windowStart"] > bad_wall_ms]

        # A whole 1 s window after it, written: the next boundary comes within
        # 1 s, the window lasts 1 s, and writing it gets 5 s (a slow machine,
        # or one CPU shared with other work, takes seconds, not milliseconds).
        t.check(fxtest.wait_for(after_bad, 2 + 5, 0.1),
                "no chunk of target hot started after the broken reload")
        t.check(d.p.poll() is None, f"fxagent exited {d.p.returncode} after a reload with a "
                f"broken config")
        t.check(f"{cfg}:3:3: window.bogus: unknown key" in d.text(),
                f"the log does not name {cfg}:3:3 and window.bogus: {d.text()[-1500:]}")

        # A good one: another target, 2 s windows, from the next window on.
        with open(cfg, "w") as f:
            f.write(config("hot2", 2, metrics) + f"output:\n  directory: {d.out}\n")
        t_good = time.monotonic()
        d.p.send_signal(signal.SIGHUP)
        rel = lis.wait_for(t_good, lambda m: "RELOADING=1" in m, 5)
        rdy = lis.wait_for(t_good, lambda m: m.startswith("READY=1"), 5)
        t.check(rel and rdy and rdy[0] >= rel[0], "no RELOADING=1 then READY=1 after SIGHUP")
        # Two chunks of hot2 (2 s windows) written, and a little more.
        fxtest.wait_for(lambda: len(d.chunks(running=True).get("hot2", [])) >= 2, 5.5, 0.1)
        time.sleep(0.5)
        t_stop = time.monotonic()
        # The agent's CPU, all threads: it is the only child reaped in between.
        ru0 = resource.getrusage(resource.RUSAGE_CHILDREN)
        rc = d.stop(signal.SIGTERM)
        ru1 = resource.getrusage(resource.RUSAGE_CHILDREN)
        agent_cpu = (ru1.ru_utime + ru1.ru_stime) - (ru0.ru_utime + ru0.ru_stime)
        stopping = lis.wait_for(t_stop, lambda m: "STOPPING=1" in m, 5)
    finally:
        t.kill_processes()
        lis.stop()
    t.check(rc == 0, f"fxagent exited {rc} after SIGTERM")
    t.check(stopping, "no STOPPING=1 after SIGTERM")
    w.wait()

    msgs = lis.msgs
    dog = [tm for tm, m in msgs if m == "WATCHDOG=1"]
    span = msgs[-1][0] - msgs[0][0]
    gaps = [b - a for a, b in zip(dog, dog[1:])]
    t.note(f"{len(dog)} WATCHDOG=1 over {span:.1f} s, largest gap "
           f"{max(gaps) if gaps else 0:.2f} s")
    t.check(len(dog) >= span / 0.8, f"{len(dog)} WATCHDOG=1 in {span:.1f} s with "
            f"WATCHDOG_USEC=1 s, want one every 0.5 s or so")
    t.check(gaps and max(gaps) < 1.0, f"a gap of {max(gaps) if gaps else 0:.2f} s between "
            "WATCHDOG=1, the watchdog would have fired")

    chunks = d.chunks()
    t.require(set(chunks) == {"hot", "hot2"}, f"chunk targets {sorted(chunks)}, want hot "
              "then hot2")
    allc = sorted([(s, "hot", p) for s, p in chunks["hot"]] +
                  [(s, "hot2", p) for s, p in chunks["hot2"]])
    seqs = [s for s, _, _ in allc]
    t.check(seqs == list(range(len(seqs))), f"seq numbers {seqs} are not 0, 1, ... across "
            "the reload")
    t.check(max(s for s, _ in chunks["hot"]) < min(s for s, _ in chunks["hot2"]),
            "chunks of the old target after the new one's")
    status = [m for _, m in msgs if m.startswith("STATUS=") and "last window" in m]
    t.check(len(status) == len(allc), f"{len(status)} STATUS= after windows, "
            f"{len(allc)} chunks written")
    t.check(any("1 of 1 targets sampled" in m for m in status), f"STATUS= lines: {status[:3]}")

    prev = None
    total = 0
    for seq, target, path in allc:
        prof = t.load(path)
        fx = check_chunk(t, prof, target, seq, path)
        total += fx["samples"]
        name = os.path.basename(path)
        if prev is not None:
            t.check(abs(prev - fx["windowStart"]) <= EPS_MS,
                    f"{name}: starts at {fx['windowStart']}, the previous window ended at "
                    f"{prev}")
        prev = fx["windowEnd"]
        length = fx["windowEnd"] - fx["windowStart"]
        if target == "hot2" and seq not in (allc[-1][0],):
            t.check(fx["windowEnd"] % 2000 == 0, f"{name}: ends at {fx['windowEnd']}, "
                    "not on a 2 s boundary")
            if fx["windowStart"] % 2000 == 0:
                t.check(length == 2000, f"{name}: a whole window of {length} ms, want 2000")
        if target == "hot" and seq > 0:
            t.check(length <= 1000 + 200, f"{name}: {length} ms, more than a 1 s window")
        hot = prof.weight(prof.threads, lambda st: fxtest.contains(
            prof.user_names(st), ["hot_caller"]))
        if length >= 900:
            t.check(hot > 0.5 * fx["samples"], f"{name}: {hot} of {fx['samples']} samples in "
                    "hot_caller")
    hot2 = chunks["hot2"]
    t.check(len(hot2) >= 2, f"{len(hot2)} chunks of hot2 in {fxtest.scaled(5.5):.1f} s of 2 s "
            "windows")

    m = read_metrics(metrics)
    t.note(f"metrics: { {k: v for k, v in m.items() if k.endswith('_total')} }")
    t.check(m.get("fxagent_windows_total") == len(allc),
            f"fxagent_windows_total {m.get('fxagent_windows_total')}, {len(allc)} windows")
    t.check(m.get("fxagent_chunks_written_total") == len(allc),
            f"fxagent_chunks_written_total {m.get('fxagent_chunks_written_total')}, "
            f"{len(allc)} chunks")
    t.check(m.get("fxagent_samples_total") == total,
            f"fxagent_samples_total {m.get('fxagent_samples_total')}, {total} in the chunks")
    t.check(m.get("fxagent_symbol_cache_hits_total", 0) > 0, "no symbol cache hits counted")
    # Writing the chunks took some CPU, and not more than the whole agent's.
    pub = m.get("fxagent_publish_cpu_seconds_total", 0)
    t.note(f"publishing: {pub:.3f} s of CPU, the agent {agent_cpu:.3f} s")
    t.check(0 < pub <= agent_cpu, f"fxagent_publish_cpu_seconds_total {pub}, the agent's CPU "
            f"{agent_cpu:.3f} s")
    # Every cache: its entries and evictions, and its bytes where known.
    caches = read_caches(metrics)
    t.note(f"caches: {caches}")
    every = ("symbol_objects", "symbol_dwarf", "symbol_results", "objects", "processes",
             "threads", "unwind", "cfi_tables", "jit_cfi")
    for series in ("fxagent_cache_entries", "fxagent_cache_evictions_total"):
        missing = [c for c in every if c not in caches.get(series, {})]
        t.check(not missing, f"{series}: no series for {missing}")
    entries, nbytes = caches.get("fxagent_cache_entries", {}), caches.get("fxagent_cache_bytes", {})
    for c in ("symbol_objects", "symbol_results", "objects", "processes", "threads",
              "cfi_tables"):
        t.check(entries.get(c, 0) > 0 and nbytes.get(c, 0) > 0,
                f"cache {c}: {entries.get(c)} entries, {nbytes.get(c)} bytes")
    t.check(not os.path.exists(metrics + ".tmp"), "the metrics file's temporary copy is left")


if __name__ == "__main__":
    fxtest.main(body)

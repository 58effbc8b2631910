# SPDX-License-Identifier: MIT
"""Java names stay fresh: the agent asks the JVM for a new perf map.

HotSpot writes /tmp/perf-PID.map only when asked (`jcmd PID
Compiler.perfmap`), as a snapshot: code C2 compiles after it has no name.
The agent asks the JVM itself, through its attach listener, when a window's
JIT frames went unnamed (include/fxagent/jvmrefresh.h). Checked here:

1. A Java HTTP service (com.sun.net.httpserver on loopback, a free port)
   with two routes whose work is in different methods. Route A is warmed,
   `jcmd Compiler.perfmap` writes the first map, then the load moves to
   route B, whose methods C2 compiles after that map. A recording with
   `--no-jvm-perfmap` (symbolization.jvm_perfmap: false) shows the stale map (the "before"
   figure); one with the default: >= 95% of the JIT frames named, route B's
   methods among them, the lib's status "perf map".
2. JVMs that never had a listener (no jcmd run): a plain one, whose
   listener the agent starts (attach file and SIGQUIT): named, no thread
   dump on its stdout, no attach file left; and JVMs that must not be
   signalled: -XX:+DisableAttachMechanism (on the command line and in
   JAVA_TOOL_OPTIONS), whose lib's status says how many addresses stayed
   unnamed and why, and -Xrs (SIGQUIT would end it; HotSpot starts its
   listener at start-up then, and the agent uses it). All stay alive and
   print no thread dump.
Skipped, saying so, where javac, java or jcmd is missing
(openjdk-17-jdk-headless).
"""

import os
import re
import shutil
import subprocess
import threading
import time
import urllib.request

import fxtest
from fxjit import FIB_JAVA, jit_named, jit_status, stacks

SVC_JAVA = """\
import com.sun.net.httpserver.HttpExchange;
import com.sun.net.httpserver.HttpServer;
import java.io.OutputStream;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.util.concurrent.Executors;

public class Svc {
    // Route A's work.
    static long alphaSum(int n) {
        long s = 0;
        for (int i = 0; i < n; i++) s += (i * 31L) ^ (s >>> 3);
        return s;
    }

    // Route B's work: other methods, compiled only once B is asked for.
    static long betaMix(long[] v, int rounds) {
        long h = 0x9e3779b97f4a7c15L;
        for (int r = 0; r < rounds; r++)
            for (int i = 0; i < v.length; i++) h = betaStep(h, v[i] + r);
        return h;
    }

    static long betaStep(long h, long x) {
        h ^= x * 0xff51afd7ed558ccdL;
        return Long.rotateLeft(h, 27) * 5 + 0x52dce729;
    }

    static void reply(HttpExchange ex, long v) throws java.io.IOException {
        byte[] b = Long.toString(v).getBytes();
        ex.sendResponseHeaders(200, b.length);
        try (OutputStream o = ex.getResponseBody()) { o.write(b); }
    }

    public static void main(String[] a) throws Exception {
        long[] v = new long[4096];
        for (int i = 0; i < v.length; i++) v[i] = i * 7919L;
        HttpServer s = HttpServer.create(
            new InetSocketAddress(InetAddress.getLoopbackAddress(), 0), 64);
        s.createContext("/a", ex -> reply(ex, alphaSum(2_000_000)));
        s.createContext("/b", ex -> reply(ex, betaMix(v, 400)));
        s.setExecutor(Executors.newFixedThreadPool(2));
        s.start();
        System.out.println("port " + s.getAddress().getPort());
        System.out.flush();
    }
}
"""

SECONDS = 10


class Load(threading.Thread):
    """Requests to one route, two at a time, until stopped or a bound."""

    def __init__(self, port, route, max_requests=200000, max_seconds=120):
        super().__init__(daemon=True)
        self.url = f"http://127.0.0.1:{port}/{route}"
        self.max_requests, self.max_seconds = max_requests, max_seconds
        self.done = threading.Event()
        self.count = self.errors = 0
        self.lock = threading.Lock()

    def _worker(self, end):
        while not self.done.is_set() and time.monotonic() < end:
            with self.lock:
                if self.count >= self.max_requests:
                    return
                self.count += 1
            try:
                with urllib.request.urlopen(self.url, timeout=10) as r:
                    r.read()
            except OSError:
                with self.lock:
                    self.errors += 1
                time.sleep(0.05)

    def run(self):
        end = time.monotonic() + self.max_seconds
        ws = [threading.Thread(target=self._worker, args=(end,), daemon=True) for _ in range(2)]
        for w in ws:
            w.start()
        for w in ws:
            w.join()

    def stop(self):
        self.done.set()
        self.join(timeout=30)


def read_port(t, proc, log):
    """The port the service printed on its stdout (a file)."""
    def port():
        with open(log) as f:
            m = re.search(r"^port (\d+)$", f.read(), re.M)
        return int(m[1]) if m else (proc.poll() is not None and -1)
    p = fxtest.wait_for(port, 30)
    t.require(p and p > 0, f"the service printed no port (see {log})")
    return p


def service(t, tools):
    """Part 1: the stale map and the fresh one."""
    out = os.path.join(t.work, "svc.out")
    # betaMix stays a method of its own: C2 inlines it into the route's
    # handler once that is hot, sooner or later by the machine's speed.
    w = t.spawn([tools["java"], "-XX:+PreserveFramePointer", "-XX:CompileCommand=quiet",
                 "-XX:CompileCommand=dontinline,Svc::betaMix", "-cp", t.work, "Svc"],
                cwd=t.work, stdout=open(out, "w"), stderr=subprocess.STDOUT)
    port = read_port(t, w, out)
    a = Load(port, "a")
    a.start()
    time.sleep(fxtest.scaled(4))  # route A compiled by C2
    p = subprocess.run([tools["jcmd"], str(w.pid), "Compiler.perfmap"], capture_output=True,
                       text=True, timeout=fxtest.scaled(60))
    t.require(p.returncode == 0, f"jcmd Compiler.perfmap exited {p.returncode}: "
              f"{(p.stdout + p.stderr)[-400:]}")
    a.stop()
    b = Load(port, "b")
    b.start()
    try:
        time.sleep(fxtest.scaled(4))  # route B compiled, after the map
        before = t.record("svc-off", 5, pids=[w.pid], extra=["--no-jvm-perfmap"])
        after = t.record("svc", SECONDS, pids=[w.pid])
    finally:
        b.stop()
    t.check(b.count > 0 and b.errors == 0, f"route B: {b.count} requests, {b.errors} failed")

    f0, n0 = jit_named(before, w.pid)
    st0 = jit_status(before, w.pid)
    t.note(f"service, jvm_perfmap off: {n0} of {f0} JIT frames named; status {st0!r}")
    t.check(st0 and "asking the JVM for a fresh perf map is off" in st0,
            f"with jvm_perfmap off the JIT lib says {st0!r}")
    f1, n1 = jit_named(after, w.pid)
    st1 = jit_status(after, w.pid)
    names = {n for ns, _, _ in stacks(after, w.pid) for n in ns}
    beta = sorted(n for n in names if "Svc.beta" in n)
    t.note(f"service: {n1} of {f1} JIT frames named; status {st1!r}; route B: {beta}")
    t.require(f1 >= 20, f"only {f1} JIT frames of the service")
    t.check(n1 >= 0.95 * f1, f"{n1} of {f1} JIT frames named")
    t.check(any("Svc.betaMix" in n for n in beta), f"route B's betaMix not named: {beta}")
    t.check(st1 == "perf map", f"the JIT lib's names come from {st1!r}, want 'perf map'")
    t.check("Full thread dump" not in open(out).read(), "the service printed a thread dump")


def never_attached(t, tools):
    """Part 2: JVMs without a listener: one the agent may start, and three
    it must not signal."""
    with open(os.path.join(t.work, "Fib.java"), "w") as f:
        f.write(FIB_JAVA)
    subprocess.run([tools["javac"], "Fib.java"], cwd=t.work, check=True, timeout=120)
    env_off = dict(os.environ, JAVA_TOOL_OPTIONS="-XX:+DisableAttachMechanism")
    kinds = (("plain", [], None),
             ("disabled", ["-XX:+DisableAttachMechanism"], None),
             ("env", [], env_off),
             ("xrs", ["-Xrs"], None))
    jvms = {}
    for tag, opts, env in kinds:
        out = os.path.join(t.work, f"fib-{tag}.out")
        jvms[tag] = (t.spawn([tools["java"], "-XX:+PreserveFramePointer", *opts, "-cp", t.work,
                              "Fib"], cwd=t.work, env=env, stdout=open(out, "w"),
                             stderr=subprocess.STDOUT), out)
    time.sleep(fxtest.scaled(4))  # compiled by C2 by then
    prof = t.record("fib", 4, pids=[p.pid for p, _ in jvms.values()])
    time.sleep(1)  # a thread dump, were there one, is written by then
    for tag, (p, out) in jvms.items():
        alive = p.poll() is None
        text = open(out).read()
        st = jit_status(prof, p.pid)
        frames, named = jit_named(prof, p.pid)
        t.note(f"{tag}: alive {alive}; {named} of {frames} JIT frames named; status {st!r}")
        t.check(alive, f"{tag}: the JVM ended ({p.returncode})")
        t.check("Full thread dump" not in text, f"{tag}: the JVM printed a thread dump")
        for d in (t.work, "/tmp"):
            t.check(not os.path.exists(os.path.join(d, f".attach_pid{p.pid}")),
                    f"{tag}: an attach file left in {d}")
        t.require(frames >= 20, f"{tag}: only {frames} JIT frames")
        if tag in ("plain", "xrs"):
            # -Xrs: HotSpot starts its listener at start-up (no signal could
            # start it later): asked without a signal, which would end it.
            t.check(named >= 0.95 * frames, f"{tag}: {named} of {frames} JIT frames named")
            t.check(st == "perf map", f"{tag}: the JIT lib says {st!r}, want 'perf map'")
            continue
        want = {"disabled": "JVM attach disabled (-XX:+DisableAttachMechanism in its "
                            "command line)",
                "env": "JVM attach disabled (-XX:+DisableAttachMechanism in its "
                       "JAVA_TOOL_OPTIONS)"}[tag]
        m = re.search(r"; (\d+) address(?:es)? unnamed: (.*)$", st or "")
        t.check(m and m[2] == want, f"{tag}: the JIT lib says {st!r}, want '...: {want}'")
        t.check(named == 0, f"{tag}: {named} JIT frames named without a perf map")
    # Said once per process, at the default level.
    log = open(os.path.join(t.work, "fib.agent.log")).read()
    for tag in ("disabled", "env"):
        pid = jvms[tag][0].pid
        n = log.count(f"JVM {pid}: JIT frames")
        t.check(n == 1, f"{tag}: logged {n} times, want once")


def body(t):
    tools = {n: shutil.which(n) for n in ("javac", "java", "jcmd")}
    if not all(tools.values()):
        print(f"SKIP: no {', '.join(n for n, p in tools.items() if not p)} here "
              "(apt-get install openjdk-17-jdk-headless)")
        raise SystemExit(fxtest.SKIP)
    with open(os.path.join(t.work, "Svc.java"), "w") as f:
        f.write(SVC_JAVA)
    subprocess.run([tools["javac"], "Svc.java"], cwd=t.work, check=True, timeout=120)
    service(t, tools)
    t.kill_processes()
    never_attached(t, tools)


if __name__ == "__main__":
    fxtest.main(body)

# SPDX-License-Identifier: MIT
"""Helpers for the fxagent integration tests (python3 standard library only).

A test is a function `body(t)` handed to `fxtest.main(body)`. `t` (a Test)
starts workloads, runs `fxagent --once` around them, lints every profile the
agent writes, and reads it twice: raw (the gzip JSON itself, see Profile) and
through the Firefox Profiler's own loader (profiler-cli, see Cli).

`t.check(cond, msg)` records a failure and goes on, so one run reports every
broken expectation; `t.require(cond, msg)` stops the test. Exit codes: 0 pass,
1 fail, 77 skip (ctest's SKIP_RETURN_CODE).

Paths come from the environment (the CMake registration sets them):
  FXAGENT          the agent binary
  FX_WORKLOAD_DIR  directory of the fx-* workload binaries
  FX_PROFILER_CLI  profiler-cli from scripts/install-test-deps.sh
  FX_LINT_PROFILE  tests/tools/lint_profile.py
  FX_TEST_WORK     scratch root; each test keeps its files in FX_TEST_WORK/<test>
"""

import bisect
import gzip
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import traceback

SKIP = 77
# The agent's default sampling frequency, which the tests run it at.
HZ = 99

# How much longer than a plain build on a quiet machine things may take:
# scripts/sanitize.sh configures its build with FX_TIME_SCALE (ASan and UBSan
# slow the agent down 2-3 times) and CMake hands it to every test. Deadlines,
# timeouts and waits for the agent to produce something are multiplied by it;
# what is asserted stays the same.
TIME_SCALE = max(1.0, float(os.environ.get("FX_TIME_SCALE") or 1))

# profiler-cli: tries of a load or a query, and what it says when its daemon
# was not (yet, or for a moment) reachable.
CLI_TRIES = 3
CLI_TRANSIENT = re.compile(r"did not become ready|not reachable|cannot be reached|"
                           r"responding again|ECONNREFUSED|ECONNRESET|EPIPE")


def scaled(seconds):
    """A deadline or timeout of `seconds` on a plain build, for this build."""
    return seconds * TIME_SCALE


def wait_for(cond, timeout, period=0.05):
    """Polls cond() until it returns something true or `timeout` (scaled) seconds
    pass; returns the last value of cond()."""
    deadline = time.monotonic() + scaled(timeout)
    while True:
        got = cond()
        if got or time.monotonic() >= deadline:
            return got
        time.sleep(period)


def wait_drained(count, stall, period=0.2):
    """Polls count() until it is 0, or it has not fallen for `stall` (scaled)
    seconds: a queue that a slow machine drains slowly but steadily is waited
    for, one that is stuck is not. Returns the last count."""
    last, since = count(), time.monotonic()
    while last:
        time.sleep(period)
        now = count()
        if now < last:
            last, since = now, time.monotonic()
        elif time.monotonic() - since >= scaled(stall):
            break
    return last


def bpf_linked(pid):
    """Whether @pid holds a BPF link: the off-CPU program is attached."""
    try:
        return any(os.readlink(f"/proc/{pid}/fd/{f}") == "anon_inode:bpf_link"
                   for f in os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        return False


def skip_without_btf():
    """Off-CPU time needs the kernel's BTF: a kernel without it truly lacks
    the feature, and the test says so and skips."""
    if not os.path.exists("/sys/kernel/btf/vmlinux"):
        print("SKIP: this kernel has no BTF (/sys/kernel/btf/vmlinux), which off-CPU "
              "time's BPF program needs (CONFIG_DEBUG_INFO_BTF)")
        raise SystemExit(SKIP)


class Stop(Exception):
    """Raised by Test.require: the test cannot go on."""


def sample_times(samples):
    """The times of a samples table, from its `time` or its `timeDeltas`
    (summed in whole nanoseconds, as the agent wrote them)."""
    if "timeDeltas" not in samples:
        return list(samples["time"])
    out, at = [], 0
    for d in samples["timeDeltas"]:
        at += round(d * 1e6)
        out.append(at / 1e6)
    return out


class Profile:
    """A processed profile (v66) read straight from the file the agent wrote."""

    def __init__(self, path):
        self.path = path
        with gzip.open(path, "rt", encoding="utf-8") as f:
            self.data = json.load(f)
        shared = self.data["shared"]
        strings = shared["stringArray"]
        funcs = shared["funcTable"]
        frames = shared["frameTable"]
        stacks = shared["stackTable"]
        cats = self.data["meta"]["categories"]
        self.func_names = [strings[i] for i in funcs["name"]]
        res_lib = shared["resourceTable"]["lib"]
        libs = self.data["libs"]
        # The name of the lib each function is in (None: no lib, e.g. kernel).
        self.func_lib = [libs[res_lib[r]]["name"] if r is not None and res_lib[r] is not None
                         else None for r in funcs["resource"]]
        self.frame_func = frames["func"]
        self.frame_cat = [cats[c]["name"] if c is not None else None
                          for c in frames["category"]]
        self.stack_frame = stacks["frame"]
        self.stack_prefix = [i - off if off else None
                             for i, off in enumerate(stacks["prefixOffset"])]
        self._frames_of = {}
        self.threads = self.data["threads"]

    def stack_frames(self, stack):
        """Frame indexes of a stack, root first ([] for a null stack)."""
        if stack is None:
            return []
        got = self._frames_of.get(stack)
        if got is None:
            out = []
            s = stack
            while s is not None:
                out.append(self.stack_frame[s])
                s = self.stack_prefix[s]
            out.reverse()
            got = self._frames_of[stack] = out
        return got

    def stack_names(self, stack):
        """Function names of a stack, root first."""
        return [self.func_names[self.frame_func[f]] for f in self.stack_frames(stack)]

    def samples(self, thread):
        """(stack, weight) for each sample of a thread."""
        s = thread["samples"]
        weights = s.get("weight") or [1] * s["length"]
        return list(zip(s["stack"], weights))

    def threads_of(self, pid):
        return [th for th in self.threads if str(th["pid"]) == str(pid)]

    def threads_named(self, name):
        return [th for th in self.threads if th["name"] == name]

    def weight(self, threads, pred=lambda stack: True):
        """Total sample weight of `threads` whose stack satisfies pred(stack)."""
        return sum(w for th in threads for st, w in self.samples(th) if pred(st))

    def share(self, threads, pred):
        """Percentage of the threads' samples whose stack satisfies pred."""
        total = self.weight(threads)
        return 100.0 * self.weight(threads, pred) / total if total else 0.0

    def has_func(self, name):
        return lambda st: name in self.stack_names(st)

    def user_names(self, stack):
        """Function names of a stack without its kernel frames, root first."""
        return [self.func_names[self.frame_func[f]] for f in self.stack_frames(stack)
                if self.frame_cat[f] != "Kernel"]

    def recording(self):
        """Sum of the FxRecording markers' counters (samples, lost, truncated),
        on whichever track carries them (the busiest)."""
        got = {"samples": 0, "lost": 0, "truncated": 0}
        markers = [d for th in self.threads
                   for d in th["markers"]["data"] if d and d.get("type") == "FxRecording"]
        if not markers:
            raise Stop("no FxRecording marker on any track")
        for d in markers:
            for k in got:
                if not isinstance(d.get(k), int):
                    raise Stop(f"FxRecording marker without integer {k}: {d}")
                got[k] += d[k]
        return got

    poll = None  # a CpuPoller run during the recording (Test.record's measure)

    def window_ms(self):
        """The recording's window, wall-clock ms: (start, end)."""
        fx = self.data["meta"]["fxagent"]
        return fx["windowStart"], fx["windowEnd"]

    def cpu_s(self, pid):
        """CPU seconds process pid used within the recording's window."""
        return self.poll.seconds(int(pid), *self.window_ms())

    def thread_cpu_s(self, pid, tid):
        """CPU seconds thread tid of pid used within the recording's window."""
        return self.poll.thread_seconds(int(pid), tid, *self.window_ms())

    def kernel_frames(self, stack):
        return [f for f in self.stack_frames(stack) if self.frame_cat[f] == "Kernel"]


class Cli:
    """One profiler-cli session on one profile, in its own session directory.

    profiler-cli runs a daemon that its commands reach over a Unix socket. Its
    `load` gives that daemon 500 ms (fixed in 0.10.0) to listen, which a loaded
    machine or a cold page cache overruns (the daemon is a Node.js process
    reading a 4 MB bundle). The client then gives up, but the daemon goes on:
    when it listens it names itself the session's current one (current.txt)
    and loads the profile. So a load that gave up on a daemon still starting
    waits for that daemon (a `status` that succeeds) rather than killing it and
    starting another under the same 500 ms; a load that fails otherwise is
    stopped and tried again, CLI_TRIES times in all, and a query that finds the
    daemon unreachable is retried; all then fail with what profiler-cli and its
    daemon log said. The session directory is a short
    path under /tmp: the socket inside it must fit a sockaddr_un (108 bytes),
    which a deep checkout's build tree would not."""

    def __init__(self, t, exe, profile_path, tag):
        self.t = t
        self.exe = exe
        self.tag = tag
        self.dir = tempfile.mkdtemp(prefix="fxpcli-")
        # Its directory first on PATH: a newer node installed beside it (see
        # scripts/install-test-deps.sh) then runs it.
        self.env = dict(os.environ, PROFILER_CLI_SESSION_DIR=self.dir,
                        PROFILER_CLI_LOAD_TIMEOUT_MS=str(int(scaled(60) * 1000)),
                        PATH=os.path.dirname(exe) + os.pathsep + os.environ.get("PATH", ""))
        errors = []
        for attempt in range(1, CLI_TRIES + 1):
            os.makedirs(self.dir, exist_ok=True)
            p = self._exec("load", profile_path)
            out = (p.stdout + p.stderr).strip()
            if p.returncode == 0 and "Profile load failed" not in out:
                if attempt > 1:
                    t.note(f"profiler-cli {tag}: loaded on try {attempt}; before: {errors}")
                return
            # A bad profile fails the same way every time: no retry hides it.
            t.require("Profile load failed" not in out,
                      f"profiler-cli cannot load {profile_path}: {out[-2000:]}")
            errors.append(f"try {attempt}: exit {p.returncode}: {out[-600:]}")
            starting = re.search(r"did not become ready.*running as pid (\d+)", out, re.S)
            if starting:
                waited = self._await_daemon(int(starting.group(1)), profile_path)
                if waited is not None:
                    t.note(f"profiler-cli {tag}: its daemon was ready {waited:.1f} s after "
                           f"the client gave up (try {attempt})")
                    return
            self.stop()
            time.sleep(0.5 * attempt)
        raise Stop(f"profiler-cli did not load {profile_path} in {CLI_TRIES} tries: "
                   f"{errors}; daemon log: {self.daemon_log()}")

    def _await_daemon(self, pid, profile_path):
        """Waits for a daemon that `load` gave up on while it was starting: seconds
        until its profile was loaded, or None if it died or took over a minute."""
        start = time.monotonic()
        deadline = start + scaled(60)
        current = os.path.join(self.dir, "current.txt")
        while time.monotonic() < deadline and _alive(pid):
            if os.path.exists(current):
                p = self._exec("status")
                out = (p.stdout + p.stderr).strip()
                if p.returncode == 0:
                    return time.monotonic() - start
                self.t.require("Profile load failed" not in out,
                               f"profiler-cli cannot load {profile_path}: {out[-2000:]}")
            time.sleep(0.2)
        return None

    def _exec(self, *args):
        cmd = [self.exe, *args]
        try:
            return subprocess.run(cmd, env=self.env, capture_output=True, text=True,
                                  timeout=scaled(120))
        except subprocess.TimeoutExpired:
            raise Stop(f"`{' '.join(cmd)}` did not end within {scaled(120):.0f} s; "
                       f"daemon log: {self.daemon_log()}")

    def daemon_log(self):
        """The tail of the session's daemon logs, for a failure message."""
        text = ""
        for name in sorted(os.listdir(self.dir)) if os.path.isdir(self.dir) else []:
            if name.endswith(".log"):
                with open(os.path.join(self.dir, name), errors="replace") as f:
                    text += f"[{name}] " + f.read()[-800:]
        return text or "(none)"

    def run(self, *args):
        errors = []
        for attempt in range(1, CLI_TRIES + 1):
            p = self._exec(*args)
            if p.returncode == 0:
                return p.stdout
            out = f"{p.stdout.strip()} {p.stderr.strip()}"
            errors.append(f"exit {p.returncode}: {out[-600:]}")
            if not CLI_TRANSIENT.search(out):
                break
            time.sleep(0.5 * attempt)
        raise Stop(f"`{self.exe} {' '.join(args)}` failed: {errors}; daemon log: "
                   f"{self.daemon_log()}")

    def json(self, *args):
        out = self.run(*args, "--json")
        try:
            return json.loads(out)
        except ValueError as e:
            raise Stop(f"profiler-cli {' '.join(args)} --json: not JSON ({e}): {out[:300]}")

    def threads(self):
        """The `thread list --json` rows (every thread, any CPU)."""
        return self.json("thread", "list", "--limit", "0")["threads"]

    def handles(self, pid=None, name=None):
        """Comma-joined thread handles of a pid and/or thread name ('' if none)."""
        rows = [r for r in self.threads()
                if (pid is None or str(r["pid"]) == str(pid))
                and (name is None or r["name"] == name)]
        return ",".join(r["threadHandle"] for r in rows)

    def functions(self, handles):
        """`thread functions` rows of the (merged) threads, by function name."""
        rows = self.json("thread", "functions", "--thread", handles, "--limit", "0")["functions"]
        out = {}
        for r in rows:
            # Names can repeat across libraries; keep the busiest row.
            if r["name"] not in out or r["totalSamples"] > out[r["name"]]["totalSamples"]:
                out[r["name"]] = r
        return out

    def top_down(self, handles):
        """The `samples-top-down` tree of the (merged) threads; also saves the text view."""
        text = self.run("thread", "samples-top-down", "--thread", handles, "--max-lines", "400")
        self.t.save(f"top-down-{self.tag}.txt", text)
        return self.json("thread", "samples-top-down", "--thread", handles,
                         "--max-lines", "400")["regularCallTree"]

    def stop(self):
        if not os.path.isdir(self.dir):
            return  # stopped already
        try:
            subprocess.run([self.exe, "stop", "--all"], env=self.env, capture_output=True,
                           timeout=scaled(60))
        except subprocess.TimeoutExpired:
            pass  # the test fails or passes on what it saw; the daemons go below
        self._kill_daemons()
        shutil.rmtree(self.dir, ignore_errors=True)

    def _kill_daemons(self):
        """SIGKILL to any daemon of this session that `stop` did not end: one that
        had not yet said where it listens is unknown to `stop`. Only processes
        whose environment names this session's own directory."""
        mark = f"PROFILER_CLI_SESSION_DIR={self.dir}".encode()
        for pid in filter(str.isdigit, os.listdir("/proc")):
            try:
                with open(f"/proc/{pid}/environ", "rb") as f:
                    if mark not in f.read().split(b"\0"):
                        continue
                os.kill(int(pid), signal.SIGKILL)
            except (OSError, ValueError):
                pass  # gone, or not ours to read


def _alive(pid):
    """Whether process pid runs (a zombie does not)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def tree_paths(node, path=()):
    """(path of names root first, node) for every node under a top-down tree node."""
    for child in node.get("children") or []:
        p = path + (child["name"],)
        yield p, child
        yield from tree_paths(child, p)


class Test:
    def __init__(self, name):
        self.name = name
        self.failures = []
        self.agent = os.environ.get("FXAGENT", "")
        self.workloads = os.environ.get("FX_WORKLOAD_DIR", "")
        self.pcli = os.environ.get("FX_PROFILER_CLI", "")
        self.lint = os.environ.get("FX_LINT_PROFILE", "")
        root = os.environ.get("FX_TEST_WORK") or os.path.join("/tmp", "fxagent-it")
        self.work = os.path.join(root, name)
        shutil.rmtree(self.work, ignore_errors=True)
        os.makedirs(self.work)
        self._procs = []
        self._clis = []

    # --- outcomes -------------------------------------------------------
    def check(self, cond, msg):
        if not cond:
            self.failures.append(msg)
            print(f"FAIL: {msg}", flush=True)
        return bool(cond)

    def require(self, cond, msg):
        if not cond:
            raise Stop(msg)

    def note(self, msg):
        print(msg, flush=True)

    def save(self, fname, text):
        with open(os.path.join(self.work, fname), "w", encoding="utf-8") as f:
            f.write(text)

    # --- processes ------------------------------------------------------
    def workload(self, name, *args):
        """Start a workload binary; it ends by itself. Returns the Popen."""
        exe = os.path.join(self.workloads, name)
        self.require(os.access(exe, os.X_OK), f"workload {exe} is not built")
        p = subprocess.Popen([exe, *map(str, args)])
        self._procs.append(p)
        return p

    def spawn(self, cmd, **kw):
        p = subprocess.Popen(cmd, **kw)
        self._procs.append(p)
        return p

    def run_agent(self, *args, timeout=60):
        """Run the agent with args; returns the CompletedProcess (text). The
        timeout is scaled (see TIME_SCALE)."""
        cmd = [self.agent, *map(str, args)]
        self.note("+ " + " ".join(cmd))
        try:
            return subprocess.run(cmd, capture_output=True, text=True, timeout=scaled(timeout))
        except subprocess.TimeoutExpired:
            raise Stop(f"`{' '.join(cmd)}` did not end within {scaled(timeout):.0f} s")

    def record_beside_perf(self, tag, seconds, pid):
        """`fxagent --once -p @pid` and `perf record -g` of the same process at
        99 Hz over the same seconds. Returns (the Profile, perf.data's path)."""
        data = os.path.join(self.work, f"{tag}.perf.data")
        perf = self.spawn(["perf", "record", "-q", "-e", "cpu-clock", "-F", "99", "-g",
                           "-p", str(pid), "-o", data, "--", "sleep", str(seconds)],
                          stdout=subprocess.DEVNULL,
                          stderr=open(os.path.join(self.work, f"{tag}.perf.log"), "w"))
        prof = self.record(tag, seconds, pids=[pid])
        try:
            self.require(perf.wait(timeout=scaled(60)) == 0,
                         f"perf record exited {perf.returncode}; see {tag}.perf.log")
        except subprocess.TimeoutExpired:
            raise Stop("perf record did not end")
        return prof, data

    def record(self, tag, seconds, pids=(), extra=(), measure=()):
        """`fxagent --once` for `seconds` (system-wide without pids); lint and read the
        output. Returns the Profile. With `measure` (pids), the CPU time of those
        processes and their threads is polled meanwhile, and the Profile's
        cpu_s(pid) and thread_cpu_s(pid, tid) say how much each used within the
        recording's own window."""
        out = os.path.join(self.work, tag + ".json.gz")
        args = ["--once", "--duration", f"{seconds}s", "--output", out, *extra]
        for pid in pids:
            args += ["--pid", pid]
        poll = CpuPoller(measure) if measure else None
        if poll:
            poll.start()
        # run_agent scales the timeout: only the part after the recording
        # (symbolizing, writing) is stretched by a slow build, not its length.
        try:
            p = self.run_agent(*args, timeout=seconds / TIME_SCALE + 60)
        finally:
            if poll:
                poll.stop()
        self.save(tag + ".agent.log", p.stderr)
        self.require(p.returncode == 0,
                     f"fxagent {' '.join(map(str, args))} exited {p.returncode}: "
                     f"{p.stderr.strip()[-2000:]}")
        self.require(os.path.isfile(out), f"fxagent exited 0 but wrote no {out}")
        prof = self.load(out)
        if poll:
            prof.poll = poll
        return prof

    def load(self, path):
        """Lint a profile file and read it (the raw JSON)."""
        lint = subprocess.run([sys.executable, self.lint, path], capture_output=True, text=True,
                              timeout=120)
        self.check(lint.returncode == 0,
                   f"lint_profile.py {path} exited {lint.returncode}: "
                   f"{(lint.stdout + lint.stderr).strip()[-2000:]}")
        try:
            return Profile(path)
        except (OSError, ValueError, KeyError, IndexError, TypeError) as e:
            raise Stop(f"cannot read {path} as a gzip processed profile: {e!r}")

    def cli(self, path, tag):
        """A profiler-cli session on a profile file; stopped when the test ends."""
        c = Cli(self, self.pcli, path, tag)
        self._clis.append(c)
        return c

    def kill_processes(self):
        """End every process the test started that is still running (the workloads
        outlive the recording on purpose)."""
        for p in self._procs:
            if p.poll() is None:
                p.send_signal(signal.SIGKILL)
                p.wait()

    def cleanup(self):
        self.kill_processes()
        # What the runtimes the test started wrote for profilers into /tmp
        # (perf maps, CPython's jitdumps; a killed JVM's attach socket): no
        # writer deletes its own.
        for p in self._procs:
            for path in (f"/tmp/perf-{p.pid}.map", f"/tmp/jit-{p.pid}.dump",
                         f"/tmp/.java_pid{p.pid}"):
                try:
                    os.unlink(path)
                except OSError:
                    pass
        for c in self._clis:
            c.stop()
        self._clis = []


def main(body):
    """Run body(t) as a ctest test: root or skip, paths checked, failures summed."""
    name = os.path.splitext(os.path.basename(sys.argv[0]))[0]
    if os.geteuid() != 0:
        print(f"SKIP: {name} needs root: fxagent opens system-wide perf events and "
              "reads other processes' memory; run ctest as root (sudo bash scripts/test.sh)")
        sys.exit(SKIP)
    t = Test(name)
    missing = [f"{var}={val!r}" for var, val in
               (("FXAGENT", t.agent), ("FX_WORKLOAD_DIR", t.workloads),
                ("FX_PROFILER_CLI", t.pcli), ("FX_LINT_PROFILE", t.lint))
               if not val or not os.path.exists(val)]
    if missing:
        print("FAIL: missing " + ", ".join(missing) +
              " (build the project and run scripts/install-test-deps.sh)")
        sys.exit(1)
    started = time.monotonic()
    try:
        body(t)
    except Stop as e:
        t.failures.append(str(e))
        print(f"FAIL: {e}")
    except Exception:  # a broken test is a failure too, with its traceback
        t.failures.append("test error")
        traceback.print_exc()
    finally:
        t.cleanup()
    took = time.monotonic() - started
    if t.failures:
        print(f"{name}: {len(t.failures)} failure(s) in {took:.1f} s; files in {t.work}")
        sys.exit(1)
    print(f"{name}: passed in {took:.1f} s")
    sys.exit(0)


def rss_and_fds(pid):
    """A process's VmRSS (KiB) and how many fds it has open; OSError once it is gone."""
    with open(f"/proc/{pid}/status") as f:
        rss = next(int(ln.split()[1]) for ln in f if ln.startswith("VmRSS:"))
    return rss, len(os.listdir(f"/proc/{pid}/fd"))


def open_files(pid):
    """What a process's fds point at, " (deleted)" cut off."""
    held = []
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            held.append(os.readlink(f"/proc/{pid}/fd/{fd}").removesuffix(" (deleted)"))
        except OSError:
            pass  # closed meanwhile
    return held


def perf_events_open(pid):
    """How many perf events process pid has open (0 once it is gone)."""
    try:
        return open_files(pid).count("anon_inode:[perf_event]")
    except OSError:
        return 0


def mapped_files():
    """The files some live process maps, " (deleted)" cut off: what an agent
    that keeps an fd per binary in use may hold at this moment."""
    out = set()
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/maps") as f:
                for line in f:
                    path = line.split(maxsplit=5)[5:]
                    if path and path[0].startswith("/"):
                        out.add(path[0].rstrip("\n").removesuffix(" (deleted)"))
        except OSError:
            pass  # gone meanwhile, or a kernel thread
    return out


def thread_cpu_ns(pid):
    """{tid: CPU time in ns} of every thread of pid (schedstat: ns resolution)."""
    out = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                out[int(tid)] = int(f.read().split()[0])
        except (OSError, ValueError, IndexError):
            pass
    return out


def task_cpu_ns(pid):
    """CPU time of every thread of pid, in ns."""
    return sum(thread_cpu_ns(pid).values())


class CpuPoller(threading.Thread):
    """Polls processes' CPU time, and their threads', against the wall clock, to
    know how much CPU each had between two wall-clock instants (linear between
    polls): the reference for how many samples a recording should hold."""

    def __init__(self, pids, period=0.02):
        super().__init__(daemon=True)
        self.pids, self.period = list(pids), period
        self.times, self.cpu, self.threads = [], [], []
        self.done = threading.Event()

    def run(self):
        while not self.done.is_set():
            try:
                rows = [thread_cpu_ns(p) for p in self.pids]
            except OSError:
                break
            self.times.append(time.time() * 1000.0)
            self.cpu.append([sum(r.values()) for r in rows])
            self.threads.append(rows)
            self.done.wait(self.period)

    def stop(self):
        self.done.set()
        self.join()

    def _at(self, series, ms):
        i = bisect.bisect_left(self.times, ms)
        if i <= 0:
            return series(0)
        if i >= len(self.times):
            return series(len(self.times) - 1)
        t0, t1 = self.times[i - 1], self.times[i]
        c0, c1 = series(i - 1), series(i)
        return c0 + (c1 - c0) * (ms - t0) / (t1 - t0) if t1 > t0 else c1

    def at(self, k, ms):
        return self._at(lambda i: self.cpu[i][k], ms)

    def seconds(self, pid, a_ms, b_ms):
        """CPU seconds process pid used between two wall-clock instants (ms)."""
        k = self.pids.index(pid)
        return (self.at(k, b_ms) - self.at(k, a_ms)) / 1e9

    def thread_seconds(self, pid, tid, a_ms, b_ms):
        """CPU seconds thread tid of pid used between two wall-clock instants
        (0 before the thread is seen, its last value after it is gone)."""
        k = self.pids.index(pid)

        def series(i):
            return self.threads[i][k].get(int(tid), 0)
        return (self._at(series, b_ms) - self._at(series, a_ms)) / 1e9


class PerfRecord:
    """`perf record -g` at the agent's frequency and clock (cpu-clock), from
    start() to stop(), of `pids` (and what they fork) or of the tasks of a
    cgroup (`cgroup`: a path under the cgroup2 mount; events per CPU, as the
    agent's cgroup targets): the in-run reference for the same processes.
    leaves() reads it back as (pid, user leaf function) per sample.

    Never the whole system: perf 6.1 aborts ("assertion failed at
    util/build-id.c:1010", then a smashed stack) on the build-id of some
    foreign binaries (a sealed memfd's, seen here) as soon as they have a
    sample, and a reference must not depend on what else the machine runs."""

    FORK = re.compile(r"PERF_RECORD_FORK\((\d+):\d+\):\((\d+):\d+\)")
    HEAD = re.compile(r"^\S.*?\s(\d+)/(\d+)\s*$")

    def __init__(self, t, pids=(), cgroup=None, tag="perf"):
        if bool(pids) == bool(cgroup):
            raise ValueError("PerfRecord: pids or a cgroup, one of them")
        self.pids, self.cgroup = pids, cgroup
        self.t = t
        self.data = os.path.join(t.work, tag + ".data")
        self.log = os.path.join(t.work, tag + ".log")
        self.p = None
        self.forks = []  # (child pid, parent pid), from leaves()

    def start(self):
        # No build-id table: perf script names frames from the files, which
        # are all on disk, and perf's pass over build-ids is what aborts.
        what = (["-p", ",".join(map(str, self.pids))] if self.pids else
                ["-a", "-G", self.cgroup.lstrip("/")])
        # (-G applies to the events named before it.)
        self.p = self.t.spawn(["perf", "record", "-q", "-g", "-e", "cpu-clock", *what,
                               "-F", str(HZ), "--no-buildid", "--no-buildid-cache",
                               "-o", self.data],
                              stdout=subprocess.DEVNULL, stderr=open(self.log, "w"))
        # Its events are open once it has written its header's first bytes.
        wait_for(lambda: self.p.poll() is not None or perf_events_open(self.p.pid), 30)
        self.t.require(self.p.poll() is None,
                       f"perf record exited {self.p.returncode}; see {self.log}")
        return self

    def stop(self):
        self.p.send_signal(signal.SIGINT)
        try:
            # perf writes its file, then ends by the signal it was sent.
            rc = self.p.wait(timeout=scaled(60))
        except subprocess.TimeoutExpired:
            raise Stop("perf record did not end within a minute of SIGINT")
        self.t.require(rc in (0, -signal.SIGINT), f"perf record exited {rc}; see {self.log}")

    def leaves(self, pids=(), comms=()):
        """[(pid, user leaf function or None)] for every sample of `pids` or of
        threads named one of `comms` when sampled, and their FORK records in
        self.forks. The user leaf is the first callchain entry outside the
        kernel: the sampled user registers' IP, exact without frame pointers.
        """
        cmd = ["perf", "script", "-i", self.data, "--show-task-events",
               "-F", "comm,pid,tid,ip,sym,dso"]
        if pids:
            cmd += ["--pid", ",".join(map(str, pids))]
        if comms:
            cmd += ["--comms", ",".join(comms)]
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=scaled(300))
        self.t.require(p.returncode == 0, f"perf script exited {p.returncode}: "
                       f"{p.stderr[-800:]}")
        out, self.forks = [], []
        pid, leaf = None, None
        for line in p.stdout.splitlines():
            if not line.strip():
                continue
            if not line[0].isspace():
                if pid is not None:
                    out.append((pid, leaf))
                pid, leaf = None, None
                m = self.FORK.search(line)
                if m:
                    self.forks.append((int(m[1]), int(m[2])))
                    continue
                if "PERF_RECORD_" in line:
                    continue
                m = self.HEAD.match(line)
                if m:
                    pid = int(m[1])
                continue
            # A callchain line, leaf first: "addr sym+off (dso)".
            if pid is not None and leaf is None:
                parts = line.split()
                if len(parts) >= 3 and parts[-1] != "([kernel.kallsyms])":
                    leaf = parts[1].split("+0x")[0]
        if pid is not None:
            out.append((pid, leaf))
        return out


def fresh_binary(src, dst):
    """A copy of @src at @dst with a random build-id: a binary the agent has
    never seen (its symbolizer keeps one object per build-id)."""
    out = subprocess.run(["readelf", "-n", src], capture_output=True, text=True, check=True)
    bid = bytes.fromhex(re.search(r"Build ID: ([0-9a-f]+)", out.stdout).group(1))
    with open(src, "rb") as f:
        data = f.read()
    if data.count(bid) != 1:
        raise Stop(f"{src}: its build-id found {data.count(bid)} times")
    with open(dst, "wb") as f:
        f.write(data.replace(bid, os.urandom(len(bid))))
    os.chmod(dst, 0o755)


def user_leaf(prof, stack):
    """The user leaf function of a stack of the agent's (its first frame
    outside the kernel, from the leaf), or None: what PerfRecord.leaves()
    gives for perf's samples."""
    user = [f for f in prof.stack_frames(stack) if prof.frame_cat[f] != "Kernel"]
    return prof.func_names[prof.frame_func[user[-1]]] if user else None


def contains(names, seq):
    """seq appears in names (a stack's names, root first) as consecutive items."""
    k = len(seq)
    return any(list(names[i:i + k]) == list(seq) for i in range(len(names) - k + 1))


def near(value, want, tol):
    return abs(value - want) <= tol


def share_tol(pct, n, floor):
    """Tolerance in points for a share of pct% seen in n samples: floor, or 3.5
    standard errors when a loaded machine left the process few samples (at 200
    samples a 70% share has an error of 3.2 points, and scheduling noise adds to it)."""
    p = pct / 100
    return max(floor, 3.5 * 100 * (p * (1 - p) / max(n, 1)) ** 0.5)


def perf_self_shares(t, data):
    """`perf report --sort sym` of @data: (samples, {symbol: self %}). A
    symbol may hold spaces (a JIT's "JS:*fib /srv/fib.js:1:13")."""
    rep = subprocess.run(["perf", "report", "-i", data, "--stdio", "--no-children",
                          "--sort", "sym", "-g", "none"], capture_output=True, text=True,
                         timeout=120)
    t.save("perf-report.txt", rep.stdout + rep.stderr)
    t.require(rep.returncode == 0, f"perf report exited {rep.returncode}")
    n = re.search(r"^# Samples: (\d+)", rep.stdout, re.M)
    t.require(n, "perf report: no '# Samples:' line")
    shares = {}
    for ln in rep.stdout.splitlines():
        m = re.match(r"\s*([\d.]+)%\s+\[[.k]\]\s+(.+?)\s*$", ln)
        if m:
            shares[m[2]] = shares.get(m[2], 0.0) + float(m[1])
    return int(n[1]), shares


def diff_tol(p1, n1, p2, n2, floor=2.0):
    """Tolerance in points for the difference of two shares (p1% of n1 samples,
    p2% of n2), each an independent sampling of the same processes (the agent
    and perf in one run, say): 3.5 standard errors of the difference, from the
    pooled share, plus a floor for what sampling does not explain (a sample
    that falls on a function boundary, a few samples one tool drops)."""
    n1, n2 = max(n1, 1), max(n2, 1)
    p = (p1 * n1 + p2 * n2) / (100.0 * (n1 + n2))
    return floor + 3.5 * 100 * (p * (1 - p) * (1 / n1 + 1 / n2)) ** 0.5


def min_samples(cpu_s, hz=99, margin=0.5):
    """The fewest samples a process that used cpu_s CPU seconds while the agent
    sampled at hz may get: `margin` of what its CPU time should give (the
    process's CPU clock and the sampling windows do not start at the same
    instant), less 3.5 standard errors of a count (Poisson), at least 1. The
    reference is the process's own CPU time in the same run: a loaded or slow
    machine gives it less CPU, and the agent fewer samples, by the same
    amount."""
    want = cpu_s * hz * margin
    return max(1, int(want - 3.5 * want ** 0.5))


def looks_hex(name):
    return re.fullmatch(r"(0x)?[0-9a-fA-F]{6,}", name) is not None

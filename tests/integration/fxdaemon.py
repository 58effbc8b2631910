# SPDX-License-Identifier: MIT
"""Helpers of the daemon tests (test_daemon_*.py): real cgroups made and removed
by the test, workloads started inside them, their CPU time over the wall clock,
the agent run with its own config, and the checks every chunk must pass."""

import math
import os
import re
import signal
import subprocess
import time

import fxtest

HZ = fxtest.HZ
CHUNK_RE = re.compile(r"^(?P<target>[A-Za-z0-9_.-]+)-(?P<ts>\d{8}T\d{6}Z)-(?P<seq>\d{6})"
                      r"\.json\.gz$")
EPS_MS = 0.001


def cgroup_mount():
    """The cgroup2 mount point, as the agent looks for it: /sys/fs/cgroup, then
    /sys/fs/cgroup/unified, then the first whole-tree one."""
    found = []
    with open("/proc/self/mountinfo") as f:
        for line in f:
            left, _, right = line.partition(" - ")
            fields = left.split()
            if right.split()[:1] == ["cgroup2"] and fields[3] == "/":
                found.append(re.sub(r"\\([0-7]{3})", lambda m: chr(int(m[1], 8)), fields[4]))
    for pref in ("/sys/fs/cgroup", "/sys/fs/cgroup/unified"):
        if pref in found:
            return pref
    if not found:
        raise fxtest.Stop("no cgroup2 mount in /proc/self/mountinfo")
    return found[0]


class Cgroups:
    """Cgroup directories the test made, removed (deepest first) at the end."""

    def __init__(self):
        self.mount = cgroup_mount()
        self.made = []

    def path(self, rel):
        return self.mount + rel

    def make(self, rel):
        os.mkdir(self.path(rel))
        self.made.append(rel)
        return self.path(rel)

    def remove(self, rel):
        # Killed and reaped tasks can take a moment to leave the cgroup.
        for _ in range(100):
            try:
                os.rmdir(self.path(rel))
                break
            except FileNotFoundError:
                break
            except OSError:
                time.sleep(0.05)
        else:
            print(f"cannot remove cgroup {self.path(rel)}", flush=True)
        if rel in self.made:
            self.made.remove(rel)

    def remove_all(self):
        for rel in sorted(self.made, key=lambda r: -r.count("/")):
            self.remove(rel)


def with_cgroups(run):
    """A test body that runs run(t, cg) and then ends its processes and removes
    the cgroups it made, whatever happened."""
    def body(t):
        cg = Cgroups()
        try:
            run(t, cg)
        finally:
            t.kill_processes()
            cg.remove_all()
    return body


def spawn_in(t, cgroup_dir, name, *args):
    """A workload that joins cgroup_dir before exec (it writes its own pid to
    cgroup.procs), so all of its life is in there."""
    exe = os.path.join(t.workloads, name)
    t.require(os.access(exe, os.X_OK), f"workload {exe} is not built")
    procs = os.path.join(cgroup_dir, "cgroup.procs")

    def join():
        with open(procs, "w") as f:
            f.write(str(os.getpid()))

    return t.spawn([exe, *map(str, args)], preexec_fn=join)


# Kept here too for the daemon tests that import it from this module.
CpuPoller = fxtest.CpuPoller


class Daemon:
    """fxagent in daemon mode with its own config file, output directory and log."""

    def __init__(self, t, tag, config, *args, env=None, out=None):
        """out: the output directory (default TAG/chunks in the test's work)."""
        self.t = t
        self.dir = os.path.join(t.work, tag)
        self.out = out or os.path.join(self.dir, "chunks")
        os.makedirs(self.dir)
        self.config = os.path.join(self.dir, "fxagent.yaml")
        with open(self.config, "w") as f:
            f.write(config + f"\noutput:\n  directory: {self.out}\n")
        self.log = os.path.join(self.dir, "agent.log")
        cmd = [t.agent, "--config", self.config, *map(str, args)]
        t.note("+ " + " ".join(cmd))
        with open(self.log, "w") as log:
            self.p = t.spawn(cmd, stdout=log, stderr=subprocess.STDOUT,
                             env=dict(os.environ, **env) if env else None)

    def wait_started(self, timeout=10):
        """Until the agent says it samples (its notice), or timeout (scaled)."""
        timeout = fxtest.scaled(timeout)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self.t.require(self.p.poll() is None,
                           f"fxagent exited {self.p.returncode} at start: {self.text()[-2000:]}")
            if "sampling " in self.text():
                return
            time.sleep(0.05)
        self.t.note(f"fxagent did not say it was sampling within {timeout} s: {self.text()}")

    def text(self):
        with open(self.log, errors="replace") as f:
            return f.read()

    def stop(self, sig=signal.SIGINT, timeout=30):
        """A signal (SIGINT: Ctrl-C; SIGTERM: systemctl stop), then the exit status
        within timeout (scaled) seconds."""
        timeout = fxtest.scaled(timeout)
        self.p.send_signal(sig)
        try:
            return self.p.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            raise fxtest.Stop(f"fxagent did not exit within {timeout} s of signal {sig}; log: "
                              f"{self.text()[-2000:]}")

    def chunks(self, running=False):
        """{target: [(seq, path)] sorted by seq}; any other file is a failure.
        With running, a chunk still being written (its temporary file) is
        left out."""
        out = {}
        names = os.listdir(self.out) if os.path.isdir(self.out) else []
        for name in sorted(names):
            if running and ".json.gz.tmp" in name:
                continue
            m = CHUNK_RE.match(name)
            if not self.t.check(m, f"{self.out}: unexpected file {name!r} (not "
                                "<target>-<YYYYmmddTHHMMSSZ>-<seq>.json.gz)"):
                continue
            out.setdefault(m["target"], []).append((int(m["seq"]), os.path.join(self.out, name)))
        for lst in out.values():
            lst.sort()
        return out


def check_chunk(t, prof, target, seq, path):
    """The chunk's name, meta.fxagent and FxRecording marker agree with each other
    and with its samples. Returns meta.fxagent."""
    name = os.path.basename(path)
    fx = prof.data["meta"].get("fxagent")
    t.require(isinstance(fx, dict), f"{name}: no meta.fxagent object")
    for key in ("target", "host", "seq", "windowStart", "windowEnd", "samples", "lost",
                "truncated", "labels"):
        t.require(key in fx, f"{name}: meta.fxagent has no {key}: {fx}")
    t.check(fx["target"] == target, f"{name}: meta.fxagent.target {fx['target']!r}")
    t.check(fx["seq"] == seq, f"{name}: meta.fxagent.seq {fx['seq']}")
    t.check(fx["host"] == os.uname().nodename,
            f"{name}: meta.fxagent.host {fx['host']!r}, want {os.uname().nodename!r}")
    ts = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(math.floor(fx["windowStart"] / 1000)))
    t.check(CHUNK_RE.match(name)["ts"] == ts,
            f"{name}: the name's time is not windowStart {fx['windowStart']} ({ts})")
    meta = prof.data["meta"]
    t.check(abs(meta["startTime"] - fx["windowStart"]) <= EPS_MS,
            f"{name}: meta.startTime {meta['startTime']} != windowStart {fx['windowStart']}")
    span = fx["windowEnd"] - fx["windowStart"]
    t.check(meta["profilingStartTime"] == 0 and
            abs(meta["profilingEndTime"] - span) <= 0.01,
            f"{name}: profiling range {meta['profilingStartTime']}..{meta['profilingEndTime']} "
            f"is not the window's 0..{span}")
    rec = prof.recording()
    for k in ("samples", "lost", "truncated"):
        t.check(rec[k] == fx[k], f"{name}: FxRecording {k} {rec[k]} != meta.fxagent.{k} {fx[k]}")
    n = prof.weight(prof.threads)
    t.check(n == fx["samples"], f"{name}: {n} samples in the threads, meta.fxagent.samples "
            f"{fx['samples']}")
    # No window holds more samples than its CPUs could take in its span (a
    # tenth more for timer slack): more means samples
    # of another window were put in this one, as a reader that fell behind did.
    most = span / meta["interval"] * os.cpu_count() * 1.1 + 4
    t.check(n <= most, f"{name}: {n} samples in a {span / 1000:.1f} s window, more than "
            f"{most:.0f} ({os.cpu_count()} CPUs at {1000 / meta['interval']:.0f} Hz)")
    return fx

# SPDX-License-Identifier: MIT
"""The command line: --help, --version, usage errors (exit 2), an unwritable output
(exit 1 and a message, before recording), no privileges (exit 1 and one line
saying what is missing), --output - (gzip on stdout), SIGINT (ends early, still
writes, exit 0), --include-idle (idle CPUs show as pid 0), the profile's mode
follows the umask (0640 under the service's UMask=0027, 0644 under 022), and
at a high rate (records left in the rings at the end) --once still ends with
its stats and its profile."""

import gzip
import json
import os
import re
import signal
import subprocess
import time

import fxtest

USAGE_ERRORS = [
    ["--bogus-flag"],
    ["--once", "--duration", "abc"],
    ["--once", "--duration", "10x"],
    ["--once", "--duration", "-5s"],
    ["--once", "--duration", ""],
    ["--once", "--frequency", "abc"],
    ["--once", "--pid", "notapid"],
    ["--once", "--unwind", "lbr"],
]


def _high_rate(t):
    """At 4000 Hz with both CPUs busy the rings still hold records when the
    recording ends: the last flush handed them out and its count was taken
    for an error code, so the stats line (and an upload's wait) were skipped
    with exit 0."""
    busy = [t.workload("fx-qsort", 30) for _ in range(2)]
    out = os.path.join(t.work, "high-rate.json.gz")
    p = t.run_agent("--once", "--frequency", "4000", "--duration", "2s", "--output", out,
                    "--verbose", timeout=60)
    for w in busy:
        w.kill()
    t.save("high-rate.agent.log", p.stderr)
    t.check(p.returncode == 0, f"--frequency 4000: exit {p.returncode}")
    t.check("stats: recorded" in p.stderr,
            "--frequency 4000 --verbose: no stats line (the last flush's count taken for an "
            "error?)")
    t.check(os.path.isfile(out), "--frequency 4000: no profile written")


def body(t):
    p = t.run_agent("--help", timeout=10)
    t.check(p.returncode == 0, f"--help exited {p.returncode}")
    for flag in ("--once", "--duration", "--frequency", "--output", "--no-kernel", "--pid",
                 "--include-idle", "--version"):
        t.check(flag in p.stdout, f"--help does not mention {flag} on stdout")

    p = t.run_agent("--version", timeout=10)
    t.check(p.returncode == 0, f"--version exited {p.returncode}")
    t.check(re.search(r"\d+\.\d+", p.stdout), f"--version prints no version: {p.stdout!r}")

    for args in USAGE_ERRORS:
        p = t.run_agent(*args, "--output", os.path.join(t.work, "never.json.gz"), timeout=10)
        t.check(p.returncode == 2, f"fxagent {' '.join(args)}: exit {p.returncode}, want 2 "
                f"(usage error); stderr: {p.stderr.strip()[:200]}")
        t.check(p.stderr.strip(), f"fxagent {' '.join(args)}: no message on stderr")
    t.check(not os.path.exists(os.path.join(t.work, "never.json.gz")),
            "a usage error still wrote the output file")

    bad = "/nonexistent-fx-dir/sub/out.json.gz"
    started = time.monotonic()
    p = t.run_agent("--once", "--duration", "10s", "--output", bad, timeout=30)
    t.check(p.returncode == 1, f"--output {bad}: exit {p.returncode}, want 1")
    t.check("nonexistent-fx-dir" in p.stderr,
            f"--output {bad}: the message does not name the path: {p.stderr.strip()[:300]!r}")
    t.check(time.monotonic() - started < 5, f"--output {bad}: the error came only after "
            "recording; it should come before")

    _unprivileged(t)

    # --output -: the gzip profile on stdout; 500ms is a valid duration.
    cmd = [t.agent, "--once", "--duration", "500ms", "--output", "-"]
    t.note("+ " + " ".join(cmd))
    p = subprocess.run(cmd, capture_output=True, timeout=60)
    t.check(p.returncode == 0, f"--output -: exit {p.returncode}: {p.stderr[-300:]!r}")
    t.check(p.stdout[:2] == b"\x1f\x8b", f"--output -: stdout is not gzip: {p.stdout[:16]!r}")
    t.check(b"\r" not in p.stderr, "progress output on stderr although stderr is not a terminal")
    if p.stdout[:2] == b"\x1f\x8b":
        path = os.path.join(t.work, "stdout.json.gz")
        with open(path, "wb") as f:
            f.write(p.stdout)
        prof = t.load(path)
        t.check(prof.data["meta"].get("preprocessedProfileVersion") == 66,
                "--output -: meta.preprocessedProfileVersion is not 66")
        t.cli(path, "stdout")

    for duration in ("60s", "2m"):
        _sigint(t, duration)

    _high_rate(t)

    for mask, want in ((0o027, 0o640), (0o022, 0o644)):
        out = os.path.join(t.work, f"umask-{mask:03o}.json.gz")
        p = subprocess.run([t.agent, "--once", "-d", "200ms", "-o", out], capture_output=True,
                           timeout=60, preexec_fn=lambda m=mask: os.umask(m))
        mode = os.stat(out).st_mode & 0o777 if os.path.exists(out) else None
        t.check(p.returncode == 0 and mode == want, f"umask {mask:03o}: exit {p.returncode}, "
                f"mode {oct(mode) if mode is not None else None}, want {oct(want)}")

    # Idle CPUs are sampled as pid 0 only with --include-idle: expected when the
    # CPUs were idle for a fair share of the recording (/proc/stat says).
    before = cpu_idle_share()
    idle = t.record("idle", 1, extra=["--include-idle"])
    share = cpu_idle_share(before)
    got = idle.weight(idle.threads_of(0))
    t.note(f"--include-idle: CPUs {share:.0%} idle, {got} samples of pid 0")
    t.check(got > 0 or share < 0.2,
            f"--include-idle (system-wide): no samples of the idle task (pid 0) although "
            f"the CPUs were {share:.0%} idle")


def cpu_idle_share(since=None):
    """(idle, total) jiffies of all CPUs from /proc/stat; with since, the idle
    share of the time between then and now."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    now = (v[3] + v[4], sum(v))
    if since is None:
        return now
    total = now[1] - since[1]
    return (now[0] - since[0]) / total if total > 0 else 0.0


def _unprivileged(t):
    """Run as nobody: exit 1 and one line naming CAP_PERFMON and the paranoid value."""
    with open("/proc/sys/kernel/perf_event_paranoid") as f:
        paranoid = int(f.read())
    if paranoid < 0:
        t.note(f"kernel.perf_event_paranoid is {paranoid}: anyone may profile the whole "
               "system, so there is no permission error to check")
        return
    out = os.path.join("/tmp", f"fx-unpriv-{os.getpid()}.json.gz")
    cmd = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", t.agent, "--once",
           "--duration", "1s", "--output", out]
    t.note("+ " + " ".join(cmd))
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=30)
    lines = p.stderr.strip().splitlines()
    t.check(p.returncode == 1, f"as nobody: exit {p.returncode}, want 1; stderr: {p.stderr!r}")
    t.check(len(lines) == 1, f"as nobody: want one line on stderr, got {lines}")
    msg = p.stderr
    for word in ("CAP_PERFMON", f"perf_event_paranoid is {paranoid}", "sysctl"):
        t.check(word in msg, f"as nobody: the message does not say {word!r}: {msg.strip()!r}")
    t.check(not os.path.exists(out), "as nobody: a profile was written anyway")


def _sigint(t, duration):
    """SIGINT one second into a long --duration: quick exit 0 and a whole profile."""
    out = os.path.join(t.work, f"sigint-{duration}.json.gz")
    cmd = [t.agent, "--once", "--duration", duration, "--output", out]
    t.note("+ " + " ".join(cmd) + "  (SIGINT after 1 s)")
    agent = t.spawn(cmd, stderr=subprocess.PIPE)
    time.sleep(1)
    sent = time.monotonic()
    agent.send_signal(signal.SIGINT)
    try:
        _, err = agent.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        raise fxtest.Stop(f"--duration {duration}: still running 30 s after SIGINT")
    took = time.monotonic() - sent
    t.note(f"exit {agent.returncode} {took:.1f} s after SIGINT")
    t.check(agent.returncode == 0, f"--duration {duration} + SIGINT: exit {agent.returncode}, "
            f"want 0; stderr: {err.decode(errors='replace').strip()[:300]}")
    t.check(took < 10, f"--duration {duration} + SIGINT: took {took:.1f} s to exit, want < 10")
    if not t.check(os.path.isfile(out), f"--duration {duration} + SIGINT: no {out}"):
        return
    prof = t.load(out)
    meta = prof.data["meta"]
    end = meta.get("profilingEndTime")
    if end is not None:
        span = end - meta.get("profilingStartTime", 0)
        t.check(span < 10000, f"SIGINT after 1 s but the profile spans {span:.0f} ms")
    t.cli(out, f"sigint-{duration}")


fxtest.main(body)

# SPDX-License-Identifier: MIT
"""The command line as a newcomer types it: it does what was meant, refuses
what would do nothing, and says what it did.

- Snapshot flags (-d, -o, -p, --serve) imply --once: `fxagent -d 1s -o F`
  writes F and exits; the agent's flags (--window, --output-dir) with them,
  and any recording flag with --check-config, are usage errors naming both.
- Refused before recording, with the reason: a pid that does not exist
  (exit 2), --open without --serve (2), a directory as -o (1, as an
  unwritable output), a --debug-dir of view that is not a directory (2).
- One duration grammar: 1.5s is refused by -d, view --since, view --bucket
  and the config alike; 1500ms is taken by all.
- --once always names the file it wrote on stderr, in one line, even when
  stderr is not a terminal; almost no samples come with the reason (a pid
  that exited, a pid that used little CPU, idle CPUs whose samples were left
  out: checked when the machine was quiet enough to show it).
- The agent at the default level: its start line and the first window's
  summary, no line per window; -v a line per chunk; -vv debug lines.
"""

import os
import re
import signal
import subprocess
import time

import fxtest
from fxdaemon import Daemon


def absent_pid():
    """A pid no process has now."""
    pid = 4_000_000
    while os.path.exists(f"/proc/{pid}"):
        pid -= 1
    return pid


def refused(t, args, rc, words, what):
    """fxagent ARGS exits @rc, fast, with a message holding every one of @words."""
    started = time.monotonic()
    p = t.run_agent(*args, timeout=30)
    took = time.monotonic() - started
    out = p.stderr.strip()
    t.check(p.returncode == rc, f"{what}: `fxagent {' '.join(map(str, args))}` exited "
            f"{p.returncode}, want {rc}: {out[-300:]!r}")
    missing = [w for w in words if w not in out]
    t.check(not missing, f"{what}: the message does not say {missing}: {out[-300:]!r}")
    t.check(took < fxtest.scaled(3), f"{what}: refused only after {took:.1f} s (recorded first?)")


def check_implied_once(t):
    out = os.path.join(t.work, "implied.json.gz")
    started = time.monotonic()
    p = t.run_agent("-d", "1s", "-o", out, timeout=60)
    took = time.monotonic() - started
    t.check(p.returncode == 0 and os.path.isfile(out),
            f"-d 1s -o FILE without --once: exit {p.returncode}, file written: "
            f"{os.path.isfile(out)}; {p.stderr[-300:]!r}")
    t.check(took < fxtest.scaled(30), f"-d 1s -o FILE ran {took:.0f} s: not a snapshot")
    t.check(f"wrote {out}:" in p.stderr,
            f"--once does not name the file it wrote on stderr: {p.stderr[-300:]!r}")
    t.check(len(p.stderr.strip().splitlines()) <= 2,
            f"--once at the default level printed more than its line: {p.stderr!r}")
    if os.path.isfile(out):
        t.load(out)

    refused(t, ["-d", "1s", "--window", "1"], 2, ["--window", "--duration"],
            "--window with a snapshot flag")
    refused(t, ["--once", "--output-dir", t.work], 2, ["--output-dir", "--once"],
            "--output-dir with --once")
    refused(t, ["-p", "1", "--window", "1"], 2, ["--window", "--pid"], "--pid with --window")
    refused(t, ["--check-config", "-d", "1s"], 2, ["--duration", "--check-config"],
            "--check-config with a recording flag")
    refused(t, ["--check-upload"], 2, ["--check-upload", "--check-config"],
            "--check-upload alone")


def check_refused_before(t):
    pid = absent_pid()
    refused(t, ["--once", "-d", "10s", "-p", pid], 2, [f"--pid {pid}", "no such process"],
            "a pid that does not exist")
    refused(t, ["--once", "-d", "10s", "--open"], 2, ["--open", "--serve"],
            "--open without --serve")
    refused(t, ["--once", "-d", "10s", "-o", t.work], 1, [t.work, "is a directory"],
            "a directory as -o")
    chunks = os.path.join(t.work, "none")
    os.makedirs(chunks)
    refused(t, ["view", chunks, "--debug-dir", "/nonexistent-fx-debug", "-o",
                os.path.join(t.work, "v.json.gz")], 2, ["--debug-dir", "/nonexistent-fx-debug"],
            "view --debug-dir that is not a directory")
    t.check(not os.path.exists(os.path.join(t.work, "v.json.gz")),
            "view wrote a profile although --debug-dir was refused")


def check_durations(t):
    for args in (["--once", "-d", "1.5s"], ["view", t.work, "--since", "1.5h"],
                 ["view", t.work, "--bucket", "1.5s"]):
        refused(t, args, 2, [args[-1], "whole number"], f"{args[-2]} {args[-1]}")
    cfg = os.path.join(t.work, "decimal.yaml")
    with open(cfg, "w") as f:
        f.write("spool:\n  max_age: 1.5s\n")
    p = t.run_agent("--check-config", cfg, timeout=30)
    t.check(p.returncode == 2 and "whole number" in p.stderr,
            f"spool.max_age: 1.5s: exit {p.returncode}: {p.stderr[-300:]!r}")
    out = os.path.join(t.work, "ms.json.gz")
    p = t.run_agent("--once", "-d", "1500ms", "-o", out, timeout=60)
    t.check(p.returncode == 0 and os.path.isfile(out), f"-d 1500ms: exit {p.returncode}")
    p = t.run_agent("view", t.work, "--since", "90m", "--bucket", "1500ms", "-o",
                    os.path.join(t.work, "view.json.gz"), timeout=60)
    t.check(p.returncode == 0, f"view --since 90m --bucket 1500ms: exit {p.returncode}: "
            f"{p.stderr[-300:]!r}")


def check_few_samples(t):
    sleeper = t.spawn(["sleep", "60"])
    out = os.path.join(t.work, "sleeper.json.gz")
    p = t.run_agent("-d", "1s", "-p", sleeper.pid, "-o", out, timeout=60)
    t.check(p.returncode == 0 and "only 0 samples" in p.stderr and "little CPU" in p.stderr,
            f"a sleeping --pid: no word on why the profile is empty: {p.stderr[-400:]!r}")
    short = t.spawn(["sleep", "0.3"])
    p = t.run_agent("-d", "1s", "-p", short.pid, "-o", out, timeout=60)
    t.check(p.returncode == 0 and f"pid {short.pid} exited" in p.stderr,
            f"a --pid that exited: not said: {p.stderr[-400:]!r}")
    t.note(f"few samples: {p.stderr.strip().splitlines()[-1][:200]}")
    # The whole system with nothing started: on a quiet machine almost every
    # sample is the idle task's, left out, and that must be said; on a busy
    # one there are samples enough, and nothing to explain.
    out = os.path.join(t.work, "system.json.gz")
    p = t.run_agent("-d", "1s", "-o", out, timeout=60)
    m = re.search(r"wrote \S+: (\d+) samples", p.stderr)
    t.require(p.returncode == 0 and m, f"-d 1s whole system: exit {p.returncode}: "
              f"{p.stderr[-300:]!r}")
    if int(m[1]) * 10 < 99:
        t.check("the CPUs were idle" in p.stderr and "--include-idle" in p.stderr,
                f"{m[1]} samples of the whole system, and no word that the CPUs were idle: "
                f"{p.stderr[-400:]!r}")
    t.note(f"whole system for 1 s: {m[1]} samples; {p.stderr.strip().splitlines()[-1][:160]}")


def agent_lines(t, tag, *args):
    d = Daemon(t, tag, "window:\n  seconds: 1\n", *args)
    d.wait_started()
    fxtest.wait_for(lambda: len(d.chunks(running=True).get("system", [])) >= 3, 20, 0.1)
    rc = d.stop()
    t.check(rc == 0, f"{tag}: fxagent exited {rc}")
    return d.text(), len(d.chunks().get("system", []))


def check_agent_levels(t):
    text, n = agent_lines(t, "default")
    lines = text.strip().splitlines()
    t.check(any("sampling the whole system" in ln for ln in lines) and
            any(re.search(r"first window: 1 window, \d+ samples, 1 chunk written", ln)
                for ln in lines),
            f"default level: no start line or first-window summary: {lines}")
    t.check(not any(ln.startswith("fxagent: wrote ") for ln in lines) and len(lines) <= 4,
            f"default level: {len(lines)} lines for {n} windows, a line per window: {lines}")
    text, n = agent_lines(t, "v", "-v")
    wrote = sum(ln.startswith("fxagent: wrote ") for ln in text.splitlines())
    t.check(wrote == n and n >= 3, f"-v: {wrote} 'wrote' lines for {n} chunks")
    t.check("objects:" not in text, "-v printed debug lines (objects:)")
    text, n = agent_lines(t, "vv", "-vv")
    t.check("objects:" in text, "-vv: no debug lines (objects:)")


def body(t):
    check_implied_once(t)
    check_refused_before(t)
    check_durations(t)
    check_few_samples(t)
    check_agent_levels(t)


if __name__ == "__main__":
    fxtest.main(body)

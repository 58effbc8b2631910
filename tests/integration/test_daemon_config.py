# SPDX-License-Identifier: MIT
"""The daemon's configuration from the command line's side.

- `--check-config` accepts the shipped config/fxagent.yaml and a file setting
  every key (tests/data/config/full.yaml, with the files it names made in the
  work directory: --check-config checks them too); it refuses bad files (unknown key, value out of range, duplicate
  target name, wrong type) with exit 2 and "FILE:LINE:COL: key: expected ..."
  pointing at the offending token;
- the daemon given a bad or missing config exits 2 without creating its output
  directory; given an output directory it cannot create, it exits non-zero at
  once, naming it;
- flags override the file: `--window 1 --output-dir B --frequency 49` on a file
  saying 60 s, directory A (and 99 Hz) gives 1 s chunks in B at 49 Hz, none in A;
  SIGTERM then ends it with exit 0 and the partial window written.
"""

import math
import os
import shutil
import signal
import subprocess
import time

import fxtest
from fxdaemon import CpuPoller, Daemon, EPS_MS, check_chunk

HERE = os.path.dirname(os.path.abspath(__file__))
REPO_CONFIG = os.path.normpath(os.path.join(HERE, "..", "..", "config", "fxagent.yaml"))
FULL_CONFIG = os.path.normpath(os.path.join(HERE, "..", "data", "config", "full.yaml"))

# Bad files: "@" marks the token the message must point at.
BAD = {
    "unknown-key": ("sampling:\n  frequency: 99\n  @frequncy: 49\n", "sampling.frequncy"),
    "unknown-top-key": ("window:\n  seconds: 5\n@outptu:\n  directory: /tmp\n", "outptu"),
    "window-range": ("window:\n  seconds: @0\n", "window.seconds"),
    "frequency-range": ("sampling:\n  frequency: @20000\n", "sampling.frequency"),
    "duplicate-target": ("targets:\n  - name: web\n    process: nginx\n"
                         "  - name: @web\n    pid: 42\n", "targets[1].name"),
    "wrong-type": ("sampling:\n  kernel_stacks: @yes\n", "sampling.kernel_stacks"),
}


def write_marked(path, text):
    """Writes text without its "@" marker; returns the marker's (line, column), 1-based."""
    i = text.index("@")
    line = text.count("\n", 0, i) + 1
    col = i - (text.rfind("\n", 0, i) + 1) + 1
    with open(path, "w") as f:
        f.write(text.replace("@", "", 1))
    return line, col


def full_config(t):
    """full.yaml with its paths moved under the work directory, and there the
    token, certificate and key it names, and the metrics file's directory."""
    root = os.path.join(t.work, "full")
    with open(FULL_CONFIG) as f:
        text = f.read()
    for old in ("/etc/fxagent/", "/srv/fxagent/", "/var/lib/node-exporter/", "/opt/debug"):
        text = text.replace(old, root + old)
    etc = os.path.join(root, "etc", "fxagent")
    os.makedirs(etc)
    os.makedirs(os.path.join(root, "var", "lib", "node-exporter"))
    token = os.path.join(etc, "token")
    with open(token, "w") as f:
        f.write("fxtok-full\n")
    os.chmod(token, 0o600)
    key, cert = os.path.join(etc, "client.key"), os.path.join(etc, "client.pem")
    p = subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout",
                        key, "-out", cert, "-days", "2", "-subj", "/CN=fxtest"],
                       capture_output=True, text=True, timeout=60)
    t.require(p.returncode == 0, f"openssl req: {p.stderr.strip()}")
    os.chmod(key, 0o600)
    shutil.copy(cert, os.path.join(etc, "ca.pem"))
    path = os.path.join(t.work, "full.yaml")
    with open(path, "w") as f:
        f.write(text)
    return path


def check_config(t):
    for good in (REPO_CONFIG, full_config(t)):
        if not os.path.isfile(good):
            t.check(good != REPO_CONFIG, f"{good} is missing")
            continue
        p = t.run_agent("--check-config", good, timeout=10)
        t.check(p.returncode == 0, f"--check-config {good} exited {p.returncode}: "
                f"{p.stderr.strip()}")
    for tag, (text, key) in BAD.items():
        path = os.path.join(t.work, f"bad-{tag}.yaml")
        line, col = write_marked(path, text)
        p = t.run_agent("--check-config", path, timeout=10)
        err = p.stderr.strip()
        t.note(f"{tag}: exit {p.returncode}: {err}")
        t.check(p.returncode == 2, f"--check-config {path} exited {p.returncode}, want 2")
        want = f"{path}:{line}:{col}: {key}: "
        t.check(want in err and "expected" in err.split(want, 1)[-1],
                f"--check-config {tag}: message {err!r}, want \"{want}... expected ...\"")


def bad_start(t):
    """A bad config: exit 2, nothing created."""
    out = os.path.join(t.work, "never")
    path = os.path.join(t.work, "bad-start.yaml")
    line, col = write_marked(path, f"output:\n  directory: {out}\nwindow:\n  seconds: @0\n")
    p = t.run_agent("--config", path, timeout=20)
    t.check(p.returncode == 2, f"the daemon with a bad config exited {p.returncode}, want 2: "
            f"{p.stderr.strip()}")
    t.check(f"{path}:{line}:{col}:" in p.stderr, f"the daemon with a bad config said "
            f"{p.stderr.strip()!r}, not where")
    p = t.run_agent("--config", path, "--output-dir", out + "2", "--window", "1", timeout=20)
    t.check(p.returncode == 2, f"a bad config with a valid --window: exit {p.returncode}, "
            "want 2")
    t.check(not os.path.exists(out) and not os.path.exists(out + "2"),
            "the daemon with a bad config created its output directory")

    missing = os.path.join(t.work, "no-such.yaml")
    p = t.run_agent("--config", missing, timeout=20)
    t.check(p.returncode == 2 and missing in p.stderr,
            f"--config {missing} (missing): exit {p.returncode}, said {p.stderr.strip()!r}")

    p = t.run_agent("--window", "0", "--output-dir", out, timeout=20)
    t.check(p.returncode == 2 and "--window" in p.stderr,
            f"--window 0: exit {p.returncode}, said {p.stderr.strip()!r}")

    # An output directory that cannot be made: a runtime failure, said at once.
    good = os.path.join(t.work, "unwritable.yaml")
    with open(good, "w") as f:
        f.write("output:\n  directory: /proc/fxtest-chunks\n")
    started = time.monotonic()
    p = t.run_agent("--config", good, timeout=20)
    took = time.monotonic() - started
    t.check(p.returncode not in (0, None) and "/proc/fxtest-chunks" in p.stderr,
            f"output.directory /proc/fxtest-chunks: exit {p.returncode} after {took:.1f} s, "
            f"said {p.stderr.strip()!r}")


def overrides(t):
    """--window, --output-dir and --frequency over a file that says otherwise."""
    w = t.workload("fx-hot-ab", 60)
    poll = CpuPoller([w.pid])
    poll.start()
    flag_dir = os.path.join(t.work, "from-flag")
    d = Daemon(t, "override", "sampling:\n  frequency: 99\nwindow:\n  seconds: 60\n"
               "targets:\n  - name: hot\n    process: fx-hot-ab\n",
               "--window", 1, "--output-dir", flag_dir, "--frequency", 49)
    # The file names d.out as output.directory; the flag says flag_dir.
    file_dir, d.out = d.out, flag_dir
    d.wait_started()
    first = math.ceil(time.time())
    time.sleep(max(0.0, first + 2.5 - time.time()))
    # SIGTERM, as systemd stops it: the partial window is written too.
    rc = d.stop(signal.SIGTERM)
    poll.stop()
    t.kill_processes()
    t.require(rc == 0, f"fxagent exited {rc} after SIGTERM; log: {d.text()[-2000:]}")
    t.check(not os.path.exists(file_dir) or not os.listdir(file_dir),
            f"chunks in {file_dir} (the file's output.directory) despite --output-dir")
    chunks = d.chunks()
    t.require(set(chunks) == {"hot"}, f"chunks of {sorted(chunks)} in {d.out}, want 'hot'")
    lst = chunks["hot"]
    t.check(len(lst) >= 3, f"{len(lst)} chunks in about 3 s with --window 1, want at least 3")
    full = 0
    n_total, cpu_total = 0, 0.0
    for i, (seq, path) in enumerate(lst):
        prof = t.load(path)
        fx = check_chunk(t, prof, "hot", seq, path)
        name = os.path.basename(path)
        a, b = fx["windowStart"], fx["windowEnd"]
        if i == len(lst) - 1:
            t.check(0 < b - a < 1000 and a % 1000 == 0, f"{name}: the window cut short by "
                    f"SIGTERM is {a!r}..{b!r}")
        elif i > 0:
            full += 1
            t.check(abs(b - a - 1000) <= EPS_MS and abs(a - round(a / 1000) * 1000) <= EPS_MS,
                    f"{name}: window {a!r}..{b!r}, want 1 s on whole seconds (--window 1)")
        interval = prof.data["meta"]["interval"]
        t.check(fxtest.near(interval, 1000 / 49, 0.01),
                f"{name}: meta.interval {interval}, want 1000/49 (--frequency 49)")
        n_total += prof.weight(prof.threads_of(w.pid))
        cpu_total += poll.seconds(w.pid, a, b)
    t.check(full >= 1, f"no complete 1 s window among {len(lst)} chunks")
    want = 49 * cpu_total
    t.note(f"--window 1 --frequency 49: {len(lst)} chunks ({full} complete), fx-hot-ab "
           f"{n_total} samples for {cpu_total:.2f} s of CPU, want {want:.0f}")
    t.check(abs(n_total - want) <= 0.2 * want + 3,
            f"{n_total} samples of fx-hot-ab at --frequency 49, want about {want:.0f}")
    cli = t.cli(lst[len(lst) // 2][1], "override")
    t.check(cli.handles(pid=w.pid), "profiler-cli: no fx-hot-ab thread in a 1 s chunk")
    cli.stop()


def body(t):
    check_config(t)
    bad_start(t)
    overrides(t)


fxtest.main(body)

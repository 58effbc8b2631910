# SPDX-License-Identifier: MIT
"""Names are kept byte for byte, and a binary is named by the path each process
mapped it at.

- comm: a process that renamed itself (prctl PR_SET_NAME) to a name holding a
  newline, a tab, a control byte and UTF-8, and one whose name ends in a
  newline (the kernel's comm file adds one more), show by their whole name.
- path: a binary at a path holding newlines and a literal backslash sequence
  ("\\012", which /proc/PID/maps would print for a newline too) is named by its
  whole path in the profile's libs, and its process by the name exec gave it.
- copies: four byte-identical copies of one binary (one build-id) at four
  paths, two started before the agent (read from /proc) and two after (perf
  MMAP2 records), all busy at once: each process's samples are in the lib of
  its own path.
One system-wide recording; everything read from the profile file and its
threads, and the thread names through profiler-cli too."""

import os
import shutil
import subprocess
import time

import fxtest

SECONDS = 5
# At most 15 bytes each: what PR_SET_NAME keeps.
COMMS = [b"fx\nnl\x01ctl\t\xc3\xa9", b"fx-trail\n"]
ODD_DIR = b"lit\\012 dir\nx"
ODD_NAME = b"fx\nnamed"
COPIES = [(b"a", b"fx-copy-one", True), (b"b", b"fx-copy-two", True),
          (b"c", b"fx-copy-three", False), (b"d", b"fx-copy-four", False)]
MIN_SAMPLES = 10  # attribution, not load: 7 busy processes share the CPUs


def text(b):
    return b.decode("utf-8")


def start(t, exe, name):
    """Start fx-named at `exe` (bytes) named `name` (bytes, or b"-" to keep its
    exec name) for longer than the recording; returns once it is renamed."""
    p = t.spawn([exe, str(SECONDS + 30).encode(), name], stdout=subprocess.PIPE)
    line = p.stdout.readline()
    t.require(line == b"ready\n", f"{exe!r} did not start: {line!r}")
    return p


def lib_paths(prof, pid, func):
    """{lib path: weight} of a pid's samples whose leaf user frame is `func`."""
    libs = prof.data["libs"]
    shared = prof.data["shared"]
    res_lib = shared["resourceTable"]["lib"]
    out = {}
    for th in prof.threads_of(pid):
        for st, w in prof.samples(th):
            for f in reversed(prof.stack_frames(st)):
                fn = prof.frame_func[f]
                if prof.func_names[fn] != func:
                    continue
                r = shared["funcTable"]["resource"][fn]
                lib = res_lib[r] if r is not None else None
                path = libs[lib]["path"] if lib is not None else None
                out[path] = out.get(path, 0) + w
                break
    return out


def body(t):
    src = os.path.join(t.workloads, "fx-named").encode()
    t.require(os.access(src, os.X_OK), f"workload {src!r} is not built")
    work = t.work.encode()

    named = [(c, start(t, src, c)) for c in COMMS]

    odd_dir = os.path.join(work, ODD_DIR)
    os.makedirs(odd_dir)
    odd_exe = os.path.join(odd_dir, ODD_NAME)
    shutil.copyfile(src, odd_exe)
    os.chmod(odd_exe, 0o755)
    odd = start(t, odd_exe, b"-")

    copies = []
    for d, name, early in COPIES:
        os.makedirs(os.path.join(work, d))
        exe = os.path.join(work, d, name)
        shutil.copyfile(src, exe)
        os.chmod(exe, 0o755)
        copies.append((exe, name, early))
    running = [(exe, name, start(t, exe, b"-")) for exe, name, early in copies if early]

    out = os.path.join(t.work, "names.json.gz")
    log = open(os.path.join(t.work, "names.agent.log"), "w")
    agent = t.spawn([t.agent, "--once", "--duration", f"{SECONDS}s", "--output", out],
                    stderr=log)
    # The agent has its events open: the late copies come as MMAP2 records.
    time.sleep(fxtest.scaled(1))
    running += [(exe, name, start(t, exe, b"-")) for exe, name, early in copies if not early]
    try:
        rc = agent.wait(timeout=fxtest.scaled(SECONDS + 60))
    except subprocess.TimeoutExpired:
        raise fxtest.Stop(f"fxagent --duration {SECONDS}s did not end in time")
    log.close()
    t.require(rc == 0, f"fxagent --once exited {rc}; see names.agent.log")
    prof = t.load(out)

    # (a) comms with control bytes, whole.
    for comm, p in named:
        want = text(comm)
        ths = prof.threads_of(p.pid)
        if not t.check(ths, f"no thread of pid {p.pid} (comm {comm!r}) in the profile"):
            continue
        for th in ths:
            t.check(th["name"] == want and th["processName"] == want,
                    f"pid {p.pid}: thread name {th['name']!r}, processName "
                    f"{th['processName']!r}, want {want!r} for both")

    # (b) a path with newlines and a literal backslash sequence, whole.
    want_path, want_name = text(odd_exe), text(ODD_NAME)
    libs = [(lib["path"], lib["name"]) for lib in prof.data["libs"]]
    t.check((want_path, want_name) in libs,
            f"libs have no ({want_path!r}, {want_name!r}); the fx-named ones: "
            f"{[lib for lib in libs if 'named' in lib[0] or 'fx-copy' in lib[0]]}")
    got = lib_paths(prof, odd.pid, "named_spin")
    t.check(sum(got.values()) >= MIN_SAMPLES and set(got) == {want_path},
            f"pid {odd.pid}: named_spin samples by lib path {got}, want >= {MIN_SAMPLES} "
            f"all in {want_path!r}")
    for th in prof.threads_of(odd.pid):
        t.check(th["processName"] == want_name,
                f"pid {odd.pid}: processName {th['processName']!r}, want {want_name!r}")

    # (c) one binary at four paths: each process in its own.
    for exe, name, p in running:
        want = text(exe)
        got = lib_paths(prof, p.pid, "named_spin")
        t.check(sum(got.values()) >= MIN_SAMPLES and set(got) == {want},
                f"pid {p.pid} ({text(name)}): named_spin samples by lib path {got}, "
                f"want >= {MIN_SAMPLES} all in {want!r}")
        t.check((want, text(name)) in libs, f"libs have no ({want!r}, {text(name)!r})")

    # What the Firefox Profiler shows: the names, whole.
    cli = t.cli(prof.path, "names")
    rows = cli.threads()
    for comm, p in named:
        got = [r["name"] for r in rows if str(r["pid"]) == str(p.pid)]
        t.check(got and all(g == text(comm) for g in got),
                f"profiler-cli: pid {p.pid} threads named {got}, want {text(comm)!r}")
    t.kill_processes()


fxtest.main(body)

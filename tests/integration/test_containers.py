# SPDX-License-Identifier: MIT
"""Binaries the host cannot open by path are symbolized too.

- A binary deleted right after it started (started after the agent, so it is
  known only from its MMAP2 record): read through /proc/PID/map_files.
- A binary in another mount namespace (a tmpfs mounted only there, as in a
  container): the host path does not exist, the process's view does.
Both run fx-hot-ab's code under another name; hot_a and hot_b must be named.
"""

import os
import shutil
import subprocess
import time

import fxtest

SECONDS = 4


def check_symbolized(t, prof, comm, path):
    ths = prof.threads_named(comm)
    t.require(ths, f"no thread named {comm} in the profile; threads: "
              f"{sorted({th['name'] for th in prof.threads})[:30]}")
    n = prof.weight(ths)
    t.require(n > 50, f"{comm}: only {n} samples")
    a = prof.share(ths, prof.has_func("hot_a"))
    b = prof.share(ths, prof.has_func("hot_b"))
    t.note(f"{comm}: {n} samples, hot_a {a:.1f}%, hot_b {b:.1f}%")
    t.check(a > 50 and b > 15, f"{comm}: hot_a {a:.1f}% / hot_b {b:.1f}% of {n} samples: "
            "the binary was not symbolized")
    libs = [lib for lib in prof.data["libs"] if lib["path"] == path]
    t.check(libs, f"no lib with path {path}; libs: {[lib['path'] for lib in prof.data['libs']]}")
    if libs:
        t.check(len(libs[0]["codeId"]) == 40, f"{path}: codeId {libs[0]['codeId']!r} is not a "
                "GNU build-id")


def deleted_binary(t):
    exe = os.path.join(t.work, "fx-deleted")
    shutil.copy(os.path.join(t.workloads, "fx-hot-ab"), exe)
    out = os.path.join(t.work, "deleted.json.gz")
    agent = t.spawn([t.agent, "--once", "--duration", f"{SECONDS + 1}s", "--output", out],
                    stderr=subprocess.PIPE, text=True)
    time.sleep(0.7)
    t.spawn([exe, str(SECONDS)])
    # Popen returns once exec has mapped the binary: delete it before the
    # agent reads the MMAP2 record, so only map_files can still reach it.
    os.unlink(exe)
    _, err = agent.communicate(timeout=SECONDS + 60)
    t.require(agent.returncode == 0, f"fxagent exited {agent.returncode}: {err[-2000:]}")
    check_symbolized(t, t.load(out), "fx-deleted", exe)


def other_mount_namespace(t):
    if not shutil.which("unshare"):
        raise fxtest.Stop("unshare (util-linux) is missing")
    mnt = os.path.join(t.work, "ns-only")
    os.makedirs(mnt)
    exe = os.path.join(mnt, "fx-ns-hot")
    script = (f"mount -t tmpfs fxns {mnt} && cp {t.workloads}/fx-hot-ab {exe} && "
              f"exec {exe} {SECONDS + 20}")
    w = t.spawn(["unshare", "--mount", "--propagation", "private", "sh", "-c", script])
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            if open(f"/proc/{w.pid}/comm").read().strip() == "fx-ns-hot":
                break
        except OSError:
            pass
        time.sleep(0.05)
    t.require(not os.path.exists(exe), f"{exe} is visible from the host: the test is void")
    prof = t.record("namespace", SECONDS, pids=[w.pid])
    check_symbolized(t, prof, "fx-ns-hot", exe)


def body(t):
    deleted_binary(t)
    other_mount_namespace(t)


fxtest.main(body)

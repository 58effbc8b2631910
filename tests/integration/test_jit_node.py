# SPDX-License-Identifier: MIT
"""Node.js JIT code, named from its perf map and its jitdump, beside perf in
the same run.

`node --perf-basic-prof fib.js` computes fib(25) in a loop: V8 compiles fib
(`JS:*fib`) into anonymous executable memory and appends a line a function
to /tmp/perf-PID.map; with `--perf-prof` too it writes ./jit-PID.dump (code
loads, through a stdio buffer) and maps it. fxagent (--once -p) and `perf
record -g` sample it at 99 Hz over the same seconds, once with each of
`--perf-basic-prof` and `--perf-basic-prof --perf-prof`. Checked each time:
- of the samples whose innermost frame is in the JIT code, at least 95% are
  named (not an address);
- `JS:*fib`'s self share in fxagent is within 3.5 standard errors (of the
  difference of two samplings, plus 2 points) of perf's;
- at least 95% of the samples' stacks reach _start through the JIT frames
  (V8 keeps frame pointers; its code has no CFI);
- the JIT lib says where its names came from ("perf map"; "jitdump, perf
  map": the dump's names, and the map's for what the dump's buffer still
  holds).
With `--perf-prof` alone the JIT lib's names come from the jitdump, every
named frame is one of V8's ("JS:...", "Builtin:..."), and stacks are whole.
Without a flag there is no map: the frames stay addresses and the lib says
"no perf map"; a map someone else planted at its name (a symlink to
/etc/passwd, a file of another user, one anyone may write, one older than
the process, a FIFO, one over 512 MiB) is not read, and the lib says why.
Skipped, saying so, where node is not installed.
"""

import os
import re
import shutil
import time

import fxtest
from fxjit import ADDRESS, FIB_JS, jit_lib, jit_named, jit_status, stacks

SECONDS = 4
V8_NAME = re.compile(r"[A-Za-z]+:\S")


def check_run(t, tag, prof, data, pid, want):
    lib = jit_lib(prof, pid)
    t.require(lib is not None, f"{tag}: no [jit pid {pid}] lib in the profile")
    st = jit_status(prof, pid)
    t.check(st == want, f"{tag}: the JIT lib's names come from {st!r}, want {want!r}")

    samples = stacks(prof, pid)
    total = sum(wt for *_, wt in samples)
    in_jit = [(names[-1], wt) for names, libs, wt in samples if libs[-1] == lib]
    jit_n = sum(wt for _, wt in in_jit)
    named = sum(wt for n, wt in in_jit if not ADDRESS.fullmatch(n))
    reach = sum(wt for names, _, wt in samples if "_start" in names)
    fib = sum(wt for names, _, wt in samples if names[-1].startswith("JS:*fib "))
    t.note(f"{tag}: {total} samples, {jit_n} in JIT code, {named} of them named; "
           f"{reach} reach _start; JS:*fib self {fib}")
    t.require(jit_n >= 20, f"{tag}: only {jit_n} samples in JIT code: fib did not run compiled?")
    t.check(named >= 0.95 * jit_n, f"{tag}: {named} of {jit_n} JIT samples named")
    t.check(reach >= 0.95 * total, f"{tag}: {reach} of {total} stacks reach _start")

    perf_n, shares = fxtest.perf_self_shares(t, data)
    perf_fib = sum(v for k, v in shares.items() if k.startswith("JS:*fib "))
    ours = 100.0 * fib / max(total, 1)
    tol = fxtest.diff_tol(ours, total, perf_fib, perf_n)
    t.note(f"{tag}: JS:*fib self: fxagent {ours:.1f}% of {total}, perf {perf_fib:.1f}% of "
           f"{perf_n} (tolerance {tol:.1f} points)")
    t.check(perf_fib > 0, f"{tag}: perf report names no JS:*fib: the perf map was not written?")
    t.check(abs(ours - perf_fib) <= tol, f"{tag}: JS:*fib self: fxagent {ours:.1f}% against "
            f"perf {perf_fib:.1f}%, more than {tol:.1f} points apart")


def body(t):
    node = shutil.which("node")
    if not node:
        print("SKIP: this machine has no node (apt-get install nodejs)")
        raise SystemExit(fxtest.SKIP)
    script = os.path.join(t.work, "fib.js")
    with open(script, "w") as f:
        f.write(FIB_JS)

    for tag, flags, want in (("node", ["--perf-basic-prof"], "perf map"),
                             ("node-both", ["--perf-basic-prof", "--perf-prof"],
                              "jitdump, perf map")):
        w = t.spawn([node, *flags, script], cwd=t.work)
        time.sleep(1.5)  # fib compiled by then
        prof, data = t.record_beside_perf(tag, SECONDS, w.pid)
        w.kill()
        check_run(t, tag, prof, data, w.pid, want)

    # The jitdump alone: V8's stdio buffer may still hold the optimized
    # fib's record, so not every frame need be named; those that are, are
    # V8's names, and the walk is whole.
    w = t.spawn([node, "--perf-prof", script], cwd=t.work)
    time.sleep(1.5)
    prof = t.record("node-jitdump", SECONDS, pids=[w.pid])
    w.kill()
    st = jit_status(prof, w.pid)
    t.check(st == "jitdump", f"--perf-prof: the JIT lib's names come from {st!r}")
    samples = stacks(prof, w.pid)
    lib = jit_lib(prof, w.pid)
    names = [n for ns, libs, _ in samples for n, lb in zip(ns, libs) if lb == lib]
    named = [n for n in names if not ADDRESS.fullmatch(n)]
    odd = [n for n in named if not V8_NAME.match(n)]
    total = sum(wt for *_, wt in samples)
    reach = sum(wt for ns, _, wt in samples if "_start" in ns)
    t.note(f"--perf-prof: {len(named)} of {len(names)} JIT frames named from the jitdump; "
           f"{reach} of {total} stacks reach _start")
    t.check(not odd, f"--perf-prof: JIT frames named {sorted(set(odd))[:5]}")
    t.check(reach >= 0.95 * total, f"--perf-prof: {reach} of {total} stacks reach _start")

    # Without --perf-basic-prof: no map, and the lib says so. Then maps
    # that someone else put at its name (the node never writes one): a
    # symlink, a file of another user, one anyone may write. Not read.
    w = t.spawn([node, script], cwd=t.work)
    time.sleep(1.5)
    planted = f"/tmp/perf-{w.pid}.map"
    lines = "".join(f"{a:x} 100000 planted\n" for a in range(0x10000, 1 << 47, 1 << 40))
    try:
        for tag, plant, want in (("none", None, "no perf map"),
                                 ("symlink", "symlink", "perf map not read"),
                                 ("foreign", (12345, 0o644), "perf map not read"),
                                 ("writable", (os.getuid(), 0o666), "perf map not read"),
                                 ("stale", (os.getuid(), 0o644), "perf map not read"),
                                 ("fifo", "fifo", "perf map not read: not a regular"),
                                 ("huge", "huge", "perf map not read: over 512 MiB")):
            if os.path.lexists(planted):
                os.unlink(planted)
            if plant == "symlink":
                os.symlink("/etc/passwd", planted)
            elif plant == "fifo":  # a reader that opened it blocking would hang
                os.mkfifo(planted, 0o644)
            elif plant == "huge":  # sparse: 513 MiB of holes after the lines
                with open(planted, "w") as f:
                    f.write(lines)
                os.truncate(planted, 513 << 20)
            elif plant:
                with open(planted, "w") as f:
                    f.write(lines)
                os.chown(planted, plant[0], 0)
                os.chmod(planted, plant[1])
                if tag == "stale":  # written an hour before the process started
                    os.utime(planted, (time.time() - 3600, time.time() - 3600))
            prof = t.record(f"node-{tag}", 1, pids=[w.pid])
            st = jit_status(prof, w.pid)
            t.check(st and st.startswith(want), f"map {tag}: the JIT lib says {st!r}")
            frames, named = jit_named(prof, w.pid)
            t.check(frames and not named, f"map {tag}: {named} of {frames} JIT frames named")
            t.note(f"map {tag}: {st}")
    finally:
        if os.path.lexists(planted):
            os.unlink(planted)
    w.kill()


if __name__ == "__main__":
    fxtest.main(body)

# SPDX-License-Identifier: MIT
"""Node.js JIT code, named from its perf map, beside perf in the same run.

`node --perf-basic-prof fib.js` computes fib(25) in a loop: V8 compiles fib
(`JS:*fib`) into anonymous executable memory and appends a line a function
to /tmp/perf-PID.map. fxagent (--once -p) and `perf record -g` sample it at
99 Hz over the same seconds. Checked:
- of the samples whose innermost frame is in the JIT code, at least 95% are
  named from the map (not an address);
- `JS:*fib`'s self share in fxagent is within 3.5 standard errors (of the
  difference of two samplings, plus 2 points) of perf's;
- at least 95% of the samples' stacks reach _start through the JIT frames;
- the JIT lib says where its names came from ("perf map");
- without the flag there is no map: the frames stay addresses and the lib
  says "no perf map"; a map someone else planted at its name (a symlink to
  /etc/passwd, a file of another user, one anyone may write, one older than
  the process) is not read, and the lib says why.
Skipped, saying so, where node is not installed.
"""

import os
import shutil
import time

import fxtest
from fxjit import ADDRESS, jit_lib, jit_named, jit_status, stacks

SECONDS = 4
FIB_JS = """\
function fib(n) { return n < 2 ? n : fib(n - 1) + fib(n - 2); }
function work() { let s = 0; for (;;) { s += fib(25); } }
work();
"""


def body(t):
    node = shutil.which("node")
    if not node:
        print("SKIP: this machine has no node (apt-get install nodejs)")
        raise SystemExit(fxtest.SKIP)
    script = os.path.join(t.work, "fib.js")
    with open(script, "w") as f:
        f.write(FIB_JS)

    w = t.spawn([node, "--perf-basic-prof", script], cwd=t.work)
    time.sleep(1.5)  # fib compiled by then
    prof, data = t.record_beside_perf("node", SECONDS, w.pid)
    w.kill()

    lib = jit_lib(prof, w.pid)
    t.require(lib is not None, f"no [jit pid {w.pid}] lib in the profile")
    st = jit_status(prof, w.pid)
    t.check(st == "perf map", f"the JIT lib's names come from {st!r}, want 'perf map'")

    samples = stacks(prof, w.pid)
    total = sum(wt for *_, wt in samples)
    in_jit = [(names[-1], wt) for names, libs, wt in samples if libs[-1] == lib]
    jit_n = sum(wt for _, wt in in_jit)
    named = sum(wt for n, wt in in_jit if not ADDRESS.fullmatch(n))
    reach = sum(wt for names, _, wt in samples if "_start" in names)
    fib = sum(wt for names, _, wt in samples if names[-1].startswith("JS:*fib "))
    t.note(f"fxagent: {total} samples, {jit_n} in JIT code, {named} of them named; "
           f"{reach} reach _start; JS:*fib self {fib}")
    t.require(jit_n >= 20, f"only {jit_n} samples in JIT code: fib did not run compiled?")
    t.check(named >= 0.95 * jit_n, f"{named} of {jit_n} JIT samples named from the perf map")
    t.check(reach >= 0.95 * total, f"{reach} of {total} stacks reach _start")

    perf_n, shares = fxtest.perf_self_shares(t, data)
    perf_fib = sum(v for k, v in shares.items() if k.startswith("JS:*fib "))
    ours = 100.0 * fib / max(total, 1)
    tol = fxtest.diff_tol(ours, total, perf_fib, perf_n)
    t.note(f"JS:*fib self: fxagent {ours:.1f}% of {total}, perf {perf_fib:.1f}% of {perf_n} "
           f"(tolerance {tol:.1f} points)")
    t.check(perf_fib > 0, "perf report names no JS:*fib: the perf map was not written?")
    t.check(abs(ours - perf_fib) <= tol, f"JS:*fib self: fxagent {ours:.1f}% against perf "
            f"{perf_fib:.1f}%, more than {tol:.1f} points apart")

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
                                 ("stale", (os.getuid(), 0o644), "perf map not read")):
            if os.path.lexists(planted):
                os.unlink(planted)
            if plant == "symlink":
                os.symlink("/etc/passwd", planted)
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

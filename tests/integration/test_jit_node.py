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
import re
import shutil
import subprocess
import time

import fxtest

SECONDS = 4
FIB_JS = """\
function fib(n) { return n < 2 ? n : fib(n - 1) + fib(n - 2); }
function work() { let s = 0; for (;;) { s += fib(25); } }
work();
"""


def jit_lib(prof, pid):
    """The index of @pid's JIT lib ("[jit pid N]"), or None."""
    for i, lib in enumerate(prof.data["libs"]):
        if lib["name"] == f"[jit pid {pid}]":
            return i
    return None


def leaves(prof, pid):
    """[(innermost frame's name, its lib, whole stack's names, weight)]."""
    s = prof.data["shared"]
    ft, fu, rt, st = s["frameTable"], s["funcTable"], s["resourceTable"], s["stringArray"]
    out = []
    for th in prof.threads_of(pid):
        for stack, w in prof.samples(th):
            frames = prof.stack_frames(stack)
            if not frames:
                continue
            names = [st[fu["name"][ft["func"][f]]] for f in frames]
            res = fu["resource"][ft["func"][frames[-1]]]
            lib = rt["lib"][res] if res is not None and res >= 0 else None
            out.append((names[-1], lib, names, w))
    return out


def perf_shares(t, data):
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
    data = os.path.join(t.work, "perf.data")
    perf = t.spawn(["perf", "record", "-q", "-e", "cpu-clock", "-F", "99", "-g",
                    "-p", str(w.pid), "-o", data, "--", "sleep", str(SECONDS)],
                   stdout=subprocess.DEVNULL, stderr=open(os.path.join(t.work, "perf.log"), "w"))
    prof = t.record("node", SECONDS, pids=[w.pid])
    try:
        t.require(perf.wait(timeout=fxtest.scaled(60)) == 0,
                  f"perf record exited {perf.returncode}; see perf.log")
    except subprocess.TimeoutExpired:
        raise fxtest.Stop("perf record did not end")
    w.kill()

    lib = jit_lib(prof, w.pid)
    t.require(lib is not None, f"no [jit pid {w.pid}] lib in the profile")
    status = prof.data["meta"]["fxagent"].get("symbols", {})
    st = next((v for k, v in status.items() if k.startswith(f"[jit pid {w.pid}]")), None)
    t.check(st == "perf map", f"the JIT lib's names come from {st!r}, want 'perf map'")

    samples = leaves(prof, w.pid)
    total = sum(wt for *_, wt in samples)
    in_jit = [(n, wt) for n, lb, _, wt in samples if lb == lib]
    jit_n = sum(wt for _, wt in in_jit)
    named = sum(wt for n, wt in in_jit if not re.fullmatch(r"0x[0-9a-f]+", n))
    reach = sum(wt for _, _, names, wt in samples if "_start" in names)
    fib = sum(wt for n, _, _, wt in samples if n.startswith("JS:*fib "))
    t.note(f"fxagent: {total} samples, {jit_n} in JIT code, {named} of them named; "
           f"{reach} reach _start; JS:*fib self {fib}")
    t.require(jit_n >= 20, f"only {jit_n} samples in JIT code: fib did not run compiled?")
    t.check(named >= 0.95 * jit_n, f"{named} of {jit_n} JIT samples named from the perf map")
    t.check(reach >= 0.95 * total, f"{reach} of {total} stacks reach _start")

    perf_n, shares = perf_shares(t, data)
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
            status = prof.data["meta"]["fxagent"].get("symbols", {})
            st = next((v for k, v in status.items() if k.startswith(f"[jit pid {w.pid}]")),
                      None)
            t.check(st and st.startswith(want), f"map {tag}: the JIT lib says {st!r}")
            lib = jit_lib(prof, w.pid)
            names = {n for n, lb, _, _ in leaves(prof, w.pid) if lb == lib}
            t.check(names and all(re.fullmatch(r"0x[0-9a-f]+", n) for n in names),
                    f"map {tag}: JIT frames were named: {sorted(names)[:5]}")
            t.note(f"map {tag}: {st}")
    finally:
        if os.path.lexists(planted):
            os.unlink(planted)
    w.kill()


if __name__ == "__main__":
    fxtest.main(body)

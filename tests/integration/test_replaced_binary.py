# SPDX-License-Identifier: MIT
"""A binary replaced under a running process, as a package upgrade does (it
renames the new build over the old one): the process keeps running the old
build, whose file is now deleted. Names judged against the file now at the
path then look wrong: the agent named the perl 5.36.0-7+deb12u2 that ran,
and they were judged against deb12u4, which apt had put at /usr/bin/perl
meanwhile.

fx-replace-a and fx-replace-b are one program built twice, B with 0x1b0
bytes of code before its functions, so an address of A lies in other
functions of B. In the work directory:
- P1 runs A from `app`; B is renamed over `app`; P2 runs B from `app`; then
  the daemon starts (1 s windows, --check-names): it meets P1's build only
  through P1's mapping;
- Q runs A from `app2`, and B is renamed over `app2` after the daemon wrote
  a window with Q in it.

Checked:
- every named frame of P1 and Q is the function that holds its address in
  A (readelf of A), and of P2 in B; judged by the file now at the path, as
  readelf or perf report would judge it, P1's and Q's names would be wrong
  (so the test can tell the builds apart);
- the libs of P1 and P2 carry the build-ids of A and B (codeId); their
  entries in meta.fxagent.symbols have keys of their own; P1's says the file
  at its path was deleted or replaced, P2's does not; Q's does not in the
  chunks written before `app2` was replaced (the status is decided when a
  chunk is written), and does in those of windows that began a second after;
- the agent's own name check finds 0 wrong.
"""

import gzip
import json
import os
import shutil
import subprocess
import time

import fxtest
from fxdaemon import Daemon, check_chunk
from test_name_check import CHECK_RE, build_id

REPLACED = "deleted or replaced"
STEPS = {f"step_{k}" for k in range(8)} | {"round_of_steps"}


def symtab(path):
    """[(start, size, name)] of the functions in @path's .symtab."""
    out = subprocess.run(["readelf", "-W", "--syms", path], capture_output=True,
                         text=True, check=True).stdout
    syms = []
    for ln in out.splitlines():
        f = ln.split()
        if len(f) >= 8 and f[0].endswith(":") and f[3] == "FUNC" and f[6] != "UND":
            syms.append((int(f[1], 16), int(f[2], 0), f[7]))
    return syms


def judge(prof, pid, syms):
    """(right, wrong, examples) of the named frames of process @pid's lib in
    its samples, against @syms; the frame address is relative to the image
    base, 0 for these PIEs. Inlined frames (depth > 0, wl_now in main) are
    named from DWARF, not .symtab: left out."""
    s = prof.data["shared"]
    ft, fu, rt, st = s["frameTable"], s["funcTable"], s["resourceTable"], s["stringArray"]
    frames = set()
    for th in prof.threads_of(pid):
        for stack, _ in prof.samples(th):
            frames.update(prof.stack_frames(stack))
    right = wrong = 0
    examples = []
    for i in sorted(frames):
        res = fu["resource"][ft["func"][i]]
        lib = rt["lib"][res] if res is not None and res >= 0 else None
        if lib is None or not prof.data["libs"][lib]["name"].startswith("app"):
            continue
        if ft["inlineDepth"][i]:
            continue
        name, addr = st[fu["name"][ft["func"][i]]], ft["address"][i]
        if addr is None or addr < 0 or fxtest.looks_hex(name) or "+0x" in name:
            continue
        covering = [n for a, size, n in syms if a <= addr < a + max(size, 1)]
        if name in covering:
            right += 1
        else:
            wrong += 1
            if len(examples) < 3:
                examples.append(f"0x{addr:x} named {name}, there: {covering}")
    return right, wrong, examples


def lib_of(prof, pid):
    """The lib entry of the `app*` object in @pid's frames, or None."""
    s = prof.data["shared"]
    ft, fu, rt = s["frameTable"], s["funcTable"], s["resourceTable"]
    for th in prof.threads_of(pid):
        for stack, _ in prof.samples(th):
            for f in prof.stack_frames(stack):
                res = fu["resource"][ft["func"][f]]
                if res is not None and res >= 0 and rt["lib"][res] is not None:
                    lib = prof.data["libs"][rt["lib"][res]]
                    if lib["name"].startswith("app"):
                        return lib
    return None


def status_of(prof, lib):
    """meta.fxagent.symbols' entry of @lib, by whichever key it has."""
    sym = prof.data["meta"]["fxagent"].get("symbols", {})
    for key in (f"{lib['name']} ({lib['path']}, build-id {lib.get('codeId') or 'none'})",
                f"{lib['name']} ({lib['path']})", lib["name"]):
        if key in sym:
            return key, sym[key]
    return None, None


def window_start(path):
    """meta.fxagent.windowStart of the chunk at @path, or None while it cannot
    be read."""
    try:
        with gzip.open(path, "rt") as f:
            return json.load(f)["meta"]["fxagent"]["windowStart"]
    except (OSError, ValueError, KeyError, EOFError):
        return None


def rename_over(src, dst):
    """A copy of @src renamed over @dst, as dpkg installs a file."""
    shutil.copy2(src, dst + ".new")
    os.rename(dst + ".new", dst)


def body(t):
    a = os.path.join(t.workloads, "fx-replace-a")
    b = os.path.join(t.workloads, "fx-replace-b")
    bin_dir = os.path.join(t.work, "bin")
    os.makedirs(bin_dir)
    app, app2 = os.path.join(bin_dir, "app"), os.path.join(bin_dir, "app2")
    sa, sb = symtab(a), symtab(b)
    t.require({n: v for v, _, n in sa if n in STEPS} != {n: v for v, _, n in sb if n in STEPS},
              "fx-replace-a and fx-replace-b put their functions at the same addresses")
    bid_a, bid_b = build_id(a), build_id(b)
    t.require(bid_a and bid_b and bid_a != bid_b, f"build-ids {bid_a}, {bid_b}")

    seconds = fxtest.scaled(60)
    shutil.copy2(a, app)
    p1 = t.spawn([app, str(seconds)])
    time.sleep(0.2)
    rename_over(b, app)
    p2 = t.spawn([app, str(seconds)])
    shutil.copy2(a, app2)
    q = t.spawn([app2, str(seconds)])

    d = Daemon(t, "replaced", "window:\n  seconds: 1\n", "--check-names")
    d.wait_started()
    fxtest.wait_for(lambda: len(d.chunks(running=True).get("system", [])) >= 2, 20, 0.1)
    written = {p for _, p in d.chunks(running=True).get("system", [])}
    replaced_ms = time.time() * 1000
    rename_over(b, app2)
    # A window that began a second after the rename; a slow writer (ASan,
    # one CPU) stretches windows, so their count says nothing of their times.
    starts = {}

    def began_after():
        for _, p in d.chunks(running=True).get("system", []):
            if p not in written and starts.get(p) is None:
                starts[p] = window_start(p)
        return any(w and w > replaced_ms + 1000 for w in starts.values())

    t.check(fxtest.wait_for(began_after, 30, 0.2),
            "no window began a second after app2 was replaced within 30 s")
    rc = d.stop()
    t.kill_processes()
    text = d.text()
    t.require(rc == 0, f"fxagent exited {rc}: {text[-1500:]}")

    tally = {"P1": [0, 0, 0], "P2": [0, 0, 0], "Q": [0, 0, 0]}  # right, wrong, by path
    before = after = 0
    for seq, path in d.chunks().get("system", []):
        prof = t.load(path)
        fx = check_chunk(t, prof, "system", seq, path)
        name = os.path.basename(path)
        libs = {}
        for tag, pid, ran, now in (("P1", p1.pid, sa, sb), ("P2", p2.pid, sb, sb),
                                   ("Q", q.pid, sa, sa if fx["windowEnd"] < replaced_ms
                                    else sb)):
            right, wrong, ex = judge(prof, pid, ran)
            by_path = judge(prof, pid, now)[1]
            tally[tag][0] += right
            tally[tag][1] += wrong
            tally[tag][2] += by_path
            t.check(not wrong, f"{name}: {tag}'s names are not those of the build it ran: "
                    f"{'; '.join(ex)}")
            libs[tag] = lib_of(prof, pid)
        if libs["P1"] and libs["P2"]:
            k1, s1 = status_of(prof, libs["P1"])
            k2, s2 = status_of(prof, libs["P2"])
            t.check(libs["P1"].get("codeId") == bid_a and libs["P2"].get("codeId") == bid_b,
                    f"{name}: codeIds {libs['P1'].get('codeId')}, {libs['P2'].get('codeId')}; "
                    f"A is {bid_a}, B {bid_b}")
            t.check(k1 and k2 and k1 != k2, f"{name}: P1 and P2 under keys {k1!r}, {k2!r}")
            t.check(s1 and REPLACED in s1, f"{name}: P1's status {s1!r} does not say that "
                    "its file was replaced")
            t.check(s2 and REPLACED not in s2, f"{name}: P2's status {s2!r}")
        if libs["Q"]:
            _, sq = status_of(prof, libs["Q"])
            if path in written:
                before += 1
                t.check(sq and REPLACED not in sq,
                        f"{name}: Q's status {sq!r} before app2 was replaced")
            elif fx["windowStart"] > replaced_ms + 1000:
                after += 1
                t.check(sq and REPLACED in sq,
                        f"{name}: Q's status {sq!r} after app2 was replaced")
    for tag, (right, wrong, by_path) in tally.items():
        t.note(f"{tag}: {right} names right, {wrong} wrong; judged by the file now at its "
               f"path, {by_path} wrong")
        t.check(right >= 3, f"{tag}: {right} named frames: too few to judge")
    t.check(tally["P1"][2] > 0 and tally["Q"][2] > 0,
            "judged by the file at the path, no name of P1 or Q is wrong: the two builds "
            "cannot be told apart by this test")
    t.check(before >= 1 and after >= 1, f"{before} chunks of Q before app2 was replaced, "
            f"{after} after: want one of each")
    m = CHECK_RE.search(text)
    t.check(m and int(m["wrong"]) == 0 and int(m["checked"]) > 0,
            f"the agent's name check: {m[0] if m else 'no count'}")
    t.note(m[0] if m else "no name check count")


if __name__ == "__main__":
    fxtest.main(body)

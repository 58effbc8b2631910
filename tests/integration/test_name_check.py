# SPDX-License-Identifier: MIT
"""No name is wrong: the daemon, whole system, 1 s windows, with
--check-names (every name judged against the agent's own second reading of
its object: .symtab/.dynsym, the debug file, .plt, .eh_frame_hdr, DWARF;
agent/symbols/namecheck.c), for WINDOWS windows or more, while these run:

- Debian's stripped python3.11, perl, xz and sqlite3 (.dynsym and .eh_frame
  only; the programs of integration.stripped_perf), libc from libc6-dbg's
  debug file;
- fx-churn: 40 new processes a second, each an exec, half of them
  dlopen()ing libfxplug.so; fx-dlopen loading and unloading a library;
- fx-cpp (C++ with DWARF, demangled names) and fx-inline (inline chains).

Caches carry over from window to window. Checked:
- the agent's closing count says 0 names wrong, and no name was logged as
  wrong;
- every name of the chunks was judged: the count of judged names is at
  least the number of named frame levels in the chunks outside the kernel
  (each window's frames are judged once, when the window is written);
- each of the programs above has named frames in the chunks, so that each
  was audited;
- every chunk's meta.fxagent.symbols says true of each object whose file
  is still the one profiled (its build-id, and unchanged since the test
  began: `strip` keeps a build-id): "stripped" has no .symtab and no
  debug file, "symtab" has a .symtab, "debug file" names an existing debug
  file (debugPath) of the same build-id (readelf reads them).
"""

import os
import re
import subprocess
import time

import fxtest
from fxdaemon import Daemon
from test_stripped_perf import programs

# FX_NAME_CHECK_WINDOWS=N: a longer run, for the count of names in docs/usage.md.
WINDOWS = int(os.environ.get("FX_NAME_CHECK_WINDOWS", "4"))
SECONDS = WINDOWS * 4 + 60  # the workloads outlast the windows on a slow machine
CHECK_RE = re.compile(r"name check: (?P<wrong>\d+) of (?P<checked>\d+) names wrong; "
                      r"(?P<unnamed>\d+) addresses unnamed")


def start_programs(t):
    """The Debian programs, each fed as integration.stripped_perf feeds it."""
    tags = []
    for tag, argv, feed in programs(t, SECONDS):
        if isinstance(feed, list):
            cat = t.spawn(["cat", *feed], stdout=subprocess.PIPE)
            t.spawn(argv, stdin=cat.stdout, stdout=subprocess.DEVNULL)
            cat.stdout.close()
        else:
            p = t.spawn(argv, stdin=subprocess.PIPE if feed else
                        subprocess.DEVNULL, stdout=subprocess.DEVNULL, text=True)
            if feed:
                p.stdin.write(feed)
                p.stdin.close()
        tags.append((tag, os.path.basename(argv[0])))
    return tags


def named_levels(prof):
    """Frame levels of the profile with a native symbol (a name the agent
    gave, not an address), outside the kernel; and the lib names they are in."""
    s = prof.data["shared"]
    ft, fu, rt, st = s["frameTable"], s["funcTable"], s["resourceTable"], s["stringArray"]
    libs = prof.data["libs"]
    n, where = 0, set()
    for i in range(ft["length"]):
        res = fu["resource"][ft["func"][i]]
        lib = rt["lib"][res] if res is not None and res >= 0 else None
        if lib is None or libs[lib]["name"] == "[kernel.kallsyms]":
            continue
        if ft["nativeSymbol"][i] is None or st[fu["name"][ft["func"][i]]] == "??":
            continue
        n += 1
        where.add(libs[lib]["name"])
    return n, where


def readelf(args, path):
    return subprocess.run(["readelf", "-W", *args, path], capture_output=True,
                          text=True).stdout


def build_id(path):
    m = re.search(r"Build ID: ([0-9a-f]+)", readelf(["-n"], path))
    return m[1] if m else None


def check_origins(t, prof, seen, since):
    """meta.fxagent.symbols against the files; @seen: (lib, status) done. A
    file changed after @since (wall seconds) may not be the one read, even
    with the same build-id (strip keeps it): left out."""
    status = prof.data["meta"]["fxagent"].get("symbols", {})
    for lib in prof.data["libs"]:
        # Two libs of one name are keyed "NAME (PATH)".
        st = status.get(f"{lib['name']} ({lib['path']})", status.get(lib["name"]))
        key = (lib["path"], lib.get("codeId"), st)
        if st not in ("stripped", "symtab", "debug file") or key in seen:
            continue
        seen.add(key)
        path = lib["path"]
        if (not os.path.isfile(path) or os.stat(path).st_mtime >= since or
                build_id(path) != lib.get("codeId")):
            continue  # replaced, changed or gone since: maybe not the file read
        symtab = re.search(r"\] \.symtab\s", readelf(["-S"], path)) is not None
        dpath = lib.get("debugPath")
        if st == "stripped":
            t.check(not symtab and dpath == path,
                    f"{lib['name']}: 'stripped', but .symtab {symtab}, debugPath {dpath}")
        elif st == "symtab":
            t.check(symtab, f"{lib['name']}: 'symtab', but {path} has no .symtab")
        else:
            t.check(dpath != path and os.path.isfile(dpath) and
                    build_id(dpath) == lib.get("codeId"),
                    f"{lib['name']}: 'debug file' {dpath}, not a debug file of build-id "
                    f"{lib.get('codeId')}")


def body(t):
    since = time.time()
    tags = start_programs(t)
    t.workload("fx-churn", SECONDS, 40)
    t.workload("fx-dlopen", SECONDS)
    t.workload("fx-cpp", SECONDS)
    t.workload("fx-inline", SECONDS)
    d = Daemon(t, "names", "window:\n  seconds: 1\n", "--check-names")
    d.wait_started()
    fxtest.wait_for(lambda: len(d.chunks(running=True).get("system", [])) >= WINDOWS + 1,
                    WINDOWS * 4, 0.2)
    rc = d.stop()
    t.kill_processes()
    text = d.text()
    t.require(rc == 0, f"fxagent exited {rc}: {text[-1500:]}")
    m = CHECK_RE.search(text)
    t.require(m, f"the agent did not say what its name check found: {text[-1500:]}")
    wrong, checked = int(m["wrong"]), int(m["checked"])

    chunks = d.chunks().get("system", [])
    total, where, seen = 0, set(), set()
    for _, path in chunks:
        prof = t.load(path)
        n, w = named_levels(prof)
        total += n
        where |= w
        check_origins(t, prof, seen, since)
    t.note(f"{len(chunks)} windows: {checked} names judged, {wrong} wrong, {m['unnamed']} "
           f"addresses unnamed; {total} named frame levels in the chunks, in {len(where)} "
           f"objects; {len(seen)} symbol statuses checked")
    logged = re.findall(r"name check: \S+ \(level \d+\) is named .*", text)
    for ln in logged[:5]:
        t.note("  " + ln)
    t.check(wrong == 0 and not logged, f"{wrong} of {checked} names are wrong")
    t.check(len(chunks) >= WINDOWS, f"{len(chunks)} chunks, want {WINDOWS}")
    t.check(checked >= total, f"{checked} names judged, but the chunks hold {total} named "
            "frame levels: some names went unjudged")
    want = {exe for _, exe in tags} | {"fx-churn", "libfxplug.so", "fx-cpp", "fx-inline",
                                       "libc.so.6"}
    t.check(want <= where, f"no named frames in {sorted(want - where)}: not audited")


if __name__ == "__main__":
    fxtest.main(body)

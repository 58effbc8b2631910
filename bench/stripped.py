#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Stripped objects: this build's symbolizer against an older build's.

Production binaries are stripped: Debian's python3.11, libpython3.11 and
liblzma keep .dynsym and .eh_frame, no .symtab, no DWARF. The
symbolizer reads such an object's FDE table (.eh_frame_hdr, .eh_frame) and
names code without a symbol after the start of the function its FDE covers;
the bound is symbolization of 2000 cold addresses within 10% of what it
was before, with the tables' memory measured.

Objects: python3.11 (the interpreter, linked with libpython statically),
libpython3.11.so.1.0, liblzma.so.5, and libc.so.6 as if libc6-dbg were not
installed (a copy whose build-id is altered, so no debug file matches; its
code untouched). For each, `fx-bench-sym pick-code` (of this build) picks N
distinct addresses at random in the executable segments, every byte as
likely; no DWARF to pick from. Then `fx-bench-sym resolve` of this build
and, with --compare-build DIR, of that build (an older revision, built by
you) take turns, P processes each in the order old new new old old ...,
each doing R rounds of cold (a new symbolizer: open the file, read its
tables, resolve the batch) and warm (the same batch again, from the
(object, offset) cache). The figure is the median of all rounds of a
build; new/old is the ratio of the medians, with the range of the ratios of
processes run back to back (the machine's noise). Files in the page cache.

A cold load copies sections of hundreds of KiB (.eh_frame is 400 KiB in
python3.11) into buffers it frees again, so its time depends on whether
those land on fresh pages (a page fault each) or on pages the heap kept.
With glibc's default, dynamic thresholds that depends on the order of
earlier allocations: the same code measured 560 us and 790 us from one
unrelated allocation more or less. So each build runs under fixed malloc
thresholds (GLIBC_TUNABLES), in two settings:
- fresh: buffers of 128 KiB and more mapped for the occasion and the heap's
  free top returned; what the agent pays, which calls malloc_trim(0) after
  every window;
- reused: nothing returned to the system; after the first round, only the
  CPU's work.
(--malloc default adds glibc's own behaviour, for what it is worth.)

The batch is also run with N/10 of the addresses: from the two, what a cold
batch costs per object (loading it) and per address (a look-up not cached
yet), cold(N) = object + N x address.

From the first process's answers: how many addresses got a symbol's name,
the name of their FDE's function ("grouped"), or none, and how many distinct
frames they make. What the symbolizer holds after the cold batch, from this
build's helper (older ones do not print it): the FDE ranges and their bytes
(its stats), everything it counts, what malloc's heap grew by, and what the
RSS grew by in a process's first round.

What keeps a cold load cheap: only .eh_frame_hdr's table is read, through a
buffer on the stack, and kept as 4 bytes a function (a function runs to the
next one's start: the padding between them is never run); PLT stubs are
found by their slot, not sorted into the function table; the names of
addresses without a symbol are formatted by hand (snprintf was a third of
their cost) and reused for the addresses of one function, which a batch
brings sorted. Copying .eh_frame and .eh_frame_hdr onto fresh pages, 16
bytes a function and PLT names sorted in made python3.11 2x slower cold.
Warm look-ups of stripped objects cost 2-3 ns an address more than before
the FDE tables; not explained yet.

An older build, e.g. of the commit before the FDE tables (OLD_COMMIT):
    git worktree add ../old OLD_COMMIT
    cmake -S ../old -B ../old/build && cmake --build ../old/build --target fx-bench-sym

usage: bench/stripped.py [--build DIR] [--compare-build DIR] [--quick]
                         [--addresses N] [--rounds R] [--processes P]
                         [--malloc fresh,reused,default]
"""
import collections
import os
import re
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fxbench as fb  # noqa: E402
import symbolize  # noqa: E402

LIB = "/usr/lib/x86_64-linux-gnu"
# glibc's malloc settings per run (None: its defaults). Fixing either
# threshold turns off its dynamic adjustment.
MALLOC = {
    "fresh": "glibc.malloc.mmap_threshold=131072:glibc.malloc.trim_threshold=131072",
    "reused": "glibc.malloc.mmap_threshold=33554432:glibc.malloc.trim_threshold=1073741824",
    "default": None,
}


def add_args(ap):
    ap.add_argument("--compare-build", metavar="DIR",
                    help="the build directory of an older revision, with its fx-bench-sym built")
    ap.add_argument("--addresses", type=int, help="per object (default 2000; --quick 200)")
    ap.add_argument("--rounds", type=int, help="rounds per process (default 10; --quick 3)")
    ap.add_argument("--processes", type=int,
                    help="processes per build, taking turns (default 20; --quick 2)")
    ap.add_argument("--malloc", default="fresh,reused",
                    help="malloc settings to run under, from: " + ", ".join(MALLOC))


def objects():
    """(label, path, package) of the stripped objects."""
    return [
        ("python3.11", "/usr/bin/python3.11", "python3.11-minimal"),
        ("libpython3.11.so.1.0", f"{LIB}/libpython3.11.so.1.0", "libpython3.11"),
        ("liblzma.so.5", os.path.realpath(f"{LIB}/liblzma.so.5"), "liblzma5"),
    ]


def has_symtab(path):
    out = subprocess.run(["readelf", "-SW", path], capture_output=True, text=True).stdout
    return " .symtab " in out


def libc_without_debug(tmp):
    """A copy of libc.so.6 in @tmp whose build-id no debug file has, or None."""
    src = os.path.realpath("/lib/x86_64-linux-gnu/libc.so.6")
    out = subprocess.run(["readelf", "-nW", src], capture_output=True, text=True).stdout
    m = re.search(r"Build ID: ([0-9a-f]+)", out)
    if not m:
        return None
    with open(src, "rb") as f:
        data = bytearray(f.read())
    want = bytes.fromhex(m.group(1))
    at = data.find(want)
    if at < 0 or data.find(want, at + 1) >= 0:
        return None
    data[at:at + len(want)] = bytes(b ^ 0xff for b in want)
    path = os.path.join(tmp, "libc.so.6")
    with open(path, "wb") as f:
        f.write(data)
    return path


def revision(build):
    """The git revision a CMake build directory was configured from, or '?'."""
    try:
        with open(os.path.join(build, "CMakeCache.txt")) as f:
            m = re.search(r"^CMAKE_HOME_DIRECTORY:INTERNAL=(.*)$", f.read(), re.M)
    except OSError:
        return "?"
    if not m:
        return "?"
    out = subprocess.run(["git", "-C", m.group(1), "describe", "--always", "--dirty"],
                         capture_output=True, text=True)
    return out.stdout.strip() or "?"


def resolve(sym, path, addr_file, rounds, out=None, tunables=None):
    """One fx-bench-sym resolve process: its rounds, each {figure: value}."""
    env = dict(os.environ)
    env.pop("GLIBC_TUNABLES", None)
    if tunables:
        env["GLIBC_TUNABLES"] = tunables
    res = subprocess.run([sym, "resolve", path, addr_file, str(rounds)] + ([out] if out else []),
                         capture_output=True, text=True, env=env)
    if res.returncode != 0:
        sys.exit(f"{sym} resolve {path} failed:\n{res.stderr}")
    return [dict(zip(m[::2], map(float, m[1::2]))) for m in
            (line.split()[2:] for line in res.stdout.splitlines() if line.startswith("round"))]


def names(path, out):
    """From a resolve's answers: (Counter of symbol / grouped / none, distinct frames)."""
    with open(out) as f:
        ans = symbolize.parse_fx(f.read())
    made_up = re.compile(re.escape(os.path.basename(path)) + r"\+0x[0-9a-f]+$")
    kinds, frames = collections.Counter(), set()
    for addr, fr in ans.items():
        name = fr[0][0] if fr else None
        if name is None:
            kinds["none"] += 1
            frames.add(("none", addr))
        else:
            kinds["grouped" if made_up.match(name) else "symbol"] += 1
            frames.add(name)
    return kinds, len(frames)


def turns(builds, procs, run_one):
    """@procs processes per build in turns (old new new old ...): {build: [rounds]}."""
    runs = {b: [] for b in builds}
    for i in range(procs):
        for b in (list(builds) if i % 2 == 0 else list(reversed(builds))):
            runs[b].append(run_one(b, i))
    return runs


def medians(procs_rounds):
    every = [x for p in procs_rounds for x in p]
    r = {"cold": fb.med([x["cold_us"] for x in every]),
         "warm": fb.med([x["warm_us"] for x in every]),
         "proc_cold": [fb.med([x["cold_us"] for x in p]) for p in procs_rounds],
         "proc_warm": [fb.med([x["warm_us"] for x in p]) for p in procs_rounds]}
    for k in ("fde_ranges", "fde_bytes", "held_bytes", "heap_bytes"):
        r[k] = fb.med([x.get(k) for x in every])
    r["rss_kib"] = fb.med([p[0].get("rss_kib") for p in procs_rounds if p])
    return r


def one_object(ctx, builds, path, n, rounds, procs, settings, tmp):
    """{setting: {build: figures}}, and {build: names} of the first run."""
    addr_file, few_file = os.path.join(tmp, "addrs"), os.path.join(tmp, "few")
    pick = subprocess.run([ctx.sym, "pick-code", path, str(n)], capture_output=True, text=True)
    if pick.returncode != 0:
        sys.exit(f"fx-bench-sym pick-code {path} failed:\n{pick.stderr}")
    lines = pick.stdout.splitlines(keepends=True)
    few = max(1, len(lines) // 10)
    with open(addr_file, "w") as f:
        f.writelines(lines)
    # In a random order already: the first tenth is a sample of the whole.
    with open(few_file, "w") as f:
        f.writelines(lines[:few])
    r = {"n": len(lines), "few": few}
    for k, setting in enumerate(settings):
        def run_one(b, i, file=addr_file):
            out = os.path.join(tmp, f"{b}.out") if i == 0 and k == 0 else None
            return resolve(builds[b], path, file, rounds, out, MALLOC[setting])

        full = turns(builds, procs, run_one)
        part = turns(builds, procs, lambda b, i: run_one(b, 1, few_file))
        r[setting] = {}
        for b in builds:
            x = medians(full[b])
            y = medians(part[b])
            x["per_addr"] = (x["cold"] - y["cold"]) / (r["n"] - few) if r["n"] > few else None
            x["per_object"] = x["cold"] - r["n"] * x["per_addr"] if x["per_addr"] else None
            r[setting][b] = x
    r["names"] = {b: names(path, os.path.join(tmp, f"{b}.out")) for b in builds}
    return r


def ratio(r, key):
    """new/old of the medians, and the range of the back-to-back processes' ratios."""
    if "old" not in r:
        return "-"
    pairs = [b / a for a, b in zip(r["old"]["proc_" + key], r["new"]["proc_" + key]) if a]
    return (f"{r['new'][key] / r['old'][key]:.2f} "
            f"({min(pairs):.2f}-{max(pairs):.2f})" if pairs else "-")


def kib(v):
    return "-" if v is None else f"{v / 1024:,.1f} KiB"


def run(ctx, a):
    n = a.addresses or (200 if ctx.quick else 2000)
    rounds = a.rounds or (3 if ctx.quick else 10)
    procs = a.processes or (2 if ctx.quick else 20)
    settings = [m.strip() for m in a.malloc.split(",") if m.strip()]
    for m in settings:
        if m not in MALLOC:
            sys.exit(f"unknown malloc setting '{m}' (known: {', '.join(MALLOC)})")
    ctx.need(ctx.sym)
    builds = {}
    old = a.compare_build or getattr(ctx, "compare_build", None)
    if old:
        builds["old"] = os.path.join(os.path.abspath(old), "bench", "fx-bench-sym")
        ctx.need(builds["old"])
    builds["new"] = ctx.sym
    for tool in ("readelf", "git"):
        if not shutil.which(tool):
            sys.exit(f"{tool} is missing (binutils, git)")
    revs = {b: revision(os.path.dirname(os.path.dirname(p))) for b, p in builds.items()}
    speed, split, memory, notes, aims = [], [], [], [], []
    with tempfile.TemporaryDirectory(prefix="fxbench-") as tmp:
        objs = objects()
        libc = libc_without_debug(tmp)
        if libc:
            objs.append(("libc.so.6 (no debug file)", libc, "libc6"))
        for label, path, pkg in objs:
            if not os.path.exists(path):
                notes.append(f"{label}: not measured, not installed (apt-get install {pkg}).")
                continue
            if has_symtab(path) or symbolize.debug_file(path):
                notes.append(f"{label}: not measured, it has a symbol table or a debug file "
                             f"here: not what this section is about.")
                continue
            with tempfile.TemporaryDirectory(prefix="obj-", dir=tmp) as otmp:
                r = one_object(ctx, builds, path, n, rounds, procs, settings, otmp)
            ctx.log(f"stripped: {label}: {r}")
            for m in settings:
                new, was = r[m]["new"], r[m].get("old")
                first = label if m == settings[0] else ""
                speed.append([first, m, fb.f(was and was["cold"], "{:.0f} us"),
                              f"{new['cold']:.0f} us", ratio(r[m], "cold"),
                              fb.f(was and was["warm"], "{:.1f} us"), f"{new['warm']:.1f} us",
                              ratio(r[m], "warm")])
                split.append([first, m, fb.f(was and was["per_object"], "{:.0f} us"),
                              fb.f(new["per_object"], "{:.0f} us"),
                              fb.f(was and was["per_addr"] * 1e3, "{:.0f} ns"),
                              fb.f(new["per_addr"] * 1e3, "{:.0f} ns")])
                if was:
                    q = new["cold"] / was["cold"]
                    aims.append(f"{label}, {m}: {fb.aim(q <= 1.1, f'{q:.2f}')}")
            for b in builds:
                x = r[settings[0]][b]
                kinds, frames = r["names"][b]
                memory.append([label if b == next(iter(builds)) else "", f"{b} ({revs[b]})",
                               f"{kinds['symbol']} / {kinds['grouped']} / {kinds['none']}",
                               frames, fb.f(x["fde_ranges"], "{:,.0f}"), kib(x["fde_bytes"]),
                               kib(x["held_bytes"]), kib(x["heap_bytes"]),
                               fb.f(x["rss_kib"], "{:,.0f} KiB")])
    who = (f"old = {revs['old']} (`--compare-build`), new = {revs['new']}" if old
           else f"this build ({revs['new']}) alone: no --compare-build")
    lines = ["### Stripped objects", "",
             f"`bench/stripped.py`: {n} distinct addresses per object at random in its "
             f"code, one batch; {who}; {procs} processes per build taking turns (old, new, "
             f"new, old, ...), {rounds} rounds each, median of all rounds. Cold = a new "
             f"symbolizer (opens the file, reads its tables, resolves the batch), warm = the "
             f"same batch again. new/old: the ratio of the medians (in brackets, the range of "
             f"the ratios of processes run back to back). malloc: fresh = big buffers on "
             f"fresh pages, as after the agent's malloc_trim(0) at every window; reused = "
             f"pages kept (see `bench/stripped.py`). Files in the page cache.", ""]
    lines += fb.table(["object", "malloc", "cold old", "cold new", "new/old", "warm old",
                       "warm new", "new/old"], speed)
    if aims:
        lines += ["Aim: cold within 10% of the older build (new/old <= 1.10): "
                  + "; ".join(aims) + ".", ""]
    lines += [f"Cold, per object and per address: from the batch of {n} and one of "
              f"{max(1, n // 10)} of them, cold = object + addresses x address.", ""]
    lines += fb.table(["object", "malloc", "per object old", "per object new",
                       "per address old", "per address new"], split)
    lines += [f"Names (from the first process's answers: a symbol's name / the name of the "
              f"function its FDE covers / none) and memory after the cold batch, malloc "
              f"{settings[0]} (this build's helper only): the FDE ranges and their table, "
              f"everything the symbolizer counts as held, what malloc's heap grew by, what "
              f"the RSS grew by in a process's first round.", ""]
    lines += fb.table(["object", "build", "symbol / grouped / none", "distinct frames",
                       "FDE ranges", "FDE table", "symbolizer holds", "heap grew",
                       "RSS grew (first round)"], memory)
    return lines + ([" ".join(notes), ""] if notes else [])


if __name__ == "__main__":
    fb.section_main(sys.modules[__name__], __doc__)

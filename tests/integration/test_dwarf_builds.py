# SPDX-License-Identifier: MIT
"""DWARF unwinding of binaries built in ways frame pointers cannot walk, all with
the call path main -> level1 -> level2 -> <x>_hot:

- fx-nofp: -fomit-frame-pointer everywhere.
- fx-lld: linked by lld as a PIE; its code's virtual address is not its file
  offset, so a CFI lookup with the wrong load bias misses.
- fx-dbgframe: no .eh_frame for its own functions, only .debug_frame.

With `--unwind dwarf` >= 95% of each process's samples reach main through the
whole chain. The same processes under `--unwind fp` lose main (printed; checked
as well, or the binaries would not test what they claim to). Each process has
enough samples to judge: at least half of what its own CPU time within the
recording gives at 99 Hz, less 3.5 standard errors (fxtest.min_samples).
"""

import os
import re
import shutil
import subprocess
import time

import fxtest
from fxtest import HZ

SECONDS = 4
BUILDS = {"fx-nofp": "nofp_hot", "fx-lld": "lld_hot", "fx-dbgframe": "dbgframe_hot"}


def readelf(t, *args):
    p = subprocess.run(["readelf", "-W", *args], capture_output=True, text=True, timeout=60)
    t.require(p.returncode == 0, f"readelf {' '.join(args)}: {p.stderr.strip()}")
    return p.stdout


def symbol(t, exe, name):
    for line in readelf(t, "-s", exe).splitlines():
        f = line.split()
        if len(f) >= 8 and f[7] == name and f[3] == "FUNC":
            return int(f[1], 16)
    raise fxtest.Stop(f"{exe}: no symbol {name}")


def check_binaries(t):
    """The binaries are built the way the test needs, else it proves nothing."""
    lld = os.path.join(t.workloads, "fx-lld")
    t.require(os.access(lld, os.X_OK), f"{lld} is not built: install lld "
              "(scripts/install-test-deps.sh) and configure again")
    text = [line.split() for line in readelf(t, "-l", lld).splitlines()
            if line.split()[:1] == ["LOAD"] and "E" in line.split()[6:-1]]
    t.require(text, f"{lld}: no executable PT_LOAD")
    off, vaddr = int(text[0][1], 16), int(text[0][2], 16)
    t.require(off != vaddr, f"{lld}: executable segment at offset {off:#x} == vaddr: the load "
              "bias would not matter (not linked by lld?)")
    t.require("LLD" in readelf(t, "-p", ".comment", lld), f"{lld}: .comment names no LLD")

    dbg = os.path.join(t.workloads, "fx-dbgframe")
    t.require(re.search(r"\] \.debug_frame\s", readelf(t, "-S", dbg)),
              f"{dbg}: no .debug_frame section")
    frames = readelf(t, "--debug-dump=frames", dbg)
    eh = frames.split("Contents of the .debug_frame section", 1)[0]
    ranges = [(int(a, 16), int(b, 16)) for a, b in
              re.findall(r"FDE cie=\w+ pc=([0-9a-f]+)\.\.([0-9a-f]+)", eh)]
    for fn in ("main", "level1", "level2", "dbgframe_hot"):
        addr = symbol(t, dbg, fn)
        t.require(not any(a <= addr < b for a, b in ranges),
                  f"{dbg}: {fn} ({addr:#x}) has an .eh_frame FDE: built with unwind tables")


def chain(prof, hot):
    want = ["main", "level1", "level2", hot]

    return lambda st: fxtest.contains(prof.user_names(st), want)


def body(t):
    if not shutil.which("readelf"):
        raise fxtest.Stop("readelf (binutils) is missing")
    check_binaries(t)
    procs = {comm: t.workload(comm, 2 * SECONDS + 30) for comm in BUILDS}
    time.sleep(0.3)
    pids = [p.pid for p in procs.values()]
    dw = t.record("dwarf", SECONDS, pids=pids, measure=pids)
    fp = t.record("fp", SECONDS, pids=pids, extra=["--unwind", "fp"])
    t.kill_processes()

    cli = t.cli(dw.path, "dwarf")
    for comm, hot in BUILDS.items():
        pid = procs[comm].pid
        ths, fths = dw.threads_of(pid), fp.threads_of(pid)
        if not t.check(ths and fths, f"{comm}: pid {pid} missing from a profile"):
            continue
        n = dw.weight(ths)
        main, path = dw.share(ths, dw.has_func("main")), dw.share(ths, chain(dw, hot))
        hot_pct = dw.share(ths, dw.has_func(hot))
        fmain, fpath = fp.share(fths, fp.has_func("main")), fp.share(fths, chain(fp, hot))
        t.note(f"{comm}: dwarf {n} samples, {hot} {hot_pct:.1f}%, main {main:.1f}%, "
               f"main > level1 > level2 > {hot} {path:.1f}%; fp {fp.weight(fths)} samples, "
               f"main {fmain:.1f}%, whole chain {fpath:.1f}%")
        # Enough samples to judge the shares: half of what the process's own
        # CPU time in the recording gives (fxtest.min_samples).
        cpu = dw.cpu_s(pid)
        least = fxtest.min_samples(cpu, HZ)
        if not t.check(n >= least, f"{comm}: only {n} samples for {cpu:.2f} CPU s in the "
                       f"recording (at least {least} expected)"):
            continue
        example = next((dw.stack_names(st) for th in ths for st, _ in dw.samples(th)
                        if not chain(dw, hot)(st)), [])
        t.check(main >= 95, f"dwarf: main in only {main:.1f}% of {comm}'s samples, want >= 95; "
                f"e.g. {example}")
        t.check(path >= 95, f"dwarf: main > level1 > level2 > {hot} in only {path:.1f}% of "
                f"{comm}'s samples, want >= 95; e.g. {example}")
        t.check(fmain < 50, f"fp: main in {fmain:.1f}% of {comm}'s samples: it should have no "
                "frame pointers")

        tree = cli.top_down(cli.handles(pid=pid))
        node = next((nd for p, nd in fxtest.tree_paths(tree)
                     if p[-4:] == ("main", "level1", "level2", hot)), None)
        if t.check(node, f"profiler-cli (dwarf): no main > level1 > level2 > {hot} path for "
                   f"{comm}"):
            t.check(node["totalPercentage"] >= 90, f"profiler-cli (dwarf): main > level1 > "
                    f"level2 > {hot} total {node['totalPercentage']:.1f}% of {comm}, want >= 90")


fxtest.main(body)

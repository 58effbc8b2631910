#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Runs every benchmark of bench/ and prints one Markdown table per section.

    python3 bench/run.py [--build DIR] [--quick] [--sections a,b,...]
                         [--compare-build DIR] [--markdown FILE] [--doc FILE]

Sections, in order (each also runs alone as `python3 bench/<name>.py`):
  overhead   fxagent (fp, dwarf) against perf record (-g, -g -z, dwarf) and no
             profiler on a CPU-bound workload on every CPU: throughput, CPU, RSS
  output     file bytes per sample of the same runs (fxagent against perf.data)
  scale      daemon mode with 1, 10, 100 busy processes, 4096 call paths each,
             1000 short-lived processes per second and a C++ program with
             8 MiB of DWARF
  symbolize  the symbolizer against eu-addr2line and addr2line: speed, agreement
  stripped   the symbolizer on stripped objects (python3.11, liblzma, ...):
             cold and warm against an older build's (--compare-build DIR),
             names grouped by FDE, the FDE tables' memory
  daemon     10 cgroup targets in daemon mode, and where the memory goes
  perproc    the memory each busy process adds (1, 10, 100 in one cgroup target)
  stackcopy  the share of whole stacks at each sampling.stack_bytes (2048 to
             32768) on fx-bench-work, python3 and the test workloads
  upload     window end to chunk acknowledged by a loopback nginx
  view       fxagent view on 1, 60 and 3600 chunks (60 hosts x 60 minutes)
  rate       a big host's sample rate emulated here: the compiled unwind rules,
             libdwfl and perf record
  jit        Node, CPython 3.13 and 3.12, Java computing: the agent with JIT
             names and unwinding (symbolization.jit) on and off, --once and
             the daemon
  offcpu     off-CPU time at 1,000, 20,000 and 100,000 context switches a
             second: the daemon without and with sampling.off_cpu, its BPF
             program's own time, and perf record -e sched:sched_switch
             --call-graph dwarf

bench/s3.py (uploads into and view from a Ceph radosgw) is not a section: it
starts a Ceph cluster in a network namespace of its own; run it alone.

The default takes about 65 minutes on 2 vCPUs (overhead and output 17,
scale 6, symbolize 3-4, stripped 0.2, daemon 1, perproc 2, stackcopy 3, upload 1.5,
view 6, rate 10, jit 4, offcpu 15); --quick about 3-4 minutes (figures too rough to quote). Needs root,
perf, elfutils, binutils, nginx, libc6-dbg and cupt-dbg (for a C++ library with DWARF).

--doc FILE writes FILE whole (docs/performance.md is the repository's): a
title, the date and time (UTC) of the run, the machine (CPU model, CPUs,
memory, kernel, Debian version, the load average and the busy processes at
the start), the command that made it, how the figures are taken, then the
tables, one "##" section each:

    python3 bench/run.py --build build --doc docs/performance.md

Progress goes to stderr; the tables to stdout (and --markdown FILE, the
tables alone).
"""
import argparse
import datetime
import os
import shlex
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import daemon  # noqa: E402
import fxbench as fb  # noqa: E402
import jit  # noqa: E402
import offcpu  # noqa: E402
import output  # noqa: E402
import overhead  # noqa: E402
import perproc  # noqa: E402
import rate  # noqa: E402
import scale  # noqa: E402
import stackcopy  # noqa: E402
import stripped  # noqa: E402
import symbolize  # noqa: E402
import upload  # noqa: E402
import view  # noqa: E402

SECTIONS = {"overhead": overhead, "output": output, "scale": scale, "symbolize": symbolize,
            "stripped": stripped, "daemon": daemon, "perproc": perproc,
            "stackcopy": stackcopy, "upload": upload, "view": view, "rate": rate,
            "jit": jit, "offcpu": offcpu}

INTRO = """\
Measured with `bench/` (figures, not tests), as root, on a RelWithDebInfo
build: `python3 bench/run.py --build build` runs every section below and
prints these tables (`--quick` for a smoke run of a few minutes; `--doc FILE`
writes them to FILE with the machine on top). Each section runs alone too:
`python3 bench/<section>.py --build build`; `bench/s3.py` (an S3 store) runs
only alone. Runs are side by side in one go and repeated; the figure is the
median. Where fxagent does worse than its peer, the tables show it as
measured. The sections need `linux-perf`, `elfutils`, `binutils`,
`nginx-light`, and for the symbolizer's objects `libc6-dbg` (libc's debug
file) and `cupt-dbg` (libcupt4.so.2: a C++ library built -O2, with its
DWARF); without one, its rows say so. What each section measures, and how,
is in its script's docstring (`python3 bench/<section>.py --help`).

The agent's peak RSS comes at the end of a window or snapshot, when it reads
the debug info of what ran (libc's separate debug file for inline frames
and lines); how high depends on which objects ran. Whole-system figures
include whatever else ran on the machine: the machine's line names the busy
processes seen at the start.
"""


def section_args(module):
    """The section's own options at their defaults (run.py sets none)."""
    ap = argparse.ArgumentParser()
    module.add_args(ap)
    return ap.parse_args([])


def doc_header(m, argv, quick, minutes):
    """The top of --doc FILE: what made it, when, on what."""
    end = datetime.datetime.now(datetime.timezone.utc).strftime("%H:%M UTC")
    cmd = " ".join(["python3", "bench/run.py"] + [shlex.quote(a) for a in argv])
    return ["# Performance", "",
            f"Written by `{cmd}`, run on {m['date']} to {end} ({minutes:.0f} minutes)." +
            (" A quick run (--quick): rough figures, not to quote." if quick else ""), "",
            "| machine | |", "|---|---|",
            f"| CPU | {m['cpu']} |",
            f"| CPUs | {m['vcpus']} |",
            f"| memory | {m['mem_gib']:.0f} GiB |",
            f"| kernel | Linux {m['kernel']} |",
            f"| Debian | {m['debian']} |",
            f"| load average at the start | {m['load']} |",
            f"| other processes busy at the start (share of one CPU) | {m['busy']} |", "",
            INTRO]


def as_doc_sections(lines):
    """The sections' "### Name" headings, as the document's "## Name"."""
    return [ln[1:] if ln.startswith("### ") else ln for ln in lines]


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    fb.common_args(ap)
    ap.add_argument("--sections", default=",".join(SECTIONS),
                    help="comma-separated, from: " + ", ".join(SECTIONS))
    ap.add_argument("--compare-build", metavar="DIR",
                    help="an older revision's build directory, for the stripped section")
    ap.add_argument("--markdown", help="also write the tables to this file")
    ap.add_argument("--doc", metavar="FILE",
                    help="write FILE whole: title, date, machine, command, then the tables "
                         "(docs/performance.md)")
    a = ap.parse_args()
    names = [n.strip() for n in a.sections.split(",") if n.strip()]
    for n in names:
        if n not in SECTIONS:
            sys.exit(f"unknown section '{n}' (known: {', '.join(SECTIONS)})")
    fb.need_root()
    ctx = fb.Ctx(a.build, a.quick)
    # Shorter than the sections' own defaults: the suite aims at 30 minutes.
    ctx.daemon_seconds = 60
    ctx.upload_window = 20
    ctx.compare_build = a.compare_build
    m = fb.machine()
    t0 = time.monotonic()
    lines = []
    for n in names:
        ctx.log(f"run: section {n} ...")
        s0 = time.monotonic()
        lines += SECTIONS[n].run(ctx, section_args(SECTIONS[n]))
        ctx.log(f"run: section {n} took {time.monotonic() - s0:.0f} s")
    load = "%.2f %.2f %.2f" % os.getloadavg()
    minutes = (time.monotonic() - t0) / 60
    lines += [f"The whole run took {minutes:.1f} minutes; load average "
              f"at the end: {load}.", ""]
    lines = as_doc_sections(lines)
    text = "\n".join(fb.machine_lines(m, " Quick run (--quick): rough figures."
                                      if a.quick else "") + lines)
    print(text)
    if a.markdown:
        with open(a.markdown, "w") as f:
            f.write(text)
    if a.doc:
        doc = "\n".join(doc_header(m, sys.argv[1:], a.quick, minutes) + lines).rstrip("\n") + "\n"
        with open(a.doc, "w") as f:
            f.write(doc)
        ctx.log(f"run: wrote {a.doc}")


if __name__ == "__main__":
    main()

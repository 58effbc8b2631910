#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Runs every benchmark of bench/ and prints one Markdown table per section.

    python3 bench/run.py [--build DIR] [--quick] [--sections a,b,...]
                         [--compare-build DIR] [--markdown FILE] [--readme README.md]

Sections, in order (each also runs alone as `python3 bench/<name>.py`):
  overhead   fxagent (fp, dwarf) against perf record (-g, -g -z, dwarf) and no
             profiler on a CPU-bound workload on every CPU: throughput, CPU, RSS
  output     file bytes per sample of the same runs (fxagent against perf.data)
  scale      daemon mode with 1, 10, 100 busy processes, 4096 call paths each,
             and 1000 short-lived processes per second
  symbolize  the symbolizer against eu-addr2line and addr2line: speed, agreement
  stripped   the symbolizer on stripped objects (python3.11, liblzma, ...):
             cold and warm against an older build's (--compare-build DIR),
             names grouped by FDE, the FDE tables' memory
  daemon     10 cgroup targets in daemon mode
  perproc    the memory each busy process adds (1, 10, 100 in one cgroup target)
  stackcopy  the share of whole stacks at each sampling.stack_bytes (2048 to
             32768) on fx-bench-work, python3 and the test workloads
  upload     window end to chunk acknowledged by a loopback nginx

The default takes about 35 minutes on 2 vCPUs (overhead and output 17,
scale 6, symbolize 3-4, stripped 0.2, daemon 1, perproc 2, stackcopy 3, upload 1.5);
--quick about 3-4 minutes (figures too rough to quote). Needs root, perf, elfutils, binutils, nginx,
libc6-dbg and cupt-dbg (for a C++ library with DWARF).

--readme replaces the "## Performance" section of that file with the tables.
Progress goes to stderr; the tables to stdout (and --markdown FILE).
"""
import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import daemon  # noqa: E402
import fxbench as fb  # noqa: E402
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
            "stackcopy": stackcopy, "upload": upload, "view": view, "rate": rate}

INTRO = """## Performance

Measured with `bench/` (figures, not tests), as root, on a RelWithDebInfo
build: `python3 bench/run.py --build build` runs every section below and
prints these tables (`--quick` for a smoke run of a few minutes; `--readme
README.md` rewrites this section). Each section runs alone too:
`python3 bench/<section>.py --build build`. Runs are side by side in one
go and repeated; the figure is the median. Where fxagent does worse than
its peer, the tables show it as measured. The sections need `linux-perf`,
`elfutils`, `binutils`, `nginx-light`, and for the symbolizer's objects
`libc6-dbg` (libc's debug file) and `cupt-dbg` (libcupt4.so.2: a C++
library built -O2, with its DWARF); without one, its rows say so.

The agent's peak RSS comes at the end of a window or snapshot, when it reads
the debug info of what ran (libc's separate debug file for inline frames
and lines); how high depends on which objects ran. Whole-system figures
include whatever else ran on the machine: the line below names the busy
processes seen at the start.
"""


def section_args(module):
    """The section's own options at their defaults (run.py sets none)."""
    ap = argparse.ArgumentParser()
    module.add_args(ap)
    return ap.parse_args([])


def replace_section(readme, text):
    with open(readme) as f:
        old = f.read()
    start = old.index("\n## Performance\n") + 1
    end = old.find("\n## ", start + 1)
    new = old[:start] + text.rstrip("\n") + "\n" + (old[end:] if end >= 0 else "")
    with open(readme, "w") as f:
        f.write(new)


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    fb.common_args(ap)
    ap.add_argument("--sections", default=",".join(SECTIONS),
                    help="comma-separated, from: " + ", ".join(SECTIONS))
    ap.add_argument("--compare-build", metavar="DIR",
                    help="an older revision's build directory, for the stripped section")
    ap.add_argument("--markdown", help="also write the tables to this file")
    ap.add_argument("--readme", help="replace this file's '## Performance' section")
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
    lines = [INTRO] + fb.machine_lines(m, " Quick run (--quick): rough figures."
                                       if a.quick else "")
    for n in names:
        ctx.log(f"run: section {n} ...")
        s0 = time.monotonic()
        lines += SECTIONS[n].run(ctx, section_args(SECTIONS[n]))
        ctx.log(f"run: section {n} took {time.monotonic() - s0:.0f} s")
    load = "%.2f %.2f %.2f" % os.getloadavg()
    lines += [f"The whole run took {(time.monotonic() - t0) / 60:.1f} minutes; load average "
              f"at the end: {load}.", ""]
    text = "\n".join(lines)
    print(text)
    if a.markdown:
        with open(a.markdown, "w") as f:
            f.write(text)
    if a.readme:
        replace_section(a.readme, text)


if __name__ == "__main__":
    main()

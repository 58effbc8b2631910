#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Output size: fxagent's profile against perf.data for the same recording.

The runs of the overhead section (one fx-bench-work per CPU for D seconds,
every recorder starting 1 s before and stopping 0.5 s after it; run alone,
this section does them without the no-profiler runs): per recorder, the
median file size, sample count and bytes per sample. fxagent's file is the
gzip-compressed processed profile, symbolized (names, files, lines inside);
perf.data holds raw samples and needs the binaries to be read.

usage: bench/output.py [--build DIR] [--quick] [--rounds N] [--duration S]
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fxbench as fb  # noqa: E402
import overhead  # noqa: E402

add_args = overhead.add_args
WHAT = {
    "fxagent fp": "processed profile, gzip (symbolized)",
    "fxagent dwarf": "processed profile, gzip (symbolized)",
    "perf -g": "perf.data (fp callchains)",
    "perf -g -z": "perf.data, zstd (-z)",
    "perf dwarf": "perf.data (8 KiB stack copy per sample)",
}


def run(ctx, a):
    rounds, dur = overhead.shape(ctx, a)
    res, bad = overhead.ok_runs(overhead.recordings(ctx, a, with_none=False))
    ref = fb.med([r["bytes"] / max(1, r["samples"]) for r in res["fxagent dwarf"]])
    rows = []
    for n, runs in res.items():
        if n == "none":
            continue
        if not runs or not ref:
            rows.append([n, WHAT[n], "failed in every run", "-", "-", "-"])
            continue
        bps = fb.med([r["bytes"] / max(1, r["samples"]) for r in runs])
        rows.append([n, WHAT[n], f"{fb.med([r['samples'] for r in runs]):.0f}",
                     f"{fb.med([r['bytes'] for r in runs]) / 1024:.0f} KiB", f"{bps:.1f}",
                     f"{bps / ref:.2f}x"])
    lines = ["### Output", "",
             f"`bench/output.py` (or the overhead runs above): each recorder's file for "
             f"{dur + overhead.LEAD + overhead.TAIL:g} s of the whole system with every CPU "
             f"busy, median of {rounds} run{'s' * (rounds > 1)}. Samples: fxagent's own count "
             f"(it drops the idle task's), `perf report --stats` for perf.data (it keeps "
             f"them: few here, the CPUs are busy).", ""]
    lines += fb.table(["recorder", "file", "samples", "size", "bytes per sample",
                       "vs fxagent dwarf"], rows)
    return lines + overhead.failures({n: m for n, m in bad.items() if n != "none"}, rounds)


if __name__ == "__main__":
    fb.section_main(sys.modules[__name__], __doc__)

# SPDX-License-Identifier: MIT
"""Names for stripped binaries: code without a symbol grouped by function.

- fx-hot-ab (hot_a about 70%, hot_b 30%, both static) and a copy made with
  `strip --strip-all` and given a build-id of its own (the symbolizer keeps
  one object per build-id), both running and recorded in one `--once`: the
  stripped copy's leaf frames are "fx-hot-ab-stripped+0x<start>", one per
  function, each start the file offset of a function of the unstripped
  binary (hot_a's and hot_b's among them), and the split between hot_a's
  and hot_b's stand-ins matches the unstripped process's, recorded at the
  same time on the same machine, within 3.5 standard errors of the
  difference of the two samplings plus 2 points;
- xz compressing text for 6 s (liblzma is stripped by Debian: .dynsym only): its unnamed
  leaf functions are at least 5 times fewer than the distinct addresses they
  stand for (each address was its own frame before).
"""

import collections
import os
import random
import re
import shutil
import subprocess
import time

import fxtest
from fxdaemon import HZ


def load_segments(path):
    """[(vaddr, offset, filesz)] of the executable PT_LOADs, from readelf."""
    out = subprocess.run(["readelf", "-lW", path], capture_output=True, text=True,
                         check=True).stdout
    segs = []
    for line in out.splitlines():
        p = line.split()
        if p and p[0] == "LOAD" and "E" in p[6:-1]:
            segs.append((int(p[2], 16), int(p[1], 16), int(p[4], 16)))
    return segs


def function_offsets(path):
    """{name: file offset} of the function symbols of @path."""
    segs = load_segments(path)
    out = subprocess.run(["nm", "--defined-only", path], capture_output=True, text=True,
                         check=True).stdout
    offs = {}
    for line in out.splitlines():
        p = line.split()
        if len(p) == 3 and p[1] in "tT":
            v = int(p[0], 16)
            for vaddr, off, size in segs:
                if vaddr <= v < vaddr + size:
                    offs[p[2]] = v - vaddr + off
    return offs


def leaves(prof, threads):
    """Counter of leaf function names, and the leaf frames' addresses by name."""
    names = collections.Counter()
    addrs = collections.defaultdict(set)
    frame_addr = prof.data["shared"]["frameTable"]["address"]
    for th in threads:
        for st, w in prof.samples(th):
            frames = prof.stack_frames(st)
            if not frames:
                continue
            leaf = frames[-1]
            name = prof.func_names[prof.frame_func[leaf]]
            names[name] += w
            addrs[name].add(frame_addr[leaf])
    return names, addrs


def check_hot_ab(t):
    full = os.path.join(t.workloads, "fx-hot-ab")
    stripped = os.path.join(t.work, "fx-hot-ab-stripped")
    same_id = os.path.join(t.work, "fx-hot-ab-stripped.same-id")
    r = subprocess.run(["strip", "--strip-all", "-o", same_id, full], capture_output=True,
                       text=True)
    t.require(r.returncode == 0, f"strip: {r.stderr}")
    # A build-id of its own: the symbolizer keeps one object per build-id, and
    # the copy would otherwise be named from the unstripped binary.
    fxtest.fresh_binary(same_id, stripped)
    offs = function_offsets(full)
    t.require("hot_a" in offs and "hot_b" in offs, f"no hot_a/hot_b in {full}: {sorted(offs)}")
    # One recording of both: the same machine, the same moment.
    a = t.spawn([full, "30"])
    b = t.spawn([stripped, "30"])
    time.sleep(0.3)
    prof = t.record("hot-ab", 3, pids=(a.pid, b.pid))
    named, _ = leaves(prof, prof.threads_of(a.pid))
    unnamed, addrs = leaves(prof, prof.threads_of(b.pid))
    a.kill()
    b.kill()
    t.note(f"unstripped leaves {named.most_common(5)}; stripped {unnamed.most_common(5)}")
    by_off = {v: k for k, v in offs.items()}
    ours = {n: c for n, c in unnamed.items() if n.startswith("fx-hot-ab-stripped+0x")}
    for n in ours:
        off = int(n.split("+0x")[1], 16)
        t.check(off in by_off, f"{n}: no function of {full} starts at {off:#x}")
    want_a = f"fx-hot-ab-stripped+{offs['hot_a']:#x}"
    want_b = f"fx-hot-ab-stripped+{offs['hot_b']:#x}"
    t.check(want_a in ours and want_b in ours, f"no {want_a} and {want_b} among {sorted(ours)}")
    n_full = named["hot_a"] + named["hot_b"]
    share_full = 100.0 * named["hot_a"] / max(1, n_full)
    n = ours.get(want_a, 0) + ours.get(want_b, 0)
    share_stripped = 100.0 * ours.get(want_a, 0) / max(1, n)
    tol = fxtest.diff_tol(share_stripped, n, share_full, n_full)
    t.check(fxtest.near(share_stripped, share_full, tol),
            f"hot_a's share: {share_stripped:.1f}% of {n} samples stripped, {share_full:.1f}% "
            f"of {n_full} unstripped (tolerance {tol:.1f})")
    naddr = sum(len(addrs[k]) for k in ours)
    t.note(f"stripped: {len(ours)} functions for {naddr} distinct leaf addresses; hot_a "
           f"{share_stripped:.1f}% against {share_full:.1f}%")
    t.check(len(ours) <= len([k for k in named if k in offs]) + 1,
            f"{len(ours)} unnamed functions for {len(named)} named ones")


def check_xz(t):
    xz = shutil.which("xz")
    if not xz:
        t.note("no xz on this machine: the liblzma check is left out")
        return
    # Text of made-up words: xz's match finders and coders at work (random
    # bytes would take its incompressible path, a few functions only).
    rnd = random.Random(1)
    words = ["".join(rnd.choice("etaoinshrdlucmfwyp") for _ in range(rnd.randint(2, 9)))
             for _ in range(5000)]
    data = os.path.join(t.work, "words.txt")
    with open(data, "w") as f:
        for i in range(200):
            f.write(" ".join(rnd.choice(words) for _ in range(20000)) + "\n")
    p = t.spawn([xz, "-6", "-T1", "-k", "-c", data], stdout=subprocess.DEVNULL)
    time.sleep(0.3)
    prof = t.record("xz", 6, pids=(p.pid,), measure=(p.pid,))
    cpu = prof.cpu_s(p.pid)
    names, addrs = leaves(prof, prof.threads_of(p.pid))
    lzma = {n: c for n, c in names.items() if re.match(r"^liblzma\.so[.0-9]*\+0x", n)}
    naddr = sum(len(addrs[n]) for n in lzma)
    t.note(f"xz: {sum(lzma.values())} of {sum(names.values())} samples' leaves unnamed in "
           f"liblzma: {len(lzma)} functions for {naddr} distinct addresses")
    # xz spends most of its CPU in liblzma: a tenth of what its CPU time in
    # the recording gives is enough to judge the grouping.
    least = fxtest.min_samples(cpu, HZ, 0.1)
    t.require(sum(lzma.values()) >= least, f"only {sum(lzma.values())} samples in liblzma "
              f"(xz used {cpu:.2f} CPU s; at least {least} expected)")
    t.check(naddr >= 5 * len(lzma),
            f"liblzma: {len(lzma)} unnamed functions for only {naddr} addresses")


def body(t):
    check_hot_ab(t)
    check_xz(t)


if __name__ == "__main__":
    fxtest.main(body)

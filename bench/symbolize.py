#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Symbolization: fxagent's symbolizer against eu-addr2line and addr2line.

For each object (libc.so.6 with its debug file from libc6-dbg, the fxagent
binary of the build, and libcupt4.so.2, a C++ library built -O2 whose DWARF
comes with Debian's cupt-dbg) fx-bench-sym picks N distinct code addresses
from the DWARF: about 1/4 function entries, 1/4 line-table rows outside
inlined code, 1/2 rows inside inlined calls. Then, R rounds each:

- fxagent: one batch through the agent's symbolizer (fx-bench-sym resolve,
  linking the agent's code): cold (a new symbolizer: open the file and its
  debug file, build the function table) and warm (the same batch again).
- `eu-addr2line -C -a -f -i -e FILE` and `addr2line -C -a -f -i -e FILE`,
  the addresses on standard input: first pass (process start included), then
  the same addresses again in the same process.

The answers (function names with the inline chain, file:line of each level)
are compared address by address; paths compare as suffixes (the tools put the
compilation directory in front). Differences are sorted into kinds; the
names of a GCC clone (`.cold`, `.isra.0`, `[clone .cold]`), another symbol
at the same address (an alias), or the same function spelled otherwise (the
tools print DWARF's short name where fxagent prints the demangled symbol)
count as equivalent. Files in the page cache in every case: "cold" is a cold
process or symbolizer, not a cold disk.

usage: bench/symbolize.py [--build DIR] [--quick] [--addresses N] [--rounds R]
"""
import collections
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fxbench as fb  # noqa: E402

CLONE = re.compile(r"( \[clone \.[\w.]+\])+$|(\.(cold|part|isra|constprop|lto_priv)(\.\d+)?)+$")
EU_INLINE = re.compile(r" inlined at .* in .*$")


def add_args(ap):
    ap.add_argument("--addresses", type=int, help="per object (default 2000; --quick 200)")
    ap.add_argument("--rounds", type=int, help="rounds (default 5; --quick 1)")


def objects(ctx):
    """(label, path, why it may be missing)."""
    return [
        ("libc.so.6", os.path.realpath("/lib/x86_64-linux-gnu/libc.so.6"),
         "apt-get install libc6-dbg"),
        ("fxagent", ctx.agent, "build it"),
        ("libcupt4.so.2 (C++)", "/usr/lib/libcupt4.so.2", "apt-get install cupt-dbg"),
    ]


def debug_file(path):
    """The separate debug file of @path found by build-id, or None."""
    out = subprocess.run(["readelf", "-n", path], capture_output=True, text=True).stdout
    m = re.search(r"Build ID: ([0-9a-f]+)", out)
    if not m:
        return None
    p = f"/usr/lib/debug/.build-id/{m.group(1)[:2]}/{m.group(1)[2:]}.debug"
    return p if os.path.exists(p) else None


def symbol_addrs(paths):
    """Demangled symbol name -> its addresses, from nm of @paths."""
    names = collections.defaultdict(set)
    for p in paths:
        out = subprocess.run(["nm", "-C", "--defined-only", p], capture_output=True,
                             text=True).stdout
        for line in out.splitlines():
            parts = line.split(" ", 2)
            if len(parts) == 3 and parts[1] in "tTWiu":
                # Versioned names (realpath@@GLIBC_2.3) are named without it.
                names[re.sub(r"@.*$", "", parts[2])].add(int(parts[0], 16))
    return names


# ------------------------------------------------------------------ parsing

def parse_fx(text):
    res, cur = {}, None
    for line in text.splitlines():
        if "\t" not in line:
            cur = int(line, 16)
            res[cur] = []
            continue
        name, loc = line.split("\t")
        file, _, num = loc.rpartition(":")
        res[cur].append((None if name == "??" else name, file, int(num)))
    return res


def parse_tool(lines, eu):
    """addr2line -a -f -i output: {address: [(name, file, line), innermost first]}."""
    res, cur, i = {}, None, 0
    while i < len(lines):
        line = lines[i].rstrip("\n")
        if re.fullmatch(r"0x[0-9a-f]+", line):
            cur = int(line, 16)
            res[cur] = []
            i += 1
            continue
        if i + 1 >= len(lines):
            break
        name, loc = line, lines[i + 1].rstrip("\n")
        i += 2
        if eu:
            name = EU_INLINE.sub("", name)
        loc = re.sub(r" \(discriminator \d+\)$", "", loc)
        m = re.fullmatch(r"(.*?):(\d+|\?)(?::\d+)?", loc)
        file, num = (m.group(1), int(m.group(2)) if m.group(2) != "?" else 0) if m else (loc, 0)
        res[cur].append((None if name == "??" else name, file, num))
    return res


# ---------------------------------------------------------------- comparing

def norm_path(p):
    if not p or p.startswith("??"):
        return None
    parts = [c for c in os.path.normpath(p).split("/") if c not in ("", ".", "..")]
    return "/".join(parts)


def same_file(a, b):
    a, b = norm_path(a), norm_path(b)
    if a is None or b is None:
        return a == b
    return a == b or a.endswith("/" + b) or b.endswith("/" + a)


def base_name(n):
    """The function's own identifier: no scope, template arguments, parameters
    or qualifiers ("operator()" and "foo<int>(int) const" give "operator()"
    and "foo")."""
    n = n.replace("operator()", "operator\x01")
    depth, out = 0, []
    for ch in n:
        if ch in "<({":
            depth += 1
        elif ch in ">)}":
            depth -= 1
        elif depth == 0:
            out.append(ch)
    words = "".join(out).replace("::", " :: ").split()
    while len(words) > 1 and words[-1] in ("const", "volatile", "&", "&&", "noexcept"):
        words.pop()
    name = words[-1] if words else n
    return name.replace("\x01", "()")


NAME_KINDS = ("clone suffix", "alias", "spelling")


def name_kind(ours, theirs, syms):
    if ours == theirs:
        return None
    if ours is None or theirs is None:
        return "name missing on one side"
    if CLONE.sub("", ours) == CLONE.sub("", theirs):
        return "clone suffix"
    if syms.get(ours, set()) & syms.get(theirs, set()):
        return "alias"
    if base_name(CLONE.sub("", ours)) == base_name(CLONE.sub("", theirs)):
        return "spelling"
    return "other name"


def compare(ours, theirs, syms):
    """(same, equivalent, Counter of difference kinds, examples) of two answer sets."""
    same = equiv = 0
    kinds = collections.Counter()
    examples = collections.defaultdict(list)
    for addr, fr in ours.items():
        ot = theirs.get(addr)
        kind = None
        if ot is None:
            kind = "no answer"
        elif fr and fr[0][0] is None and len(fr) == 1:
            kind = "no symbol on either side" if not ot or all(o[0] is None for o in ot) \
                else "unresolved"
        elif len(fr) != len(ot):
            kind = "inline depth"
        else:
            names = [name_kind(x[0], y[0], syms) for x, y in zip(fr, ot)]
            names = [n for n in names if n]
            if any(n not in NAME_KINDS for n in names):
                kind = "other name"
            elif any(x[2] != y[2] for x, y in zip(fr, ot)):
                kind = "line"
            elif any(not same_file(x[1], y[1]) for x, y in zip(fr, ot)):
                kind = "file"
            elif names:
                kind = max(names, key=NAME_KINDS.index)
        if kind is None:
            same += 1
            equiv += 1
            continue
        if kind in NAME_KINDS:
            equiv += 1
        kinds[kind] += 1
        if len(examples[kind]) < 3:
            examples[kind].append((addr, fr, ot))
    return same, equiv, kinds, examples


# ------------------------------------------------------------------ running

def run_tool(cmd, addrs):
    """Runs an addr2line with @addrs on stdin twice: (first s, again s, lines of the first)."""
    marks, out = {}, []
    s1, s2 = "0x0000000000000001", "0x0000000000000002"
    t0 = time.monotonic()
    p = subprocess.Popen(["stdbuf", "-oL"] + cmd, stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, text=True)
    got = {s1: threading.Event(), s2: threading.Event()}

    def reader():
        for line in p.stdout:
            s = line.strip()
            if s in got:
                marks[s] = time.monotonic()
                got[s].set()
            out.append(line)
        for e in got.values():
            e.set()

    th = threading.Thread(target=reader, daemon=True)
    th.start()
    # Each pass ends with a sentinel address: its line shows when the
    # tool has answered every address before it.
    p.stdin.write("\n".join(addrs) + "\n0x1\n")
    p.stdin.flush()
    got[s1].wait()
    p.stdin.write("\n".join(addrs) + "\n0x2\n")
    p.stdin.close()
    got[s2].wait()
    p.wait()
    th.join()
    if s1 not in marks or s2 not in marks:
        sys.exit(f"{cmd[0]} failed ({p.returncode})")
    first = out[:out.index(s1 + "\n")]
    return marks[s1] - t0, marks[s2] - marks[s1], first


def one_object(ctx, label, path, n, rounds, tmp):
    addr_file = os.path.join(tmp, "addrs")
    pick = subprocess.run([ctx.sym, "pick", path, str(n)], capture_output=True, text=True)
    if pick.returncode != 0:
        sys.exit(f"fx-bench-sym pick {path} failed:\n{pick.stderr}")
    with open(addr_file, "w") as f:
        f.write(pick.stdout)
    addrs = [line.split()[0] for line in pick.stdout.splitlines()]
    kinds = collections.Counter(line.split()[1] for line in pick.stdout.splitlines())
    fx_out = os.path.join(tmp, "fx.out")
    res = subprocess.run([ctx.sym, "resolve", path, addr_file, str(rounds), fx_out],
                         capture_output=True, text=True)
    if res.returncode != 0:
        sys.exit(f"fx-bench-sym resolve {path} failed:\n{res.stderr}")
    rr = [dict(zip(m[::2], map(float, m[1::2]))) for m in
          (line.split()[2:] for line in res.stdout.splitlines() if line.startswith("round"))]
    with open(fx_out) as f:
        ours = parse_fx(f.read())
    r = {"n": len(addrs), "kinds": kinds,
         "fx_cold": fb.med([x["cold_us"] for x in rr]) / 1e6,
         "fx_warm": fb.med([x["warm_us"] for x in rr]) / 1e6,
         "unresolved": int(rr[0]["unresolved"])}
    dbg = debug_file(path)
    syms = symbol_addrs([path] + ([dbg] if dbg else []))
    answers = {}
    for tool, eu in (("eu-addr2line", True), ("addr2line", False)):
        cmd = [tool, "-C", "-a", "-f", "-i", "-e", path]
        runs = [run_tool(cmd, addrs) for _ in range(rounds)]
        r[tool] = (fb.med([x[0] for x in runs]), fb.med([x[1] for x in runs]))
        answers[tool] = parse_tool(runs[0][2], eu)
        same, equiv, diff, ex = compare(ours, answers[tool], syms)
        r[tool + " cmp"] = (same, equiv, diff)
        for kind, lst in ex.items():
            for addr, fr, ot in lst:
                ctx.log(f"symbolize: {label} 0x{addr:x} {kind}:\n  fxagent: {fr}\n  {tool}: {ot}")
    same, _, _, _ = compare(answers["eu-addr2line"], answers["addr2line"], syms)
    r["tools_same"] = same
    r["debug"] = dbg
    return r


def rate(n, s):
    """Time and addresses per second, to 2-3 significant digits."""
    t = f"{s * 1e6:.0f} us" if s < 0.001 else f"{s * 1000:.3g} ms" if s < 1 else f"{s:.3g} s"
    per = n / s if s else 0
    p = f"{per / 1e6:.3g}M/s" if per >= 1e6 else f"{per / 1e3:.3g}k/s" if per >= 1e4 else \
        f"{per:.0f}/s"
    return f"{t} ({p})"


def run(ctx, a):
    n = a.addresses or (200 if ctx.quick else 2000)
    rounds = a.rounds or (1 if ctx.quick else 5)
    ctx.need(ctx.sym, ctx.agent)
    for tool in ("eu-addr2line", "addr2line", "stdbuf", "nm", "readelf"):
        if not shutil.which(tool):
            sys.exit(f"{tool} is missing (elfutils, binutils, coreutils)")
    speed, agree, notes = [], [], []
    for label, path, how in objects(ctx):
        if not os.path.exists(path) or (path != ctx.agent and not debug_file(path)):
            notes.append(f"{label}: not measured, no debug file here ({how}).")
            speed.append([label, "-", "not installed", "", "", "", "", ""])
            continue
        with tempfile.TemporaryDirectory(prefix="fxbench-") as tmp:
            r = one_object(ctx, label, path, n, rounds, tmp)
        ctx.log(f"symbolize: {label}: {r}")
        k = r["kinds"]
        speed.append([label, f"{r['n']} ({k['start']}/{k['body']}/{k['inline']})",
                      rate(r["n"], r["fx_cold"]), rate(r["n"], r["fx_warm"]),
                      rate(r["n"], r["eu-addr2line"][0]), rate(r["n"], r["eu-addr2line"][1]),
                      rate(r["n"], r["addr2line"][0]), rate(r["n"], r["addr2line"][1])])
        row = [label]
        for tool in ("eu-addr2line", "addr2line"):
            same, equiv, diff = r[tool + " cmp"]
            row.append(f"{100 * same / r['n']:.1f}% / {100 * equiv / r['n']:.1f}%")
        row.append(f"{100 * r['tools_same'] / r['n']:.1f}%")
        for tool in ("eu-addr2line", "addr2line"):
            diff = r[tool + " cmp"][2]
            row.append(", ".join(f"{kind} {cnt}" for kind, cnt in diff.most_common()) or "-")
        agree.append(row)
    lines = ["### Symbolization", "",
             f"`bench/symbolize.py`: {n} distinct code addresses per object (function "
             f"entries / rows outside inlined code / rows inside inlined calls), one batch, "
             f"median of {rounds} round{'s' * (rounds > 1)}; time and addresses per second. "
             f"fxagent: its symbolizer in-process (`fx-bench-sym`), cold = a new symbolizer "
             f"(opens the file and its debug file), warm = the same batch again (answered "
             f"from its (object, offset) cache, as a window's repeated frames are). The tools: "
             f"`-C -a -f -i`, addresses on stdin, first pass including the process start, "
             f"then the same addresses again in the same process. Files in the page cache.",
             ""]
    lines += fb.table(["object", "addresses", "fxagent cold", "fxagent warm",
                       "eu-addr2line", "eu-addr2line again", "addr2line", "addr2line again"],
                      speed)
    lines += ["Agreement, address by address (function names with the inline chain and "
              "file:line of every level): the same / equivalent (the differences are only "
              "clone suffixes, aliases or spelling, see `bench/symbolize.py`).", ""]
    lines += fb.table(["object", "with eu-addr2line", "with addr2line",
                       "eu-addr2line with addr2line (same)", "differences with eu-addr2line",
                       "differences with addr2line"], agree)
    return lines + ([" ".join(notes), ""] if notes else [])


if __name__ == "__main__":
    fb.section_main(sys.modules[__name__], __doc__)

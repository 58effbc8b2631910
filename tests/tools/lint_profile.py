#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Lint a Firefox Profiler processed profile (v66) for what its loader does not check.

The loader accepts wrong column lengths, out-of-range indexes and children before
their parents without a word, then shows nonsense. This checks them.

usage: lint_profile.py FILE.json|FILE.json.gz
Prints each problem as table.column[row]: what; exits 1 if any, else prints
"ok: N threads, M samples" and exits 0.
"""

import gzip
import json
import math
import sys

MAX_PER_COLUMN = 20  # a broken column would otherwise print a line per row


class Linter:
    def __init__(self):
        self.problems = []
        self.counts = {}

    def bad(self, where, what):
        key = where.split("[", 1)[0]
        n = self.counts.get(key, 0) + 1
        self.counts[key] = n
        if n <= MAX_PER_COLUMN:
            self.problems.append(f"{where}: {what}")
        elif n == MAX_PER_COLUMN + 1:
            self.problems.append(f"{key}: more problems, not shown")

    # ---- helpers ----

    def table(self, name, t, columns, nullable=()):
        """Checks that @t is a table with the given columns, each @length long.
        Returns the length (0 when the table is unusable)."""
        if not isinstance(t, dict):
            self.bad(name, "missing or not an object")
            return 0
        length = t.get("length")
        if not is_int(length) or length < 0:
            self.bad(f"{name}.length", f"not a non-negative integer: {js(length)}")
            return 0
        for col in columns:
            if col not in t:
                self.bad(f"{name}.{col}", "missing column")
                continue
            v = t[col]
            if v is None and col in nullable:
                continue
            if not isinstance(v, list):
                self.bad(f"{name}.{col}", f"not an array: {type(v).__name__}")
            elif len(v) != length:
                self.bad(f"{name}.{col}", f"{len(v)} values, length is {length}")
        # Any other array column must have the same length too.
        for col, v in t.items():
            if col not in columns and isinstance(v, list) and len(v) != length:
                self.bad(f"{name}.{col}", f"{len(v)} values, length is {length}")
        return length

    def col(self, t, col, n):
        """The column as a list of exactly n items (missing ones as None)."""
        v = t.get(col) if isinstance(t, dict) else None
        if not isinstance(v, list):
            return [None] * n
        return (v + [None] * n)[:n]

    def index(self, where, v, limit, allow_null=False, allow_minus_one=False):
        if v is None and allow_null:
            return
        if v == -1 and allow_minus_one and is_int(v):
            return
        if not is_int(v) or v < 0 or v >= limit:
            self.bad(where, f"index {js(v)} out of range 0..{limit - 1}")

    # ---- the profile ----

    def lint(self, p):
        if not isinstance(p, dict):
            self.bad("profile", "not an object")
            return 0, 0
        meta = p.get("meta")
        if not isinstance(meta, dict):
            self.bad("meta", "missing")
            meta = {}
        if meta.get("version") != 24:
            self.bad("meta.version", f"{js(meta.get('version'))}, expected 24")
        if meta.get("preprocessedProfileVersion") != 66:
            self.bad("meta.preprocessedProfileVersion",
                     f"{js(meta.get('preprocessedProfileVersion'))}, expected 66")
        cats = meta.get("categories")
        if not isinstance(cats, list) or not cats:
            self.bad("meta.categories", "missing or empty")
            cats = []
        nsub = []
        for i, c in enumerate(cats):
            subs = c.get("subcategories") if isinstance(c, dict) else None
            if not isinstance(subs, list) or not subs:
                self.bad(f"meta.categories[{i}].subcategories", "missing or empty")
                subs = []
            nsub.append(len(subs))
        schemas = meta.get("markerSchema")
        if not isinstance(schemas, list):
            self.bad("meta.markerSchema", "missing (the loader fails without it)")
            schemas = []
        schema_names = {s.get("name") for s in schemas if isinstance(s, dict)}

        libs = p.get("libs")
        if not isinstance(libs, list):
            self.bad("libs", "missing or not an array")
            libs = []
        for i, lib in enumerate(libs):
            for key in ("name", "path", "debugName", "debugPath", "breakpadId", "codeId"):
                if not isinstance(lib, dict) or not isinstance(lib.get(key), str):
                    self.bad(f"libs[{i}].{key}", "missing or not a string")

        shared = p.get("shared")
        if not isinstance(shared, dict):
            self.bad("shared", "missing")
            shared = {}
        strings = shared.get("stringArray")
        if not isinstance(strings, list):
            self.bad("shared.stringArray", "missing or not an array")
            strings = []
        for i, s in enumerate(strings):
            if not isinstance(s, str):
                self.bad(f"shared.stringArray[{i}]", "not a string")
        nstr = len(strings)

        res = shared.get("resourceTable")
        nres = self.table("resourceTable", res, ("name", "host", "lib", "type"))
        for i, (name, lib) in enumerate(zip(self.col(res, "name", nres),
                                            self.col(res, "lib", nres))):
            self.index(f"resourceTable.name[{i}]", name, nstr)
            self.index(f"resourceTable.lib[{i}]", lib, len(libs), allow_null=True)

        ns = shared.get("nativeSymbols")
        nns = self.table("nativeSymbols", ns, ("libIndex", "address", "name", "functionSize"))
        for i, (lib, name) in enumerate(zip(self.col(ns, "libIndex", nns),
                                            self.col(ns, "name", nns))):
            self.index(f"nativeSymbols.libIndex[{i}]", lib, len(libs))
            self.index(f"nativeSymbols.name[{i}]", name, nstr)

        src = shared.get("sources")
        nsrc = self.table("sources", src, ("id", "filename"))
        for i, name in enumerate(self.col(src, "filename", nsrc)):
            self.index(f"sources.filename[{i}]", name, nstr)
        sl = shared.get("sourceLocationTable")
        self.table("sourceLocationTable", sl, ("source", "line", "column"))

        ft = shared.get("funcTable")
        nfunc = self.table("funcTable", ft, ("name", "isJS", "relevantForJS", "resource",
                                             "source", "lineNumber", "columnNumber"))
        for i, (name, r, s) in enumerate(zip(self.col(ft, "name", nfunc),
                                             self.col(ft, "resource", nfunc),
                                             self.col(ft, "source", nfunc))):
            self.index(f"funcTable.name[{i}]", name, nstr)
            self.index(f"funcTable.resource[{i}]", r, nres, allow_minus_one=True)
            self.index(f"funcTable.source[{i}]", s, nsrc, allow_null=True)

        fr = shared.get("frameTable")
        nframe = self.table("frameTable", fr, ("address", "inlineDepth", "category",
                                               "subcategory", "func", "nativeSymbol",
                                               "innerWindowID", "line", "column"))
        f_addr = self.col(fr, "address", nframe)
        f_depth = self.col(fr, "inlineDepth", nframe)
        f_nsym = self.col(fr, "nativeSymbol", nframe)
        for i, (func, nsym, cat, sub, addr, depth) in enumerate(zip(
                self.col(fr, "func", nframe), f_nsym, self.col(fr, "category", nframe),
                self.col(fr, "subcategory", nframe), f_addr, f_depth)):
            self.index(f"frameTable.func[{i}]", func, nfunc)
            self.index(f"frameTable.nativeSymbol[{i}]", nsym, nns, allow_null=True)
            self.category(f"frameTable[{i}]", cat, sub, nsub)
            if not is_int(addr) or addr < -1:
                self.bad(f"frameTable.address[{i}]", f"{js(addr)} is not an address or -1")
            if not is_int(depth) or depth < 0:
                self.bad(f"frameTable.inlineDepth[{i}]", f"{js(depth)}")

        st = shared.get("stackTable")
        nstack = self.table("stackTable", st, ("frame",))
        frames = self.col(st, "frame", nstack)
        parents = self.stack_parents(st, nstack)
        for i, (frame, parent) in enumerate(zip(frames, parents)):
            self.index(f"stackTable.frame[{i}]", frame, nframe)
            if not (is_int(frame) and 0 <= frame < nframe):
                continue
            # An inline level's caller is the level above it, at the same address.
            d = f_depth[frame]
            if is_int(d) and d > 0:
                pf = frames[parent] if parent is not None else None
                if not (is_int(pf) and 0 <= pf < nframe and f_depth[pf] == d - 1
                        and f_addr[pf] == f_addr[frame] and f_nsym[pf] == f_nsym[frame]):
                    self.bad(f"stackTable[{i}]",
                             f"inline depth {d} frame {frame} whose parent is not depth "
                             f"{d - 1} at the same address")

        threads = p.get("threads")
        if not isinstance(threads, list):
            self.bad("threads", "missing or not an array")
            threads = []
        total = 0
        for t, th in enumerate(threads):
            total += self.thread(f"threads[{t}]", th, nstack, nstr, nsub, schema_names)
        for k in ("pages", "profilerOverhead", "counters"):
            if k in p and not isinstance(p[k], list):
                self.bad(k, "not an array")
        for c, counter in enumerate(p.get("counters") or []):
            name = f"counters[{c}]"
            if not isinstance(counter, dict):
                self.bad(name, "not an object")
                continue
            if not isinstance(counter.get("pid"), str):
                self.bad(f"{name}.pid", f"{js(counter.get('pid'))} is not a string")
            self.index(f"{name}.mainThreadIndex", counter.get("mainThreadIndex"), len(threads))
            self.table(f"{name}.samples", counter.get("samples"), ("time", "count"))
            if not isinstance(counter.get("display"), dict):
                self.bad(f"{name}.display", "missing")
        return len(threads), total

    def category(self, where, cat, sub, nsub):
        if cat is None and sub is None:
            return
        if cat is None or sub is None:
            self.bad(where, f"category {js(cat)} and subcategory {js(sub)}: both or neither")
            return
        if not is_int(cat) or not 0 <= cat < len(nsub):
            self.bad(f"{where}.category", f"{js(cat)} out of range 0..{len(nsub) - 1}")
            return
        if not is_int(sub) or not 0 <= sub < nsub[cat]:
            self.bad(f"{where}.subcategory", f"{js(sub)} out of range 0..{nsub[cat] - 1}")

    def stack_parents(self, st, n):
        """Parent index of each stack (None for a root); reports bad links."""
        parents = [None] * n
        if isinstance(st, dict) and "prefixOffset" in st:
            for i, off in enumerate(self.col(st, "prefixOffset", n)):
                if not is_int(off) or off < 0:
                    self.bad(f"stackTable.prefixOffset[{i}]", f"{js(off)} is not >= 0")
                elif off > i:
                    self.bad(f"stackTable.prefixOffset[{i}]",
                             f"{off} points before the table (parent {i - off})")
                elif off:
                    parents[i] = i - off
        elif isinstance(st, dict) and "prefix" in st:
            for i, pre in enumerate(self.col(st, "prefix", n)):
                if pre is None:
                    continue
                if not is_int(pre) or pre < 0 or pre >= i:
                    self.bad(f"stackTable.prefix[{i}]", f"{js(pre)}: a parent must come first")
                else:
                    parents[i] = pre
        else:
            self.bad("stackTable.prefixOffset", "missing column")
        return parents

    def thread(self, name, th, nstack, nstr, nsub, schema_names):
        if not isinstance(th, dict):
            self.bad(name, "not an object")
            return 0
        if not isinstance(th.get("pid"), str):
            self.bad(f"{name}.pid", f"{js(th.get('pid'))} is not a string")
        if not is_int(th.get("tid")) and not isinstance(th.get("tid"), str):
            self.bad(f"{name}.tid", f"{js(th.get('tid'))}")
        for key in ("name", "processType"):
            if not isinstance(th.get(key), str):
                self.bad(f"{name}.{key}", "missing or not a string")

        s = th.get("samples")
        timecol = "timeDeltas" if isinstance(s, dict) and "timeDeltas" in s else "time"
        n = self.table(f"{name}.samples", s, ("stack", timecol, "weight"), nullable=("weight",))
        for i, stack in enumerate(self.col(s, "stack", n)):
            self.index(f"{name}.samples.stack[{i}]", stack, nstack, allow_null=True)
        last = -math.inf
        for i, t in enumerate(self.col(s, timecol, n)):
            if not is_num(t):
                self.bad(f"{name}.samples.{timecol}[{i}]", f"{js(t)} is not a number")
            elif timecol == "timeDeltas" and t < 0:
                self.bad(f"{name}.samples.timeDeltas[{i}]", f"{t} is negative")
            elif timecol == "time":
                if t < last:
                    self.bad(f"{name}.samples.time[{i}]", f"{t} before the previous {last}")
                last = t

        m = th.get("markers")
        nm = self.table(f"{name}.markers", m, ("name", "startTime", "endTime", "phase",
                                               "category", "data"))
        for i, (mname, cat, data, phase) in enumerate(zip(
                self.col(m, "name", nm), self.col(m, "category", nm),
                self.col(m, "data", nm), self.col(m, "phase", nm))):
            self.index(f"{name}.markers.name[{i}]", mname, nstr)
            self.index(f"{name}.markers.category[{i}]", cat, len(nsub))
            if phase not in (0, 1, 2, 3):
                self.bad(f"{name}.markers.phase[{i}]", f"{js(phase)}")
            if isinstance(data, dict) and data.get("type") not in schema_names:
                self.bad(f"{name}.markers.data[{i}].type",
                         f"{js(data.get('type'))} names no meta.markerSchema entry")
        return n


def js(v):
    """A value as JSON spells it, for messages."""
    return json.dumps(v)


def is_int(v):
    return isinstance(v, int) and not isinstance(v, bool)


def is_num(v):
    return (isinstance(v, (int, float)) and not isinstance(v, bool)
            and math.isfinite(v))


def load(path):
    with open(path, "rb") as f:
        data = f.read()
    if data[:2] == b"\x1f\x8b":
        data = gzip.decompress(data)
    # Strict: the profile must be valid UTF-8 JSON, as a browser would parse it.
    return json.loads(data.decode("utf-8"))


def main(argv):
    if len(argv) != 2:
        print("usage: lint_profile.py FILE.json|FILE.json.gz", file=sys.stderr)
        return 2
    try:
        profile = load(argv[1])
    except (OSError, ValueError, EOFError) as e:
        print(f"{argv[1]}: cannot read the profile: {e}")
        return 1
    linter = Linter()
    nthreads, nsamples = linter.lint(profile)
    for p in linter.problems:
        print(p)
    if linter.problems:
        return 1
    print(f"ok: {nthreads} threads, {nsamples} samples")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))

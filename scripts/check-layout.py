#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The shape of agent/: no two files depend on each other, no function is
longer than MAX_LINES, and a function a folder's private header (*_int.h)
declares carries that folder's prefix (PREFIXES), never the contract
headers' fx_. Exit 0: both hold; 1: what breaks them is listed.

A file depends on another when it calls a function the other defines (not
static). Files that depend on each other, directly or through others, are a
cycle: one of them should hold what both need, or a function should move.
Comments and string literals are left out before looking; C only, by
pattern: the tree's own style (a definition's name at the start of a line or
after its type, the body's braces at column 0) is what it reads."""

import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MAX_LINES = 120
COMMENT = re.compile(r"/\*.*?\*/|//[^\n]*", re.S)
STRING = re.compile(r'"(?:\\.|[^"\\\n])*"')
# A definition: a line at column 0 that is not static, ends a type and names
# a function; its body's "{" is at column 0 on a later line.
# The prefixes of the functions each folder's *_int.h declares.
PREFIXES = {"config": ("cfg_",), "pipeline": ("pipe_",), "profile": ("prof_",),
            "symbols": ("sym_",), "upload": ("upl_",), "view": ("view_", "src_")}
DECL = re.compile(r"^[A-Za-z_][\w \t\*]*?\b([A-Za-z_]\w*)\(", re.M)
KEYWORDS = {"if", "for", "while", "switch", "return", "sizeof", "defined"}
DEF = re.compile(r"^(?!static\b)(?!typedef\b)[A-Za-z_][\w \t\*]*?\b([A-Za-z_]\w*)\(", re.M)


def sources():
    out = subprocess.run(["git", "-C", ROOT, "ls-files", "agent"], capture_output=True,
                         text=True, check=True).stdout
    return [p for p in out.splitlines() if p.endswith(".c")]


def strip(text):
    """Comments and strings blanked, lines kept."""
    text = COMMENT.sub(lambda m: re.sub(r"[^\n]", " ", m[0]), text)
    return STRING.sub('""', text)


def functions(text):
    """[(name, first line, lines)] of the function bodies of @text."""
    lines = text.split("\n")
    out = []
    i = 0
    while i < len(lines):
        if lines[i] == "{":
            k = i - 1
            while k >= 0 and "(" not in lines[k]:
                k -= 1
            m = re.search(r"(\w+)\s*\(", lines[k]) if k >= 0 else None
            j = i
            while j < len(lines) and lines[j] != "}":
                j += 1
            out.append((m[1] if m else "?", k + 1, j - i + 1))
            i = j
        i += 1
    return out


def cycles(graph):
    """Strongly connected components of more than one file (Tarjan)."""
    index, low, stack, on, found = {}, {}, [], set(), []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def private_names():
    """Functions of the *_int.h headers without their folder's prefix."""
    out = subprocess.run(["git", "-C", ROOT, "ls-files", "agent/*_int.h"],
                         capture_output=True, text=True, check=True).stdout
    problems = []
    for rel in out.splitlines():
        folder = rel.split("/")[1]
        want = PREFIXES.get(folder)
        with open(os.path.join(ROOT, rel), errors="replace") as f:
            text = strip(f.read())
        for m in DECL.finditer(text):
            name = m[1]
            if name.startswith("__") or name in KEYWORDS:
                continue
            if want is None:
                problems.append(f"{rel}: no prefix is set for {folder}/ (PREFIXES)")
                break
            if not name.startswith(want):
                line = text.count("\n", 0, m.start()) + 1
                problems.append(f"{rel}:{line}: {name} is shared within {folder}/ only: "
                                f"name it {want[0]}...")
    return problems


def main():
    text = {}
    for rel in sources():
        with open(os.path.join(ROOT, rel), errors="replace") as f:
            text[rel] = strip(f.read())
    defined = {}
    for rel, t in text.items():
        for m in DEF.finditer(t):
            # Not a name (__attribute__, a keyword), or the program's entry.
            if m[1] != "main" and not m[1].startswith("__") and m[1] not in KEYWORDS:
                defined.setdefault(m[1], rel)
    calls = {rel: {} for rel in text}
    word = re.compile(r"\b([A-Za-z_]\w*)\s*\(")
    for rel, t in text.items():
        for m in word.finditer(t):
            other = defined.get(m[1])
            if other and other != rel:
                calls[rel].setdefault(other, set()).add(m[1])
    problems = []
    for comp in cycles({rel: set(c) for rel, c in calls.items()}):
        edges = [f"{a} -> {b} ({', '.join(sorted(calls[a][b])[:3])})"
                 for a in comp for b in comp if b in calls[a]]
        problems.append("files that depend on each other: " + "; ".join(edges))
    for rel, t in sorted(text.items()):
        for name, line, n in functions(t):
            if n > MAX_LINES:
                problems.append(f"{rel}:{line}: {name} is {n} lines, over {MAX_LINES}")
    problems += private_names()
    for p in problems:
        print(p)
    print(f"check-layout: {len(problems)} problems" if problems else
          f"check-layout: {len(text)} files, no cycle, no function over {MAX_LINES} lines")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())

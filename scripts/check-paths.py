#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Fails on a path into this tree that the tree's configs, scripts, docs or
source comments name but that does not exist (a renamed bench script, a
style file that moved). Exit 0: every named path exists; 1: the missing ones
are listed as file:line: path.

What counts as a path: a word that starts with one of the tree's top-level
directories (agent/, bench/, docs/, ...) or is one of its top-level files
(README.md, CMakeLists.txt, ...), alone or after ${CMAKE_SOURCE_DIR}/ or the
repository root. Words with a glob or placeholder (*, <, {, $) name patterns,
not files, and are skipped; so are ../shared/ paths (beside the tree, not in
it) and build outputs (build*/).

And the map cannot go stale: every source file under agent/ (.c, and the
private _int.h headers) is named in docs/ARCHITECTURE.md's stage table, and
every file the table names exists."""

import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TOP_DIRS = ("agent", "bench", "config", "docs", "include", "packaging", "scripts", "tests",
            "debian", ".ci")
TOP_FILES = ("README.md", "CMakeLists.txt", ".clang-format", ".clang-tidy",
             ".cppcheck-suppressions", "STYLE.md", "ARCHITECTURE.md")
# Where paths are named: configs and scripts whole, sources in their comments.
CHECKED = re.compile(r"(^|/)(CMakeLists\.txt|\.clang-tidy|\.clang-format|\.cppcheck-suppressions"
                     r"|\.ci/run|[^/]+\.(sh|py|md|yaml|c|h|cc|cpp|service|cmake))$")
WORD = re.compile(r"(?:\$\{CMAKE_SOURCE_DIR\}/)?((?:%s)/[A-Za-z0-9_./+-]*[A-Za-z0-9_]|%s)"
                  % ("|".join(re.escape(d) for d in TOP_DIRS),
                     "|".join(re.escape(f) for f in TOP_FILES)))
BEFORE_OK = re.compile(r"[\s`'\"(\[=:,]$|^$")


def tracked():
    out = subprocess.run(["git", "-C", ROOT, "ls-files"], capture_output=True, text=True,
                         check=True).stdout
    # Not this script: its own lists name files in general, not paths.
    return [p for p in out.splitlines() if CHECKED.search(p) and os.path.isfile(
        os.path.join(ROOT, p)) and p != "scripts/check-paths.py"]


def exists(path):
    path = path.rstrip(".")
    return os.path.lexists(os.path.join(ROOT, path))


def check(rel):
    missing = []
    with open(os.path.join(ROOT, rel), errors="replace") as f:
        for n, line in enumerate(f, 1):
            for m in WORD.finditer(line):
                before = line[:m.start()]
                after = line[m.end():m.end() + 1]
                word = m.group(1)
                # Part of a longer path (../shared/..., /usr/include/...), a
                # pattern, or the tail of another word.
                if not BEFORE_OK.search(before[-1:] if before else "") and \
                        not line[m.start():].startswith("${CMAKE_SOURCE_DIR}/"):
                    continue
                if after and after in "*<{$" or line[m.end():].startswith("-..."):
                    continue
                if word in TOP_FILES and rel.count("/") and word not in ("README.md",):
                    # A bare file name deep in the tree may be a sibling's.
                    if exists(os.path.join(os.path.dirname(rel), word)):
                        continue
                if not exists(word):
                    missing.append(f"{rel}:{n}: {word}")
    return missing


MAP = "docs/ARCHITECTURE.md"
TICKED = re.compile(r"`([^`]+)`")


def stage_table():
    """{agent-relative path: line} of the files docs/ARCHITECTURE.md's stage
    table names. A row is | stage | folders | files | ...; a file with a slash
    is relative to agent/, one without it to the row's first folder."""
    named = {}
    in_table = False
    with open(os.path.join(ROOT, MAP)) as f:
        for n, line in enumerate(f, 1):
            if line.startswith("| stage | folder | files |"):
                in_table = True
                continue
            if not in_table:
                continue
            if not line.startswith("|"):
                break
            cols = [c.strip() for c in line.strip().strip("|").split("|")]
            if len(cols) < 3 or set(cols[0]) <= set("-: "):
                continue
            folders = [d.rstrip("/") for d in TICKED.findall(cols[1])]
            base = "" if not folders or folders[0] == "agent" else folders[0] + "/"
            for word in TICKED.findall(cols[2]):
                name = word.split()[0]
                if not re.search(r"\.(c|h)$", name):
                    continue
                named[name if "/" in name else base + name] = n
    return named


def check_map():
    out = subprocess.run(["git", "-C", ROOT, "ls-files", "agent"], capture_output=True,
                         text=True, check=True).stdout
    sources = {p[len("agent/"):] for p in out.splitlines()
               if p.endswith(".c") or p.endswith("_int.h")}
    named = stage_table()
    problems = [f"agent/{p}: not in {MAP}'s stage table" for p in sorted(sources - set(named))]
    problems += [f"{MAP}:{named[p]}: agent/{p}: no such file"
                 for p in sorted(set(named) - sources)]
    return problems


def main():
    missing = [m for rel in tracked() for m in check(rel)]
    for m in missing:
        print(m)
    unmapped = check_map()
    for m in unmapped:
        print(m)
    print(f"check-paths: {len(missing)} named paths missing" if missing
          else "check-paths: every named path exists")
    print(f"check-paths: {len(unmapped)} files off the map" if unmapped
          else f"check-paths: every source file under agent/ is in {MAP}'s stage table")
    return 1 if missing or unmapped else 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The one reference, checked: the flags and config keys a user reads about
are the ones the binary takes.

    scripts/check-reference.py FXAGENT

- the flags of `fxagent --help` are the flags the man page's OPTIONS section
  describes and the rows of docs/usage.md's "## Flags" table; those of
  `fxagent view --help` are those of the man page's LOOKING AT THE FLEET
  section and of docs/view.md's "## Flags" table (no flag missing from one
  of them, none described that the binary does not take);
- the config keys the parser accepts (the key tables of agent/config/) are
  the keys of config/fxagent.yaml, the shipped and documented config, and
  each is described in the man page's CONFIGURATION section;
- README.md stays a front door: at most 250 lines.

Prints each disagreement and exits 1 if there is one.
"""

import glob
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FLAG = re.compile(r"(?<![\w-])(--[a-z][a-z-]*[a-z]|-[a-zA-Z])(?![\w-])")
README_MAX_LINES = 250


def help_flags(text):
    """Flags in the option column of a --help text: lines indented 2 to 6
    spaces that start with a dash, up to the first run of two spaces."""
    flags = set()
    for ln in text.splitlines():
        m = re.match(r"^ {2,6}(-\S.*?)(?: {2,}|$)", ln)
        if m:
            flags |= set(FLAG.findall(m[1]))
    return flags


def man_sections(path):
    """{section title: its roff source} of the man page."""
    with open(path) as f:
        src = f.read()
    parts = re.split(r"^\.SH (.+)$", src, flags=re.M)
    return {parts[i].strip('"'): parts[i + 1] for i in range(1, len(parts) - 1, 2)}


def man_flags(roff):
    """Flags in the tagged paragraphs' tags (the line after each .TP)."""
    flags = set()
    lines = roff.splitlines()
    for i, ln in enumerate(lines[:-1]):
        if ln.startswith(".TP"):
            tag = re.sub(r"\\f[BIRP]", "", lines[i + 1]).replace("\\-", "-")
            flags |= set(FLAG.findall(tag))
    return flags


def doc_flags(path, errors):
    """Flags in the first cells of the table under the file's "## Flags"."""
    if not os.path.isfile(path):
        errors.append(f"{os.path.relpath(path, ROOT)}: missing (it holds the flag table)")
        return set()
    with open(path) as f:
        text = f.read()
    m = re.search(r"^## Flags\s*$(.*?)(?=^## |\Z)", text, flags=re.M | re.S)
    if not m:
        errors.append(f"{os.path.relpath(path, ROOT)}: no '## Flags' section")
        return set()
    flags = set()
    for ln in m[1].splitlines():
        if ln.startswith("|") and not re.match(r"^\|\s*:?-", ln):
            cell = ln.split("|")[1]
            for code in re.findall(r"`([^`]*)`", cell):
                flags |= set(FLAG.findall(code))
    return flags


def compare(what, sets, errors):
    """Every pair of @sets ({name: flags}) agrees; says what one lacks."""
    union = set().union(*sets.values())
    for name, flags in sets.items():
        missing = sorted(union - flags)
        if missing:
            others = [n for n, f in sets.items() if n != name and set(missing) & f]
            errors.append(f"{what}: {name} lacks {missing} (in {', '.join(others)})")


def parser_keys():
    """The string keys of the key tables in agent/config/*.c."""
    keys = set()
    for path in glob.glob(os.path.join(ROOT, "agent/config/*.c")):
        with open(path) as f:
            src = f.read()
        for body in re.findall(r"const char \*const \w*keys\[[^\]]*\]\s*=\s*\{(.*?)\};", src,
                               flags=re.S):
            keys |= set(re.findall(r'"([a-z_]+)"', body))
    return keys


def yaml_keys(path):
    """Every key of the documented config, commented-out ones included: a
    line "key: value  # comment" whose value is one word, a [list], a
    {mapping} or nothing (prose such as "# selector: systemd_unit, cgroup"
    is not a key)."""
    keys = set()
    value = r"""(?:[^\s#\[{"]\S*|\[[^\]]*\]|\{[^}]*\}|"[^"]*")?"""
    with open(path) as f:
        for ln in f:
            m = re.match(r"^\s*#?\s*(?:-\s+)?([a-z_]+):\s*" + value + r"\s*(?:#.*)?$", ln)
            if m:
                keys.add(m[1])
    return keys


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    agent = sys.argv[1]
    errors = []
    man = man_sections(os.path.join(ROOT, "packaging/fxagent.1"))
    run = lambda *a: subprocess.run([agent, *a], capture_output=True, text=True,
                                    timeout=30).stdout
    compare("fxagent's flags", {
        "fxagent --help": help_flags(run("--help")),
        "the man page's OPTIONS": man_flags(man.get("OPTIONS", "")),
        "docs/usage.md's table": doc_flags(os.path.join(ROOT, "docs/usage.md"), errors),
    }, errors)
    compare("fxagent view's flags", {
        "fxagent view --help": help_flags(run("view", "--help")),
        "the man page's LOOKING AT THE FLEET": man_flags(man.get("LOOKING AT THE FLEET", "")),
        "docs/view.md's table": doc_flags(os.path.join(ROOT, "docs/view.md"), errors),
    }, errors)

    accepted = parser_keys()
    # "host" and "env" are example labels in the shipped config, not keys.
    shipped = yaml_keys(os.path.join(ROOT, "config/fxagent.yaml")) - {"env", "host"}
    if not accepted:
        errors.append("no key tables found in agent/config/*.c")
    compare("config keys", {"the parser (agent/config)": accepted,
                            "config/fxagent.yaml": shipped}, errors)
    conf = man.get("CONFIGURATION", "").replace("\\-", "-")
    missing = sorted(k for k in accepted if not re.search(r"\b" + re.escape(k) + r"\b", conf))
    if missing:
        errors.append(f"config keys not in the man page's CONFIGURATION: {missing}")

    with open(os.path.join(ROOT, "README.md")) as f:
        n = sum(1 for _ in f)
    if n > README_MAX_LINES:
        errors.append(f"README.md has {n} lines; the front door holds at most "
                      f"{README_MAX_LINES} (the rest belongs in docs/)")

    for e in errors:
        print("FAIL:", e)
    print(f"check-reference: {len(errors)} disagreement(s)")
    sys.exit(1 if errors else 0)


if __name__ == "__main__":
    main()

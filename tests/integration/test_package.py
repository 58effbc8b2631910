# SPDX-License-Identifier: MIT
"""The Debian package that scripts/build-deb.sh built (the ctest fixture
package.deb, in FX_DEB_DIR): lintian has no errors, the unit passes
`systemd-analyze verify`, the package holds the agent, the unit, the config
(as a conffile), the sysusers file and the man page, the shipped config is
valid, and the man page renders cleanly and names every flag and config key.
"""

import glob
import gzip
import io
import os
import re
import shutil
import subprocess
import tarfile

import fxtest

SRC = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


def run(cmd, **kw):
    return subprocess.run(cmd, capture_output=True, text=True, timeout=300, **kw)


def find_deb(t):
    """The fxagent .deb of the agent's version in FX_DEB_DIR, and its .changes."""
    deb_dir = os.environ.get("FX_DEB_DIR", "")
    t.require(deb_dir and os.path.isdir(deb_dir),
              f"FX_DEB_DIR={deb_dir!r} is not a directory (the ctest fixture package.deb "
              "builds it: ctest -R 'package|systemd')")
    version = run([t.agent, "--version"]).stdout.split()[-1]
    debs = glob.glob(os.path.join(deb_dir, f"fxagent_{version}_*.deb"))
    t.require(len(debs) == 1, f"{deb_dir}: want one fxagent_{version}_*.deb, found {debs}")
    changes = glob.glob(os.path.join(deb_dir, f"fxagent_{version}_*.changes"))
    t.require(len(changes) == 1, f"{deb_dir}: want one fxagent_{version}_*.changes, "
              f"found {changes}")
    return debs[0], changes[0]


def need_tools(*tools):
    missing = [name for name, pkg in tools if not shutil.which(name)]
    if missing:
        pkgs = " ".join(pkg for name, pkg in tools if name in missing)
        print(f"SKIP: this machine has no {', '.join(missing)} (apt-get install {pkgs}, "
              "or scripts/install-test-deps.sh)")
        raise SystemExit(fxtest.SKIP)


def check_lintian(t, changes):
    # The .changes names the .deb, the -dbgsym package and the .buildinfo.
    p = run(["lintian", "--pedantic", "--display-info", "--display-experimental", changes])
    out = (p.stdout + p.stderr).strip()
    t.save("lintian.txt", out + "\n")
    t.note("lintian:\n" + (out or "(nothing)"))
    errors = [line for line in out.splitlines() if line.startswith("E:")]
    t.check(not errors and p.returncode == 0,
            f"lintian exited {p.returncode} with {len(errors)} error(s): {errors}")


def check_contents(t, deb, root):
    p = run(["dpkg-deb", "-x", deb, root])
    t.require(p.returncode == 0, f"dpkg-deb -x {deb}: {p.stderr.strip()}")
    want = {
        "usr/bin/fxagent": "the agent",
        "lib/systemd/system/fxagent.service": "the unit",
        "etc/fxagent/fxagent.yaml": "the config",
        "usr/share/man/man1/fxagent.1.gz": "the man page",
        "usr/lib/sysusers.d/fxagent.conf": "the fxagent user (systemd-sysusers)",
        "usr/share/doc/fxagent/copyright": "the copyright file",
    }
    for path, what in want.items():
        t.check(os.path.isfile(os.path.join(root, path)), f"{deb}: no /{path} ({what})")
    t.check(os.access(os.path.join(root, "usr/bin/fxagent"), os.X_OK),
            "/usr/bin/fxagent is not executable")
    with open(os.path.join(root, "lib/systemd/system/fxagent.service")) as f, \
            open(os.path.join(SRC, "packaging/fxagent.service")) as g:
        t.check(f.read() == g.read(), "the packaged unit is not packaging/fxagent.service")
    with open(os.path.join(root, "etc/fxagent/fxagent.yaml")) as f, \
            open(os.path.join(SRC, "config/fxagent.yaml")) as g:
        t.check(f.read() == g.read(), "the packaged config is not config/fxagent.yaml")


def control_files(t, deb):
    """{name: text} of the package's control archive."""
    p = subprocess.run(["dpkg-deb", "--ctrl-tarfile", deb], capture_output=True, timeout=60)
    t.require(p.returncode == 0, f"dpkg-deb --ctrl-tarfile {deb}: {p.stderr.decode()}")
    out = {}
    with tarfile.open(fileobj=io.BytesIO(p.stdout)) as tar:
        for m in tar.getmembers():
            if m.isfile():
                out[os.path.basename(m.name)] = tar.extractfile(m).read().decode()
    return out


def check_control(t, deb):
    ctl = control_files(t, deb)
    conffiles = ctl.get("conffiles", "").split()
    t.note(f"conffiles: {conffiles}")
    t.check("/etc/fxagent/fxagent.yaml" in conffiles,
            f"/etc/fxagent/fxagent.yaml is not a conffile: conffiles {conffiles}")
    control = ctl.get("control", "")
    depends = re.search(r"^Depends: (.*)$", control, re.M)
    t.note(f"Depends: {depends[1] if depends else None}")
    t.check(depends and "systemd-sysusers" in depends[1] and "procps" in depends[1],
            "Depends lacks systemd-sysusers (for the fxagent user) or procps (/bin/kill "
            f"of ExecReload): {depends[1] if depends else control}")
    postinst = ctl.get("postinst", "")
    # The user must exist before the unit is started.
    i_user, i_start = postinst.find("systemd-sysusers"), postinst.find("deb-systemd-invoke")
    t.check(0 <= i_user < i_start,
            "postinst does not create the fxagent user (systemd-sysusers) before it starts "
            "the service (deb-systemd-invoke)")
    t.check("deb-systemd-helper enable" in postinst, "postinst does not enable the unit")
    t.check("rm -rf /var/lib/fxagent" in ctl.get("postrm", ""),
            "postrm does not remove /var/lib/fxagent on purge")


def check_unit(t, root):
    # `verify` resolves the unit's dependencies and commands in --root: the
    # package's files, the host's own units, and /bin/kill (procps) of ExecReload.
    units = os.path.join(root, "lib/systemd/system")
    for d in ("/lib/systemd/system", "/usr/lib/systemd/system"):
        if os.path.isdir(d):
            for name in os.listdir(d):
                src = os.path.join(d, name)
                if os.path.isfile(src) and not os.path.exists(os.path.join(units, name)):
                    shutil.copy(src, units)
    os.makedirs(os.path.join(root, "bin"), exist_ok=True)
    kill = shutil.which("kill", path="/bin:/usr/bin")
    t.require(kill, "no /bin/kill on this machine (procps)")
    shutil.copy(kill, os.path.join(root, "bin/kill"))
    # Documentation=man:fxagent(1) is looked up with man: the package's page.
    env = dict(os.environ, MANPATH=os.path.join(root, "usr/share/man"))
    p = run(["systemd-analyze", "verify", f"--root={root}",
             "/lib/systemd/system/fxagent.service"], env=env)
    t.note(f"systemd-analyze verify: exit {p.returncode} {(p.stdout + p.stderr).strip()}")
    # What it says about the host's own units is not ours to judge.
    ours = [ln for ln in (p.stdout + p.stderr).splitlines() if "fxagent" in ln]
    t.check(p.returncode == 0 and not ours,
            f"systemd-analyze verify fxagent.service: exit {p.returncode}: {ours}")
    p = run(["systemd-analyze", "security", "--offline=yes", f"--root={root}",
             "/lib/systemd/system/fxagent.service"])
    t.save("security.txt", p.stdout + p.stderr)
    level = re.search(r"Overall exposure level for \S+: (\S+ \S+)", p.stdout)
    t.note(f"systemd-analyze security: exposure {level[1] if level else '?'} "
           "(the whole table in security.txt)")


def check_config(t, root):
    agent = os.path.join(root, "usr/bin/fxagent")
    conf = os.path.join(root, "etc/fxagent/fxagent.yaml")
    p = run([agent, "--check-config", conf])
    t.check(p.returncode == 0, f"the packaged agent rejects the shipped config: exit "
            f"{p.returncode}: {p.stderr.strip()}")
    p = run([agent, "--version"])
    t.check(p.returncode == 0 and p.stdout.strip() == run([t.agent, "--version"]).stdout.strip(),
            f"the packaged agent says {p.stdout.strip()!r}, the build "
            f"{run([t.agent, '--version']).stdout.strip()!r}")


def config_keys(path):
    """Every key of the documented config, commented-out ones included, as
    dotted paths' last parts (the man page documents them section by section)."""
    keys = set()
    with open(path) as f:
        for line in f:
            m = re.match(r"^#?\s*(?:-\s+)?([a-z_]+):(\s|$)", line)
            if m:
                keys.add(m[1])
    # An example label, not a key.
    keys.discard("env")
    return keys


def check_man(t, root):
    page = os.path.join(root, "usr/share/man/man1/fxagent.1.gz")
    p = run(["man", "--warnings", "-l", page], env=dict(os.environ, MANWIDTH="80"))
    t.check(p.returncode == 0 and not p.stderr.strip(),
            f"man --warnings -l fxagent.1.gz: exit {p.returncode}: {p.stderr.strip()}")
    text = p.stdout
    t.check("SYNOPSIS" in text and "--check-config" in text, "the man page does not render")
    with gzip.open(page, "rt") as f:
        src = f.read().replace("\\-", "-")
    helptext = run([t.agent, "--help"]).stdout
    flags = sorted(set(re.findall(r"(?<![\w-])(--[a-z][a-z-]+|-[a-zA-Z])\b", helptext)))
    missing = [f for f in flags if f not in src]
    t.check(not missing, f"flags of fxagent --help not in the man page: {missing}")
    keys = config_keys(os.path.join(SRC, "config/fxagent.yaml"))
    missing = sorted(k for k in keys if not re.search(r"\b" + re.escape(k) + r"\b", src))
    t.check(not missing, f"config keys of config/fxagent.yaml not in the man page: {missing}")
    t.note(f"man page: {len(flags)} flags and {len(keys)} config keys found")


def body(t):
    need_tools(("dpkg-deb", "dpkg"), ("lintian", "lintian"),
               ("systemd-analyze", "systemd"), ("man", "man-db"))
    deb, changes = find_deb(t)
    t.note(f"package: {deb}")
    root = os.path.join(t.work, "root")
    check_lintian(t, changes)
    check_contents(t, deb, root)
    check_control(t, deb)
    check_config(t, root)
    check_man(t, root)
    check_unit(t, root)


fxtest.main(body)

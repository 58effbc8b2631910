# SPDX-License-Identifier: MIT
"""A real systemd for the tests (python3 standard library only): a Debian
bookworm tree made by debootstrap, booted by systemd-nspawn, and driven from
the host with nsenter (systemctl, journalctl) while its files are read
directly (the agent's spool).

Everything lives in one directory the test names; Container.shutdown() and
remove_tree() leave nothing behind, even after a failure.
"""

import ctypes
import glob
import os
import re
import shutil
import signal
import subprocess
import time
import urllib.request

import fxtest

DEFAULT_MIRROR = "http://deb.debian.org/debian"
SUITE = "bookworm"
PR_SET_PDEATHSIG = 1

# Bit numbers of <linux/capability.h>, for /proc/PID/status masks.
CAP_BITS = {
    "CAP_CHOWN": 0, "CAP_DAC_OVERRIDE": 1, "CAP_DAC_READ_SEARCH": 2, "CAP_FOWNER": 3,
    "CAP_FSETID": 4, "CAP_KILL": 5, "CAP_SETGID": 6, "CAP_SETUID": 7, "CAP_SETPCAP": 8,
    "CAP_LINUX_IMMUTABLE": 9, "CAP_NET_BIND_SERVICE": 10, "CAP_NET_BROADCAST": 11,
    "CAP_NET_ADMIN": 12, "CAP_NET_RAW": 13, "CAP_IPC_LOCK": 14, "CAP_IPC_OWNER": 15,
    "CAP_SYS_MODULE": 16, "CAP_SYS_RAWIO": 17, "CAP_SYS_CHROOT": 18, "CAP_SYS_PTRACE": 19,
    "CAP_SYS_PACCT": 20, "CAP_SYS_ADMIN": 21, "CAP_SYS_BOOT": 22, "CAP_SYS_NICE": 23,
    "CAP_SYS_RESOURCE": 24, "CAP_SYS_TIME": 25, "CAP_SYS_TTY_CONFIG": 26, "CAP_MKNOD": 27,
    "CAP_LEASE": 28, "CAP_AUDIT_WRITE": 29, "CAP_AUDIT_CONTROL": 30, "CAP_SETFCAP": 31,
    "CAP_MAC_OVERRIDE": 32, "CAP_MAC_ADMIN": 33, "CAP_SYSLOG": 34, "CAP_WAKE_ALARM": 35,
    "CAP_BLOCK_SUSPEND": 36, "CAP_AUDIT_READ": 37, "CAP_PERFMON": 38, "CAP_BPF": 39,
    "CAP_CHECKPOINT_RESTORE": 40,
}


def cap_mask(names):
    return sum(1 << CAP_BITS[n] for n in names)


def cap_names(mask):
    return sorted(n for n, b in CAP_BITS.items() if mask >> b & 1)


def host_mirror():
    """The host's Debian mirror for bookworm, from /etc/apt/sources.list*
    (one-line and deb822 formats), else deb.debian.org."""
    files = ["/etc/apt/sources.list"] + sorted(glob.glob("/etc/apt/sources.list.d/*.list"))
    for path in files:
        try:
            with open(path) as f:
                lines = f.read().splitlines()
        except OSError:
            continue
        for line in lines:
            m = re.match(r"^\s*deb\s+(?:\[[^\]]*\]\s+)?(https?://\S+)\s+(\S+)", line)
            if m and m[2] == SUITE:
                return m[1].rstrip("/")
    for path in sorted(glob.glob("/etc/apt/sources.list.d/*.sources")):
        try:
            with open(path) as f:
                text = f.read()
        except OSError:
            continue
        for para in re.split(r"\n\s*\n", text):
            fields = {}
            for line in para.splitlines():
                m = re.match(r"^([A-Za-z-]+):\s*(.*)$", line)
                if m:
                    fields[m[1].lower()] = m[2].split()
            uris = [u for u in fields.get("uris", []) if re.match(r"https?://", u)]
            if "deb" in fields.get("types", []) and SUITE in fields.get("suites", []) and uris:
                return uris[0].rstrip("/")
    return DEFAULT_MIRROR


def mirror_reachable(mirror):
    try:
        with urllib.request.urlopen(f"{mirror}/dists/{SUITE}/Release", timeout=15) as r:
            return r.status == 200
    except OSError:
        return False


def deb_depends(deb):
    """The first choice of each of the .deb's Depends, without versions."""
    p = subprocess.run(["dpkg-deb", "-f", deb, "Depends"], capture_output=True, text=True,
                       timeout=60)
    if p.returncode != 0:
        raise fxtest.Stop(f"dpkg-deb -f {deb} Depends: {p.stderr.strip()}")
    out = []
    for dep in p.stdout.split(","):
        name = dep.split("|")[0].strip().split(" ")[0].split(":")[0]
        if name and name not in out:
            out.append(name)
    return out


def mounts_under(path):
    """Mount points at or below path, deepest first."""
    path = os.path.realpath(path)
    found = []
    with open("/proc/self/mountinfo") as f:
        for line in f:
            mp = re.sub(r"\\([0-7]{3})", lambda m: chr(int(m[1], 8)), line.split()[4])
            if mp == path or mp.startswith(path + "/"):
                found.append(mp)
    return sorted(found, key=len, reverse=True)


def remove_tree(path):
    """Remove a root tree, first detaching anything mounted in it (a
    debootstrap killed half-way leaves its /proc and /sys mounted): rmtree must
    never walk into a mounted file system."""
    if not os.path.lexists(path):
        return
    for mp in mounts_under(path):
        subprocess.run(["umount", "-l", mp], capture_output=True, timeout=60)
    left = mounts_under(path)
    if left:
        raise fxtest.Stop(f"cannot remove {path}: still mounted: {left}")
    shutil.rmtree(path)


def _die_with_parent():
    # The container or debootstrap goes when the test dies, even by SIGKILL
    # (a ctest timeout): nspawn powers the container off on SIGTERM.
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


def debootstrap(t, tree, mirror, include, log):
    cmd = ["debootstrap", "--variant=minbase", "--include=" + ",".join(include), SUITE, tree,
           mirror]
    t.note("+ " + " ".join(cmd))
    with open(log, "w") as f:
        p = subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT, timeout=900,
                           preexec_fn=_die_with_parent)
    if p.returncode != 0:
        with open(log, errors="replace") as f:
            tail = f.read()[-3000:]
        raise fxtest.Stop(f"debootstrap exited {p.returncode}: {tail}")


def ns_pid_of(container_pid1, ns_pid):
    """The host pid of the container's process ns_pid (as the container sees it)."""
    want_ns = os.readlink(f"/proc/{container_pid1}/ns/pid")
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/status") as f:
                m = re.search(r"^NSpid:\s+(.*)$", f.read(), re.M)
            if m and m[1].split()[-1] == str(ns_pid) and \
                    os.readlink(f"/proc/{d}/ns/pid") == want_ns:
                return int(d)
        except OSError:
            continue
    return None


class Container:
    """systemd-nspawn -b on a tree, in the background; run() executes a command
    in all of its namespaces (nsenter), as root of the container."""

    def __init__(self, t, tree, log, nspawn_args):
        self.t = t
        self.tree = tree
        self.log = log
        cmd = ["systemd-nspawn", "--register=no", "--keep-unit", "--boot",
               f"--directory={tree}", "--link-journal=no", "--console=read-only",
               *nspawn_args]
        t.note("+ " + " ".join(cmd))
        self.logf = open(log, "w")
        self.p = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=self.logf,
                                  stderr=subprocess.STDOUT, preexec_fn=_die_with_parent)
        self.pid1 = None

    def text(self):
        with open(self.log, errors="replace") as f:
            return f.read()

    def wait_pid1(self, timeout=60):
        """The container's init (pid 1 in its namespace, nspawn's child)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.p.poll() is not None:
                raise fxtest.Stop(f"systemd-nspawn exited {self.p.returncode}: "
                                  f"{self.text()[-3000:]}")
            for d in os.listdir("/proc"):
                if not d.isdigit():
                    continue
                try:
                    with open(f"/proc/{d}/status") as f:
                        st = f.read()
                except OSError:
                    continue
                ppid = re.search(r"^PPid:\s+(\d+)", st, re.M)
                nspid = re.search(r"^NSpid:\s+(.*)$", st, re.M)
                if ppid and int(ppid[1]) == self.p.pid and nspid and \
                        nspid[1].split()[-1] == "1":
                    self.pid1 = int(d)
                    return self.pid1
            time.sleep(0.1)
        raise fxtest.Stop(f"no container init under systemd-nspawn within {timeout} s")

    def run(self, *args, timeout=120, check=False):
        cmd = ["nsenter", "-t", str(self.pid1), "-a", *args]
        try:
            p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            raise fxtest.Stop(f"`{' '.join(args)}` in the container took over {timeout} s")
        if check and p.returncode != 0:
            raise fxtest.Stop(f"`{' '.join(args)}` in the container exited {p.returncode}: "
                              f"{(p.stdout + p.stderr).strip()[-2000:]}")
        return p

    def systemctl(self, *args, **kw):
        return self.run("systemctl", *args, **kw)

    def show(self, unit, *props):
        """{property: value} of `systemctl show`."""
        p = self.systemctl("show", unit, *(f"--property={x}" for x in props), check=True)
        return dict(line.split("=", 1) for line in p.stdout.splitlines() if "=" in line)

    def shutdown(self, timeout=60):
        """Power off (then SIGTERM nspawn, then SIGKILL the container's init and
        nspawn, each by pid) and wait for nspawn to exit."""
        if self.p.poll() is None and self.pid1 and \
                self.run("systemctl", "poweroff", "--no-block", timeout=30).returncode == 0:
            try:
                self.p.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                pass
        if self.p.poll() is None:
            self.p.send_signal(signal.SIGTERM)
            try:
                self.p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                pass
        if self.p.poll() is None:
            # The init of a pid namespace takes every process in it along.
            if self.pid1:
                try:
                    os.kill(self.pid1, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            self.p.send_signal(signal.SIGKILL)
            self.p.wait(timeout=30)
        self.logf.close()

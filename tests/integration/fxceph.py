# SPDX-License-Identifier: MIT
"""A one-node Ceph cluster with radosgw, a real S3 store for the tests and the
bench: a monitor, one OSD on memstore (its data in memory, 1 GiB at most) and
radosgw on 127.0.0.1, without cephx (S3's own SigV4 is what is tested; it
does not use cephx). No manager: I/O needs none.

Every daemon runs in the foreground as a child of the caller, which is in a
private network namespace (enter_netns()), and is ended by its pid when the
caller is done; the cluster's files are under one directory of the caller's.
Debian 12's ceph-mon, ceph-osd and radosgw (16.2) are what this was written
for; scripts/install-test-deps.sh installs them.
"""

import os
import shutil
import subprocess
import sys
import time
import uuid

TOOLS = ("ceph-mon", "ceph-osd", "radosgw", "radosgw-admin", "monmaptool", "ceph", "curl")


def missing_tools():
    return [x for x in TOOLS if not shutil.which(x)]


def enter_netns():
    """Run the calling script again in a private network namespace, loopback
    up; returns in the new one."""
    if os.environ.get("FX_IN_NETNS") == "1":
        subprocess.run(["ip", "link", "set", "lo", "up"], check=True)
        return
    env = dict(os.environ, FX_IN_NETNS="1")
    os.execvpe("unshare", ["unshare", "-n", "--", sys.executable, *sys.argv], env)


class Cluster:
    """start() brings it up; endpoint, key and secret are an S3 user's."""

    def __init__(self, work, spawn, port=7480, log=print):
        self.dir = os.path.join(work, "ceph")
        self.spawn = spawn  # starts a process the caller ends (by pid)
        self.port = port
        self.log = log
        self.endpoint = f"http://127.0.0.1:{port}"
        self.region = "us-east-1"
        self.key = "FXAGENTTESTKEY0000001"
        self.secret = "fxagent-test-secret-" + uuid.uuid4().hex
        self.conf = os.path.join(self.dir, "ceph.conf")
        self.rgw = None
        self.procs = []
        self.startup_s = None

    # --- the cluster ------------------------------------------------------
    def _write_conf(self, fsid):
        d = self.dir
        with open(self.conf, "w") as f:
            f.write(f"""[global]
fsid = {fsid}
mon host = v1:127.0.0.1:6789
public addr = 127.0.0.1
ms bind ipv6 = false
auth cluster required = none
auth service required = none
auth client required = none
auth allow insecure global id reclaim = true
run dir = {d}/run
admin socket = {d}/run/$name.asok
log file = {d}/log/$name.log
pid file = {d}/run/$name.pid
mon data = {d}/$name
osd data = {d}/$name
keyring = {d}/keyring
osd objectstore = memstore
memstore device bytes = 1073741824
osd pool default size = 1
osd pool default min size = 1
osd pool default pg num = 8
osd pool default pgp num = 8
mon allow pool size one = true
mon warn on pool no redundancy = false
mon max pg per osd = 1000
osd crush chooseleaf type = 0
osd max object name len = 460
osd max object namespace len = 64
mon osd full ratio = .99
mon osd nearfull ratio = .98
mon osd backfillfull ratio = .985
osd failsafe full ratio = .995

[client.rgw]
rgw frontends = beast endpoint=127.0.0.1:{self.port}
rgw dns name = localhost
rgw enable usage log = false
rgw thread pool size = 64
""")

    def _run(self, *cmd, timeout=60):
        r = subprocess.run(list(cmd), capture_output=True, text=True, timeout=timeout)
        if r.returncode != 0:
            raise RuntimeError(f"{' '.join(cmd)} exited {r.returncode}: "
                               f"{(r.stdout + r.stderr).strip()[-1500:]}")
        return r.stdout

    def ceph(self, *args, timeout=60):
        return self._run("ceph", "-c", self.conf, "--connect-timeout", "20", *args,
                         timeout=timeout)

    def _wait(self, what, cond, timeout):
        """Until cond() holds. A command that fails meanwhile is "not yet": a
        monitor just up may answer EPERM ("problem getting command
        descriptions") for a moment, as seen in CI."""
        end = time.monotonic() + timeout
        last = None
        while time.monotonic() < end:
            for p in self.procs:
                if p.poll() is not None:
                    raise RuntimeError(f"{what}: {p.args[0]} exited {p.returncode}; see "
                                       f"{self.dir}/log")
            try:
                if cond():
                    return
            except (RuntimeError, subprocess.TimeoutExpired) as e:
                last = e
            time.sleep(0.2)
        raise RuntimeError(f"{what}: not within {timeout} s ({last}); see {self.dir}/log")

    def _retry(self, what, fn, timeout=60):
        """fn() until it does not raise, for a command the monitor may refuse
        while it settles."""
        out = []

        def once():
            out.append(fn())
            return True
        self._wait(what, once, timeout)
        return out[-1]

    def start(self, timeout=180):
        t0 = time.monotonic()
        shutil.rmtree(self.dir, ignore_errors=True)
        for sub in ("run", "log", "mon.a", "osd.0"):
            os.makedirs(os.path.join(self.dir, sub))
        fsid = str(uuid.uuid4())
        self._write_conf(fsid)
        monmap = os.path.join(self.dir, "monmap")
        self._run("monmaptool", "--create", "--fsid", fsid, "--addv", "a",
                  "[v1:127.0.0.1:6789]", monmap)
        self._run("ceph-mon", "-c", self.conf, "--mkfs", "-i", "a", "--monmap", monmap)
        self.procs.append(self.spawn(["ceph-mon", "-f", "-c", self.conf, "-i", "a"],
                                     stdout=self._out("mon"), stderr=subprocess.STDOUT))
        self._wait("the monitor", lambda: self._ok("ceph", "-c", self.conf,
                                                   "--connect-timeout", "2", "mon", "stat"),
                   timeout)
        osd_uuid = str(uuid.uuid4())
        osd_id = self._retry("osd new", lambda: self.ceph("osd", "new", osd_uuid)).strip()
        self._retry("the OSD's mkfs", lambda: self._run(
            "ceph-osd", "-c", self.conf, "-i", osd_id, "--mkfs", "--osd-uuid", osd_uuid))
        # An OSD that meets the monitor while it settles may exit 1 (seen
        # once): started again, twice at most.
        for attempt in range(3):
            osd = self.spawn(["ceph-osd", "-f", "-c", self.conf, "-i", osd_id],
                             stdout=self._out("osd"), stderr=subprocess.STDOUT)
            self.procs.append(osd)
            try:
                self._wait("the OSD", lambda: '"num_up_osds":1' in
                           self.ceph("osd", "stat", "-f", "json").replace(" ", ""), timeout)
                break
            except RuntimeError:
                if osd.poll() is None or attempt == 2:
                    raise
                self.procs.remove(osd)
                self.log(f"ceph: the OSD exited {osd.returncode} at start; again")
        self.start_rgw(timeout)
        self._retry("the S3 user", lambda: self._run(
            "radosgw-admin", "-c", self.conf, "user", "create", "--uid", "fxagent",
            "--display-name", "fxagent tests", "--access-key", self.key, "--secret",
            self.secret, timeout=120), timeout=180)
        self.startup_s = time.monotonic() - t0
        self.log(f"ceph: monitor, OSD (memstore) and radosgw on {self.endpoint} up in "
                 f"{self.startup_s:.1f} s")

    def _out(self, name):
        return open(os.path.join(self.dir, "log", name + ".out"), "a")

    def _ok(self, *cmd):
        try:
            return subprocess.run(list(cmd), capture_output=True, timeout=10).returncode == 0
        except subprocess.TimeoutExpired:
            return False

    def _answers(self):
        return self._ok("curl", "-s", "-o", "/dev/null", "--max-time", "2", self.endpoint)

    def start_rgw(self, timeout=120, env=None):
        """radosgw, with @env added to the environment."""
        self.rgw = self.spawn(["radosgw", "-f", "-c", self.conf, "-n", "client.rgw"],
                              stdout=self._out("radosgw"), stderr=subprocess.STDOUT,
                              env=dict(os.environ, **env) if env else None)
        self.procs.append(self.rgw)
        self._wait("radosgw", self._answers, timeout)

    def stop_rgw(self):
        """radosgw stopped (by its pid): the store is down, connections refused."""
        if self.rgw and self.rgw.poll() is None:
            self.rgw.terminate()
            try:
                self.rgw.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.rgw.kill()
                self.rgw.wait()
        if self.rgw in self.procs:
            self.procs.remove(self.rgw)
        self.rgw = None

    def stop(self):
        for p in reversed(self.procs):
            if p.poll() is None:
                p.terminate()
        for p in self.procs:
            try:
                p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        self.procs = []

    # --- S3 requests of the tests' own (curl signs, as the agent's libcurl) ----
    def curl(self, method, path, *extra, secret=None, out=None):
        """One signed request; returns (status, body bytes, headers text)."""
        hdr = os.path.join(self.dir, "curl.headers")
        how = ["-I"] if method == "HEAD" else ["-X", method]
        cmd = ["curl", "-s", *how, "--max-time", "30", "--aws-sigv4",
               f"aws:amz:{self.region}:s3", "--user",
               f"{self.key}:{secret or self.secret}", "-D", hdr,
               "-H", "x-amz-content-sha256: UNSIGNED-PAYLOAD",
               "-o", out or "-", "-w", "\n%{http_code}", *extra, self.endpoint + path]
        r = subprocess.run(cmd, capture_output=True, timeout=60)
        body, _, code = r.stdout.rpartition(b"\n")
        with open(hdr, errors="replace") as f:
            headers = f.read()
        return int(code or 0), body, headers

    def make_bucket(self, bucket):
        st, body, _ = self.curl("PUT", f"/{bucket}")
        if st != 200:
            raise RuntimeError(f"PUT /{bucket}: HTTP {st}: {body[:300]!r}")

    def list_keys(self, bucket, prefix=""):
        """Every key under prefix (ListObjectsV2, all pages): {key: size}."""
        import urllib.parse
        import xml.etree.ElementTree as ET
        ns = "{http://s3.amazonaws.com/doc/2006-03-01/}"
        keys, token = {}, None
        while True:
            q = {"list-type": "2", "prefix": prefix}
            if token:
                q["continuation-token"] = token
            qs = "&".join(f"{k}={urllib.parse.quote(v, safe='')}" for k, v in sorted(q.items()))
            st, body, _ = self.curl("GET", f"/{bucket}/?{qs}")
            if st != 200:
                raise RuntimeError(f"list {bucket}/{prefix}: HTTP {st}: {body[:300]!r}")
            root = ET.fromstring(body)
            for c in root.findall(ns + "Contents"):
                keys[c.find(ns + "Key").text] = int(c.find(ns + "Size").text)
            token = root.findtext(ns + "NextContinuationToken")
            if root.findtext(ns + "IsTruncated") != "true" or not token:
                return keys

    def head(self, bucket, key):
        """(status, {header: value}) of HEAD on the object."""
        import urllib.parse
        st, _, headers = self.curl("HEAD", f"/{bucket}/{urllib.parse.quote(key)}")
        h = {}
        for line in headers.splitlines():
            name, sep, value = line.partition(":")
            if sep:
                h[name.strip().lower()] = value.strip()
        return st, h

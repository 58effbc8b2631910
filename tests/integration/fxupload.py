# SPDX-License-Identifier: MIT
"""Helpers of the upload tests (test_upload_*.py): the agent's spool watched
(every chunk linked aside the moment it is renamed into place, so it can be
compared with what the collector got after the agent deleted it), nginx run as
the test's own collector, fault_server.py, and the checks of a received body."""

import ctypes
import os
import re
import select
import signal
import socket
import struct
import subprocess
import sys
import threading
import time

import fxtest
from fxdaemon import check_chunk

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tools"))
import fault_server  # noqa: E402,F401 (for the tests)

SPOOL_RE = re.compile(r"^(?P<start>\d+)-(?P<end>\d+)-(?P<seq>\d+)-(?P<id>[0-9a-f]{32})-"
                      r"(?P<target>[A-Za-z0-9_.-]+)\.json\.gz$")
# The URL template the tests give the agent: everything a check needs.
URL_TAIL = "{target}/{start}-{seq}-{id}.json.gz"
URL_RE = re.compile(r"/(?P<target>[A-Za-z0-9_.-]+)/(?P<start>\d{8}T\d{6}Z)-(?P<seq>\d+)-"
                    r"(?P<id>[0-9a-f]{32})\.json\.gz$")
WROTE_RE = re.compile(r"wrote (?P<path>\S+): (?P<samples>\d+) samples, (?:\d+ waits, )?"
                      r"(?P<bytes>\d+) bytes")
DROPPED_RE = re.compile(r"upload: .*?(?P<n>\d+) dropped")
NGINX = "/usr/sbin/nginx"

IN_CLOSE_WRITE, IN_MOVED_TO, IN_CREATE = 0x8, 0x80, 0x100


def free_port():
    """A loopback port nobody listens on (closed again: connecting is refused)."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def wait_port(port, timeout=10):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return True
        except OSError:
            time.sleep(0.05)
    return False


def config(url, spool, window=2, extra_upload="", extra="", timeout="3s"):
    """An agent config that uploads to url through the spool directory."""
    return f"""window:
  seconds: {window}
log:
  level: info
upload:
  url: {url}
  connect_timeout: 1s
  timeout: {timeout}
  retry: {{initial_backoff: 200ms, max_backoff: 1s}}
{extra_upload}spool:
  directory: {spool}
{extra}"""


def wrote(text):
    """{chunk id: (spool file name, bytes)} of the chunks the agent's log says it wrote."""
    out = {}
    for m in WROTE_RE.finditer(text):
        name = os.path.basename(m["path"])
        sm = SPOOL_RE.match(name)
        if sm:
            out[sm["id"]] = (name, int(m["bytes"]))
    return out


def pending(spool):
    """Chunk files in the spool (not rejected/, not temporaries)."""
    try:
        return sorted(n for n in os.listdir(spool) if SPOOL_RE.match(n))
    except FileNotFoundError:
        return []


class SpoolWatch(threading.Thread):
    """Copies every chunk file renamed into the spool into `keep` at once
    (inotify), so its bytes outlive the upload; also tracks the largest the
    spool's pending bytes and file count ever were."""

    def __init__(self, spool, keep):
        super().__init__(daemon=True)
        self.spool, self.keep = spool, keep
        os.makedirs(spool, exist_ok=True)
        os.makedirs(keep, exist_ok=True)
        self.libc = ctypes.CDLL(None, use_errno=True)
        self.fd = self.libc.inotify_init1(os.O_NONBLOCK | os.O_CLOEXEC)
        if self.fd < 0 or self.libc.inotify_add_watch(
                self.fd, spool.encode(), IN_MOVED_TO | IN_CLOSE_WRITE | IN_CREATE) < 0:
            raise fxtest.Stop(f"inotify on {spool}: errno {ctypes.get_errno()}")
        self.max_bytes = 0
        self.max_files = 0
        self.done = threading.Event()
        self.start()

    def grab(self, name):
        # Opened, not hard-linked: the agent refuses to send a chunk with a
        # second link. The open file outlives the agent's delete.
        dst = os.path.join(self.keep, name)
        if SPOOL_RE.match(name) and not os.path.exists(dst):
            try:
                fd = os.open(os.path.join(self.spool, name), os.O_RDONLY | os.O_NOFOLLOW)
            except FileNotFoundError:
                return
            with os.fdopen(fd, "rb") as f:
                data = f.read()
            with open(dst + ".part", "wb") as f:
                f.write(data)
            os.rename(dst + ".part", dst)

    def measure(self):
        total = files = 0
        for n in pending(self.spool):
            try:
                total += os.stat(os.path.join(self.spool, n)).st_size
                files += 1
            except FileNotFoundError:
                pass
        self.max_bytes = max(self.max_bytes, total)
        self.max_files = max(self.max_files, files)

    def run(self):
        while not self.done.is_set():
            r, _, _ = select.select([self.fd], [], [], 0.05)
            if r:
                try:
                    buf = os.read(self.fd, 65536)
                except BlockingIOError:
                    buf = b""
                off = 0
                while off + 16 <= len(buf):
                    _, _, _, n = struct.unpack_from("iIII", buf, off)
                    name = buf[off + 16:off + 16 + n].rstrip(b"\0").decode(errors="replace")
                    off += 16 + n
                    self.grab(name)
            for n in pending(self.spool):  # anything an event overflow missed
                self.grab(n)
            self.measure()

    def stop(self):
        self.done.set()
        self.join()
        os.close(self.fd)

    def kept(self):
        """{chunk id: path of the kept copy}."""
        out = {}
        for n in os.listdir(self.keep):
            m = SPOOL_RE.match(n)
            if m:
                out[m["id"]] = os.path.join(self.keep, n)
        return out


def check_body(t, data, url, dest_dir, written=None, kept=None, daemon=True):
    """A received body: gunzips (its CRC checks) to a profile that passes the
    linter and check_chunk for the target and seq its URL names; byte-identical
    to the spool file (when a copy was kept), else as long as the agent's log
    says it wrote. A --once snapshot (daemon=False) has no meta.fxagent: only
    the linter then. Returns (seq, id, meta.fxagent or None) or None."""
    m = URL_RE.search(url)
    if not t.check(m, f"received {url}: the path does not match the URL template"):
        return None
    seq, cid = int(m["seq"]), m["id"]
    os.makedirs(dest_dir, exist_ok=True)
    # The name check_chunk expects: TARGET-START-SEQ.json.gz.
    path = os.path.join(dest_dir, f"{m['target']}-{m['start']}-{seq:06d}.json.gz")
    with open(path, "wb") as f:
        f.write(data)
    if kept and cid in kept:
        with open(kept[cid], "rb") as f:
            orig = f.read()
        t.check(orig == data, f"{url}: {len(data)} bytes received differ from the "
                f"{len(orig)} bytes of the spool file")
    elif written and cid in written:
        t.check(written[cid][1] == len(data), f"{url}: {len(data)} bytes received, the agent "
                f"wrote {written[cid][1]}")
    prof = t.load(path)
    if not daemon:
        return seq, cid, None
    fx = check_chunk(t, prof, m["target"], seq, path)
    return seq, cid, fx


class Nginx:
    """nginx as the test's own process: PUT stores under root/put/ (dav), POST
    keeps each request body in a file (client_body_in_file_only) named in the
    access log, and root/fleet/ is listed as JSON (autoindex_format json), as
    a collector's tree that fxagent view reads."""

    def __init__(self, t, tag):
        t.require(os.access(NGINX, os.X_OK), f"{NGINX} is not installed (apt-get install "
                  "nginx-light)")
        self.t = t
        self.dir = os.path.join(t.work, tag)
        self.root = os.path.join(self.dir, "root")
        self.bodies = os.path.join(self.dir, "bodies")
        for d in ("root/put", "bodies", "logs", "tmp"):
            os.makedirs(os.path.join(self.dir, d), exist_ok=True)
        self.port = free_port()
        self.access = os.path.join(self.dir, "logs", "access.log")
        self.conf = os.path.join(self.dir, "nginx.conf")
        d = self.dir
        with open(self.conf, "w") as f:
            f.write(f"""daemon off;
master_process on;
worker_processes 1;
user root;
pid {d}/nginx.pid;
error_log {d}/logs/error.log info;
events {{ worker_connections 64; }}
http {{
  log_format up "$msec $request_method $request_uri $status $request_body_file";
  access_log {self.access} up;
  client_body_temp_path {d}/tmp;
  proxy_temp_path {d}/tmp/proxy;
  fastcgi_temp_path {d}/tmp/fastcgi;
  uwsgi_temp_path {d}/tmp/uwsgi;
  scgi_temp_path {d}/tmp/scgi;
  client_max_body_size 64m;
  server {{
    listen 127.0.0.1:{self.port};
    location /put/ {{ dav_methods PUT; create_full_put_path on; root {self.root}; }}
    location /post/ {{
      client_body_in_file_only on;
      client_body_temp_path {self.bodies};
      proxy_pass http://127.0.0.1:{self.port}/ok/;
    }}
    location /ok/ {{ return 200; }}
    location /fleet/ {{ root {self.root}; autoindex on; autoindex_format json; }}
  }}
}}
""")
        self.p = None
        self.start()

    def url(self, path):
        return f"http://127.0.0.1:{self.port}{path}"

    def start(self):
        self.p = self.t.spawn([NGINX, "-c", self.conf, "-p", self.dir + "/"],
                              stderr=open(os.path.join(self.dir, "logs", "stderr"), "a"))
        self.t.require(wait_port(self.port), f"nginx does not listen on {self.port}: "
                       + self.errors())

    def stop(self):
        """SIGTERM to the master (fast shutdown: the workers go too)."""
        if self.p and self.p.poll() is None:
            self.p.send_signal(signal.SIGTERM)
            try:
                self.p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.p.kill()
                self.p.wait()
        self.p = None

    def errors(self):
        try:
            with open(os.path.join(self.dir, "logs", "error.log"), errors="replace") as f:
                return f.read()[-2000:]
        except OSError:
            return ""

    def requests(self):
        """[(time, method, uri, status, body file or None)], oldest first."""
        out = []
        try:
            with open(self.access) as f:
                for line in f:
                    p = line.split()
                    if len(p) == 5:
                        out.append((float(p[0]), p[1], p[2], int(p[3]),
                                    None if p[4] == "-" else p[4]))
        except FileNotFoundError:
            pass
        return out

    def body(self, method, uri, bodyfile):
        """The bytes nginx stored for a request."""
        path = bodyfile if method == "POST" else self.root + uri
        with open(path, "rb") as f:
            return f.read()

#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""fault_server: a small HTTP(S) collector that misbehaves on request, for tests.

Binds 127.0.0.1 only, prints "PORT <n>" on stdout once it listens, and stops by
itself after --max-seconds (default 120), on POST /__quit, or when stdin reaches
end of file with --stdin-eof (hand it a pipe: it dies with its parent).

How a request is answered: the first path segment names a mode, "MODE" or
"MODE:ARG"; the rest of the path is free (chunk names, say):

  ok               200, JSON {"ok": true, "n": N, "sha256": ...}
  status:CODE      CODE with a short text body
  fail-then-ok:N   500 for the first N requests to this exact path, then 200
  500              500
  429[:S]          429, with "Retry-After: S" when S is given
  429-date:S       429, Retry-After as an HTTP date S seconds ahead
  503[:S]          503, with "Retry-After: S" when S is given
  400              400 with the body "bad chunk: ..."
  redirect         302 to /ok/<rest of the path>
  hang             reads the request, never answers (until the server stops)
  slow:MS          waits MS milliseconds, then 200
  close            reads the request, closes the connection without answer
  echo:CODE        CODE, the body is the request's header block (a collector
                   that leaks what it got)
  big:BYTES        200 with a body of BYTES bytes, written until the client
                   stops reading; the log entry's "sent" says how many went

A path whose first segment is no mode takes the next step of --script (a comma
list of modes, "500,500,429:2,ok"), and the --default mode (ok) once the
script is used up.

Control paths (not logged): GET /__log is the JSON list of the requests
received, oldest first (GET /__log?last=N: the last N); each entry has n,
client [ip, port], method, path, mode, headers (lower-case names), body_len,
body_sha256, status (null while hanging or for close), received (when the
request line was read) and answered (just before the answer was written, null
without one), both CLOCK_MONOTONIC seconds as Python's time.monotonic(), so a
test compares them with its own clock and no poller's delay enters a gap. GET /__body/N gives
the body of request N (the newest --max-stored-bytes of bodies are kept).
POST /__reset forgets requests and counters; POST /__quit stops the server.

TLS: --tls-cert and --tls-key serve HTTPS; --tls-client-ca also requires a
client certificate signed by that CA.

From Python tests: `with fault_server.Spawned(["--script", "500,ok"]) as srv:`
gives srv.port, srv.url(path), srv.log() and srv.body(n).
"""

import argparse
import email.utils
import hashlib
import json
import os
import ssl
import subprocess
import sys
import threading
import time
import urllib.parse
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

MODES_WITH_ARG = {"status", "fail-then-ok", "429-date", "slow", "echo", "big"}
MODES_OPTIONAL_ARG = {"429", "503"}
MODES_NO_ARG = {"ok", "500", "400", "redirect", "hang", "close"}
MAX_LOG_ENTRIES = 10000


def parse_mode(text):
    """'429:2' -> ('429', 2); None when @text is not a mode."""
    name, sep, arg = text.partition(":")
    if name in MODES_NO_ARG and not sep:
        return (name, None)
    if name in MODES_OPTIONAL_ARG and not sep:
        return (name, None)
    if (name in MODES_WITH_ARG or name in MODES_OPTIONAL_ARG) and sep and arg.isdigit():
        return (name, int(arg))
    return None


class State:
    def __init__(self, args):
        self.lock = threading.Lock()
        self.stopping = threading.Event()
        self.script = [parse_mode(s) for s in args.script.split(",")] if args.script else []
        if any(m is None for m in self.script):
            raise SystemExit("fault_server: bad --script %r" % args.script)
        self.default = parse_mode(args.default)
        if self.default is None:
            raise SystemExit("fault_server: bad --default %r" % args.default)
        self.max_stored = args.max_stored_bytes
        self.reset()

    def reset(self):
        self.log = []
        self.bodies = {}  # n -> bytes, oldest first (dicts keep order)
        self.stored = 0
        self.counts = {}  # path -> requests seen (fail-then-ok)
        self.next_n = 0
        self.script_pos = 0

    def record(self, entry, body):
        with self.lock:
            entry["n"] = self.next_n
            self.next_n += 1
            self.log.append(entry)
            del self.log[:-MAX_LOG_ENTRIES]
            self.bodies[entry["n"]] = body
            self.stored += len(body)
            while self.stored > self.max_stored and self.bodies:
                old = next(iter(self.bodies))
                self.stored -= len(self.bodies.pop(old))
            return entry["n"]

    def pick(self, first_segment):
        """The mode for a request, and whether it came from the path."""
        mode = parse_mode(first_segment)
        if mode:
            return mode, True
        with self.lock:
            if self.script_pos < len(self.script):
                self.script_pos += 1
                return self.script[self.script_pos - 1], False
        return self.default, False

    def count(self, path):
        with self.lock:
            self.counts[path] = self.counts.get(path, 0) + 1
            return self.counts[path]


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, so connection reuse shows
    server_version = "fault_server/1"

    def log_message(self, fmt, *args):
        if self.server.verbose:
            sys.stderr.write("fault_server: %s\n" % (fmt % args))

    def read_body(self):
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            parts = []
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    return b"".join(parts)
                parts.append(self.rfile.read(size))
                self.rfile.readline()
        return self.rfile.read(int(self.headers.get("Content-Length") or 0))

    def reply(self, code, body=b"", ctype="text/plain", extra=()):
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        for name, value in extra:
            self.send_header(name, value)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def control(self, path, query):
        st = self.server.state
        self.read_body()
        if path == "/__log":
            with st.lock:
                entries = list(st.log)
            last = urllib.parse.parse_qs(query).get("last")
            if last:
                entries = entries[-int(last[0]):] if int(last[0]) else []
            self.reply(200, json.dumps(entries, sort_keys=True).encode(), "application/json")
        elif path.startswith("/__body/"):
            with st.lock:
                body = st.bodies.get(int(path[8:]) if path[8:].isdigit() else -1)
            if body is None:
                self.reply(404, b"no such body (never received, or no longer stored)\n")
            else:
                self.reply(200, body, "application/octet-stream")
        elif path == "/__reset":
            with st.lock:
                st.reset()
            self.reply(200, b"reset\n")
        elif path == "/__quit":
            self.reply(200, b"bye\n")
            threading.Thread(target=self.server.stop, daemon=True).start()
        else:
            self.reply(404, b"unknown control path\n")

    def handle_any(self):
        received = time.monotonic()
        st = self.server.state
        path, _, query = self.path.partition("?")
        if path.startswith("/__"):
            self.control(path, query)
            return
        segments = path.lstrip("/").split("/", 1)
        rest = segments[1] if len(segments) > 1 else ""
        (mode, arg), from_path = st.pick(segments[0])
        body = self.read_body()
        digest = hashlib.sha256(body).hexdigest()
        headers = {}
        for name, value in self.headers.items():
            key = name.lower()
            headers[key] = headers[key] + ", " + value if key in headers else value
        entry = {
            "client": list(self.client_address[:2]),
            "method": self.command,
            "path": self.path,
            "mode": mode if arg is None else "%s:%d" % (mode, arg),
            "headers": headers,
            "body_len": len(body),
            "body_sha256": digest,
            "status": None,
            "received": received,
            "answered": None,
        }
        n = st.record(entry, body)

        if mode == "fail-then-ok":
            mode = "500" if st.count(path) <= arg else "ok"
        if mode == "slow":
            st.stopping.wait(arg / 1000.0)
            mode = "ok"
        if mode == "hang":
            st.stopping.wait()
            self.close_connection = True
            return
        if mode == "close":
            self.close_connection = True
            return
        if mode == "big":
            entry["status"] = 200
            entry["answered"] = time.monotonic()
            entry["sent"] = 0
            self.send_response(200)
            self.send_header("Content-Type", "text/plain")
            self.send_header("Content-Length", str(arg))
            self.end_headers()
            block = b"x" * 65536
            try:
                while entry["sent"] < arg:
                    n = min(len(block), arg - entry["sent"])
                    self.wfile.write(block[:n])
                    entry["sent"] += n
            except OSError:
                pass  # the client stopped reading
            self.close_connection = True
            return

        extra = []
        if mode == "ok":
            code = 200
            text = json.dumps({"ok": True, "n": n, "sha256": digest}).encode()
        elif mode == "status" or mode == "echo":
            code = arg
            text = str(self.headers).encode() if mode == "echo" else b"status %d\n" % arg
        elif mode == "400":
            code = 400
            text = b"bad chunk: fault_server rejects every request on /400\n"
        elif mode == "redirect":
            code = 302
            text = b"moved\n"
            extra.append(("Location", "/ok/" + rest))
        elif mode == "429-date":
            code = 429
            text = b"slow down\n"
            when = email.utils.formatdate(time.time() + arg, usegmt=True)
            extra.append(("Retry-After", when))
        else:  # 500, 429, 503
            code = int(mode)
            text = b"fault_server: %d\n" % code
            if arg is not None:
                extra.append(("Retry-After", str(arg)))
        entry["status"] = code
        entry["answered"] = time.monotonic()
        self.reply(code, text, "application/json" if mode == "ok" else "text/plain", extra)

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = do_HEAD = handle_any


class Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def finish_request(self, request, client_address):
        # The TLS handshake runs here, in the request's thread, so a client
        # that never finishes it cannot stall the accept loop.
        if isinstance(request, ssl.SSLSocket):
            try:
                request.settimeout(10)
                request.do_handshake()
                request.settimeout(None)
            except (ssl.SSLError, OSError) as e:
                if self.verbose:
                    sys.stderr.write("fault_server: TLS handshake failed: %s\n" % e)
                return
        super().finish_request(request, client_address)

    def handle_error(self, request, client_address):
        if self.verbose:
            super().handle_error(request, client_address)


class Spawned:
    """This script in a child process, stopped on exit of the with block."""

    def __init__(self, args=(), python=sys.executable):
        self.proc = subprocess.Popen(
            [python, os.path.abspath(__file__), "--stdin-eof"] + list(args),
            stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        line = self.proc.stdout.readline().decode()
        if not line.startswith("PORT "):
            self.stop()
            raise RuntimeError("fault_server did not start: %r" % line)
        self.port = int(line.split()[1])

    def url(self, path="/", scheme="http"):
        return "%s://127.0.0.1:%d%s" % (scheme, self.port, path)

    def log(self, last=None):
        q = "" if last is None else "?last=%d" % last
        with urllib.request.urlopen(self.url("/__log" + q), timeout=10) as r:
            return json.load(r)

    def body(self, n):
        with urllib.request.urlopen(self.url("/__body/%d" % n), timeout=10) as r:
            return r.read()

    def stop(self):
        if self.proc.poll() is None:
            self.proc.stdin.close()
            self.proc.terminate()
        self.proc.wait()
        self.proc.stdout.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--port", type=int, default=0, help="0: any free port")
    ap.add_argument("--max-seconds", type=float, default=120)
    ap.add_argument("--script", default="", help="modes for requests without one")
    ap.add_argument("--default", default="ok", help="mode once the script is used up")
    ap.add_argument("--max-stored-bytes", type=int, default=64 << 20)
    ap.add_argument("--stdin-eof", action="store_true", help="stop when stdin closes")
    ap.add_argument("--tls-cert")
    ap.add_argument("--tls-key")
    ap.add_argument("--tls-client-ca")
    ap.add_argument("--verbose", action="store_true")
    args = ap.parse_args()

    srv = Server(("127.0.0.1", args.port), Handler)
    srv.state = State(args)
    srv.verbose = args.verbose
    if args.tls_cert:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(args.tls_cert, args.tls_key)
        if args.tls_client_ca:
            ctx.verify_mode = ssl.CERT_REQUIRED
            ctx.load_verify_locations(args.tls_client_ca)
        srv.socket = ctx.wrap_socket(srv.socket, server_side=True,
                                     do_handshake_on_connect=False)

    def stop():
        srv.state.stopping.set()
        srv.shutdown()

    srv.stop = stop

    timer = threading.Timer(args.max_seconds, stop)
    timer.daemon = True
    timer.start()
    if args.stdin_eof:
        def watch_stdin():
            while os.read(0, 4096):
                pass
            stop()
        threading.Thread(target=watch_stdin, daemon=True).start()

    print("PORT %d" % srv.server_address[1], flush=True)
    try:
        srv.serve_forever(poll_interval=0.2)
    finally:
        srv.state.stopping.set()
        srv.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main())

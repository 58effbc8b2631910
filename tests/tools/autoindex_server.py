#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""autoindex_server: serves a directory the way nginx does with `autoindex on;
autoindex_format json;`, for the tests of fxagent view's HTTP source.

Binds 127.0.0.1 only, prints "PORT <n>" on stdout once it listens, and stops
when stdin reaches end of file (hand it a pipe: it dies with its parent) or
after --max-seconds.

  GET /dir/      the JSON listing of ROOT/dir: [{"name", "type", "mtime",
                 "size" (files only)}], dot-files left out, like nginx
  GET /dir       301 to /dir/, like nginx
  GET /file      the file's bytes; 404 when missing
A directory holding a file ".listing" is answered with that file's bytes
instead of its listing (a broken listing); one holding ".redirect", with a
302 to the URL that file holds.
"""

import argparse
import email.utils
import json
import os
import sys
import threading
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def make_handler(root):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, fmt, *args):
            pass

        def send(self, code, body, ctype="application/octet-stream", extra=()):
            self.send_response(code)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(body)))
            for k, v in extra:
                self.send_header(k, v)
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self):
            rel = urllib.parse.unquote(urllib.parse.urlsplit(self.path).path)
            path = os.path.normpath(os.path.join(root, rel.lstrip("/")))
            if not (path == root or path.startswith(root + os.sep)):
                return self.send(403, b"forbidden\n", "text/plain")
            if os.path.isdir(path):
                if not rel.endswith("/"):
                    return self.send(301, b"", extra=[("Location", self.path + "/")])
                return self.listing(path)
            if not os.path.isfile(path):
                return self.send(404, b"not found\n", "text/plain")
            with open(path, "rb") as f:
                self.send(200, f.read())

        def listing(self, path):
            special = os.path.join(path, ".redirect")
            if os.path.exists(special):
                with open(special) as f:
                    return self.send(302, b"", extra=[("Location", f.read().strip())])
            special = os.path.join(path, ".listing")
            if os.path.exists(special):
                with open(special, "rb") as f:
                    return self.send(200, f.read(), "application/json")
            out = []
            for name in sorted(os.listdir(path)):
                if name.startswith("."):
                    continue
                st = os.stat(os.path.join(path, name))
                e = {"name": name, "mtime": email.utils.formatdate(st.st_mtime, usegmt=True)}
                if os.path.isdir(os.path.join(path, name)):
                    e["type"] = "directory"
                else:
                    e["type"] = "file"
                    e["size"] = st.st_size
                out.append(e)
            self.send(200, json.dumps(out).encode(), "application/json")

    return Handler


class Server(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request, client_address):
        # A client that stops reading (a test's callback ending the reading)
        # is no error of the server's.
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("root")
    ap.add_argument("--max-seconds", type=float, default=120)
    args = ap.parse_args()
    srv = Server(("127.0.0.1", 0), make_handler(os.path.realpath(args.root)))

    def stop():
        threading.Thread(target=srv.shutdown, daemon=True).start()

    timer = threading.Timer(args.max_seconds, stop)
    timer.daemon = True
    timer.start()

    def watch_stdin():
        while sys.stdin.buffer.read(4096):
            pass
        stop()

    threading.Thread(target=watch_stdin, daemon=True).start()
    print("PORT %d" % srv.server_address[1], flush=True)
    srv.serve_forever(poll_interval=0.2)


if __name__ == "__main__":
    main()

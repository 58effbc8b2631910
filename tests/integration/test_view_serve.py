# SPDX-License-Identifier: MIT
"""`fxagent view --serve` and `fxagent --once --serve`: the profile for the
Firefox Profiler from a loopback server, as samply serves its recordings.

- `--serve 127.0.0.1:0`: the printed URL is under an unguessable prefix and
  the printed link is profiler.firefox.com's from-url form of it; a GET with
  `Origin: https://profiler.firefox.com` gets the very profile `--output`
  writes, with `Access-Control-Allow-Origin`; a preflight (OPTIONS) gets 204
  with the methods and the asked headers; the root, the file name without the
  prefix and a prefix one letter off get 404; Ctrl-C (SIGINT) ends it with 0;
- `--serve` alone takes a port in 3000-3099; a port that is taken fails at
  once with exit 1, naming the address;
- `fxagent --once -d 1s -o FILE --serve :0` records, writes FILE, then serves
  exactly FILE's bytes.
"""

import gzip
import os
import re
import signal
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request

import fxtest

ORIGIN = "https://profiler.firefox.com"


def start(t, cmd, tag):
    """Runs cmd until it prints the link; returns (process, url, link)."""
    log = open(os.path.join(t.work, tag + ".out"), "w+")
    p = t.spawn(cmd, stdout=log, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + fxtest.scaled(60)
    while time.monotonic() < deadline:
        log.seek(0)
        text = log.read()
        url = re.search(r"Serving the profile at (\S+)", text)
        link = re.search(r"Firefox Profiler: (\S+)", text)
        if url and link:
            return p, url.group(1), link.group(1)
        t.require(p.poll() is None, f"{tag}: exited {p.returncode} before serving: {text}")
        time.sleep(0.05)
    raise fxtest.Stop(f"{tag}: no URL printed within the time: {text}")


def request(url, method="GET", headers=None):
    """(status, headers, body) of one request."""
    req = urllib.request.Request(url, method=method, headers=headers or {})
    try:
        with urllib.request.urlopen(req, timeout=fxtest.scaled(10)) as r:
            return r.status, r.headers, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.headers, e.read()


def stop(t, p, tag):
    p.send_signal(signal.SIGINT)
    try:
        rc = p.wait(timeout=fxtest.scaled(10))
    except subprocess.TimeoutExpired:
        p.kill()
        rc = p.wait()
        t.check(False, f"{tag}: still serving 10 s after SIGINT")
    t.check(rc == 0, f"{tag}: exit {rc} after SIGINT")


def check_served(t, url, link, want, tag):
    u = urllib.parse.urlsplit(url)
    parts = u.path.strip("/").split("/")
    t.check(u.hostname == "127.0.0.1" and len(parts) == 2 and len(parts[0]) >= 26,
            f"{tag}: {url} is not under a long random prefix on 127.0.0.1")
    t.check(link == f"{ORIGIN}/from-url/{urllib.parse.quote(url, safe='')}/",
            f"{tag}: link {link} is not the from-url form of {url}")
    status, headers, body = request(url, headers={"Origin": ORIGIN})
    t.check(status == 200 and body == want,
            f"{tag}: GET gave {status}, {len(body)} bytes; want 200, {len(want)} bytes")
    t.check(headers.get("Access-Control-Allow-Origin") in ("*", ORIGIN),
            f"{tag}: Access-Control-Allow-Origin {headers.get('Access-Control-Allow-Origin')}")
    status, headers, body = request(url, "OPTIONS", {
        "Origin": ORIGIN, "Access-Control-Request-Method": "GET",
        "Access-Control-Request-Headers": "x-fx-test"})
    allow = headers.get("Access-Control-Allow-Methods", "")
    t.check(status == 204 and "GET" in allow and
            "x-fx-test" in headers.get("Access-Control-Allow-Headers", "").lower() and
            headers.get("Access-Control-Allow-Origin"),
            f"{tag}: preflight gave {status}, methods {allow!r}, headers "
            f"{headers.get('Access-Control-Allow-Headers')!r}")
    base = f"{u.scheme}://{u.netloc}"
    off = parts[0][:-1] + ("a" if parts[0][-1] != "a" else "b")
    for path in ("/", "/" + parts[1], f"/{off}/{parts[1]}", f"/{parts[0]}/other.json.gz"):
        status, _, _ = request(base + path)
        t.check(status == 404, f"{tag}: {path} gave {status}, not 404")


def body(t):
    t.workload("fx-hot-ab", 60)
    once = os.path.join(t.work, "once.json.gz")
    p, url, link = start(t, [t.agent, "--once", "-d", "1s", "-o", once, "--serve", ":0"],
                         "once-serve")
    with open(once, "rb") as f:
        want = f.read()
    check_served(t, url, link, want, "--once --serve")
    stop(t, p, "--once --serve")

    merged = os.path.join(t.work, "merged.json.gz")
    r = subprocess.run([t.agent, "view", once, "-o", merged], capture_output=True, text=True,
                       timeout=fxtest.scaled(60))
    t.check(r.returncode == 0, f"view -o: exit {r.returncode}: {r.stderr}")
    p, url, link = start(t, [t.agent, "view", once, "--serve", "127.0.0.1:0"], "view-serve")
    with open(merged, "rb") as f:
        want = gzip.decompress(f.read())
    status, _, body = request(url)
    t.check(status == 200 and gzip.decompress(body) == want,
            "view --serve does not serve what view --output writes")
    check_served(t, url, link, body, "view --serve")
    stop(t, p, "view --serve")

    p, url, _ = start(t, [t.agent, "view", once, "--serve"], "default-port")
    port = urllib.parse.urlsplit(url).port
    t.check(3000 <= port <= 3099, f"--serve took port {port}, not one in 3000-3099")
    # that port is now taken: a second server on it fails at once
    r = subprocess.run([t.agent, "view", once, "--serve", f"127.0.0.1:{port}"],
                       capture_output=True, text=True, timeout=fxtest.scaled(30))
    t.check(r.returncode == 1 and f"127.0.0.1:{port}" in r.stderr,
            f"a taken port: exit {r.returncode}, {r.stderr.strip()}")
    stop(t, p, "default port")


if __name__ == "__main__":
    fxtest.main(body)

# SPDX-License-Identifier: MIT
"""HTTPS uploads check the collector's certificate.

A test CA and a server certificate for 127.0.0.1 (openssl); fault_server.py
serves HTTPS with it. `fxagent --once --config FILE` (fx-hot-ab, 1 s):
1. with upload.ca_file: the snapshot arrives, byte-identical to the spool file.
2. without it (the system's CAs do not know the test CA): no request reaches the
   server, the log says the certificate could not be verified, the upload is
   retried (the process says it waits in the spool) and the chunk stays there.
"""

import json
import os
import re
import ssl
import subprocess
import urllib.request

import fxtest
from fxupload import SpoolWatch, URL_TAIL, check_body, config, fault_server, pending


def openssl(t, *args):
    p = subprocess.run(["openssl", *args], capture_output=True, text=True, timeout=60)
    t.require(p.returncode == 0, f"openssl {' '.join(args)}: {p.stderr.strip()}")


def make_certs(t):
    d = os.path.join(t.work, "pki")
    os.makedirs(d)
    ca_key, ca = os.path.join(d, "ca.key"), os.path.join(d, "ca.pem")
    key, csr, cert = (os.path.join(d, n) for n in ("srv.key", "srv.csr", "srv.pem"))
    ext = os.path.join(d, "srv.ext")
    openssl(t, "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", ca_key, "-out", ca,
            "-days", "2", "-subj", "/CN=fxagent test CA")
    openssl(t, "req", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", csr,
            "-subj", "/CN=127.0.0.1")
    with open(ext, "w") as f:
        f.write("subjectAltName=IP:127.0.0.1\nbasicConstraints=CA:FALSE\n"
                "extendedKeyUsage=serverAuth\n")
    openssl(t, "x509", "-req", "-in", csr, "-CA", ca, "-CAkey", ca_key, "-CAcreateserial",
            "-out", cert, "-days", "2", "-extfile", ext)
    return ca, cert, key


def fetch(srv, ca, path):
    """A control path of the HTTPS fault_server (its log() and body() speak HTTP)."""
    ctx = ssl.create_default_context(cafile=ca)
    with urllib.request.urlopen(srv.url(path, "https"), timeout=10, context=ctx) as r:
        return r.read()


def once(t, srv, ca, hot, tag, extra_upload):
    spool = os.path.join(t.work, tag + "-spool")
    path = os.path.join(t.work, tag + ".yaml")
    with open(path, "w") as f:
        f.write(config(srv.url(f"/ok/{tag}/" + URL_TAIL, "https"), spool, 1, extra_upload,
                       timeout="1s"))
    watch = SpoolWatch(spool, os.path.join(t.work, tag + "-kept"))
    p = t.run_agent("--once", "--config", path, "--duration", "1s", "--pid", hot.pid)
    watch.stop()
    t.save(tag + ".agent.log", p.stdout + p.stderr)
    got = [e for e in json.loads(fetch(srv, ca, "/__log"))
           if e["path"].startswith(f"/ok/{tag}/")]
    return p, spool, watch, got


def body(t):
    ca, cert, key = make_certs(t)
    with fault_server.Spawned(["--tls-cert", cert, "--tls-key", key,
                               "--max-seconds", "120"]) as srv:
        try:
            run(t, srv, ca)
        finally:
            t.kill_processes()


def run(t, srv, ca):
    hot = t.workload("fx-hot-ab", 30)

    p, spool, watch, got = once(t, srv, ca, hot, "withca", f"  ca_file: {ca}\n")
    t.note(f"with ca_file: exit {p.returncode}, {len(got)} request(s)")
    t.check(p.returncode == 0, f"with ca_file: fxagent --once exited {p.returncode}: "
            f"{p.stderr[-2000:]}")
    t.check(len(got) == 1 and got[0]["status"] == 200,
            f"with ca_file: requests {[(e['path'], e['status']) for e in got]}, want one 200")
    if got:
        check_body(t, fetch(srv, ca, "/__body/%d" % got[0]["n"]), got[0]["path"],
                   os.path.join(t.work, "withca-received"), kept=watch.kept(), daemon=False)
    t.check(not pending(spool), f"with ca_file: left in the spool: {pending(spool)}")

    p, spool, watch, got = once(t, srv, ca, hot, "noca", "")
    fails = len(re.findall(r"cannot upload chunk .*, retrying", p.stderr))
    t.note(f"without ca_file: exit {p.returncode}, {len(got)} request(s), {fails} failure "
           f"line(s); left in the spool: {pending(spool)}")
    t.check(not got, f"without ca_file: {len(got)} requests reached the server")
    t.check(re.search(r"certificate", p.stderr, re.I) and
            re.search(r"verif", p.stderr, re.I),
            f"without ca_file: the log does not say the certificate was not verified: "
            f"{p.stderr[-1500:]}")
    t.check(p.returncode != 0 and "waits in" in p.stderr,
            f"without ca_file: --once exited {p.returncode} without saying the chunk waits "
            f"in the spool")
    t.check(len(pending(spool)) == 1, f"without ca_file: the chunk should wait in the spool: "
            f"{pending(spool)}")


fxtest.main(body)

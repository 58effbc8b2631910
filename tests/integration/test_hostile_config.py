# SPDX-License-Identifier: MIT
"""Hostile files and bad input in the config, as a user sees them:
the exit status and the one line on stderr, which names the key, the path and
what is wrong (and the chmod that fixes a mode).

- the config file itself: a FIFO is refused within seconds (a hang fails the
  test by its timeout), as are a directory and a file others may write;
- every path the config names is checked by --check-config, so that "ok" means
  the agent starts: upload.bearer_token_file missing, a FIFO, a directory or
  readable by others; spool.directory writable by others; output.directory a
  regular file; ca_file not a certificate; key_file garbage, encrypted or not
  cert_file's key; a good TLS set passes;
- the agent in daemon mode refuses to start, fast and with the same line, on a
  spool directory others may write, and on an output.directory that is a file
  (it said "Permission denied" before);
- a SIGHUP reload to a config whose token file is missing is refused and the
  agent goes on with the old config (chunks in the old directory, none in the
  new one, exit 0 on SIGTERM);
- the parser's messages: a control character in a label value (top level and
  a target's) says so and where, not that it is too long; metrics.textfile
  must end in .prom; a number with a leading zero (octal in YAML 1.1) is
  refused with both readings.
"""

import os
import signal
import subprocess
import time

import fxtest
from fxdaemon import Daemon

# --check-config reads a few small files: seconds are plenty, and a FIFO
# that blocks the open or the read must fail the test, not hang it.
CHECK_TIMEOUT = 10
# The agent refuses a bad start before it opens a perf event.
START_SECONDS = 5


def write(path, text, mode=0o644):
    with open(path, "w") as f:
        f.write(text)
    os.chmod(path, mode)
    return path


def check_config(t, tag, text, *want, rc=2, path=None):
    """--check-config on `text` (or on `path` as it is): exit `rc` and, for a
    refusal, one line on stderr holding every string of `want`."""
    if path is None:
        path = write(os.path.join(t.work, f"{tag}.yaml"), text)
    started = time.monotonic()
    p = t.run_agent("--check-config", path, timeout=CHECK_TIMEOUT)
    took = time.monotonic() - started
    err = p.stderr.strip()
    t.note(f"{tag}: exit {p.returncode} in {took:.1f} s: {err}")
    t.check(p.returncode == rc, f"{tag}: --check-config exited {p.returncode}, want {rc}: "
            f"{err!r}")
    if rc == 0:
        return p
    t.check(len(err.splitlines()) == 1, f"{tag}: want one line on stderr, got {err!r}")
    # The log writes a backslash as \\ (so that no name can forge a line);
    # the config's own escapes (\x09) come out doubled.
    text = err.replace("\\\\", "\\")
    for w in want:
        t.check(w in text, f"{tag}: the message {err!r} does not say {w!r}")
    return p


def upload(t, extra, spool=None):
    """An upload section to a file:// collector in the work directory."""
    spool = spool or os.path.join(t.work, "spool")
    return (f"upload:\n  url: file://{t.work}/collector/{{id}}\n{extra}"
            f"spool:\n  directory: {spool}\n")


def config_file(t):
    fifo = os.path.join(t.work, "fifo.yaml")
    os.mkfifo(fifo, 0o644)
    check_config(t, "config-fifo", None, f"config file '{fifo}' is a FIFO, not a regular file",
                 path=fifo)
    # The daemon reads it the same way: no hang at start either.
    p = t.run_agent("--config", fifo, timeout=CHECK_TIMEOUT)
    t.check(p.returncode == 2 and "is a FIFO" in p.stderr,
            f"--config FIFO: exit {p.returncode}, said {p.stderr.strip()!r}")

    d = os.path.join(t.work, "config-dir.yaml")
    os.mkdir(d)
    check_config(t, "config-dir", None, f"config file '{d}' is a directory, not a regular file",
                 path=d)

    shared = write(os.path.join(t.work, "shared.yaml"), "window:\n  seconds: 5\n", 0o666)
    check_config(t, "config-writable", None,
                 f"config file '{shared}' is writable by others (mode 0666, owner root:root); "
                 f"run: chmod go-w '{shared}'", path=shared)
    os.chmod(shared, 0o644)
    check_config(t, "config-0644", None, rc=0, path=shared)


def token_file(t):
    tok = os.path.join(t.work, "token")
    key = "upload.bearer_token_file"
    check_config(t, "token-missing", upload(t, f"  bearer_token_file: {tok}\n"),
                 f"{key} '{tok}' does not exist")
    os.mkfifo(tok, 0o600)
    check_config(t, "token-fifo", upload(t, f"  bearer_token_file: {tok}\n"),
                 f"{key} '{tok}' is a FIFO, not a regular file")
    os.unlink(tok)
    os.mkdir(tok)
    check_config(t, "token-dir", upload(t, f"  bearer_token_file: {tok}\n"),
                 f"{key} '{tok}' is a directory, not a regular file")
    os.rmdir(tok)
    write(tok, "fxtok-123\n", 0o644)
    check_config(t, "token-0644", upload(t, f"  bearer_token_file: {tok}\n"),
                 f"{key} '{tok}' is readable by others (mode 0644, owner root:root); "
                 f"run: chmod o-rwx '{tok}'")
    write(tok, "\n", 0o600)
    check_config(t, "token-empty", upload(t, f"  bearer_token_file: {tok}\n"),
                 f"{key} '{tok}' is empty")
    write(tok, "fxtok-123\n", 0o600)
    check_config(t, "token-good", upload(t, f"  bearer_token_file: {tok}\n"), rc=0)


def directories(t):
    spool = os.path.join(t.work, "spool-0777")
    os.mkdir(spool)
    os.chmod(spool, 0o777)
    spool_msg = (f"spool.directory '{spool}' is writable by others (mode 0777, owner "
                 f"root:root); run: chmod go-w '{spool}'")
    check_config(t, "spool-0777", upload(t, "", spool), spool_msg)

    out = write(os.path.join(t.work, "output-file"), "")
    out_msg = f"output.directory '{out}' is a regular file, not a directory"
    check_config(t, "output-file", f"output:\n  directory: {out}\n", out_msg)

    # The daemon refuses to start on them, at once, with the same line.
    for tag, text, msg in (("spool-0777", upload(t, "", spool), spool_msg),
                           ("output-file", f"output:\n  directory: {out}\n", out_msg)):
        path = write(os.path.join(t.work, f"start-{tag}.yaml"), text)
        started = time.monotonic()
        p = t.run_agent("--config", path, timeout=20)
        took = time.monotonic() - started
        t.note(f"start {tag}: exit {p.returncode} in {took:.1f} s: {p.stderr.strip()}")
        t.check(p.returncode not in (0, None) and msg in p.stderr,
                f"start with {tag}: exit {p.returncode}, said {p.stderr.strip()!r}, want "
                f"{msg!r}")
        t.check("Permission denied" not in p.stderr,
                f"start with {tag}: 'Permission denied' misleads: {p.stderr.strip()!r}")
        t.check(took < fxtest.scaled(START_SECONDS),
                f"start with {tag}: refused only after {took:.1f} s")


def openssl(t, *args):
    p = subprocess.run(["openssl", *args], capture_output=True, text=True, timeout=60)
    t.require(p.returncode == 0, f"openssl {' '.join(args)}: {p.stderr.strip()}")


def tls_files(t):
    d = os.path.join(t.work, "tls")
    os.mkdir(d)
    ca, key, other_key, other = (os.path.join(d, n) for n in
                                 ("ca.pem", "client.key", "other.key", "other.pem"))
    for k, c, cn in ((key, ca, "fxtest-client"), (other_key, other, "fxtest-other")):
        openssl(t, "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", k, "-out", c,
                "-days", "2", "-subj", f"/CN={cn}")
        os.chmod(k, 0o600)
    good = f"  ca_file: {ca}\n  cert_file: {ca}\n  key_file: {key}\n"
    check_config(t, "tls-good", upload(t, good), rc=0)

    not_ca = write(os.path.join(d, "not-ca.pem"), "this is not a certificate\n")
    check_config(t, "ca-garbage", upload(t, f"  ca_file: {not_ca}\n"),
                 f"upload.ca_file '{not_ca}' is not a file of PEM certificates "
                 "(no \"-----BEGIN CERTIFICATE-----\" block)")
    garbage = write(os.path.join(d, "garbage.key"), "garbage\n", 0o600)
    check_config(t, "key-garbage", upload(t, f"  cert_file: {ca}\n  key_file: {garbage}\n"),
                 f"upload.key_file '{garbage}' is not a PEM private key "
                 "(no \"-----BEGIN PRIVATE KEY-----\" block)")
    check_config(t, "key-mismatch", upload(t, f"  cert_file: {ca}\n  key_file: {other_key}\n"),
                 f"upload.key_file '{other_key}' is not the key of upload.cert_file '{ca}'")
    enc = os.path.join(d, "enc.key")
    openssl(t, "pkey", "-in", key, "-aes256", "-passout", "pass:x", "-out", enc)
    os.chmod(enc, 0o600)
    check_config(t, "key-encrypted", upload(t, f"  cert_file: {ca}\n  key_file: {enc}\n"),
                 f"upload.key_file '{enc}' is encrypted and fxagent has no passphrase")
    os.chmod(key, 0o644)
    check_config(t, "key-0644", upload(t, good),
                 f"upload.key_file '{key}' is readable by others (mode 0644, owner root:root); "
                 f"run: chmod o-rwx '{key}'")
    os.chmod(key, 0o600)


def parser_messages(t):
    """The parser's messages: FILE:LINE:COL: KEY: what is wrong."""
    def path(tag):
        return os.path.join(t.work, f"{tag}.yaml")

    p = check_config(t, "label-tab", "labels:\n  env: \"a\\tb\"\n",
                     f"{path('label-tab')}:2:8: labels.env: expected a string without control "
                     "characters, got \"a\\x09b\" (the control character \\x09 at byte 2)")
    t.check("at most 256 bytes" not in p.stderr,
            f"label-tab: still speaks of the length: {p.stderr.strip()!r}")
    check_config(t, "target-label-ctrl",
                 "targets:\n  - name: web\n    pid: 1\n    labels:\n      tier: \"a\\x01b\"\n",
                 f"{path('target-label-ctrl')}:5:13: targets[0].labels.tier: expected a string "
                 "without control characters, got \"a\\x01b\" (the control character \\x01 at "
                 "byte 2)")
    check_config(t, "metrics-txt", "metrics:\n  textfile: /var/lib/node-exporter/fxagent.txt\n",
                 f"{path('metrics-txt')}:2:13: metrics.textfile: expected a file name ending "
                 "in .prom (node_exporter's textfile collector reads only *.prom files), got "
                 "\"/var/lib/node-exporter/fxagent.txt\"")
    check_config(t, "leading-zero", "window:\n  seconds: 010\n",
                 f"{path('leading-zero')}:2:12: window.seconds: expected a whole number from 1 "
                 "to 3600, got 010 (a leading zero is octal in YAML 1.1; write 10 or 8)")
    check_config(t, "leading-zero-duration", "upload:\n  timeout: 010s\n",
                 f"{path('leading-zero-duration')}:2:12: upload.timeout: ",
                 "got 010s (a leading zero is octal in YAML 1.1; write 10s or 8s)")
    check_config(t, "zero", "window:\n  seconds: 5\nspool:\n  max_age: 0\n", rc=0)


def reload_refused(t):
    """A reload to a config with a missing token file: refused, the old one runs on."""
    d = Daemon(t, "reload", "window:\n  seconds: 1\n")
    d.wait_started()
    old_dir = d.out

    def count():
        return sum(len(v) for v in d.chunks(running=True).values())

    t.require(fxtest.wait_for(lambda: count() >= 1, 10),
              f"no chunk in {old_dir} before the reload; log: {d.text()[-1500:]}")
    new_dir = os.path.join(d.dir, "new-chunks")
    tok = os.path.join(t.work, "reload-token-missing")
    write(d.config, f"window:\n  seconds: 1\noutput:\n  directory: {new_dir}\n" +
          upload(t, f"  bearer_token_file: {tok}\n"))
    before = count()
    d.p.send_signal(signal.SIGHUP)
    msg = f"upload.bearer_token_file '{tok}' does not exist"
    said = fxtest.wait_for(lambda: msg in d.text() and "reload failed" in d.text(), 10)
    t.check(said, f"the refused reload did not say {msg!r} and 'reload failed': "
            f"{d.text()[-1500:]}")
    # Two more windows on the old config.
    more = fxtest.wait_for(lambda: count() >= before + 2, 10)
    alive = d.p.poll() is None
    t.check(alive, f"fxagent exited {d.p.returncode} after a refused reload: "
            f"{d.text()[-1500:]}")
    t.check(more, f"no new chunks in {old_dir} after the refused reload ({count()} after "
            f"{before})")
    t.check(not os.path.exists(new_dir), f"the refused config's {new_dir} was used")
    if alive:
        rc = d.stop(signal.SIGTERM)
        t.check(rc == 0, f"fxagent exited {rc} on SIGTERM after a refused reload")


def body(t):
    config_file(t)
    token_file(t)
    directories(t)
    tls_files(t)
    parser_messages(t)
    reload_refused(t)


fxtest.main(body)

# SPDX-License-Identifier: MIT
"""The Debian package under a real systemd.

debootstrap makes a bookworm tree (minbase, systemd, dbus and the .deb's
runtime dependencies), the .deb of FX_DEB_DIR is installed in it with dpkg,
and systemd-nspawn boots it. Inside:
  - fx-busy.service runs fx-hot-ab (CPU in hot_a and hot_b) from a copy under
    /home, mode 0700, deleted once started: so the agent, as user fxagent
    with ProtectHome=, symbolizes it only through /proc/PID/map_files, which
    takes CAP_SYS_PTRACE, CAP_CHECKPOINT_RESTORE and CAP_DAC_READ_SEARCH;
  - fx-sys.service loops dd with 1-byte blocks (CPU in the kernel): its kernel
    frames are named only with CAP_SYSLOG and a readable /proc/kallsyms;
  - the agent (2 s windows, targets busy and sys) uploads to a closed loopback
    port, so every chunk it writes stays in the spool: no profile lost; it
    writes its metrics file under /var/lib/fxagent.
Checked: the service runs as fxagent with exactly the unit's capabilities;
the chunks; a reload with a broken config fails and the agent keeps running;
SIGHUP with the broken config is logged with FILE:LINE:COL and the agent keeps
running; a good config reloads; a restarted fx-busy is still profiled; stop
writes the partial window; the journal entries carry TARGET= and CHUNK_ID=;
dpkg --purge removes the unit, the config and /var/lib/fxagent, not the user.
"""

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import time

import fxsystemd
import fxtest
from fxupload import SPOOL_RE

WINDOW_S = 2
# What the unit grants, each one verified to be needed (see the unit's comments).
CAPS = ["CAP_PERFMON", "CAP_SYSLOG", "CAP_SYS_PTRACE", "CAP_CHECKPOINT_RESTORE",
        "CAP_DAC_READ_SEARCH"]
UNIT_LIMITS = {"Max open files": 65536, "Max locked memory": 512 * 1024 * 1024}
# The container's bounding set lacks these by default; the agent needs them.
NSPAWN_CAPS = ["CAP_PERFMON", "CAP_SYSLOG", "CAP_CHECKPOINT_RESTORE"]
CONF = "/etc/fxagent/fxagent.yaml"
SPOOL = "/var/lib/fxagent/spool"
METRICS = "/var/lib/fxagent/fxagent.prom"

FX_BUSY = """\
[Unit]
Description=fx-hot-ab: CPU in hot_a and hot_b (a deleted copy, under /home, mode 0700)

[Service]
# Type=exec: the copy is deleted only once the workload runs it.
Type=exec
ExecStartPre=/bin/install -m 0700 /usr/local/lib/fxtest/fx-hot-ab /home/busy/fx-hot-ab
# 86400 s: the longest run a workload takes (tests/workloads/workload.h).
ExecStart=/home/busy/fx-hot-ab 86400
ExecStartPost=/bin/rm /home/busy/fx-hot-ab

[Install]
WantedBy=multi-user.target
"""

FX_SYS = """\
[Unit]
Description=dd with 1-byte blocks: CPU in the kernel's read and write

[Service]
ExecStart=/bin/sh -c 'while :; do \\
    dd if=/dev/zero of=/dev/null bs=1 count=100000 status=none; sleep 0.2; done'

[Install]
WantedBy=multi-user.target
"""


def config(port, extra_busy=""):
    return f"""\
window:
  seconds: {WINDOW_S}
targets:
  - name: busy
    systemd_unit: fx-busy.service
{extra_busy}  - name: sys
    systemd_unit: fx-sys.service
log:
  level: info              # the "wrote" lines carry TARGET= and CHUNK_ID=
upload:
  url: http://127.0.0.1:{port}/{{target}}/{{id}}
metrics:
  textfile: {METRICS}
"""


class Run:
    """One boot of the tree, and what the checks share."""

    def __init__(self, t, tree):
        self.t = t
        self.tree = tree
        self.started = time.monotonic()
        self.ct = None
        # The collector's port: bound but not listening, so connections are
        # refused and no one else can take it while the test runs (the
        # container shares the host's network).
        self.closed = socket.socket()
        self.closed.bind(("127.0.0.1", 0))
        self.port = self.closed.getsockname()[1]

    def step(self, what):
        self.t.note(f"[{time.monotonic() - self.started:6.1f} s] {what}")

    def path(self, p):
        return os.path.join(self.tree, p.lstrip("/"))

    def write(self, p, text, mode=0o644):
        with open(self.path(p), "w") as f:
            f.write(text)
        os.chmod(self.path(p), mode)

    # --- the spool, read from the host ---
    def chunks(self, target=None):
        """Chunks in the spool, by seq: dicts of the name's fields and path."""
        d = self.path(SPOOL)
        out = []
        for name in os.listdir(d) if os.path.isdir(d) else []:
            m = SPOOL_RE.match(name)
            if m and (target is None or m["target"] == target):
                c = {k: (int(v) if k in ("start", "end", "seq") else v)
                     for k, v in m.groupdict().items()}
                c["path"] = os.path.join(d, name)
                out.append(c)
        return sorted(out, key=lambda c: (c["seq"], c["target"]))

    def wait_chunk(self, target, pred, timeout, what):
        """The first chunk of target (by seq) for which pred(chunk) holds."""
        deadline = time.monotonic() + timeout
        while True:
            for c in self.chunks(target):
                if pred(c):
                    return c
            if time.monotonic() > deadline:
                raise fxtest.Stop(f"no {what} within {timeout} s; spool: "
                                  f"{[os.path.basename(c['path']) for c in self.chunks()]}")
            time.sleep(0.2)

    def busy_samples(self, pid, pred, what, least=30):
        """(samples, hot_a %, hot_b %, chunks) of fx-busy's pid over the chunks of
        target busy for which pred holds, in seq order, until they hold `least`
        samples: a whole window has about 200 on a quiet machine, a handful
        when the container shares half a CPU, and a share of 4 samples says
        nothing. Stops at what it has after 30 s (scaled) of windows."""
        deadline = time.monotonic() + fxtest.scaled(30)
        seen, n, wa, wb = set(), 0, 0.0, 0.0
        while n < least:
            for c in self.chunks("busy"):
                if c["seq"] in seen or not pred(c):
                    continue
                seen.add(c["seq"])
                k, a, b = hot_shares(self.load(c), pid)
                n, wa, wb = n + k, wa + a * k, wb + b * k
            if n >= least or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        if not seen:
            raise fxtest.Stop(f"no {what} within {fxtest.scaled(30):.0f} s")
        return n, wa / max(n, 1), wb / max(n, 1), sorted(seen)

    def load(self, c):
        """Lint and read a chunk (a copy kept in the test's directory)."""
        keep = os.path.join(self.t.work, "chunks")
        os.makedirs(keep, exist_ok=True)
        dst = os.path.join(keep, os.path.basename(c["path"]))
        shutil.copy(c["path"], dst)
        return self.t.load(dst)

    # --- the service ---
    def agent_state(self):
        return self.ct.show("fxagent.service", "ActiveState", "SubState", "MainPID", "Result",
                            "ExecMainStatus", "StatusText")

    def journal(self, *args):
        """fxagent.service's journal entries (dicts), oldest first."""
        p = self.ct.run("journalctl", "--no-pager", "-o", "json", "-u", "fxagent.service",
                        *args, check=True)
        out = []
        for line in p.stdout.splitlines():
            try:
                out.append(json.loads(line))
            except ValueError:
                pass
        return out

    def wait_journal(self, pred, *args, timeout=30):
        """The messages of the entries that satisfy pred, once there are some
        (journald files what a service printed a moment later; in a container
        sharing half a CPU, seconds later), or [] after timeout (scaled) s."""
        deadline = time.monotonic() + fxtest.scaled(timeout)
        while True:
            said = [message(e) for e in self.journal(*args) if pred(e)]
            if said or time.monotonic() > deadline:
                return said
            time.sleep(0.3)

    def cursor(self):
        p = self.ct.run("journalctl", "--no-pager", "-o", "json", "-n", "1", check=True)
        return json.loads(p.stdout.splitlines()[-1])["__CURSOR"]


def message(e):
    m = e.get("MESSAGE", "")
    return m if isinstance(m, str) else bytes(m).decode(errors="replace")


def hot_shares(prof, pid=None):
    threads = [th for th in prof.threads if th["name"] != "fxagent" and
               (pid is None or str(th["pid"]) == str(pid))]
    return (prof.weight(threads), prof.share(threads, prof.has_func("hot_a")),
            prof.share(threads, prof.has_func("hot_b")))


def prepare(t, r, deb, tree):
    deps = fxsystemd.deb_depends(deb)
    mirror = fxsystemd.host_mirror()
    if not fxsystemd.mirror_reachable(mirror):
        print(f"SKIP: the Debian mirror {mirror} cannot be reached: debootstrap needs it")
        raise SystemExit(fxtest.SKIP)
    include = ["systemd", "systemd-sysv", "dbus"] + [d for d in deps if d not in
                                                     ("systemd", "systemd-sysv", "dbus")]
    fxsystemd.debootstrap(t, tree, mirror, include, os.path.join(t.work, "debootstrap.log"))
    r.step(f"debootstrap {fxsystemd.SUITE} from {mirror} done")

    shutil.copy(deb, r.path("/tmp/fxagent.deb"))
    p = subprocess.run(["chroot", tree, "dpkg", "-i", "/tmp/fxagent.deb"],
                       capture_output=True, text=True, timeout=300)
    t.save("dpkg.log", p.stdout + p.stderr)
    t.require(p.returncode == 0, f"dpkg -i {os.path.basename(deb)} in the tree exited "
              f"{p.returncode}: {(p.stdout + p.stderr).strip()[-2000:]}")
    os.unlink(r.path("/tmp/fxagent.deb"))
    with open(r.path("/etc/passwd")) as f:
        user = [ln.split(":") for ln in f.read().splitlines() if ln.startswith("fxagent:")]
    t.require(user, "dpkg -i did not create the user fxagent")
    r.uid, r.gid = int(user[0][2]), int(user[0][3])
    t.check(r.uid != 0 and user[0][5] == "/var/lib/fxagent" and
            user[0][6].endswith("nologin"),
            f"the fxagent user is {':'.join(user[0])}, want a system user with home "
            "/var/lib/fxagent and no login shell")
    t.check(os.path.islink(r.path("/etc/systemd/system/multi-user.target.wants/"
                                  "fxagent.service")),
            "dpkg -i did not enable fxagent.service")
    r.step(f"installed {os.path.basename(deb)}; user fxagent is {r.uid}:{r.gid}")

    os.makedirs(r.path("/usr/local/lib/fxtest"))
    os.makedirs(r.path("/home/busy"))
    shutil.copy(os.path.join(t.workloads, "fx-hot-ab"), r.path("/usr/local/lib/fxtest/"))
    os.chmod(r.path("/usr/local/lib/fxtest"), 0o700)
    for unit, text in (("fx-busy.service", FX_BUSY), ("fx-sys.service", FX_SYS)):
        r.write(f"/etc/systemd/system/{unit}", text)
        os.symlink(f"/etc/systemd/system/{unit}",
                   r.path(f"/etc/systemd/system/multi-user.target.wants/{unit}"))
    r.write(CONF, config(r.port))


def boot(t, r):
    r.ct = fxsystemd.Container(
        t, r.tree, os.path.join(t.work, "nspawn.log"),
        ["--machine=fxagent-test", "--capability=" + ",".join(NSPAWN_CAPS),
         "--system-call-filter=perf_event_open"])
    r.ct.wait_pid1()
    # Until its manager answers on its private socket, then until it booted.
    deadline = time.monotonic() + 60
    while r.ct.systemctl("is-system-running").stdout.strip() in ("", "offline"):
        t.require(time.monotonic() < deadline,
                  f"the container's systemd does not answer: {r.ct.text()[-3000:]}")
        time.sleep(0.2)
    p = r.ct.systemctl("is-system-running", "--wait", timeout=180)
    state = p.stdout.strip()
    r.step(f"booted: system {state}")
    if state != "running":
        failed = r.ct.systemctl("list-units", "--failed", "--no-legend").stdout.strip()
        t.note(f"failed units: {failed}")


def check_service(t, r):
    st = r.agent_state()
    t.check(st["ActiveState"] == "active" and st["SubState"] == "running",
            f"fxagent is {st['ActiveState']} ({st['SubState']}), want active (running): "
            f"{r.ct.systemctl('status', '--no-pager', 'fxagent').stdout[-2000:]}")
    t.require(st["MainPID"] != "0", "fxagent has no main process")
    r.agent_ns_pid = st["MainPID"]
    t.note(f"fxagent: {st}")
    pid = fxsystemd.ns_pid_of(r.ct.pid1, st["MainPID"])
    t.require(pid, f"no host process for the agent's pid {st['MainPID']} in the container")
    with open(f"/proc/{pid}/status") as f:
        status = dict(line.split(":", 1) for line in f.read().splitlines() if ":" in line)
    uids = status["Uid"].split()
    gids = status["Gid"].split()
    t.check(all(int(u) == r.uid for u in uids) and all(int(g) == r.gid for g in gids),
            f"the agent runs as uid {uids} gid {gids}, want fxagent ({r.uid}:{r.gid})")
    want = fxsystemd.cap_mask(CAPS)
    for field in ("CapEff", "CapPrm", "CapAmb", "CapBnd"):
        got = int(status[field], 16)
        t.check(got == want, f"the agent's {field} is {fxsystemd.cap_names(got)}, want {CAPS}")
    t.check(status["NoNewPrivs"].strip() == "1", "the agent may gain privileges (NoNewPrivs 0)")
    t.check(status["Seccomp"].strip() == "2", "the agent has no seccomp filter")
    t.note(f"agent (host pid {pid}): uid {uids[0]}, CapEff "
           f"{fxsystemd.cap_names(int(status['CapEff'], 16))}")
    # The unit's limits, as far as this machine lets the container raise them.
    with open(f"/proc/{pid}/limits") as f, open("/proc/self/limits") as g:
        agent = {ln[:26].strip(): ln[26:].split() for ln in f.read().splitlines()[1:]}
        host = {ln[:26].strip(): ln[26:].split() for ln in g.read().splitlines()[1:]}
    for name, value in UNIT_LIMITS.items():
        hard = host[name][1]
        want = value if hard == "unlimited" else min(value, int(hard))
        t.check(agent[name][:2] == [str(want)] * 2,
                f"the agent's {name} is {agent[name][:2]}, want {want} (the unit's {value}, "
                f"capped by this machine's hard limit {hard})")
        if want != value:
            t.note(f"{name}: {want}, not the unit's {value}: this machine's hard limit is {hard}")


def check_chunks(t, r):
    busy_pid = r.ct.show("fx-busy.service", "MainPID")["MainPID"]
    # Whole windows after the agent started: the first one is partial.
    n, a, b, seqs = r.busy_samples(
        busy_pid, lambda c: c["end"] - c["start"] == WINDOW_S * 1000 and c["seq"] > 0,
        "whole window of target busy")
    t.note(f"busy chunks seq {seqs}: {n} samples of fx-busy ({busy_pid}), hot_a {a:.0f}%, "
           f"hot_b {b:.0f}%")
    # Symbolized: both functions named, and nearly every stack in one of them
    # (at 30 samples and 30%, no hot_b at all happens once in 40,000 runs).
    t.check(n > 0 and a > 0 and b > 0 and a + b >= 90,
            f"chunks {seqs}: fx-busy's {n} samples have hot_a in {a:.0f}% and hot_b in "
            f"{b:.0f}% of their stacks: the deleted, unreadable binary is not symbolized")
    c = r.wait_chunk("sys", lambda c: c["end"] - c["start"] == WINDOW_S * 1000 and c["seq"] > 0,
                     30, "whole window of target sys")
    prof = r.load(c)
    kernel = [prof.func_names[prof.frame_func[f]] for th in prof.threads
              for st, w in prof.samples(th) for f in prof.kernel_frames(st)]
    named = [k for k in kernel if not k.startswith("[kernel]")]
    t.note(f"sys chunk seq {c['seq']}: {len(kernel)} kernel frames, {len(named)} named "
           f"(e.g. {sorted(set(named))[:5]})")
    t.check(kernel and len(named) >= 0.8 * len(kernel),
            f"chunk {c['path']}: {len(named)} of {len(kernel)} kernel frames named: "
            "/proc/kallsyms unreadable to the service?")
    # The sandbox lets the agent write (and rename) its metrics file.
    try:
        with open(r.path(METRICS)) as f:
            prom = f.read()
    except OSError as e:
        prom = repr(e)
    m = re.search(r"^fxagent_windows_total (\d+)", prom, re.M)
    t.note(f"metrics: {m[0] if m else prom[:200]}")
    t.check(m and int(m[1]) > 0, f"{METRICS} has no fxagent_windows_total above 0: {prom[:500]}")


def broken_config(r):
    """The config with window.seconds 0; returns it and where the error is."""
    good = config(r.port)
    lines = good.splitlines()
    i = next(k for k, ln in enumerate(lines) if ln.strip().startswith("seconds:"))
    lines[i] = "  seconds: 0"
    return "\n".join(lines) + "\n", f"{CONF}:{i + 1}:{lines[i].index('0') + 1}:"


def check_reload(t, r):
    pid = r.agent_ns_pid
    text, where = broken_config(r)
    r.write(CONF, text)
    p = r.ct.systemctl("reload", "fxagent")
    st = r.agent_state()
    r.step(f"reload with a broken config: systemctl exited {p.returncode}; agent "
           f"{st['ActiveState']} ({st['SubState']}), pid {st['MainPID']}")
    t.check(p.returncode != 0, "systemctl reload with a broken config succeeded")
    t.check(st["ActiveState"] == "active" and st["MainPID"] == pid,
            f"after a failed reload fxagent is {st['ActiveState']}, pid {st['MainPID']} "
            f"(was {pid})")
    said = r.wait_journal(lambda e: e.get("_PID") != pid and where in message(e))
    t.check(said, f"the failed reload's check did not log {where} in the journal")

    cur = r.cursor()
    p = r.ct.systemctl("kill", "-s", "HUP", "fxagent")
    t.check(p.returncode == 0, f"systemctl kill -s HUP fxagent exited {p.returncode}: "
            f"{p.stderr.strip()}")
    said = r.wait_journal(lambda e: e.get("_PID") == pid and where in message(e),
                          f"--after-cursor={cur}")
    time.sleep(WINDOW_S)  # past a window end: the agent goes on with the old config
    st = r.agent_state()
    r.step(f"SIGHUP with the broken config: agent {st['ActiveState']} ({st['SubState']}), "
           f"pid {st['MainPID']}; it said {said}")
    t.check(said, f"after SIGHUP with a broken config the agent did not log {where}... in the "
            "journal (the reload on SIGHUP, or its error, is missing)")
    t.check(st["ActiveState"] == "active" and st["SubState"] == "running" and
            st["MainPID"] == pid,
            f"after SIGHUP with a broken config fxagent is {st['ActiveState']} "
            f"({st['SubState']}), pid {st['MainPID']} (was {pid})")

    r.write(CONF, config(r.port, '    labels: {reloaded: "yes"}\n'))
    p = r.ct.systemctl("reload", "fxagent")
    at = time.time() * 1000
    st = r.agent_state()
    r.step(f"reload with the config fixed: systemctl exited {p.returncode}; agent "
           f"{st['ActiveState']} ({st['SubState']})")
    t.check(p.returncode == 0, f"systemctl reload with a good config exited {p.returncode}: "
            f"{(p.stdout + p.stderr).strip()}")
    t.check(st["ActiveState"] == "active" and st["MainPID"] == pid,
            f"after a good reload fxagent is {st['ActiveState']}, pid {st['MainPID']} "
            f"(was {pid})")
    c = r.wait_chunk("busy", lambda c: c["start"] >= at, 3 * WINDOW_S + 10,
                     "window of target busy after the reload")
    labels = r.load(c).data["meta"].get("fxagent", {}).get("labels", {})
    t.check(labels.get("reloaded") == "yes",
            f"a chunk after the reload has labels {labels}: the new config did not apply")


def check_restart(t, r):
    old = r.ct.show("fx-busy.service", "MainPID")["MainPID"]
    r.ct.systemctl("restart", "fx-busy", check=True)
    at = time.time() * 1000
    new = r.ct.show("fx-busy.service", "MainPID")["MainPID"]
    r.step(f"restarted fx-busy: pid {old} -> {new}")
    t.check(new not in ("0", old), f"fx-busy's pid after restart is {new} (was {old})")
    n, a, b, seqs = r.busy_samples(new, lambda c: c["start"] >= at,
                                   "window of target busy after fx-busy's restart")
    t.note(f"busy chunks seq {seqs} after the restart: {n} samples of the new fx-busy, "
           f"hot_a {a:.0f}%, hot_b {b:.0f}%")
    t.check(n > 0 and a > 0 and b > 0 and a + b >= 90,
            f"chunks {seqs} after fx-busy's restart: its {n} samples have hot_a in "
            f"{a:.0f}% and hot_b in {b:.0f}%: the new cgroup is not profiled")


def check_stop(t, r):
    r.agent_warnings = [message(e) for e in r.journal("-p", "warning")
                        if e.get("_PID") == r.agent_ns_pid]
    before = {c["id"] for c in r.chunks()}
    stop_ms = time.time() * 1000
    p = r.ct.systemctl("stop", "fxagent")
    st = r.agent_state()
    r.step(f"stopped fxagent: systemctl exited {p.returncode}; {st['ActiveState']}, result "
           f"{st['Result']}, status {st['ExecMainStatus']}")
    t.check(p.returncode == 0 and st["ActiveState"] == "inactive" and
            st["Result"] == "success" and st["ExecMainStatus"] == "0",
            f"systemctl stop fxagent: exit {p.returncode}, {st}")
    last = [c for c in r.chunks("busy") if c["id"] not in before]
    t.require(last, "no chunk of target busy written at stop")
    c = last[-1]
    span = c["end"] - c["start"]
    t.note(f"last busy chunk: seq {c['seq']}, {span} ms, ends {c['end'] - stop_ms:+.0f} ms "
           "from the stop")
    t.check(0 < span < WINDOW_S * 1000 and abs(c["end"] - stop_ms) < 2000,
            f"the last chunk of busy spans {span} ms and ends {c['end'] - stop_ms:+.0f} ms from "
            "the stop: not the partial window")
    t.check(c["seq"] == max(x["seq"] for x in r.chunks("busy")), "the stop's chunk is not last")
    r.load(c)


def check_journal(t, r):
    entries = r.journal()
    agent = [e for e in entries if e.get("_PID") == r.agent_ns_pid]
    targets = {e.get("TARGET") for e in agent if "TARGET" in e}
    wrote = {e["CHUNK_ID"]: e.get("TARGET") for e in agent if "CHUNK_ID" in e}
    t.note(f"journal: {len(agent)} entries of the agent, TARGET= {sorted(targets)}, "
           f"{len(wrote)} with CHUNK_ID=")
    t.check({"busy", "sys"} <= targets,
            f"the agent's journal entries carry TARGET= {sorted(targets)}, want busy and sys")
    # No profile lost: every chunk the agent said it wrote waits in the spool,
    # and each target's chunks have every seq.
    spool = {c["id"]: c for c in r.chunks()}
    missing = sorted(i for i in wrote if i not in spool)
    t.check(wrote and not missing, f"{len(missing)} of the {len(wrote)} chunks the journal names "
            f"are not in the spool: {missing[:5]}")
    wrong = sorted(i for i, tg in wrote.items() if i in spool and spool[i]["target"] != tg)
    t.check(not wrong, f"chunks whose TARGET= is not their target: {wrong[:5]}")
    for target in ("busy", "sys"):
        seqs = sorted(c["seq"] for c in r.chunks(target))
        t.check(seqs and seqs == list(range(seqs[0], seqs[-1] + 1)),
                f"target {target}: seqs in the spool {seqs}: windows missing")
    rejected = r.path(SPOOL + "/rejected")
    t.check(not os.listdir(rejected) if os.path.isdir(rejected) else True,
            f"chunks rejected: {os.listdir(rejected)}")
    # Anything else the agent warned about (a capability or path the sandbox
    # denies, a refused system call) is a failure of the unit.
    expected = re.compile(r"cannot upload chunk|" + re.escape(CONF) + r":\d+:\d+:|reload failed")
    other = [m for m in r.agent_warnings if not expected.search(m)]
    t.check(not other, f"the agent warned: {other[:10]}")


def check_purge(t, r):
    # What the package leaves on purge, with its systemd running: no unit, no
    # config, no state; the system user stays (Debian keeps those).
    shutil.copytree(r.path(SPOOL), os.path.join(t.work, "spool"), dirs_exist_ok=True)
    p = r.ct.run("env", "DEBIAN_FRONTEND=noninteractive", "dpkg", "--purge", "fxagent")
    r.step(f"dpkg --purge fxagent: exit {p.returncode}")
    t.check(p.returncode == 0, f"dpkg --purge fxagent exited {p.returncode}: "
            f"{(p.stdout + p.stderr).strip()[-2000:]}")
    load = r.ct.show("fxagent.service", "LoadState")["LoadState"]
    left = [x for x in ("/var/lib/fxagent", "/etc/fxagent", "/usr/bin/fxagent",
                        "/etc/systemd/system/multi-user.target.wants/fxagent.service")
            if os.path.lexists(r.path(x))]
    with open(r.path("/etc/passwd")) as f:
        user = any(ln.startswith("fxagent:") for ln in f)
    t.check(load == "not-found" and not left and user,
            f"after dpkg --purge: unit {load}, left {left}, user fxagent "
            f"{'kept' if user else 'removed'}; want not-found, nothing, kept")


def save_logs(t, r):
    if not (r.ct and r.ct.pid1 and r.ct.p.poll() is None):
        return
    p = r.ct.run("journalctl", "--no-pager", "-b", "-o", "short-precise", timeout=60)
    t.save("journal.txt", p.stdout + p.stderr)
    p = r.ct.systemctl("status", "--no-pager", "--full", "fxagent", "fx-busy", "fx-sys",
                       timeout=60)
    t.save("status.txt", p.stdout + p.stderr)


def body(t):
    for tool, pkg in (("debootstrap", "debootstrap"), ("systemd-nspawn", "systemd-container"),
                      ("nsenter", "util-linux"), ("dpkg-deb", "dpkg")):
        if not shutil.which(tool):
            print(f"SKIP: this machine has no {tool} (apt-get install {pkg}, or "
                  "scripts/install-test-deps.sh)")
            raise SystemExit(fxtest.SKIP)
    deb_dir = os.environ.get("FX_DEB_DIR", "")
    version = subprocess.run([t.agent, "--version"], capture_output=True,
                                       text=True).stdout.split()[-1]
    debs = [os.path.join(deb_dir, n) for n in (os.listdir(deb_dir) if os.path.isdir(deb_dir)
                                               else [])
            if re.fullmatch(rf"fxagent_{re.escape(version)}_\w+\.deb", n)]
    t.require(len(debs) == 1, f"FX_DEB_DIR={deb_dir!r}: want one fxagent_{version}_*.deb "
              "(the ctest fixture package.deb builds it: ctest -R 'package|systemd')")
    # Beside the test's directory, not in it: fxtest removes that one with
    # rmtree, which must never meet a mount left in the tree.
    tree = t.work + ".tree"
    r = Run(t, tree)
    fxsystemd.remove_tree(tree)
    try:
        prepare(t, r, debs[0], tree)
        boot(t, r)
        check_service(t, r)
        check_chunks(t, r)
        r.step("chunks checked")
        check_reload(t, r)
        check_restart(t, r)
        check_stop(t, r)
        check_journal(t, r)
        r.step("journal checked")
        check_purge(t, r)
    finally:
        cleanup(t, r)


def cleanup(t, r):
    """Logs and spool kept in the test's directory, the container powered off,
    the tree removed: each step even when one before it failed."""
    def keep_logs():
        save_logs(t, r)

    def keep_spool():
        if os.path.isdir(r.path(SPOOL)):
            shutil.copytree(r.path(SPOOL), os.path.join(t.work, "spool"), dirs_exist_ok=True)

    def power_off():
        if r.ct:
            r.ct.shutdown()
            r.step("container powered off")

    def remove():
        fxsystemd.remove_tree(r.tree)
        r.step("tree removed")

    for step in (keep_logs, keep_spool, power_off, remove):
        try:
            step()
        except Exception as e:  # noqa: BLE001 (every step runs; the failure is kept)
            t.failures.append(f"cleanup: {step.__name__}: {e!r}")
            print(f"FAIL: cleanup: {step.__name__}: {e!r}", flush=True)


def on_term(sig, frame):
    # ctest's timeout or a Ctrl-C: stop where we are, through the cleanup.
    raise fxtest.Stop(f"signal {sig}")

signal.signal(signal.SIGTERM, on_term)
fxtest.main(body)

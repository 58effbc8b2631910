# SPDX-License-Identifier: MIT
"""What the agent needs, run as an unprivileged user (nobody) with ambient
capabilities, as the systemd unit runs it (setpriv stands in for systemd):

- with CAP_PERFMON, CAP_SYSLOG, CAP_SYS_PTRACE, CAP_CHECKPOINT_RESTORE and
  CAP_DAC_READ_SEARCH (the unit's set) it says nothing is missing, and a root
  process's stack is whole and named (main > hot_caller > hot_a), kernel frames
  included: these five are enough to profile the whole machine;
- with CAP_PERFMON alone it still records, and says in one line which four
  capabilities it lacks and what each costs;
- with the unit's capabilities but a locked-memory limit of 64 KiB, the rings
  cannot be mapped: it exits 1 before opening anything, saying so with both
  limits (kernel.perf_event_mlock_kb, RLIMIT_MEMLOCK), what is needed and how
  to raise each (LimitMEMLOCK=, sysctl), not that perf_event_open needs
  privileges; `--check-config` under that limit fails (exit 2) with the same
  message, and states the plan (ring per CPU, total locked) under the default
  limit;
- as root it says nothing about capabilities.
"""

import os
import re
import shutil
import subprocess
import tempfile

import fxtest

UNIT_CAPS = ["perfmon", "syslog", "sys_ptrace", "checkpoint_restore", "dac_read_search"]


def as_nobody(t, caps, out, seconds=2, memlock=None, args=None):
    """fxagent --once (or @args) as nobody with @caps inheritable and ambient."""
    setpriv = shutil.which("setpriv")
    if not setpriv:
        raise fxtest.Stop("setpriv (util-linux) is missing")
    plus = ",".join("+" + c for c in caps)
    limit = [shutil.which("prlimit"), f"--memlock={memlock}:{memlock}"] if memlock else []
    cmd = [*limit, setpriv, "--reuid=65534", "--regid=65534", "--clear-groups",
           f"--inh-caps={plus}", f"--ambient-caps={plus}",
           t.agent, *(args or ["--once", "-d", f"{seconds}s", "-o", out])]
    t.note("+ " + " ".join(cmd))
    return subprocess.run(cmd, capture_output=True, text=True, timeout=60)


def memlock_says(t, stderr):
    """The refusal of rings over the locked-memory limits: once, before any
    mmap, with both limits, the need and how to raise each."""
    lines = [ln for ln in stderr.splitlines() if "cannot lock the perf rings" in ln]
    t.check(len(lines) == 1, f"want one line refusing the rings, got {stderr.strip()!r}")
    for want in ("kernel.perf_event_mlock_kb", "RLIMIT_MEMLOCK 64 KiB", "needed",
                 "LimitMEMLOCK=", "ulimit -l", "sysctl kernel.perf_event_mlock_kb="):
        t.check(lines and want in lines[0], f"{want!r} not in {lines}")
    t.check("cannot map" not in stderr, f"an mmap was tried: {stderr.strip()}")


def missing_line(stderr):
    return [ln for ln in stderr.splitlines() if "running without" in ln]


def body(t):
    os.chmod(t.work, 0o777)  # nobody writes its profiles here
    w = t.workload("fx-hot-ab", 30)

    out = os.path.join(t.work, "unit-caps.json.gz")
    p = as_nobody(t, UNIT_CAPS, out)
    t.check(p.returncode == 0, f"exit {p.returncode} with the unit's capabilities: "
            f"{p.stderr.strip()}")
    t.check(not missing_line(p.stderr), f"says something is missing with the unit's "
            f"capabilities: {missing_line(p.stderr)}")
    if os.path.exists(out):
        prof = t.load(out)
        th = prof.threads_of(w.pid)
        whole = prof.share(th, lambda st: fxtest.contains(prof.user_names(st),
                                                          ["main", "hot_caller", "hot_a"]))
        t.note(f"as nobody with {UNIT_CAPS}: {prof.weight(th)} samples of fx-hot-ab, "
               f"{whole:.0f}% main > hot_caller > hot_a")
        t.check(prof.weight(th) > 50, f"{prof.weight(th)} samples of root's fx-hot-ab")
        t.check(whole > 40, f"{whole:.0f}% of fx-hot-ab's samples are main > hot_caller > "
                "hot_a (want ~70%): its binary was not read")
        kern = [prof.func_names[prof.frame_func[f]] for f in range(len(prof.frame_func))
                if prof.frame_cat[f] == "Kernel"]
        hexnames = [n for n in kern if n.startswith("0x")]
        t.check(not hexnames, f"kernel frames without names: {hexnames[:5]}")

    out = os.path.join(t.work, "perfmon-only.json.gz")
    p = as_nobody(t, ["perfmon"], out, seconds=1)
    t.check(p.returncode == 0, f"exit {p.returncode} with CAP_PERFMON alone: "
            f"{p.stderr.strip()}")
    lines = missing_line(p.stderr)
    t.check(len(lines) == 1, f"want one line saying what is missing, got {lines}")
    for cap in ("CAP_SYSLOG", "CAP_SYS_PTRACE", "CAP_CHECKPOINT_RESTORE",
                "CAP_DAC_READ_SEARCH"):
        t.check(lines and cap + " (" in lines[0], f"{cap} is not named with its cost: {lines}")
    t.check(lines and "4 capabilities" in lines[0], f"not 4 missing: {lines}")
    t.check(os.path.exists(out), "no profile with CAP_PERFMON alone")

    # Off-CPU time needs CAP_BPF, which the unit does not grant: said once, with
    # what to add, and the CPU profile is written all the same.
    out = os.path.join(t.work, "offcpu-no-bpf.json.gz")
    p = as_nobody(t, UNIT_CAPS, out, args=["--once", "--off-cpu", "-d", "1s", "-o", out])
    t.check(p.returncode == 0, f"exit {p.returncode} with --off-cpu and no CAP_BPF: "
            f"{p.stderr.strip()}")
    said = [ln for ln in p.stderr.splitlines() if "off-CPU time is not recorded" in ln]
    # (a kernel without BTF is refused first, and says that instead)
    need = "CAP_BPF" if os.path.exists("/sys/kernel/btf/vmlinux") else "no BTF"
    t.check(len(said) == 1 and need in said[0] and "CPU profiling goes on" in said[0],
            f"want one line saying off-CPU needs {need}, got {said}")
    if t.check(os.path.exists(out), "no profile with --off-cpu and no CAP_BPF"):
        prof = t.load(out)
        t.check(prof.weight(prof.threads_of(w.pid)) > 0,
                "no sample of fx-hot-ab with --off-cpu and no CAP_BPF")
        t.check(not any(th["samples"].get("weightType") == "tracing-ms" for th in prof.threads),
                "off-CPU tracks without CAP_BPF")

    p = as_nobody(t, UNIT_CAPS, os.path.join(t.work, "memlock.json.gz"), seconds=1,
                  memlock=65536)
    t.check(p.returncode == 1, f"exit {p.returncode} with a 64 KiB locked-memory limit")
    t.check("RLIMIT_MEMLOCK" in p.stderr and "LimitMEMLOCK=" in p.stderr and
            "CAP_PERFMON" not in p.stderr,
            f"the message does not blame the locked-memory limit: {p.stderr.strip()}")
    memlock_says(t, p.stderr)

    # An output.directory nobody may make: not below the work directory,
    # which others can write (the config check refuses that).
    home = tempfile.mkdtemp(prefix="fxpriv-")
    os.chown(home, 65534, 65534)
    check = ["--check-config", "--output-dir", os.path.join(home, "chunks")]
    p = as_nobody(t, UNIT_CAPS, None, memlock=65536, args=check)
    t.check(p.returncode == 2, f"--check-config: exit {p.returncode} with a 64 KiB "
            f"locked-memory limit")
    memlock_says(t, p.stderr)
    p = as_nobody(t, UNIT_CAPS, None, args=check)
    t.check(p.returncode == 0 and "perf ring per CPU: " in p.stdout and
            re.search(r"perf rings: \d+ CPUs? x \(.* header\) = .* locked", p.stdout),
            f"--check-config: exit {p.returncode}, no plan stated: {p.stdout!r} "
            f"{p.stderr.strip()}")
    shutil.rmtree(home, ignore_errors=True)

    p = t.run_agent("--once", "-d", "500ms", "-o", os.path.join(t.work, "root.json.gz"))
    t.check(p.returncode == 0 and not missing_line(p.stderr),
            f"as root: exit {p.returncode}, {missing_line(p.stderr)}")
    t.kill_processes()


if __name__ == "__main__":
    fxtest.main(body)

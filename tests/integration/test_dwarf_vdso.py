# SPDX-License-Identifier: MIT
"""fx-vdso spends its time in clock_gettime, in the vDSO, which has no file on
disk: the agent reads its own copy of the vDSO image, so these stacks unwind
through it to main (not truncated) and its frames are named.

What the vDSO runs depends on the clocksource: with tsc, clock_gettime reads
the TSC in exported code (__vdso_clock_gettime and its callees); with
kvm-clock it goes through a static helper (vread_pvclock) that the vDSO's
dynamic symbol table does not name. So the assertion is what holds under
both: the samples taken in the vDSO are attributed to the [vdso] lib, the
stack above them continues to main > read_clocks (through libc's
clock_gettime), and each frame there is an
exported vDSO function or a clear `[vdso]+0x...` frame, never garbage (a
name of another object, a bare address). It is made under every clocksource
of tsc and kvm-clock that the kernel offers, switching
/sys/devices/system/clocksource/clocksource0/current_clocksource and
restoring it after; one the kernel does not offer is said and skipped.
"""

import re
import time

import fxtest
from fxdaemon import HZ

SECONDS = 3
CS = "/sys/devices/system/clocksource/clocksource0/"
# What the vDSO's .dynsym can name on x86-64, with or without __vdso_.
VDSO_EXPORTED = re.compile(r"^(__vdso_)?(clock_gettime|gettimeofday|time|getcpu|clock_getres|"
                           r"sgx_enter_enclave)$")
VDSO_UNNAMED = re.compile(r"^\[vdso\]\+0x[0-9a-f]+$")


def read(path):
    with open(path) as f:
        return f.read().strip()


def write(path, value):
    with open(path, "w") as f:
        f.write(value)


def one(t, clock):
    w = t.workload("fx-vdso", SECONDS + 20)
    time.sleep(0.3)
    prof = t.record(f"vdso-{clock}", SECONDS, pids=[w.pid], measure=[w.pid])
    t.kill_processes()
    ths = prof.threads_of(w.pid)
    t.require(ths, f"{clock}: no thread of pid {w.pid} (fx-vdso)")
    n = prof.weight(ths)
    # The reference: fx-vdso's own CPU time over the recording's window, in
    # this run (a loaded machine or a slow clock read gives it less, and the
    # agent fewer samples, alike).
    cpu = prof.cpu_s(w.pid)
    least = fxtest.min_samples(cpu, HZ)
    t.require(n >= least, f"{clock}: only {n} samples of fx-vdso, which used {cpu:.2f} CPU s "
              f"in the recording (at least {least} expected)")
    whole = prof.share(ths, lambda st: fxtest.contains(prof.stack_names(st),
                                                       ["main", "read_clocks"]))
    t.note(f"{clock}: {n} samples for {cpu:.2f} CPU s (at least {least}), main > read_clocks "
           f"in {whole:.1f}%")
    t.check(whole >= 95, f"{clock}: main > read_clocks in only {whole:.1f}% of fx-vdso's "
            "samples: stacks through the vDSO are cut short")

    libs = prof.data["libs"]
    vdso = [i for i, lib in enumerate(libs) if lib["name"] == "[vdso]"]
    t.require(vdso, f"{clock}: no [vdso] lib in the profile: {[lib['name'] for lib in libs]}")
    t.check(libs[vdso[0]]["codeId"], f"{clock}: the [vdso] lib has no build-id")

    # Samples whose user leaf is in the vDSO, and what the frames there are named.
    in_vdso, names, bad = 0, {}, set()
    for th in ths:
        for st, wt in prof.samples(th):
            user = [f for f in prof.stack_frames(st) if prof.frame_cat[f] != "Kernel"]
            if not user:
                continue
            chain = [prof.frame_func[f] for f in user]
            if prof.func_lib[chain[-1]] != "[vdso]":
                continue
            in_vdso += wt
            # The vDSO's frames, then the first caller outside it.
            k = len(chain) - 1
            while k >= 0 and prof.func_lib[chain[k]] == "[vdso]":
                name = prof.func_names[chain[k]]
                names[name] = names.get(name, 0) + wt
                if not (VDSO_EXPORTED.match(name) or VDSO_UNNAMED.match(name)):
                    bad.add(name)
                k -= 1
            # Above it: read_clocks, through nothing but libc's wrapper.
            callers = [(prof.func_names[c], prof.func_lib[c]) for c in chain[:k + 1]]
            while callers and (callers[-1][1] or "").startswith("libc."):
                callers.pop()
            if not callers or callers[-1][0] != "read_clocks":
                bad.add(f"caller {callers[-1:]} of the vDSO")
    t.note(f"{clock}: {in_vdso} of {n} samples in the vDSO; its frames: "
           f"{sorted(names.items(), key=lambda kv: -kv[1])}")
    t.check(in_vdso >= 0.5 * n, f"{clock}: only {in_vdso} of {n} samples have their leaf "
            "in the [vdso] lib; fx-vdso does little else than call clock_gettime")
    t.check(not bad, f"{clock}: vDSO frames that are neither an exported vDSO function nor "
            f"[vdso]+0x...: {sorted(bad)[:10]}")

    truncated = prof.recording()["truncated"]
    t.check(truncated <= 0.02 * n, f"{clock}: {truncated} of {n} stacks truncated")

    cli = t.cli(prof.path, f"vdso-{clock}")
    funcs = cli.functions(cli.handles(pid=w.pid))
    t.check("read_clocks" in funcs and funcs["read_clocks"]["totalPercentage"] >= 95,
            f"{clock}: profiler-cli: read_clocks total "
            f"{funcs.get('read_clocks', {}).get('totalPercentage')}")
    cli.stop()


def body(t):
    current = read(CS + "current_clocksource")
    offered = read(CS + "available_clocksource").split()
    clocks = [current] + [c for c in ("tsc", "kvm-clock") if c in offered and c != current]
    for c in ("tsc", "kvm-clock"):
        if c not in offered:
            t.note(f"clocksource {c} is not offered by this kernel ({offered}): not tried")
    try:
        for clock in clocks:
            if clock != read(CS + "current_clocksource"):
                write(CS + "current_clocksource", clock)
                t.require(read(CS + "current_clocksource") == clock,
                          f"the kernel did not switch to clocksource {clock}")
            one(t, clock)
    finally:
        if read(CS + "current_clocksource") != current:
            write(CS + "current_clocksource", current)


fxtest.main(body)

# SPDX-License-Identifier: MIT
"""fx-syscalls spends most of its time in read(2)/write(2): its samples carry kernel
frames (category Kernel, symbolized), leaf-side of the user stack that made the
call (libc's read/write under syscall_loop under main); with --no-kernel no
kernel frame is left anywhere."""

import re
import time

import fxtest

SECONDS = 4
# Functions every x86-64 syscall from user space passes through (one is enough).
ENTRY = re.compile(r"^(entry_SYSCALL_64\w*|do_syscall_64|x64_sys_call|__x64_sys_\w+|"
                   r"ksys_(read|write)|vfs_(read|write))$")


LIBC_IO = {"read", "write", "__libc_read", "__libc_write", "__GI___libc_read",
           "__GI___libc_write"}


def body(t):
    w = t.workload("fx-syscalls", 2 * SECONDS + 30)
    time.sleep(0.3)
    prof = t.record("syscalls", SECONDS, pids=[w.pid])
    bare = t.record("syscalls-no-kernel", SECONDS - 1, pids=[w.pid], extra=["--no-kernel"])
    t.kill_processes()

    ths = prof.threads_of(w.pid)
    t.require(ths, f"no thread of pid {w.pid} (fx-syscalls) in the profile")
    samples = [st for th in ths for st, _ in prof.samples(th)]
    in_kernel = [st for st in samples if prof.kernel_frames(st)]
    pct = 100 * len(in_kernel) / len(samples) if samples else 0
    t.note(f"{len(samples)} samples, {pct:.1f}% with kernel frames")
    t.check(pct >= 50, f"only {pct:.1f}% of fx-syscalls' samples have kernel frames; "
            "perf sees ~85% of its time in the kernel")

    knames = {prof.func_names[prof.frame_func[f]] for st in in_kernel
              for f in prof.kernel_frames(st)}
    t.check(any(ENTRY.match(n) for n in knames),
            f"no syscall entry function (entry_SYSCALL_64, do_syscall_64, __x64_sys_*, ...) "
            f"among the kernel frames: {sorted(knames)[:20]}")
    hexes = sorted(n for n in knames if fxtest.looks_hex(n))
    t.check(len(hexes) <= len(knames) / 10, f"unsymbolized kernel frames: {hexes[:10]}")

    # Root first: user frames, then kernel frames; never user below kernel.
    mixed = [st for st in in_kernel if _user_after_kernel(prof, st)]
    t.check(not mixed, f"{len(mixed)} stacks have a user frame below a kernel frame, e.g. "
            f"{prof.stack_names(mixed[0]) if mixed else ''}")
    # The user side of a syscall: libc's read/write called from syscall_loop
    # under main. DWARF unwinding (the default) finds syscall_loop although
    # Debian's libc keeps no frame pointer.
    whole = [st for st in in_kernel
             if fxtest.contains(prof.stack_names(st), ["main", "syscall_loop"])
             and LIBC_IO & set(prof.stack_names(st))]
    if in_kernel:
        share = 100 * len(whole) / len(in_kernel)
        t.check(share >= 80, f"main > syscall_loop > read/write in only {share:.1f}% of the "
                f"kernel stacks; e.g. {prof.stack_names(in_kernel[0])}")

    cli = t.cli(prof.path, "syscalls")
    handles = cli.handles(pid=w.pid)
    t.require(handles, f"profiler-cli thread list has no thread of pid {w.pid}")
    funcs = cli.functions(handles)
    t.check(any(ENTRY.match(n) for n in funcs),
            f"profiler-cli thread functions: no syscall entry function; have {sorted(funcs)[:30]}")

    # --no-kernel: the process is still there, without a single kernel frame.
    ths = bare.threads_of(w.pid)
    t.require(ths, f"--no-kernel: no thread of pid {w.pid} in the profile")
    n = bare.weight(ths)
    t.check(n >= 10, f"--no-kernel: only {n} samples of fx-syscalls")
    kcat = [i for i, c in enumerate(bare.frame_cat) if c == "Kernel"]
    t.check(not kcat, f"--no-kernel: {len(kcat)} frames of category Kernel, e.g. "
            f"{[bare.func_names[bare.frame_func[i]] for i in kcat[:5]]}")
    names = {n for th in bare.threads for st, _ in bare.samples(th) for n in bare.stack_names(st)}
    knames = sorted(n for n in names if ENTRY.match(n))
    t.check(not knames, f"--no-kernel: kernel functions in the samples: {knames}")


def _user_after_kernel(prof, st):
    seen_kernel = False
    for f in prof.stack_frames(st):
        if prof.frame_cat[f] == "Kernel":
            seen_kernel = True
        elif seen_kernel:
            return True
    return False


fxtest.main(body)

# SPDX-License-Identifier: MIT
"""DWARF unwinding through Debian's libc, which has no frame pointers.

- fx-qsort: cmp_hot runs under libc's qsort, called by sort_batch from main.
- fx-libc: memchr and strlen (libc's AVX2/EVEX variants) called by scan_memchr
  and scan_strlen from main.

With `--unwind dwarf` (the default) the whole path is there: main on >= 95% of
each process's samples, the libc frames between cmp_hot and sort_batch, and
scan_memchr / scan_strlen right above their libc function. The same processes
recorded with `--unwind fp` show what frame pointers lose (printed for the
record): main under qsort, the caller of a libc leaf function. Each process has
at least half of the samples its own CPU time in the recording gives at 99 Hz,
less 3.5 standard errors (fxtest.min_samples).
"""

import time

import fxtest

SECONDS = 4
LIBC = "libc.so.6"


def frame_libs(prof):
    """Library name of each frame (None when the frame has none)."""
    shared = prof.data["shared"]
    res_lib = shared["resourceTable"]["lib"]
    func_res = shared["funcTable"]["resource"]
    libs = [lib["name"] for lib in prof.data["libs"]]
    out = []
    for func in prof.frame_func:
        r = func_res[func]
        lib = res_lib[r] if r is not None and r >= 0 else None
        out.append(libs[lib] if lib is not None else None)
    return out


def user_frames(prof, st):
    """Frame indexes of a stack without its kernel frames, root first."""
    return [f for f in prof.stack_frames(st) if prof.frame_cat[f] != "Kernel"]


def under_qsort(prof, libs, st):
    """main -> sort_batch -> one or more libc frames -> cmp_hot."""
    fr = user_frames(prof, st)
    names = [prof.func_names[prof.frame_func[f]] for f in fr]
    if "cmp_hot" not in names or "sort_batch" not in names or "main" not in names:
        return False
    i, k = names.index("sort_batch"), names.index("cmp_hot")
    between = fr[i + 1:k]
    return names.index("main") < i < k and between and all(libs[f] == LIBC for f in between)


def direct_caller(prof, libs, st, caller):
    """The user leaf is libc code and `caller` is the first frame above libc's
    frames. By library, not by name: without libc6-dbg the variants libc runs
    (__memchr_evex, __strlen_avx2, ...) have no symbol, and scan_memchr and
    scan_strlen call nothing else in libc."""
    fr = user_frames(prof, st)
    names = [prof.func_names[prof.frame_func[f]] for f in fr]
    if not fr or libs[fr[-1]] != LIBC:
        return False
    i = len(fr) - 1
    while i >= 0 and libs[fr[i]] == LIBC:
        i -= 1
    return i >= 0 and names[i] == caller


def shares(prof, libs, pid):
    """Percentages of the process's samples: main on the stack, and its workload's
    whole path (see under_qsort and direct_caller)."""
    ths = prof.threads_of(pid)
    out = {"n": prof.weight(ths), "main": prof.share(ths, prof.has_func("main"))}
    comm = ths[0]["processName"] if ths else ""
    if comm == "fx-qsort":
        out["cmp_hot"] = prof.share(ths, prof.has_func("cmp_hot"))
        out["path"] = prof.share(ths, lambda st: under_qsort(prof, libs, st))
    else:
        out["memchr"] = prof.share(ths, lambda st: direct_caller(prof, libs, st, "scan_memchr"))
        out["strlen"] = prof.share(ths, lambda st: direct_caller(prof, libs, st, "scan_strlen"))
        out["path"] = out["memchr"] + out["strlen"]
    return out


def leaf_names(prof, libs, pid):
    """Names of the libc frames at the user leaf of the process's samples."""
    out = set()
    for th in prof.threads_of(pid):
        for st, _ in prof.samples(th):
            fr = user_frames(prof, st)
            if fr and libs[fr[-1]] == LIBC:
                out.add(prof.func_names[prof.frame_func[fr[-1]]])
    return sorted(out)


def describe(s):
    return ", ".join(f"{k} {v:.1f}%" if k != "n" else f"{v} samples" for k, v in s.items())


def example(prof, pid, fn):
    for th in prof.threads_of(pid):
        for st, _ in prof.samples(th):
            if any(fn in n for n in prof.stack_names(st)):
                return prof.stack_names(st)
    return []


def body(t):
    qs = t.workload("fx-qsort", 2 * SECONDS + 30)
    lc = t.workload("fx-libc", 2 * SECONDS + 30)
    time.sleep(0.3)
    pids = [qs.pid, lc.pid]
    dw = t.record("dwarf", SECONDS, pids=pids, measure=pids)
    fp = t.record("fp", SECONDS, pids=pids, extra=["--unwind", "fp"])
    t.kill_processes()

    dw_libs, fp_libs = frame_libs(dw), frame_libs(fp)
    for pid, comm in ((qs.pid, "fx-qsort"), (lc.pid, "fx-libc")):
        t.require(dw.threads_of(pid), f"dwarf: no thread of pid {pid} ({comm})")
        t.require(fp.threads_of(pid), f"fp: no thread of pid {pid} ({comm})")
    q_dw, q_fp = shares(dw, dw_libs, qs.pid), shares(fp, fp_libs, qs.pid)
    l_dw, l_fp = shares(dw, dw_libs, lc.pid), shares(fp, fp_libs, lc.pid)
    t.note(f"fx-qsort dwarf: {describe(q_dw)}")
    t.note(f"fx-qsort fp:    {describe(q_fp)}")
    t.note(f"fx-libc  dwarf: {describe(l_dw)}")
    t.note(f"fx-libc  fp:    {describe(l_fp)}")
    t.note(f"fx-libc's libc leaf functions (dwarf): {leaf_names(dw, dw_libs, lc.pid)}")

    # The workloads do what the test needs: time in cmp_hot and in libc, and
    # at least half the samples their CPU time in the recording gives.
    least = {pid: fxtest.min_samples(dw.cpu_s(pid), fxtest.HZ) for pid in pids}
    t.require(q_dw["n"] >= least[qs.pid] and l_dw["n"] >= least[lc.pid],
              f"too few samples: fx-qsort {q_dw['n']} (at least {least[qs.pid]} for "
              f"{dw.cpu_s(qs.pid):.2f} CPU s), fx-libc {l_dw['n']} (at least {least[lc.pid]} "
              f"for {dw.cpu_s(lc.pid):.2f} CPU s)")
    t.check(q_dw["cmp_hot"] >= 80, f"fx-qsort: cmp_hot in only {q_dw['cmp_hot']:.1f}% of the "
            f"samples, want >= 80 (the callback should be the hot path)")

    # DWARF: the whole path.
    t.check(q_dw["main"] >= 95, f"dwarf: main in only {q_dw['main']:.1f}% of fx-qsort's "
            f"samples, want >= 95; e.g. {example(dw, qs.pid, 'cmp_hot')}")
    t.check(q_dw["path"] >= 0.95 * q_dw["cmp_hot"],
            f"dwarf: main > sort_batch > libc frames > cmp_hot in {q_dw['path']:.1f}% of "
            f"fx-qsort's samples, cmp_hot in {q_dw['cmp_hot']:.1f}%; want >= 95% of the "
            f"latter; e.g. {example(dw, qs.pid, 'cmp_hot')}")
    t.check(l_dw["main"] >= 95, f"dwarf: main in only {l_dw['main']:.1f}% of fx-libc's "
            f"samples, want >= 95; e.g. {example(dw, lc.pid, 'scan_memchr')}")
    for fn, lo in (("memchr", 40), ("strlen", 25)):
        t.check(l_dw[fn] >= lo, f"dwarf: scan_{fn} right above libc's {fn} in only "
                f"{l_dw[fn]:.1f}% of fx-libc's samples, want >= {lo} (about "
                f"{60 if fn == 'memchr' else 40}%); e.g. {example(dw, lc.pid, 'scan_' + fn)}")
    t.check(l_dw["path"] >= 95, f"dwarf: scan_memchr > memchr or scan_strlen > strlen in only "
            f"{l_dw['path']:.1f}% of fx-libc's samples, want >= 95")

    # Frame pointers: libc's frames break the chain. Under qsort the walk stops
    # inside libc (main is lost); from a libc leaf the chain skips one frame
    # (the caller). Far below DWARF, or the workloads no longer test anything.
    t.check(q_fp["main"] < 50, f"fp: main in {q_fp['main']:.1f}% of fx-qsort's samples: "
            "frame pointers should lose it under qsort (does libc keep frame pointers now?)")
    t.check(l_fp["path"] < 50, f"fp: the caller of memchr/strlen named in {l_fp['path']:.1f}% "
            "of fx-libc's samples: frame pointers should skip it")

    # The same through the Firefox Profiler's loader.
    cli = t.cli(dw.path, "dwarf")
    funcs = cli.functions(cli.handles(pid=qs.pid))
    for fn, lo in (("main", 95), ("sort_batch", 80)):
        r = funcs.get(fn)
        if t.check(r is not None, f"profiler-cli (dwarf, fx-qsort): no function {fn}; have "
                   f"{sorted(funcs)[:30]}"):
            t.check(r["totalPercentage"] >= lo, f"profiler-cli (dwarf, fx-qsort): {fn} total "
                    f"{r['totalPercentage']:.1f}%, want >= {lo}")
    tree = cli.top_down(cli.handles(pid=lc.pid))
    for caller, fn in (("scan_memchr", "memchr"), ("scan_strlen", "strlen")):
        found = [node["totalPercentage"] for p, node in fxtest.tree_paths(tree)
                 if len(p) >= 3 and p[-3:-1] == ("main", caller)
                 and node.get("nameWithLibrary", "").startswith(LIBC + "!")]
        t.check(found, f"profiler-cli (dwarf, fx-libc): no main > {caller} > libc's {fn} path")
    fcli = t.cli(fp.path, "fp")
    r = fcli.functions(fcli.handles(pid=qs.pid)).get("main")
    main_fp = r["totalPercentage"] if r else 0.0
    t.note(f"profiler-cli: fx-qsort's main total {main_fp:.1f}% with fp")
    t.check(main_fp < 50, f"profiler-cli (fp, fx-qsort): main total {main_fp:.1f}%, want < 50")


fxtest.main(body)

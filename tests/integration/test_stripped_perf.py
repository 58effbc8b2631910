# SPDX-License-Identifier: MIT
"""Names for stripped binaries, side by side with perf.

fxagent and `perf record -e cpu-clock -F 99 -g` sample the same process over
the same SECONDS (fx-plt: PLT_SECONDS), one program after the other:

- Debian's own stripped binaries (.dynsym only): python3.11 running a
  CPU-bound script, xz compressing text (liblzma), perl running a CPU loop,
  sqlite3 running an indexed query per row of a long recursive CTE. A sample's
  leaf is unnamed when fxagent names it in the fallback form
  "<base>+0x<hex>" (no symbol covers it) and when perf names it "[unknown]".
  For each program:
  * fxagent's unnamed-leaf share is at most perf's plus 3.5 standard errors
    of the difference of two independent samplings of the same share (pooled
    share p, fxagent's n_a and perf's n_p samples:
    3.5 * sqrt(p (1 - p) (1/n_a + 1/n_p))). Both sample the same run at the
    same time, so the run's own phases are common to both and the two
    samplings differ by less than independent ones would: the allowance is
    on the safe side (over 19 comparisons the differences were 0.8 times
    their standard error at the root mean square), and 3.5 standard errors
    leave one false alarm in about 4,000 checks. It is also at least perf's
    minus the same allowance: far fewer unnamed leaves than perf would be
    names perf does not know for that code.
  * in each library fxagent names from .dynsym alone (no .symtab, no debug
    file), every unnamed leaf is named "<base>+0x<file offset>" of the start
    of the FDE that covers its address, as binutils' readelf reads
    .eh_frame (or of the address itself outside every FDE): one frame per
    function, never two functions under one name.
  * in each such library with at least MIN_UNNAMED unnamed leaf samples, the
    distinct unnamed leaf functions are at least 5 times fewer than the
    distinct addresses of those leaves (each address was its own frame
    before the FDE grouping), where the FDEs allow it: when the sampled
    addresses lie in more than a fifth as many functions (sqlite3's unnamed
    code is short static helpers, 4 to 900 bytes: about 3 times fewer
    functions than addresses), the figure and the functions' sizes are
    printed instead; the check above already holds the names to one per
    function.
- fx-plt, whose hot loop calls strlen and memcpy through the PLT: the samples
  whose leaf is `strlen@plt` or `memcpy@plt` have the same share in
  fxagent's profile as in perf's, within 1.5 x 3.5 standard errors of the
  difference (at least 1 point; PLT_SPREAD says why 1.5), a stub that perf
  saw PLT_MIN times or more is in fxagent's profile under that name, and
  every leaf whose address lies
  in a stub (objdump's `<name@plt>` labels) carries that stub's name, and
  only those. perf 6.1 sometimes names a stub `_init+0x<off>` (its `_init`,
  which has no size, is stretched over .plt), so perf's leaves in fx-plt are
  mapped to the stubs by address. A stub is one jump: where its samples land
  depends on the CPU (on the machine this was written on, each stub is 3-5%
  of the leaves with fx-plt's loop; a loop without the flag test before
  strlen left strlen@plt without a sample). When perf sees neither stub
  PLT_MIN times, only the shares are compared and the test says so.

The figures of each program are printed.
"""

import bisect
import collections
import os
import platform
import random
import re
import shutil
import subprocess
import time

import fxtest

SECONDS = 10
# A library's unnamed leaves are compared with their addresses only when it
# has this many: with fewer, most samples fall on an address of their own
# and the ratio says more about the sample count than about the grouping
# (python3.11's 18 functions were 5.3 times fewer than their addresses at
# 144 samples, 6.9 to 11.5 times at 197 to 468).
MIN_UNNAMED = 150
# fx-plt is recorded longer: its stubs are a few percent of the leaves.
PLT_SECONDS = 15
# The stubs' shares differ between fxagent's and perf's samplings of the
# same run more than the binomial error says (unlike the unnamed shares):
# over 28 comparisons (14 runs of 15 s, both CPUs kept busy) the difference
# was 1.2 times its standard error at the root mean square, up to 2.8 times,
# and 3.7 times in one test run; the tolerance is 1.5 times as wide.
PLT_SPREAD = 1.5
# Samples of a PLT stub in perf's profile from which fxagent must show it
# (at the same share, fxagent has none of 10 once in 20,000 runs).
PLT_MIN = 10
# A program is compared only on this many samples from each side (10 s at
# 99 Hz is 990; a busy machine leaves a process fewer).
MIN_SAMPLES = 200

FALLBACK = re.compile(r"^(.+)\+0x[0-9a-f]+$")

PYTHON_SCRIPT = r"""
import sys, time
end = time.monotonic() + float(sys.argv[1])
d = {}
n = 0
while time.monotonic() < end:
    for i in range(2000):
        k = "k%d" % (i % 500)
        d[k] = d.get(k, 0) + i * 3 // 7
        n += len(k)
    s = sorted(d.values())
"""

PERL_SCRIPT = r"""
my $end = time + $ARGV[0];
my (%h, @a);
my $n = 0;
while (time < $end) {
    for my $i (1 .. 2000) {
        my $k = sprintf("k%03d", $i % 701);
        $h{$k} += $i * 3;
        my $s = join("-", $k, $i, $h{$k});
        $n += length($s) if $s =~ /^k(\d+)-(\d+)/;
        push @a, substr($s, 0, 6);
    }
    @a = sort @a;
    splice(@a, 100);
}
"""

# An index range scan and two printf calls per row of a CTE that outlasts the
# recording (the process is killed after it).
SQLITE_SQL = """
CREATE TABLE t(a INTEGER PRIMARY KEY, b TEXT);
WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 100000)
  INSERT INTO t SELECT x, hex(randomblob(8)) FROM c;
CREATE INDEX tb ON t(b);
WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 1000000000)
  SELECT sum((SELECT count(*) FROM t
              WHERE b BETWEEN printf('%08X', x * 2654435761 % 4294967296)
                          AND printf('%08X', x * 2654435761 % 4294967296 + 200000)))
  FROM c;
"""


def words_file(t):
    """About 26 MB of text of made-up words, which xz -6 compresses in its match
    finders and coders (random bytes would take its incompressible path, a
    few functions only): 19 s of xz here on a quiet machine."""
    rnd = random.Random(1)
    words = ["".join(rnd.choice("etaoinshrdlucmfwyp") for _ in range(rnd.randint(2, 9)))
             for _ in range(5000)]
    path = os.path.join(t.work, "words.txt")
    with open(path, "w") as f:
        for _ in range(200):
            f.write(" ".join(rnd.choices(words, k=20000)) + "\n")
    return path


def programs(t, seconds=60):
    """(tag, argv, input) of each Debian program this machine has; input is
    text for stdin, or a list of files cat feeds to stdin, or None. The
    scripts run @seconds; xz and sqlite3 as long as their input lasts."""
    out = []
    for exe in ("/usr/bin/python3.11", "/usr/bin/xz", "/usr/bin/perl", "/usr/bin/sqlite3"):
        if not os.access(exe, os.X_OK):
            t.note(f"no {exe} on this machine: left out (scripts/install-test-deps.sh "
                   "installs it)")
    if os.access("/usr/bin/python3.11", os.X_OK):
        out.append(("python3", ["/usr/bin/python3.11", "-I", "-c", PYTHON_SCRIPT, str(seconds)], None))
    if os.access("/usr/bin/xz", os.X_OK):
        # The text 4 times over: xz outlasts the recording on a machine much
        # faster than this one, and each copy is farther back than -6's
        # 8 MiB dictionary reaches, so it is compressed as new text again.
        out.append(("xz", ["/usr/bin/xz", "-6", "-T1", "-c"], [words_file(t)] * 4))
    if os.access("/usr/bin/perl", os.X_OK):
        out.append(("perl", ["/usr/bin/perl", "-e", PERL_SCRIPT, str(seconds)], None))
    if os.access("/usr/bin/sqlite3", os.X_OK):
        out.append(("sqlite3", ["/usr/bin/sqlite3", ":memory:"], SQLITE_SQL))
    return out


def record_both(t, tag, pid, seconds=SECONDS):
    """fxagent and perf on @pid for @seconds, at the same time: (Profile, the
    perf.data path)."""
    data = os.path.join(t.work, f"{tag}.perf.data")
    with open(os.path.join(t.work, f"{tag}.perf.log"), "w") as log:
        perf = t.spawn(["perf", "record", "-q", "-e", "cpu-clock", "-F", "99", "-g",
                        "-p", str(pid), "-o", data, "--", "sleep", str(seconds)],
                       stdout=subprocess.DEVNULL, stderr=log)
    prof = t.record(tag, seconds, pids=[pid])
    try:
        rc = perf.wait(timeout=fxtest.scaled(60))
    except subprocess.TimeoutExpired:
        raise fxtest.Stop(f"{tag}: perf record did not end")
    t.require(rc == 0, f"{tag}: perf record exited {rc}; see {tag}.perf.log")
    return prof, data


def perf_leaves(t, tag, data):
    """[(sym, offset or None, dso, ip)] of every sample's leaf, from perf script."""
    p = subprocess.run(["perf", "script", "-i", data, "-G", "-F", "ip,sym,symoff,dso"],
                       capture_output=True, text=True, timeout=fxtest.scaled(120))
    t.save(f"{tag}.perf-script.txt", p.stdout + p.stderr)
    t.require(p.returncode == 0, f"{tag}: perf script exited {p.returncode}")
    out = []
    for line in p.stdout.splitlines():
        line = line.strip()
        if not line:
            continue
        head, sep, dso = line.rpartition(" (")
        ip, _, sym = head.partition(" ")
        t.require(sep and dso.endswith(")") and re.fullmatch(r"[0-9a-f]+", ip),
                  f"{tag}: perf script line not understood: {line!r}")
        sym = sym.strip()
        m = re.fullmatch(r"(.+)\+0x([0-9a-f]+)", sym)
        off = None
        if m and sym != "[unknown]":
            sym, off = m.group(1), int(m.group(2), 16)
        out.append((sym, off, dso[:-1], int(ip, 16)))
    return out


def agent_leaves(prof, pid):
    """[(name, lib, frame address, weight)] of the leaf of each of @pid's samples;
    lib is the profile's libs entry (a dict) or None (kernel)."""
    shared = prof.data["shared"]
    frame_addr = shared["frameTable"]["address"]
    func_res = shared["funcTable"]["resource"]
    res_lib = shared["resourceTable"]["lib"]
    libs = prof.data["libs"]
    out = []
    for th in prof.threads_of(pid):
        for st, w in prof.samples(th):
            frames = prof.stack_frames(st)
            if frames:
                f = frames[-1]
                func = prof.frame_func[f]
                r = func_res[func]
                lib = libs[res_lib[r]] if r is not None and res_lib[r] is not None else None
                out.append((prof.func_names[func], lib, frame_addr[f], w))
    return out


def load_segments(path):
    """(base, [(vaddr, offset, filesz)] of the executable PT_LOADs) of @path:
    base is what fxagent's frame addresses are relative to, the first PT_LOAD's
    address page-aligned down."""
    out = subprocess.run(["readelf", "-lW", path], capture_output=True, text=True,
                         check=True).stdout
    loads, code = [], []
    for line in out.splitlines():
        p = line.split()
        if p[:1] == ["LOAD"]:
            loads.append(int(p[2], 16))
            if "E" in p[6:-1]:
                code.append((int(p[2], 16), int(p[1], 16), int(p[4], 16)))
    return (min(loads) & ~0xfff if loads else 0), code


def fde_ranges(path):
    """Sorted [(start, end)] of the FDEs of @path's .eh_frame, as binutils reads them."""
    out = subprocess.run(["readelf", "--debug-dump=frames", path], capture_output=True,
                         text=True, check=True).stdout
    return sorted((int(a, 16), int(b, 16))
                  for a, b in re.findall(r" FDE .*pc=([0-9a-f]+)\.\.([0-9a-f]+)", out))


def build_id(path):
    """The GNU build-id of @path in hex ("" if none), from readelf."""
    out = subprocess.run(["readelf", "-n", path], capture_output=True, text=True).stdout
    m = re.search(r"Build ID: ([0-9a-f]+)", out)
    return m.group(1) if m else ""


def stripped_object(path, build_id):
    """Whether fxagent names @path's code from .dynsym alone: no .symtab in it
    and no debug file under /usr/lib/debug/.build-id."""
    if build_id and os.path.exists(f"/usr/lib/debug/.build-id/{build_id[:2]}/"
                                   f"{build_id[2:]}.debug"):
        return False
    out = subprocess.run(["readelf", "-SW", path], capture_output=True, text=True,
                         check=True).stdout
    return " .symtab " not in out


def expected_names(path, addrs):
    """{frame address: the name fxagent should give it}: its FDE's start as
    "<base>+0x<file offset>", or the address's own offset outside every FDE."""
    base, segs = load_segments(path)
    fdes = fde_ranges(path)
    starts = [a for a, _ in fdes]
    name = os.path.basename(path)

    def offset(v):
        for vaddr, off, size in segs:
            if vaddr <= v < vaddr + size:
                return v - vaddr + off
        return None

    out = {}
    for addr in addrs:
        v = addr + base
        i = bisect.bisect_right(starts, v) - 1
        at = fdes[i][0] if i >= 0 and v < fdes[i][1] else v
        off = offset(at)
        out[addr] = f"{name}+{off:#x}" if off is not None else None
    return out


def fde_sizes(path, names):
    """Sizes of the FDEs that start where the "<base>+0x<offset>" @names say."""
    _, segs = load_segments(path)
    size = {}
    for a, b in fde_ranges(path):
        for vaddr, off, n in segs:
            if vaddr <= a < vaddr + n:
                size[a - vaddr + off] = b - a
    offs = {int(n.rsplit("+0x", 1)[1], 16) for n in names if n}
    return sorted((size.get(o, 0) for o in offs), reverse=True)


def allowance(k_a, n_a, k_p, n_p):
    """3.5 standard errors (points) of the difference of two shares that measure
    the same thing: k_a of n_a and k_p of n_p samples, pooled."""
    p = (k_a + k_p) / (n_a + n_p)
    return 3.5 * 100 * (p * (1 - p) * (1 / n_a + 1 / n_p)) ** 0.5


def check_program(t, tag, argv, feed):
    if isinstance(feed, list):
        cat = t.spawn(["cat", *feed], stdout=subprocess.PIPE)
        p = t.spawn(argv, stdin=cat.stdout, stdout=subprocess.DEVNULL)
        cat.stdout.close()
    else:
        p = t.spawn(argv, stdin=subprocess.PIPE if feed else subprocess.DEVNULL,
                    stdout=subprocess.DEVNULL, text=True)
        if feed:
            p.stdin.write(feed)
            p.stdin.close()
    time.sleep(0.5)
    t.require(p.poll() is None, f"{tag}: {argv[0]} exited {p.returncode} before the recording")
    prof, data = record_both(t, tag, p.pid)
    still = p.poll() is None
    p.kill()
    p.wait()
    t.check(still, f"{tag}: {argv[0]} ended before the recording did (exit {p.returncode})")

    agent = agent_leaves(prof, p.pid)
    perf = perf_leaves(t, tag, data)
    n_a = sum(w for *_, w in agent)
    n_p = len(perf)
    t.require(n_a >= MIN_SAMPLES and n_p >= MIN_SAMPLES,
              f"{tag}: too few samples to compare: fxagent {n_a}, perf {n_p}")

    # fxagent's unnamed leaves by library: their names and addresses.
    names = collections.defaultdict(collections.Counter)
    addrs = collections.defaultdict(set)
    name_of = collections.defaultdict(dict)
    lib_of = {}
    for name, lib, addr, w in agent:
        if FALLBACK.match(name):
            key = lib["name"] if lib else "[kernel]"
            names[key][name] += w
            addrs[key].add(addr)
            name_of[key][addr] = name
            lib_of[key] = lib
    k_a = sum(sum(c.values()) for c in names.values())
    perf_unnamed = collections.defaultdict(set)
    perf_count = collections.Counter()
    for sym, _, dso, ip in perf:
        if sym == "[unknown]":
            perf_unnamed[os.path.basename(dso)].add(ip)
            perf_count[os.path.basename(dso)] += 1
    k_p = sum(perf_count.values())
    share_a, share_p = 100.0 * k_a / n_a, 100.0 * k_p / n_p
    tol = allowance(k_a, n_a, k_p, n_p)
    t.note(f"{tag}: unnamed leaf share: fxagent {share_a:.1f}% ({k_a} of {n_a}), perf "
           f"{share_p:.1f}% ({k_p} of {n_p}); allowance {tol:.1f} points")
    t.check(share_a <= share_p + tol,
            f"{tag}: fxagent leaves {share_a:.1f}% of samples unnamed, perf {share_p:.1f}%: "
            f"more than {tol:.1f} points over")
    # Far fewer than perf would be names perf does not know for this code: a
    # symbol stretched over code that is not its own.
    t.check(share_a >= share_p - tol,
            f"{tag}: fxagent leaves {share_a:.1f}% of samples unnamed, perf {share_p:.1f}%: "
            f"more than {tol:.1f} points under")

    for key in sorted(set(names) | set(perf_count), key=lambda k: -sum(names[k].values())):
        k = sum(names[key].values())
        nf, na = len(names[key]), len(addrs[key])
        t.note(f"{tag}: {key}: fxagent {k} unnamed leaf samples in {nf} functions at {na} "
               f"distinct addresses ({na / max(nf, 1):.1f}x); perf {perf_count[key]} at "
               f"{len(perf_unnamed[key])} addresses")
        lib = lib_of.get(key)
        if not lib or not os.path.isfile(lib["path"]) or \
                not stripped_object(lib["path"], lib.get("codeId")):
            continue
        if lib.get("codeId") and build_id(lib["path"]) != lib["codeId"]:
            # An upgrade replaced the file while the process ran.
            t.note(f"{tag}: {lib['path']} on disk is not the file that was mapped "
                   f"(build-id {lib['codeId']}): its names are not compared")
            continue
        want = expected_names(lib["path"], addrs[key])
        wrong = [(hex(a), name_of[key][a], want[a]) for a in sorted(addrs[key])
                 if name_of[key][a] != want[a]]
        t.check(not wrong, f"{tag}: {key}: {len(wrong)} of {na} unnamed leaf addresses not "
                f"named after the FDE that covers them (address, name, want): {wrong[:8]}")
        if k < MIN_UNNAMED:
            continue
        # The functions (FDEs) the sampled addresses are in: no grouping by
        # function can give fewer frames than these.
        best = len(set(want.values()))
        if na >= 5 * best:
            t.check(na >= 5 * nf, f"{tag}: {key}: {nf} unnamed leaf functions for only {na} "
                    "distinct addresses (want 5 times as many addresses)")
        else:
            t.note(f"{tag}: {key}: 5x fewer frames than addresses is out of reach here: the "
                   f"{na} addresses lie in {best} functions by .eh_frame (sizes "
                   f"{fde_sizes(lib['path'], want.values())} bytes, largest first)")


def stub_labels(exe):
    """{address: "name@plt"} of the stubs objdump labels in @exe."""
    out = subprocess.run(["objdump", "-d", "--no-show-raw-insn", exe], capture_output=True,
                         text=True, check=True).stdout
    return {int(m.group(1), 16): m.group(2)
            for m in re.finditer(r"^([0-9a-f]+) <([^>]+@plt)>:", out, re.M)}


def symbol_addresses(exe):
    """{name: address} of @exe's symbols, from nm."""
    out = subprocess.run(["nm", "--defined-only", exe], capture_output=True, text=True,
                         check=True).stdout
    got = {}
    for line in out.splitlines():
        p = line.split()
        if len(p) == 3:
            got.setdefault(p[2], int(p[0], 16))
    return got


def check_plt(t):
    exe = os.path.join(t.workloads, "fx-plt")
    stubs = stub_labels(exe)
    calls = subprocess.run(["objdump", "-d", "--no-show-raw-insn", exe], capture_output=True,
                           text=True, check=True).stdout
    body = calls.split("<copy_round>:", 1)[-1].split("\n\n", 1)[0]
    for want in ("strlen@plt", "memcpy@plt"):
        t.require(re.search(rf"call\s+[0-9a-f]+ <{re.escape(want)}>", body),
                  f"fx-plt: copy_round does not call {want}: {body[:1500]}")
    by_name = {v: k for k, v in stubs.items()}
    syms = symbol_addresses(exe)

    w = t.workload("fx-plt", PLT_SECONDS + 30)
    time.sleep(0.3)
    prof, data = record_both(t, "plt", w.pid, PLT_SECONDS)
    t.kill_processes()

    agent = agent_leaves(prof, w.pid)
    n_a = sum(x[-1] for x in agent)
    perf = perf_leaves(t, "plt", data)
    n_p = len(perf)
    t.require(n_a >= MIN_SAMPLES and n_p >= MIN_SAMPLES,
              f"plt: too few samples to compare: fxagent {n_a}, perf {n_p}")
    a_count = collections.Counter()
    a_addrs = collections.defaultdict(set)
    misnamed = set()
    for name, lib, addr, wt in agent:
        if name.endswith("@plt"):
            a_count[name] += wt
            a_addrs[name].add(addr)
        # fx-plt is a PIE: its frame addresses are objdump's.
        in_stub = stubs.get(addr // 16 * 16) if lib and lib["name"] == "fx-plt" else None
        if (in_stub or name.endswith("@plt")) and name != in_stub:
            misnamed.add((hex(addr), name, in_stub))
    t.check(not misnamed, f"plt: leaves named otherwise than the stub their address is in "
            f"(address, name, objdump's stub): {sorted(misnamed)[:8]}")
    p_count = collections.Counter()
    renamed = collections.Counter()
    for sym, off, dso, _ in perf:
        if os.path.basename(dso) != "fx-plt":
            continue
        if sym.endswith("@plt"):
            p_count[sym] += 1
        elif sym in syms and off is not None:
            stub = stubs.get(((syms[sym] + off) // 16) * 16)
            if stub:
                p_count[stub] += 1
                renamed[f"{sym}+{off:#x} -> {stub}"] += 1
    if renamed:
        t.note(f"plt: perf named stubs otherwise: {dict(renamed)}")
    seen = 0
    for stub in ("strlen@plt", "memcpy@plt"):
        k_a, k_p = a_count[stub], p_count[stub]
        share_a, share_p = 100.0 * k_a / n_a, 100.0 * k_p / n_p
        tol = max(1.0, PLT_SPREAD * allowance(k_a, n_a, k_p, n_p))
        t.note(f"plt: {stub} leaf share: fxagent {share_a:.2f}% ({k_a} of {n_a}, frame "
               f"addresses {sorted(hex(a) for a in a_addrs[stub])}), perf {share_p:.2f}% "
               f"({k_p} of {n_p}); stub at {by_name[stub]:#x}; tolerance {tol:.1f} points")
        t.check(abs(share_a - share_p) <= tol,
                f"plt: {stub}: fxagent {share_a:.2f}% of leaves, perf {share_p:.2f}%: more "
                f"than {tol:.1f} points apart")
        if k_p >= PLT_MIN:
            seen += 1
            t.check(k_a > 0, f"plt: perf has {k_p} samples in {stub}, fxagent none by that "
                    "name")
    others = {k: v for k, v in a_count.items() if k not in ("strlen@plt", "memcpy@plt")}
    if others:
        t.note(f"plt: other stubs as leaves in fxagent's profile: {others}")
    if not seen:
        t.note(f"plt: perf saw neither stub {PLT_MIN} times in {n_p} samples: only the "
               "shares were compared")


def body(t):
    t.require(shutil.which("perf"), "no perf (scripts/install-test-deps.sh installs linux-perf)")
    started = time.monotonic()
    for tag, argv, feed in programs(t):
        check_program(t, tag, argv, feed)
    if platform.machine() == "x86_64":
        check_plt(t)
    else:
        t.note("not x86-64: PLT stubs are named on x86-64 only; the PLT check is left out")
    t.note(f"recordings and checks took {time.monotonic() - started:.1f} s")


if __name__ == "__main__":
    fxtest.main(body)

#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Writes the seed inputs of fuzz_record, fuzz_json and fuzz_jitdump into ../corpus/.

The formats are described at the top of ../fuzz_record.c and ../fuzz_json.c.
Run it again after changing them; the output is deterministic.
"""
import os
import struct

HERE = os.path.dirname(os.path.abspath(__file__))
CORPUS = os.path.join(HERE, "..", "corpus")

# ---- perf records -----------------------------------------------------------

# Bit i of the seed's u16 selects TYPE_BITS[i] (as type_bits[] in fuzz_record.c).
IDENTIFIER, IP, TID, TIME, ADDR, ID, STREAM_ID, CPU, PERIOD, CALLCHAIN, \
    REGS_USER, STACK_USER, READ, RAW, BRANCH_STACK, WEIGHT = range(16)

REC_MMAP, REC_LOST, REC_COMM, REC_EXIT = 1, 2, 3, 4
REC_FORK, REC_SAMPLE, REC_MMAP2, REC_LOST_SAMPLES = 7, 9, 10, 13
MISC_USER, MISC_KERNEL = 2, 1
MISC_COMM_EXEC = MISC_MMAP_BUILD_ID = 1 << 13
MISC_MMAP_DATA = 1 << 13  # on MMAP2 records without the build-id bit
CONTEXT_KERNEL = 0xFFFFFFFFFFFFFF80
CONTEXT_USER = 0xFFFFFFFFFFFFFE00
AGENT_REGS = 0xFF01FF  # FX_DWUNWIND_REGS_MASK


class Fmt:
    def __init__(self, bits, id_all=True, regs=0):
        self.bits = set(bits)
        self.id_all = id_all
        self.regs = regs

    def mask(self):
        return sum(1 << b for b in self.bits)

    def trailer(self, pid, tid, time, cpu):
        if not self.id_all:
            return b""
        out = b""
        if TID in self.bits:
            out += struct.pack("<II", pid, tid)
        if TIME in self.bits:
            out += struct.pack("<Q", time)
        if ID in self.bits:
            out += struct.pack("<Q", 42)
        if STREAM_ID in self.bits:
            out += struct.pack("<Q", 43)
        if CPU in self.bits:
            out += struct.pack("<II", cpu, 0)
        if IDENTIFIER in self.bits:
            out += struct.pack("<Q", 42)
        return out


def record(rtype, misc, body):
    size = 8 + len(body)
    assert size % 8 == 0 and size < 65536, size
    return struct.pack("<IHH", rtype, misc, size) + body


def cstr(s):
    b = s.encode() + b"\0"
    return b + b"\0" * (-len(b) % 8)


def sample(fmt, pid, tid, time, ips, stack=b"", dyn=None, cpu=1):
    b = b""
    if IDENTIFIER in fmt.bits:
        b += struct.pack("<Q", 42)
    if IP in fmt.bits:
        b += struct.pack("<Q", ips[-1] if ips else 0)
    if TID in fmt.bits:
        b += struct.pack("<II", pid, tid)
    if TIME in fmt.bits:
        b += struct.pack("<Q", time)
    if ADDR in fmt.bits:
        b += struct.pack("<Q", 0xDEAD0000)
    if ID in fmt.bits:
        b += struct.pack("<Q", 42)
    if STREAM_ID in fmt.bits:
        b += struct.pack("<Q", 43)
    if CPU in fmt.bits:
        b += struct.pack("<II", cpu, 0)
    if PERIOD in fmt.bits:
        b += struct.pack("<Q", 10101010)
    if CALLCHAIN in fmt.bits:
        b += struct.pack("<Q", len(ips)) + b"".join(struct.pack("<Q", i) for i in ips)
    if REGS_USER in fmt.bits:
        n = bin(fmt.regs).count("1")
        b += struct.pack("<Q", 2) + b"".join(struct.pack("<Q", 0x7FFC0000 + 8 * i)
                                             for i in range(n))
    if STACK_USER in fmt.bits:
        b += struct.pack("<Q", len(stack)) + stack
        if stack:
            b += struct.pack("<Q", len(stack) if dyn is None else dyn)
    return record(REC_SAMPLE, MISC_USER, b)


def mmap2(fmt, pid, start, length, pgoff, path, build_id=None, data=False, time=1):
    b = struct.pack("<IIQQQ", pid, pid, start, length, pgoff)
    misc = MISC_USER
    if build_id is not None:
        misc |= MISC_MMAP_BUILD_ID
        b += struct.pack("<BBH", len(build_id), 0, 0) + build_id.ljust(20, b"\0")
    else:
        misc |= MISC_MMAP_DATA if data else 0
        b += struct.pack("<IIQQ", 8, 1, 123456, 0)
    b += struct.pack("<II", 5, 2) + cstr(path)
    return record(REC_MMAP2, misc, b + fmt.trailer(pid, pid, time, 0))


def comm(fmt, pid, tid, name, exec_=True, time=2):
    b = struct.pack("<II", pid, tid) + cstr(name)
    return record(REC_COMM, MISC_COMM_EXEC if exec_ else 0, b + fmt.trailer(pid, tid, time, 0))


def task(fmt, rtype, pid, ppid, time=3):
    b = struct.pack("<IIIIQ", pid, ppid, pid, ppid, time)
    return record(rtype, 0, b + fmt.trailer(pid, pid, time, 0))


def lost(fmt, rtype, n, time=4):
    b = (struct.pack("<Q", 7) if rtype == REC_LOST else b"") + struct.pack("<Q", n)
    return record(rtype, 0, b + fmt.trailer(0, 0, time, 0))


def ring_seed(fmt, records, order, tail, split=None, flags=0):
    """The ring (64 << order bytes) with @records written from position @tail
    on, wrapping; round 1 publishes the first @split records."""
    size = 64 << order
    assert tail % 8 == 0, "the reader's position is always 8-aligned"
    ring = bytearray(size)
    pos = tail
    data = b"".join(records)
    assert len(data) <= size, (len(data), size)
    for byte in data:
        ring[pos % size] = byte
        pos += 1
    split = len(records) if split is None else split
    avail1 = sum(len(r) for r in records[:split])
    avail2 = len(data) - avail1
    flags |= 1 if fmt.id_all else 0
    head = struct.pack("<HBBIIQQ", fmt.mask(), flags, order, avail1, avail2, fmt.regs,
                       tail % (1 << 64))
    assert len(head) == 28
    # The target zero-fills a short ring: trailing zeros need not be stored.
    return head + bytes(ring).rstrip(b"\0")


def record_seeds():
    fp = Fmt([IP, TID, TIME, CPU, PERIOD, CALLCHAIN])
    dw = Fmt([IDENTIFIER, IP, TID, TIME, CPU, PERIOD, CALLCHAIN, REGS_USER, STACK_USER],
             regs=AGENT_REGS)
    allbits = Fmt([IDENTIFIER, IP, TID, TIME, ADDR, ID, STREAM_ID, CPU, PERIOD, CALLCHAIN,
                   REGS_USER, STACK_USER], regs=0x3)
    kchain = [CONTEXT_KERNEL, 0xFFFFFFFF81000010, 0xFFFFFFFF81000020, CONTEXT_USER,
              0x401000, 0x401100, 0x7F0000001234]
    side = lambda f: [
        comm(f, 100, 100, "fx-hot-ab"),
        mmap2(f, 100, 0x400000, 0x2000, 0, "/usr/bin/fx-hot-ab",
              build_id=bytes(range(1, 21))),
        mmap2(f, 100, 0x7F0000000000, 0x200000, 0x1000,
              "/usr/lib/x86_64-linux-gnu/libc.so.6"),
        mmap2(f, 100, 0x7F1000000000, 0x1000, 0, "/tmp/data", data=True),
        task(f, REC_FORK, 101, 100),
        comm(f, 101, 101, "worker", exec_=False),
        task(f, REC_EXIT, 101, 100),
        lost(f, REC_LOST, 3),
        lost(f, REC_LOST_SAMPLES, 5),
    ]
    seeds = {}
    recs = side(fp) + [sample(fp, 100, 100, 1000 + i, kchain[: 3 + i]) for i in range(4)]
    seeds["fp-in-order"] = ring_seed(fp, recs, 5, 0)
    # The same records starting near the end of the ring: some wrap, headers too.
    seeds["fp-wrapping"] = ring_seed(fp, recs, 5, 2048 - 24, split=5, flags=2)
    # Positions near 2^64: head and tail wrap the counter itself.
    seeds["fp-u64-wrap"] = ring_seed(fp, recs, 5, (1 << 64) - 96, split=3)
    stack = bytes(range(256)) * 4
    recs = side(dw) + [sample(dw, 100, 100, 2000, kchain, stack=stack, dyn=600),
                       sample(dw, 100, 100, 2001, [], stack=b""),
                       sample(dw, 100, 100, 2002, kchain[3:], stack=stack[:64])]
    seeds["dwarf-mode"] = ring_seed(dw, recs, 6, 4096 - 8, split=4)
    seeds["all-fields"] = ring_seed(allbits, side(allbits) + [
        sample(allbits, 1, 2, 3, kchain, stack=b"\x11" * 40, dyn=8)], 5, 512)
    noid = Fmt([IP, TID, TIME, CALLCHAIN], id_all=False)
    seeds["no-sample-id-all"] = ring_seed(noid, side(noid) + [sample(noid, 5, 6, 7, [1, 2])], 4,
                                          0)
    # A sample with a field the agent never asks for: refused, not misread.
    raw = Fmt([IP, TID, RAW])
    seeds["unsupported-type"] = ring_seed(raw, [record(REC_SAMPLE, 0, b"\0" * 32)], 0, 0)
    # Records whose sizes lie: too small, larger than what was published,
    # larger than the ring.
    bogus = struct.pack("<IHH", REC_SAMPLE, 0, 4) + b"\0" * 8
    seeds["size-too-small"] = ring_seed(fp, [comm(fp, 1, 1, "a"), bogus], 1, 0)
    big = struct.pack("<IHH", REC_COMM, 0, 4096) + b"\0" * 56
    seeds["size-past-head"] = ring_seed(fp, [comm(fp, 1, 1, "a"), big], 1, 0)
    # Lengths inside records that lie: a callchain longer than the record,
    # a stack larger than the record, dyn_size above size, an unterminated name.
    lie = bytearray(sample(fp, 1, 1, 1, [1, 2, 3]))
    struct.pack_into("<Q", lie, 8 + 8 + 8 + 8 + 8 + 8, 1000)
    lie_stack = bytearray(sample(dw, 1, 1, 1, [], stack=b"\0" * 64))
    struct.pack_into("<Q", lie_stack, len(lie_stack) - 8 - 64 - 8, 1 << 40)
    lie_dyn = sample(dw, 1, 1, 1, [], stack=b"\0" * 64, dyn=65)
    unterminated = bytearray(comm(noid, 1, 1, "abcdefg"))
    unterminated[16:24] = b"ABCDEFGH"
    seeds["lying-lengths"] = ring_seed(fp, [bytes(lie), bytes(lie_stack), lie_dyn,
                                            bytes(unterminated)], 4, 0)
    seeds["lying-lengths-dw"] = ring_seed(dw, [bytes(lie_stack), lie_dyn], 4, 0)
    # A ring of 64 bytes with records wrapping around its end, and an init
    # with a size that is no power of two.
    tiny = [lost(noid, REC_LOST, 1), task(noid, REC_EXIT, 2, 1)]
    seeds["tiny-ring"] = ring_seed(noid, tiny, 0, 56)
    seeds["bad-ring-size"] = ring_seed(fp, [lost(fp, REC_LOST, 1)], 2, 0, flags=4)
    # Unknown record types are skipped whole.
    seeds["unknown-types"] = ring_seed(fp, [record(99, 0, b"\xff" * 24),
                                            record(REC_MMAP, 0, b"\0" * 40),
                                            lost(fp, REC_LOST_SAMPLES, 9)], 3, 104)
    return seeds


# ---- JSON writer programs ---------------------------------------------------

OBJ, OBJ_END, ARR, ARR_END, KEY, STR, NUM, OTHER = range(8)


def key(b):
    b = b if isinstance(b, bytes) else b.encode()
    if len(b) > 255:
        return bytes([KEY | 0x10]) + struct.pack("<H", len(b)) + b
    return bytes([KEY, len(b)]) + b


def string(b, via_strlen=False, null=False):
    b = b if isinstance(b, bytes) else b.encode()
    op = STR | (0x40 if via_strlen else 0) | (0x80 if null else 0)
    if len(b) > 255:
        return bytes([op | 0x10]) + struct.pack("<H", len(b)) + b
    return bytes([op, len(b)]) + b


def num_int(v):
    return bytes([NUM]) + struct.pack("<q", v)


def num_uint(v):
    return bytes([NUM | 0x40]) + struct.pack("<Q", v)


def num_double(v):
    return bytes([NUM | 0x80]) + struct.pack("<d", v)


def boolean(v):
    return bytes([OTHER | (0x20 if v else 0)])


J_NULL = bytes([OTHER | 0x40])
J_RAW = bytes([OTHER | 0x80])


def long_string(b):
    return bytes([0xFF, len(b)]) + b


NAMES = [
    b"plain", "h\u00e9llo \u65e5\u672c\u8a9e \U0001F600".encode(),
    b"quote\" backslash\\ slash/", b"\x00\x01\x08\x09\x0a\x0c\x0d\x1f\x7f",
    b"\xff", b"\xc0\xaf", b"\xc2", b"\xe0\x80\x80", b"\xe0\xa0", b"\xed\xa0\x80",
    b"\xed\x9f\xbf", b"\xef\xbf\xbf", b"\xf0\x8f\xbf\xbf", b"\xf0\x90\x80\x80",
    b"\xf4\x8f\xbf\xbf", b"\xf4\x90\x80\x80", b"\xf5\x80\x80\x80", b"\xe2\x82\xac\xe2\x82",
    b"a\x80b\xbfc", b"_ZN6fxseed7Counter3runEi", b"<unknown>+0x1234",
]


def json_seeds():
    seeds = {}
    doc = bytes([0]) + bytes([OBJ]) + key("meta") + bytes([OBJ]) + key("interval") + \
        num_double(1000.0 / 99) + key("version") + num_int(-66) + key("startTime") + \
        num_uint((1 << 64) - 1) + key("flag") + boolean(True) + key("none") + J_NULL + \
        bytes([OBJ_END]) + key("names") + bytes([ARR])
    for n in NAMES:
        doc += string(n)
    doc += string(b"cut\0here", via_strlen=True) + string(b"", null=True) + J_RAW
    doc += bytes([ARR_END]) + key(b"k\xffey\x01") + num_double(-0.0) + bytes([OBJ_END])
    seeds["profile-like"] = doc
    nums = bytes([0, ARR])
    for v in [0.1, 1e300, -1e-300, 5e-324, 2.0 ** 53, 123456789.125, float("inf"),
              float("nan"), 1 / 3]:
        nums += num_double(v)
    for v in [0, -1, (1 << 63) - 1, -(1 << 63)]:
        nums += num_int(v)
    seeds["numbers"] = nums + num_uint(1 << 63) + bytes([ARR_END])
    seeds["long-string"] = bytes([0, ARR]) + long_string("\u00e9\u65e5".encode()) + \
        bytes([ARR_END])
    seeds["long-string-cut"] = bytes([0, ARR]) + long_string(b"\xe2\x82\"\\\x01") + \
        bytes([ARR_END])
    seeds["sink-fails"] = bytes([0x80 | 3, ARR]) + long_string(b"abcdefgh") + bytes([ARR_END])
    seeds["deep"] = bytes([0]) + bytes([ARR]) * 70 + bytes([ARR_END]) * 70
    seeds["deep-objects"] = bytes([0]) + (bytes([OBJ]) + key("a")) * 63 + J_NULL + \
        bytes([OBJ_END]) * 63
    # Mistakes: a value where a key is due, a key in an array, unbalanced
    # ends, a second top-level value, a NULL key.
    seeds["value-without-key"] = bytes([0, OBJ]) + string(b"x") + bytes([OBJ_END])
    seeds["key-in-array"] = bytes([0, ARR]) + key("k") + bytes([ARR_END])
    seeds["unbalanced"] = bytes([0, ARR, OBJ_END])
    seeds["unclosed"] = bytes([0, OBJ]) + key("k") + bytes([ARR])
    seeds["two-values"] = bytes([0]) + num_int(1) + num_int(2)
    seeds["null-key"] = bytes([0, OBJ, KEY | 0x80, 0, OBJ_END])
    seeds["dangling-key"] = bytes([0, OBJ]) + key("k") + bytes([OBJ_END])
    seeds["empty"] = bytes([0])
    return seeds


# CPython 3.13.0's unwinding info for its 11-byte trampoline (read from a
# -X perf_jit dump): .eh_frame (CIE, FDE), then .eh_frame_hdr.
CPY_EH = bytes.fromhex("1400000000000000017a5200017810011b0c0708900100001400"
                       "00001c000000d0ffffff0b00000000440e10460e0800")
CPY_HDR = bytes.fromhex("011b033bccffffff01000000c0ffffffe8ffffff")


def jd_header(pid=42):
    return struct.pack("<IIIIIIQQ", 0x4A695444, 1, 40, 62, 0, pid, 1, 0)


def jd_record(rid, body):
    pad = (8 - (16 + len(body)) % 8) % 8
    return struct.pack("<IIQ", rid, 16 + len(body) + pad, 1000) + body + bytes(pad)


def jd_load(addr, size, index, name):
    return jd_record(0, struct.pack("<IIQQQQ", 1, 1, addr, addr, size, index) + name + b"\0" +
                     b"\xcc" * size)


def jd_unwind(eh=CPY_EH, hdr=CPY_HDR):
    return jd_record(4, struct.pack("<QQQ", len(eh) + len(hdr), len(hdr), 80) + eh + hdr)


def jitdump_seeds():
    addrs = struct.pack("<QQQ", 0x7000005, 0x7000115, 0x8000010)
    cpython = jd_header() + jd_unwind() + jd_load(0x7000000, 11, 1, b"py::fib:/srv/fib.py") + \
        jd_unwind() + jd_load(0x7000110, 11, 2, b"py::work:/srv/fib.py")
    v8 = jd_header() + jd_load(0x8000000, 64, 1, b"JS:^fib /srv/fib.js:1:13") + \
        jd_record(2, struct.pack("<QQ", 0x8000000, 0)) + \
        jd_load(0x8000000, 32, 2, b"JS:*fib /srv/fib.js:1:13") + \
        jd_record(1, struct.pack("<IIQQQQQ", 1, 1, 0x7000100, 0x8000000, 0x7000100, 32, 2))
    seeds = {
        "cpython": bytes([3]) + addrs + cpython,
        "v8": bytes([3]) + addrs + v8,
        "partial": bytes([3]) + addrs + cpython[:-5],
        "bad-frame": bytes([3]) + addrs + jd_header() + struct.pack("<IIQ", 0, 8, 0) + v8[40:],
        "bad-cfi": bytes([1]) + addrs[:8] + jd_header() + jd_unwind(CPY_EH[:20], CPY_HDR) +
        jd_load(0x7000000, 11, 1, b"py::x"),
    }
    return seeds


def write(sub, seeds):
    d = os.path.join(CORPUS, sub)
    os.makedirs(d, exist_ok=True)
    for name, data in seeds.items():
        with open(os.path.join(d, name), "wb") as f:
            f.write(data)


if __name__ == "__main__":
    write("record", record_seeds())
    write("json", json_seeds())
    write("jitdump", jitdump_seeds())

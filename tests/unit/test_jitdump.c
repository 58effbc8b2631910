/* SPDX-License-Identifier: MIT */
/* jitdump: the records runtimes write (names, moves, unwinding info), the
 * files they leave half written or that others plant, and the rules the
 * unwinder gets from CPython 3.13's trampolines. */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "fxagent/cfitab.h"
#include "fxagent/jitdump.h"
#include "fxagent/jitunw.h"

/* The unwinding info CPython 3.13.0 writes before each trampoline of 11
 * bytes (`sub $8,%rsp; call *%rcx; add $8,%rsp; ret`), read from a jitdump
 * of `python3.13 -X perf_jit`: a CIE (CFA rsp+8, return address at CFA-8),
 * an FDE (after 4 bytes CFA rsp+16, after 6 more rsp+8), and the header
 * whose table puts the code 16 bytes before the .eh_frame. */
static const uint8_t cpython_eh_frame[] = {
	0x14, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01, 0x7a, 0x52, 0x00,
	0x01, 0x78, 0x10, 0x01, 0x1b, 0x0c, 0x07, 0x08, 0x90, 0x01, 0x00, 0x00,
	0x14, 0x00, 0x00, 0x00, 0x1c, 0x00, 0x00, 0x00, 0xd0, 0xff, 0xff, 0xff,
	0x0b, 0x00, 0x00, 0x00, 0x00, 0x44, 0x0e, 0x10, 0x46, 0x0e, 0x08, 0x00,
};
static const uint8_t cpython_hdr[] = {
	0x01, 0x1b, 0x03, 0x3b, 0xcc, 0xff, 0xff, 0xff, 0x01, 0x00,
	0x00, 0x00, 0xc0, 0xff, 0xff, 0xff, 0xe8, 0xff, 0xff, 0xff,
};
#define TRAMPOLINE 11

struct buf {
	uint8_t *p;
	size_t len, cap;
};

static void put(struct buf *b, const void *v, size_t n)
{
	if (b->len + n > b->cap) {
		b->cap = (b->len + n) * 2;
		b->p = realloc(b->p, b->cap);
		assert_non_null(b->p);
	}
	memcpy(b->p + b->len, v, n);
	b->len += n;
}

static void put32(struct buf *b, uint32_t v)
{
	put(b, &v, 4);
}

static void put64(struct buf *b, uint64_t v)
{
	put(b, &v, 8);
}

static void header(struct buf *b, uint32_t pid)
{
	put32(b, FX_JITDUMP_MAGIC);
	put32(b, 1);
	put32(b, 40);
	put32(b, 62); /* EM_X86_64 */
	put32(b, 0);
	put32(b, pid);
	put64(b, 1);
	put64(b, 0);
}

/* Each record's stamp (CLOCK_MONOTONIC ns) */
static uint64_t stamp = 1000;

static void prefix(struct buf *b, uint32_t id, uint32_t total)
{
	put32(b, id);
	put32(b, total);
	put64(b, stamp);
}

static void load(struct buf *b, uint64_t addr, uint64_t size, uint64_t index, const char *name)
{
	size_t nl = strlen(name) + 1;

	prefix(b, FX_JITDUMP_CODE_LOAD, (uint32_t)(16 + 40 + nl + size));
	put32(b, 1);
	put32(b, 1);
	put64(b, addr);
	put64(b, addr);
	put64(b, size);
	put64(b, index);
	put(b, name, nl);
	for (uint64_t i = 0; i < size; i++)
		put(b, "\xcc", 1);
}

static void move(struct buf *b, uint64_t from, uint64_t to, uint64_t size, uint64_t index)
{
	prefix(b, FX_JITDUMP_CODE_MOVE, 16 + 48);
	put32(b, 1);
	put32(b, 1);
	put64(b, to);
	put64(b, from);
	put64(b, to);
	put64(b, size);
	put64(b, index);
}

static void unwinding(struct buf *b)
{
	size_t len = sizeof(cpython_eh_frame) + sizeof(cpython_hdr);
	size_t pad = (8 - (16 + 24 + len) % 8) % 8;

	prefix(b, FX_JITDUMP_CODE_UNWINDING_INFO, (uint32_t)(16 + 24 + len + pad));
	put64(b, len);
	put64(b, sizeof(cpython_hdr));
	put64(b, 80);
	put(b, cpython_eh_frame, sizeof(cpython_eh_frame));
	put(b, cpython_hdr, sizeof(cpython_hdr));
	put(b, "\0\0\0\0\0\0\0\0", pad);
}

static void names_until(const struct buf *b, const uint64_t *addrs, size_t n, uint64_t until,
			struct fx_perfmap_hit *h, struct fx_jitdump_stats *st)
{
	memset(h, 0, n * sizeof(*h));
	memset(st, 0, sizeof(*st));
	assert_int_equal(fx_jitdump_names(-1, b->p, b->len, addrs, n, until, h, st), 0);
}

static void names(const struct buf *b, const uint64_t *addrs, size_t n, struct fx_perfmap_hit *h,
		  struct fx_jitdump_stats *st)
{
	names_until(b, addrs, n, UINT64_MAX, h, st);
}

/* Loads name their ranges, later ones winning; a move keeps the name of the
 * load of its index; a last record not yet whole is left for later. */
static void test_names(void **state)
{
	const uint64_t addrs[] = { 0x1000, 0x100f, 0x1010, 0x2004, 0x3008, 0x4000 };
	struct fx_perfmap_hit h[6];
	struct fx_jitdump_stats st;
	struct buf b = { 0 };

	(void)state;
	header(&b, 42);
	unwinding(&b);
	load(&b, 0x1000, 16, 1, "py::fib:/srv/fib.py");
	load(&b, 0x2000, 16, 2, "JS:*work /srv/app.js:5:14");
	load(&b, 0x3000, 16, 3, "LazyCompile:old");
	move(&b, 0x3000, 0x4000, 16, 3);
	load(&b, 0x2000, 8, 4, "JS:*reused");
	names(&b, addrs, 6, h, &st);
	assert_int_equal(st.loads, 4);
	assert_int_equal(st.moves, 1);
	assert_int_equal(st.unwinds, 1);
	assert_int_equal(st.skipped, 0);
	assert_int_equal(st.partial, 0);
	assert_string_equal(h[0].name, "py::fib:/srv/fib.py");
	assert_string_equal(h[1].name, "py::fib:/srv/fib.py");
	assert_null(h[2].name);
	assert_string_equal(h[3].name, "JS:*reused");
	assert_string_equal(h[4].name, "LazyCompile:old");
	assert_string_equal(h[5].name, "LazyCompile:old");
	fx_perfmap_hits_free(h, 6);

	/* Cut in the middle of the last load: that load is not read yet. */
	b.len -= 3;
	names(&b, addrs, 6, h, &st);
	assert_int_equal(st.loads, 3);
	assert_int_equal(st.partial, 1);
	assert_string_equal(h[3].name, "JS:*work /srv/app.js:5:14");
	fx_perfmap_hits_free(h, 6);
	free(b.p);
}

/* Code loaded after a window's last sample, into a range the window's code
 * had, does not rename the window's frames; a stamp hours later is another
 * clock's, not a cutoff. */
static void test_stamps(void **state)
{
	const uint64_t addrs[] = { 0x1000 };
	struct fx_perfmap_hit h[1];
	struct fx_jitdump_stats st;
	struct buf b = { 0 };

	(void)state;
	header(&b, 42);
	stamp = 5000;
	load(&b, 0x1000, 16, 1, "JS:*old");
	stamp = 9000;
	load(&b, 0x1000, 16, 2, "JS:*new");
	names_until(&b, addrs, 1, 8000, h, &st);
	assert_string_equal(h[0].name, "JS:*old");
	assert_int_equal(st.later, 1);
	fx_perfmap_hits_free(h, 1);
	names_until(&b, addrs, 1, 9000, h, &st);
	assert_string_equal(h[0].name, "JS:*new");
	fx_perfmap_hits_free(h, 1);
	/* Stamped two hours after the window: not the samples' clock. */
	b.len = 0;
	header(&b, 42);
	stamp = 5000;
	load(&b, 0x1000, 16, 1, "JS:*old");
	stamp = 8000 + 2 * FX_JITDUMP_CLOCK_SLACK_NS;
	load(&b, 0x1000, 16, 2, "JS:*other-clock");
	names_until(&b, addrs, 1, 8000, h, &st);
	assert_string_equal(h[0].name, "JS:*other-clock");
	assert_int_equal(st.later, 0);
	fx_perfmap_hits_free(h, 1);
	stamp = 1000;
	free(b.p);
}

/* What a writer killed mid-record or another file leaves: the header is
 * checked, a record's frame that cannot be followed ends the reading, a
 * malformed record inside a good frame is passed over. */
static void test_bad_files(void **state)
{
	const uint64_t addrs[] = { 0x1000, 0x2000 };
	struct fx_perfmap_hit h[2];
	struct fx_jitdump_stats st;
	struct fx_jitdump_cursor c;
	struct fx_jitdump_record r;
	struct buf b = { 0 };
	uint32_t pid = 0;

	(void)state;
	assert_int_equal(fx_jitdump_begin(&c, -1, "JiTD", 4, &pid), -EAGAIN);
	header(&b, 7);
	b.p[0] ^= 1;
	assert_int_equal(fx_jitdump_begin(&c, -1, b.p, b.len, &pid), -EBADMSG);
	b.p[0] ^= 1;
	assert_int_equal(fx_jitdump_begin(&c, -1, b.p, b.len, &pid), 0);
	assert_int_equal(pid, 7);

	/* A load without a NUL in its name, an unwinding info larger than its
	 * record: skipped. Then a good load. */
	prefix(&b, FX_JITDUMP_CODE_LOAD, 16 + 40 + 4);
	put(&b, "\1\0\0\0\1\0\0\0", 8);
	put64(&b, 0x2000);
	put64(&b, 0x2000);
	put64(&b, 16);
	put64(&b, 9);
	put(&b, "abcd", 4);
	prefix(&b, FX_JITDUMP_CODE_UNWINDING_INFO, 16 + 24);
	put64(&b, 4096);
	put64(&b, 0);
	put64(&b, 0);
	load(&b, 0x1000, 4, 1, "good");
	names(&b, addrs, 2, h, &st);
	assert_int_equal(st.skipped, 2);
	assert_int_equal(st.loads, 1);
	assert_string_equal(h[0].name, "good");
	assert_null(h[1].name);
	fx_perfmap_hits_free(h, 2);

	/* A frame shorter than its prefix: nothing after it is read. */
	prefix(&b, 0, 8);
	load(&b, 0x2000, 4, 2, "after");
	names(&b, addrs, 2, h, &st);
	assert_string_equal(h[0].name, "good");
	assert_null(h[1].name);
	fx_perfmap_hits_free(h, 2);
	assert_int_equal(fx_jitdump_begin(&c, -1, b.p, b.len, &pid), 0);
	while (fx_jitdump_next(&c, &r, &st) == 1)
		;
	assert_int_equal(fx_jitdump_next(&c, &r, &st), -EBADMSG);
	free(b.p);
}

/* CPython's trampoline CFI compiled as libdw reads it: CFA rsp+8 at the
 * entry, rsp+16 from the call on, rsp+8 again for the ret. */
static void test_compile_cpython(void **state)
{
	struct fx_cfi_row rows[8];
	int n;

	(void)state;
	n = fx_cfitab_compile_jit(cpython_eh_frame, sizeof(cpython_eh_frame), cpython_hdr,
				  sizeof(cpython_hdr), TRAMPOLINE, rows, 8);
	assert_int_equal(n, 3);
	assert_int_equal(rows[0].start, 0);
	assert_int_equal(rows[0].rule.kind, FX_CFI_REG);
	assert_int_equal(rows[0].rule.reg, 7);
	assert_int_equal(rows[0].rule.off, 8);
	assert_int_equal(rows[1].start, 4);
	assert_int_equal(rows[1].rule.off, 16);
	assert_int_equal(rows[2].start, 10);
	assert_int_equal(rows[2].rule.off, 8);
	/* A header of another layout is not guessed at. */
	{
		uint8_t hdr[sizeof(cpython_hdr)];

		memcpy(hdr, cpython_hdr, sizeof(hdr));
		hdr[3] = 0x1b;
		assert_int_equal(fx_cfitab_compile_jit(cpython_eh_frame, sizeof(cpython_eh_frame),
						       hdr, sizeof(hdr), TRAMPOLINE, rows, 8),
				 -EINVAL);
	}
}

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* This process as a runtime: it writes /tmp/jit-PID.dump and maps it
 * executable. The rules follow what it appends (read again when an address
 * is not covered), and equal CFI is compiled once. */
static void test_jitunw_reads_appends(void **state)
{
	char path[64];
	struct buf b = { 0 };
	struct fx_jitunw *j = fx_jitunw_new();
	struct fx_jitunw_stats st;
	struct fx_cfi_rule r;
	uint64_t now = now_ns();
	void *map;
	int fd;

	(void)state;
	assert_non_null(j);
	snprintf(path, sizeof(path), "/tmp/jit-%d.dump", (int)getpid());
	unlink(path);
	fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
	assert_true(fd >= 0);
	header(&b, (uint32_t)getpid());
	unwinding(&b);
	load(&b, 0x7000000, TRAMPOLINE, 1, "py::a:/x.py");
	unwinding(&b);
	load(&b, 0x7000110, TRAMPOLINE, 2, "py::b:/x.py");
	assert_int_equal(write(fd, b.p, b.len), (ssize_t)b.len);
	map = mmap(NULL, 4096, PROT_READ | PROT_EXEC, MAP_PRIVATE, fd, 0);
	assert_true(map != MAP_FAILED);

	fx_jitunw_set_mark(j, 1);
	assert_int_equal(fx_jitunw_find(j, (uint32_t)getpid(), 1, 0x7000005, now, &r), 0);
	assert_int_equal(r.kind, FX_CFI_REG);
	assert_int_equal(r.reg, 7);
	assert_int_equal(r.off, 16);
	assert_int_equal(fx_jitunw_find(j, (uint32_t)getpid(), 1, 0x7000110, now, &r), 0);
	assert_int_equal(r.off, 8);
	/* Past the code: no rule, and no read again before the pace allows. */
	assert_int_equal(fx_jitunw_find(j, (uint32_t)getpid(), 1, 0x700000b, now, &r), -ENOENT);

	/* The runtime appends a third; found once the pace allows a read. */
	b.len = 0;
	unwinding(&b);
	load(&b, 0x7000220, TRAMPOLINE, 3, "py::c:/x.py");
	assert_int_equal(write(fd, b.p, b.len), (ssize_t)b.len);
	assert_int_equal(fx_jitunw_find(j, (uint32_t)getpid(), 1, 0x7000225, now + 1, &r), -ENOENT);
	assert_int_equal(
		fx_jitunw_find(j, (uint32_t)getpid(), 1, 0x7000225, now + FX_JITUNW_REREAD_NS, &r),
		0);
	assert_int_equal(r.off, 16);
	fx_jitunw_get_stats(j, &st);
	assert_int_equal(st.ranges, 3);
	assert_int_equal(st.compiled, 1);
	assert_int_equal(st.procs, 1);

	/* An exec starts over; idle processes are let go. */
	assert_int_equal(fx_jitunw_find(j, (uint32_t)getpid(), 2, 0x7000005, now, &r), 0);
	assert_int_equal(fx_jitunw_drop_idle(j, 1), 1);
	fx_jitunw_get_stats(j, &st);
	assert_int_equal(st.ranges, 0);

	munmap(map, 4096);
	close(fd);
	unlink(path);
	fx_jitunw_free(j);
	free(b.p);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_names),
		cmocka_unit_test(test_stamps),
		cmocka_unit_test(test_bad_files),
		cmocka_unit_test(test_compile_cpython),
		cmocka_unit_test(test_jitunw_reads_appends),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

/* SPDX-License-Identifier: MIT */
/* DWARF unwinding: perf's register order to DWARF's, the load bias of a
 * mapping (lld's layout included), and a real unwind of this very process
 * from a register snapshot and a copy of its stack, as a sample carries them. */
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <ucontext.h>
#include <unistd.h>

#include <cmocka.h>

#include "fxagent/dwunwind.h"
#include "fxagent/symbolize.h"
#include "fxagent/window.h"

#define FIX(name) FX_FIXTURE_DIR "/" name

static void test_dwarf_regs(void **state)
{
	uint64_t regs[64], out[FX_DWUNWIND_NREGS];
	int n = 0;

	(void)state;
	/* Each packed value is 1000 + its perf register number. */
	for (int bit = 0; bit < 64; bit++)
		if (FX_DWUNWIND_REGS_MASK & (1ULL << bit))
			regs[n++] = 1000 + (uint64_t)bit;
	assert_int_equal(n, 17);
	assert_int_equal(fx_dwunwind_dwarf_regs(regs, FX_DWUNWIND_REGS_MASK, out), 0);
	assert_int_equal(out[0], 1000 + 0); /* rax = AX */
	assert_int_equal(out[1], 1000 + 3); /* rdx = DX */
	assert_int_equal(out[2], 1000 + 2); /* rcx = CX */
	assert_int_equal(out[3], 1000 + 1); /* rbx = BX */
	assert_int_equal(out[4], 1000 + 4); /* rsi */
	assert_int_equal(out[5], 1000 + 5); /* rdi */
	assert_int_equal(out[6], 1000 + 6); /* rbp */
	assert_int_equal(out[7], 1000 + 7); /* rsp */
	for (int r = 8; r < 16; r++)
		assert_int_equal(out[r], 1000 + 16 + (uint64_t)(r - 8)); /* r8-r15 */
	assert_int_equal(out[16], 1000 + 8);				 /* rip = IP */
	/* Without the stack pointer there is nothing to unwind from. */
	assert_int_equal(fx_dwunwind_dwarf_regs(regs, FX_DWUNWIND_REGS_MASK & ~(1ULL << 7), out),
			 -EINVAL);
}

/* The executable PT_LOAD of a file, as the test's own reading. */
static void exec_segment(const char *path, GElf_Phdr *out)
{
	int fd = open(path, O_RDONLY);
	Elf *elf;
	size_t n;
	bool found = false;

	assert_true(fd >= 0);
	elf_version(EV_CURRENT);
	elf = elf_begin(fd, ELF_C_READ, NULL);
	assert_non_null(elf);
	assert_int_equal(elf_getphdrnum(elf, &n), 0);
	for (size_t i = 0; i < n && !found; i++) {
		GElf_Phdr ph;

		gelf_getphdr(elf, (int)i, &ph);
		if (ph.p_type == PT_LOAD && (ph.p_flags & PF_X)) {
			*out = ph;
			found = true;
		}
	}
	assert_true(found);
	elf_end(elf);
	close(fd);
}

static void check_bias(const char *path)
{
	const uint64_t start = 0x7f1234560000ULL;
	GElf_Phdr ph;
	uint64_t bias = 0;
	int fd = open(path, O_RDONLY);

	exec_segment(path, &ph);
	assert_true(fd >= 0);
	assert_int_equal(fx_dwunwind_load_bias(fd, start, ph.p_offset & ~0xfffULL, &bias), 0);
	/* Then the segment's first byte lands where the kernel put it. */
	assert_int_equal(bias + (ph.p_vaddr & ~0xfffULL), start);
	close(fd);
}

static void test_load_bias(void **state)
{
	uint64_t bias = 1;
	int fd;

	(void)state;
	check_bias(FIX("libfxfix.so"));
	check_bias(FIX("fxfix-pie"));
#ifdef FX_HAVE_LLD_FIXTURE
	{
		GElf_Phdr ph;

		/* lld: code at a virtual address that is not its file offset, so
		 * "start - pgoff" would be wrong; the segment's p_vaddr is right. */
		exec_segment(FIX("libfxfix-lld.so"), &ph);
		assert_int_not_equal(ph.p_vaddr & ~0xfffULL, ph.p_offset & ~0xfffULL);
		check_bias(FIX("libfxfix-lld.so"));
	}
#endif
	/* Fixed-address executables are never moved. */
	fd = open(FIX("fxfix-nopie"), O_RDONLY);
	assert_int_equal(fx_dwunwind_load_bias(fd, 0x401000, 0x1000, &bias), 0);
	assert_int_equal(bias, 0);
	close(fd);
	/* No segment at that offset; not an ELF file. */
	fd = open(FIX("libfxfix.so"), O_RDONLY);
	assert_int_equal(fx_dwunwind_load_bias(fd, 0x7f0000000000ULL, 0x7770000, &bias), -ENOENT);
	close(fd);
	fd = open(FX_FIXTURE_SRC "/fxfix.c", O_RDONLY);
	assert_int_equal(fx_dwunwind_load_bias(fd, 0x7f0000000000ULL, 0, &bias), -ENOEXEC);
	close(fd);
}

/* ---- a real unwind of this process ---- */

struct snapshot {
	uint64_t regs[17]; /* perf order of FX_DWUNWIND_REGS_MASK */
	uint8_t stack[16384];
	uint64_t stack_len;
};

static struct snapshot snap;

/* Packs a ucontext into perf's register order: AX BX CX DX SI DI BP SP IP R8-R15. */
static void pack(const ucontext_t *uc)
{
	const greg_t *g = uc->uc_mcontext.gregs;
	const int order[17] = { REG_RAX, REG_RBX, REG_RCX, REG_RDX, REG_RSI, REG_RDI,
				REG_RBP, REG_RSP, REG_RIP, REG_R8,  REG_R9,  REG_R10,
				REG_R11, REG_R12, REG_R13, REG_R14, REG_R15 };

	for (int i = 0; i < 17; i++)
		snap.regs[i] = (uint64_t)g[order[i]];
}

/* Where the stack copy may stop: the end of the mapping that holds @sp. */
static uint64_t stack_end(uint64_t sp)
{
	FILE *f = fopen("/proc/self/maps", "r");
	char line[512];
	uint64_t end = sp;

	assert_non_null(f);
	while (fgets(line, sizeof(line), f)) {
		unsigned long long a, b;

		if (sscanf(line, "%llx-%llx", &a, &b) == 2 && sp >= a && sp < b)
			end = b;
	}
	fclose(f);
	return end;
}

/* The stack as raw bytes, as the kernel copies it for a sample: ASan's
 * redzones in the frames are part of it, so this copy is not checked (and
 * not memcpy, which ASan checks whatever the function's attribute). */
__attribute__((noinline, no_sanitize("address"))) static void copy_stack(uint8_t *dst,
									 uintptr_t src, size_t len)
{
	const volatile uint8_t *p = (const volatile uint8_t *)src;

	for (size_t i = 0; i < len; i++)
		dst[i] = p[i];
}

/* Called inside capture(), its frames and its callers' still live: for the
 * walks that go on from the thread's memory (test_walk_ends). */
static void (*in_capture)(void);

__attribute__((noinline)) static void capture(void)
{
	ucontext_t uc;
	uint64_t sp, len;

	/* The registers as of getcontext's return, here in capture(). */
	assert_int_equal(getcontext(&uc), 0);
	pack(&uc);
	sp = snap.regs[7];
	len = stack_end(sp) - sp;
	snap.stack_len = len < sizeof(snap.stack) ? len : sizeof(snap.stack);
	copy_stack(snap.stack, (uintptr_t)sp, snap.stack_len);
	if (in_capture)
		in_capture();
	__asm__ volatile("" ::: "memory");
}

__attribute__((noinline)) static void level_b(void)
{
	capture();
	__asm__ volatile("" ::: "memory");
}

__attribute__((noinline)) static void level_a(void)
{
	level_b();
	__asm__ volatile("" ::: "memory");
}

/* This process, as the unwinder and the symbolizer see it. */
struct self_proc {
	struct fx_objects *objs;
	struct fx_procs *procs;
	struct fx_symbolizer *sym;
	const struct fx_proc *proc;
};

/* The function names of @n frames. */
static void names_of(struct self_proc *x, const uint64_t *ips, size_t n, const char **out)
{
	for (size_t i = 0; i < n; i++) {
		struct fx_sym_result r;
		uint32_t object;
		uint64_t off;
		const struct fx_object *ob;

		out[i] = "?";
		if (!fx_procs_resolve(x->proc, ips[i], &object, &off))
			continue;
		ob = fx_objects_get(x->objs, object);
		fx_symbolizer_resolve(x->sym,
				      &(struct fx_elf_source){ .fd = -1,
							       .path = ob->path,
							       .build_id = ob->build_id,
							       .build_id_len = ob->build_id_len },
				      &off, 1, &r);
		out[i] = r.frames[0].name ? r.frames[0].name : "?";
	}
}

/* Unwinds the captured snapshot with @engine and checks the call path. */
static void unwind_self(enum fx_dwunwind_engine engine, struct fx_dwunwind_stats *st)
{
	struct self_proc x = { 0 };
	struct fx_dwunwind *d;
	struct fx_record_sample s = { 0 };
	const char *names[64];
	uint64_t ips[64];
	bool truncated;
	size_t n;
	bool main_seen = false;

	x.objs = fx_objects_new("/proc", 64);
	x.procs = fx_procs_new(x.objs, "/proc");
	x.sym = fx_symbolizer_new(NULL);
	x.proc = fx_procs_get(x.procs, (uint32_t)getpid());
	d = fx_dwunwind_new(x.objs, 4, engine);
	assert_non_null(x.proc);
	s.pid = s.tid = (uint32_t)getpid();
	s.abi = PERF_SAMPLE_REGS_ABI_64;
	s.regs = snap.regs;
	s.stack = snap.stack;
	s.stack_size = s.stack_dyn_size = snap.stack_len;
	n = fx_dwunwind_user(d, x.proc, &s, ips, 64, &truncated);
	assert_true(n >= 4);
	names_of(&x, ips, n, names);
	for (size_t i = 0; i < n; i++)
		main_seen |= !strcmp(names[i], "main");
	assert_string_equal(names[0], "capture");
	assert_string_equal(names[1], "level_b");
	assert_string_equal(names[2], "level_a");
	assert_string_equal(names[3], "test_unwind_self");
	assert_true(main_seen);
	assert_false(truncated);

	/* A stack copy cut at 64 bytes cannot hold the callers: cut short, counted. */
	s.stack_size = s.stack_dyn_size = 64;
	n = fx_dwunwind_user(d, x.proc, &s, ips, 64, &truncated);
	assert_true(n >= 1);
	assert_true(truncated);
	fx_dwunwind_get_stats(d, st);
	assert_int_equal(st->unwinds, 2);
	assert_int_equal(st->truncated, 1);

	fx_symbolizer_free(x.sym);
	fx_dwunwind_free(d);
	fx_procs_free(x.procs);
	fx_objects_free(x.objs);
}

static void test_unwind_self(void **state)
{
	struct fx_dwunwind_stats st;

	(void)state;
	level_a();
	/* libdwfl: one Dwfl for the process, reused by the second sample. */
	unwind_self(FX_DWUNWIND_LIBDWFL, &st);
	assert_int_equal(st.dwfl_new, 1);
	assert_int_equal(st.by_libdwfl, 2);
	/* The compiled rules walk both (this test, libc, the loader: all
	 * with .eh_frame_hdr): no Dwfl at all. */
	unwind_self(FX_DWUNWIND_TABLES, &st);
	assert_int_equal(st.by_tables, 2);
	assert_int_equal(st.by_libdwfl, 0);
	assert_int_equal(st.dwfl_new, 0);
	/* And they give libdwfl's frames, the cut one included. */
	unwind_self(FX_DWUNWIND_CHECK, &st);
	assert_int_equal(st.check_samples, 2);
	assert_int_equal(st.check_same, 2);
	assert_true(st.check_frames >= 6);
	assert_int_equal(st.check_frames_same, st.check_frames);
}

/* ---- each way a walk ends ---- */

/* The user part of a callchain as the kernel gives it. */
struct chain {
	uint64_t ips[8];
	uint64_t nr;
};

/* Unwinds the snapshot with its copy cut to @len bytes and @ch as its user
 * callchain (NULL: none). */
static size_t unwind_cut(struct fx_dwunwind *d, struct self_proc *x, uint64_t len,
			 const struct chain *ch, uint64_t *ips, size_t cap, bool *truncated)
{
	struct fx_record_sample s = { 0 };
	uint64_t raw[9];

	s.pid = s.tid = (uint32_t)getpid();
	s.abi = PERF_SAMPLE_REGS_ABI_64;
	s.regs = snap.regs;
	s.stack = snap.stack;
	s.stack_size = s.stack_dyn_size = len;
	if (ch) {
		raw[0] = PERF_CONTEXT_USER;
		memcpy(raw + 1, ch->ips, ch->nr * 8);
		s.ips = raw;
		s.nr = ch->nr + 1;
	}
	return fx_dwunwind_user(d, x->proc, &s, ips, cap, truncated);
}

static uint64_t word_at(uint64_t addr)
{
	uint64_t v;

	memcpy(&v, (const void *)(uintptr_t)addr, 8);
	return v;
}

/* Runs inside the call path it captured (in_capture), so that its outer
 * frames are still live for the walk that goes on from memory: capture()'s
 * own return address sits just past a copy cut at its frame. */
static void check_ends(enum fx_dwunwind_engine engine)
{
	struct self_proc x = { 0 };
	struct fx_dwunwind *d;
	struct fx_dwunwind_stats st;
	const char *names[64];
	uint64_t ips[64], bp = snap.regs[6], ra_at = bp + 8, cut = ra_at - snap.regs[7];
	struct chain ch = { .ips = { snap.regs[8], word_at(bp + 8) }, .nr = 2 };
	bool truncated;
	size_t n, whole;

	x.objs = fx_objects_new("/proc", 64);
	x.procs = fx_procs_new(x.objs, "/proc");
	x.sym = fx_symbolizer_new(NULL);
	x.proc = fx_procs_get(x.procs, (uint32_t)getpid());
	d = fx_dwunwind_new(x.objs, 4, engine);
	assert_non_null(x.proc);
	assert_non_null(d);

	/* Whole: the outermost frame (_start) reached. */
	whole = unwind_cut(d, &x, snap.stack_len, NULL, ips, 64, &truncated);
	names_of(&x, ips, whole, names);
	assert_false(truncated);
	assert_string_equal(names[0], "capture");
	assert_string_equal(names[whole - 1], "_start");

	/* The frame cap reached: cut. */
	unwind_cut(d, &x, snap.stack_len, NULL, ips, 3, &truncated);
	assert_true(truncated);

	/* The copy ends at capture's return address, no callchain (no
	 * frame-pointer link to go on from): cut. */
	n = unwind_cut(d, &x, cut, NULL, ips, 64, &truncated);
	assert_int_equal(n, 1);
	assert_true(truncated);
	fx_dwunwind_get_stats(d, &st);
	assert_int_equal(st.cut_no_link, 1);

	/* The same with the kernel's chain: its link is capture's frame,
	 * the slot still holds what the chain says, and the thread's memory
	 * carries the walk to _start: the same frames as the whole copy. */
	n = unwind_cut(d, &x, cut, &ch, ips, 64, &truncated);
	names_of(&x, ips, n, names);
	assert_false(truncated);
	assert_int_equal(n, whole);
	assert_string_equal(names[1], "level_b");
	assert_string_equal(names[2], "level_a");
	assert_string_equal(names[n - 1], "_start");
	fx_dwunwind_get_stats(d, &st);
	assert_int_equal(st.stitch_live, 1);

	/* Again, the same chain: the frames found last, without a read. */
	{
		uint64_t again[64];

		assert_int_equal(unwind_cut(d, &x, cut, &ch, again, 64, &truncated), n);
		assert_false(truncated);
		assert_memory_equal(again, ips, n * 8);
		fx_dwunwind_get_stats(d, &st);
		assert_int_equal(st.stitch_cached, 1);
		assert_int_equal(st.stitch_live, 1);
	}

	/* A chain whose return address the memory no longer holds, and whose
	 * last one (level_b's) the memory does: the chain's frames, then
	 * the outermost ones from the memory. */
	ch.ips[1] = 0x1234;
	ch.ips[2] = word_at(word_at(bp) + 8);
	ch.nr = 3;
	n = unwind_cut(d, &x, cut, &ch, ips, 64, &truncated);
	names_of(&x, ips, n, names);
	assert_false(truncated);
	assert_int_equal(ips[1], 0x1233);
	assert_string_equal(names[2], "level_a");
	assert_string_equal(names[n - 1], "_start");
	fx_dwunwind_get_stats(d, &st);
	assert_int_equal(st.stitch_outer, 1);
	assert_int_equal(st.stitch_cached, 1); /* another chain: not taken again */

	/* Neither in the memory: the chain alone, cut. */
	ch.ips[2] = 0x5678;
	n = unwind_cut(d, &x, cut, &ch, ips, 64, &truncated);
	assert_true(truncated);
	assert_int_equal(n, 3);
	assert_int_equal(ips[2], 0x5677);

	/* A copy shorter than asked for ended at the stack's top: a read past
	 * it is the outermost frame's, not a cut. */
	{
		struct fx_record_sample s = { .pid = (uint32_t)getpid(),
					      .tid = (uint32_t)getpid(),
					      .abi = PERF_SAMPLE_REGS_ABI_64,
					      .regs = snap.regs,
					      .stack = snap.stack,
					      .stack_size = cut + 4096,
					      .stack_dyn_size = cut };

		fx_dwunwind_user(d, x.proc, &s, ips, 64, &truncated);
		assert_false(truncated);
	}

	/* A pc in no mapping, no frame pointer to go on by: cut. */
	{
		uint64_t regs[17];
		struct fx_record_sample s = { .pid = (uint32_t)getpid(),
					      .tid = (uint32_t)getpid(),
					      .abi = PERF_SAMPLE_REGS_ABI_64,
					      .regs = regs,
					      .stack = snap.stack,
					      .stack_size = snap.stack_len,
					      .stack_dyn_size = snap.stack_len };

		memcpy(regs, snap.regs, sizeof(regs));
		regs[8] = 0x10; /* IP */
		regs[6] = 0;	/* BP */
		fx_dwunwind_user(d, x.proc, &s, ips, 64, &truncated);
		assert_true(truncated);
	}
	fx_dwunwind_get_stats(d, &st);
	assert_int_equal(st.truncated, 4);

	fx_dwunwind_free(d);
	fx_symbolizer_free(x.sym);
	fx_procs_free(x.procs);
	fx_objects_free(x.objs);
}

static void ends_tables(void)
{
	check_ends(FX_DWUNWIND_TABLES);
}

static void ends_libdwfl(void)
{
	check_ends(FX_DWUNWIND_LIBDWFL);
}

static void test_walk_ends(void **state)
{
	(void)state;
	in_capture = ends_tables;
	level_a();
	in_capture = ends_libdwfl;
	level_a();
	in_capture = NULL;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_dwarf_regs),
		cmocka_unit_test(test_load_bias),
		cmocka_unit_test(test_unwind_self),
		cmocka_unit_test(test_walk_ends),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

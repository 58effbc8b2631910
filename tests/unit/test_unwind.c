/* SPDX-License-Identifier: MIT */
/* unwind: in frame-pointer mode, a chain is whole only when its last frame
 * is the outermost by its CFI (_start); kernel threads are whole; the depth
 * cap cuts. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <unistd.h>

#include <cmocka.h>

#include "fxagent/unwind.h"

extern char _start[];

struct fixture {
	struct fx_objects *objs;
	struct fx_procs *procs;
	struct fx_unwinder *u;
	const struct fx_proc *proc;
};

static void setup(struct fixture *x, enum fx_unwind_mode mode)
{
	struct fx_unwind_opts o = { .mode = mode, .kernel = true, .max_procs = 4 };

	x->objs = fx_objects_new("/proc", 64);
	x->procs = fx_procs_new(x->objs, "/proc");
	o.objs = x->objs;
	x->u = fx_unwind_new(&o);
	x->proc = fx_procs_get(x->procs, (uint32_t)getpid());
	assert_non_null(x->u);
	assert_non_null(x->proc);
}

static void teardown(struct fixture *x)
{
	fx_unwind_free(x->u);
	fx_procs_free(x->procs);
	fx_objects_free(x->objs);
}

/* Unwinds a sample whose callchain is @ips (@nr entries). */
static struct fx_unwind_result unwind(struct fixture *x, const struct fx_proc *proc,
				      const uint64_t *ips, uint64_t nr, size_t cap)
{
	struct fx_record_sample s = { .pid = (uint32_t)getpid(), .tid = (uint32_t)getpid() };
	struct fx_window_frame out[FX_UNWIND_MAX_FRAMES];
	struct fx_unwind_result res;

	s.ips = ips;
	s.nr = nr;
	s.ip = nr > 1 ? ips[1] : 0;
	fx_unwind_sample(x->u, proc, &s, out, cap, &res);
	return res;
}

static void test_fp_roots(void **state)
{
	struct fixture x;
	/* A return address into _start, as a chain that reached it holds. */
	uint64_t root_ra = (uint64_t)(uintptr_t)_start + 16;
	uint64_t here = (uint64_t)(uintptr_t)test_fp_roots + 4;
	uint64_t whole[] = { PERF_CONTEXT_USER, here, root_ra };
	uint64_t cut[] = { PERF_CONTEXT_USER, here, here + 8 };
	uint64_t kthread[] = { PERF_CONTEXT_KERNEL, 0xffffffff81000010ULL, 0xffffffff81000020ULL };
	struct fx_unwind_result r;

	(void)state;
	setup(&x, FX_UNWIND_FP);
	r = unwind(&x, x.proc, whole, 3, FX_UNWIND_MAX_FRAMES);
	assert_int_equal(r.n, 2);
	assert_false(r.truncated);
	/* Stopped in a function that is not the outermost. */
	r = unwind(&x, x.proc, cut, 3, FX_UNWIND_MAX_FRAMES);
	assert_int_equal(r.n, 2);
	assert_true(r.truncated);
	/* Kernel threads have no user part: whole. */
	r = unwind(&x, NULL, kthread, 3, FX_UNWIND_MAX_FRAMES);
	assert_int_equal(r.n, 2);
	assert_false(r.truncated);
	/* The depth cap: cut, even at a root. */
	r = unwind(&x, x.proc, whole, 3, 1);
	assert_true(r.truncated);
	/* A return address in no mapping. */
	whole[2] = 0x1000;
	r = unwind(&x, x.proc, whole, 3, FX_UNWIND_MAX_FRAMES);
	assert_true(r.truncated);
	teardown(&x);
}

static void test_dwarf_kernel_thread(void **state)
{
	struct fixture x;
	uint64_t kthread[] = { PERF_CONTEXT_KERNEL, 0xffffffff81000010ULL };
	struct fx_unwind_result r;

	(void)state;
	setup(&x, FX_UNWIND_DWARF);
	/* No user registers: a kernel thread, whole. */
	r = unwind(&x, NULL, kthread, 2, FX_UNWIND_MAX_FRAMES);
	assert_int_equal(r.n, 1);
	assert_false(r.truncated);
	teardown(&x);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_fp_roots),
		cmocka_unit_test(test_dwarf_kernel_thread),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

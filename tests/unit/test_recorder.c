/* SPDX-License-Identifier: MIT */
/* Records in, window out: a process that forks, execs and maps its binary
 * after the recording started gets its samples as (object, file offset)
 * frames; idle and unwanted processes are filtered; LOST records are counted
 * with their time for the profile's markers. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include <cmocka.h>

#include "fxagent/recorder.h"
#include "recbuild.h"

static const struct fx_record_fmt fmt = {
	.sample_type = PERF_SAMPLE_IP | PERF_SAMPLE_TID | PERF_SAMPLE_TIME | PERF_SAMPLE_CPU |
		       PERF_SAMPLE_PERIOD | PERF_SAMPLE_CALLCHAIN,
	.sample_id_all = true,
};

struct fixture {
	struct fx_objects *objs;
	struct fx_procs *procs;
	struct fx_unwinder *unw;
	struct fx_window w;
	struct fx_recorder r;
	char self[4096];
};

static struct fixture *fixture_new(const struct fx_recorder_opts *opts, bool kernel)
{
	struct fixture *f = calloc(1, sizeof(*f));
	struct fx_unwind_opts uo = { .mode = FX_UNWIND_FP, .kernel = kernel };
	ssize_t n = readlink("/proc/self/exe", f->self, sizeof(f->self) - 1);

	assert_true(n > 0);
	/* An empty proc root: everything must come from the records. */
	f->objs = fx_objects_new("/nonexistent", 16);
	f->procs = fx_procs_new(f->objs, "/nonexistent");
	f->unw = fx_unwind_new(&uo);
	fx_window_init(&f->w, 0);
	fx_recorder_init(&f->r, opts, &fmt, f->procs, f->unw, &f->w);
	return f;
}

static void fixture_free(struct fixture *f)
{
	fx_window_release(&f->w);
	fx_unwind_free(f->unw);
	fx_procs_free(f->procs);
	fx_objects_free(f->objs);
	free(f);
}

/* FORK 500 from 400, COMM exec "fx-short", MMAP2 of this test binary at
 * 0x400000 (file offset 0x1000). */
static void start_process(struct fixture *f)
{
	struct rec r;

	rec_begin(&r, PERF_RECORD_FORK, 0);
	rec_u32x2(&r, 500, 400);
	rec_u32x2(&r, 500, 400);
	rec_u64(&r, 10);
	rec_trailer(&r, 400, 400, 10);
	fx_recorder_handle(&f->r, rec_end(&r));

	rec_begin(&r, PERF_RECORD_COMM, PERF_RECORD_MISC_COMM_EXEC);
	rec_u32x2(&r, 500, 500);
	rec_str(&r, "fx-short");
	rec_trailer(&r, 500, 500, 11);
	fx_recorder_handle(&f->r, rec_end(&r));

	rec_begin(&r, PERF_RECORD_MMAP2, PERF_RECORD_MISC_USER);
	rec_u32x2(&r, 500, 500);
	rec_u64(&r, 0x400000);
	rec_u64(&r, 0x10000);
	rec_u64(&r, 0x1000);
	rec_u32x2(&r, 0xfd, 1); /* maj, min */
	rec_u64(&r, 4242);	/* ino */
	rec_u64(&r, 0);		/* ino generation */
	rec_u32x2(&r, 5, 2);
	rec_str(&r, f->self);
	rec_trailer(&r, 500, 500, 12);
	fx_recorder_handle(&f->r, rec_end(&r));
}

static void test_new_process_samples(void **state)
{
	struct fx_recorder_opts opts = { 0 };
	struct fixture *f = fixture_new(&opts, true);
	const uint64_t ips[] = { PERF_CONTEXT_KERNEL,
				 0xffffffff81000100ULL,
				 PERF_CONTEXT_USER,
				 0x400100,
				 0x400200,
				 0x400300 };
	const struct fx_window_sample *s;
	const struct fx_window_stack *st;
	const struct fx_object *ob;
	struct rec r;

	(void)state;
	start_process(f);
	fx_recorder_handle(&f->r, rec_sample(&r, 500, 500, 20, ips, 6));
	assert_int_equal(f->w.nsamples, 1);
	s = &f->w.samples[0];
	assert_int_equal(s->pid, 500);
	assert_int_equal(s->time_ns, 20);
	/* Innermost: the kernel frame (the leaf keeps its exact address). */
	st = &f->w.stacks[s->stack];
	assert_int_equal(f->w.frames[st->frame].object, FX_OBJ_KERNEL);
	assert_int_equal(f->w.frames[st->frame].addr, 0xffffffff81000100ULL);
	/* Then the user leaf at file offset 0x100 + 0x1000, exact too. */
	st = &f->w.stacks[st->parent];
	ob = fx_objects_get(f->objs, f->w.frames[st->frame].object);
	assert_non_null(ob);
	assert_string_equal(ob->path, f->self);
	assert_int_equal(f->w.frames[st->frame].addr, 0x1100);
	/* Callers are return addresses: moved back into the call instruction. */
	st = &f->w.stacks[st->parent];
	assert_int_equal(f->w.frames[st->frame].addr, 0x11ff);
	st = &f->w.stacks[st->parent];
	assert_int_equal(f->w.frames[st->frame].addr, 0x12ff);
	assert_int_equal(st->parent, FX_NONE);
	assert_string_equal(fx_procs_find(f->procs, 500)->comm, "fx-short");
	fixture_free(f);
}

static void test_no_kernel_and_filters(void **state)
{
	const uint32_t pids[] = { 500 };
	struct fx_recorder_opts opts = { .pids = pids, .npids = 1 };
	struct fixture *f = fixture_new(&opts, false);
	const uint64_t ips[] = { PERF_CONTEXT_KERNEL, 0xffffffff81000100ULL, PERF_CONTEXT_USER,
				 0x400100 };
	struct rec r;

	(void)state;
	start_process(f);
	fx_recorder_handle(&f->r, rec_sample(&r, 500, 500, 20, ips, 4));
	fx_recorder_handle(&f->r, rec_sample(&r, 0, 0, 21, ips, 2));	 /* idle */
	fx_recorder_handle(&f->r, rec_sample(&r, 777, 777, 22, ips, 4)); /* not asked for */
	assert_int_equal(f->w.nsamples, 1);
	assert_int_equal(f->r.counters.filtered, 1);
	assert_int_equal(f->r.counters.idle, 1);
	/* Only the user frame is left. */
	assert_int_equal(f->w.stacks[f->w.samples[0].stack].parent, FX_NONE);
	assert_int_not_equal(f->w.frames[f->w.stacks[f->w.samples[0].stack].frame].object,
			     FX_OBJ_KERNEL);
	fixture_free(f);
}

static void test_lost_and_bad_records(void **state)
{
	struct fx_recorder_opts opts = { 0 };
	struct fixture *f = fixture_new(&opts, true);
	struct rec r;

	(void)state;
	rec_begin(&r, PERF_RECORD_LOST, 0);
	rec_u64(&r, 1);
	rec_u64(&r, 17);
	rec_trailer(&r, 0, 0, 1000);
	fx_recorder_handle(&f->r, rec_end(&r));
	assert_int_equal(f->w.counters.lost, 17);
	assert_int_equal(f->r.nlost, 1);
	assert_int_equal(f->r.lost[0].time_ns, 1000);
	assert_int_equal(f->r.lost[0].count, 17);

	rec_begin(&r, PERF_RECORD_SAMPLE, 0);
	rec_u64(&r, 1); /* cut short */
	fx_recorder_handle(&f->r, rec_end(&r));
	assert_int_equal(f->r.counters.bad_records, 1);
	assert_int_equal(f->w.nsamples, 0);
	fixture_free(f);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_new_process_samples),
		cmocka_unit_test(test_no_kernel_and_filters),
		cmocka_unit_test(test_lost_and_bad_records),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

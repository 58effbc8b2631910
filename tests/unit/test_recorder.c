/* SPDX-License-Identifier: MIT */
/* Records in, window out: a process that forks, execs and maps its binary
 * after the recording started gets its samples as (object, file offset)
 * frames; idle and unwanted processes are filtered; LOST records are counted
 * with their time for the profile's markers. The agent's own off-CPU
 * records (a wait's START with its stacks, its END with its times) become
 * waits on the stack they waited on, under a frame of their state, with
 * the weight the window shows once folded. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include <cmocka.h>

#include "fxagent/offcpu.h"
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
	struct fx_window next; /* the window after w, where a test has one */
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
	fx_recorder_release(&f->r);
	fx_window_release(&f->w);
	fx_window_release(&f->next);
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

/* Off-CPU waits. Times in nanoseconds, CLOCK_MONOTONIC; a wait's time in
 * the window is in microseconds. */
#define MS	 1000000ull
#define P1	 FX_RECORD_OFFCPU_P1
#define SLEEP	 FX_OFFCPU_STATE_SLEEP
#define DISK	 FX_OFFCPU_STATE_DISK
#define RUNNABLE FX_OFFCPU_STATE_RUNNABLE
#define WOKEN	 FX_OFFCPU_STATE_WOKEN

/* Two call paths in this binary as start_process() maps it. */
static const uint64_t path_a[] = { PERF_CONTEXT_USER, 0x400100, 0x400200 };
static const uint64_t path_b[] = { PERF_CONTEXT_USER, 0x400300, 0x400200 };

/* One drawn wait of a thread of process 500, as the BPF program reports it. */
struct wait {
	uint32_t tid, state;
	uint64_t t_out, t_wake, t_in; /* t_wake 0: not woken */
	uint32_t p, q;		      /* of P1; q 0: unstacked */
	uint32_t flags;		      /* FX_RECORD_OFFCPU_SEEDED */
	const uint64_t *ips;	      /* path_a when NULL and stacked */
};
/* WAIT(tid, state, t_out, t_wake, t_in, p, q) on path_a; WAITX with flags
 * and a call path. */
#define WAITX(tid_, state_, out, wake, in, p_, q_, flags_, ips_)                                   \
	{                                                                                          \
		.tid = (tid_), .state = (state_), .t_out = (out), .t_wake = (wake), .t_in = (in),  \
		.p = (p_), .q = (q_), .flags = (flags_), .ips = (ips_)                             \
	}
#define WAIT(tid_, state_, out, wake, in, p_, q_)                                                  \
	WAITX(tid_, state_, out, wake, in, p_, q_, 0, NULL)

/* The waits' tests: a fixture of process 500, freed even when one fails. */
static int wait_setup(void **state)
{
	struct fx_recorder_opts opts = { 0 };
	struct fixture *f = fixture_new(&opts, true);

	start_process(f);
	*state = f;
	return 0;
}

static int wait_teardown(void **state)
{
	fixture_free(*state);
	return 0;
}

/* The START of @wt, laid out as offcpu.c's on_start() does: state, tag, p,
 * q, flags, padding, then a whole sample of the sampler's format stamped
 * t_out; an unstacked one has no callchain. */
static void wait_start(struct fixture *f, const struct wait *wt)
{
	const uint64_t *ips = wt->ips ? wt->ips : path_a;
	struct rec in, r;
	const struct perf_event_header *h =
		rec_sample(&in, 500, wt->tid, wt->t_out, ips, wt->q ? 3 : 0);

	rec_begin(&r, FX_RECORD_OFFCPU, 0);
	rec_u32x2(&r, wt->state, UINT32_MAX);
	rec_u32x2(&r, wt->p, wt->q);
	rec_u32x2(&r, wt->flags, 0);
	rec_bytes(&r, h, h->size);
	fx_recorder_handle(&f->r, rec_end(&r));
}

/* The END of @wt, laid out as offcpu.c's on_end() does, with the weight
 * the program gives it: its length over its timing probability. */
static void wait_end_of(struct fixture *f, uint32_t pid, const struct wait *wt)
{
	struct rec r;

	rec_begin(&r, FX_RECORD_OFFCPU_END, 0);
	rec_u32x2(&r, pid, wt->tid);
	rec_u64(&r, wt->t_out);
	rec_u64(&r, wt->t_in);
	rec_u64(&r, wt->t_wake);
	rec_u64(&r, (wt->t_in - wt->t_out) * P1 / wt->p);
	rec_u32x2(&r, wt->state, UINT32_MAX);
	fx_recorder_handle(&f->r, rec_end(&r));
}

static void wait_end(struct fixture *f, const struct wait *wt)
{
	wait_end_of(f, 500, wt);
}

static void wait_whole(struct fixture *f, const struct wait *wt)
{
	wait_start(f, wt);
	wait_end(f, wt);
}

/* The stack a CPU sample of call path @ips gets in @w. */
static uint32_t cpu_stack(struct fixture *f, const uint64_t *ips)
{
	struct rec r;

	fx_recorder_handle(&f->r, rec_sample(&r, 500, 500, 1 * MS, ips, 3));
	assert_int_equal(f->w.samples[f->w.nsamples - 1].wait_us, 0);
	return f->w.samples[f->w.nsamples - 1].stack;
}

/* The state of wait @s: its innermost frame's, which must say it. */
static uint32_t state_of(const struct fx_window *w, const struct fx_window_sample *s)
{
	const struct fx_window_frame *fr;

	assert_int_not_equal(s->stack, FX_NONE);
	fr = &w->frames[w->stacks[s->stack].frame];
	assert_int_equal(fr->object, FX_OBJ_OFFCPU);
	return (uint32_t)fr->addr;
}

/* The stack wait @s waited on: its own, less the state's frame. */
static uint32_t waited_on(const struct fx_window *w, const struct fx_window_sample *s)
{
	return w->stacks[s->stack].parent;
}

/* Whether wait @s is on [waits without a recorded stack, state]. */
static bool without_stack(const struct fx_window *w, const struct fx_window_sample *s)
{
	uint32_t up = waited_on(w, s);
	const struct fx_window_frame *fr;

	if (up == FX_NONE || w->stacks[up].parent != FX_NONE)
		return false;
	fr = &w->frames[w->stacks[up].frame];
	return fr->object == FX_OBJ_OFFCPU && fr->addr == FX_OFFCPU_NO_STACK;
}

/* The microseconds of the waits of thread @tid in @state that @w shows. */
static uint64_t wait_us(const struct fx_window *w, uint32_t tid, uint32_t state)
{
	uint64_t us = 0;

	for (size_t i = 0; i < w->nsamples; i++) {
		const struct fx_window_sample *s = &w->samples[i];

		if (s->wait_us && s->tid == tid && state_of(w, s) == state)
			us += s->wait_us;
	}
	return us;
}

/* The one sample of the waits of @tid in @state in @w. */
static const struct fx_window_sample *the_wait(const struct fx_window *w, uint32_t tid,
					       uint32_t state)
{
	const struct fx_window_sample *found = NULL;

	for (size_t i = 0; i < w->nsamples; i++) {
		const struct fx_window_sample *s = &w->samples[i];

		if (s->wait_us && s->tid == tid && state_of(w, s) == state) {
			assert_null(found);
			found = s;
		}
	}
	assert_non_null(found);
	return found;
}

/* The waits shown in @w, in microseconds: what counters.wait_us says once
 * folded. */
static uint64_t all_wait_us(const struct fx_window *w)
{
	uint64_t us = 0;

	for (size_t i = 0; i < w->nsamples; i++)
		us += w->samples[i].wait_us;
	return us;
}

/* A drawn wait with its stacks: one wait on the stack it waited on, which
 * is the CPU samples' stack of the same call path, under a frame of its
 * state, of its length. */
static void test_wait_stacked(void **state)
{
	struct fixture *f = *state;
	const struct wait a = WAIT(501, SLEEP, 10 * MS, 0, 15 * MS, P1, P1),
			  b = WAITX(501, DISK, 16 * MS, 0, 18 * MS, P1, P1, 0, path_b);
	uint32_t on_a = cpu_stack(f, path_a), on_b = cpu_stack(f, path_b);
	const struct fx_window_sample *s;

	wait_start(f, &a);
	/* a start alone shows nothing: it is held until it ends */
	assert_int_equal(f->w.nsamples, 2);
	assert_int_equal(f->w.counters.waits, 0);
	assert_int_equal(f->r.nwaits, 1);
	wait_end(f, &a);
	assert_int_equal(f->r.nwaits, 0);
	s = the_wait(&f->w, 501, SLEEP);
	assert_int_equal(s->pid, 500);
	assert_int_equal(s->time_ns, 15 * MS);
	assert_int_equal(s->wait_us, 5000);
	assert_int_equal(waited_on(&f->w, s), on_a);

	wait_whole(f, &b);
	s = the_wait(&f->w, 501, DISK);
	assert_int_equal(s->wait_us, 2000);
	assert_int_equal(waited_on(&f->w, s), on_b);

	assert_int_equal(f->w.nsamples, 4);
	assert_int_equal(f->w.counters.samples, 2); /* the CPU samples */
	assert_int_equal(f->w.counters.waits, 2);
	assert_int_equal(f->w.counters.wait_us, 7000);
	assert_int_equal(f->w.counters.waits_unstacked, 0);
	assert_int_equal(f->w.counters.waits_lost, 0);
	/* folding: nothing to scale */
	fx_window_fold_waits(&f->w, NULL, 0);
	assert_int_equal(f->w.nsamples, 4);
	assert_int_equal(wait_us(&f->w, 501, SLEEP), 5000);
	assert_int_equal(wait_us(&f->w, 501, DISK), 2000);
	assert_int_equal(f->w.counters.wait_us, 7000);
	assert_int_equal(f->w.counters.waits, 2);
	assert_int_equal(f->r.counters.waits_lost, 0);
	assert_int_equal(f->r.counters.waits_unpaired, 0);
	assert_int_equal(f->r.counters.bad_records, 0);
}

/* A wait drawn with probability p stands for its length / p. */
static void test_wait_timing_probability(void **state)
{
	struct fixture *f = *state;
	const struct wait a = WAIT(501, SLEEP, 10 * MS, 0, 13 * MS, P1 / 4, P1),
			  b = WAIT(502, SLEEP, 10 * MS, 0, 13 * MS, P1 / 4 * 3, P1);

	wait_whole(f, &a);
	wait_whole(f, &b);
	assert_int_equal(the_wait(&f->w, 501, SLEEP)->wait_us, 12000);
	assert_int_equal(the_wait(&f->w, 502, SLEEP)->wait_us, 4000);
	assert_int_equal(f->w.counters.waits, 2);
	assert_int_equal(f->w.counters.wait_us, 16000);
	fx_window_fold_waits(&f->w, NULL, 0);
	assert_int_equal(the_wait(&f->w, 501, SLEEP)->wait_us, 12000);
	assert_int_equal(the_wait(&f->w, 502, SLEEP)->wait_us, 4000);
	assert_int_equal(f->w.counters.wait_us, 16000);
	assert_int_equal(f->w.counters.waits_unstacked, 0);
}

/* Woken before it ran: its state until the wake-up, then on a run queue
 * ("runnable (woken)"), both on the stack it waited on. A preempted wait is
 * on a run queue all along: a wake-up does not split it. */
static void test_wait_woken(void **state)
{
	struct fixture *f = *state;
	const struct wait a = WAIT(501, SLEEP, 10 * MS, 13 * MS, 14 * MS, P1, P1),
			  b = WAITX(502, DISK, 10 * MS, 12 * MS, 13 * MS, P1, P1, 0, path_b),
			  c = WAIT(503, RUNNABLE, 20 * MS, 21 * MS, 23 * MS, P1, P1);
	uint32_t on_a = cpu_stack(f, path_a), on_b = cpu_stack(f, path_b);
	const struct fx_window_sample *s;

	wait_whole(f, &a);
	s = the_wait(&f->w, 501, SLEEP);
	assert_int_equal(s->wait_us, 3000);
	assert_int_equal(waited_on(&f->w, s), on_a);
	s = the_wait(&f->w, 501, WOKEN);
	assert_int_equal(s->wait_us, 1000);
	assert_int_equal(waited_on(&f->w, s), on_a);

	wait_whole(f, &b);
	assert_int_equal(the_wait(&f->w, 502, DISK)->wait_us, 2000);
	s = the_wait(&f->w, 502, WOKEN);
	assert_int_equal(s->wait_us, 1000);
	assert_int_equal(waited_on(&f->w, s), on_b);

	wait_whole(f, &c);
	s = the_wait(&f->w, 503, RUNNABLE);
	assert_int_equal(s->wait_us, 3000);
	assert_int_equal(waited_on(&f->w, s), on_a);
	assert_int_equal(wait_us(&f->w, 503, WOKEN), 0);

	assert_int_equal(f->w.counters.wait_us, 10000);
	assert_int_equal(f->w.counters.waits_unstacked, 0);
	fx_window_fold_waits(&f->w, NULL, 0);
	assert_int_equal(wait_us(&f->w, 501, SLEEP), 3000);
	assert_int_equal(wait_us(&f->w, 501, WOKEN), 1000);
	assert_int_equal(wait_us(&f->w, 502, DISK), 2000);
	assert_int_equal(wait_us(&f->w, 502, WOKEN), 1000);
	assert_int_equal(wait_us(&f->w, 503, RUNNABLE), 3000);
	assert_int_equal(f->w.counters.wait_us, 10000);
}

/* A woken wait is one wait, split in two states: window.h's counters count
 * "each wait's part in this window once", and the user reads them as the
 * number of waits ("1204 waits (45.1 s); 884 of them over the budget"). */
static void test_wait_woken_counts_once(void **state)
{
	struct fixture *f = *state;
	const struct wait a = WAIT(501, SLEEP, 10 * MS, 13 * MS, 14 * MS, P1, P1),
			  b = WAIT(502, SLEEP, 10 * MS, 12 * MS, 14 * MS, P1, 0);

	wait_whole(f, &a);
	wait_whole(f, &b);
	fx_window_fold_waits(&f->w, NULL, 0);
	/* what is shown is right ... */
	assert_int_equal(wait_us(&f->w, 502, SLEEP), 2000);
	assert_int_equal(wait_us(&f->w, 502, WOKEN), 2000);
	assert_int_equal(f->w.counters.wait_us, 8000);
	assert_int_equal(f->w.counters.waits_unstacked_us, 4000);
	/* ... and two waits, one of them over the budget */
	assert_int_equal(f->w.counters.waits, 2);
	assert_int_equal(f->w.counters.waits_unstacked, 1);
}

/* A wait timed without its stacks (over the budget) has no sample of its
 * own: its time goes on its thread's stacked waits in the same state, or,
 * with none, on [waits without a recorded stack, state]. */
static void test_wait_unstacked(void **state)
{
	struct fixture *f = *state;
	const struct wait a = WAIT(501, SLEEP, 10 * MS, 0, 12 * MS, P1, P1),
			  b = WAIT(501, SLEEP, 13 * MS, 0, 16 * MS, P1, 0),
			  c = WAIT(501, DISK, 17 * MS, 0, 18 * MS, P1, 0),
			  d = WAIT(502, SLEEP, 20 * MS, 0, 24 * MS, P1, 0);
	uint32_t on_a = cpu_stack(f, path_a);
	const struct fx_window_sample *s;

	wait_whole(f, &a);
	wait_whole(f, &b);
	wait_whole(f, &c);
	wait_whole(f, &d);
	assert_int_equal(f->r.counters.waits_lost, 0);
	assert_int_equal(f->r.counters.bad_records, 0);
	/* before folding: only the stacked one is shown */
	assert_int_equal(f->w.nsamples, 2);
	assert_int_equal(the_wait(&f->w, 501, SLEEP)->wait_us, 2000);
	assert_int_equal(f->w.counters.waits, 4);
	assert_int_equal(f->w.counters.waits_unstacked, 3);
	/* their time is their share of what is shown: known once folded */
	assert_int_equal(f->w.counters.waits_unstacked_us, 0);

	fx_window_fold_waits(&f->w, NULL, 0);
	/* 501 sleeping: the stacked wait holds both */
	s = the_wait(&f->w, 501, SLEEP);
	assert_int_equal(s->wait_us, 5000);
	assert_int_equal(waited_on(&f->w, s), on_a);
	/* 501 in I/O and 502 sleeping: none stacked */
	s = the_wait(&f->w, 501, DISK);
	assert_true(without_stack(&f->w, s));
	assert_int_equal(s->wait_us, 1000);
	assert_int_equal(s->pid, 500);
	assert_int_equal(s->time_ns, 18 * MS);
	s = the_wait(&f->w, 502, SLEEP);
	assert_true(without_stack(&f->w, s));
	assert_int_equal(s->wait_us, 4000);
	assert_int_equal(s->time_ns, 24 * MS);

	assert_int_equal(f->w.nsamples, 4);
	assert_int_equal(f->w.counters.samples, 1);
	assert_int_equal(f->w.counters.waits, 4);
	assert_int_equal(f->w.counters.waits_unstacked, 3);
	assert_int_equal(f->w.counters.waits_unstacked_us, 8000);
	assert_int_equal(f->w.counters.wait_us, 10000);
	assert_int_equal(all_wait_us(&f->w), 10000);
}

/* Stacks copied with probability q < 1: before folding a stacked wait is
 * shown at exact / q (it stands for the unstacked ones too); folded, its
 * thread's waits in that state sum to their exact time. */
static void test_wait_stacks_probability(void **state)
{
	struct fixture *f = *state;
	const struct wait a = WAIT(501, SLEEP, 10 * MS, 0, 12 * MS, P1, P1 / 2),
			  b = WAITX(501, SLEEP, 13 * MS, 0, 17 * MS, P1, P1 / 2, 0, path_b),
			  c = WAIT(502, DISK, 20 * MS, 0, 21 * MS, P1 / 2, P1 / 4);
	uint32_t on_a = cpu_stack(f, path_a), on_b = cpu_stack(f, path_b);
	const struct fx_window_sample *sa, *sb;

	wait_whole(f, &a);
	wait_whole(f, &b);
	wait_whole(f, &c);
	assert_int_equal(f->w.nsamples, 5);
	sa = &f->w.samples[2];
	sb = &f->w.samples[3];
	assert_int_equal(waited_on(&f->w, sa), on_a);
	assert_int_equal(waited_on(&f->w, sb), on_b);
	assert_int_equal(sa->wait_us, 4000);
	assert_int_equal(sb->wait_us, 8000);
	assert_int_equal(the_wait(&f->w, 502, DISK)->wait_us, 8000); /* 2 ms exact, / q */
	assert_int_equal(f->w.counters.wait_us, 20000);
	assert_int_equal(f->w.counters.waits, 3);
	assert_int_equal(f->w.counters.waits_unstacked, 0);

	fx_window_fold_waits(&f->w, NULL, 0);
	assert_int_equal(f->w.nsamples, 5);
	assert_int_equal(sa->wait_us, 2000);
	assert_int_equal(sb->wait_us, 4000);
	assert_int_equal(wait_us(&f->w, 501, SLEEP), 6000);
	assert_int_equal(the_wait(&f->w, 502, DISK)->wait_us, 2000);
	assert_int_equal(f->w.counters.wait_us, 8000);
	assert_int_equal(all_wait_us(&f->w), 8000);
}

/* A window ends while threads wait: each shows its wait up to the edge in
 * that window, and the rest, once it ends, in the next. Without a sink the
 * recorder adds to r->window: pointed at the next window after the cut, as
 * the pipeline's sink would route what follows. */
static void test_wait_cut(void **state)
{
	struct fixture *f = *state;
	const struct wait a = WAIT(501, SLEEP, 10 * MS, 0, 17 * MS, P1, P1),
			  b = WAIT(502, SLEEP, 11 * MS, 0, 12 * MS, P1, P1),
			  c = WAIT(503, DISK, 12 * MS, 0, 18 * MS, P1 / 2, 0),
			  d = WAIT(504, SLEEP, 15 * MS, 0, 16 * MS, P1, P1);
	const struct fx_window_sample *s;
	const struct fx_window_frame *f1, *f2;

	wait_start(f, &a);
	wait_whole(f, &b);
	wait_start(f, &c);
	fx_recorder_cut_waits(&f->r, 14 * MS);
	assert_int_equal(f->r.nwaits, 2); /* still waiting */
	fx_window_fold_waits(&f->w, NULL, 0);
	/* the first window: a 10..14, b whole, c 12..14 (unstacked, / p) */
	s = the_wait(&f->w, 501, SLEEP);
	assert_int_equal(s->wait_us, 4000);
	assert_true(s->time_ns < 14 * MS);
	assert_int_equal(the_wait(&f->w, 502, SLEEP)->wait_us, 1000);
	s = the_wait(&f->w, 503, DISK);
	assert_true(without_stack(&f->w, s));
	assert_int_equal(s->wait_us, 4000);
	assert_true(s->time_ns < 14 * MS);
	assert_int_equal(f->w.counters.waits, 3);
	assert_int_equal(f->w.counters.waits_unstacked, 1);
	assert_int_equal(f->w.counters.wait_us, 9000);

	f->r.window = &f->next;
	wait_whole(f, &d);
	wait_end(f, &a);
	wait_end(f, &c);
	assert_int_equal(f->r.nwaits, 0);
	fx_window_fold_waits(&f->next, NULL, 0);
	/* the next: a 14..17 on the stack it began on, c 14..18, d whole */
	s = the_wait(&f->next, 501, SLEEP);
	assert_int_equal(s->wait_us, 3000);
	assert_int_equal(s->time_ns, 17 * MS);
	f1 = &f->w.frames[f->w.stacks[waited_on(&f->w, the_wait(&f->w, 501, SLEEP))].frame];
	f2 = &f->next.frames[f->next.stacks[waited_on(&f->next, s)].frame];
	assert_int_equal(f1->object, f2->object);
	assert_int_equal(f1->addr, f2->addr);
	assert_int_equal(wait_us(&f->next, 502, SLEEP), 0);
	s = the_wait(&f->next, 503, DISK);
	assert_true(without_stack(&f->next, s));
	assert_int_equal(s->wait_us, 8000);
	assert_int_equal(the_wait(&f->next, 504, SLEEP)->wait_us, 1000);
	assert_int_equal(f->next.counters.waits, 3);
	assert_int_equal(f->next.counters.waits_unstacked, 1);
	assert_int_equal(f->next.counters.wait_us, 12000);
	/* nothing more in the first */
	assert_int_equal(f->w.counters.wait_us, 9000);
	assert_int_equal(all_wait_us(&f->w), 9000);
	assert_int_equal(f->r.counters.waits_unpaired, 0);
}

/* Woken after a window's edge: the next window has its state up to the
 * wake-up and the run queue after. Woken before it (the end, which says
 * so, comes after the cut): the first window could not know, but all of
 * the rest, in the next, was on a run queue. */
static void test_wait_woken_across_cut(void **state)
{
	struct fixture *f = *state;
	const struct wait a = WAIT(501, SLEEP, 10 * MS, 15 * MS, 17 * MS, P1, P1),
			  b = WAIT(502, SLEEP, 10 * MS, 12 * MS, 17 * MS, P1, P1);

	wait_start(f, &a);
	wait_start(f, &b);
	fx_recorder_cut_waits(&f->r, 14 * MS);
	fx_window_fold_waits(&f->w, NULL, 0);
	assert_int_equal(the_wait(&f->w, 501, SLEEP)->wait_us, 4000);
	assert_int_equal(the_wait(&f->w, 502, SLEEP)->wait_us, 4000);
	f->r.window = &f->next;
	wait_end(f, &a);
	wait_end(f, &b);
	fx_window_fold_waits(&f->next, NULL, 0);
	assert_int_equal(the_wait(&f->next, 501, SLEEP)->wait_us, 1000);
	assert_int_equal(the_wait(&f->next, 501, WOKEN)->wait_us, 2000);
	assert_int_equal(f->next.counters.wait_us, 6000);
	/* 502 was woken at 12 ms: 14..17 ms was on a run queue */
	assert_int_equal(wait_us(&f->next, 502, SLEEP), 0);
	assert_int_equal(wait_us(&f->next, 502, WOKEN), 3000);
}

/* A thread's second start while its first has not ended: the first's end
 * was lost; it goes, counted lost, unless it was seeded at attach (it may
 * have ended unseen as it was seeded: no loss). The others stay. */
static void test_wait_second_start(void **state)
{
	struct fixture *f = *state;
	const struct wait a = WAIT(501, SLEEP, 10 * MS, 0, 0, P1, P1),
			  a2 = WAITX(501, DISK, 13 * MS, 0, 15 * MS, P1, P1, 0, path_b),
			  b = WAIT(502, SLEEP, 11 * MS, 0, 16 * MS, P1, P1),
			  c = WAIT(503, SLEEP, 12 * MS, 0, 18 * MS, P1, 0),
			  s = WAITX(504, SLEEP, 20 * MS, 0, 0, P1, P1, FX_RECORD_OFFCPU_SEEDED,
				    NULL),
			  s2 = WAIT(504, SLEEP, 25 * MS, 0, 26 * MS, P1, P1),
			  t = WAITX(505, SLEEP, 20 * MS, 0, 23 * MS, P1, P1,
				    FX_RECORD_OFFCPU_SEEDED, NULL);
	uint32_t on_b = cpu_stack(f, path_b);
	const struct fx_window_sample *w;

	wait_start(f, &a);
	wait_start(f, &b);
	wait_start(f, &c);
	wait_start(f, &a2);
	assert_int_equal(f->r.counters.waits_lost, 1);
	assert_int_equal(f->r.nwaits, 3);
	wait_end(f, &a2);
	wait_end(f, &b);
	wait_end(f, &c);
	assert_int_equal(f->r.nwaits, 0);
	assert_int_equal(f->r.counters.waits_unpaired, 0);
	/* the first of 501 shows nowhere: only its second */
	assert_int_equal(wait_us(&f->w, 501, SLEEP), 0);
	w = the_wait(&f->w, 501, DISK);
	assert_int_equal(w->wait_us, 2000);
	assert_int_equal(waited_on(&f->w, w), on_b);
	assert_int_equal(the_wait(&f->w, 502, SLEEP)->wait_us, 5000);

	/* seeded: replaced without a loss */
	wait_start(f, &s);
	wait_start(f, &s2);
	assert_int_equal(f->r.counters.waits_lost, 1);
	wait_end(f, &s2);
	/* a seeded wait that ends is a wait like any */
	wait_whole(f, &t);
	assert_int_equal(f->r.nwaits, 0);
	fx_window_fold_waits(&f->w, NULL, 0);
	assert_int_equal(the_wait(&f->w, 503, SLEEP)->wait_us, 6000);
	assert_int_equal(the_wait(&f->w, 504, SLEEP)->wait_us, 1000);
	assert_int_equal(the_wait(&f->w, 505, SLEEP)->wait_us, 3000);
	assert_int_equal(f->w.counters.waits, 5);
	assert_int_equal(f->w.counters.waits_unstacked, 1);
	assert_int_equal(f->w.counters.wait_us, 17000);
	/* the window's lost waits are the pipeline's to add, from the
	 * recorder's counters */
	assert_int_equal(f->w.counters.waits_lost, 0);
	assert_int_equal(f->r.counters.waits_lost, 1);
	assert_int_equal(f->r.counters.waits_unpaired, 0);
}

/* An end without its start (lost in the agent's queue): counted with its
 * weight, shown nowhere; an end of another wait than the thread's pending
 * one leaves that one be. Ends of processes not asked for are not counted. */
static void test_wait_end_without_start(void **state)
{
	struct fixture *f = *state;
	const uint32_t pids[] = { 500 };
	struct fx_recorder_opts opts = { .pids = pids, .npids = 1 };
	struct fixture *g = fixture_new(&opts, true);
	const struct wait a = WAIT(501, SLEEP, 10 * MS, 0, 17 * MS, P1 / 2, P1),
			  b = WAIT(502, SLEEP, 20 * MS, 0, 25 * MS, P1, P1),
			  other = WAIT(502, SLEEP, 19 * MS, 0, 22 * MS, P1, P1);

	wait_end(f, &a);
	assert_int_equal(f->r.counters.waits_unpaired, 1);
	assert_int_equal(f->r.counters.waits_lost_ns, 14 * MS);
	assert_int_equal(f->r.counters.waits_lost, 0);
	assert_int_equal(f->w.nsamples, 0);
	assert_int_equal(f->w.counters.waits, 0);

	wait_start(f, &b);
	wait_end(f, &other);
	assert_int_equal(f->r.counters.waits_unpaired, 2);
	assert_int_equal(f->r.counters.waits_lost_ns, 17 * MS);
	assert_int_equal(f->w.nsamples, 0);
	assert_int_equal(f->r.nwaits, 1);
	wait_end(f, &b);
	assert_int_equal(f->r.nwaits, 0);
	fx_window_fold_waits(&f->w, NULL, 0);
	assert_int_equal(f->w.nsamples, 1);
	assert_int_equal(the_wait(&f->w, 502, SLEEP)->wait_us, 5000);
	assert_int_equal(f->w.counters.waits, 1);
	assert_int_equal(f->w.counters.wait_us, 5000);
	assert_int_equal(f->w.counters.waits_lost, 0);
	assert_int_equal(f->r.counters.waits_unpaired, 2);

	wait_end_of(g, 777, &a);
	assert_int_equal(g->r.counters.waits_unpaired, 0);
	assert_int_equal(g->r.counters.waits_lost_ns, 0);
	wait_end_of(g, 500, &a);
	assert_int_equal(g->r.counters.waits_unpaired, 1);
	fixture_free(g);
}

/* Folded with the kernel's times of each thread: its blocked states
 * (sleeping, I/O) sum to the time it lived less its CPU and run-queue time,
 * its runnable ones (preempted, woken) to its run-queue time, each shared as
 * its drawn waits share it; time in a class without a drawn wait is shown
 * without a stack; a thread without times keeps its waits' estimate. A
 * second fold changes nothing. */
static void test_wait_fold_times(void **state)
{
	struct fixture *f = *state;
	const struct wait waits[] = {
		/* 501: 2 ms sleeping, then 1 ms woken; 2 ms I/O; 1 ms preempted */
		WAIT(501, SLEEP, 10 * MS, 12 * MS, 13 * MS, P1, P1),
		WAITX(501, DISK, 14 * MS, 0, 16 * MS, P1, P1, 0, path_b),
		WAIT(501, RUNNABLE, 17 * MS, 0, 18 * MS, P1, P1),
		/* 502: 1 ms sleeping; its run-queue time has no wait drawn */
		WAIT(502, SLEEP, 10 * MS, 0, 11 * MS, P1, P1),
		/* 503, not in the times: 1 ms sleeping, its stacks at q 1/2 */
		WAIT(503, SLEEP, 10 * MS, 0, 11 * MS, P1, P1 / 2),
	};
	const struct fx_window_thread_time times[] = {
		{ .tid = 501, .alive_ns = 100 * MS, .on_ns = 80 * MS, .runq_ns = 6 * MS },
		{ .tid = 502, .alive_ns = 10 * MS, .on_ns = 2 * MS, .runq_ns = 4 * MS },
		{ .tid = 504, .alive_ns = 10 * MS, .on_ns = 10 * MS }, /* never waited */
	};
	struct fx_window_sample once[16];
	struct fx_window_counters counted;
	const struct fx_window_sample *s;

	for (size_t i = 0; i < sizeof(waits) / sizeof(waits[0]); i++)
		wait_whole(f, &waits[i]);
	assert_int_equal(f->w.nsamples, 6);
	assert_int_equal(wait_us(&f->w, 503, SLEEP), 2000); /* / q */

	fx_window_fold_waits(&f->w, times, sizeof(times) / sizeof(times[0]));
	/* 501: blocked 100 - 80 - 6 = 14 ms, as drawn 1:1; run queue 6 ms, 1:1 */
	assert_int_equal(the_wait(&f->w, 501, SLEEP)->wait_us, 7000);
	assert_int_equal(the_wait(&f->w, 501, DISK)->wait_us, 7000);
	assert_int_equal(the_wait(&f->w, 501, RUNNABLE)->wait_us, 3000);
	assert_int_equal(the_wait(&f->w, 501, WOKEN)->wait_us, 3000);
	assert_false(without_stack(&f->w, the_wait(&f->w, 501, WOKEN)));
	/* 502: blocked 10 - 2 - 4 = 4 ms; its 4 ms on a run queue without a stack */
	assert_int_equal(the_wait(&f->w, 502, SLEEP)->wait_us, 4000);
	assert_false(without_stack(&f->w, the_wait(&f->w, 502, SLEEP)));
	s = the_wait(&f->w, 502, RUNNABLE);
	assert_true(without_stack(&f->w, s));
	assert_int_equal(s->wait_us, 4000);
	assert_int_equal(s->pid, 500);
	assert_int_equal(wait_us(&f->w, 502, WOKEN), 0);
	/* 503 keeps its estimate; 504 shows nothing */
	assert_int_equal(the_wait(&f->w, 503, SLEEP)->wait_us, 1000);
	for (size_t i = 0; i < f->w.nsamples; i++)
		assert_int_not_equal(f->w.samples[i].tid, 504);
	assert_int_equal(f->w.nsamples, 7);
	assert_int_equal(f->w.counters.wait_us, 29000);
	assert_int_equal(all_wait_us(&f->w), 29000);
	assert_int_equal(f->w.counters.waits_unstacked, 0);

	/* again: nothing changes */
	assert_true(f->w.nsamples <= sizeof(once) / sizeof(once[0]));
	memcpy(once, f->w.samples, f->w.nsamples * sizeof(once[0]));
	counted = f->w.counters;
	fx_window_fold_waits(&f->w, times, sizeof(times) / sizeof(times[0]));
	assert_int_equal(f->w.nsamples, 7);
	assert_memory_equal(once, f->w.samples, 7 * sizeof(once[0]));
	assert_memory_equal(&counted, &f->w.counters, sizeof(counted));
	fx_window_fold_waits(&f->w, NULL, 0);
	assert_int_equal(f->w.nsamples, 7);
	assert_memory_equal(once, f->w.samples, 7 * sizeof(once[0]));
	assert_memory_equal(&counted, &f->w.counters, sizeof(counted));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_new_process_samples),
		cmocka_unit_test(test_no_kernel_and_filters),
		cmocka_unit_test(test_lost_and_bad_records),
		cmocka_unit_test_setup_teardown(test_wait_stacked, wait_setup, wait_teardown),
		cmocka_unit_test_setup_teardown(test_wait_timing_probability, wait_setup,
						wait_teardown),
		cmocka_unit_test_setup_teardown(test_wait_woken, wait_setup, wait_teardown),
		cmocka_unit_test_setup_teardown(test_wait_woken_counts_once, wait_setup,
						wait_teardown),
		cmocka_unit_test_setup_teardown(test_wait_unstacked, wait_setup, wait_teardown),
		cmocka_unit_test_setup_teardown(test_wait_stacks_probability, wait_setup,
						wait_teardown),
		cmocka_unit_test_setup_teardown(test_wait_cut, wait_setup, wait_teardown),
		cmocka_unit_test_setup_teardown(test_wait_woken_across_cut, wait_setup,
						wait_teardown),
		cmocka_unit_test_setup_teardown(test_wait_second_start, wait_setup, wait_teardown),
		cmocka_unit_test_setup_teardown(test_wait_end_without_start, wait_setup,
						wait_teardown),
		cmocka_unit_test_setup_teardown(test_wait_fold_times, wait_setup, wait_teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

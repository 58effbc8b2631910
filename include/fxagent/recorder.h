/* SPDX-License-Identifier: MIT */
/* recorder: feeds decoded perf records into the process table and the window.
 *
 * Side-band records update the process table; a sample is unwound into frames
 * (unwind.h) and appended to the window with its stack interned. Nothing here
 * logs per record: failures are counted.
 */
#ifndef FXAGENT_RECORDER_H
#define FXAGENT_RECORDER_H

#include <linux/perf_event.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "fxagent/hashtab.h"
#include "fxagent/objects.h"
#include "fxagent/procs.h"
#include "fxagent/record.h"
#include "fxagent/unwind.h"
#include "fxagent/window.h"

#define FX_RECORDER_MAX_LOST_EVENTS 1024

struct fx_recorder_opts {
	bool include_idle;    /* keep samples of pid 0 */
	const uint32_t *pids; /* keep only samples of these processes; NULL = all */
	size_t npids;
};

struct fx_lost_event {
	uint64_t time_ns;
	uint64_t count;
};

/* Where samples go when there is more than one window (the daemon's
 * targets). All optional: without route, samples go to the one window. */
struct fx_recorder_sink {
	/* Called before each sample in time order: the place to rotate windows. */
	void (*before_sample)(void *ctx, uint64_t time_ns);
	/* The windows that take sample @s of @proc (NULL: a kernel thread or
	 * idle): up to @max into @out; returns how many (0 = filtered out). */
	size_t (*route)(void *ctx, const struct fx_record_sample *s, const struct fx_proc *proc,
			struct fx_window **out, size_t max);
	/* A LOST record: @count samples lost around @time_ns. */
	void (*lost)(void *ctx, uint64_t time_ns, uint64_t count);
	void *ctx;
};

#define FX_RECORDER_MAX_ROUTES 64
/* Off-CPU waits whose start was seen and whose end was not: each holds its
 * unwound frames (the stack was copied when it began), unless it was timed
 * without. Past FX_RECORDER_MAX_WAITS with frames, a new start keeps only
 * its time; past FX_RECORDER_MAX_TIMED in all, it is lost and counted. */
#define FX_RECORDER_MAX_WAITS 4096
#define FX_RECORDER_MAX_TIMED 65536

struct fx_recorder_wait {
	uint32_t pid, tid;
	uint64_t t_out;
	uint64_t from; /* counted up to here: t_out, or the last window's end */
	uint32_t state, tag;
	uint32_t p;  /* of FX_RECORD_OFFCPU_P1 */
	uint32_t q;  /* its stacks' probability; 0: none (n is 0) */
	bool seeded; /* in progress at attach (FX_RECORD_OFFCPU_SEEDED) */
	bool truncated;
	uint32_t n;
	struct fx_window_frame *frames; /* n, outermost first, then the state's */
};

struct fx_recorder_counters {
	uint64_t bad_records; /* records that failed to decode */
	uint64_t filtered;    /* samples of processes not asked for */
	uint64_t idle;	      /* samples of the idle task left out (include_idle) */
	uint64_t lost_events; /* LOST / LOST_SAMPLES records */
	/* off-CPU waits: starts lost at FX_RECORDER_MAX_TIMED or replaced by
	 * a later start of their thread (their end was lost), ends without
	 * their start (counted, without a stack, from their end alone) */
	uint64_t waits_lost;
	uint64_t waits_unpaired;
	uint64_t waits_lost_ns; /* the unpaired ends' weights */
};

struct fx_recorder {
	struct fx_recorder_opts opts;
	const struct fx_record_fmt *fmt;
	struct fx_procs *procs;	      /* not owned */
	struct fx_unwinder *unwinder; /* not owned */
	struct fx_window *window;     /* not owned: the open window (without a sink) */
	struct fx_recorder_sink sink;
	struct fx_recorder_counters counters;
	struct fx_lost_event lost[FX_RECORDER_MAX_LOST_EVENTS];
	size_t nlost;
	struct fx_window_frame frames[FX_UNWIND_MAX_FRAMES + 1];
	struct fx_recorder_wait *waits; /* pending, indexed by tid */
	size_t nwaits, waits_cap;
	size_t nwaits_stacked; /* of them with frames */
	/* Threads seen waiting (a drawn wait began) since they last exited,
	 * with where their waits go: fx_recorder_note_waiters() */
	struct fx_recorder_waiter {
		uint32_t tid, pid, tag;
	} * waiters;
	size_t nwaiters, waiters_cap;
	struct fx_hashtab waiter_index;
	struct fx_hashtab wait_index;
};

/* Sets up @r; the pointers must outlive it. @opts->pids is copied by pointer. */
void fx_recorder_init(struct fx_recorder *r, const struct fx_recorder_opts *opts,
		      const struct fx_record_fmt *fmt, struct fx_procs *procs,
		      struct fx_unwinder *unwinder, struct fx_window *window);

/* Frees the pending off-CPU waits. */
void fx_recorder_release(struct fx_recorder *r);

/* A window ends at @end_ns: each pending off-CPU wait adds the part of it
 * up to there to the window(s) it belongs to, so that a thread blocked for
 * longer than a window shows in each. */
void fx_recorder_cut_waits(struct fx_recorder *r, uint64_t end_ns);

/* At a window's end, for each thread of @times (the kernel's times in the
 * window, window.h) seen waiting before: the windows its waits go to note it
 * (fx_window_note_thread()), so its time shows in a window where none of its
 * waits was drawn. At most FX_RECORDER_MAX_TIMED threads are remembered. */
void fx_recorder_note_waiters(struct fx_recorder *r, const struct fx_window_thread_time *times,
			      size_t ntimes, uint64_t at);

/* Routes samples through @sink instead of the one window. */
void fx_recorder_set_sink(struct fx_recorder *r, const struct fx_recorder_sink *sink);

/* Handles one record; a fx_sampler_fn (ctx is the recorder). An off-CPU
 * wait's start (FX_RECORD_OFFCPU) is unwound at once and held; its end
 * (FX_RECORD_OFFCPU_END) adds it to the window(s) with its weight. */
void fx_recorder_handle(void *ctx, const struct perf_event_header *h);

#endif

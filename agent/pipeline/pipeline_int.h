/* SPDX-License-Identifier: MIT */
/* The pipeline's own declarations, shared by its files:
 *   targets.c   the loaded config's targets, their cgroups, routing samples
 *   pipeline.c  the sources and windows (the sampling thread's side)
 *   publish.c   the publisher: symbolize, encode, hand to the sink
 */
#ifndef FXAGENT_PIPELINE_INT_H
#define FXAGENT_PIPELINE_INT_H

#include <limits.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "fxagent/config.h"
#include "fxagent/objects.h"
#include "fxagent/pipeline.h"
#include "fxagent/procs.h"
#include "fxagent/profile.h"
#include "fxagent/recorder.h"
#include "fxagent/sampler.h"
#include "fxagent/shipper.h"
#include "fxagent/sink.h"
#include "fxagent/symbolize.h"
#include "fxagent/unwind.h"
#include "fxagent/window.h"

#define TAG_ROOT (UINT32_MAX - 1) /* the root cgroup: samples for process/pid targets */

/* Lost-sample events of one window, for its markers (bounded: the last one
 * takes the rest). */
struct lost_log {
	struct fx_lost_event ev[FX_RECORDER_MAX_LOST_EVENTS];
	size_t n;
};

struct target_rt {
	const struct fx_target *cfg; /* NULL: the whole system */
	const char *name;
	struct fx_window *win;	/* the open window */
	struct lost_log *lost;	/* the open window's lost events */
	bool cgroup;		/* sampled by cgroup events */
	uint64_t cg_id;		/* attached cgroup, 0 = none */
	char cg_path[PATH_MAX]; /* where it was last found, "" = never */
	bool said_missing;
	struct fx_profile_kv *labels; /* global labels, then the target's */
	size_t nlabels;
};

/* One loaded config and the targets it names. Closed windows keep a
 * reference until they are written, so a reload never pulls the config from
 * under the publisher. */
struct gen {
	const struct fx_config *cfg;
	struct fx_config *owned; /* reloaded configs are the pipeline's */
	struct target_rt *t;
	size_t nt;
	bool cgroup_mode;
	bool filter_procs; /* process/pid targets present */
	char host[256];
	unsigned refs; /* under fx_pipeline.gen_mu */
};

/* Agent-wide totals, as of a window's end (the metrics file's counters). */
struct totals {
	uint64_t windows, samples, lost, truncated, dropped;
	/* off-CPU waits shown and their microseconds; of them those timed
	 * without their stacks, and theirs; waits lost (once per loss, not per
	 * target), and theirs (window.h's counters) */
	uint64_t waits, wait_us, waits_unstacked, waits_unstacked_us, waits_lost, waits_lost_us;
	size_t targets, attached;
};

/* The sampling thread's caches as of a window's end, for the metrics file
 * (the publisher cannot read them: they change under it). */
struct sampler_caches {
	struct fx_procs_stats procs;
	bool unwind;		 /* DWARF unwinding: the unwinder's per-process state */
	uint64_t unwind_live;	 /* processes whose state it holds */
	uint64_t unwind_evicted; /* states dropped for its bound or as idle, every unwinder */
	/* Its compiled CFI tables (cfitab.h): held, bytes, dropped. */
	uint64_t cfi_tables, cfi_bytes, cfi_evicted;
	/* JIT code's rules from jitdumps (jitunw.h): ranges, bytes, dropped. */
	uint64_t jit_ranges, jit_bytes, jit_dropped;
};

/* One target's closed window. */
struct job {
	struct target_rt *t;
	struct fx_window *win;
	struct lost_log *lost;
	struct fx_thread_name *names;
	size_t nnames;
};

/* The windows closed together, one per target. */
struct batch {
	struct batch *next;
	struct gen *g;
	struct totals tot;
	int64_t seq;
	uint64_t start_mono, end_mono;
	double start_wall_ms, end_wall_ms;
	uint64_t epoch; /* of the objects (objects.h) its windows used */
	struct sampler_caches caches;
	size_t njobs;
	struct job jobs[];
};

struct publisher;

/* Spare windows: one per target for up to this many targets, holding
 * PIPE_SPARE_BYTES together at most (a 64-CPU host's 10 s window holds
 * about 6 MiB). */
#define PIPE_SPARE_WINDOWS 8
#define PIPE_SPARE_BYTES   (16u << 20)

struct fx_pipeline {
	struct fx_pipeline_opts opts;
	/* The current config and its targets (the sampling thread's). */
	struct gen *g;
	/* sources */
	struct fx_sampler *sampler;
	struct fx_objects *objs;
	struct fx_procs *procs;
	struct fx_unwinder *unwinder;
	struct fx_recorder rec;
	uint64_t unwind_mark; /* fx_unwind_mark() at the last rotation */
	/* Per-process states and CFI tables the unwinders replaced (reloads)
	 * dropped. */
	uint64_t unwind_evicted_base, cfi_evicted_base;
	uint64_t procs_mark; /* fx_procs_mark() at the last rotation */
	/* off-CPU waits lost (offcpu.h, recorder), as of the last window */
	uint64_t wait_lost, wait_lost_ns;
	/* windows in a row with waits over the budget or lost, and what they
	 * held: the log says an episode once, at its start and its end */
	uint64_t episode_windows;
	struct totals episode;
	/* The watched threads' own counters at the open window's start
	 * (fx_offcpu_tally()), by tid; and the kernel's times of the threads
	 * in the window closing, for fx_window_fold_waits() */
	struct fx_offcpu_thread *tally;
	size_t ntally, tally_cap;
	struct fx_window_thread_time *times;
	size_t times_cap;
	char mount[PATH_MAX]; /* cgroup v2 */
	/* windows */
	uint64_t win_start, win_end; /* CLOCK_MONOTONIC */
	int64_t wall_minus_mono;     /* ns */
	int64_t seq;
	bool hold;
	bool stretching; /* windows were kept open, and the writer has not caught up since */
	uint64_t last_check;
	struct totals tot;
	struct publisher *pub;
	pthread_mutex_t gen_mu; /* gen reference counts */
	/* Written windows kept for the next ones (pipe_targets_window_take):
	 * a fresh window's arrays would fault in page by page again. */
	pthread_mutex_t spare_mu;
	struct fx_window *spare[PIPE_SPARE_WINDOWS];
	size_t nspare, spare_bytes;
	struct fx_pipeline_stats stats; /* chunk counts: atomics */
	unsigned names_log_left;	/* wrong names still to log (the publisher's) */
};

/* targets.c */
/* The targets of @cfg, each with an open window (one_window: no stack cap
 * reset by rotation). @owned (may be NULL) is freed with the gen. Returns
 * NULL when out of memory. */
struct gen *pipe_targets_gen_new(const struct fx_config *cfg, struct fx_config *owned);
void pipe_targets_gen_get(struct fx_pipeline *p, struct gen *g);
void pipe_targets_gen_put(struct fx_pipeline *p, struct gen *g);
struct fx_window *pipe_targets_window_new(const struct fx_config *cfg);
void pipe_targets_window_free(struct fx_window *w);
/* A window for @cfg: a spare one emptied, else a new one (NULL: no memory). */
struct fx_window *pipe_targets_window_take(struct fx_pipeline *p, const struct fx_config *cfg);
/* Keeps written window @w as a spare, or frees it (the spares would hold
 * more than PIPE_SPARE_WINDOWS or PIPE_SPARE_BYTES). Any thread. */
void pipe_targets_window_give(struct fx_pipeline *p, struct fx_window *w);
/* Frees the spares. */
void pipe_targets_spares_free(struct fx_pipeline *p);
/* Attaches the cgroup events of every cgroup target of the current gen. */
void pipe_targets_resolve(struct fx_pipeline *p);
/* Once a second: re-attaches a cgroup that went away or came back. */
void pipe_targets_recheck(struct fx_pipeline *p);
/* Samples the root cgroup too, for process and pid targets. */
int pipe_targets_add_root(struct fx_pipeline *p);
/* A fx_recorder_sink route: the windows sample @s goes to. */
size_t pipe_targets_route(void *ctx, const struct fx_record_sample *s, const struct fx_proc *proc,
			  struct fx_window **out, size_t max);

/* publish.c */
/* The publisher and its sink (a thread when p->opts.thread). Returns 0 or
 * -errno (logged). */
int pipe_publish_new(struct fx_pipeline *p, struct publisher **out);
/* Sets the environment libdebuginfod reads (fxagent/debuginfod.h) from
 * @cfg: at the start, before the pipeline's threads, and at each reload. */
void pipe_publish_setenv(const struct fx_config *cfg);
/* Takes @b (and a reference to b->g): queued for the thread, or written now. */
void pipe_publish_push(struct publisher *pub, struct batch *b);
/* Batches queued for the thread and not yet taken (0 without a thread). */
size_t pipe_publish_waiting(struct publisher *pub);
/* Writes or waits for what is queued, and ends the thread. */
void pipe_publish_finish(struct publisher *pub);
void pipe_publish_begin_stop(struct publisher *pub, uint64_t deadline_ns);
int pipe_publish_drain(struct publisher *pub, uint64_t timeout_ms);
const char *pipe_publish_where(const struct publisher *pub);
/* Frees @pub and the batches it did not write; the sink by the stop's
 * deadline. */
void pipe_publish_free(struct publisher *pub);

#endif

/* SPDX-License-Identifier: MIT */
/* offcpu: where threads wait, from a BPF program on the scheduler.
 *
 * A program on the sched_switch tracepoint (agent/sampling/offcpu.bpf.c,
 * loaded with libbpf) draws waits of the watched threads as they begin,
 * with a probability from each thread's mean wait (mean / min_block, at most
 * 1); a drawn wait's weight is its length over its probability, so weights
 * sum to an unbiased estimate of off-CPU time. Every drawn wait is timed;
 * within a budget a second per CPU its start also copies the thread's
 * kernel stack and its user registers and stack (or its frame-pointer
 * callchain), and past it a random share of them (offcpu_draw.h). A wait's
 * end gives its length, and when it was woken (its enqueue time). The waits in
 * progress when the program is attached are seeded by a task iterator,
 * with their stacks, from then. This module turns them into
 * FX_RECORD_OFFCPU and FX_RECORD_OFFCPU_END records (record.h) of the
 * sampler's format, for the same unwinder as CPU samples; the sampler
 * merges them with its records in time order (fx_sampler_set_offcpu()).
 *
 * Needs BTF, Linux 5.15 (task storage, bpf_task_pt_regs from tracepoints),
 * and what perf needs plus CAP_BPF. Not thread-safe: one owner.
 */
#ifndef FXAGENT_OFFCPU_H
#define FXAGENT_OFFCPU_H

#include <linux/perf_event.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "fxagent/record.h"

enum fx_offcpu_state_kind {
	FX_OFFCPU_STATE_SLEEP = 1,    /* interruptible: a lock, a read, a sleep */
	FX_OFFCPU_STATE_DISK = 2,     /* uninterruptible: mostly disk I/O */
	FX_OFFCPU_STATE_RUNNABLE = 3, /* preempted or yielded: waiting for a CPU */
	FX_OFFCPU_STATE_WOKEN = 4,    /* woken, waiting for a CPU (run-queue delay) */
};

struct fx_offcpu_opts {
	uint64_t min_block_ns; /* mean wait from which every wait is sampled */
	uint32_t budget;       /* sampled waits per second per CPU */
	uint32_t stack_bytes;  /* the user stack copy; 0: frame-pointer callchains */
	bool kernel;	       /* kernel stacks */
	/* Watch only these processes (NULL: every user thread, or the cgroups
	 * added with fx_offcpu_add_cgroup() when cgroups is set). */
	const uint32_t *pids;
	size_t npids;
	bool cgroups;
	unsigned cpus; /* for the ring's size: CPUs sampled */
};

/* Since the program was loaded. "Waits" are off-CPU waits, never
 * samples (those are the CPU's). */
struct fx_offcpu_stats {
	uint64_t waits;	       /* waits begun by watched threads, drawn or not */
	uint64_t drawn;	       /* of them timed: stacked + unstacked + lost */
	uint64_t wait_ns;      /* the measured time of the drawn that ended */
	uint64_t stacked;      /* drawn waits written with their stacks */
	uint64_t unstacked;    /* written without (over the budget): timed only */
	uint64_t lost;	       /* drawn waits lost for room (ring, queue) */
	uint64_t lost_ns;      /* their weights, where known */
	uint64_t seeded;       /* waits in progress at attach, counted from then */
	uint64_t stack_faults; /* waits whose user stack could not be read */
	uint64_t bad;	       /* events that did not decode */
	size_t ring_bytes;     /* the ring's size */
};

/* The name for @state: "sleeping", "uninterruptible (I/O)", "runnable
 * (preempted)", "runnable (woken)", or "off-CPU". */
const char *fx_offcpu_state_name(uint32_t state);

struct fx_offcpu;

/* Loads the program (not yet attached) for records of @fmt (the sampler's;
 * it must hold IP, TID, TIME, CPU, PERIOD and CALLCHAIN, and REGS_USER and
 * STACK_USER when stack_bytes is set). Returns 0 and sets @out, or -errno
 * with why in @why (@len bytes: "the kernel has no BTF", ...). Logs
 * nothing: the caller says once that off-CPU time is not recorded. */
int fx_offcpu_open(const struct fx_offcpu_opts *opts, const struct fx_record_fmt *fmt,
		   struct fx_offcpu **out, char *why, size_t len);
void fx_offcpu_free(struct fx_offcpu *o);

/* Watches the cgroup v2 of id @cgroup_id (its inode number) and those below
 * it; waits there carry @tag. Returns 0 or -errno. */
int fx_offcpu_add_cgroup(struct fx_offcpu *o, uint64_t cgroup_id, uint32_t tag);
/* Seeds the threads of the cgroup open at @cgroup_fd and below (a target
 * added with fx_offcpu_add_cgroup()): those waiting when the program is
 * attached, or now if it is, are counted from then. */
void fx_offcpu_seed_cgroup(struct fx_offcpu *o, int cgroup_fd, uint32_t tag);
/* Stops watching the cgroups added with @tag. */
void fx_offcpu_remove_cgroup(struct fx_offcpu *o, uint32_t tag);

/* Attaches (enable) or detaches (disable) the program. Returns 0 or -errno
 * with why in @why. */
int fx_offcpu_enable(struct fx_offcpu *o, char *why, size_t len);
void fx_offcpu_disable(struct fx_offcpu *o);

/* An fd that polls readable when the ring is a quarter full (POLLIN). */
int fx_offcpu_poll_fd(const struct fx_offcpu *o);

/* Moves what the program wrote into a queue ordered by time. Returns the
 * number of records queued, or -errno. */
int fx_offcpu_read(struct fx_offcpu *o);
/* The queue's oldest record if it is not newer than @cut (its time in
 * @time), else NULL. fx_offcpu_pop() takes it off. */
const struct perf_event_header *fx_offcpu_peek(struct fx_offcpu *o, uint64_t cut, uint64_t *time);
void fx_offcpu_pop(struct fx_offcpu *o);

void fx_offcpu_get_stats(const struct fx_offcpu *o, struct fx_offcpu_stats *out);

/* A watched thread's own counters, read by the kernel (schedstat's). */
struct fx_offcpu_thread {
	uint32_t pid, tid;
	uint64_t at_ns;	   /* CLOCK_MONOTONIC, when read */
	uint64_t start_ns; /* CLOCK_MONOTONIC, when it was created */
	uint64_t on_ns;	   /* its time on a CPU so far */
	uint64_t runq_ns;  /* its time on a run queue so far */
};

/* Reads the counters of every watched user thread (in a cgroup target's
 * mode: every user thread) with a task iterator, into *out sorted by tid
 * (the object's buffer: good until the next call). Returns how many, or
 * -errno (the kernel cannot run the iterator: the waits' estimates then
 * stand alone). */
ssize_t fx_offcpu_tally(struct fx_offcpu *o, const struct fx_offcpu_thread **out);

#endif

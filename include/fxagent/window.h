/* SPDX-License-Identifier: MIT */
/* window: the samples of one time window, with frames and stacks interned.
 *
 * A frame is a location not yet symbolized: (object, file offset) for user
 * code, an absolute address for the kernel. A stack is a node of a prefix tree
 * (parent, frame), so each distinct call path is stored once. Samples refer to
 * stacks. Parents are always interned before their children, so the stack
 * array is in the order the Firefox Profiler's stack table wants.
 *
 * The arrays are public for reading by the profile writer; change them only
 * through the functions here. Not thread-safe: one owner at a time.
 */
#ifndef FXAGENT_WINDOW_H
#define FXAGENT_WINDOW_H

#include <stddef.h>
#include <stdint.h>

#include "fxagent/hashtab.h"

#define FX_NONE UINT32_MAX
/* Special values of fx_window_frame.object */
#define FX_OBJ_KERNEL  (UINT32_MAX - 1) /* addr is a kernel address */
#define FX_OBJ_UNKNOWN (UINT32_MAX - 2) /* addr is a user address in no known mapping */
/* addr is the state of an off-CPU wait (offcpu.h): the innermost frame of
 * its stack, "[off-CPU: sleeping]"; or FX_OFFCPU_NO_STACK: the outermost
 * frame, "[waits without a recorded stack]", of a thread's time in a state
 * none of whose waits in the window has a stack (over the budget, or none
 * drawn: fx_window_fold_waits()) */
#define FX_OBJ_OFFCPU	   (UINT32_MAX - 3)
#define FX_OFFCPU_NO_STACK 0

struct fx_window_frame {
	uint32_t object; /* object id (see procs.h), or FX_OBJ_KERNEL / FX_OBJ_UNKNOWN */
	uint64_t addr;	 /* file offset in the object, else the absolute address */
};

struct fx_window_stack {
	uint32_t parent; /* FX_NONE for a root (outermost) frame */
	uint32_t frame;	 /* index into frames */
};

struct fx_window_sample {
	uint64_t time_ns; /* CLOCK_MONOTONIC */
	uint32_t pid;
	uint32_t tid;
	uint32_t stack; /* index into stacks, FX_NONE for an empty stack */
	/* 0: a CPU sample; else an off-CPU wait of this many microseconds
	 * (its weight: sampled waits stand for more than their length), ending
	 * at time_ns */
	uint32_t wait_us;
};

struct fx_window_counters {
	uint64_t samples;	 /* samples added */
	uint64_t lost;		 /* samples the kernel reported lost */
	uint64_t dropped_stacks; /* samples whose stack did not fit under max_stacks */
	uint64_t truncated;	 /* samples whose stack was cut short */
	/* Off-CPU waits (never "samples"): each wait's part in this window
	 * counts once. waits: those shown, on their own stack or on the
	 * others' (below); wait_us: the time shown in all, after
	 * fx_window_fold_waits() */
	uint64_t waits;
	uint64_t wait_us;
	/* of them, timed without their stacks (over the budget): their time
	 * (their share of their thread's in that state, once folded) is shown
	 * on their thread's waits in the same state, scaled up for it */
	uint64_t waits_unstacked;
	uint64_t waits_unstacked_us;
	/* waits lost (no room in the ring or the agent's queue): not shown;
	 * their time where known, as the agent learnt of them in this window */
	uint64_t waits_lost;
	uint64_t waits_lost_us;
};

/* The off-CPU time of one thread in one state in the window: that of all
 * its drawn waits (exact_ns), and that of those shown on their own
 * stacks, by the weights they were added with (shown_ns). */
struct fx_window_waitsum {
	uint32_t pid, tid, state;
	uint64_t exact_ns; /* drawn_ns, or the kernel's share once folded */
	uint64_t shown_ns;
	uint64_t drawn_ns;     /* the drawn waits' time */
	uint64_t unstacked_ns; /* of it, the waits' without stacks */
	uint64_t at_ns;	       /* the last wait's end: where a stackless one goes */
};

struct fx_window_path {
	uint64_t hash;
	uint32_t node; /* the innermost frame's stack */
	uint32_t n;    /* frames */
};

#define FX_WINDOW_PATHS 1024

/* A call path interned lately, with the node of each of its frames. */
struct fx_window_recent {
	struct fx_window_frame *frames;
	uint32_t *nodes;
	size_t n, cap;
};

#define FX_WINDOW_RECENT 4

struct fx_window {
	struct fx_window_frame *frames;
	size_t nframes;
	struct fx_window_stack *stacks;
	size_t nstacks;
	struct fx_window_sample *samples;
	size_t nsamples;
	struct fx_window_counters counters;

	/* private */
	size_t frames_cap, stacks_cap, samples_cap;
	struct fx_window_waitsum *waitsums;
	size_t nwaitsums, waitsums_cap;
	struct fx_hashtab waitsum_index; /* into waitsums, by (tid, state) */
	struct fx_hashtab frame_index;	 /* into frames */
	struct fx_hashtab stack_index;	 /* into stacks */
	size_t max_stacks;
	/* Whole call paths interned lately, by a hash of their frames: most
	 * samples repeat one, and one check of its nodes costs less than
	 * interning each frame again. Taken on first use. */
	struct fx_window_path *paths;
	/* The last paths interned frame by frame: a new path mostly shares its
	 * outer frames with one of them (the same thread's last sample), and
	 * those nodes need no lookup. */
	struct fx_window_recent recent[FX_WINDOW_RECENT];
	unsigned recent_next;
};

/* Initializes an empty window holding at most @max_stacks distinct stacks
 * (0 = no cap), and so about as many frames at most: a stack past the cap
 * adds no frame. Cannot fail: memory is taken on first use. */
void fx_window_init(struct fx_window *w, size_t max_stacks);
/* Frees what the window holds; it can be initialized again. */
void fx_window_release(struct fx_window *w);
/* Empties the window, keeping its allocations for the next use. */
void fx_window_reset(struct fx_window *w);
/* The bytes the window's arrays and indexes hold (their capacity). */
size_t fx_window_bytes(const struct fx_window *w);

/* Interns a frame; returns its index, or FX_NONE on ENOMEM. */
uint32_t fx_window_intern_frame(struct fx_window *w, uint32_t object, uint64_t addr);

/* Interns the call path @frames[0..n-1] given outermost first (root first).
 * Returns the stack index of the innermost frame, FX_NONE for n == 0, or
 * FX_NONE with errno ENOSPC/ENOMEM when the stack cap or memory ran out. */
uint32_t fx_window_intern_stack(struct fx_window *w, const struct fx_window_frame *frames,
				size_t n);

/* Appends a sample. Returns 0 or -ENOMEM. */
int fx_window_add_sample(struct fx_window *w, uint64_t time_ns, uint32_t pid, uint32_t tid,
			 uint32_t stack);
/* Appends an off-CPU wait ending at @time_ns that stands for @weight_ns
 * (counted in microseconds, at most UINT32_MAX). Returns 0 or -ENOMEM. */
int fx_window_add_wait(struct fx_window *w, uint64_t time_ns, uint32_t pid, uint32_t tid,
		       uint32_t stack, uint64_t weight_ns);

/* Counts the part of a drawn wait of thread @tid in @state ending at
 * @time_ns: @exact_ns of off-CPU time (its length over its timing
 * probability), of which @shown_ns were added on its own stack with
 * fx_window_add_wait() (0: it has none). Returns 0 or -ENOMEM. */
int fx_window_count_wait(struct fx_window *w, uint64_t time_ns, uint32_t pid, uint32_t tid,
			 uint32_t state, uint64_t exact_ns, uint64_t shown_ns);

/* A thread's times in the window by the kernel's own counters (offcpu.h:
 * fx_offcpu_tally()): how long it lived in it, and of that how long it ran
 * and how long it waited on a run queue; the rest it was blocked. */
struct fx_window_thread_time {
	uint32_t tid;
	uint64_t alive_ns, on_ns, runq_ns;
};

/* Notes that thread @tid of @pid waits in this window's target, with no
 * wait counted here yet: fx_window_fold_waits() then gives it its time
 * from @times. Returns 0 or -ENOMEM. */
int fx_window_note_thread(struct fx_window *w, uint64_t time_ns, uint32_t pid, uint32_t tid);

/* Once the window is complete: each thread's time in each state becomes
 * that of all its drawn waits (fx_window_count_wait()), or, for a thread in
 * @times (sorted by tid; NULL when there are none), its blocked and
 * run-queue times by the kernel's counters, shared among its states as the
 * drawn waits share them. The waits shown on their own stacks are scaled to
 * those times (a wait over the budget was drawn at random, so the others'
 * stacks stand for it), and a thread and state with none gets one wait of
 * its time on the stack [FX_OFFCPU_NO_STACK, state]. Then wait_us is the
 * time shown in all. A second call changes nothing. */
void fx_window_fold_waits(struct fx_window *w, const struct fx_window_thread_time *times,
			  size_t ntimes);

#endif

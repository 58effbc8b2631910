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
 * its stack, "[off-CPU: sleeping]" */
#define FX_OBJ_OFFCPU (UINT32_MAX - 3)

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
	uint64_t waits;		 /* off-CPU waits added (of the samples) */
	uint64_t wait_us;	 /* their weights */
	/* sampled waits not shown: over the budget or out of room, with
	 * their weights (offcpu.h), as the agent learnt of them in this window */
	uint64_t waits_dropped;
	uint64_t waits_dropped_us;
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
	struct fx_hashtab frame_index; /* into frames */
	struct fx_hashtab stack_index; /* into stacks */
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

#endif

/* SPDX-License-Identifier: MIT */
/* unwind: turns one sample into the frames of its call path.
 *
 * Kernel frames come from the sample's callchain. User frames come from the
 * callchain too in frame-pointer mode (FX_UNWIND_FP), and from the sample's
 * registers and stack copy through DWARF CFI in FX_UNWIND_DWARF (dwunwind.h),
 * which also walks code built without frame pointers (most of Debian).
 * Return addresses (every frame but the innermost of each part) are moved back
 * by one byte so they point into the call instruction: that is the line and
 * the inline level the caller was at.
 */
#ifndef FXAGENT_UNWIND_H
#define FXAGENT_UNWIND_H

#include <stdbool.h>
#include <stddef.h>

#include "fxagent/dwunwind.h"
#include "fxagent/procs.h"
#include "fxagent/record.h"
#include "fxagent/window.h"

#define FX_UNWIND_MAX_FRAMES 256

enum fx_unwind_mode {
	FX_UNWIND_FP,
	FX_UNWIND_DWARF,
};

struct fx_unwind_opts {
	enum fx_unwind_mode mode;
	bool kernel;			/* keep kernel frames */
	const struct fx_objects *objs;	/* FX_UNWIND_DWARF: the objects of the maps */
	size_t max_procs;		/* FX_UNWIND_DWARF: processes with a cached Dwfl */
	enum fx_dwunwind_engine engine; /* FX_UNWIND_DWARF: how (dwunwind.h) */
	bool jit; /* FX_UNWIND_DWARF: read JIT code's unwinding info (jitunw.h) */
};

struct fx_unwind_result {
	size_t n; /* frames written, outermost first */
	/* The user frames do not reach the outermost one (_start, a thread's
	 * start, by its CFI): the depth cap, a walk without CFI or that ran out
	 * of its copy (dwunwind.h), a frame-pointer chain that stopped in code
	 * without frame pointers. Kernel threads, with no user part, are whole. */
	bool truncated;
};

struct fx_unwinder;

/* NULL on ENOMEM. */
struct fx_unwinder *fx_unwind_new(const struct fx_unwind_opts *opts);
void fx_unwind_free(struct fx_unwinder *u);

/* Forgets what is cached for @pid (it exited). */
void fx_unwind_forget(struct fx_unwinder *u, uint32_t pid);

/* NULL in frame-pointer mode. */
const struct fx_dwunwind *fx_unwind_dwarf(const struct fx_unwinder *u);

/* fx_dwunwind_mark() / fx_dwunwind_drop_idle() in dwarf mode; in fp mode,
 * the rules that tell the outermost frame. */
uint64_t fx_unwind_mark(const struct fx_unwinder *u);
size_t fx_unwind_drop_idle(struct fx_unwinder *u, uint64_t mark);

/* Writes the call path of @s (taken in process @proc, which may be NULL for
 * kernel threads) into @out (@cap entries, outermost first). */
void fx_unwind_sample(struct fx_unwinder *u, const struct fx_proc *proc,
		      const struct fx_record_sample *s, struct fx_window_frame *out, size_t cap,
		      struct fx_unwind_result *res);

#endif

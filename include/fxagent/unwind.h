/* SPDX-License-Identifier: MIT */
/* unwind: turns one sample into the frames of its call path.
 *
 * Kernel frames come from the sample's callchain. User frames come from the
 * callchain too in frame-pointer mode (FX_UNWIND_FP); a DWARF mode working from
 * the sample's registers and stack copy plugs in behind the same call.
 * Return addresses (every frame but the innermost of each part) are moved back
 * by one byte so they point into the call instruction: that is the line and
 * the inline level the caller was at.
 */
#ifndef FXAGENT_UNWIND_H
#define FXAGENT_UNWIND_H

#include <stdbool.h>
#include <stddef.h>

#include "fxagent/procs.h"
#include "fxagent/record.h"
#include "fxagent/window.h"

#define FX_UNWIND_MAX_FRAMES 256

enum fx_unwind_mode {
	FX_UNWIND_FP,
};

struct fx_unwind_opts {
	enum fx_unwind_mode mode;
	bool kernel; /* keep kernel frames */
};

struct fx_unwind_result {
	size_t n;	/* frames written, outermost first */
	bool truncated; /* the walk stopped early (depth cap, bad callchain) */
};

struct fx_unwinder;

struct fx_unwinder *fx_unwind_new(const struct fx_unwind_opts *opts);
void fx_unwind_free(struct fx_unwinder *u);

/* Writes the call path of @s (taken in process @proc, which may be NULL for
 * kernel threads) into @out (@cap entries, outermost first). */
void fx_unwind_sample(struct fx_unwinder *u, const struct fx_proc *proc,
		      const struct fx_record_sample *s, struct fx_window_frame *out, size_t cap,
		      struct fx_unwind_result *res);

#endif

/* SPDX-License-Identifier: MIT */
/* report: turns a closed window into a profile file.
 *
 * Symbolizes the window's distinct frames in one batch per object (user code
 * through the symbolizer, kernel code through kallsyms), names threads and
 * processes from the process table, and writes the processed profile.
 */
#ifndef FXAGENT_REPORT_H
#define FXAGENT_REPORT_H

#include <stddef.h>
#include <stdint.h>

#include "fxagent/jvmrefresh.h"
#include "fxagent/kallsyms.h"
#include "fxagent/namecheck.h"
#include "fxagent/objects.h"
#include "fxagent/procs.h"
#include "fxagent/profile.h"
#include "fxagent/recorder.h"
#include "fxagent/symbolize.h"
#include "fxagent/window.h"

struct fx_report_input {
	const struct fx_window *window;
	const struct fx_thread_name *names; /* fx_procs_names() of the window */
	size_t nnames;
	const struct fx_objects *objs;
	struct fx_symbolizer *symbolizer;
	const struct fx_kallsyms *kallsyms; /* NULL: kernel frames stay addresses */
	const struct fx_lost_event *lost;
	size_t nlost;
	struct fx_profile_meta meta;
	int64_t seq;		 /* window sequence number */
	uint32_t marker_pid;	 /* process whose track carries markers */
	const char *marker_name; /* its name */
	/* Called before symbolizing, for progress on a terminal; may be NULL. */
	void (*on_symbolize)(size_t addresses, size_t objects);
	/* Not NULL: every name is judged (fxagent/namecheck.h) and counted
	 * here; the first *name_check_log_left wrong ones are logged. */
	struct fx_namecheck_stats *name_check;
	unsigned *name_check_log_left;
	/* Name the frames of JIT code from the processes' perf maps
	 * (fxagent/perfmap.h); false: they stay addresses. */
	bool jit;
	/* One track per process and thread name (profile.h's reuse_threads). */
	bool reuse_threads;
	/* Not NULL (with jit): a JVM whose JIT frames no perf map line names
	 * is asked for a fresh map (jvmrefresh.h), the publisher's state;
	 * with jvm_ask false, the lib's status only says that asking is off. */
	struct fx_jvmrefresh *jvm;
	bool jvm_ask;
};

struct fx_report_stats {
	struct fx_profile_stats profile;
	size_t addresses;    /* distinct frames symbolized */
	size_t objects;	     /* objects they were in */
	uint64_t unreadable; /* objects that could not be read */
};

/* Fills @out[0..@n) with the lost-sample markers of @lost, for the window
 * [@start_ns, @end_ns] (CLOCK_MONOTONIC). Every marker lies inside the window:
 * a record timed before its start (read after the window it belongs to was
 * written) is placed at 0, one timed after its end at the end, and
 * outside_ms says by how much it was off. Returns @n. */
size_t fx_report_lost_markers(const struct fx_lost_event *lost, size_t n, uint64_t start_ns,
			      uint64_t end_ns, struct fx_profile_marker *out);

/* Writes the window to @path (gzip; "-" for stdout). Returns 0 or -errno,
 * having logged what failed. */
int fx_report_write(const struct fx_report_input *in, const char *path,
		    struct fx_report_stats *stats);

#endif

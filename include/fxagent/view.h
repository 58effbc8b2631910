/* SPDX-License-Identifier: MIT */
/* view: `fxagent view SOURCE...`, any slice of the fleet's chunks as one
 * profile.
 *
 * Chunks come from sources (source.h: directories, files, HTTP listings),
 * are chosen by their own metadata (target, host, labels, time), read as a
 * stream (yajl, one chunk at a time) and merged into one set of shared
 * tables with one track per host and thread, process or host; the result is
 * written to a file or served to the Firefox Profiler (serve.h). Bad chunks
 * are skipped, counted and named; the rest still merge.
 */
#ifndef FXAGENT_VIEW_H
#define FXAGENT_VIEW_H

#include <stdbool.h>

enum fx_view_merge {
	FX_VIEW_MERGE_THREADS,	 /* one track per (host, process, thread) */
	FX_VIEW_MERGE_PROCESSES, /* one track per (host, process) */
	FX_VIEW_MERGE_ALL,	 /* one track per host */
};

/* Runs the view command: @argv[0] is "view". Returns the exit status: 0
 * done, 1 a failure at run time (no chunk merged, an output not written),
 * 2 a usage error. */
int fx_view_main(int argc, char **argv);

/* Serves the profile file at @path (`fxagent --once --serve`) on @listen
 * (serve.h's form; NULL for the default) until SIGINT or SIGTERM, opening
 * the browser with @open. Returns 0 or -errno, logged. */
int fx_view_serve_file(const char *path, const char *listen, bool open);

#endif

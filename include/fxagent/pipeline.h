/* SPDX-License-Identifier: MIT */
/* pipeline: the one path from the perf rings to chunks, for every mode.
 *
 *   sources            windows              publisher              sink
 *   targets, sampler,  one per target,  ->  symbolize + encode  ->  file, directory,
 *   unwinder, recorder cut on the clock     (report.h)              or spool + upload
 *
 * The caller's thread (the sampling thread) reads the rings, unwinds each
 * sample into the window of every target it belongs to, and at a window's
 * end swaps in fresh windows and queues the closed ones as one batch. The
 * publisher symbolizes and writes a batch, one chunk per target, on its own
 * thread (the daemon) or on the caller's in fx_pipeline_finish (--once). The
 * sampling thread never waits for symbolization or I/O. See
 * docs/ARCHITECTURE.md for who owns what.
 *
 * Drivers: main.c (--once: one window, written at the end) and daemon.c
 * (windows aligned to the wall clock, reload, systemd). Both write the same
 * chunk: the same metadata, the recording marker and the lost-sample markers
 * with their times.
 */
#ifndef FXAGENT_PIPELINE_H
#define FXAGENT_PIPELINE_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "fxagent/config.h"
#include "fxagent/offcpu.h"
#include "fxagent/namecheck.h"
#include "fxagent/ringplan.h"
#include "fxagent/unwind.h"

struct fx_pipeline_opts {
	/* Sampling, window, targets, labels, symbolization, output, upload and
	 * metrics settings. Must outlive the pipeline, or until a reconfigure
	 * replaces it. */
	const struct fx_config *cfg;
	/* Only the samples of these processes (--once --pid); NULL: all. */
	const uint32_t *pids;
	size_t npids;
	/* Every chunk to this one file ("-": stdout); NULL: the config's sink
	 * (the spool with upload.url, else output.directory). */
	const char *output;
	/* Windows of window.seconds aligned to the wall clock; false: one
	 * window from fx_pipeline_start to fx_pipeline_finish. */
	bool rotate;
	/* A publisher thread writes closed windows; false: fx_pipeline_finish
	 * writes them on the caller's thread, after sampling has stopped and its
	 * memory is freed (the --once peak is then one of the two, not both). */
	bool thread;
	/* After each window: metrics.textfile and systemd's STATUS=. */
	bool report_status;
	/* Called before a window is symbolized, for progress; may be NULL. */
	void (*on_symbolize)(size_t addresses, size_t objects);
};

struct fx_pipeline_stats {
	uint64_t windows;      /* windows closed */
	uint64_t chunks;       /* chunks written */
	uint64_t chunk_errors; /* chunks that could not be written */
	uint64_t samples;
	uint64_t lost;
	/* Samples left out: of the idle task (sampling.include_idle), and of
	 * processes not asked for (--pid, targets). */
	uint64_t idle, filtered;
	/* Window ends passed while the publisher was behind: each made the open
	 * window one window longer. */
	uint64_t stretched;
	/* symbolization.check_names: the names judged (the publisher's; read
	 * them after fx_pipeline_finish). */
	struct fx_namecheck_stats names;
	/* Time the sampling thread spent rotating windows: wall clock and the
	 * thread's own CPU time. */
	uint64_t rotation_ns_max, rotation_ns_sum;
	uint64_t rotation_cpu_ns_max, rotation_cpu_ns_sum;
	/* Off-CPU waits (offcpu.h), when on: the program's counters, and the
	 * waits the recorder lost (a start replaced, or over its bound) and
	 * the ends it found no start for. */
	bool off_cpu;
	struct fx_offcpu_stats offcpu;
	uint64_t waits_lost, waits_unpaired;
	/* The windows' off-CPU counters summed (window.h), as written in the
	 * chunks: what --once says */
	uint64_t waits, wait_us, waits_unstacked, waits_unstacked_us, waits_lost_shown,
		waits_lost_us;
	/* The last chunk written (read them after fx_pipeline_finish). */
	char last_path[PATH_MAX];
	uint64_t last_samples, last_waits, last_threads, last_bytes;
	size_t last_frames, last_stacks, last_objects;
};

struct fx_pipeline;

/* Opens the sink, the process table and the perf events (disabled). Returns
 * 0 or -errno (logged). */
int fx_pipeline_new(const struct fx_pipeline_opts *opts, struct fx_pipeline **out);

/* The perf rings @cfg's sampling would map on this machine, checked against
 * this process's locked-memory limits, as fx_pipeline_new() will: see
 * fx_sampler_plan() (@msg gets two lines; returns 0, 1, or -errno). */
int fx_pipeline_ring_plan(const struct fx_config *cfg, struct fx_ringplan *out, char *msg,
			  size_t len);

/* Enables the events: the first window starts now. Returns 0 or -errno. */
int fx_pipeline_start(struct fx_pipeline *p);

/* Reads the rings for up to @max_wait_ms, and less when the window ends
 * before; closes the window at its end. Returns >= 0, or -errno (logged). */
int fx_pipeline_step(struct fx_pipeline *p, int max_wait_ms);

/* CLOCK_MONOTONIC end of the open window (UINT64_MAX without rotation). */
uint64_t fx_pipeline_window_end(const struct fx_pipeline *p);

/* Keeps the open window past its end until fx_pipeline_reconfigure cuts it
 * (a reload is pending). */
void fx_pipeline_hold(struct fx_pipeline *p);

/* Cuts the open window now (it is written with the old config) and goes on
 * with @cfg, which the pipeline owns from now on (fx_config_release + free).
 * The perf events are opened again only when the sampling settings changed.
 * Returns 0, or -errno when sampling cannot go on (logged). */
int fx_pipeline_reconfigure(struct fx_pipeline *p, struct fx_config *cfg);

/* Stops sampling, closes the open window and writes what is left: waits for
 * the publisher thread, or writes on this thread. Returns 0, or -errno when
 * sampling or a chunk failed (logged). Call once. */
int fx_pipeline_finish(struct fx_pipeline *p);

/* The agent stops: deliveries of chunks end by @deadline_ns
 * (CLOCK_MONOTONIC). Safe from any thread; the first deadline wins. */
void fx_pipeline_begin_stop(struct fx_pipeline *p, uint64_t deadline_ns);

/* After fx_pipeline_finish: waits up to @timeout_ms for the sink to deliver
 * everything (fx_sink_drain's results). */
int fx_pipeline_drain(struct fx_pipeline *p, uint64_t timeout_ms);

/* Where chunks go, for messages (a path, directory or spool). */
const char *fx_pipeline_where(const struct fx_pipeline *p);

/* Counts so far; from the sampling thread, or after fx_pipeline_finish. */
void fx_pipeline_get_stats(struct fx_pipeline *p, struct fx_pipeline_stats *out);

/* The unwinder, for its statistics; valid until fx_pipeline_free. */
const struct fx_unwinder *fx_pipeline_unwinder(const struct fx_pipeline *p);

/* Frees @p (NULL is fine); the sink by the stop's deadline, or now. */
void fx_pipeline_free(struct fx_pipeline *p);

#endif

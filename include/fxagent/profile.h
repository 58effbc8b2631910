/* SPDX-License-Identifier: MIT */
/* profile: writes a window as a Firefox Profiler processed profile (v66).
 *
 * The caller gives the window (frames, stacks, samples), what each window frame
 * resolved to, the libraries, the threads and the markers; this module builds
 * the shared tables (strings, funcs, native symbols, frames with inline levels,
 * stacks) and streams the JSON through fx_json. The format is the profiler's
 * own: its processed-profile types (firefox-devtools/profiler, src/types).
 */
#ifndef FXAGENT_PROFILE_H
#define FXAGENT_PROFILE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "fxagent/json.h"
#include "fxagent/symbolize.h"
#include "fxagent/window.h"

enum fx_category {
	FX_CAT_OTHER = 0,
	FX_CAT_USER = 1,
	FX_CAT_KERNEL = 2,
};

struct fx_profile_lib {
	const char *name;	 /* base name, e.g. "libc.so.6" */
	const char *path;	 /* path as the process saw it */
	const char *debug_name;	 /* usually = name */
	const char *debug_path;	 /* usually = path */
	const uint8_t *build_id; /* NULL when unknown: codeId and breakpadId are then "" */
	size_t build_id_len;
	const char *arch; /* "x86_64" */
	/* Where its names came from (fx_sym_origin_name(): "stripped",
	 * "debuginfod", ...), shown per library under "Profile Information"
	 * and in meta.fxagent.symbols; NULL: not shown. */
	const char *symbols;
};

/* What window frame i resolved to. */
struct fx_profile_frame {
	int32_t lib; /* index into libs, -1 for none */
	enum fx_category category;
	const struct fx_sym_result *sym; /* never NULL; see symbolize.h */
};

struct fx_profile_thread {
	uint32_t pid;
	uint32_t tid;
	const char *name;	  /* thread name */
	const char *process_name; /* name of the process (its main thread's comm / exe) */
	/* The thread's off-CPU waits (window samples with wait_us), as a track
	 * of its own weighted in milliseconds ("tracing-ms"); its CPU samples
	 * go to the entry without it. */
	bool off_cpu;
};

enum fx_marker_type {
	FX_MARKER_RECORDING, /* the recording window: interval, with wallclock text */
	FX_MARKER_LOST,	     /* lost samples: instant, with count */
	FX_MARKER_OFFCPU,    /* the window's off-CPU waits: interval, with waits */
};

struct fx_profile_marker {
	enum fx_marker_type type;
	double start_ms;    /* relative to meta start */
	double end_ms;	    /* for intervals; ignored for instants */
	const char *text;   /* FX_MARKER_RECORDING: wall-clock range text */
	const char *target; /* FX_MARKER_RECORDING: the target's name, or NULL */
	int64_t count;	    /* FX_MARKER_LOST: samples lost; RECORDING: samples taken */
	int64_t seq;	    /* FX_MARKER_RECORDING: window sequence number */
	int64_t lost;	    /* FX_MARKER_RECORDING: samples lost in the window */
	int64_t truncated;  /* FX_MARKER_RECORDING: samples whose stack was cut short */
	/* FX_MARKER_LOST: ms the record's own time lay before (< 0) or after
	 * (> 0) the window it is counted in; 0 inside. */
	double outside_ms;
	/* FX_MARKER_OFFCPU: the waits shown and their time; of them those
	 * timed without their stacks (over the budget); the waits lost */
	int64_t waits, unstacked, waits_lost;
	double wait_ms, unstacked_ms, lost_ms;
};

struct fx_profile_kv {
	const char *key;
	const char *value;
};

struct fx_profile_meta {
	double start_time_ms; /* Unix epoch milliseconds of start_ns */
	uint64_t start_ns;    /* CLOCK_MONOTONIC time that is profile time 0 */
	uint64_t end_ns;      /* CLOCK_MONOTONIC end of the recording */
	double end_time_ms;   /* Unix epoch milliseconds of end_ns, exact (a window
				 boundary); 0 = start_time_ms + the duration */
	double interval_ms;   /* 1000 / frequency */
	const char *product;  /* "fxagent" */
	const char *host;     /* host name, may be NULL */
	/* The chunk's identity, written to meta.fxagent for collectors and to
	 * meta.extra for the profiler's "Profile Information" (NULL/0: left out). */
	const char *target; /* target name ("system" for the whole system) */
	int64_t seq;	    /* window sequence number */
	/* The configured window length (the daemon's window.seconds), written
	 * as meta.fxagent.windowMs: a viewer counts the windows a gap lost by
	 * it, not by the neighbours, which a restart cuts short (--once: its
	 * one window's length). 0: left out. */
	uint64_t window_ms;
	const struct fx_profile_kv *labels;
	size_t nlabels;
	uint64_t samples, lost, truncated;
	uint64_t dropped; /* samples left out: their stack was over window.max_stacks */
	/* Off-CPU waits (offcpu.h), written as meta.fxagent.offCpu when on
	 * (window.h's counters): waits shown and the milliseconds they stand
	 * for; of them those timed without their stacks, and theirs; waits
	 * lost (out of room), and theirs. */
	bool off_cpu;
	uint64_t waits, waits_unstacked, waits_lost;
	double wait_ms, waits_unstacked_ms, waits_lost_ms;
};

struct fx_profile_input {
	struct fx_profile_meta meta;
	const struct fx_window *window;
	const struct fx_profile_frame *frames; /* window->nframes entries */
	const struct fx_profile_lib *libs;
	size_t nlibs;
	/* One entry per thread to show; samples of threads not listed are left
	 * out. Order is kept; list a process's main thread (tid == pid) first. */
	const struct fx_profile_thread *threads;
	size_t nthreads;
	const struct fx_profile_marker *markers;
	size_t nmarkers;
	/* The markers go on the listed on-CPU thread with the most samples,
	 * which the profiler shows by default; on this one (an index into
	 * threads) when no thread has a sample. */
	size_t marker_thread;
	/* One track per process and thread name: the samples of every listed
	 * thread but the main one (tid == pid) go to the track of the first
	 * thread listed with its pid, name and off_cpu, in time order; the
	 * others are not written. Off: one track per listed thread. */
	bool reuse_threads;
};

struct fx_profile_stats {
	uint64_t samples; /* samples written */
	uint64_t threads; /* threads (tracks) written */
	uint64_t bytes;	  /* compressed bytes written (file variant) */
};

/* The processed format version written, and the marker schemas' names. */
#define FX_PROFILE_VERSION  66
#define FX_SCHEMA_RECORDING "FxRecording"
#define FX_SCHEMA_LOST	    "FxLostSamples"
#define FX_SCHEMA_GAP	    "FxGap"
#define FX_SCHEMA_OFFCPU    "FxOffCpu"

/* For writers of other profiles (the view's merge): the keys of meta that
 * every profile fxagent writes holds, from "version" to "profilingEndTime"
 * (categories Other, User, Kernel; the FxRecording, FxLostSamples and FxGap
 * schemas), into an open meta object; and one labelled string of
 * meta.extra's entries. */
void fx_profile_meta_common(struct fx_json *j, const char *product, double interval_ms,
			    double start_time_ms, double end_ms);
void fx_profile_extra_entry(struct fx_json *j, const char *label, const char *value);
/* meta.initialSelectedThreads: the thread at @index of "threads" is the
 * one the profiler selects when it opens the profile. */
void fx_profile_selected_thread(struct fx_json *j, size_t index);
/* The empty "sources" and "sourceLocationTable" of the shared tables. */
void fx_profile_no_sources(struct fx_json *j);
/* A thread's keys before its samples and markers, in an open thread object. */
void fx_profile_thread_head(struct fx_json *j, const char *name, const char *process_name,
			    bool main, const char *pid, int64_t tid);

/* Writes the profile JSON to @j (does not call fx_json_finish). The on-CPU
 * track with the most samples is the one the profiler selects first
 * (meta.initialSelectedThreads; left to the profiler when no track has a
 * sample). Returns 0 or -errno (-ENOMEM, or the writer's error). */
int fx_profile_write_json(const struct fx_profile_input *in, struct fx_json *j,
			  struct fx_profile_stats *stats);

/* Writes the profile gzip-compressed to @path ("-" for stdout). A file is
 * written to a temporary name beside it, fsynced and renamed into place, so a
 * reader never sees half a file. Returns 0 or -errno, logging what failed. */
int fx_profile_write_file(const struct fx_profile_input *in, const char *path,
			  struct fx_profile_stats *stats);

/* Formats the Breakpad id of a GNU build-id: the first 16 bytes as a GUID with
 * the first three fields byte-swapped, upper-case hex, then "0"; @out must hold
 * 34 bytes. A build-id shorter than 16 bytes is zero-padded. Returns -EINVAL
 * for len == 0. */
int fx_profile_breakpad_id(const uint8_t *build_id, size_t len, char out[34]);

/* The text of an FxRecording marker, "2026-11-27T02:08:36Z - 02:08:46Z", for
 * a window from @start_ms to @end_ms (Unix ms) into @buf (48 bytes hold it).
 * Each end is rounded to the nearest second: a window that ends on a second
 * may be a hair short of it in floating point. A time outside the years 1970
 * to 9999 (another host's number, read by the view) shows as 1970. */
void fx_profile_wallclock(double start_ms, double end_ms, char *buf, size_t size);

/* What an FX_MARKER_OFFCPU marker says, in the words --once and the agent's
 * log use too: "1204 waits (45.1 s); 884 of them (32.9 s) over the budget,
 * without their own stacks ...; 12 lost (0.4 s)". */
void fx_profile_offcpu_summary(const struct fx_profile_marker *m, char *buf, size_t size);

#endif

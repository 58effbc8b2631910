/* SPDX-License-Identifier: MIT */
/* view's inside: a chunk as read (read.c), the merged profile (merge.c) and
 * its writer (write.c). view.c drives them; see include/fxagent/view.h. */
#ifndef FXAGENT_VIEW_INT_H
#define FXAGENT_VIEW_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "fxagent/gzip.h"
#include "fxagent/hashtab.h"
#include "fxagent/json.h"
#include "fxagent/profile.h"
#include "fxagent/view.h"

/* The processed format version chunks are written in, the one we read. */
#define VIEW_FORMAT_VERSION FX_PROFILE_VERSION

/* ---- a chunk as read (read.c) ---- */

/* A string of the chunk: bytes at text + off. */
struct vstr {
	uint32_t off, len;
};

/* A column of numbers as they were in the file; NaN stands for null. */
struct vcol {
	double *v;
	size_t n, cap;
};

struct vstrs {
	struct vstr *v;
	size_t n, cap;
};

enum vlib_field {
	VLIB_NAME,
	VLIB_PATH,
	VLIB_DEBUG_NAME,
	VLIB_DEBUG_PATH,
	VLIB_ARCH,
	VLIB_BREAKPAD,
	VLIB_CODE_ID,
	VLIB_NFIELDS,
};

/* The libs[] keys, by field. */
extern const char *const vlib_keys[VLIB_NFIELDS];

struct vlib {
	struct vstr f[VLIB_NFIELDS];
};

struct vthread {
	struct vstr name, process_name, pid;
	double tid;
	bool off_cpu; /* samples.weightType "tracing-ms": off-CPU waits, weights in ms */
	size_t samples_begin, samples_end; /* into the sample columns */
	size_t markers_begin, markers_end; /* into the marker columns */
};

struct vlabel {
	struct vstr key, value;
};

/* The columns read, in one list so that they are reset and freed together. */
enum vcol_id {
	VC_RES_NAME,
	VC_RES_LIB,
	VC_NSYM_LIB,
	VC_NSYM_ADDR,
	VC_NSYM_NAME,
	VC_NSYM_SIZE,
	VC_FUNC_NAME,
	VC_FUNC_RES,
	VC_FRAME_ADDR,
	VC_FRAME_DEPTH,
	VC_FRAME_CAT,
	VC_FRAME_FUNC,
	VC_FRAME_NSYM,
	VC_FRAME_LINE,
	VC_STACK_FRAME,
	VC_STACK_PREFIX,
	VC_SAMPLE_STACK,
	VC_SAMPLE_TIME,
	VC_SAMPLE_WEIGHT,
	VC_MARKER_START,
	VC_MARKER_COUNT, /* data.count of each marker; NaN where none */
	VC_SAMPLE_DELTA, /* a thread's timeDeltas, made VC_SAMPLE_TIME at its end */
	VC_NCOLS,
};

struct vchunk {
	/* Every string's bytes. */
	char *text;
	size_t tlen, tcap;
	struct vstrs strings;	   /* shared.stringArray */
	struct vstrs marker_types; /* data.type of each marker */

	/* meta */
	double version; /* preprocessedProfileVersion, NaN when absent */
	double interval, start_time, end_ms;
	bool fx; /* meta.fxagent was there */
	struct vstr product, target, host;
	double seq, window_start, window_end, samples, lost, truncated;
	double window_ms; /* the configured window length; NaN: not said */
	struct vlabel *labels;
	size_t nlabels, labels_cap;

	struct vlib *libs;
	size_t nlibs, libs_cap;
	struct vthread *threads;
	size_t nthreads, threads_cap;
	struct vcol col[VC_NCOLS];
};

void view_vchunk_reset(struct vchunk *c);
void view_vchunk_free(struct vchunk *c);

static inline const char *view_vstr_at(const struct vchunk *c, struct vstr s)
{
	/* A chunk without a string (all its keys missing) has no text yet:
	 * NULL + 0 is undefined behaviour (fuzz_view). */
	return c->text ? c->text + s.off : "";
}

/* Called once the chunk's meta has been read: returns true to read on,
 * false to stop (the chunk is not wanted). */
typedef bool (*view_meta_fn)(void *arg, const struct vchunk *c);

/* Reads the chunk in @data (gzip or plain JSON) into @c, streaming: the
 * text is inflated and parsed 64 KiB at a time. Returns 0; 1 when @meta_cb
 * stopped it; or -EINVAL / -ENOMEM / -E2BIG with the reason written to
 * @why (nothing is logged). A chunk read without error is also checked:
 * columns of one table have one length, every index is in range. */
int view_read_chunk(const void *data, size_t len, struct vchunk *c, view_meta_fn meta_cb, void *arg,
		    char *why, size_t why_size);

/* ---- reading on worker threads (pool.c) ---- */

struct view_pool;

/* A chunk handed back (on the caller's thread, in the order handed in):
 * @rc is view_read_chunk's (or the source's error, then @c holds nothing),
 * @why its reason, @len the chunk's bytes. Returns 0, or nonzero to stop. */
typedef int (*view_done_fn)(void *arg, const char *name, struct vchunk *c, int rc, const char *why,
			    size_t len);

/* Up to 3 @workers (0: the caller's thread reads); @meta_cb runs on them and
 * must be safe to. Returns 0 or -ENOMEM. */
int view_pool_new(unsigned workers, view_meta_fn meta_cb, void *meta_arg, view_done_fn done,
		  void *done_arg, struct view_pool **out);
/* Hands in a chunk (@data copied; @name must live until the drain) or the
 * source's error @err, handing back what is done. Returns 0, -ENOMEM, or
 * what a done callback returned. */
int view_pool_put(struct view_pool *p, const char *name, const void *data, size_t len, int err);
/* Hands back everything handed in. Returns as view_pool_put. */
int view_pool_drain(struct view_pool *p);
void view_pool_free(struct view_pool *p);

/* ---- the merged profile (merge.c) ---- */

#define NONE64 UINT64_MAX
/* The widest record (a library's fields); every record buffer has this many. */
#define REC_MAX 8

/* Fixed-size records interned: each distinct record gets an index. */
struct rectab {
	uint64_t *v; /* n records of width words */
	size_t width, n, cap;
	struct fx_hashtab h;
};

struct strtab {
	char *text;
	size_t tlen, tcap;
	uint64_t *ref; /* offset << 32 | length, per string */
	size_t n, cap;
	struct fx_hashtab h;
};

struct msample {
	double time; /* Unix epoch milliseconds */
	uint32_t track;
	uint32_t stack; /* UINT32_MAX: no stack */
	uint32_t weight;
};

enum mmarker_type {
	MM_WINDOW, /* one window of a target on a host */
	MM_LOST,   /* samples lost at a time */
	MM_GAP,	   /* windows missing from a target's run */
};

struct mtrack {
	uint32_t name, process_name; /* string indexes: the first seen */
	bool main;		     /* a process's main thread (or its only track) */
	bool off_cpu;		     /* off-CPU waits: sample weights in microseconds */
	double tid;		     /* the tid shown: a shared track's lowest */
};

struct mmarker {
	enum mmarker_type type;
	uint32_t host, target; /* string indexes */
	double start, end;     /* Unix epoch milliseconds */
	int64_t seq, count, lost, truncated;
};

struct merge {
	enum fx_view_merge mode;
	double bucket_ms;      /* 0: no folding yet */
	bool bucket_fixed;     /* --bucket: the user's, never widened */
	size_t fold_threshold; /* fold when more samples than this */

	struct strtab strs;
	struct rectab libs;   /* VLIB_NFIELDS string indexes */
	struct rectab res;    /* name, lib */
	struct rectab nsyms;  /* lib, address, name, size (UINT64_MAX: none) */
	struct rectab funcs;  /* name, resource */
	struct rectab frames; /* address, depth, category, func, nsym, line */
	struct rectab stacks; /* frame, prefix (UINT64_MAX: root) */
	/* threads: host, pid, tid; processes: host, pid; all: host. Then
	 * whether it holds waits, and the thread name's string index + 1 for a
	 * track that threads of one name share (reuse_threads: its tid key is
	 * 0), else 0. */
	struct rectab tracks;
	/* FX_VIEW_MERGE_THREADS: one track per process and thread name, the
	 * main thread's apart (--reuse-threads) */
	bool reuse_threads;
	struct mtrack *tinfo; /* per track */
	size_t tinfo_cap;
	uint32_t *order; /* tracks in the order written, after view_merge_finish */
	/* Windows merged: host, target, seq, start, end, configured length in
	 * ms (doubles' bits; 0: not said). */
	struct rectab windows;
	uint32_t nhosts;	 /* hosts merged, after view_merge_finish */
	uint32_t marker_name[3]; /* by enum mmarker_type, after view_merge_finish */

	struct msample *samples;
	size_t nsamples, samples_cap;
	struct fx_hashtab fold_h; /* folded samples by (track, time, stack) */
	struct mmarker *markers;
	size_t nmarkers, markers_cap;

	double interval, start, end; /* end, start: Unix epoch ms */
	double from, to;	     /* the time range kept; 0 for none */
	uint64_t raw_samples;	     /* before folding */

	/* Chunk-to-merged index maps, reused for each chunk. */
	uint32_t *map_str, *map_lib, *map_res, *map_nsym, *map_func, *map_frame, *map_stack;
	size_t map_cap[7];
};

int view_merge_init(struct merge *m, enum fx_view_merge mode, double bucket_ms,
		    size_t fold_threshold);
void view_merge_free(struct merge *m);
/* Adds chunk @c (read and checked). Returns 0 or -ENOMEM. */
int view_merge_add(struct merge *m, const struct vchunk *c);
/* Whether a chunk of the same host, target, window and sequence number was
 * merged already (a chunk listed twice). */
bool view_merge_has_window(struct merge *m, const struct vchunk *c);
/* After the last chunk: the gap markers, samples folded and in time order
 * per track. Returns 0 or -ENOMEM. */
int view_merge_finish(struct merge *m);
/* After view_merge_finish on both: each gets an empty track for every track
 * only the other has, and both are put in the same order, so that a track's
 * place is the same in both profiles (the profiler's compare view takes the
 * same thread of each). Returns 0 or -ENOMEM. */
int view_merge_align(struct merge *a, struct merge *b);
/* Interns a string. Returns its index or UINT32_MAX when memory ran out. */
uint32_t view_strtab_add(struct strtab *t, const char *s, size_t len);
void view_strtab_free(struct strtab *t);
static inline const char *view_strtab_at(const struct strtab *t, uint32_t i, size_t *len)
{
	*len = (size_t)(t->ref[i] & 0xffffffffu);
	return t->text + (t->ref[i] >> 32);
}

static inline const uint64_t *view_rectab_at(const struct rectab *t, size_t i)
{
	return t->v + i * t->width;
}
/* The index of record @r, added if new; UINT32_MAX when memory ran out. */
uint32_t view_rectab_add(struct rectab *t, const uint64_t *r);
void view_rectab_free(struct rectab *t);

/* ---- naming what chunks left unnamed (resym.c) ---- */

struct view_resym_opts {
	const char *const *debug_dirs; /* laid out as /usr/lib/debug/.build-id */
	size_t ndebug_dirs;
	const char *debuginfod_urls; /* space-separated; NULL: none */
};

struct view_resym_stats {
	size_t frames_unnamed; /* frames named "<library>+0x<offset>" */
	size_t frames_named;   /* of those, named now */
	size_t libs_named;     /* libraries whose debug file was found */
	size_t libs_missing;   /* libraries without one */
};

/* After view_merge_finish(): names the frames the chunks left unnamed from the
 * debug files of their libraries' build-ids (see resym.c). Returns 0 or
 * -ENOMEM. */
int view_resym(struct merge *m, const struct view_resym_opts *o, struct view_resym_stats *st);

/* ---- writing (write.c) ---- */

/* Writes the merged profile @m to @j. Returns 0 or the writer's -errno. */
int view_write_json(const struct merge *m, struct fx_json *j);
/* Each track's on-CPU samples, weights summed (off-CPU tracks: 0), by
 * track index; malloc'ed, NULL when out of memory. */
uint64_t *view_track_weights(const struct merge *m);
/* The process name track @t is shown under: with its host when there are
 * several hosts (and one track is not a host already). */
void view_track_process(const struct merge *m, uint32_t t, char *out, size_t size);

/* ---- exports for other tools (export.c, pprof.c) ---- */

/* On-CPU samples summed by track and stack. */
struct view_weight {
	uint32_t track, stack;
	uint64_t weight;
};

/* The on-CPU samples of @m with a stack, summed by (track, stack), in the
 * tracks' order: *@out (malloc'ed), *@n of them; *@total gets every on-CPU
 * sample's weight, those without a stack too. Off-CPU tracks are left out:
 * their weights are time, not samples. Returns 0 or -ENOMEM. */
int view_stack_weights(const struct merge *m, struct view_weight **out, size_t *n, uint64_t *total);
/* The place (rank) of the track with the most on-CPU samples; 0 if none. */
size_t view_busiest_track(const struct merge *m);
/* The function of stack @s's frame (a funcs index), or UINT32_MAX. */
uint32_t view_stack_func(const struct merge *m, uint64_t s);
/* Folded stacks, flamegraph.pl's input: a line per distinct stack, the
 * track's process name then the functions root first, ';' between them,
 * then a space and the samples. Appended to @out. Returns 0 or -errno. */
int view_export_folded(const struct merge *m, struct fx_gzip_buf *out);
/* The @n functions with the most self samples, with their total, as a text
 * table on @f. Returns 0 or -ENOMEM. */
int view_export_top(const struct merge *m, size_t n, FILE *f);
/* A pprof profile (profile.proto, gzip-compressed) appended to @out: one
 * sample per track and stack, labelled with the thread, process and host.
 * Returns 0 or -errno. */
int view_export_pprof(const struct merge *m, struct fx_gzip_buf *out);

#endif

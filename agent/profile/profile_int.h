/* SPDX-License-Identifier: MIT */
/* The profile writer's own declarations, shared by its files:
 *   tables.c  the shared tables (strings, resources, native symbols, funcs,
 *             frames, stacks, samples) built in memory, sized by the window
 *   write.c   the processed-profile JSON streamed through fx_json
 *   file.c    the gzip file, written atomically; Breakpad ids
 */
#ifndef FXAGENT_PROFILE_INT_H
#define FXAGENT_PROFILE_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "fxagent/hashtab.h"
#include "fxagent/profile.h"

#define SCHEMA_RECORDING FX_SCHEMA_RECORDING
#define SCHEMA_LOST	 FX_SCHEMA_LOST
#define SCHEMA_GAP	 FX_SCHEMA_GAP
#define SCHEMA_OFFCPU	 FX_SCHEMA_OFFCPU
#define UNKNOWN_NAME	 "[unknown]"

struct str {
	const char *s; /* the caller's bytes, valid for the whole write */
	size_t len;
	uint64_t hash;
};

struct strtab {
	struct str *v;
	size_t n, cap;
	struct fx_hashtab index;
};

struct pair {
	uint64_t a, b;
};

struct pairtab {
	struct pair *v;
	size_t n, cap;
	struct fx_hashtab index;
};

struct nsym {
	uint32_t lib;
	uint32_t name; /* string index */
	uint64_t addr;
	uint64_t size;
};

struct resource {
	uint32_t lib;
	uint32_t name; /* string index */
};

struct sample_ref {
	uint64_t time_ns;
	uint32_t stack;	  /* window stack */
	uint32_t seq;	  /* arrival order: keeps equal times stable */
	uint32_t wait_us; /* an off-CPU wait's weight; 0 for CPU samples */
};

/* The threads table's key of an off-CPU track: (pid, tid | OFF_CPU_KEY). */
#define OFF_CPU_KEY (1ull << 32)

struct tables {
	const struct fx_profile_input *in;
	struct strtab strs;
	int32_t *lib_res; /* lib -> resource, -1 = none yet */
	struct resource *res;
	size_t nres;
	struct pairtab nsym_keys; /* (lib, sym_addr) */
	struct nsym *nsyms;
	size_t nsyms_cap;
	struct pairtab funcs;  /* (name string, resource + 1) */
	uint32_t *frame_base;  /* window frame -> its first profile frame */
	int64_t *frame_nsym;   /* window frame -> native symbol, -1 = none */
	uint32_t *pframe_func; /* profile frame -> func */
	size_t npframes;
	uint32_t *stack_last; /* window stack -> profile stack of its innermost level */
	size_t npstacks;
	int64_t marker_name[3]; /* by enum fx_marker_type */
	struct pairtab threads; /* (pid, tid) of the listed threads */
	uint32_t *thread_of;	/* threads entry -> first listed thread with that key */
	/* listed thread -> the listed thread whose track takes its samples:
	 * itself, or the first of its group with reuse_threads */
	uint32_t *track_of;
	/* listed thread -> its index in the threads written (merged ones: their track's) */
	uint32_t *written;
	size_t nwritten;
	size_t *thread_start; /* nthreads + 1 offsets into samples */
	struct sample_ref *samples;
	size_t nsamples;
	size_t marker_thread; /* the thread that carries the markers */
	size_t busiest;	      /* the on-CPU thread with the most samples */
	bool any_busy;	      /* false: no on-CPU thread has a sample */
};

/* Whether listed thread @k is written: not merged into another's track. */
static inline bool prof_thread_written(const struct tables *t, size_t k)
{
	return t->track_of[k] == k;
}

/* Builds every table of @t->in. Returns 0 or -errno (-ENOMEM, -EINVAL for an
 * input that breaks profile.h's rules). */
int prof_build_tables(struct tables *t);
/* Frees what the tables hold (a half-built one too). */
void prof_tables_free(struct tables *t);

static inline uint32_t prof_level_count(const struct fx_sym_result *r)
{
	return r->n_frames && r->frames ? r->n_frames : 1;
}

static inline uint32_t prof_level_line(const struct fx_sym_result *r, uint32_t k)
{
	return r->n_frames && r->frames ? r->frames[k].line : 0;
}

#endif

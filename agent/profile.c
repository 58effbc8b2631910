/* SPDX-License-Identifier: MIT */
/* The processed profile is written in two steps: the shared tables (strings,
 * resources, native symbols, funcs, frames, stacks) are built in memory, sized
 * by the window, then everything is streamed through fx_json. The JSON text
 * itself is never held in memory. */
#include "fxagent/profile.h"
#include "fxagent/atomic_file.h"
#include "fxagent/hash.h"
#include "fxagent/hashtab.h"
#include "fxagent/util.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "fxagent/elf.h"
#include "fxagent/log.h"

#define SCHEMA_RECORDING "FxRecording"
#define SCHEMA_LOST	 "FxLostSamples"
#define UNKNOWN_NAME	 "[unknown]"

/* ---- strings ---- */

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

static uint64_t str_hash_at(const void *table, uint32_t idx)
{
	return ((const struct strtab *)table)->v[idx].hash;
}

static bool str_eq(const void *table, uint32_t idx, const void *key)
{
	const struct str *e = &((const struct strtab *)table)->v[idx], *k = key;

	return e->hash == k->hash && e->len == k->len && !memcmp(e->s, k->s, k->len);
}

/* Returns the index of @s in the string array, adding it; -ENOMEM on failure. */
static int64_t str_intern(struct strtab *t, const char *s)
{
	size_t len = strlen(s);
	const struct str key = { .s = s, .len = len, .hash = fx_hash_bytes(s, len) };
	uint32_t idx;

	if (fx_grow(&t->v, &t->cap, t->n + 1, sizeof(*t->v)) < 0)
		return -ENOMEM;
	idx = fx_hashtab_intern(&t->index, key.hash, &key, (uint32_t)t->n, str_hash_at, str_eq, t);
	if (idx == FX_HASHTAB_NONE)
		return -ENOMEM;
	if (idx == t->n)
		t->v[t->n++] = key;
	return idx;
}

/* ---- keyed tables: native symbols, funcs, threads ---- */

struct pair {
	uint64_t a, b;
};

struct pairtab {
	struct pair *v;
	size_t n, cap;
	struct fx_hashtab index;
};

static uint64_t pair_hash_at(const void *table, uint32_t idx)
{
	const struct pair *p = &((const struct pairtab *)table)->v[idx];

	return fx_mix64_pair(p->a, p->b);
}

static bool pair_eq(const void *table, uint32_t idx, const void *key)
{
	const struct pair *e = &((const struct pairtab *)table)->v[idx], *k = key;

	return e->a == k->a && e->b == k->b;
}

/* Index of (@a, @b), or -1. */
static int64_t pair_find(const struct pairtab *t, uint64_t a, uint64_t b)
{
	const struct pair key = { .a = a, .b = b };
	uint32_t idx = fx_hashtab_find(&t->index, fx_mix64_pair(a, b), pair_eq, t, &key);

	return idx == FX_HASHTAB_NONE ? -1 : (int64_t)idx;
}

/* Finds (@a, @b) or appends it. Returns its index, or -ENOMEM. */
static int64_t pair_intern(struct pairtab *t, uint64_t a, uint64_t b)
{
	const struct pair key = { .a = a, .b = b };
	uint32_t idx;

	if (fx_grow(&t->v, &t->cap, t->n + 1, sizeof(*t->v)) < 0)
		return -ENOMEM;
	idx = fx_hashtab_intern(&t->index, fx_mix64_pair(a, b), &key, (uint32_t)t->n, pair_hash_at,
				pair_eq, t);
	if (idx == FX_HASHTAB_NONE)
		return -ENOMEM;
	if (idx == t->n)
		t->v[t->n++] = key;
	return idx;
}

static void pairtab_free(struct pairtab *t)
{
	free(t->v);
	fx_hashtab_free(&t->index);
}

/* ---- the tables of one profile ---- */

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
	uint32_t stack; /* window stack */
	uint32_t seq;	/* arrival order: keeps equal times stable */
};

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
	int64_t marker_name[2]; /* recording, lost */
	struct pairtab threads; /* (pid, tid) of the listed threads */
	uint32_t *thread_of;	/* threads entry -> first listed thread with that key */
	size_t *thread_start;	/* nthreads + 1 offsets into samples */
	struct sample_ref *samples;
	size_t nsamples;
};

static void tables_free(struct tables *t)
{
	free(t->strs.v);
	fx_hashtab_free(&t->strs.index);
	free(t->lib_res);
	free(t->res);
	pairtab_free(&t->nsym_keys);
	free(t->nsyms);
	pairtab_free(&t->funcs);
	free(t->frame_base);
	free(t->frame_nsym);
	free(t->pframe_func);
	free(t->stack_last);
	pairtab_free(&t->threads);
	free(t->thread_of);
	free(t->thread_start);
	free(t->samples);
}

static uint32_t level_count(const struct fx_sym_result *r)
{
	return r->n_frames && r->frames ? r->n_frames : 1;
}

/* Name of inline level @k; the symbolizer promises a name, but a profile with
 * a placeholder beats no profile. */
static const char *level_name(const struct fx_sym_result *r, uint32_t k)
{
	const char *name = NULL;

	if (r->n_frames && r->frames)
		name = r->frames[k].name;
	else
		name = r->sym_name;
	return name && *name ? name : UNKNOWN_NAME;
}

static uint32_t level_line(const struct fx_sym_result *r, uint32_t k)
{
	return r->n_frames && r->frames ? r->frames[k].line : 0;
}

static int64_t lib_resource(struct tables *t, int32_t lib)
{
	const struct fx_profile_lib *l;
	int64_t name;

	if (lib < 0)
		return -1;
	if (t->lib_res[lib] >= 0)
		return t->lib_res[lib];
	l = &t->in->libs[lib];
	name = str_intern(&t->strs, l->name ? l->name : "");
	if (name < 0)
		return name;
	t->res[t->nres] = (struct resource){ .lib = (uint32_t)lib, .name = (uint32_t)name };
	t->lib_res[lib] = (int32_t)t->nres;
	return (int64_t)t->nres++;
}

static int64_t native_symbol(struct tables *t, int32_t lib, const struct fx_sym_result *r)
{
	size_t before = t->nsym_keys.n;
	int64_t idx, name;

	if (lib < 0 || !r->sym_name)
		return -1;
	idx = pair_intern(&t->nsym_keys, (uint64_t)lib, r->sym_addr);
	if (idx < 0 || (size_t)idx < before)
		return idx;
	name = str_intern(&t->strs, *r->sym_name ? r->sym_name : UNKNOWN_NAME);
	if (name < 0 || fx_grow(&t->nsyms, &t->nsyms_cap, (size_t)idx + 1, sizeof(*t->nsyms)) < 0)
		return -ENOMEM;
	t->nsyms[idx] = (struct nsym){ .lib = (uint32_t)lib,
				       .name = (uint32_t)name,
				       .addr = r->sym_addr,
				       .size = r->sym_size };
	return idx;
}

static int check_input(const struct fx_profile_input *in)
{
	const struct fx_window *w = in->window;

	if (w->nframes && !in->frames)
		return fx_log_errno(FX_LOG_DEBUG, EINVAL,
				    "profile: window has frames but no results");
	for (size_t i = 0; i < w->nframes; i++) {
		const struct fx_profile_frame *f = &in->frames[i];

		if (!f->sym || f->lib < -1 || (f->lib >= 0 && (size_t)f->lib >= in->nlibs))
			return fx_log_errno(FX_LOG_DEBUG, EINVAL,
					    "profile: frame %zu has no result or a bad lib %d", i,
					    (int)f->lib);
	}
	for (size_t i = 0; i < w->nstacks; i++) {
		const struct fx_window_stack *s = &w->stacks[i];

		if (s->frame >= w->nframes || (s->parent != FX_NONE && s->parent >= i))
			return fx_log_errno(FX_LOG_DEBUG, EINVAL,
					    "profile: window stack %zu is corrupt", i);
	}
	if (in->nmarkers && in->nthreads && in->marker_thread >= in->nthreads)
		return fx_log_errno(FX_LOG_DEBUG, EINVAL, "profile: marker thread %zu of %zu",
				    in->marker_thread, in->nthreads);
	return 0;
}

/* Resources, native symbols, funcs and the profile frames of every window frame. */
static int build_frames(struct tables *t)
{
	const struct fx_profile_input *in = t->in;
	size_t nframes = in->window->nframes, cap = 0;

	t->lib_res = malloc((in->nlibs + 1) * sizeof(*t->lib_res));
	t->res = malloc((in->nlibs + 1) * sizeof(*t->res));
	t->frame_base = malloc((nframes + 1) * sizeof(*t->frame_base));
	t->frame_nsym = malloc((nframes + 1) * sizeof(*t->frame_nsym));
	if (!t->lib_res || !t->res || !t->frame_base || !t->frame_nsym)
		return -ENOMEM;
	for (size_t i = 0; i < in->nlibs; i++)
		t->lib_res[i] = -1;

	for (size_t i = 0; i < nframes; i++) {
		const struct fx_profile_frame *f = &in->frames[i];
		uint32_t n = level_count(f->sym);
		int64_t res = lib_resource(t, f->lib);

		if (res < -1)
			return (int)res;
		t->frame_nsym[i] = native_symbol(t, f->lib, f->sym);
		if (t->frame_nsym[i] < -1)
			return (int)t->frame_nsym[i];
		if (t->npframes + n >= UINT32_MAX)
			return -E2BIG;
		if (fx_grow(&t->pframe_func, &cap, t->npframes + n, sizeof(*t->pframe_func)) < 0)
			return -ENOMEM;
		t->frame_base[i] = (uint32_t)t->npframes;
		for (uint32_t k = 0; k < n; k++) {
			int64_t name = str_intern(&t->strs, level_name(f->sym, k));
			int64_t func;

			if (name < 0)
				return (int)name;
			func = pair_intern(&t->funcs, (uint64_t)name, (uint64_t)(res + 1));
			if (func < 0)
				return (int)func;
			t->pframe_func[t->npframes++] = (uint32_t)func;
		}
	}
	return 0;
}

/* Each window stack becomes one profile stack per inline level of its frame;
 * only the innermost one is needed to link children and samples. */
static int build_stacks(struct tables *t)
{
	const struct fx_window *w = t->in->window;

	t->stack_last = malloc((w->nstacks + 1) * sizeof(*t->stack_last));
	if (!t->stack_last)
		return -ENOMEM;
	for (size_t i = 0; i < w->nstacks; i++) {
		uint32_t n = level_count(t->in->frames[w->stacks[i].frame].sym);

		if (t->npstacks + n >= UINT32_MAX)
			return -E2BIG;
		t->npstacks += n;
		t->stack_last[i] = (uint32_t)t->npstacks - 1;
	}
	return 0;
}

static int cmp_sample(const void *pa, const void *pb)
{
	const struct sample_ref *a = pa, *b = pb;

	if (a->time_ns != b->time_ns)
		return a->time_ns < b->time_ns ? -1 : 1;
	return a->seq < b->seq ? -1 : a->seq > b->seq;
}

/* Groups the window's samples by listed thread (one hash look-up per sample)
 * and sorts each thread's samples by time: CPUs deliver them out of order. */
static int build_samples(struct tables *t)
{
	const struct fx_profile_input *in = t->in;
	const struct fx_window *w = in->window;
	uint32_t *owner = NULL;
	int rc = -ENOMEM;

	t->thread_of = malloc((in->nthreads + 1) * sizeof(*t->thread_of));
	t->thread_start = calloc(in->nthreads + 2, sizeof(*t->thread_start));
	owner = malloc((w->nsamples + 1) * sizeof(*owner));
	if (!t->thread_of || !t->thread_start || !owner)
		goto out;
	for (size_t i = 0; i < in->nthreads; i++) {
		size_t before = t->threads.n;
		int64_t idx = pair_intern(&t->threads, in->threads[i].pid, in->threads[i].tid);

		if (idx < 0)
			goto out;
		/* A thread listed twice keeps its samples on the first entry. */
		if ((size_t)idx == before)
			t->thread_of[idx] = (uint32_t)i;
	}
	for (size_t i = 0; i < w->nsamples; i++) {
		int64_t idx = pair_find(&t->threads, w->samples[i].pid, w->samples[i].tid);

		owner[i] = idx < 0 ? FX_NONE : t->thread_of[idx];
		if (idx < 0)
			continue;
		t->thread_start[owner[i] + 2]++;
		t->nsamples++;
	}
	/* Counting sort: thread_start[k + 1] becomes the fill cursor of thread k,
	 * and ends as the start of thread k + 1. */
	for (size_t k = 2; k < in->nthreads + 2; k++)
		t->thread_start[k] += t->thread_start[k - 1];
	t->samples = malloc((t->nsamples + 1) * sizeof(*t->samples));
	if (!t->samples)
		goto out;
	for (size_t i = 0; i < w->nsamples; i++) {
		if (owner[i] == FX_NONE)
			continue;
		t->samples[t->thread_start[owner[i] + 1]++] = (struct sample_ref){
			.time_ns = w->samples[i].time_ns,
			.stack = w->samples[i].stack,
			.seq = (uint32_t)i,
		};
	}
	for (size_t k = 0; k < in->nthreads; k++) {
		struct sample_ref *s = t->samples + t->thread_start[k];
		size_t n = t->thread_start[k + 1] - t->thread_start[k];

		for (size_t i = 1; i < n; i++) {
			/* The loop above wrote all n samples of thread k; the analyzer
			 * does not follow the counts of the counting sort.
			 * NOLINTNEXTLINE(clang-analyzer-core.UndefinedBinaryOperatorResult) */
			if (s[i].time_ns < s[i - 1].time_ns) {
				qsort(s, n, sizeof(*s), cmp_sample);
				break;
			}
		}
	}
	rc = 0;
out:
	free(owner);
	return rc;
}

static int build_tables(struct tables *t)
{
	static const char *const names[2] = { "Recording", "Lost samples" };
	int rc = check_input(t->in);

	if (rc < 0)
		return rc;
	rc = build_frames(t);
	if (rc < 0)
		return rc;
	rc = build_stacks(t);
	if (rc < 0)
		return rc;
	for (int i = 0; i < 2; i++) {
		t->marker_name[i] = str_intern(&t->strs, names[i]);
		if (t->marker_name[i] < 0)
			return -ENOMEM;
	}
	return build_samples(t);
}

/* ---- writing ---- */

static double ns_to_ms(uint64_t t, uint64_t start)
{
	return (double)(int64_t)(t - start) / 1e6;
}

static void key_array(struct fx_json *j, const char *key)
{
	fx_json_key(j, key);
	fx_json_array_begin(j);
}

static void column_of(struct fx_json *j, const char *key, size_t n, const char *value_json)
{
	size_t len = strlen(value_json);

	key_array(j, key);
	for (size_t i = 0; i < n; i++)
		fx_json_raw(j, value_json, len);
	fx_json_array_end(j);
}

static void key_string(struct fx_json *j, const char *key, const char *value)
{
	fx_json_key(j, key);
	fx_json_string(j, value);
}

static void key_int(struct fx_json *j, const char *key, int64_t value)
{
	fx_json_key(j, key);
	fx_json_int(j, value);
}

static void key_raw(struct fx_json *j, const char *key, const char *json)
{
	fx_json_key(j, key);
	fx_json_raw(j, json, strlen(json));
}

static const char CATEGORIES_JSON[] =
	"[{\"name\":\"Other\",\"color\":\"grey\",\"subcategories\":[\"Other\"]},"
	"{\"name\":\"User\",\"color\":\"yellow\",\"subcategories\":[\"Other\"]},"
	"{\"name\":\"Kernel\",\"color\":\"orange\",\"subcategories\":[\"Other\"]}]";

static const char MARKER_SCHEMA_JSON[] =
	"[{\"name\":\"" SCHEMA_RECORDING "\","
	"\"chartLabel\":\"{marker.data.wallclock}\","
	"\"tableLabel\":\"{marker.data.wallclock}\","
	"\"tooltipLabel\":\"Window {marker.data.seq}: {marker.data.wallclock}\","
	"\"display\":[\"marker-chart\",\"marker-table\",\"timeline-overview\"],"
	"\"fields\":[{\"key\":\"wallclock\",\"label\":\"Wall clock\",\"format\":\"string\"},"
	"{\"key\":\"target\",\"label\":\"Target\",\"format\":\"string\"},"
	"{\"key\":\"seq\",\"label\":\"Window #\",\"format\":\"integer\"},"
	"{\"key\":\"samples\",\"label\":\"Samples\",\"format\":\"integer\"},"
	"{\"key\":\"lost\",\"label\":\"Lost samples\",\"format\":\"integer\"},"
	"{\"key\":\"truncated\",\"label\":\"Truncated stacks\",\"format\":\"integer\"}]},"
	"{\"name\":\"" SCHEMA_LOST "\","
	"\"tableLabel\":\"lost {marker.data.count}\","
	"\"tooltipLabel\":\"Lost samples: {marker.data.count}\","
	"\"display\":[\"marker-chart\",\"marker-table\",\"timeline-overview\"],"
	"\"fields\":[{\"key\":\"count\",\"label\":\"Lost samples\",\"format\":\"integer\"}]}]";

static void extra_entry(struct fx_json *j, const char *label, const char *value)
{
	fx_json_object_begin(j);
	key_string(j, "label", label);
	key_string(j, "format", "string");
	key_string(j, "value", value);
	fx_json_object_end(j);
}

static void write_meta(const struct fx_profile_meta *m, struct fx_json *j)
{
	fx_json_key(j, "meta");
	fx_json_object_begin(j);
	key_int(j, "version", 24);
	key_int(j, "preprocessedProfileVersion", 66);
	fx_json_key(j, "interval");
	fx_json_double(j, m->interval_ms);
	fx_json_key(j, "startTime");
	fx_json_double(j, m->start_time_ms);
	key_int(j, "processType", 0);
	key_string(j, "product", m->product ? m->product : "fxagent");
	key_int(j, "stackwalk", 1);
	key_raw(j, "symbolicated", "true");
	key_raw(j, "pausedRanges", "[]");
	key_raw(j, "categories", CATEGORIES_JSON);
	key_raw(j, "sampleUnits",
		"{\"time\":\"ms\",\"eventDelay\":\"ms\",\"threadCPUDelta\":\"\xc2\xb5s\"}");
	key_raw(j, "usesOnlyOneStackType", "true");
	key_raw(j, "sourceCodeIsNotOnSearchfox", "true");
	key_raw(j, "markerSchema", MARKER_SCHEMA_JSON);
	key_int(j, "profilingStartTime", 0);
	fx_json_key(j, "profilingEndTime");
	fx_json_double(j, m->end_ns > m->start_ns ? ns_to_ms(m->end_ns, m->start_ns) : 0);
	if (m->target) {
		/* For collectors: the chunk's identity in one place. */
		fx_json_key(j, "fxagent");
		fx_json_object_begin(j);
		key_string(j, "target", m->target);
		key_string(j, "host", m->host);
		key_int(j, "seq", m->seq);
		fx_json_key(j, "windowStart");
		fx_json_double(j, m->start_time_ms);
		fx_json_key(j, "windowEnd");
		fx_json_double(j, m->end_time_ms
					  ? m->end_time_ms
					  : m->start_time_ms +
						    (m->end_ns > m->start_ns
							     ? ns_to_ms(m->end_ns, m->start_ns)
							     : 0));
		key_int(j, "samples", (int64_t)m->samples);
		key_int(j, "lost", (int64_t)m->lost);
		key_int(j, "truncated", (int64_t)m->truncated);
		key_int(j, "droppedStacks", (int64_t)m->dropped);
		fx_json_key(j, "labels");
		fx_json_object_begin(j);
		for (size_t i = 0; i < m->nlabels; i++)
			key_string(j, m->labels[i].key, m->labels[i].value);
		fx_json_object_end(j);
		fx_json_object_end(j);
	}
	if (m->host || m->target) {
		/* meta.extra is what the profiler shows under "Profile Information". */
		key_array(j, "extra");
		fx_json_object_begin(j);
		key_string(j, "label", "fxagent");
		key_array(j, "entries");
		if (m->host)
			extra_entry(j, "Host name", m->host);
		if (m->target)
			extra_entry(j, "Target", m->target);
		for (size_t i = 0; i < m->nlabels; i++)
			extra_entry(j, m->labels[i].key, m->labels[i].value);
		fx_json_array_end(j);
		fx_json_object_end(j);
		fx_json_array_end(j);
	}
	fx_json_object_end(j);
}

static void write_libs(const struct fx_profile_input *in, struct fx_json *j)
{
	key_array(j, "libs");
	for (size_t i = 0; i < in->nlibs; i++) {
		const struct fx_profile_lib *l = &in->libs[i];
		const char *name = l->name ? l->name : "";
		const char *path = l->path ? l->path : "";
		char code_id[2 * FX_BUILD_ID_MAX + 1] = "";
		char breakpad[34] = "";

		if (l->build_id && l->build_id_len) {
			size_t len = l->build_id_len < FX_BUILD_ID_MAX ? l->build_id_len
								       : FX_BUILD_ID_MAX;

			fx_elf_hex(l->build_id, len, code_id);
			fx_profile_breakpad_id(l->build_id, len, breakpad);
		}
		fx_json_object_begin(j);
		key_string(j, "name", name);
		key_string(j, "path", path);
		key_string(j, "debugName", l->debug_name ? l->debug_name : name);
		key_string(j, "debugPath", l->debug_path ? l->debug_path : path);
		key_string(j, "arch", l->arch ? l->arch : "");
		key_string(j, "breakpadId", breakpad);
		key_string(j, "codeId", code_id);
		fx_json_object_end(j);
	}
	fx_json_array_end(j);
}

/* Opens a table object under @key with its length. */
static void table_begin(struct fx_json *j, const char *key, size_t length)
{
	fx_json_key(j, key);
	fx_json_object_begin(j);
	key_int(j, "length", (int64_t)length);
}

static void write_resources(const struct tables *t, struct fx_json *j)
{
	table_begin(j, "resourceTable", t->nres);
	key_array(j, "name");
	for (size_t i = 0; i < t->nres; i++)
		fx_json_uint(j, t->res[i].name);
	fx_json_array_end(j);
	column_of(j, "host", t->nres, "null");
	key_array(j, "lib");
	for (size_t i = 0; i < t->nres; i++)
		fx_json_uint(j, t->res[i].lib);
	fx_json_array_end(j);
	column_of(j, "type", t->nres, "1");
	fx_json_object_end(j);
}

static void write_native_symbols(const struct tables *t, struct fx_json *j)
{
	size_t n = t->nsym_keys.n;

	table_begin(j, "nativeSymbols", n);
	key_array(j, "libIndex");
	for (size_t i = 0; i < n; i++)
		fx_json_uint(j, t->nsyms[i].lib);
	fx_json_array_end(j);
	key_array(j, "address");
	for (size_t i = 0; i < n; i++)
		fx_json_uint(j, t->nsyms[i].addr);
	fx_json_array_end(j);
	key_array(j, "name");
	for (size_t i = 0; i < n; i++)
		fx_json_uint(j, t->nsyms[i].name);
	fx_json_array_end(j);
	key_array(j, "functionSize");
	for (size_t i = 0; i < n; i++) {
		if (t->nsyms[i].size)
			fx_json_uint(j, t->nsyms[i].size);
		else
			fx_json_null(j);
	}
	fx_json_array_end(j);
	fx_json_object_end(j);
}

static void write_funcs(const struct tables *t, struct fx_json *j)
{
	size_t n = t->funcs.n;

	table_begin(j, "funcTable", n);
	key_array(j, "name");
	for (size_t i = 0; i < n; i++)
		fx_json_uint(j, t->funcs.v[i].a);
	fx_json_array_end(j);
	column_of(j, "isJS", n, "false");
	column_of(j, "relevantForJS", n, "false");
	key_array(j, "resource");
	for (size_t i = 0; i < n; i++)
		fx_json_int(j, (int64_t)t->funcs.v[i].b - 1);
	fx_json_array_end(j);
	column_of(j, "source", n, "null");
	column_of(j, "lineNumber", n, "null");
	column_of(j, "columnNumber", n, "null");
	column_of(j, "originalLocation", n, "null");
	fx_json_object_end(j);
}

/* Profile frames of window frame i: frame_base[i] + inline level. */
static void write_frames(const struct tables *t, struct fx_json *j)
{
	const struct fx_profile_input *in = t->in;
	size_t nframes = in->window->nframes;

	table_begin(j, "frameTable", t->npframes);
	key_array(j, "address");
	for (size_t i = 0; i < nframes; i++) {
		const struct fx_profile_frame *f = &in->frames[i];

		for (uint32_t k = 0; k < level_count(f->sym); k++) {
			if (f->lib >= 0)
				fx_json_uint(j, f->sym->rel_addr);
			else
				fx_json_int(j, -1);
		}
	}
	fx_json_array_end(j);
	key_array(j, "inlineDepth");
	for (size_t i = 0; i < nframes; i++) {
		for (uint32_t k = 0; k < level_count(in->frames[i].sym); k++)
			fx_json_uint(j, k);
	}
	fx_json_array_end(j);
	key_array(j, "category");
	for (size_t i = 0; i < nframes; i++) {
		for (uint32_t k = 0; k < level_count(in->frames[i].sym); k++)
			fx_json_int(j, in->frames[i].category);
	}
	fx_json_array_end(j);
	column_of(j, "subcategory", t->npframes, "0");
	key_array(j, "func");
	for (size_t i = 0; i < t->npframes; i++)
		fx_json_uint(j, t->pframe_func[i]);
	fx_json_array_end(j);
	key_array(j, "nativeSymbol");
	for (size_t i = 0; i < nframes; i++) {
		for (uint32_t k = 0; k < level_count(in->frames[i].sym); k++) {
			if (t->frame_nsym[i] >= 0)
				fx_json_int(j, t->frame_nsym[i]);
			else
				fx_json_null(j);
		}
	}
	fx_json_array_end(j);
	column_of(j, "innerWindowID", t->npframes, "0");
	key_array(j, "line");
	for (size_t i = 0; i < nframes; i++) {
		const struct fx_sym_result *r = in->frames[i].sym;

		for (uint32_t k = 0; k < level_count(r); k++) {
			if (level_line(r, k))
				fx_json_uint(j, level_line(r, k));
			else
				fx_json_null(j);
		}
	}
	fx_json_array_end(j);
	column_of(j, "column", t->npframes, "null");
	column_of(j, "originalLocation", t->npframes, "null");
	fx_json_object_end(j);
}

/* Profile stacks of window stack i: stack_last[i] - n + 1 .. stack_last[i],
 * outermost inline level first, each the parent of the next. */
static void write_stacks(const struct tables *t, struct fx_json *j)
{
	const struct fx_profile_input *in = t->in;
	const struct fx_window *w = in->window;

	table_begin(j, "stackTable", t->npstacks);
	key_array(j, "frame");
	for (size_t i = 0; i < w->nstacks; i++) {
		uint32_t f = w->stacks[i].frame;

		for (uint32_t k = 0; k < level_count(in->frames[f].sym); k++)
			fx_json_uint(j, t->frame_base[f] + k);
	}
	fx_json_array_end(j);
	key_array(j, "prefixOffset");
	for (size_t i = 0; i < w->nstacks; i++) {
		const struct fx_window_stack *s = &w->stacks[i];
		uint32_t n = level_count(in->frames[s->frame].sym);
		uint32_t first = t->stack_last[i] - n + 1;

		if (s->parent == FX_NONE)
			fx_json_int(j, 0);
		else
			fx_json_uint(j, first - t->stack_last[s->parent]);
		for (uint32_t k = 1; k < n; k++)
			fx_json_int(j, 1);
	}
	fx_json_array_end(j);
	fx_json_object_end(j);
}

static void write_shared(const struct tables *t, struct fx_json *j)
{
	fx_json_key(j, "shared");
	fx_json_object_begin(j);
	key_array(j, "stringArray");
	for (size_t i = 0; i < t->strs.n; i++)
		fx_json_string_n(j, t->strs.v[i].s, t->strs.v[i].len);
	fx_json_array_end(j);
	write_resources(t, j);
	write_native_symbols(t, j);
	write_funcs(t, j);
	write_frames(t, j);
	write_stacks(t, j);
	key_raw(j, "sources",
		"{\"length\":0,\"id\":[],\"filename\":[],\"startLine\":[],\"startColumn\":[],"
		"\"sourceMapURL\":[],\"content\":[]}");
	key_raw(j, "sourceLocationTable", "{\"length\":0,\"source\":[],\"line\":[],\"column\":[]}");
	fx_json_object_end(j);
}

static void write_markers(const struct tables *t, bool carrier, struct fx_json *j)
{
	const struct fx_profile_input *in = t->in;
	size_t n = carrier ? in->nmarkers : 0;

	table_begin(j, "markers", n);
	key_array(j, "name");
	for (size_t i = 0; i < n; i++)
		fx_json_int(j, t->marker_name[in->markers[i].type == FX_MARKER_LOST ? 1 : 0]);
	fx_json_array_end(j);
	key_array(j, "startTime");
	for (size_t i = 0; i < n; i++)
		fx_json_double(j, in->markers[i].start_ms);
	fx_json_array_end(j);
	key_array(j, "endTime");
	for (size_t i = 0; i < n; i++) {
		if (in->markers[i].type == FX_MARKER_LOST)
			fx_json_null(j);
		else
			fx_json_double(j, in->markers[i].end_ms);
	}
	fx_json_array_end(j);
	key_array(j, "phase");
	for (size_t i = 0; i < n; i++)
		fx_json_int(j, in->markers[i].type == FX_MARKER_LOST ? 0 : 1);
	fx_json_array_end(j);
	column_of(j, "category", n, "0");
	key_array(j, "data");
	for (size_t i = 0; i < n; i++) {
		const struct fx_profile_marker *m = &in->markers[i];

		fx_json_object_begin(j);
		if (m->type == FX_MARKER_LOST) {
			key_string(j, "type", SCHEMA_LOST);
			key_int(j, "count", m->count);
		} else {
			key_string(j, "type", SCHEMA_RECORDING);
			key_string(j, "wallclock", m->text ? m->text : "");
			if (m->target)
				key_string(j, "target", m->target);
			key_int(j, "seq", m->seq);
			key_int(j, "samples", m->count);
			key_int(j, "lost", m->lost);
			key_int(j, "truncated", m->truncated);
		}
		fx_json_object_end(j);
	}
	fx_json_array_end(j);
	fx_json_object_end(j);
}

static void write_thread(const struct tables *t, size_t idx, struct fx_json *j)
{
	const struct fx_profile_input *in = t->in;
	const struct fx_profile_thread *th = &in->threads[idx];
	const struct sample_ref *s = t->samples + t->thread_start[idx];
	size_t n = t->thread_start[idx + 1] - t->thread_start[idx];
	char pid[16];

	snprintf(pid, sizeof(pid), "%u", (unsigned int)th->pid);
	fx_json_object_begin(j);
	key_string(j, "name", th->name ? th->name : "");
	key_string(j, "processName", th->process_name ? th->process_name : "");
	key_string(j, "processType", "default");
	key_raw(j, "isMainThread", th->tid == th->pid ? "true" : "false");
	key_string(j, "pid", pid);
	key_int(j, "tid", th->tid);
	key_int(j, "processStartupTime", 0);
	key_raw(j, "processShutdownTime", "null");
	key_int(j, "registerTime", 0);
	key_raw(j, "unregisterTime", "null");
	key_raw(j, "pausedRanges", "[]");
	key_raw(j, "showMarkersInTimeline", "true");

	table_begin(j, "samples", n);
	key_array(j, "stack");
	for (size_t i = 0; i < n; i++) {
		if (s[i].stack < in->window->nstacks)
			fx_json_uint(j, t->stack_last[s[i].stack]);
		else
			fx_json_null(j);
	}
	fx_json_array_end(j);
	key_array(j, "time");
	for (size_t i = 0; i < n; i++)
		fx_json_double(j, ns_to_ms(s[i].time_ns, in->meta.start_ns));
	fx_json_array_end(j);
	key_raw(j, "weight", "null");
	key_string(j, "weightType", "samples");
	/* Each sample stands for one sampling interval of CPU time on this
	 * thread: this is what the profiler's CPU graph and columns show. */
	key_array(j, "threadCPUDelta");
	for (size_t i = 0; i < n; i++)
		fx_json_double(j, i ? in->meta.interval_ms * 1000.0 : 0);
	fx_json_array_end(j);
	fx_json_object_end(j);

	write_markers(t, idx == in->marker_thread, j);
	fx_json_object_end(j);
}

int fx_profile_write_json(const struct fx_profile_input *in, struct fx_json *j,
			  struct fx_profile_stats *stats)
{
	struct tables t = { .in = in };
	int rc = build_tables(&t);

	if (rc < 0)
		goto out;
	fx_json_object_begin(j);
	write_meta(&in->meta, j);
	write_libs(in, j);
	write_shared(&t, j);
	key_array(j, "threads");
	for (size_t i = 0; i < in->nthreads; i++)
		write_thread(&t, i, j);
	fx_json_array_end(j);
	key_raw(j, "pages", "[]");
	key_raw(j, "profilerOverhead", "[]");
	key_raw(j, "counters", "[]");
	fx_json_object_end(j);
	rc = fx_json_error(j);
	if (rc < 0)
		goto out;
	if (stats)
		*stats =
			(struct fx_profile_stats){ .samples = t.nsamples, .threads = in->nthreads };
out:
	tables_free(&t);
	return rc;
}

/* ---- gzip file output ---- */

struct gz_sink {
	z_stream zs;
	int fd;
	uint64_t bytes;
	unsigned char out[64 * 1024];
};

static int write_all(int fd, const void *buf, size_t len)
{
	const char *p = buf;

	while (len) {
		ssize_t n = write(fd, p, len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

/* Deflates what is in zs.next_in with @flush, writing full output buffers. */
static int gz_run(struct gz_sink *g, int flush)
{
	int zrc;

	do {
		size_t have;
		int rc;

		g->zs.next_out = g->out;
		g->zs.avail_out = sizeof(g->out);
		zrc = deflate(&g->zs, flush);
		if (zrc == Z_STREAM_ERROR)
			return -EIO;
		have = sizeof(g->out) - g->zs.avail_out;
		rc = write_all(g->fd, g->out, have);
		if (rc < 0)
			return rc;
		g->bytes += have;
	} while (g->zs.avail_out == 0 || (flush == Z_FINISH && zrc != Z_STREAM_END));
	return 0;
}

static int gz_write(void *ctx, const void *buf, size_t len)
{
	struct gz_sink *g = ctx;
	const unsigned char *p = buf;

	while (len) {
		uInt chunk = len > (1u << 30) ? (1u << 30) : (uInt)len;
		int rc;

		g->zs.next_in = (unsigned char *)p;
		g->zs.avail_in = chunk;
		rc = gz_run(g, Z_NO_FLUSH);
		if (rc < 0)
			return rc;
		p += chunk;
		len -= chunk;
	}
	return 0;
}

/* Writes the whole gzip stream to @fd. Returns 0 or -errno, not logged. */
static int write_gz(const struct fx_profile_input *in, int fd, struct fx_profile_stats *stats)
{
	struct gz_sink *g = calloc(1, sizeof(*g));
	struct fx_json *j = NULL;
	int rc = -ENOMEM;

	if (!g)
		return -ENOMEM;
	g->fd = fd;
	/* 15 + 16: gzip wrapper rather than zlib. */
	if (deflateInit2(&g->zs, 6, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK) {
		free(g);
		return -ENOMEM;
	}
	j = fx_json_new(gz_write, g);
	if (!j)
		goto out;
	rc = fx_profile_write_json(in, j, stats);
	if (!rc)
		rc = fx_json_finish(j);
	if (!rc) {
		g->zs.next_in = NULL;
		g->zs.avail_in = 0;
		rc = gz_run(g, Z_FINISH);
	}
	if (!rc && stats)
		stats->bytes = g->bytes;
out:
	fx_json_free(j);
	deflateEnd(&g->zs);
	free(g);
	return rc;
}

/* The umask, read without changing it (umask(2) can only set it, and other
 * threads create files meanwhile). */
static mode_t file_umask(void)
{
	unsigned long long mask = 022;

	return fx_self_status("Umask", 8, &mask) == 0 ? (mode_t)(mask & 0777) : 022;
}

struct gz_job {
	const struct fx_profile_input *in;
	struct fx_profile_stats *stats;
};

static int write_gz_job(int fd, void *arg)
{
	const struct gz_job *job = arg;

	return write_gz(job->in, fd, job->stats);
}

int fx_profile_write_file(const struct fx_profile_input *in, const char *path,
			  struct fx_profile_stats *stats)
{
	struct gz_job job = { .in = in, .stats = stats };
	int rc;

	if (!strcmp(path, "-")) {
		rc = write_gz(in, STDOUT_FILENO, stats);
		if (rc < 0)
			return fx_log_errno(FX_LOG_ERR, -rc, "cannot write the profile to stdout");
		return 0;
	}
	/* What open(0666) would give under the process's umask (the service's
	 * UMask=0027 keeps chunks private). */
	return fx_atomic_file_write(path, 0666 & ~file_umask(), FX_LOG_ERR, write_gz_job, &job);
}

int fx_profile_breakpad_id(const uint8_t *build_id, size_t len, char out[34])
{
	/* GUID layout: the first three fields (4, 2, 2 bytes) are little-endian. */
	static const uint8_t order[16] = { 3, 2, 1, 0, 5, 4, 7, 6, 8, 9, 10, 11, 12, 13, 14, 15 };
	static const char hex[] = "0123456789ABCDEF";

	if (!len || !build_id)
		return -EINVAL;
	for (size_t i = 0; i < 16; i++) {
		uint8_t b = order[i] < len ? build_id[order[i]] : 0;

		out[2 * i] = hex[b >> 4];
		out[2 * i + 1] = hex[b & 15];
	}
	out[32] = '0';
	out[33] = '\0';
	return 0;
}

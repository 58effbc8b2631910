/* SPDX-License-Identifier: MIT */
/* The shared tables of one profile, built in memory from the window and what
 * its frames resolved to: one pass per table, each sized by the window. */
#include "fxagent/hash.h"
#include "fxagent/log.h"
#include "fxagent/util.h"
#include "profile_int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- strings ---- */

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

void prof_tables_free(struct tables *t)
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
	free(t->track_of);
	free(t->written);
	free(t->thread_start);
	free(t->samples);
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
		uint32_t n = prof_level_count(f->sym);
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
		uint32_t n = prof_level_count(t->in->frames[w->stacks[i].frame].sym);

		if (t->npstacks + n >= UINT32_MAX)
			return -E2BIG;
		t->npstacks += n;
		t->stack_last[i] = (uint32_t)t->npstacks - 1;
	}
	return 0;
}

/* Threads that share a track with reuse_threads: one process, one name,
 * both on or both off CPU. */
static int cmp_group(const struct fx_profile_thread *x, const struct fx_profile_thread *y)
{
	if (x->pid != y->pid)
		return x->pid < y->pid ? -1 : 1;
	if (x->off_cpu != y->off_cpu)
		return x->off_cpu ? 1 : -1;
	return strcmp(x->name ? x->name : "", y->name ? y->name : "");
}

/* Listed threads by group, each group in the order listed. */
static int cmp_listed(const void *pa, const void *pb, void *arg)
{
	const struct fx_profile_thread *th = arg;
	uint32_t a = *(const uint32_t *)pa, b = *(const uint32_t *)pb;
	int r = cmp_group(&th[a], &th[b]);

	if (r)
		return r;
	return a < b ? -1 : a > b;
}

/* Fills track_of and written: each listed thread's own track, or with
 * reuse_threads the track of the first listed thread of its group; a main
 * thread (tid == pid) keeps its own, the process's track. */
static int group_threads(struct tables *t)
{
	const struct fx_profile_input *in = t->in;
	size_t n = in->nthreads, m = 0;
	uint32_t *idx = NULL;

	t->track_of = malloc((n + 1) * sizeof(*t->track_of));
	t->written = malloc((n + 1) * sizeof(*t->written));
	if (!t->track_of || !t->written)
		return -ENOMEM;
	for (size_t k = 0; k < n; k++)
		t->track_of[k] = (uint32_t)k;
	if (in->reuse_threads && n > 1) {
		idx = malloc(n * sizeof(*idx));
		if (!idx)
			return -ENOMEM;
		for (size_t k = 0; k < n; k++) {
			if (in->threads[k].tid != in->threads[k].pid)
				idx[m++] = (uint32_t)k;
		}
		if (m)
			qsort_r(idx, m, sizeof(*idx), cmp_listed, (void *)in->threads);
		for (size_t i = 1; i < m; i++) {
			if (!cmp_group(&in->threads[idx[i]], &in->threads[idx[i - 1]]))
				t->track_of[idx[i]] = t->track_of[idx[i - 1]];
		}
		free(idx);
	}
	for (size_t k = 0; k < n; k++) {
		if (prof_thread_written(t, k))
			t->written[k] = (uint32_t)t->nwritten++;
		else
			t->written[k] = t->written[t->track_of[k]];
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

/* Groups the window's samples by track (one hash look-up per sample) and
 * sorts each track's samples by time: CPUs deliver them out of order, and a
 * track of several threads (reuse_threads) holds them one thread after the
 * other until sorted. */
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
		/* An off-CPU track takes its thread's waits: another key. */
		int64_t idx = pair_intern(&t->threads, in->threads[i].pid,
					  in->threads[i].tid |
						  (in->threads[i].off_cpu ? OFF_CPU_KEY : 0));

		if (idx < 0)
			goto out;
		/* A thread listed twice keeps its samples on the first entry. */
		if ((size_t)idx == before)
			t->thread_of[idx] = t->track_of[i];
	}
	for (size_t i = 0; i < w->nsamples; i++) {
		int64_t idx =
			pair_find(&t->threads, w->samples[i].pid,
				  w->samples[i].tid | (w->samples[i].wait_us ? OFF_CPU_KEY : 0));

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
			.wait_us = w->samples[i].wait_us,
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

/* The on-CPU track with the most samples (the first of equals): the one
 * the profiler selects first, and the markers' track. The profiler hides
 * tracks with little CPU by default (the agent's own among them), and
 * markers on a hidden track are not in the marker chart. */
static void pick_busiest(struct tables *t)
{
	const struct fx_profile_input *in = t->in;
	size_t best = 0;

	t->marker_thread = in->marker_thread < in->nthreads ? t->track_of[in->marker_thread] : 0;
	for (size_t k = 0; k < in->nthreads; k++) {
		size_t n = t->thread_start[k + 1] - t->thread_start[k];

		if (!in->threads[k].off_cpu && n > best) {
			best = n;
			t->busiest = k;
			t->any_busy = true;
		}
	}
	if (t->any_busy)
		t->marker_thread = t->busiest;
}

int prof_build_tables(struct tables *t)
{
	static const char *const names[3] = { "Recording", "Lost samples", "Off-CPU waits" };
	int rc = check_input(t->in);

	if (rc < 0)
		return rc;
	rc = build_frames(t);
	if (rc < 0)
		return rc;
	rc = build_stacks(t);
	if (rc < 0)
		return rc;
	for (int i = 0; i < 3; i++) {
		t->marker_name[i] = str_intern(&t->strs, names[i]);
		if (t->marker_name[i] < 0)
			return -ENOMEM;
	}
	rc = group_threads(t);
	if (rc == 0)
		rc = build_samples(t);
	if (rc == 0)
		pick_busiest(t);
	return rc;
}

/* SPDX-License-Identifier: MIT */
/* The merge: chunks' tables interned into one set of shared tables (each
 * distinct string, library, resource, symbol, function, frame and stack
 * once), their samples on one track per host and thread, process or host,
 * and their windows, lost samples and gaps as markers. Samples of one stack
 * in one time bucket fold into one weighted sample once there are too many
 * for a browser: the weights keep every share exact. */
#include "view_int.h"

#include "fxagent/util.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "fxagent/hash.h"
#include "fxagent/profile.h"

/* ---- interned strings ---- */

struct strkey {
	const char *s;
	size_t len;
};

static uint64_t str_hash_at(const void *ctx, uint32_t i)
{
	size_t len;
	const char *s = view_strtab_at(ctx, i, &len);

	return fx_hash_bytes(s, len);
}

static bool str_eq(const void *ctx, uint32_t i, const void *key)
{
	const struct strkey *k = key;
	size_t len;
	const char *s = view_strtab_at(ctx, i, &len);

	return len == k->len && !memcmp(s, k->s, len);
}

uint32_t view_strtab_add(struct strtab *t, const char *s, size_t len)
{
	struct strkey k = { s, len };
	uint64_t h = fx_hash_bytes(s, len);
	uint32_t i;
	size_t pos;

	if (t->n >= UINT32_MAX - 1 || t->tlen + len + 1 >= UINT32_MAX ||
	    fx_hashtab_reserve(&t->h, t->n + 1, str_hash_at, t) < 0)
		return UINT32_MAX;
	pos = fx_hashtab_probe(&t->h, h, str_eq, t, &k);
	i = fx_hashtab_at(&t->h, pos);
	if (i != FX_HASHTAB_NONE)
		return i;
	if (fx_grow(&t->text, &t->tcap, t->tlen + len + 1, 1) < 0 ||
	    fx_grow(&t->ref, &t->cap, t->n + 1, sizeof(*t->ref)) < 0)
		return UINT32_MAX;
	memcpy(t->text + t->tlen, s, len);
	t->text[t->tlen + len] = '\0';
	t->ref[t->n] = (uint64_t)t->tlen << 32 | len;
	t->tlen += len + 1;
	fx_hashtab_put(&t->h, pos, (uint32_t)t->n);
	return (uint32_t)t->n++;
}

void view_strtab_free(struct strtab *t)
{
	free(t->text);
	free(t->ref);
	fx_hashtab_free(&t->h);
	memset(t, 0, sizeof(*t));
}

/* ---- interned records ---- */

static uint64_t rec_hash(const uint64_t *r, size_t width)
{
	return fx_hash_bytes(r, width * sizeof(*r));
}

static uint64_t rec_hash_at(const void *ctx, uint32_t i)
{
	const struct rectab *t = ctx;

	return rec_hash(view_rectab_at(t, i), t->width);
}

static bool rec_eq(const void *ctx, uint32_t i, const void *key)
{
	const struct rectab *t = ctx;

	return !memcmp(view_rectab_at(t, i), key, t->width * sizeof(uint64_t));
}

/* The index of record @r, added if new; UINT32_MAX when memory ran out. */
uint32_t view_rectab_add(struct rectab *t, const uint64_t *r)
{
	uint32_t i;
	size_t pos;

	if (t->width > REC_MAX || t->n >= UINT32_MAX - 1 ||
	    fx_hashtab_reserve(&t->h, t->n + 1, rec_hash_at, t) < 0)
		return UINT32_MAX;
	pos = fx_hashtab_probe(&t->h, rec_hash(r, t->width), rec_eq, t, r);
	i = fx_hashtab_at(&t->h, pos);
	if (i != FX_HASHTAB_NONE)
		return i;
	if (fx_grow(&t->v, &t->cap, (t->n + 1) * t->width, sizeof(*t->v)) < 0)
		return UINT32_MAX;
	memcpy(t->v + t->n * t->width, r, t->width * sizeof(*r));
	fx_hashtab_put(&t->h, pos, (uint32_t)t->n);
	return (uint32_t)t->n++;
}

static uint32_t rectab_find(const struct rectab *t, const uint64_t *r)
{
	return fx_hashtab_find(&t->h, rec_hash(r, t->width), rec_eq, t, r);
}

void view_rectab_free(struct rectab *t)
{
	free(t->v);
	fx_hashtab_free(&t->h);
	t->v = NULL;
	t->n = t->cap = 0;
}

/* ---- set-up ---- */

int view_merge_init(struct merge *m, enum fx_view_merge mode, double bucket_ms,
		    size_t fold_threshold)
{
	memset(m, 0, sizeof(*m));
	m->mode = mode;
	m->bucket_ms = bucket_ms;
	m->bucket_fixed = bucket_ms > 0;
	m->fold_threshold = fold_threshold;
	m->libs.width = VLIB_NFIELDS;
	m->res.width = 2;
	m->nsyms.width = 4;
	m->funcs.width = 2;
	m->frames.width = 6;
	m->stacks.width = 2;
	m->tracks.width = 5; /* host, pid, tid, off-CPU, shared name */
	m->windows.width = 6;
	m->start = INFINITY;
	m->end = -INFINITY;
	return 0;
}

void view_merge_free(struct merge *m)
{
	struct rectab *tabs[] = { &m->libs,   &m->res,	  &m->nsyms,  &m->funcs,
				  &m->frames, &m->stacks, &m->tracks, &m->windows };

	view_strtab_free(&m->strs);
	for (size_t i = 0; i < sizeof(tabs) / sizeof(tabs[0]); i++)
		view_rectab_free(tabs[i]);
	fx_hashtab_free(&m->fold_h);
	free(m->tinfo);
	free(m->order);
	free(m->samples);
	free(m->markers);
	free(m->map_str);
	free(m->map_lib);
	free(m->map_res);
	free(m->map_nsym);
	free(m->map_func);
	free(m->map_frame);
	free(m->map_stack);
	memset(m, 0, sizeof(*m));
}

/* ---- one chunk ---- */

static uint32_t str_of(struct merge *m, const struct vchunk *c, struct vstr s)
{
	return view_strtab_add(&m->strs, view_vstr_at(c, s), s.len);
}

/* A count from a chunk (another host's number) as an integer: a value past
 * int64's range does not convert (fuzz_view); such a count is 0. */
static int64_t count_of(double d)
{
	return d > -9.2e18 && d < 9.2e18 ? (int64_t)d : 0;
}

static uint64_t bits(double d)
{
	uint64_t u;

	memcpy(&u, &d, sizeof(u));
	return u;
}

static double from_bits(uint64_t u)
{
	double d;

	memcpy(&d, &u, sizeof(d));
	return d;
}

static int window_key(struct merge *m, const struct vchunk *c, uint64_t key[REC_MAX])
{
	uint32_t host = str_of(m, c, c->host), target = str_of(m, c, c->target);

	if (host == UINT32_MAX || target == UINT32_MAX)
		return -ENOMEM;
	key[0] = host;
	key[1] = target;
	key[2] = bits(c->seq);
	key[3] = bits(c->window_start);
	key[4] = bits(c->window_end);
	/* A length no agent writes is not one: the gaps fall back to the
	 * neighbours' own. */
	key[5] = bits(c->window_ms >= 1000 && c->window_ms <= 86400000 ? c->window_ms : 0);
	return 0;
}

bool view_merge_has_window(struct merge *m, const struct vchunk *c)
{
	uint64_t key[REC_MAX] = { 0 };

	return window_key(m, c, key) == 0 && rectab_find(&m->windows, key) != UINT32_MAX;
}

/* A chunk-to-merged map of @n entries. */
static int map_reserve(struct merge *m, uint32_t **map, int which, size_t n)
{
	return fx_grow(map, &m->map_cap[which], n ? n : 1, sizeof(**map));
}

/* A column value as an index; UINT64_MAX for null or -1. */
static uint64_t idx_or_none(double v)
{
	return isnan(v) || v < 0 ? NONE64 : (uint64_t)v;
}

static uint64_t mapped(const uint32_t *map, double v)
{
	uint64_t i = idx_or_none(v);

	return i == NONE64 ? NONE64 : map[i];
}

/* Interns column-wise rows: @build fills the record of row i. */
#define INTERN_ROWS(m, tab, map, n, rec, body)                                                     \
	do {                                                                                       \
		for (size_t i = 0; i < (n); i++) {                                                 \
			body;                                                                      \
			(map)[i] = view_rectab_add(&(m)->tab, rec);                                \
			if ((map)[i] == UINT32_MAX)                                                \
				return -ENOMEM;                                                    \
		}                                                                                  \
	} while (0)

static int map_tables(struct merge *m, const struct vchunk *c)
{
	const struct vcol *col = c->col;
	uint64_t r[REC_MAX] = { 0 };
	size_t nres = col[VC_RES_NAME].n, nsym = col[VC_NSYM_LIB].n, nfunc = col[VC_FUNC_NAME].n;
	size_t nframe = col[VC_FRAME_ADDR].n, nstack = col[VC_STACK_FRAME].n;

	if (map_reserve(m, &m->map_str, 0, c->strings.n) < 0 ||
	    map_reserve(m, &m->map_lib, 1, c->nlibs) < 0 ||
	    map_reserve(m, &m->map_res, 2, nres) < 0 || map_reserve(m, &m->map_nsym, 3, nsym) < 0 ||
	    map_reserve(m, &m->map_func, 4, nfunc) < 0 ||
	    map_reserve(m, &m->map_frame, 5, nframe) < 0 ||
	    map_reserve(m, &m->map_stack, 6, nstack) < 0)
		return -ENOMEM;
	for (size_t i = 0; i < c->strings.n; i++) {
		m->map_str[i] = str_of(m, c, c->strings.v[i]);
		if (m->map_str[i] == UINT32_MAX)
			return -ENOMEM;
	}
	for (size_t i = 0; i < c->nlibs; i++) {
		for (int f = 0; f < VLIB_NFIELDS; f++) {
			r[f] = str_of(m, c, c->libs[i].f[f]);
			if (r[f] == UINT32_MAX)
				return -ENOMEM;
		}
		m->map_lib[i] = view_rectab_add(&m->libs, r);
		if (m->map_lib[i] == UINT32_MAX)
			return -ENOMEM;
	}
	INTERN_ROWS(m, res, m->map_res, nres, r, {
		r[0] = m->map_str[(size_t)col[VC_RES_NAME].v[i]];
		r[1] = mapped(m->map_lib, col[VC_RES_LIB].v[i]);
	});
	INTERN_ROWS(m, nsyms, m->map_nsym, nsym, r, {
		r[0] = m->map_lib[(size_t)col[VC_NSYM_LIB].v[i]];
		r[1] = idx_or_none(col[VC_NSYM_ADDR].v[i]);
		r[2] = m->map_str[(size_t)col[VC_NSYM_NAME].v[i]];
		r[3] = idx_or_none(col[VC_NSYM_SIZE].v[i]);
	});
	INTERN_ROWS(m, funcs, m->map_func, nfunc, r, {
		r[0] = m->map_str[(size_t)col[VC_FUNC_NAME].v[i]];
		r[1] = mapped(m->map_res, col[VC_FUNC_RES].v[i]);
	});
	INTERN_ROWS(m, frames, m->map_frame, nframe, r, {
		r[0] = bits(col[VC_FRAME_ADDR].v[i]);
		r[1] = idx_or_none(col[VC_FRAME_DEPTH].v[i]);
		r[2] = idx_or_none(col[VC_FRAME_CAT].v[i]);
		r[3] = m->map_func[(size_t)col[VC_FRAME_FUNC].v[i]];
		r[4] = mapped(m->map_nsym, col[VC_FRAME_NSYM].v[i]);
		r[5] = idx_or_none(col[VC_FRAME_LINE].v[i]);
	});
	/* Parents come first, so a parent's merged index is known. */
	INTERN_ROWS(m, stacks, m->map_stack, nstack, r, {
		size_t off = (size_t)col[VC_STACK_PREFIX].v[i];

		r[0] = m->map_frame[(size_t)col[VC_STACK_FRAME].v[i]];
		r[1] = off ? m->map_stack[i - off] : NONE64;
	});
	return 0;
}

static uint32_t track_of(struct merge *m, const struct vchunk *c, const struct vthread *t,
			 uint32_t host)
{
	uint64_t key[REC_MAX] = { host };
	uint32_t pid = t->pid.len ? str_of(m, c, t->pid) : str_of(m, c, (struct vstr){ 0 });
	uint32_t name = str_of(m, c, t->name), pname = str_of(m, c, t->process_name);
	uint32_t i, oname = UINT32_MAX;
	size_t n = m->tracks.n;
	bool main = t->tid == strtod(view_vstr_at(c, t->pid), NULL);
	/* Threads of one name share a track: the main thread keeps its own. */
	bool shared = m->reuse_threads && m->mode == FX_VIEW_MERGE_THREADS && !main;

	if (pid == UINT32_MAX || name == UINT32_MAX || pname == UINT32_MAX)
		return UINT32_MAX;
	if (m->mode != FX_VIEW_MERGE_ALL)
		key[1] = pid;
	if (m->mode == FX_VIEW_MERGE_THREADS)
		key[2] = bits(shared ? 0 : t->tid);
	/* Waits stay apart from CPU samples: another track, in milliseconds. */
	key[3] = t->off_cpu;
	key[4] = shared ? (uint64_t)name + 1 : 0;
	i = view_rectab_add(&m->tracks, key);
	if (i != UINT32_MAX && i < n && t->tid < m->tinfo[i].tid)
		m->tinfo[i].tid = t->tid;
	if (i == UINT32_MAX || i < n)
		return i;
	if (fx_grow(&m->tinfo, &m->tinfo_cap, m->tracks.n, sizeof(*m->tinfo)) < 0)
		return UINT32_MAX;
	if (t->off_cpu && m->mode != FX_VIEW_MERGE_THREADS) {
		/* A merged wait track is named for its process, or its host. */
		char buf[600];
		size_t len;
		const char *base =
			view_strtab_at(&m->strs, m->mode == FX_VIEW_MERGE_ALL ? host : pname, &len);
		int k = snprintf(buf, sizeof(buf), "%.*s (off-CPU)", (int)(len < 400 ? len : 400),
				 base);

		oname = view_strtab_add(&m->strs, buf, (size_t)k);
		if (oname == UINT32_MAX)
			return UINT32_MAX;
	}
	switch (m->mode) {
	case FX_VIEW_MERGE_THREADS:
		m->tinfo[i] = (struct mtrack){
			.name = name,
			.process_name = pname,
			.main = !t->off_cpu && main,
		};
		break;
	case FX_VIEW_MERGE_PROCESSES:
		m->tinfo[i] = (struct mtrack){ .name = t->off_cpu ? oname : pname,
					       .process_name = pname,
					       .main = !t->off_cpu };
		break;
	case FX_VIEW_MERGE_ALL:
		m->tinfo[i] = (struct mtrack){ .name = t->off_cpu ? oname : host,
					       .process_name = host,
					       .main = !t->off_cpu };
		break;
	}
	m->tinfo[i].off_cpu = t->off_cpu;
	m->tinfo[i].tid = t->tid;
	return i;
}

static int push_marker(struct merge *m, const struct mmarker *mk)
{
	if (fx_grow(&m->markers, &m->markers_cap, m->nmarkers + 1, sizeof(*mk)) < 0)
		return -ENOMEM;
	m->markers[m->nmarkers++] = *mk;
	return 0;
}

static bool in_range(const struct merge *m, double t)
{
	return (!m->from || t >= m->from) && (!m->to || t < m->to);
}

/* ---- folding ---- */

static double bucket_of(const struct merge *m, double t)
{
	return floor(t / m->bucket_ms) * m->bucket_ms;
}

static uint64_t sample_hash(const struct msample *x)
{
	uint64_t t;

	memcpy(&t, &x->time, sizeof(t));
	return fx_mix64_pair(fx_mix64_pair(x->track, x->stack), t);
}

/* Folded samples: an array and its index by (track, time, stack). */
static uint64_t sample_hash_at(const void *ctx, uint32_t i)
{
	return sample_hash(&(*(struct msample *const *)ctx)[i]);
}

static bool sample_eq(const void *ctx, uint32_t i, const void *key)
{
	const struct msample *x = &(*(struct msample *const *)ctx)[i], *y = key;

	return x->track == y->track && x->stack == y->stack && x->time == y->time;
}

/* Adds @s (its time already a bucket's start) to the set @v (*@n of them,
 * indexed by @h): to the weight of an equal one, or as a new one. */
static int set_add(struct msample **v, size_t *n, size_t *cap, struct fx_hashtab *h,
		   const struct msample *s)
{
	size_t pos;
	uint32_t i;

	if (fx_hashtab_reserve(h, *n + 1, sample_hash_at, v) < 0)
		return -ENOMEM;
	pos = fx_hashtab_probe(h, sample_hash(s), sample_eq, v, s);
	i = fx_hashtab_at(h, pos);
	if (i != FX_HASHTAB_NONE && (*v)[i].weight <= UINT32_MAX - s->weight) {
		(*v)[i].weight += s->weight;
		return 0;
	}
	if (fx_grow(v, cap, *n + 1, sizeof(**v)) < 0)
		return -ENOMEM;
	(*v)[*n] = *s;
	/* a weight at its bound starts a second sample, not found again */
	if (i == FX_HASHTAB_NONE)
		fx_hashtab_put(h, pos, (uint32_t)*n);
	(*n)++;
	return 0;
}

static int fold_add(struct merge *m, const struct msample *s)
{
	return set_add(&m->samples, &m->nsamples, &m->samples_cap, &m->fold_h, s);
}

/* The samples folded again into m->bucket_ms: each time to its bucket's
 * start, equal (track, time, stack) summed, in place. */
static int refold(struct merge *m)
{
	size_t n = m->nsamples;

	fx_hashtab_reset(&m->fold_h);
	m->nsamples = 0;
	for (size_t i = 0; i < n; i++) {
		struct msample s = m->samples[i];

		s.time = bucket_of(m, s.time);
		/* in place: the sample at i is read before anything is written
		 * at nsamples <= i */
		if (fold_add(m, &s) < 0)
			return -ENOMEM;
	}
	return 0;
}

/* Folds until the samples fit in half the threshold, doubling a bucket that
 * the user did not choose (from 1 s). Samples taken later fold as they come
 * (add_sample). */
static int fold(struct merge *m)
{
	if (!m->bucket_ms) {
		m->bucket_ms = 1000;
		if (refold(m) < 0)
			return -ENOMEM;
	}
	while (!m->bucket_fixed && m->nsamples > m->fold_threshold / 2 &&
	       m->bucket_ms < 24 * 3600 * 1000.0) {
		m->bucket_ms *= 2;
		if (refold(m) < 0)
			return -ENOMEM;
	}
	return 0;
}

/* ---- one chunk's samples and markers ---- */

static int add_samples(struct merge *m, const struct vchunk *c, const struct vthread *t,
		       uint32_t host)
{
	const double *stack = c->col[VC_SAMPLE_STACK].v, *time = c->col[VC_SAMPLE_TIME].v;
	const double *weight = c->col[VC_SAMPLE_WEIGHT].v;
	uint32_t track = track_of(m, c, t, host);

	if (track == UINT32_MAX)
		return -ENOMEM;
	for (size_t i = t->samples_begin; i < t->samples_end; i++) {
		double at = c->start_time + time[i];
		uint64_t s = mapped(m->map_stack, stack[i]);

		struct msample ms = {
			.time = at,
			.track = track,
			.stack = s == NONE64 ? UINT32_MAX : (uint32_t)s,
			.weight = (uint32_t)weight[i],
		};

		if (!in_range(m, at) || weight[i] == 0)
			continue;
		if (t->off_cpu) {
			/* A wait's milliseconds, kept as whole microseconds */
			double us = round(weight[i] * 1000.0);

			ms.weight = us < 1 ? 1 : us > UINT32_MAX ? UINT32_MAX : (uint32_t)us;
		} else {
			m->raw_samples += ms.weight;
		}
		if (m->bucket_ms > 0) {
			ms.time = bucket_of(m, at);
			if (fold_add(m, &ms) < 0)
				return -ENOMEM;
			continue;
		}
		if (fx_grow(&m->samples, &m->samples_cap, m->nsamples + 1, sizeof(*m->samples)) < 0)
			return -ENOMEM;
		m->samples[m->nsamples++] = ms;
	}

	/* a bucket the user chose folds as samples come: nothing to redo */
	if (m->nsamples > m->fold_threshold && !m->bucket_fixed)
		return fold(m);
	return 0;
}

static int add_lost_markers(struct merge *m, const struct vchunk *c, const struct vthread *t,
			    uint32_t host, uint32_t target)
{
	for (size_t i = t->markers_begin; i < t->markers_end; i++) {
		struct vstr type = c->marker_types.v[i];
		double at = c->start_time + c->col[VC_MARKER_START].v[i];
		double count = c->col[VC_MARKER_COUNT].v[i];

		if (type.len != strlen(FX_SCHEMA_LOST) ||
		    memcmp(view_vstr_at(c, type), FX_SCHEMA_LOST, type.len) || !isfinite(at) ||
		    !(count >= 0) || !in_range(m, at))
			continue;
		if (push_marker(m, &(struct mmarker){ .type = MM_LOST,
						      .host = host,
						      .target = target,
						      .start = at,
						      .end = at,
						      .count = count_of(count) }) < 0)
			return -ENOMEM;
	}
	return 0;
}

int view_merge_add(struct merge *m, const struct vchunk *c)
{
	uint64_t win[REC_MAX] = { 0 };
	size_t nwin = m->windows.n;
	int rc = window_key(m, c, win);

	if (rc < 0)
		return rc;
	if (view_rectab_add(&m->windows, win) == UINT32_MAX)
		return -ENOMEM;
	if (m->windows.n == nwin)
		return 0; /* the same window again */
	rc = map_tables(m, c);
	for (size_t i = 0; rc == 0 && i < c->nthreads; i++) {
		/* A thread without samples (the agent's, carrying the chunk's
		 * markers) gets no track: the markers come from the meta. */
		if (c->threads[i].samples_end > c->threads[i].samples_begin)
			rc = add_samples(m, c, &c->threads[i], (uint32_t)win[0]);
		if (rc == 0)
			rc = add_lost_markers(m, c, &c->threads[i], (uint32_t)win[0],
					      (uint32_t)win[1]);
	}
	if (rc == 0)
		rc = push_marker(m, &(struct mmarker){ .type = MM_WINDOW,
						       .host = (uint32_t)win[0],
						       .target = (uint32_t)win[1],
						       .start = c->window_start,
						       .end = c->window_end,
						       .seq = count_of(c->seq),
						       .count = count_of(c->samples),
						       .lost = count_of(c->lost),
						       .truncated = count_of(c->truncated) });
	if (rc < 0)
		return rc;
	if (!m->interval || c->interval < m->interval)
		m->interval = c->interval;
	m->start = fmin(m->start, in_range(m, c->window_start) ? c->window_start : m->from);
	m->end = fmax(m->end, in_range(m, c->window_end) ? c->window_end : m->to);
	return 0;
}

/* ---- order ---- */

/* What tells a track from another, in its merge's strings: the host, the
 * pid ("" with one track per host), the tid, the name threads share it by
 * ("" for one thread's), on or off CPU. */
struct track_id {
	const char *host, *pid, *shared;
	size_t hlen, plen, slen;
	double tid;
	bool off_cpu;
};

static struct track_id track_id(const struct merge *m, uint32_t t)
{
	const uint64_t *k = view_rectab_at(&m->tracks, t);
	struct track_id id = { .shared = "", .tid = from_bits(k[2]), .off_cpu = k[3] != 0 };

	if (k[4])
		id.shared = view_strtab_at(&m->strs, (uint32_t)(k[4] - 1), &id.slen);

	id.host = view_strtab_at(&m->strs, (uint32_t)k[0], &id.hlen);
	id.pid = m->mode == FX_VIEW_MERGE_ALL ? ""
					      : view_strtab_at(&m->strs, (uint32_t)k[1], &id.plen);
	if (m->mode == FX_VIEW_MERGE_ALL)
		id.plen = 0;
	return id;
}

static int cmp_bytes(const char *a, size_t la, const char *b, size_t lb)
{
	int r = memcmp(a, b, la < lb ? la : lb);

	return r ? r : (la > lb) - (la < lb);
}

/* The order of tracks: by host, pid (as a number, then as text), main
 * thread first, tid, shared name, CPU before waits. It depends on what the
 * tracks are, not on when they were met: two merges of the same tracks
 * (--compare) order them alike. */
static int cmp_track_id(const struct track_id *x, bool xmain, const struct track_id *y, bool ymain)
{
	int r = cmp_bytes(x->host, x->hlen, y->host, y->hlen);
	double px = strtod(x->pid, NULL), py = strtod(y->pid, NULL);

	if (r)
		return r;
	if (px != py)
		return px < py ? -1 : 1;
	r = cmp_bytes(x->pid, x->plen, y->pid, y->plen);
	if (r)
		return r;
	if (xmain != ymain)
		return xmain ? -1 : 1;
	if (x->tid != y->tid)
		return x->tid < y->tid ? -1 : 1;
	r = cmp_bytes(x->shared, x->slen, y->shared, y->slen);
	if (r)
		return r;
	return (x->off_cpu > y->off_cpu) - (x->off_cpu < y->off_cpu);
}

static int cmp_track(const void *a, const void *b, void *ctx)
{
	const struct merge *m = ctx;
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
	struct track_id ix = track_id(m, x), iy = track_id(m, y);
	int r = cmp_track_id(&ix, m->tinfo[x].main, &iy, m->tinfo[y].main);

	return r ? r : (x > y) - (x < y);
}

static int cmp_sample(const void *a, const void *b, void *ctx)
{
	const struct merge *m = ctx;
	const struct msample *x = a, *y = b;
	const uint32_t *rank = m->order + m->tracks.n;

	if (x->track != y->track)
		return rank[x->track] < rank[y->track] ? -1 : 1;
	if (x->time != y->time)
		return x->time < y->time ? -1 : 1;
	return (x->stack > y->stack) - (x->stack < y->stack);
}

static int cmp_window(const void *a, const void *b)
{
	const uint64_t *x = a, *y = b;
	double sx, sy;

	if (x[0] != y[0])
		return x[0] < y[0] ? -1 : 1;
	if (x[1] != y[1])
		return x[1] < y[1] ? -1 : 1;
	memcpy(&sx, &x[3], sizeof(sx));
	memcpy(&sy, &y[3], sizeof(sy));
	return (sx > sy) - (sx < sy);
}

/* A gap marker between windows of one target on one host that leave more
 * than half a window (and over a second) unrecorded between them. The
 * windows missing are counted in the configured window length the chunks
 * carry: a restart cuts the windows on both sides of it short. Chunks
 * without it (older agents) are counted by the longer neighbour. */
static int add_gaps(struct merge *m)
{
	const size_t wd = 6;
	size_t n = m->windows.n;
	uint64_t *w;

	if (n < 2)
		return 0;
	w = malloc(n * wd * sizeof(*w));
	if (!w)
		return -ENOMEM;
	memcpy(w, m->windows.v, n * wd * sizeof(*w));
	qsort(w, n, wd * sizeof(*w), cmp_window);
	for (size_t i = 1; i < n; i++) {
		const uint64_t *a = w + (i - 1) * wd, *b = w + i * wd;
		double as = from_bits(a[3]), ae = from_bits(a[4]), bs = from_bits(b[3]),
		       be = from_bits(b[4]);
		double len = fmax(from_bits(a[5]), from_bits(b[5]));

		if (!(len > 0))
			len = fmax(ae - as, be - bs);
		if (a[0] != b[0] || a[1] != b[1] || bs - ae <= fmax(1000, len / 2))
			continue;
		if (push_marker(m, &(struct mmarker){
					   .type = MM_GAP,
					   .host = (uint32_t)a[0],
					   .target = (uint32_t)a[1],
					   .start = ae,
					   .end = bs,
					   .count = len > 0 ? count_of(round(
								      fmax(1.0, (bs - ae) / len)))
							    : 0,
				   }) < 0) {
			free(w);
			return -ENOMEM;
		}
	}
	free(w);
	return 0;
}

/* A host with markers but no samples still gets a track to show them. */
static int track_per_host(struct merge *m)
{
	uint32_t empty = view_strtab_add(&m->strs, "", 0);
	bool *has; /* by host string: it has a track */
	int rc = 0;

	if (empty == UINT32_MAX)
		return -ENOMEM;
	has = calloc(m->strs.n, sizeof(*has));
	if (!has)
		return -ENOMEM;
	for (size_t t = 0; t < m->tracks.n; t++)
		has[view_rectab_at(&m->tracks, t)[0]] = true;
	for (size_t i = 0; rc == 0 && i < m->nmarkers; i++) {
		uint32_t host = m->markers[i].host;
		uint64_t key[REC_MAX] = { host, empty };

		if (has[host])
			continue;
		has[host] = true;
		if (view_rectab_add(&m->tracks, key) == UINT32_MAX ||
		    fx_grow(&m->tinfo, &m->tinfo_cap, m->tracks.n, sizeof(*m->tinfo)) < 0)
			rc = -ENOMEM;
		else
			m->tinfo[m->tracks.n - 1] =
				(struct mtrack){ .name = host, .process_name = host, .main = true };
	}
	free(has);
	return rc;
}

/* m->order from the tracks, the hosts counted, the samples in that order. */
static int order_tracks(struct merge *m)
{
	size_t nt = m->tracks.n;

	free(m->order);
	/* order[0..nt): tracks in order; order[nt..2nt): each track's rank */
	m->order = malloc(2 * nt * sizeof(*m->order) + 1);
	if (!m->order)
		return -ENOMEM;
	for (size_t i = 0; i < nt; i++)
		m->order[i] = (uint32_t)i;
	if (nt)
		qsort_r(m->order, nt, sizeof(*m->order), cmp_track, m);
	m->nhosts = 0;
	for (size_t i = 0; i < nt; i++) {
		m->order[nt + m->order[i]] = (uint32_t)i;
		if (!i || view_rectab_at(&m->tracks, m->order[i])[0] !=
				  view_rectab_at(&m->tracks, m->order[i - 1])[0])
			m->nhosts++;
	}
	if (m->nsamples) /* qsort's array may not be NULL, even empty */
		qsort_r(m->samples, m->nsamples, sizeof(*m->samples), cmp_sample, m);
	return 0;
}

int view_merge_finish(struct merge *m)
{
	int rc = add_gaps(m);

	if (rc == 0)
		rc = track_per_host(m);
	if (rc < 0)
		return rc;
	m->marker_name[MM_WINDOW] =
		view_strtab_add(&m->strs, FX_SCHEMA_RECORDING, strlen(FX_SCHEMA_RECORDING));
	m->marker_name[MM_LOST] = view_strtab_add(&m->strs, FX_SCHEMA_LOST, strlen(FX_SCHEMA_LOST));
	m->marker_name[MM_GAP] = view_strtab_add(&m->strs, FX_SCHEMA_GAP, strlen(FX_SCHEMA_GAP));
	for (int i = 0; i < 3; i++) {
		if (m->marker_name[i] == UINT32_MAX)
			return -ENOMEM;
	}
	rc = order_tracks(m);
	if (rc < 0)
		return rc;
	if (!isfinite(m->start)) {
		m->start = 0;
		m->end = 0;
	}
	return 0;
}

/* ---- two merges side by side (--compare) ---- */

static uint32_t copy_str(struct merge *to, const struct merge *from, uint64_t i)
{
	size_t len;
	const char *s = view_strtab_at(&from->strs, (uint32_t)i, &len);

	return view_strtab_add(&to->strs, s, len);
}

/* Adds to @to an empty track like @from's track @t. */
static int copy_track(struct merge *to, const struct merge *from, uint32_t t)
{
	const uint64_t *k = view_rectab_at(&from->tracks, t);
	const struct mtrack *ti = &from->tinfo[t];
	uint64_t key[REC_MAX] = { copy_str(to, from, k[0]), 0, k[2], k[3] };
	uint32_t name = copy_str(to, from, ti->name), pname = copy_str(to, from, ti->process_name);
	uint32_t shared = k[4] ? copy_str(to, from, k[4] - 1) : 0;

	if (from->mode != FX_VIEW_MERGE_ALL)
		key[1] = copy_str(to, from, k[1]);
	key[4] = k[4] ? (uint64_t)shared + 1 : 0;
	if (key[0] == UINT32_MAX || key[1] == UINT32_MAX || name == UINT32_MAX ||
	    pname == UINT32_MAX || shared == UINT32_MAX ||
	    view_rectab_add(&to->tracks, key) == UINT32_MAX ||
	    fx_grow(&to->tinfo, &to->tinfo_cap, to->tracks.n, sizeof(*to->tinfo)) < 0)
		return -ENOMEM;
	to->tinfo[to->tracks.n - 1] = (struct mtrack){ .name = name,
						       .process_name = pname,
						       .main = ti->main,
						       .off_cpu = ti->off_cpu,
						       .tid = ti->tid };
	return 0;
}

/* Adds to @b the tracks of @a it lacks; both in order (view_merge_finish). */
static int add_missing(struct merge *b, const struct merge *a)
{
	size_t na = a->tracks.n, nb = b->tracks.n, j = 0;
	int rc = 0;

	for (size_t i = 0; rc == 0 && i < na; i++) {
		uint32_t ta = a->order[i];
		struct track_id ia = track_id(a, ta);
		int r = 1;

		while (j < nb) {
			struct track_id ib = track_id(b, b->order[j]);

			r = cmp_track_id(&ib, b->tinfo[b->order[j]].main, &ia, a->tinfo[ta].main);
			if (r >= 0)
				break;
			j++;
		}
		if (r != 0)
			rc = copy_track(b, a, ta);
	}
	return rc;
}

int view_merge_align(struct merge *a, struct merge *b)
{
	/* b gets a's tracks and is put in order; then a gets the rest of b's */
	int rc = add_missing(b, a);

	if (rc == 0)
		rc = order_tracks(b);
	if (rc == 0)
		rc = add_missing(a, b);
	if (rc == 0)
		rc = order_tracks(a);
	return rc;
}

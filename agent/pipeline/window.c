/* SPDX-License-Identifier: MIT */
#include "fxagent/window.h"
#include "fxagent/hash.h"
#include "fxagent/offcpu.h"
#include "fxagent/util.h"

#include <assert.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

static uint64_t frame_hash(uint32_t object, uint64_t addr)
{
	/* One mix, not fx_mix64_pair's two: this is the sampler's hot path,
	 * and object ids are small next to the offsets' 40-odd bits. */
	return fx_mix64(addr ^ ((uint64_t)object << 40) ^ object);
}

static uint64_t stack_hash(uint32_t parent, uint32_t frame)
{
	return fx_mix64(((uint64_t)parent << 32) | frame);
}

void fx_window_init(struct fx_window *w, size_t max_stacks)
{
	memset(w, 0, sizeof(*w));
	w->max_stacks = max_stacks;
}

void fx_window_release(struct fx_window *w)
{
	free(w->frames);
	free(w->stacks);
	free(w->samples);
	free(w->paths);
	fx_hashtab_free(&w->frame_index);
	fx_hashtab_free(&w->stack_index);
	free(w->waitsums);
	fx_hashtab_free(&w->waitsum_index);
	for (unsigned k = 0; k < FX_WINDOW_RECENT; k++) {
		free(w->recent[k].frames);
		free(w->recent[k].nodes);
	}
	fx_window_init(w, w->max_stacks);
}

void fx_window_reset(struct fx_window *w)
{
	w->nframes = 0;
	w->nstacks = 0;
	w->nsamples = 0;
	memset(&w->counters, 0, sizeof(w->counters));
	fx_hashtab_reset(&w->frame_index);
	fx_hashtab_reset(&w->stack_index);
	w->nwaitsums = 0;
	fx_hashtab_reset(&w->waitsum_index);
	if (w->paths)
		memset(w->paths, 0, FX_WINDOW_PATHS * sizeof(*w->paths));
	for (unsigned k = 0; k < FX_WINDOW_RECENT; k++)
		w->recent[k].n = 0;
}

static size_t recent_bytes(const struct fx_window *w)
{
	size_t b = 0;

	for (unsigned k = 0; k < FX_WINDOW_RECENT; k++)
		b += w->recent[k].cap *
		     (sizeof(*w->recent[k].frames) + sizeof(*w->recent[k].nodes));
	return b;
}

size_t fx_window_bytes(const struct fx_window *w)
{
	return w->frames_cap * sizeof(*w->frames) + w->stacks_cap * sizeof(*w->stacks) +
	       w->samples_cap * sizeof(*w->samples) + fx_hashtab_bytes(&w->frame_index) +
	       fx_hashtab_bytes(&w->stack_index) +
	       (w->paths ? FX_WINDOW_PATHS * sizeof(*w->paths) : 0) + recent_bytes(w) +
	       w->waitsums_cap * sizeof(*w->waitsums) + fx_hashtab_bytes(&w->waitsum_index);
}

static uint64_t frame_hash_at(const void *ctx, uint32_t i)
{
	const struct fx_window *w = ctx;

	return frame_hash(w->frames[i].object, w->frames[i].addr);
}

static bool same_frame(const struct fx_window_frame *a, const struct fx_window_frame *b)
{
	return a->object == b->object && a->addr == b->addr;
}

static bool frame_eq(const void *ctx, uint32_t i, const void *key)
{
	return same_frame(&((const struct fx_window *)ctx)->frames[i], key);
}

static uint64_t stack_hash_at(const void *ctx, uint32_t i)
{
	const struct fx_window *w = ctx;

	return stack_hash(w->stacks[i].parent, w->stacks[i].frame);
}

static bool stack_eq(const void *ctx, uint32_t i, const void *key)
{
	const struct fx_window_stack *a = &((const struct fx_window *)ctx)->stacks[i], *b = key;

	return a->parent == b->parent && a->frame == b->frame;
}

uint32_t fx_window_intern_frame(struct fx_window *w, uint32_t object, uint64_t addr)
{
	const struct fx_window_frame key = { .object = object, .addr = addr };
	size_t pos;
	uint32_t i;

	if (fx_hashtab_reserve(&w->frame_index, w->nframes + 1, frame_hash_at, w) < 0)
		goto nomem;
	pos = fx_hashtab_probe(&w->frame_index, frame_hash(object, addr), frame_eq, w, &key);
	i = fx_hashtab_at(&w->frame_index, pos);
	if (i != FX_HASHTAB_NONE)
		return i;
	if (w->nframes >= FX_OBJ_UNKNOWN - 1 ||
	    fx_grow(&w->frames, &w->frames_cap, w->nframes + 1, sizeof(*w->frames)) < 0)
		goto nomem;
	w->frames[w->nframes] = key;
	fx_hashtab_put(&w->frame_index, pos, (uint32_t)w->nframes);
	return (uint32_t)w->nframes++;
nomem:
	errno = ENOMEM;
	return FX_NONE;
}

static uint32_t intern_node(struct fx_window *w, uint32_t parent, uint32_t frame)
{
	const struct fx_window_stack key = { .parent = parent, .frame = frame };
	size_t pos;
	uint32_t i;

	if (fx_hashtab_reserve(&w->stack_index, w->nstacks + 1, stack_hash_at, w) < 0)
		goto nomem;
	pos = fx_hashtab_probe(&w->stack_index, stack_hash(parent, frame), stack_eq, w, &key);
	i = fx_hashtab_at(&w->stack_index, pos);
	if (i != FX_HASHTAB_NONE)
		return i;
	if (w->max_stacks && w->nstacks >= w->max_stacks) {
		errno = ENOSPC;
		return FX_NONE;
	}
	if (fx_grow(&w->stacks, &w->stacks_cap, w->nstacks + 1, sizeof(*w->stacks)) < 0)
		goto nomem;
	w->stacks[w->nstacks] = key;
	fx_hashtab_put(&w->stack_index, pos, (uint32_t)w->nstacks);
	return (uint32_t)w->nstacks++;
nomem:
	errno = ENOMEM;
	return FX_NONE;
}
/* The index of a frame known to @w, or FX_NONE. */
static uint32_t find_frame(const struct fx_window *w, const struct fx_window_frame *key)
{
	return fx_hashtab_find(&w->frame_index, frame_hash(key->object, key->addr), frame_eq, w,
			       key);
}

/* Interns call path @frames[0..n-1] frame by frame, from frame @from on,
 * under @node (the stack of frames[0..from-1]). With @r, records each
 * frame and its node there, keeping r->n the length of what is right. */
static uint32_t intern_path(struct fx_window *w, const struct fx_window_frame *frames, size_t n,
			    size_t from, uint32_t node, struct fx_window_recent *r)
{
	for (size_t i = from; i < n; i++) {
		/* At the stack cap a new frame would need a new node, which is
		 * refused: not interned, frames stay under the cap too. */
		bool full = w->max_stacks && w->nstacks >= w->max_stacks;
		uint32_t f = full ? find_frame(w, &frames[i])
				  : fx_window_intern_frame(w, frames[i].object, frames[i].addr);

		if (f == FX_NONE) {
			errno = full ? ENOSPC : ENOMEM;
			return FX_NONE;
		}
		node = intern_node(w, node, f);
		if (node == FX_NONE)
			return FX_NONE;
		if (r) {
			r->frames[i] = frames[i];
			r->nodes[i] = node;
			r->n = i + 1;
		}
	}
	return node;
}

/* Interns @frames[0..n-1] from the recent path sharing the most outer
 * frames with it, which it then replaces. */
static uint32_t intern_recent(struct fx_window *w, const struct fx_window_frame *frames, size_t n)
{
	struct fx_window_recent *r = NULL;
	size_t best = 0;

	for (unsigned k = 0; k < FX_WINDOW_RECENT; k++) {
		const struct fx_window_recent *c = &w->recent[k];
		size_t p = 0, m = c->n < n ? c->n : n;

		while (p < m && same_frame(&c->frames[p], &frames[p]))
			p++;
		if (p > best) {
			best = p;
			r = &w->recent[k];
		}
	}
	if (!r) {
		r = &w->recent[w->recent_next];
		w->recent_next = (w->recent_next + 1) % FX_WINDOW_RECENT;
	}
	if (r->cap < n) {
		size_t fcap = r->cap, ncap = r->cap;

		if (fx_grow(&r->frames, &fcap, n, sizeof(*r->frames)) < 0 ||
		    fx_grow(&r->nodes, &ncap, n, sizeof(*r->nodes)) < 0) {
			r->cap = fcap < ncap ? fcap : ncap;
			r->n = 0;
			return intern_path(w, frames, n, 0, FX_NONE, NULL); /* slower, not wrong */
		}
		r->cap = fcap < ncap ? fcap : ncap;
	}
	r->n = best;
	return intern_path(w, frames, n, best, best ? r->nodes[best - 1] : FX_NONE, r);
}

/* A hash of call path @frames[0..n-1]; never 0 (an empty slot's). */
static uint64_t path_hash(const struct fx_window_frame *frames, size_t n)
{
	uint64_t h = n;

	for (size_t i = 0; i < n; i++)
		h = (h ^ frames[i].addr ^ ((uint64_t)frames[i].object << 40)) *
		    0x9e3779b97f4a7c15ull;
	h = fx_mix64(h);
	return h ? h : 1;
}

/* Whether stack @node is call path @frames[0..n-1]. */
static bool path_is(const struct fx_window *w, uint32_t node, const struct fx_window_frame *frames,
		    size_t n)
{
	for (size_t i = n; i-- > 0;) {
		const struct fx_window_frame *f;

		if (node >= w->nstacks)
			return false;
		f = &w->frames[w->stacks[node].frame];
		if (!same_frame(f, &frames[i]))
			return false;
		node = w->stacks[node].parent;
	}
	return node == FX_NONE;
}

uint32_t fx_window_intern_stack(struct fx_window *w, const struct fx_window_frame *frames, size_t n)
{
	struct fx_window_path *slot;
	uint64_t h;
	uint32_t node;

	if (!n)
		return FX_NONE;
	if (!w->paths)
		w->paths = calloc(FX_WINDOW_PATHS, sizeof(*w->paths));
	if (!w->paths)
		return intern_recent(w, frames, n); /* slower, not wrong */
	h = path_hash(frames, n);
	slot = &w->paths[h % FX_WINDOW_PATHS];
	if (slot->hash == h && slot->n == n && path_is(w, slot->node, frames, n))
		return slot->node;
	node = intern_recent(w, frames, n);
	if (node != FX_NONE)
		*slot = (struct fx_window_path){ .hash = h, .node = node, .n = (uint32_t)n };
	return node;
}

int fx_window_add_sample(struct fx_window *w, uint64_t time_ns, uint32_t pid, uint32_t tid,
			 uint32_t stack)
{
	assert(stack == FX_NONE || stack < w->nstacks);
	if (fx_grow(&w->samples, &w->samples_cap, w->nsamples + 1, sizeof(*w->samples)) < 0)
		return -ENOMEM;
	w->samples[w->nsamples++] = (struct fx_window_sample){
		.time_ns = time_ns, .pid = pid, .tid = tid, .stack = stack, .wait_us = 0
	};
	w->counters.samples++;
	return 0;
}

int fx_window_add_wait(struct fx_window *w, uint64_t time_ns, uint32_t pid, uint32_t tid,
		       uint32_t stack, uint64_t weight_ns)
{
	uint64_t us = (weight_ns + 500) / 1000;
	int ret;

	if (!us)
		us = 1;
	if (us > UINT32_MAX)
		us = UINT32_MAX;
	ret = fx_window_add_sample(w, time_ns, pid, tid, stack);
	if (ret < 0)
		return ret;
	w->samples[w->nsamples - 1].wait_us = (uint32_t)us;
	w->counters.samples--; /* the CPU samples' count */
	w->counters.waits++;
	w->counters.wait_us += us;
	return 0;
}

static uint64_t waitsum_hash(uint32_t tid, uint32_t state)
{
	return fx_mix64((uint64_t)tid << 8 | state);
}

static uint64_t waitsum_hash_at(const void *ctx, uint32_t i)
{
	const struct fx_window *w = ctx;

	return waitsum_hash(w->waitsums[i].tid, w->waitsums[i].state);
}

static bool waitsum_eq(const void *ctx, uint32_t i, const void *key)
{
	const struct fx_window *w = ctx;
	const uint32_t *k = key;

	return w->waitsums[i].tid == k[0] && w->waitsums[i].state == k[1];
}

static struct fx_window_waitsum *find_waitsum(const struct fx_window *w, uint32_t tid,
					      uint32_t state)
{
	uint32_t key[2] = { tid, state }, i;

	if (!w->nwaitsums || !w->waitsums)
		return NULL;
	i = fx_hashtab_find(&w->waitsum_index, waitsum_hash(tid, state), waitsum_eq, w, key);
	return i == FX_HASHTAB_NONE ? NULL : &w->waitsums[i];
}

/* The entry of thread @tid in @state, added if new; NULL on ENOMEM. */
static struct fx_window_waitsum *waitsum_get(struct fx_window *w, uint64_t time_ns, uint32_t pid,
					     uint32_t tid, uint32_t state)
{
	uint32_t key[2] = { tid, state }, i;
	struct fx_window_waitsum *ws;
	size_t pos;

	if (fx_hashtab_reserve(&w->waitsum_index, w->nwaitsums + 1, waitsum_hash_at, w) < 0)
		return NULL;
	pos = fx_hashtab_probe(&w->waitsum_index, waitsum_hash(tid, state), waitsum_eq, w, key);
	i = fx_hashtab_at(&w->waitsum_index, pos);
	if (i == FX_HASHTAB_NONE) {
		if (fx_grow(&w->waitsums, &w->waitsums_cap, w->nwaitsums + 1,
			    sizeof(*w->waitsums)) < 0)
			return NULL;
		i = (uint32_t)w->nwaitsums++;
		w->waitsums[i] =
			(struct fx_window_waitsum){ .pid = pid, .tid = tid, .state = state };
		fx_hashtab_put(&w->waitsum_index, pos, i);
	}
	ws = &w->waitsums[i];
	if (time_ns > ws->at_ns)
		ws->at_ns = time_ns;
	return ws;
}

int fx_window_count_wait(struct fx_window *w, uint64_t time_ns, uint32_t pid, uint32_t tid,
			 uint32_t state, uint64_t exact_ns, uint64_t shown_ns)
{
	struct fx_window_waitsum *ws = waitsum_get(w, time_ns, pid, tid, state);

	if (!shown_ns) {
		w->counters.waits++;
		w->counters.waits_unstacked++;
	}
	if (!ws)
		return -ENOMEM;
	ws->exact_ns += exact_ns;
	ws->drawn_ns += exact_ns;
	ws->shown_ns += shown_ns;
	if (!shown_ns)
		ws->unstacked_ns += exact_ns;
	return 0;
}

int fx_window_note_thread(struct fx_window *w, uint64_t time_ns, uint32_t pid, uint32_t tid)
{
	for (uint32_t st = FX_OFFCPU_STATE_SLEEP; st <= FX_OFFCPU_STATE_WOKEN; st++)
		if (find_waitsum(w, tid, st))
			return 0;
	/* an entry of no time and no wait: calibrate() finds the thread */
	return waitsum_get(w, time_ns, pid, tid, FX_OFFCPU_STATE_SLEEP) ? 0 : -ENOMEM;
}

/* The state of off-CPU stack @stack: its innermost frame's, or 0. */
static uint32_t stack_state(const struct fx_window *w, uint32_t stack)
{
	const struct fx_window_frame *f;

	if (stack == FX_NONE)
		return 0;
	f = &w->frames[w->stacks[stack].frame];
	return f->object == FX_OBJ_OFFCPU ? (uint32_t)f->addr : 0;
}

/* Shares @target among the states @st[0..1] of thread @tid as their drawn
 * waits share them; with none drawn, all of it to st[0]'s. */
static int calibrate_class(struct fx_window *w, const struct fx_window_waitsum *any,
			   const uint32_t st[2], uint64_t target)
{
	struct fx_window_waitsum *ws[2] = { find_waitsum(w, any->tid, st[0]),
					    find_waitsum(w, any->tid, st[1]) };
	uint64_t sum = (ws[0] ? ws[0]->exact_ns : 0) + (ws[1] ? ws[1]->exact_ns : 0);
	uint64_t pid = any->pid, tid = any->tid, at = any->at_ns;

	if (!sum) {
		if (!target)
			return 0;
		/* none drawn: the kernel's time alone, on no stack of its own */
		ws[0] = waitsum_get(w, at, (uint32_t)pid, (uint32_t)tid, st[0]);
		if (!ws[0])
			return -ENOMEM;
		ws[0]->exact_ns = target;
		return 0;
	}
	for (int k = 0; k < 2; k++)
		if (ws[k])
			ws[k]->exact_ns =
				(uint64_t)((unsigned __int128)ws[k]->exact_ns * target / sum);
	return 0;
}

/* The kernel's times of the threads in @times in place of the drawn waits'
 * estimates: exact, whatever was drawn. A thread none of whose waits was
 * drawn in the window (not watched, or never waiting long) keeps none. */
static void calibrate(struct fx_window *w, const struct fx_window_thread_time *times, size_t ntimes)
{
	static const uint32_t blocked[2] = { FX_OFFCPU_STATE_SLEEP, FX_OFFCPU_STATE_DISK };
	static const uint32_t runq[2] = { FX_OFFCPU_STATE_RUNNABLE, FX_OFFCPU_STATE_WOKEN };

	for (size_t i = 0; i < ntimes; i++) {
		const struct fx_window_thread_time *t = &times[i];
		const struct fx_window_waitsum *ws = NULL;
		struct fx_window_waitsum one;
		uint64_t busy = t->on_ns + t->runq_ns;

		for (uint32_t st = FX_OFFCPU_STATE_SLEEP; st <= FX_OFFCPU_STATE_WOKEN && !ws; st++)
			ws = find_waitsum(w, t->tid, st);
		if (!ws)
			continue;
		one = *ws; /* the array may grow */
		if (calibrate_class(w, &one, blocked, t->alive_ns > busy ? t->alive_ns - busy : 0) <
			    0 ||
		    calibrate_class(w, &one, runq, t->runq_ns) < 0)
			return; /* out of memory: the estimates stay */
	}
}

void fx_window_fold_waits(struct fx_window *w, const struct fx_window_thread_time *times,
			  size_t ntimes)
{
	size_t nsamples = w->nsamples;
	uint64_t total = 0;

	if (times && ntimes)
		calibrate(w, times, ntimes);

	for (size_t i = 0; i < nsamples; i++) {
		struct fx_window_sample *s = &w->samples[i];
		const struct fx_window_waitsum *ws;
		uint64_t us;

		if (!s->wait_us)
			continue;
		ws = find_waitsum(w, s->tid, stack_state(w, s->stack));
		if (ws && ws->shown_ns && ws->shown_ns != ws->exact_ns) {
			/* in 128-bit: a wait of 2^32 us times a ratio */
			us = (uint64_t)(((unsigned __int128)s->wait_us * ws->exact_ns +
					 ws->shown_ns / 2) /
					ws->shown_ns); /* to the nearest: no drift down */
			s->wait_us = us > UINT32_MAX ? UINT32_MAX : us ? (uint32_t)us : 1;
		}
		total += s->wait_us;
	}
	for (size_t k = 0; k < w->nwaitsums; k++) {
		const struct fx_window_waitsum *ws = &w->waitsums[k];
		struct fx_window_frame fr[2] = {
			{ .object = FX_OBJ_OFFCPU, .addr = FX_OFFCPU_NO_STACK },
			{ .object = FX_OBJ_OFFCPU, .addr = ws->state },
		};
		uint32_t stack;

		if (ws->shown_ns || !ws->exact_ns)
			continue;
		stack = fx_window_intern_stack(w, fr, 2);
		if (stack == FX_NONE) {
			w->counters.dropped_stacks++;
			continue;
		}
		if (fx_window_add_wait(w, ws->at_ns, ws->pid, ws->tid, stack, ws->exact_ns) == 0) {
			w->counters.waits--; /* counted as unstacked already */
			total += w->samples[w->nsamples - 1].wait_us;
		}
	}
	w->counters.wait_us = total;
	/* The unstacked waits' part of what is shown: their share of each
	 * thread's time in each state. Folded: a second call changes nothing. */
	total = 0;
	for (size_t k = 0; k < w->nwaitsums; k++) {
		struct fx_window_waitsum *ws = &w->waitsums[k];

		if (ws->drawn_ns)
			total += (uint64_t)((unsigned __int128)ws->exact_ns * ws->unstacked_ns /
					    ws->drawn_ns);
		ws->shown_ns = ws->exact_ns;
	}
	w->counters.waits_unstacked_us = (total + 500) / 1000;
}

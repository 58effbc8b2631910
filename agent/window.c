/* SPDX-License-Identifier: MIT */
#include "fxagent/window.h"
#include "fxagent/hash.h"
#include "fxagent/util.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static uint64_t frame_hash(uint32_t object, uint64_t addr)
{
	return fx_mix64_pair(object, addr);
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
	free(w->frame_hash);
	free(w->stack_hash);
	fx_window_init(w, w->max_stacks);
}

void fx_window_reset(struct fx_window *w)
{
	w->nframes = 0;
	w->nstacks = 0;
	w->nsamples = 0;
	memset(&w->counters, 0, sizeof(w->counters));
	if (w->frame_hash)
		memset(w->frame_hash, 0, w->frame_hash_cap * sizeof(*w->frame_hash));
	if (w->stack_hash)
		memset(w->stack_hash, 0, w->stack_hash_cap * sizeof(*w->stack_hash));
}

/* Rebuilds an index table of power-of-two size @ncap over @count entries. */
static int rehash(uint32_t **table, size_t *cap, size_t ncap, size_t count,
		  uint64_t (*hash_of)(const struct fx_window *, size_t), const struct fx_window *w)
{
	uint32_t *t = calloc(ncap, sizeof(*t));

	if (!t)
		return -ENOMEM;
	for (size_t i = 0; i < count; i++) {
		size_t pos = hash_of(w, i) & (ncap - 1);

		while (t[pos])
			pos = (pos + 1) & (ncap - 1);
		t[pos] = (uint32_t)i + 1;
	}
	free(*table);
	*table = t;
	*cap = ncap;
	return 0;
}

static uint64_t frame_hash_at(const struct fx_window *w, size_t i)
{
	return frame_hash(w->frames[i].object, w->frames[i].addr);
}

static uint64_t stack_hash_at(const struct fx_window *w, size_t i)
{
	return stack_hash(w->stacks[i].parent, w->stacks[i].frame);
}

uint32_t fx_window_intern_frame(struct fx_window *w, uint32_t object, uint64_t addr)
{
	size_t pos;

	/* Keep the load factor under 1/2. */
	if ((w->nframes + 1) * 2 > w->frame_hash_cap &&
	    rehash(&w->frame_hash, &w->frame_hash_cap,
		   w->frame_hash_cap ? w->frame_hash_cap * 2 : 1024, w->nframes, frame_hash_at,
		   w) < 0)
		goto nomem;
	pos = frame_hash(object, addr) & (w->frame_hash_cap - 1);
	while (w->frame_hash[pos]) {
		uint32_t i = w->frame_hash[pos] - 1;

		if (w->frames[i].object == object && w->frames[i].addr == addr)
			return i;
		pos = (pos + 1) & (w->frame_hash_cap - 1);
	}
	if (w->nframes >= FX_OBJ_UNKNOWN - 1 ||
	    fx_grow(&w->frames, &w->frames_cap, w->nframes + 1, sizeof(*w->frames)) < 0)
		goto nomem;
	w->frames[w->nframes] = (struct fx_window_frame){ .object = object, .addr = addr };
	w->frame_hash[pos] = (uint32_t)w->nframes + 1;
	return (uint32_t)w->nframes++;
nomem:
	errno = ENOMEM;
	return FX_NONE;
}

static uint32_t intern_node(struct fx_window *w, uint32_t parent, uint32_t frame)
{
	size_t pos;

	if ((w->nstacks + 1) * 2 > w->stack_hash_cap &&
	    rehash(&w->stack_hash, &w->stack_hash_cap,
		   w->stack_hash_cap ? w->stack_hash_cap * 2 : 1024, w->nstacks, stack_hash_at,
		   w) < 0)
		goto nomem;
	pos = stack_hash(parent, frame) & (w->stack_hash_cap - 1);
	while (w->stack_hash[pos]) {
		uint32_t i = w->stack_hash[pos] - 1;

		if (w->stacks[i].parent == parent && w->stacks[i].frame == frame)
			return i;
		pos = (pos + 1) & (w->stack_hash_cap - 1);
	}
	if (w->max_stacks && w->nstacks >= w->max_stacks) {
		errno = ENOSPC;
		return FX_NONE;
	}
	if (fx_grow(&w->stacks, &w->stacks_cap, w->nstacks + 1, sizeof(*w->stacks)) < 0)
		goto nomem;
	w->stacks[w->nstacks] = (struct fx_window_stack){ .parent = parent, .frame = frame };
	w->stack_hash[pos] = (uint32_t)w->nstacks + 1;
	return (uint32_t)w->nstacks++;
nomem:
	errno = ENOMEM;
	return FX_NONE;
}

uint32_t fx_window_intern_stack(struct fx_window *w, const struct fx_window_frame *frames, size_t n)
{
	uint32_t node = FX_NONE;

	for (size_t i = 0; i < n; i++) {
		uint32_t f = fx_window_intern_frame(w, frames[i].object, frames[i].addr);

		if (f == FX_NONE)
			return FX_NONE;
		node = intern_node(w, node, f);
		if (node == FX_NONE)
			return FX_NONE;
	}
	return node;
}

int fx_window_add_sample(struct fx_window *w, uint64_t time_ns, uint32_t pid, uint32_t tid,
			 uint32_t stack)
{
	if (fx_grow(&w->samples, &w->samples_cap, w->nsamples + 1, sizeof(*w->samples)) < 0)
		return -ENOMEM;
	w->samples[w->nsamples++] = (struct fx_window_sample){
		.time_ns = time_ns, .pid = pid, .tid = tid, .stack = stack
	};
	w->counters.samples++;
	return 0;
}

/* SPDX-License-Identifier: MIT */
#include "fxagent/arena.h"

#include <errno.h>
#include <stdalign.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

struct fx_arena_chunk {
	struct fx_arena_chunk *next;
	size_t used, cap;
	max_align_t data[];
};

void fx_arena_init(struct fx_arena *a, size_t max_bytes)
{
	a->head = NULL;
	a->bytes = 0;
	a->max_bytes = max_bytes;
}

/* @size bytes at a multiple of @align (a power of two) in the current chunk,
 * else at the start of a new one. */
static void *take(struct fx_arena *a, size_t size, size_t align)
{
	struct fx_arena_chunk *c = a->head;
	size_t cap, total;

	if (c) {
		size_t off = (c->used + align - 1) & ~(align - 1);

		if (off <= c->cap && c->cap - off >= size) {
			c->used = off + size;
			return (char *)c->data + off;
		}
	}
	/* Each chunk about as large as all before it: few chunks for a large
	 * arena, little memory for a small one. */
	cap = a->bytes < FX_ARENA_FIRST	  ? FX_ARENA_FIRST
	      : a->bytes < FX_ARENA_CHUNK ? a->bytes
					  : FX_ARENA_CHUNK;
	if (size > cap)
		cap = size;
	if (cap > SIZE_MAX - sizeof(*c)) {
		errno = ENOMEM;
		return NULL;
	}
	total = sizeof(*c) + cap;
	if (a->max_bytes && (a->bytes > a->max_bytes || total > a->max_bytes - a->bytes)) {
		errno = E2BIG;
		return NULL;
	}
	c = malloc(total);
	if (!c) {
		errno = ENOMEM;
		return NULL;
	}
	/* The rest of the old chunk is given up when a piece does not fit. */
	c->next = a->head;
	c->cap = cap;
	c->used = size;
	a->head = c;
	a->bytes += total;
	return c->data;
}

void *fx_arena_alloc(struct fx_arena *a, size_t size)
{
	return take(a, size, alignof(max_align_t));
}

char *fx_arena_strndup(struct fx_arena *a, const char *s, size_t len)
{
	char *p;

	if (len == SIZE_MAX) {
		errno = ENOMEM;
		return NULL;
	}
	p = take(a, len + 1, 1);
	if (!p)
		return NULL;
	memcpy(p, s, len);
	p[len] = '\0';
	return p;
}

void fx_arena_free(struct fx_arena *a)
{
	struct fx_arena_chunk *c = a->head, *next;

	while (c) {
		next = c->next;
		free(c);
		c = next;
	}
	a->head = NULL;
	a->bytes = 0;
}

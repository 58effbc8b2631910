/* SPDX-License-Identifier: MIT */
/* arena: a bump allocator for many small pieces freed together (the names
 * of a symbol table, the results of a batch).
 *
 * Memory comes from malloc in chunks that grow with the arena, from
 * FX_ARENA_FIRST bytes to FX_ARENA_CHUNK (a larger piece gets a chunk of its
 * own): an arena holding a few pieces costs about a kilobyte, not a whole
 * chunk (the symbolizer keeps two per object, hundreds of objects). A
 * pointer handed out stays valid, and its bytes as written, until
 * fx_arena_free(); pieces are never moved. An optional cap
 * bounds the bytes taken from malloc. Not thread-safe.
 */
#ifndef FXAGENT_ARENA_H
#define FXAGENT_ARENA_H

#include <stddef.h>

#define FX_ARENA_CHUNK ((size_t)64 * 1024)
#define FX_ARENA_FIRST ((size_t)1024)

struct fx_arena_chunk;

/* A zeroed struct fx_arena is an empty arena with no cap. */
struct fx_arena {
	struct fx_arena_chunk *head; /* the chunk being filled; older ones follow */
	size_t bytes;		     /* taken from malloc, chunk headers included */
	size_t max_bytes;	     /* cap on bytes; 0 = none */
};

/* An empty arena that takes at most @max_bytes from malloc (0: no cap).
 * Cannot fail: memory is taken on first use. */
void fx_arena_init(struct fx_arena *a, size_t max_bytes);

/* @size bytes (uninitialized) aligned for any type. Returns NULL with errno
 * E2BIG when the cap would be passed, ENOMEM when malloc fails. */
void *fx_arena_alloc(struct fx_arena *a, size_t size);

/* A copy of the @len bytes at @s with a NUL after them (no alignment: a
 * string). NULL as fx_arena_alloc(). */
char *fx_arena_strndup(struct fx_arena *a, const char *s, size_t len);

/* Frees every piece at once: all pointers handed out are invalid. The
 * arena is empty afterwards, with its cap, and can be used again. */
void fx_arena_free(struct fx_arena *a);

/* Bytes the arena has taken from malloc. */
static inline size_t fx_arena_bytes(const struct fx_arena *a)
{
	return a->bytes;
}

#endif

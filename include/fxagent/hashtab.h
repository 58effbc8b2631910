/* SPDX-License-Identifier: MIT */
/* hashtab: the agent's one hash table, an index from keys to positions in
 * the caller's own array.
 *
 * Open addressing with linear probing over a power-of-two array of slots; a
 * slot holds an index + 1, 0 is empty. The table holds no keys: they stay in
 * the caller's array, and the table reads them back through callbacks, @eq
 * on look-up and @hash_at when it grows or removes. Reserve before adding:
 * the capacity stays at least twice the count, so every probe ends at an
 * empty slot. Indexes run from 0 to UINT32_MAX - 1. Not thread-safe.
 *
 * A look-up that may add, where storing the entry can still fail:
 *
 *	if (fx_hashtab_reserve(&h, n + 1, hash_at, v) < 0)
 *		return -ENOMEM;
 *	pos = fx_hashtab_probe(&h, hash, eq, v, &key);
 *	if (fx_hashtab_at(&h, pos) != FX_HASHTAB_NONE)
 *		return fx_hashtab_at(&h, pos);	// found
 *	... store the entry at v[n], or return the error ...
 *	fx_hashtab_put(&h, pos, n);
 *
 * fx_hashtab_intern() does all of that when nothing can fail in between.
 * The probe functions are inline so that a constant @eq inlines too.
 */
#ifndef FXAGENT_HASHTAB_H
#define FXAGENT_HASHTAB_H

#include <assert.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define FX_HASHTAB_NONE UINT32_MAX

struct fx_hashtab {
	uint32_t *slots; /* index + 1; 0 = empty */
	size_t cap;	 /* 0 (nothing allocated yet) or a power of two */
	size_t count;	 /* slots in use */
};

/* The hash of the key at index @idx of the caller's array @ctx. */
typedef uint64_t (*fx_hashtab_hash_fn)(const void *ctx, uint32_t idx);
/* Whether the key at index @idx of @ctx equals @key. */
typedef bool (*fx_hashtab_eq_fn)(const void *ctx, uint32_t idx, const void *key);

/* A zeroed struct fx_hashtab is an empty table: memory is taken on first
 * reserve. */

/* fx_hashtab_reserve()'s growth: call that instead. */
int fx_hashtab_grow(struct fx_hashtab *h, size_t count, fx_hashtab_hash_fn hash_at,
		    const void *ctx);

/* Makes room for @count entries in all, growing (and rehashing the entries
 * through @hash_at over @ctx) when @count is over half the capacity.
 * Returns 0, or -ENOMEM with the table unchanged. Inline: it is called for
 * every key interned, and grows rarely. */
static inline int fx_hashtab_reserve(struct fx_hashtab *h, size_t count, fx_hashtab_hash_fn hash_at,
				     const void *ctx)
{
	/* An empty table (cap 0) grows for any @count > 0. */
	if (count && count <= h->cap / 2)
		return 0;
	return fx_hashtab_grow(h, count, hash_at, ctx);
}

/* Empties the table, keeping its memory. */
void fx_hashtab_reset(struct fx_hashtab *h);
/* Frees the table's memory; it is then empty and can be used again. */
void fx_hashtab_free(struct fx_hashtab *h);

/* The slot of the key @key with hash @hash: the slot holding its index, or
 * else the empty slot where it would go. The table must have been reserved
 * (cap > 0). */
static inline size_t fx_hashtab_probe(const struct fx_hashtab *h, uint64_t hash,
				      fx_hashtab_eq_fn eq, const void *ctx, const void *key)
{
	const uint32_t *slots = h->slots;
	size_t mask = h->cap - 1, pos = (size_t)hash & mask;

	assert(h->cap && !(h->cap & mask));
	while (slots[pos] && !eq(ctx, slots[pos] - 1, key))
		pos = (pos + 1) & mask;
	return pos;
}

/* The index in slot @pos, or FX_HASHTAB_NONE for an empty slot. */
static inline uint32_t fx_hashtab_at(const struct fx_hashtab *h, size_t pos)
{
	return h->slots[pos] ? h->slots[pos] - 1 : FX_HASHTAB_NONE;
}

/* Stores @idx in the empty slot @pos that fx_hashtab_probe() returned, with
 * no change to the table in between. */
static inline void fx_hashtab_put(struct fx_hashtab *h, size_t pos, uint32_t idx)
{
	assert(pos < h->cap && !h->slots[pos] && idx != FX_HASHTAB_NONE);
	h->slots[pos] = idx + 1;
	h->count++;
}

/* The index of @key, or FX_HASHTAB_NONE. Any table, reserved or not. */
static inline uint32_t fx_hashtab_find(const struct fx_hashtab *h, uint64_t hash,
				       fx_hashtab_eq_fn eq, const void *ctx, const void *key)
{
	if (!h->cap)
		return FX_HASHTAB_NONE;
	return fx_hashtab_at(h, fx_hashtab_probe(h, hash, eq, ctx, key));
}

/* Finds @key, or adds @idx as its index (the caller stores the key at @idx
 * right after, or before: @eq is not called with @idx). Returns the index
 * found, @idx when it was added, or FX_HASHTAB_NONE when memory ran out. */
static inline uint32_t fx_hashtab_intern(struct fx_hashtab *h, uint64_t hash, const void *key,
					 uint32_t idx, fx_hashtab_hash_fn hash_at,
					 fx_hashtab_eq_fn eq, const void *ctx)
{
	size_t pos;

	if (fx_hashtab_reserve(h, h->count + 1, hash_at, ctx) < 0)
		return FX_HASHTAB_NONE;
	pos = fx_hashtab_probe(h, hash, eq, ctx, key);
	if (h->slots[pos])
		return h->slots[pos] - 1;
	fx_hashtab_put(h, pos, idx);
	return idx;
}

/* Adds @idx under @hash without looking for an equal key (the caller knows
 * there is none), after a reserve. */
void fx_hashtab_insert(struct fx_hashtab *h, uint64_t hash, uint32_t idx);

/* Removes @idx, stored under @hash, from the table (shifting back the
 * entries after it; their hashes read through @hash_at over @ctx, which must
 * still hold their keys). Returns 0, or -ENOENT when @idx is not there. */
int fx_hashtab_remove(struct fx_hashtab *h, uint64_t hash, uint32_t idx, fx_hashtab_hash_fn hash_at,
		      const void *ctx);

/* The entry @from, stored under @hash, is now at index @to of the caller's
 * array (moved into a hole, say): updates its slot. Returns 0, or -ENOENT
 * when @from is not there. */
int fx_hashtab_renumber(struct fx_hashtab *h, uint64_t hash, uint32_t from, uint32_t to);

/* Bytes of memory the table holds. */
static inline size_t fx_hashtab_bytes(const struct fx_hashtab *h)
{
	return h->cap * sizeof(*h->slots);
}

#endif

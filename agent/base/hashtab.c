/* SPDX-License-Identifier: MIT */
#include "fxagent/hashtab.h"

#include <assert.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* The capacity of a table's first allocation. */
#define MIN_CAP 64

int fx_hashtab_grow(struct fx_hashtab *h, size_t count, fx_hashtab_hash_fn hash_at, const void *ctx)
{
	size_t ncap = h->cap ? h->cap : MIN_CAP;
	uint32_t *slots;

	/* Keep the load factor at or under 1/2. */
	if (h->cap && count <= h->cap / 2)
		return 0;
	while (count > ncap / 2) {
		if (ncap > SIZE_MAX / 2 / sizeof(*slots))
			return -ENOMEM;
		ncap *= 2;
	}
	slots = calloc(ncap, sizeof(*slots));
	if (!slots)
		return -ENOMEM;
	for (size_t i = 0; i < h->cap; i++) {
		size_t pos;

		if (!h->slots[i])
			continue;
		pos = (size_t)hash_at(ctx, h->slots[i] - 1) & (ncap - 1);
		while (slots[pos])
			pos = (pos + 1) & (ncap - 1);
		slots[pos] = h->slots[i];
	}
	free(h->slots);
	h->slots = slots;
	h->cap = ncap;
	return 0;
}

void fx_hashtab_reset(struct fx_hashtab *h)
{
	if (h->slots)
		memset(h->slots, 0, h->cap * sizeof(*h->slots));
	h->count = 0;
}

void fx_hashtab_free(struct fx_hashtab *h)
{
	free(h->slots);
	h->slots = NULL;
	h->cap = 0;
	h->count = 0;
}

void fx_hashtab_insert(struct fx_hashtab *h, uint64_t hash, uint32_t idx)
{
	size_t mask = h->cap - 1, pos = (size_t)hash & mask;

	/* After a reserve for one more: the table stays at most half full. */
	assert(h->cap && h->count + 1 <= h->cap / 2);
	while (h->slots[pos])
		pos = (pos + 1) & mask;
	fx_hashtab_put(h, pos, idx);
}

/* The slot holding @idx, stored under @hash, or SIZE_MAX. */
static size_t slot_of(const struct fx_hashtab *h, uint64_t hash, uint32_t idx)
{
	size_t mask = h->cap - 1, pos;

	if (!h->cap)
		return SIZE_MAX;
	for (pos = (size_t)hash & mask; h->slots[pos]; pos = (pos + 1) & mask)
		if (h->slots[pos] == idx + 1)
			return pos;
	return SIZE_MAX;
}

int fx_hashtab_remove(struct fx_hashtab *h, uint64_t hash, uint32_t idx, fx_hashtab_hash_fn hash_at,
		      const void *ctx)
{
	size_t hole = slot_of(h, hash, idx), mask = h->cap - 1;

	if (hole == SIZE_MAX)
		return -ENOENT;
	/* Backward shift: an entry later in the run moves into the hole when
	 * the hole lies between its home slot and where it is, so that every
	 * probe still finds it before an empty slot. No tombstones. */
	for (size_t pos = (hole + 1) & mask; h->slots[pos]; pos = (pos + 1) & mask) {
		size_t home = (size_t)hash_at(ctx, h->slots[pos] - 1) & mask;

		if (((pos - home) & mask) >= ((pos - hole) & mask)) {
			h->slots[hole] = h->slots[pos];
			hole = pos;
		}
	}
	h->slots[hole] = 0;
	h->count--;
	return 0;
}

int fx_hashtab_renumber(struct fx_hashtab *h, uint64_t hash, uint32_t from, uint32_t to)
{
	size_t pos = slot_of(h, hash, from);

	if (pos == SIZE_MAX)
		return -ENOENT;
	h->slots[pos] = to + 1;
	return 0;
}

/* SPDX-License-Identifier: MIT */
/* search: the one binary search of the agent's sorted tables (symbols,
 * address ranges, mappings), all keyed by a uint64_t start address. */
#ifndef FXAGENT_SEARCH_H
#define FXAGENT_SEARCH_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* The index of the last of the @n elements of @size bytes at @base whose
 * uint64_t key at byte @key_off is <= @key, the elements sorted by that key;
 * SIZE_MAX when none is (n == 0, or every key is above @key). */
static inline size_t fx_search_last_le(const void *base, size_t n, size_t size, size_t key_off,
				       uint64_t key)
{
	const unsigned char *b = base;
	size_t lo = 0, hi = n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		uint64_t k;

		memcpy(&k, b + mid * size + key_off, sizeof(k));
		if (k <= key)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo ? lo - 1 : SIZE_MAX;
}

/* The same over a sorted array of 4-byte keys (compact tables). */
static inline size_t fx_search_last_le_u32(const uint32_t *v, size_t n, uint32_t key)
{
	size_t lo = 0, hi = n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (v[mid] <= key)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo ? lo - 1 : SIZE_MAX;
}

/* fx_search_last_le over the array @arr of @n structs by their uint64_t
 * member @field. */
#define FX_SEARCH_LAST_LE(arr, n, field, key)                                                      \
	fx_search_last_le((arr), (n), sizeof(*(arr)), offsetof(__typeof__(*(arr)), field), (key))

#endif

/* SPDX-License-Identifier: MIT */
/* util: the two helpers every table of the agent uses. */
#ifndef FXAGENT_UTIL_H
#define FXAGENT_UTIL_H

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>

/* A 64-bit finalizer (murmur3's): spreads keys over power-of-two tables. */
static inline uint64_t fx_mix64(uint64_t x)
{
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdULL;
	x ^= x >> 33;
	x *= 0xc4ceb9fe1a85ec53ULL;
	x ^= x >> 33;
	return x;
}

/* Grows the array *@arr (a pointer to the array pointer) to hold @need
 * elements of @elem bytes, doubling. Returns 0 or -ENOMEM (*@arr unchanged). */
static inline int fx_grow(void *arr, size_t *cap, size_t need, size_t elem)
{
	void **p = arr;
	size_t ncap;
	void *np;

	if (need <= *cap)
		return 0;
	ncap = *cap ? *cap : 64;
	while (ncap < need) {
		if (ncap > SIZE_MAX / 2)
			return -ENOMEM;
		ncap *= 2;
	}
	if (ncap > SIZE_MAX / elem)
		return -ENOMEM;
	np = realloc(*p, ncap * elem);
	if (!np)
		return -ENOMEM;
	*p = np;
	*cap = ncap;
	return 0;
}

#endif

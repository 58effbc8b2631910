/* SPDX-License-Identifier: MIT */
/* Shared by the fuzz targets: the libFuzzer entry point and a check that
 * stops the run with a message (libFuzzer then saves the input). */
#ifndef FX_FUZZ_H
#define FX_FUZZ_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Not assert(): it must hold in release builds (the replay tests) too. */
#define FUZZ_CHECK(cond, ...)                                                                      \
	do {                                                                                       \
		if (!(cond)) {                                                                     \
			fprintf(stderr, "%s:%d: contract broken: %s: ", __FILE__, __LINE__,        \
				#cond);                                                            \
			fprintf(stderr, __VA_ARGS__);                                              \
			fputc('\n', stderr);                                                       \
			abort();                                                                   \
		}                                                                                  \
	} while (0)

/* Little-endian reads from the input, zero past its end. */
struct fuzz_in {
	const uint8_t *p;
	size_t n;
};

static inline uint64_t fuzz_take(struct fuzz_in *in, unsigned bytes)
{
	uint64_t v = 0;
	unsigned i;

	for (i = 0; i < bytes; i++) {
		if (in->n) {
			v |= (uint64_t)in->p[0] << (8 * i);
			in->p++;
			in->n--;
		}
	}
	return v;
}

static inline int fuzz_cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* The readers' address lists: byte 0 says how many (low 4 bits, 0 to 15)
 * 8-byte little-endian addresses follow; into @addrs (15), sorted. Returns
 * the bytes they took, or 0 when the input is too short. */
static inline size_t fuzz_addrs(const uint8_t *data, size_t size, uint64_t addrs[15], size_t *n)
{
	struct fuzz_in in = { data + 1, size ? size - 1 : 0 };

	*n = size ? (data[0] & 15) : 0;
	if (size < 1 + *n * 8)
		return 0;
	for (size_t i = 0; i < *n; i++)
		addrs[i] = fuzz_take(&in, 8);
	qsort(addrs, *n, sizeof(addrs[0]), fuzz_cmp_u64);
	return 1 + *n * 8;
}

#endif

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

#endif

/* SPDX-License-Identifier: MIT */
/* Shared bits of the test workloads: argument parsing, a deadline clock and a
 * fixed unit of CPU work that the optimizer cannot remove or fold.
 *
 * A workload splits its CPU between functions by the amount of work each does
 * per iteration, never by timing, so the split is the same on any machine.
 */
#ifndef FX_WORKLOAD_H
#define FX_WORKLOAD_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static inline double wl_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* argv[1]: seconds to run (a positive number, fractions allowed). */
static inline double wl_seconds(int argc, char **argv, const char *usage)
{
	char *end = NULL;
	double s;

	if (argc < 2) {
		fprintf(stderr, "usage: %s %s\n", argv[0], usage);
		exit(2);
	}
	s = strtod(argv[1], &end);
	if (end == argv[1] || *end != '\0' || !(s > 0) || s > 86400) {
		fprintf(stderr, "%s: bad duration '%s'\n", argv[0], argv[1]);
		exit(2);
	}
	return s;
}

/* Results go here so that no work is dead. */
extern volatile uint64_t wl_sink;

/* Every spinning function calls this once: a call makes it a non-leaf, and
 * GCC 12 at -O2 gives only non-leaf functions a frame pointer
 * (-mno-omit-leaf-frame-pointer notwithstanding). Without one, a frame-pointer
 * walk from inside the function skips its caller. */
__attribute__((noinline, unused)) static void wl_touch(uint64_t x)
{
	wl_sink = x;
}

/* One step of a 64-bit LCG; the empty asm keeps every step a real, dependent
 * multiply-add, so n steps cost n times one step. */
#define WL_SPIN(x, n, add)                                                                         \
	do {                                                                                       \
		for (uint64_t wl_i_ = 0; wl_i_ < (n); wl_i_++) {                                   \
			(x) = (x)*6364136223846793005ULL + (add);                                  \
			__asm__ volatile("" : "+r"(x));                                            \
		}                                                                                  \
		wl_touch(x);                                                                       \
	} while (0)

#endif

/* SPDX-License-Identifier: MIT */
/* fx-bench-work: CPU-bound work with stacks through libc, for overhead
 * benchmarks. Sorts small arrays with qsort (libc, no frame pointers) for
 * argv[1] seconds and prints "ops N" (sorts done), so a profiler's cost shows
 * as fewer ops in the same time. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

__attribute__((noinline)) static int cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return (x > y) - (x < y);
}

__attribute__((noinline)) static void sort_one(uint32_t *v, size_t n, uint32_t *seed)
{
	for (size_t i = 0; i < n; i++) {
		*seed = *seed * 1664525u + 1013904223u;
		v[i] = *seed;
	}
	qsort(v, n, sizeof(*v), cmp_u32);
}

int main(int argc, char **argv)
{
	double secs = argc > 1 ? atof(argv[1]) : 5, end;
	uint32_t v[1000], seed = 1;
	unsigned long long ops = 0;

	if (!(secs > 0)) {
		fprintf(stderr, "usage: %s SECONDS\n", argv[0]);
		return 2;
	}
	end = now() + secs;
	while (now() < end) {
		for (int i = 0; i < 16; i++)
			sort_one(v, 1000, &seed);
		ops += 16;
	}
	printf("ops %llu\n", ops);
	return 0;
}

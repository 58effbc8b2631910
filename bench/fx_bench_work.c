/* SPDX-License-Identifier: MIT */
/* fx-bench-work SECONDS [PATHS]: CPU-bound work with stacks through libc,
 * for overhead benchmarks. Sorts small arrays with qsort (libc, no frame
 * pointers) for SECONDS and prints "ops N" (sorts done), so a profiler's cost
 * shows as fewer ops in the same time. With PATHS (a power of two up to
 * 65536), each sort is reached through one of PATHS call paths in turn (a
 * chain of log2(PATHS) walk0/walk1 frames), so a profile holds about PATHS
 * times as many distinct stacks for the same work. */
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

/* noipa: two functions with the same body would be folded into one (and
 * the paths with them); the result used after the call keeps each frame on
 * the stack (no tail call). */
__attribute__((noipa)) static unsigned walk1(unsigned depth, unsigned bits, uint32_t *v,
					     uint32_t *seed);

__attribute__((noipa)) static unsigned walk0(unsigned depth, unsigned bits, uint32_t *v,
					     uint32_t *seed)
{
	if (!depth) {
		sort_one(v, 1000, seed);
		return v[0] & 1;
	}
	return (bits & 1 ? walk1 : walk0)(depth - 1, bits >> 1, v, seed) + 1;
}

__attribute__((noipa)) static unsigned walk1(unsigned depth, unsigned bits, uint32_t *v,
					     uint32_t *seed)
{
	if (!depth) {
		sort_one(v, 1000, seed);
		return v[999] & 1;
	}
	return (bits & 1 ? walk1 : walk0)(depth - 1, bits >> 1, v, seed) + 2;
}

int main(int argc, char **argv)
{
	char *e1 = NULL, *e2 = NULL;
	double secs = argc > 1 ? strtod(argv[1], &e1) : 5, end;
	unsigned long paths = argc > 2 ? strtoul(argv[2], &e2, 10) : 1;
	uint32_t v[1000], seed = 1;
	unsigned long long ops = 0;
	unsigned depth = 0, bits = 0;
	volatile unsigned sink = 0;

	if ((e1 && (e1 == argv[1] || *e1)) || (e2 && (e2 == argv[2] || *e2)) || !(secs > 0) ||
	    argc > 3 || paths < 1 || paths > 65536 || (paths & (paths - 1))) {
		fprintf(stderr, "usage: %s SECONDS [PATHS]\n", argv[0]);
		return 2;
	}
	while ((1ul << depth) < paths)
		depth++;
	end = now() + secs;
	while (now() < end) {
		for (int i = 0; i < 16; i++) {
			if (depth)
				sink += walk0(depth, bits++, v, &seed);
			else
				sort_one(v, 1000, &seed);
		}
		ops += 16;
	}
	printf("ops %llu\n", ops);
	return 0;
}

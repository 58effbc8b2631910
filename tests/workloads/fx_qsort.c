/* SPDX-License-Identifier: MIT */
/* fx-qsort: nearly all of its CPU in cmp_hot, the comparison callback of libc's
 * qsort, which sort_batch calls from main. Debian's libc has no frame pointers,
 * so a frame-pointer walk from cmp_hot stops in qsort's frames and loses
 * sort_batch and main; a DWARF walk keeps the whole path. */
#include "workload.h"

#define N 4096

volatile uint64_t wl_sink;
static uint32_t keys[N];

/* Real work per compare, so that qsort's own code is a small part of the time. */
__attribute__((noinline, noclone)) static int cmp_hot(const void *pa, const void *pb)
{
	uint32_t a = *(const uint32_t *)pa, b = *(const uint32_t *)pb;
	uint64_t x = a ^ ((uint64_t)b << 32);

	WL_SPIN(x, 300, 1442695040888963407ULL);
	return (a > b) - (a < b);
}

__attribute__((noinline, noclone)) static void sort_batch(uint64_t seed)
{
	for (size_t i = 0; i < N; i++) {
		seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
		keys[i] = (uint32_t)(seed >> 32);
	}
	qsort(keys, N, sizeof(keys[0]), cmp_hot);
	wl_sink = keys[N / 2];
}

int main(int argc, char **argv)
{
	double end = wl_now() + wl_seconds(argc, argv, "SECONDS");
	uint64_t seed = 1;

	while (wl_now() < end)
		sort_batch(seed++);
	return 0;
}

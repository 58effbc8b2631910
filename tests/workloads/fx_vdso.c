/* SPDX-License-Identifier: MIT */
/* fx-vdso: nearly all of its time in clock_gettime, which runs in the vDSO
 * (no file on disk), called from a named function under main. */
#include "workload.h"

volatile uint64_t wl_sink;

__attribute__((noinline, noclone)) static uint64_t read_clocks(uint64_t n)
{
	struct timespec ts;
	uint64_t sum = 0;

	for (uint64_t i = 0; i < n; i++) {
		clock_gettime(CLOCK_MONOTONIC, &ts);
		sum += (uint64_t)ts.tv_nsec;
	}
	wl_touch(sum);
	return sum;
}

int main(int argc, char **argv)
{
	double end = wl_now() + wl_seconds(argc, argv, "SECONDS");
	uint64_t x = 0;

	while (wl_now() < end)
		x += read_clocks(100000);
	wl_sink = x;
	return 0;
}

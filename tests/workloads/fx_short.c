/* SPDX-License-Identifier: MIT */
/* fx-short: a short-lived process. Burns MILLISECONDS of its own CPU time in
 * short_burn and exits; run hundreds of them in a row to test that a profiler
 * attributes processes that are gone by the time it symbolizes. */
#include <errno.h>

#include "workload.h"

volatile uint64_t wl_sink;

static double cpu_seconds(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

__attribute__((noinline)) static uint64_t short_burn(double seconds)
{
	double end = cpu_seconds() + seconds;
	uint64_t x = 1;

	/* Chunks of ~0.1 ms between clock reads keep the clock's share small. */
	while (cpu_seconds() < end)
		WL_SPIN(x, 50000, 1442695040888963407ULL);
	return x;
}

int main(int argc, char **argv)
{
	char *end = NULL;
	long ms;

	if (argc < 2) {
		fprintf(stderr, "usage: %s MILLISECONDS\n", argv[0]);
		return 2;
	}
	errno = 0;
	ms = strtol(argv[1], &end, 10);
	if (errno || end == argv[1] || *end != '\0' || ms <= 0 || ms > 60000) {
		fprintf(stderr, "fx-short: bad milliseconds '%s'\n", argv[1]);
		return 2;
	}
	wl_sink = short_burn((double)ms / 1000.0);
	return 0;
}

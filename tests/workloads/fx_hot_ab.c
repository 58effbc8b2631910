/* SPDX-License-Identifier: MIT */
/* fx-hot-ab: about 70% of its CPU in hot_a and 30% in hot_b, both called from
 * main through hot_caller. Both do the same step, 7 against 3 units per round.
 * `fx-hot-ab SECONDS N`: hot_b runs N times a round (6: 7 against 18 units, a
 * "deploy" that more than doubled hot_b's share, for view --compare). */
#include "workload.h"

/* A round (10 units) takes about 0.2 ms: far shorter than the 10.1 ms
 * between samples at 99 Hz, so the samples cannot beat with the rounds
 * (1M-step units made a round about one sample period long, and the split
 * seen then drifted by 10 points from run to run). */
#define UNIT 20000ULL

volatile uint64_t wl_sink;

__attribute__((noinline)) static uint64_t hot_a(uint64_t x)
{
	WL_SPIN(x, 7 * UNIT, 1442695040888963407ULL);
	return x;
}

__attribute__((noinline)) static uint64_t hot_b(uint64_t x)
{
	WL_SPIN(x, 3 * UNIT, 1442695040888963409ULL);
	return x;
}

static int b_rounds = 1;

__attribute__((noinline)) static uint64_t hot_caller(uint64_t x)
{
	x = hot_a(x);
	for (int i = 0; i < b_rounds; i++)
		x = hot_b(x);
	return x;
}

int main(int argc, char **argv)
{
	double end = wl_now() + wl_seconds(argc, argv, "SECONDS");
	uint64_t x = 1;

	if (argc > 2)
		b_rounds = atoi(argv[2]) > 0 ? atoi(argv[2]) : 1;
	while (wl_now() < end)
		x = hot_caller(x);
	wl_sink = x;
	return 0;
}

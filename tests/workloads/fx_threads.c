/* SPDX-License-Identifier: MIT */
/* fx-threads: three worker threads named fx-worker-1..3, each busy in its own
 * function (work_one, work_two, work_three); the main thread only waits. */
#include <pthread.h>
#include <string.h>

#include "workload.h"

#define UNIT 1000000ULL

volatile uint64_t wl_sink;
static double deadline;

__attribute__((noinline)) static uint64_t work_one(uint64_t x)
{
	WL_SPIN(x, UNIT, 1442695040888963407ULL);
	return x;
}

__attribute__((noinline)) static uint64_t work_two(uint64_t x)
{
	WL_SPIN(x, UNIT, 1442695040888963409ULL);
	return x;
}

__attribute__((noinline)) static uint64_t work_three(uint64_t x)
{
	WL_SPIN(x, UNIT, 1442695040888963411ULL);
	return x;
}

struct worker {
	const char *name;
	uint64_t (*work)(uint64_t);
	pthread_t thread;
};

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	uint64_t x = 1;

	pthread_setname_np(pthread_self(), w->name);
	while (wl_now() < deadline)
		x = w->work(x);
	wl_sink = x;
	return NULL;
}

int main(int argc, char **argv)
{
	struct worker workers[] = {
		{ .name = "fx-worker-1", .work = work_one },
		{ .name = "fx-worker-2", .work = work_two },
		{ .name = "fx-worker-3", .work = work_three },
	};
	size_t n = sizeof(workers) / sizeof(workers[0]);
	int err;

	deadline = wl_now() + wl_seconds(argc, argv, "SECONDS");
	for (size_t i = 0; i < n; i++) {
		err = pthread_create(&workers[i].thread, NULL, worker_main, &workers[i]);
		if (err) {
			fprintf(stderr, "fx-threads: pthread_create: %s\n", strerror(err));
			return 1;
		}
	}
	for (size_t i = 0; i < n; i++)
		pthread_join(workers[i].thread, NULL);
	return 0;
}

/* SPDX-License-Identifier: MIT */
/* fx-manythreads SECONDS THREADS: THREADS threads (named mt-N), each burning
 * about 0.1 ms of CPU in thread_burn every second until SECONDS pass: a
 * process with thousands of threads, most of them asleep at any time. 2000
 * of them take a sixth of a CPU (0.16 measured), so that a machine of half
 * a CPU still has room for the agent that profiles them. */
#include <pthread.h>
#include <string.h>
#include <unistd.h>

#include "workload.h"

volatile uint64_t wl_sink;
static double deadline;

__attribute__((noinline, noclone)) static uint64_t thread_burn(uint64_t x)
{
	WL_SPIN(x, 50000ULL, 1442695040888963407ULL);
	return x;
}

static void *worker(void *arg)
{
	char name[16];
	uint64_t x = (uintptr_t)arg;

	snprintf(name, sizeof(name), "mt-%lu", (unsigned long)(uintptr_t)arg);
	pthread_setname_np(pthread_self(), name);
	while (wl_now() < deadline) {
		struct timespec ts = { 1, 0 };

		x = thread_burn(x);
		nanosleep(&ts, NULL);
	}
	wl_sink = x;
	return NULL;
}

int main(int argc, char **argv)
{
	pthread_attr_t attr;
	pthread_t *th;
	long n;

	deadline = wl_now() + wl_seconds(argc, argv, "SECONDS THREADS");
	n = argc > 2 ? strtol(argv[2], NULL, 10) : 0;
	if (n <= 0 || n > 32768) {
		fprintf(stderr, "fx-manythreads: bad thread count\n");
		return 2;
	}
	th = calloc((size_t)n, sizeof(*th));
	pthread_attr_init(&attr);
	pthread_attr_setstacksize(&attr, 64 * 1024);
	for (long i = 0; i < n; i++)
		if (pthread_create(&th[i], &attr, worker, (void *)(uintptr_t)i)) {
			fprintf(stderr, "fx-manythreads: thread %ld: cannot create\n", i);
			return 1;
		}
	printf("%ld\n", n);
	fflush(stdout);
	for (long i = 0; i < n; i++)
		pthread_join(th[i], NULL);
	free(th);
	return 0;
}

/* SPDX-License-Identifier: MIT */
/* fx-waits: threads that wait in known ways, timed by their own clocks.
 *
 *   fx-sleeper  works ~3 ms, then sleeps 7 ms in nanosleep (wait_sleep)
 *   fx-reader   works ~7 ms, then asks fx-writer for a byte and reads it
 *               from a pipe, which fx-writer fills 3 ms later (wait_read)
 *   fx-locker   takes a mutex that fx-holder keeps for 2 ms at a time,
 *               sleeping (wait_lock)
 *   fx-syncer   writes 4 KiB to a file in DIR and fsyncs it (wait_fsync)
 *
 * Built without frame pointers: their stacks go through libc's and only
 * DWARF unwinding walks them. It starts when a byte arrives on stdin, runs
 * SECONDS, and prints for each wait its calls and its off-CPU time: the wall
 * time spent in the call less the thread's CPU time in it, in nanoseconds
 * ("wait_sleep 700 2100000000").
 */
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <string.h>
#include <unistd.h>

#include "workload.h"

volatile uint64_t wl_sink;

static atomic_bool stop;
static int pipefd[2], askfd[2];
static int syncfd;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

struct tally {
	uint64_t calls, off_ns;
};

static struct tally t_sleep, t_read, t_lock, t_fsync;

static uint64_t ns(clockid_t c)
{
	struct timespec ts;

	clock_gettime(c, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

struct mark {
	uint64_t wall, cpu;
};

static struct mark mark_now(void)
{
	return (struct mark){ ns(CLOCK_MONOTONIC), ns(CLOCK_THREAD_CPUTIME_ID) };
}

static void tally_since(struct tally *t, struct mark m)
{
	struct mark e = mark_now();
	uint64_t wall = e.wall - m.wall, cpu = e.cpu - m.cpu;

	t->calls++;
	t->off_ns += wall > cpu ? wall - cpu : 0;
}

__attribute__((noinline)) static void work(uint64_t n)
{
	uint64_t x = n;

	WL_SPIN(x, n, 1);
}

__attribute__((noinline)) static void wait_sleep(void)
{
	struct timespec ts = { 0, 7000000 };
	struct mark m = mark_now();

	nanosleep(&ts, NULL);
	tally_since(&t_sleep, m);
}

__attribute__((noinline)) static void wait_read(void)
{
	char c;
	struct mark m = mark_now();

	/* The ask is timed too: it wakes fx-writer, which may take the CPU. */
	if (write(askfd[1], "?", 1) < 0)
		perror("fx-waits: write");
	if (read(pipefd[0], &c, 1) < 0)
		perror("fx-waits: read");
	tally_since(&t_read, m);
}

__attribute__((noinline)) static void wait_lock(void)
{
	struct mark m = mark_now();

	pthread_mutex_lock(&lock);
	tally_since(&t_lock, m);
	pthread_mutex_unlock(&lock);
}

__attribute__((noinline)) static void wait_fsync(void)
{
	struct mark m = mark_now();

	if (fsync(syncfd) < 0)
		perror("fx-waits: fsync");
	tally_since(&t_fsync, m);
}

/* Calibrated once: the spin count of about one millisecond here. */
static uint64_t per_ms;

static void *sleeper(void *arg)
{
	(void)arg;
	while (!atomic_load(&stop)) {
		work(3 * per_ms);
		wait_sleep();
	}
	return NULL;
}

static void *reader(void *arg)
{
	(void)arg;
	while (!atomic_load(&stop)) {
		work(7 * per_ms);
		wait_read();
	}
	return NULL;
}

static void *writer(void *arg)
{
	struct timespec ts = { 0, 3000000 };
	char c;

	(void)arg;
	while (read(askfd[0], &c, 1) == 1) {
		nanosleep(&ts, NULL);
		if (write(pipefd[1], "x", 1) < 0)
			perror("fx-waits: write");
	}
	return NULL;
}

static void *holder(void *arg)
{
	struct timespec hold = { 0, 2000000 }, gap = { 0, 1000000 };

	(void)arg;
	while (!atomic_load(&stop)) {
		pthread_mutex_lock(&lock);
		nanosleep(&hold, NULL);
		pthread_mutex_unlock(&lock);
		nanosleep(&gap, NULL);
	}
	return NULL;
}

static void *locker(void *arg)
{
	(void)arg;
	while (!atomic_load(&stop)) {
		wait_lock();
		work(per_ms / 2);
	}
	return NULL;
}

static void *syncer(void *arg)
{
	static char page[4096];

	(void)arg;
	while (!atomic_load(&stop)) {
		memset(page, (int)t_fsync.calls, sizeof(page));
		if (pwrite(syncfd, page, sizeof(page), 0) < 0)
			perror("fx-waits: pwrite");
		wait_fsync();
		work(per_ms);
	}
	return NULL;
}

static void calibrate(void)
{
	uint64_t n = 100000, t0 = ns(CLOCK_THREAD_CPUTIME_ID), dt;

	work(n);
	dt = ns(CLOCK_THREAD_CPUTIME_ID) - t0;
	per_ms = dt ? n * 1000000 / dt : n;
	if (per_ms < 1000)
		per_ms = 1000;
}

int main(int argc, char **argv)
{
	static void *(*const fns[])(void *) = { sleeper, reader, writer, holder, locker, syncer };
	static const char *const names[] = { "fx-sleeper", "fx-reader", "fx-writer",
					     "fx-holder",  "fx-locker", "fx-syncer" };
	pthread_t th[6];
	double secs = wl_seconds(argc, argv, "SECONDS DIR");
	char path[4096], go;
	struct timespec run;

	if (argc < 3) {
		fprintf(stderr, "usage: %s SECONDS DIR\n", argv[0]);
		return 2;
	}
	snprintf(path, sizeof(path), "%s/fx-waits.%d", argv[2], (int)getpid());
	syncfd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (syncfd < 0 || pipe(pipefd) < 0 || pipe(askfd) < 0) {
		perror("fx-waits: open or pipe");
		return 1;
	}
	unlink(path);
	calibrate();
	if (read(0, &go, 1) != 1)
		return 1;
	for (int i = 0; i < 6; i++) {
		if (pthread_create(&th[i], NULL, fns[i], NULL)) {
			fprintf(stderr, "fx-waits: cannot start a thread\n");
			return 1;
		}
		pthread_setname_np(th[i], names[i]);
	}
	run.tv_sec = (time_t)secs;
	run.tv_nsec = (long)((secs - (double)run.tv_sec) * 1e9);
	nanosleep(&run, NULL);
	atomic_store(&stop, true);
	pthread_join(th[1], NULL);
	close(askfd[1]); /* the writer's read ends */
	for (int i = 0; i < 6; i++)
		if (i != 1)
			pthread_join(th[i], NULL);
	printf("wait_sleep %llu %llu\n", (unsigned long long)t_sleep.calls,
	       (unsigned long long)t_sleep.off_ns);
	printf("wait_read %llu %llu\n", (unsigned long long)t_read.calls,
	       (unsigned long long)t_read.off_ns);
	printf("wait_lock %llu %llu\n", (unsigned long long)t_lock.calls,
	       (unsigned long long)t_lock.off_ns);
	printf("wait_fsync %llu %llu\n", (unsigned long long)t_fsync.calls,
	       (unsigned long long)t_fsync.off_ns);
	return 0;
}

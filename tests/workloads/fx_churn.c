/* SPDX-License-Identifier: MIT */
/* fx-churn SECONDS RATE: starts RATE short-lived processes per second for
 * SECONDS, each a fork and exec of this binary. A kid names itself
 * fx-churn-kid and burns about 2 ms in churn_burn; every other kid first
 * dlopen()s libfxplug.so (beside this binary) and spends the time in its
 * plug_hot instead. Kids are reaped as they end; at most 64 run at once.
 * Prints how many kids it started and the CPU seconds they used in all
 * (getrusage of the reaped children): the tests' reference for the share of
 * the kids' time spent in their 2 ms of work, which fork, exec and the
 * dynamic loader dilute by a machine-dependent amount. */
#include <dlfcn.h>
#include <limits.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "workload.h"

#define BURN_UNIT 20000ULL

volatile uint64_t wl_sink;

static double cpu_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

__attribute__((noinline, noclone)) static uint64_t churn_burn(double seconds)
{
	double end = cpu_now() + seconds;
	uint64_t x = 7;

	while (cpu_now() < end)
		WL_SPIN(x, BURN_UNIT, 1442695040888963407ULL);
	return x;
}

__attribute__((noinline, noclone)) static uint64_t churn_plugin(double seconds)
{
	char path[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", path, sizeof(path) - sizeof("libfxplug.so"));
	uint64_t (*hot)(uint64_t);
	double end = cpu_now() + seconds;
	uint64_t x = 3;
	char *slash;
	void *lib;

	if (n <= 0)
		return churn_burn(seconds);
	path[n] = '\0';
	slash = strrchr(path, '/');
	strcpy(slash + 1, "libfxplug.so");
	lib = dlopen(path, RTLD_NOW);
	hot = lib ? (uint64_t(*)(uint64_t))dlsym(lib, "plug_hot") : NULL;
	if (!hot)
		return churn_burn(seconds);
	while (cpu_now() < end)
		x = hot(x);
	return x;
}

static int kid(const char *which)
{
	/* The comm exec gave is the binary's name: the kids get their own. */
	prctl(PR_SET_NAME, "fx-churn-kid");
	wl_sink = strcmp(which, "plugin") == 0 ? churn_plugin(0.002) : churn_burn(0.002);
	return 0;
}

int main(int argc, char **argv)
{
	double end, next, period;
	unsigned long started = 0;
	unsigned running = 0;
	char self[PATH_MAX], *stop = NULL;
	ssize_t n;
	long rate;

	if (argc == 3 && strcmp(argv[1], "--kid") == 0)
		return kid(argv[2]);
	if (argc != 3) {
		fprintf(stderr, "usage: %s SECONDS RATE\n", argv[0]);
		return 2;
	}
	end = wl_now() + wl_seconds(argc, argv, "SECONDS RATE");
	rate = strtol(argv[2], &stop, 10);
	if (*stop || rate <= 0 || rate > 100000) {
		fprintf(stderr, "fx-churn: bad rate '%s'\n", argv[2]);
		return 2;
	}
	n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	if (n <= 0) {
		perror("fx-churn: /proc/self/exe");
		return 1;
	}
	self[n] = '\0';
	period = 1.0 / (double)rate;
	next = wl_now();
	while (wl_now() < end) {
		pid_t pid;

		while (running > 0 && waitpid(-1, NULL, running >= 64 ? 0 : WNOHANG) > 0)
			running--;
		if (wl_now() < next) {
			struct timespec ts = { 0, 200000 };

			nanosleep(&ts, NULL);
			continue;
		}
		next += period;
		pid = fork();
		if (pid == 0) {
			char *kid_argv[] = { self, "--kid", started % 2 ? "plugin" : "burn", NULL };

			execv(self, kid_argv);
			_exit(127);
		}
		if (pid > 0) {
			started++;
			running++;
		}
	}
	while (running > 0 && wait(NULL) > 0)
		running--;
	{
		struct rusage ru;
		double cpu = 0;

		if (getrusage(RUSAGE_CHILDREN, &ru) == 0)
			cpu = (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 +
			      (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6;
		printf("%lu %.3f\n", started, cpu);
	}
	return 0;
}

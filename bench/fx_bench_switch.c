/* SPDX-License-Identifier: MIT */
/* fx-bench-switch RATE SECONDS: about RATE context switches per second.
 *
 * Pairs of threads pass a byte back and forth through two pipes: each pass
 * blocks the sender in read until the byte comes back, two voluntary
 * switches per round trip. A pair paces itself to its share of RATE by
 * sleeping every 100 round trips. As many pairs as it takes (a pair does at
 * most ~40,000 round trips a second here): the bench counts the switches the
 * kernel made, from /proc, not these.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static double rate_per_pair, seconds;

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

struct pair {
	int ping[2], pong[2];
};

static void *echo(void *arg)
{
	struct pair *p = arg;
	char c;

	while (read(p->ping[0], &c, 1) == 1)
		if (write(p->pong[1], &c, 1) != 1)
			break;
	return NULL;
}

static void *drive(void *arg)
{
	struct pair *p = arg;
	double start = now(), end = start + seconds;
	long trips = 0;
	char c = 'x';

	while (now() < end) {
		for (int i = 0; i < 100; i++) {
			if (write(p->ping[1], &c, 1) != 1 || read(p->pong[0], &c, 1) != 1)
				return NULL;
		}
		trips += 100;
		/* two switches a round trip, paced to the pair's share */
		double ahead = (double)trips * 2 / rate_per_pair - (now() - start);

		if (ahead > 0) {
			struct timespec ts = { (time_t)ahead, (long)((ahead - (long)ahead) * 1e9) };

			nanosleep(&ts, NULL);
		}
	}
	close(p->ping[1]);
	return NULL;
}

int main(int argc, char **argv)
{
	double rate;
	int pairs;

	if (argc != 3 || (rate = atof(argv[1])) <= 0 || (seconds = atof(argv[2])) <= 0) {
		fprintf(stderr, "usage: %s RATE SECONDS\n", argv[0]);
		return 2;
	}
	pairs = (int)(rate / 40000) + 1;
	rate_per_pair = rate / pairs;
	pthread_t th[2 * 64];
	struct pair p[64];

	if (pairs > 64)
		pairs = 64;
	for (int i = 0; i < pairs; i++) {
		if (pipe(p[i].ping) || pipe(p[i].pong) ||
		    pthread_create(&th[2 * i], NULL, echo, &p[i]) ||
		    pthread_create(&th[2 * i + 1], NULL, drive, &p[i])) {
			perror("fx-bench-switch");
			return 1;
		}
	}
	for (int i = 0; i < 2 * pairs; i++)
		pthread_join(th[i], NULL);
	return 0;
}

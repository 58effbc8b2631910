/* SPDX-License-Identifier: MIT */
/* daemon: the long-running agent.
 *
 * Samples the whole system or the configured targets, cuts the stream into
 * windows aligned to the wall clock (a 60 s window starts at :00), and turns
 * each window into one chunk per target (processed profile, gzip) in the
 * output directory. The sampler thread never waits for symbolization or I/O:
 * at rotation it swaps in fresh windows and hands the closed ones to a
 * publisher thread. cgroup and systemd-unit targets are sampled by cgroup
 * events in the kernel; process and pid targets are filtered here. Targets
 * are resolved again at every rotation, so a restarted service (a new cgroup
 * directory) keeps being profiled.
 */
#ifndef FXAGENT_DAEMON_H
#define FXAGENT_DAEMON_H

#include <signal.h>
#include <stdint.h>

#include "fxagent/config.h"

struct fx_daemon_stats {
	uint64_t windows;      /* windows closed */
	uint64_t chunks;       /* chunks written */
	uint64_t chunk_errors; /* chunks that could not be written */
	uint64_t samples;
	/* Time the sampler thread spent rotating windows: wall clock (preemption
	 * included, on a busy machine) and the thread's own CPU time (the work). */
	uint64_t rotation_ns_max;
	uint64_t rotation_ns_sum;
	uint64_t rotation_cpu_ns_max;
	uint64_t rotation_cpu_ns_sum;
};

/* Runs until *@stop becomes non-zero (a signal handler sets it), then closes
 * and writes the partial window and returns 0; or returns -errno when it
 * cannot start (logged). @cfg must outlive the call. @stats may be NULL. */
int fx_daemon_run(const struct fx_config *cfg, volatile sig_atomic_t *stop,
		  struct fx_daemon_stats *stats);

#endif

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
 *
 * Under systemd it is a Type=notify service (service.h): READY=1 once the
 * perf events are open and the first window has started, STATUS= after each
 * window, WATCHDOG=1 from the sampler loop, STOPPING=1. A reload reads the
 * config again at once (RELOADING=1, then READY=1) and applies it at the end
 * of the open window: that window is cut there and written with the old
 * config; targets, window, labels, output, symbolization, upload and metrics
 * settings take effect from the next one. The perf events are opened again
 * only when the sampling settings changed. log.level applies at once.
 */
#ifndef FXAGENT_DAEMON_H
#define FXAGENT_DAEMON_H

#include <signal.h>
#include <stdint.h>

#include "fxagent/config.h"
#include "fxagent/pipeline.h"

struct fx_daemon_stats {
	struct fx_pipeline_stats pipeline; /* windows, chunks, samples, rotation times */
	uint64_t reloads;		   /* configs reloaded (applied or pending) */
};

struct fx_daemon_ctl {
	volatile sig_atomic_t *stop;   /* non-zero: write the partial window and return */
	volatile sig_atomic_t *reload; /* non-zero: reload (reset by the daemon); may be NULL */
	/* Reads the config again into @out (released with fx_config_release).
	 * Returns 0, or -errno with the reason logged (file:line:column). */
	int (*load)(void *ctx, struct fx_config *out);
	void *ctx;
};

/* Runs until *@ctl->stop becomes non-zero (a signal handler sets it), then
 * closes and writes the partial window and returns 0; or returns -errno when
 * it cannot start or go on (logged). @cfg must outlive the call; reloaded
 * configs are the daemon's. @stats may be NULL. */
int fx_daemon_run(const struct fx_config *cfg, const struct fx_daemon_ctl *ctl,
		  struct fx_daemon_stats *stats);

#endif

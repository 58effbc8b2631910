/* SPDX-License-Identifier: MIT */
/* service: what the agent tells its service manager, and what it may do.
 *
 * The sd_notify(3) messages of a Type=notify service (READY=1 once sampling
 * runs, STATUS= every window, RELOADING=1/READY=1 around a reload,
 * STOPPING=1, WATCHDOG=1) sent to $NOTIFY_SOCKET; without it they are no-ops.
 * And the capabilities check at start: an agent run as its own user with a
 * few capabilities says which ones it lacks and what that costs.
 */
#ifndef FXAGENT_SERVICE_H
#define FXAGENT_SERVICE_H

#include <stddef.h>
#include <stdint.h>

/* sd_notify(0, @state); errors are ignored (the manager may be gone). */
void fx_service_notify(const char *state);
void fx_service_notifyf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

struct fx_service_watchdog {
	uint64_t interval_ns; /* 0: the watchdog is off */
	uint64_t last_ns;     /* CLOCK_MONOTONIC of the last ping */
};

/* Reads WATCHDOG_USEC (and WATCHDOG_PID) through sd_watchdog_enabled(): pings
 * are due every half of it. */
void fx_service_watchdog_init(struct fx_service_watchdog *w);
/* Sends WATCHDOG=1 when one is due at @now_ns (CLOCK_MONOTONIC). Cheap: call
 * it from every turn of the main loop. */
void fx_service_watchdog_tick(struct fx_service_watchdog *w, uint64_t now_ns);

/* Capabilities (bit numbers of <linux/capability.h>) the agent uses; a bit
 * per capability, as capget(2) reports them. */
uint64_t fx_service_caps_wanted(void);
/* Writes into @buf what the capabilities missing from @effective cost, one
 * "CAP_X (what is lost)" per missing one, separated by "; ". Returns how many
 * are missing (0: @buf is ""). */
size_t fx_service_caps_explain(uint64_t effective, char *buf, size_t len);
/* Logs, once at start, which wanted capabilities this process lacks. Returns
 * the number missing, or -errno when capget(2) fails. */
int fx_service_check_caps(void);

#endif

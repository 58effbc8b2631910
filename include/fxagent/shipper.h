/* SPDX-License-Identifier: MIT */
/* shipper: the uploader thread between the spool and the collector.
 *
 * It takes the oldest pending chunk, sends it, and deletes it on a 2xx;
 * waits with exponential backoff and jitter (honouring Retry-After) on
 * failures, for as long as the chunk stays in the spool; moves a chunk the
 * collector refused (4xx) to rejected/, and a spool file that is not a
 * chunk of ours (fx_spool_open_chunk) to rejected/ without sending a byte.
 * It never blocks its callers: the publisher only adds files to the spool
 * and kicks it.
 */
#ifndef FXAGENT_SHIPPER_H
#define FXAGENT_SHIPPER_H

#include <stdbool.h>
#include <stdint.h>

#include "fxagent/config.h"
#include "fxagent/spool.h"

struct fx_shipper_stats {
	uint64_t uploaded;
	uint64_t retried;  /* failed tries that will be tried again */
	uint64_t rejected; /* by the collector */
	uint64_t refused;  /* spool files that failed fx_spool_open_chunk, never sent */
	uint64_t dropped;  /* by the spool's bounds */
	uint64_t pending;
	uint64_t spool_bytes;
};

struct fx_shipper;

/* Opens the spool of @cfg and starts the uploader thread (chunks left from an
 * earlier run go first, oldest first). @cfg must outlive the shipper.
 * Returns 0 or -errno (logged). */
int fx_shipper_start(const struct fx_config *cfg, const char *host, struct fx_shipper **out);

/* --check-upload: makes the uploader @cfg says (reading its credentials)
 * and asks the store once whether it accepts them (fx_upload_check).
 * Returns 0 with what it said in @msg, or -errno with why not. */
int fx_shipper_check_upload(const struct fx_config *cfg, const char *host, char *msg, size_t len);

/* The spool to write chunks into (fx_spool_path, then fx_spool_add). */
struct fx_spool *fx_shipper_spool(struct fx_shipper *s);

/* A chunk was added: wakes the thread if it waits for work (not if it waits
 * out a backoff). */
void fx_shipper_kick(struct fx_shipper *s);

/* Waits until the spool is empty or @timeout_ms passed. Returns true when
 * everything was uploaded (or rejected). */
bool fx_shipper_wait_empty(struct fx_shipper *s, uint64_t timeout_ms);

/* The agent is stopping: from now on a request starts only while the
 * collector answers, each cut to end by @deadline_ns (CLOCK_MONOTONIC), and
 * none after it; the request under way when it is called ends by its own
 * timeout. Chunks still come (the last window) and are sent on those terms.
 * An earlier deadline given before wins. */
void fx_shipper_begin_stop(struct fx_shipper *s, uint64_t deadline_ns);

/* Stops the thread, with fx_shipper_begin_stop(@deadline_ns) if not begun
 * (0: now), once what is pending is sent or the deadline or a silent
 * collector ends it; whatever is left stays in the spool for the next start.
 * Returns by the deadline, or by the end of the request under way when the
 * stop began. Frees @s. */
void fx_shipper_stop(struct fx_shipper *s, uint64_t deadline_ns);

void fx_shipper_get_stats(struct fx_shipper *s, struct fx_shipper_stats *out);

#endif

/* SPDX-License-Identifier: MIT */
/* debuginfod: debug files by build-id from debuginfod servers (libdebuginfod).
 *
 * Used by the symbolizer, between windows, never on the sampling path. What
 * keeps a slow or absent server from holding a window up:
 *  - a budget per batch (fx_debuginfod_begin_batch): once it is spent,
 *    fx_debuginfod_find() answers -EAGAIN without asking (ask again next
 *    batch);
 *  - a bound per request: the transfer is cut at the request's deadline or
 *    the budget's, whichever is first (libdebuginfod checks about once a
 *    second, so a request may run up to a second over);
 *  - one attempt per request (no retries within a batch).
 * The cache is libdebuginfod's, in a directory of the agent's (created 0700,
 * refused if others can write it), kept under a size by removing the least
 * recently used files after each download. A build-id the servers do not
 * have, or whose request was cut, is remembered on disk for retry_s and not
 * asked again before (libdebuginfod's cache_miss_s, which this sets).
 *
 * libdebuginfod 0.188 takes its servers, cache and limits from the
 * environment, read at each request: fx_debuginfod_setenv() sets it. Call it
 * before other threads start; a later call (a reload) only replaces the
 * values of variables the first call set, which never moves the environment
 * array other threads may be reading (glibc keeps replaced strings).
 */
#ifndef FXAGENT_DEBUGINFOD_H
#define FXAGENT_DEBUGINFOD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct fx_debuginfod_opts {
	const char *urls;	  /* space-separated servers; "": none; NULL: those of
				     DEBUGINFOD_URLS as the process started with it */
	const char *cache_dir;	  /* absolute; NULL: libdebuginfod's default (the user's) */
	uint64_t cache_max_bytes; /* 0: no bound */
	unsigned timeout_ms;	  /* one request, whole; 0: 10 s */
	unsigned budget_ms;	  /* per batch, all requests; 0: no bound */
	unsigned retry_s;	  /* a miss is not asked again for this long; 0: 600 */
};

struct fx_debuginfod_stats {
	uint64_t hits;	   /* debug files found: downloaded or in the cache */
	uint64_t misses;   /* no server has it (or a miss remembered) */
	uint64_t errors;   /* network errors, requests cut at their bound, bad files */
	uint64_t bytes;	   /* bytes downloaded */
	uint64_t deferred; /* not asked: the batch's budget was spent */
	uint64_t evicted;  /* cache files removed to stay under cache_max_bytes */
};

/* Sets DEBUGINFOD_URLS, _CACHE_PATH, _TIMEOUT, _MAXTIME, _MAXSIZE and
 * _RETRY_LIMIT from @o (see above for when). Returns 0 or -errno. */
int fx_debuginfod_setenv(const struct fx_debuginfod_opts *o);

/* A client for @o (copied), or NULL: no servers (@o->urls empty), or the
 * cache directory refused (logged once, with why), or ENOMEM. */
struct fx_debuginfod *fx_debuginfod_new(const struct fx_debuginfod_opts *o);
void fx_debuginfod_free(struct fx_debuginfod *d);

/* Starts a batch: the budget is whole again. */
void fx_debuginfod_begin_batch(struct fx_debuginfod *d);

/* The debug file of build-id @id (@len bytes). Returns a read-only fd of it
 * (the caller closes it) with its path in @path (@cap bytes), or -ENOENT
 * (no server has it), -EAGAIN (not asked: budget spent), or another -errno
 * (the request failed or was cut; not asked again for retry_s). */
int fx_debuginfod_find(struct fx_debuginfod *d, const uint8_t *id, size_t len, char *path,
		       size_t cap);

/* The agent is stopping: from now on every client asks nothing
 * (fx_debuginfod_find() answers -EAGAIN) and a request under way is cut
 * within about a second, so a stop keeps its bound. Any thread; for the
 * whole process, once. */
void fx_debuginfod_stop_all(void);

/* How long, in seconds, a miss or error is remembered (retry_s). */
unsigned fx_debuginfod_retry_s(const struct fx_debuginfod *d);

void fx_debuginfod_get_stats(const struct fx_debuginfod *d, struct fx_debuginfod_stats *out);

/* Removes the least recently used files (by mtime: set on every use) one
 * level down in the cache @cache_dir (libdebuginfod's directory per
 * build-id, the symbolizer's inflated/) until they hold @max_bytes or less;
 * a build-id directory left empty goes too. Adds the files removed to
 * *@evicted when not NULL. */
void fx_debuginfod_trim(const char *cache_dir, uint64_t max_bytes, uint64_t *evicted);

#endif

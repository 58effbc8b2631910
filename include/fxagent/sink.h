/* SPDX-License-Identifier: MIT */
/* sink: where the pipeline's chunks go.
 *
 * The publisher (pipeline.h) asks its sink where to write a chunk
 * (fx_sink_prepare), writes it there itself (fx_report_write: a temporary
 * beside the path, fsync, rename), and hands it over (fx_sink_commit). Kinds:
 *   file   one given path ("-": stdout), for `--once --output`;
 *   dir    one file per chunk in output.directory;
 *   spool  the spool directory, from which an uploader thread sends each
 *          chunk to upload.url (shipper.h) and keeps it until acknowledged.
 * A new kind is a struct fx_sink_ops and a constructor here; the publisher
 * and the drivers do not change. A sink is used by one thread at a time
 * (the publisher's), but fx_sink_begin_stop may come from another.
 */
#ifndef FXAGENT_SINK_H
#define FXAGENT_SINK_H

#include <limits.h>
#include <stdint.h>

#include "fxagent/config.h"
#include "fxagent/shipper.h"
#include "fxagent/spool.h"

/* One chunk on its way: the publisher fills the first fields, the sink the
 * rest in fx_sink_prepare. */
struct fx_sink_chunk {
	const char *target;
	int64_t seq;
	double start_wall_ms, end_wall_ms; /* Unix epoch milliseconds */
	char path[PATH_MAX];		   /* where to write it */
	const char *id;			   /* its name for the log (CHUNK_ID=) */
	struct fx_chunk_info info;	   /* spool sinks: the spool's name of it */
};

struct fx_sink;

struct fx_sink_ops {
	int (*prepare)(struct fx_sink *s, struct fx_sink_chunk *c);
	void (*commit)(struct fx_sink *s, struct fx_sink_chunk *c);
	/* Optional. */
	void (*begin_stop)(struct fx_sink *s, uint64_t deadline_ns);
	int (*drain)(struct fx_sink *s, uint64_t timeout_ms);
	void (*get_stats)(struct fx_sink *s, struct fx_shipper_stats *out);
	void (*free)(struct fx_sink *s, uint64_t deadline_ns);
};

struct fx_sink {
	const struct fx_sink_ops *ops;
	const char *where; /* for messages: the path, directory or spool */
};

/* Every chunk to @path ("-": stdout). Returns 0 or -errno (logged: the
 * directory cannot be written). */
int fx_sink_file_new(const char *path, struct fx_sink **out);

/* One file per chunk in @dir: <target>-<start UTC>-<seq>.json.gz. The
 * directory is made if missing (0700), refused if others could write it, and
 * cleared of the temporaries of writes a kill cut short. Returns 0 or -errno
 * (logged). */
int fx_sink_dir_new(const char *dir, struct fx_sink **out);

/* The spool of @cfg and its uploader thread (fx_shipper_start); @cfg and
 * @host must outlive the sink. Returns 0 or -errno (logged). */
int fx_sink_spool_new(const struct fx_config *cfg, const char *host, struct fx_sink **out);

/* Fills @c->path, @c->id (and @c->info) for the chunk. Returns 0 or -errno. */
static inline int fx_sink_prepare(struct fx_sink *s, struct fx_sink_chunk *c)
{
	return s->ops->prepare(s, c);
}

/* The chunk is complete at @c->path. */
static inline void fx_sink_commit(struct fx_sink *s, struct fx_sink_chunk *c)
{
	s->ops->commit(s, c);
}

/* The agent stops: deliveries end by @deadline_ns (CLOCK_MONOTONIC). */
static inline void fx_sink_begin_stop(struct fx_sink *s, uint64_t deadline_ns)
{
	if (s && s->ops->begin_stop)
		s->ops->begin_stop(s, deadline_ns);
}

/* Waits up to @timeout_ms for every chunk to be delivered. Returns 0, or
 * -EAGAIN (some still wait), -EBADMSG (a spool file failed its check),
 * -EPROTO (the collector refused one). Sinks that deliver at commit: 0. */
static inline int fx_sink_drain(struct fx_sink *s, uint64_t timeout_ms)
{
	return s->ops->drain ? s->ops->drain(s, timeout_ms) : 0;
}

/* Delivery counts (zero for sinks that deliver at commit). */
static inline void fx_sink_get_stats(struct fx_sink *s, struct fx_shipper_stats *out)
{
	*out = (struct fx_shipper_stats){ 0 };
	if (s && s->ops->get_stats)
		s->ops->get_stats(s, out);
}

/* Frees @s (NULL is fine), by @deadline_ns for sinks that deliver later. */
static inline void fx_sink_free(struct fx_sink *s, uint64_t deadline_ns)
{
	if (s)
		s->ops->free(s, deadline_ns);
}

#endif

/* SPDX-License-Identifier: MIT */
/* The spool sink: chunks into the spool, the shipper uploads them. */
#include "fxagent/sink.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "fxagent/log.h"

struct spool_sink {
	struct fx_sink base;
	struct fx_shipper *shipper;
};

static int spool_prepare(struct fx_sink *s, struct fx_sink_chunk *c)
{
	struct spool_sink *p = (struct spool_sink *)s;

	/* Into the spool's incoming/ first: nothing is lost if the upload fails. */
	c->info = (struct fx_chunk_info){ .start_ms = (int64_t)(c->start_wall_ms + 0.5),
					  .end_ms = (int64_t)(c->end_wall_ms + 0.5),
					  .seq = c->seq };
	snprintf(c->info.target, sizeof(c->info.target), "%s", c->target);
	fx_spool_new_id(&c->info);
	fx_spool_path(fx_shipper_spool(p->shipper), &c->info, c->path, sizeof(c->path));
	c->id = c->info.id;
	return 0;
}

static void spool_commit(struct fx_sink *s, struct fx_sink_chunk *c)
{
	struct spool_sink *p = (struct spool_sink *)s;

	fx_spool_add(fx_shipper_spool(p->shipper), &c->info);
	fx_shipper_kick(p->shipper);
}

static void spool_begin_stop(struct fx_sink *s, uint64_t deadline_ns)
{
	fx_shipper_begin_stop(((struct spool_sink *)s)->shipper, deadline_ns);
}

static int spool_drain(struct fx_sink *s, uint64_t timeout_ms)
{
	struct spool_sink *p = (struct spool_sink *)s;
	struct fx_shipper_stats st;

	if (!fx_shipper_wait_empty(p->shipper, timeout_ms))
		return -EAGAIN;
	fx_shipper_get_stats(p->shipper, &st);
	if (st.refused)
		return -EBADMSG;
	if (st.rejected)
		return -EPROTO;
	return 0;
}

static void spool_get_stats(struct fx_sink *s, struct fx_shipper_stats *out)
{
	fx_shipper_get_stats(((struct spool_sink *)s)->shipper, out);
}

static void spool_free(struct fx_sink *s, uint64_t deadline_ns)
{
	fx_shipper_stop(((struct spool_sink *)s)->shipper, deadline_ns);
	free(s);
}

static const struct fx_sink_ops spool_ops = {
	.prepare = spool_prepare,
	.commit = spool_commit,
	.begin_stop = spool_begin_stop,
	.drain = spool_drain,
	.get_stats = spool_get_stats,
	.free = spool_free,
};

int fx_sink_spool_new(const struct fx_config *cfg, const char *host, struct fx_sink **out)
{
	struct spool_sink *p = calloc(1, sizeof(*p));
	int ret;

	if (!p)
		return fx_log_errno(FX_LOG_ERR, ENOMEM, "cannot set up the sink");
	ret = fx_shipper_start(cfg, host, &p->shipper);
	if (ret < 0) {
		free(p);
		return ret;
	}
	p->base.ops = &spool_ops;
	p->base.where = cfg->spool.directory;
	*out = &p->base;
	return 0;
}

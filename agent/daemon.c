/* SPDX-License-Identifier: MIT */
/* The daemon: a driver of the pipeline (pipeline.h) with windows on the wall
 * clock, a publisher thread, reloads and systemd's protocol. */
#include "fxagent/daemon.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "fxagent/log.h"
#include "fxagent/pipeline.h"
#include "fxagent/sampler.h"
#include "fxagent/service.h"
#include "fxagent/util.h"

struct daemon {
	const struct fx_daemon_ctl *ctl;
	const struct fx_config *cfg; /* the running config */
	struct fx_config *pending;   /* reloaded, applied at the end of the window */
	struct fx_pipeline *p;
	struct fx_service_watchdog wd;
	uint64_t reloads;
};

static void fmt_wall(uint64_t mono, char *out, size_t len)
{
	int64_t wall_minus_mono =
		(int64_t)fx_now_ns(CLOCK_REALTIME) - (int64_t)fx_now_ns(CLOCK_MONOTONIC);
	time_t sec = (time_t)(((int64_t)mono + wall_minus_mono) / 1000000000);
	struct tm tm;

	gmtime_r(&sec, &tm);
	strftime(out, len, "%H:%M:%S UTC", &tm);
}

/* SIGHUP: reads the config again. A good one waits for the end of the
 * window; a bad one is logged (file:line:column) and the running one stays. */
static void reload(struct daemon *d)
{
	struct fx_config *nc = calloc(1, sizeof(*nc));
	char when[32];
	int ret;

	fx_service_notifyf("RELOADING=1\nMONOTONIC_USEC=%" PRIu64,
			   fx_now_ns(CLOCK_MONOTONIC) / 1000);
	ret = nc ? d->ctl->load(d->ctl->ctx, nc) : -ENOMEM;
	if (ret < 0) {
		free(nc);
		fx_log(FX_LOG_ERR, "reload failed: the running config stays");
		fx_service_notify("READY=1\nSTATUS=reload failed: the running config stays");
		return;
	}
	fx_log_set_level((enum fx_log_level)nc->log.level);
	if (d->pending) {
		fx_config_release(d->pending);
		free(d->pending);
	}
	d->pending = nc;
	d->reloads++;
	fx_pipeline_hold(d->p);
	fmt_wall(fx_pipeline_window_end(d->p), when, sizeof(when));
	fx_log(FX_LOG_NOTICE, "config reloaded: it applies from the next window, at %s", when);
	fx_service_notify("READY=1");
}

/* The loop of the sampling thread, until *stop. Returns 0 or -errno. */
static int run(struct daemon *d)
{
	const struct fx_daemon_ctl *ctl = d->ctl;
	int ret = 0;

	while (!*ctl->stop && ret >= 0) {
		fx_service_watchdog_tick(&d->wd, fx_now_ns(CLOCK_MONOTONIC));
		if (ctl->reload && *ctl->reload) {
			*ctl->reload = 0;
			reload(d);
		}
		ret = fx_pipeline_step(d->p, FX_SAMPLER_DRAIN_MS);
		if (ret >= 0 && d->pending &&
		    fx_now_ns(CLOCK_MONOTONIC) >= fx_pipeline_window_end(d->p)) {
			d->cfg = d->pending;
			d->pending = NULL;
			ret = fx_pipeline_reconfigure(d->p, (struct fx_config *)d->cfg);
		}
	}
	return ret;
}

int fx_daemon_run(const struct fx_config *cfg, const struct fx_daemon_ctl *ctl,
		  struct fx_daemon_stats *stats)
{
	struct fx_pipeline_opts po = {
		.cfg = cfg, .rotate = true, .thread = true, .report_status = true
	};
	struct daemon d = { .ctl = ctl, .cfg = cfg };
	struct fx_pipeline_stats ps = { 0 };
	int ret;

	fx_service_watchdog_init(&d.wd);
	ret = fx_pipeline_new(&po, &d.p);
	if (ret < 0)
		goto out;
	/* Sampling works: now say what else a missing capability costs. */
	fx_service_check_caps();
	ret = fx_pipeline_start(d.p);
	if (ret < 0)
		goto out;
	fx_log(FX_LOG_NOTICE, "sampling %s at %u Hz, %u s windows, chunks %s %s",
	       cfg->ntargets ? "the configured targets" : "the whole system",
	       cfg->sampling.frequency, cfg->window.seconds,
	       fx_config_uploads(cfg) ? "uploaded from the spool in" : "in",
	       fx_pipeline_where(d.p));
	fx_service_notifyf("READY=1\nSTATUS=sampling %zu target%s",
			   cfg->ntargets ? cfg->ntargets : 1, cfg->ntargets == 1 ? "" : "s");
	ret = run(&d);
	if (ret < 0)
		goto out;
	/* SIGTERM: uploads end by upload.timeout + 1 s from now, whatever the
	 * collector does; the half second left is for the rest of the teardown. */
	fx_pipeline_begin_stop(d.p, fx_now_ns(CLOCK_MONOTONIC) +
					    (d.cfg->upload.timeout_ms + 500) * 1000000ull);
	fx_service_notify("STOPPING=1\nSTATUS=writing the last window");
	/* Stopped: the partial window is written too. */
	fx_pipeline_finish(d.p);
out:
	if (ret < 0)
		fx_service_notifyf("STOPPING=1\nSTATUS=failed: %s", strerror(-ret));
	if (d.p)
		fx_pipeline_get_stats(d.p, &ps);
	fx_pipeline_free(d.p);
	if (d.pending) {
		fx_config_release(d.pending);
		free(d.pending);
	}
	if (stats)
		*stats = (struct fx_daemon_stats){ .pipeline = ps, .reloads = d.reloads };
	return ret;
}

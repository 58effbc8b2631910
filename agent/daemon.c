/* SPDX-License-Identifier: MIT */
#include "fxagent/daemon.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <malloc.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "fxagent/cgroup.h"
#include "fxagent/dwunwind.h"
#include "fxagent/kallsyms.h"
#include "fxagent/log.h"
#include "fxagent/objects.h"
#include "fxagent/procs.h"
#include "fxagent/recorder.h"
#include "fxagent/report.h"
#include "fxagent/metrics.h"
#include "fxagent/sampler.h"
#include "fxagent/service.h"
#include "fxagent/shipper.h"
#include "fxagent/spool.h"
#include "fxagent/symbolize.h"
#include "fxagent/trust.h"
#include "fxagent/unwind.h"
#include "fxagent/util.h"
#include "fxagent/window.h"

#define TAG_ROOT	   (UINT32_MAX - 1) /* the root cgroup: samples for process/pid targets */
#define MAX_OPEN_OBJECTS   8192
#define UNWIND_CACHE_PROCS 256
/* Processes asked about at each window change whether they are gone without
 * an EXIT record: up to this many access() calls, about a millisecond on the
 * sampler thread, every process in turn. */
#define REAP_BUDGET 512

struct target_rt {
	const struct fx_target *cfg; /* NULL: the whole system */
	const char *name;
	struct fx_window *win;	/* the open window */
	bool cgroup;		/* sampled by cgroup events */
	uint64_t cg_id;		/* attached cgroup, 0 = none */
	char cg_path[PATH_MAX]; /* where it was last found, "" = never */
	bool said_missing;
	struct fx_profile_kv *labels; /* global labels, then the target's */
	size_t nlabels;
};

/* One loaded config and the targets it names. Closed windows keep a
 * reference until they are written, so a reload never pulls the config from
 * under the publisher. */
struct gen {
	const struct fx_config *cfg;
	struct fx_config *owned; /* reloaded configs are the daemon's */
	struct target_rt *t;
	size_t nt;
	bool cgroup_mode;
	bool filter_procs; /* process/pid targets present */
	char host[256];
	unsigned refs; /* under daemon.mu */
};

/* Agent-wide totals, as of a window's end (the metrics file's counters). */
struct totals {
	uint64_t windows, samples, lost, truncated, dropped;
	size_t targets, attached;
};

struct job {
	struct target_rt *t;
	struct fx_window *win;
	struct fx_thread_name *names;
	size_t nnames;
};

struct batch {
	struct batch *next;
	struct gen *g;
	struct totals tot;
	int64_t seq;
	uint64_t start_mono, end_mono;
	double start_wall_ms, end_wall_ms;
	uint64_t epoch; /* of the objects (objects.h) its windows used */
	size_t njobs;
	struct job jobs[];
};

struct daemon {
	/* The current config and its targets: copies of g's fields. */
	struct gen *g;
	const struct fx_config *cfg;
	struct target_rt *t;
	size_t nt;
	bool cgroup_mode;
	bool filter_procs;
	struct fx_config *pending; /* reloaded, applied at the next window */
	const struct fx_daemon_ctl *ctl;
	struct fx_service_watchdog wd;
	struct fx_sampler *sampler;
	struct fx_objects *objs;
	struct fx_procs *procs;
	struct fx_unwinder *unwinder;
	struct fx_recorder rec;
	uint64_t unwind_mark; /* fx_unwind_mark() at the last rotation */
	char mount[PATH_MAX];
	uint64_t win_start, win_end; /* CLOCK_MONOTONIC */
	int64_t wall_minus_mono;     /* ns */
	int64_t seq;
	struct totals tot;
	/* publisher */
	pthread_t pub;
	bool pub_started;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	struct batch *head, *tail;
	bool quit;
	uint64_t stop_at;		     /* CLOCK_MONOTONIC; set once a stop began */
	struct fx_shipper *shipper;	     /* NULL without upload.url; the publisher's,
						set under mu */
	struct gen *ship_gen;		     /* the config the shipper was started with */
	struct gen *sym_gen;		     /* the publisher's first config */
	struct fx_shipper_stats up_base;     /* counts of the shippers replaced */
	struct fx_symbolizer_stats sym_base; /* and of the symbolizers */
	bool metrics_failed;		     /* said once */
	struct fx_daemon_stats stats;
};

static struct fx_window *window_new(const struct fx_config *cfg)
{
	struct fx_window *w = malloc(sizeof(*w));

	if (w)
		fx_window_init(w, cfg->window.max_stacks);
	return w;
}

static void window_free(struct fx_window *w)
{
	if (!w)
		return;
	fx_window_release(w);
	free(w);
}

/* ---- targets ---- */

static bool is_cgroup_kind(const struct fx_target *t)
{
	return t->kind == FX_TARGET_SYSTEMD_UNIT || t->kind == FX_TARGET_CGROUP;
}

/* Attaches (or re-attaches, after a restart made a new directory) the cgroup
 * events of target @i. Says once when its cgroup is missing. */
static void resolve_target(struct daemon *d, size_t i)
{
	struct target_rt *t = &d->t[i];
	char rel[PATH_MAX];
	uint64_t id;
	int fd, ret;

	ret = fx_cgroup_resolve(d->mount, t->cfg, rel, sizeof(rel));
	if (ret == 0)
		ret = fx_cgroup_open(d->mount, rel, &fd, &id);
	if (ret < 0) {
		if (t->cg_id) {
			fx_sampler_remove_cgroup(d->sampler, (uint32_t)i);
			t->cg_id = 0;
		}
		if (!t->said_missing)
			fx_log_fields(FX_LOG_NOTICE, t->name, NULL,
				      "target %s: %s has no cgroup yet; looking again every "
				      "window",
				      t->name, t->cfg->value);
		t->said_missing = true;
		return;
	}
	snprintf(t->cg_path, sizeof(t->cg_path), "%s", rel);
	/* fx_cgroup_open() set @id: both calls return 0 or -errno, which the
	 * analyzer cannot see in cgroup.c (it tries a positive result).
	 * NOLINTNEXTLINE(clang-analyzer-core.UndefinedBinaryOperatorResult) */
	if (id != t->cg_id) {
		if (t->cg_id)
			fx_sampler_remove_cgroup(d->sampler, (uint32_t)i);
		ret = fx_sampler_add_cgroup(d->sampler, fd, (uint32_t)i);
		if (ret < 0) {
			fx_log_fields(FX_LOG_ERR, t->name, NULL,
				      "target %s: cannot sample cgroup %s: %s", t->name, rel,
				      strerror(-ret));
			t->cg_id = 0;
		} else {
			fx_log_fields(t->said_missing || t->cg_id ? FX_LOG_NOTICE : FX_LOG_INFO,
				      t->name, NULL, "target %s: sampling cgroup %s", t->name, rel);
			t->cg_id = id;
			t->said_missing = false;
		}
	}
	close(fd);
}

static void resolve_targets(struct daemon *d)
{
	for (size_t i = 0; i < d->nt; i++)
		if (d->t[i].cgroup)
			resolve_target(d, i);
}

/* Between rotations, once a second: a cgroup that went away or came back at
 * its known path (a service restart) is picked up within a second, not at
 * the next window. Only a stat per target: the search stays at rotation. */
static void recheck_targets(struct daemon *d)
{
	for (size_t i = 0; i < d->nt; i++) {
		struct target_rt *t = &d->t[i];
		uint64_t id = 0;
		int ret;

		if (!t->cgroup || !t->cg_path[0])
			continue;
		ret = fx_cgroup_id(d->mount, t->cg_path, &id);
		if ((ret == 0 && id != t->cg_id) || (ret < 0 && t->cg_id))
			resolve_target(d, i);
	}
}

static bool proc_matches(const struct fx_target *t, uint32_t pid, const struct fx_proc *proc)
{
	if (t->kind == FX_TARGET_PID)
		return pid == t->pid;
	if (t->kind == FX_TARGET_PROCESS && proc)
		/* comm holds at most 15 bytes of the name */
		return strncmp(proc->comm, t->value, FX_COMM_LEN - 1) == 0;
	return false;
}

/* ---- recorder hooks (sampler thread) ---- */

static size_t route(void *ctx, const struct fx_record_sample *s, const struct fx_proc *proc,
		    struct fx_window **out, size_t max)
{
	struct daemon *d = ctx;
	size_t n = 0;

	if (d->cgroup_mode) {
		uint32_t tag = fx_sampler_tag(d->sampler, s->id);

		if (tag < d->nt) {
			out[n++] = d->t[tag].win;
			return n;
		}
		if (tag != TAG_ROOT)
			return 0;
	} else if (!d->filter_procs) {
		out[n++] = d->t[0].win; /* the whole system */
		return n;
	}
	for (size_t i = 0; i < d->nt && n < max; i++)
		if (!d->t[i].cgroup && proc_matches(d->t[i].cfg, s->pid, proc))
			out[n++] = d->t[i].win;
	return n;
}

static void on_lost(void *ctx, uint64_t time_ns, uint64_t count)
{
	struct daemon *d = ctx;

	(void)time_ns;
	d->tot.lost += count;
	/* A ring does not say whose samples it lost: every window says it. */
	for (size_t i = 0; i < d->nt; i++)
		d->t[i].win->counters.lost += count;
}

static void gen_get_locked(struct gen *g)
{
	g->refs++;
}

static void gen_free(struct gen *g)
{
	for (size_t i = 0; i < g->nt; i++) {
		window_free(g->t[i].win);
		free(g->t[i].labels);
	}
	free(g->t);
	if (g->owned) {
		fx_config_release(g->owned);
		free(g->owned);
	}
	free(g);
}

static void gen_put(struct daemon *d, struct gen *g)
{
	bool last;

	if (!g)
		return;
	pthread_mutex_lock(&d->mu);
	last = --g->refs == 0;
	pthread_mutex_unlock(&d->mu);
	if (last)
		gen_free(g);
}

static void mark_objects(struct daemon *d, const struct fx_window *w)
{
	if (w && w->nframes)
		fx_objects_mark(d->objs, &w->frames[0].object, w->nframes, sizeof(w->frames[0]));
}

static void publish(struct daemon *d, struct batch *b)
{
	pthread_mutex_lock(&d->mu);
	gen_get_locked(b->g);
	if (d->tail)
		d->tail->next = b;
	else
		d->head = b;
	d->tail = b;
	pthread_cond_signal(&d->cv);
	pthread_mutex_unlock(&d->mu);
}

/* Closes the open windows at @end (CLOCK_MONOTONIC) and hands them to the
 * publisher. With @reopen, fresh windows take their place; without, the
 * targets are left without windows (a reload replaces them). */
static void close_windows(struct daemon *d, uint64_t end, bool reopen)
{
	struct batch *b = calloc(1, sizeof(*b) + d->nt * sizeof(struct job));

	if (b) {
		b->g = d->g;
		b->seq = d->seq;
		b->start_mono = d->win_start;
		b->end_mono = end;
		/* Integer nanoseconds to milliseconds once: a boundary stays exact. */
		b->start_wall_ms = (double)((int64_t)d->win_start + d->wall_minus_mono) / 1e6;
		b->end_wall_ms = (double)((int64_t)end + d->wall_minus_mono) / 1e6;
		for (size_t i = 0; i < d->nt; i++) {
			struct fx_window *fresh = reopen ? window_new(d->cfg) : NULL;
			struct job *j = &b->jobs[b->njobs];

			if (reopen && !fresh)
				break; /* out of memory: this target's window goes on */
			j->t = &d->t[i];
			j->win = d->t[i].win;
			if (fx_procs_names(d->procs, j->win, &j->names, &j->nnames) < 0)
				j->nnames = 0;
			d->tot.samples += j->win->counters.samples;
			d->tot.truncated += j->win->counters.truncated;
			d->tot.dropped += j->win->counters.dropped_stacks;
			d->t[i].win = fresh;
			b->njobs++;
		}
	}
	d->seq++;
	d->stats.windows++;
	d->tot.windows++;
	d->tot.targets = d->nt;
	d->tot.attached = 0;
	for (size_t i = 0; i < d->nt; i++)
		d->tot.attached += d->t[i].cgroup ? d->t[i].cg_id != 0 : 1;
	if (b) {
		/* What these windows, the live processes and any window left
		 * open (out of memory for a fresh one) use keeps its fd until
		 * the publisher has written them. */
		for (size_t i = 0; i < b->njobs; i++)
			mark_objects(d, b->jobs[i].win);
		for (size_t i = 0; i < d->nt; i++)
			mark_objects(d, d->t[i].win);
		fx_procs_mark_objects(d->procs);
		b->epoch = fx_objects_end_epoch(d->objs);
		b->tot = d->tot;
		publish(d, b);
	}
	d->stats.samples = d->tot.samples;
}

/* The end of the window that starts at @start: the next multiple of the
 * window length since the epoch (windows align to the wall clock). */
static uint64_t window_end(const struct daemon *d, uint64_t start)
{
	const uint64_t wlen = (uint64_t)d->cfg->window.seconds * 1000000000ull;
	uint64_t wall = (uint64_t)((int64_t)start + d->wall_minus_mono);

	return start + (wlen - wall % wlen);
}

/* Closes the open windows at @end and opens the next ones. This is all the
 * sampler thread spends on a window change. */
static void rotate(struct daemon *d, uint64_t end)
{
	uint64_t t0 = fx_now_ns(CLOCK_MONOTONIC), c0 = fx_now_ns(CLOCK_THREAD_CPUTIME_ID), took,
		 cpu;
	size_t reaped;

	close_windows(d, end, true);
	/* Processes that did not run for a whole window give their Dwfl back. */
	fx_unwind_drop_idle(d->unwinder, d->unwind_mark);
	d->unwind_mark = fx_unwind_mark(d->unwinder);
	if (fx_log_get_level() >= FX_LOG_DEBUG && fx_unwind_dwarf(d->unwinder)) {
		struct fx_dwunwind_stats ds;

		fx_dwunwind_get_stats(fx_unwind_dwarf(d->unwinder), &ds);
		fx_debug("dwarf: %" PRIu64 " processes cached, %" PRIu64 " created, %" PRIu64
			 " evicted, %" PRIu64 " dropped idle",
			 ds.live, ds.dwfl_new, ds.evicted, ds.idle_dropped);
	}
	reaped = fx_procs_reap_gone(d->procs, REAP_BUDGET);
	if (reaped)
		fx_debug("procs: %zu processes gone without an EXIT record", reaped);
	fx_procs_sweep(d->procs);
	resolve_targets(d);
	d->win_start = end;
	d->win_end = end + (uint64_t)d->cfg->window.seconds * 1000000000ull;
	took = fx_now_ns(CLOCK_MONOTONIC) - t0;
	cpu = fx_now_ns(CLOCK_THREAD_CPUTIME_ID) - c0;
	d->stats.rotation_ns_sum += took;
	d->stats.rotation_cpu_ns_sum += cpu;
	if (took > d->stats.rotation_ns_max)
		d->stats.rotation_ns_max = took;
	if (cpu > d->stats.rotation_cpu_ns_max)
		d->stats.rotation_cpu_ns_max = cpu;
}

static void before_sample(void *ctx, uint64_t time_ns)
{
	struct daemon *d = ctx;

	/* Rotation follows the samples' own clock: each lands in one window.
	 * With a reload pending, the main loop cuts the window instead. */
	while (time_ns >= d->win_end && !d->pending)
		rotate(d, d->win_end);
}

/* Waits up to @timeout_ms for records and hands what the rings hold to the
 * recorder. Returns >= 0, or -errno (logged). */
static int read_rings(struct daemon *d, int timeout_ms)
{
	int ret = fx_sampler_poll(d->sampler, timeout_ms, fx_recorder_handle, &d->rec);

	if (ret < 0)
		fx_log(FX_LOG_ERR, "reading perf rings failed: %s", strerror(-ret));
	return ret;
}

/* ---- publisher thread ---- */

static void chunk_path(const struct batch *b, const struct job *j, char *out, size_t len)
{
	time_t sec = (time_t)(b->start_wall_ms / 1000);
	struct tm tm;
	char ts[32];

	gmtime_r(&sec, &tm);
	strftime(ts, sizeof(ts), "%Y%m%dT%H%M%SZ", &tm);
	snprintf(out, len, "%s/%s-%s-%06" PRId64 ".json.gz", b->g->cfg->output.directory,
		 j->t->name, ts, b->seq);
}

static void write_batch(struct daemon *d, struct fx_symbolizer *sym, const struct fx_kallsyms *ks,
			struct batch *b)
{
	const struct fx_config *cfg = b->g->cfg;

	for (size_t i = 0; i < b->njobs; i++) {
		struct job *j = &b->jobs[i];
		struct fx_report_stats rs;
		struct fx_report_input in = {
			.window = j->win,
			.names = j->names,
			.nnames = j->nnames,
			.objs = d->objs,
			.symbolizer = sym,
			.kallsyms = ks,
			.meta = {
				.start_time_ms = b->start_wall_ms,
				.start_ns = b->start_mono,
				.end_ns = b->end_mono,
				.end_time_ms = b->end_wall_ms,
				.interval_ms = 1000.0 / cfg->sampling.frequency,
				.product = "fxagent",
				.host = b->g->host,
				.target = j->t->name,
				.seq = b->seq,
				.labels = j->t->labels,
				.nlabels = j->t->nlabels,
				.samples = j->win->counters.samples,
				.lost = j->win->counters.lost,
				.truncated = j->win->counters.truncated,
				.dropped = j->win->counters.dropped_stacks,
			},
			.seq = b->seq,
			.marker_pid = (uint32_t)getpid(),
			.marker_name = "fxagent",
		};
		struct fx_chunk_info info = { .start_ms = (int64_t)(b->start_wall_ms + 0.5),
					      .end_ms = (int64_t)(b->end_wall_ms + 0.5),
					      .seq = b->seq };
		char path[PATH_MAX];
		const char *id;

		if (d->shipper) {
			/* Into the spool first: nothing is lost if the upload fails. */
			snprintf(info.target, sizeof(info.target), "%s", j->t->name);
			fx_spool_new_id(&info);
			fx_spool_path(fx_shipper_spool(d->shipper), &info, path, sizeof(path));
			id = info.id;
		} else {
			chunk_path(b, j, path, sizeof(path));
			id = strrchr(path, '/') + 1;
		}
		if (fx_report_write(&in, path, &rs) == 0) {
			__atomic_add_fetch(&d->stats.chunks, 1, __ATOMIC_RELAXED);
			fx_log_fields(FX_LOG_INFO, j->t->name, id,
				      "wrote %s: %" PRIu64 " samples, %" PRIu64 " bytes", path,
				      rs.profile.samples, rs.profile.bytes);
			if (d->shipper) {
				fx_spool_add(fx_shipper_spool(d->shipper), &info);
				fx_shipper_kick(d->shipper);
			}
		} else {
			__atomic_add_fetch(&d->stats.chunk_errors, 1, __ATOMIC_RELAXED);
		}
		window_free(j->win);
		free(j->names);
	}
}

/* A hash of /proc/modules: kernel symbols change only when modules do, and
 * reading /proc/kallsyms costs tens of milliseconds of CPU. */
static uint64_t modules_hash(void)
{
	uint64_t h = 0xcbf29ce484222325ULL;
	char buf[4096];
	size_t n;
	FILE *f = fopen("/proc/modules", "re");

	if (!f)
		return 0;
	while ((n = fread(buf, 1, sizeof(buf), f)) > 0)
		for (size_t i = 0; i < n; i++)
			h = (h ^ (uint8_t)buf[i]) * 0x100000001b3ULL;
	fclose(f);
	return h;
}

static bool same_symbolization(const struct fx_config *a, const struct fx_config *b)
{
	if (a->symbolization.demangle != b->symbolization.demangle ||
	    a->symbolization.max_memory != b->symbolization.max_memory ||
	    a->symbolization.ndebug_dirs != b->symbolization.ndebug_dirs)
		return false;
	for (size_t i = 0; i < a->symbolization.ndebug_dirs; i++)
		if (strcmp(a->symbolization.debug_dirs[i], b->symbolization.debug_dirs[i]))
			return false;
	return true;
}

static struct fx_symbolizer *symbolizer_for(const struct fx_config *cfg)
{
	const char *const *dirs = (const char *const *)cfg->symbolization.debug_dirs;
	struct fx_symbolizer_opts so = { .debug_dirs = cfg->symbolization.ndebug_dirs ? dirs : NULL,
					 .no_demangle = !cfg->symbolization.demangle,
					 .max_bytes = cfg->symbolization.max_memory };

	return fx_symbolizer_new(&so);
}

/* A reloaded config gets a new uploader: upload settings, tokens and
 * certificates are read again. What the old one had not sent stays in its
 * spool; the new one picks it up when the spool is the same. */
static void switch_shipper(struct daemon *d, struct gen *g)
{
	struct fx_shipper *old, *s = NULL;
	uint64_t stop_at;
	int ret;

	/* The main thread reads d->shipper under the lock to begin a stop. */
	pthread_mutex_lock(&d->mu);
	old = d->shipper;
	d->shipper = NULL;
	stop_at = d->stop_at;
	pthread_mutex_unlock(&d->mu);
	fx_shipper_stop(old, stop_at);
	gen_put(d, d->ship_gen);
	pthread_mutex_lock(&d->mu);
	gen_get_locked(g);
	pthread_mutex_unlock(&d->mu);
	d->ship_gen = g;
	if (!g->cfg->upload.url)
		return;
	ret = fx_shipper_start(g->cfg, g->host, &s);
	if (ret < 0) {
		fx_log(FX_LOG_ERR, "uploads stop until the next reload; chunks go to %s meanwhile",
		       g->cfg->output.directory);
		return;
	}
	pthread_mutex_lock(&d->mu);
	d->shipper = s;
	if (d->stop_at)
		fx_shipper_begin_stop(s, d->stop_at);
	pthread_mutex_unlock(&d->mu);
}

/* SIGTERM: uploads end by upload.timeout + 1 s from now, whatever the
 * collector does; the half second left is for the rest of the teardown. */
static void begin_stop(struct daemon *d)
{
	/* d->g is the main thread's; ship_gen the publisher's. */
	uint64_t timeout_ms = d->g ? d->g->cfg->upload.timeout_ms : 0;
	uint64_t at = fx_now_ns(CLOCK_MONOTONIC) + (timeout_ms + 500) * 1000000ull;

	pthread_mutex_lock(&d->mu);
	if (!d->stop_at) {
		d->stop_at = at;
		if (d->shipper)
			fx_shipper_begin_stop(d->shipper, at);
	}
	pthread_mutex_unlock(&d->mu);
}

/* The agent's counters, for node_exporter's textfile collector. */
static void write_metrics(struct daemon *d, const struct batch *b, const struct fx_symbolizer *sym,
			  const struct fx_shipper_stats *st)
{
	const char *path = b->g->cfg->metrics.textfile;
	struct fx_symbolizer_stats ss = { 0 };
	const struct totals *t = &b->tot;
	int ret;

	if (!path)
		return;
	if (sym)
		fx_symbolizer_get_stats(sym, &ss);
	const struct fx_metric m[] = {
		{ "fxagent_windows_total", "Windows closed.", false, NULL, NULL,
		  (double)t->windows },
		{ "fxagent_samples_total", "Samples recorded.", false, NULL, NULL,
		  (double)t->samples },
		{ "fxagent_lost_samples_total", "Samples the kernel lost (rings overflowed).",
		  false, NULL, NULL, (double)t->lost },
		{ "fxagent_truncated_stacks_total", "Samples whose stack was cut short.", false,
		  NULL, NULL, (double)t->truncated },
		{ "fxagent_dropped_stacks_total",
		  "Samples whose stack did not fit under window.max_stacks.", false, NULL, NULL,
		  (double)t->dropped },
		{ "fxagent_chunks_written_total", "Chunks written.", false, NULL, NULL,
		  (double)__atomic_load_n(&d->stats.chunks, __ATOMIC_RELAXED) },
		{ "fxagent_chunk_errors_total", "Chunks that could not be written.", false, NULL,
		  NULL, (double)__atomic_load_n(&d->stats.chunk_errors, __ATOMIC_RELAXED) },
		{ "fxagent_chunks_uploaded_total", "Chunks the collector accepted.", false, NULL,
		  NULL, (double)(d->up_base.uploaded + st->uploaded) },
		{ "fxagent_upload_retries_total", "Failed uploads that will be tried again.", false,
		  NULL, NULL, (double)(d->up_base.retried + st->retried) },
		{ "fxagent_chunks_rejected_total",
		  "Chunks the collector refused (moved to rejected/).", false, NULL, NULL,
		  (double)(d->up_base.rejected + st->rejected) },
		{ "fxagent_spool_files_refused_total",
		  "Spool files that failed the check before sending (moved to rejected/ unsent).",
		  false, NULL, NULL, (double)(d->up_base.refused + st->refused) },
		{ "fxagent_chunks_dropped_total", "Chunks dropped by the spool's bounds.", false,
		  NULL, NULL, (double)(d->up_base.dropped + st->dropped) },
		{ "fxagent_spool_chunks", "Chunks waiting in the spool.", true, NULL, NULL,
		  (double)st->pending },
		{ "fxagent_spool_bytes", "Bytes of the chunks waiting in the spool.", true, NULL,
		  NULL, (double)st->spool_bytes },
		{ "fxagent_symbol_lookups_total", "Addresses symbolized.", false, NULL, NULL,
		  (double)(d->sym_base.lookups + ss.lookups) },
		{ "fxagent_symbol_cache_hits_total", "Addresses answered from the symbol cache.",
		  false, NULL, NULL, (double)(d->sym_base.cache_hits + ss.cache_hits) },
		{ "fxagent_targets", "Targets configured (1: the whole system).", true, NULL, NULL,
		  (double)t->targets },
		{ "fxagent_targets_sampled", "Targets being sampled (a cgroup found).", true, NULL,
		  NULL, (double)t->attached },
		{ "fxagent_last_window_end_seconds", "Wall-clock end of the last window written.",
		  true, NULL, NULL, b->end_wall_ms / 1000.0 },
		{ "fxagent_info", "The agent's version.", true, "version", FX_VERSION, 1 },
	};

	ret = fx_metrics_write(path, m, sizeof(m) / sizeof(m[0]));
	if (ret < 0 && !d->metrics_failed)
		fx_log(FX_LOG_WARN, "cannot write the metrics file %s (metrics.textfile): %s", path,
		       strerror(-ret));
	d->metrics_failed = ret < 0;
}

static void *publisher(void *arg)
{
	struct daemon *d = arg;
	struct gen *sym_gen = d->sym_gen; /* the config the symbolizer was made for */
	struct fx_symbolizer *sym = symbolizer_for(sym_gen->cfg);
	struct fx_kallsyms *ks = NULL;
	uint64_t ks_modules = 0, sym_mark = 0;

	for (;;) {
		struct fx_shipper_stats st = { 0 };
		uint64_t nsamples = 0;
		struct batch *b;

		pthread_mutex_lock(&d->mu);
		while (!d->head && !d->quit)
			pthread_cond_wait(&d->cv, &d->mu);
		b = d->head;
		if (b) {
			d->head = b->next;
			if (!d->head)
				d->tail = NULL;
		}
		pthread_mutex_unlock(&d->mu);
		if (!b)
			break; /* quit, and nothing left */
		if (b->g != d->ship_gen) {
			if (d->shipper) {
				fx_shipper_get_stats(d->shipper, &st);
				d->up_base.uploaded += st.uploaded;
				d->up_base.retried += st.retried;
				d->up_base.rejected += st.rejected;
				d->up_base.refused += st.refused;
				d->up_base.dropped += st.dropped;
			}
			switch_shipper(d, b->g);
		}
		if (!same_symbolization(sym_gen->cfg, b->g->cfg)) {
			struct fx_symbolizer *ns = symbolizer_for(b->g->cfg);

			if (ns) {
				struct fx_symbolizer_stats ss;

				fx_symbolizer_get_stats(sym, &ss);
				d->sym_base.lookups += ss.lookups;
				d->sym_base.cache_hits += ss.cache_hits;
				fx_symbolizer_free(sym);
				sym = ns;
				sym_mark = 0;
			}
		}
		if (sym_gen != b->g) {
			pthread_mutex_lock(&d->mu);
			gen_get_locked(b->g);
			pthread_mutex_unlock(&d->mu);
			gen_put(d, sym_gen);
			sym_gen = b->g;
		}
		if (b->g->cfg->sampling.kernel_stacks) {
			uint64_t h = modules_hash();

			/* Modules come and go: read the kernel's symbols again then. */
			if (!ks || h != ks_modules) {
				fx_kallsyms_free(ks);
				ks = fx_kallsyms_load_system();
				ks_modules = h;
			}
		}
		for (size_t i = 0; i < b->njobs; i++)
			nsamples += b->jobs[i].win->counters.samples;
		if (sym) {
			uint64_t mark = fx_symbolizer_batch(sym);

			write_batch(d, sym, ks, b);
			/* Objects no chunk of this window or the one before used
			 * give their memory back. */
			fx_symbolizer_drop_idle(sym, sym_mark);
			sym_mark = mark + 1;
		}
		/* Binaries no live process maps and no window still to be
		 * written uses give their fds back. */
		fx_objects_close_unused(d->objs, b->epoch);
		/* What the window's tables and dropped caches freed goes back to the
		 * system, not only to malloc's free lists (all arenas). */
		malloc_trim(0);
		memset(&st, 0, sizeof(st));
		if (d->shipper) {
			fx_shipper_get_stats(d->shipper, &st);
			fx_log(FX_LOG_INFO,
			       "upload: %" PRIu64 " chunks uploaded, %" PRIu64 " retried, %" PRIu64
			       " rejected, %" PRIu64 " dropped; %" PRIu64 " pending (%" PRIu64
			       " bytes)",
			       st.uploaded, st.retried, st.rejected, st.dropped, st.pending,
			       st.spool_bytes);
		}
		if (sym && fx_log_get_level() >= FX_LOG_DEBUG) {
			struct fx_symbolizer_stats ss;

			fx_symbolizer_get_stats(sym, &ss);
			fx_debug("symbolizer: %" PRIu64
				 " objects, %.1f MiB (debug sections %.1f MiB)",
				 ss.objects_held, (double)ss.bytes / 1048576.0,
				 (double)ss.dwarf_bytes / 1048576.0);
		}
		if (fx_log_get_level() >= FX_LOG_DEBUG) {
			struct fx_objects_stats os;

			fx_objects_get_stats(d->objs, &os);
			fx_debug("objects: %" PRIu64 " known, %" PRIu64 " fds open, %" PRIu64
				 " closed as unused, %" PRIu64 " opened again",
				 os.objects, os.fds, os.closed_unused, os.reopened);
		}
		write_metrics(d, b, sym, &st);
		fx_service_notifyf("STATUS=%zu of %zu targets sampled; %" PRIu64
				   " samples in the last window; %" PRIu64
				   " chunks written, %" PRIu64 " uploaded, %" PRIu64 " pending",
				   b->tot.attached, b->tot.targets, nsamples,
				   __atomic_load_n(&d->stats.chunks, __ATOMIC_RELAXED),
				   d->up_base.uploaded + st.uploaded, st.pending);
		gen_put(d, b->g);
		free(b);
	}
	fx_kallsyms_free(ks);
	fx_symbolizer_free(sym);
	gen_put(d, sym_gen);
	return NULL;
}

/* ---- set-up ---- */

/* "<chunk>.json.gz.tmpXXXXXX": a write of fx_profile_write_file that a kill
 * cut short (mkostemp's six characters). */
static bool is_output_temp(const char *name)
{
	const char *p = strstr(name, ".json.gz.tmp");

	if (!p || p == name || strlen(p) != strlen(".json.gz.tmp") + 6)
		return false;
	for (p += strlen(".json.gz.tmp"); *p; p++)
		if (!isalnum((unsigned char)*p))
			return false;
	return true;
}

/* Removes what interrupted writes left in the output directory @fd: only
 * regular files of ours with a temporary's name, never what they link to. */
static void remove_output_temps(int fd, const char *path)
{
	int dfd = openat(fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	DIR *dir = dfd >= 0 ? fdopendir(dfd) : NULL;
	uint64_t removed = 0;
	struct dirent *de;

	if (!dir) {
		if (dfd >= 0)
			close(dfd);
		fx_warn("cannot list output.directory '%s' for leftover temporaries: %s", path,
			strerror(errno));
		return;
	}
	while ((de = readdir(dir))) {
		struct stat st;

		if (!is_output_temp(de->d_name) ||
		    fstatat(fd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISREG(st.st_mode) ||
		    st.st_uid != geteuid())
			continue;
		if (unlinkat(fd, de->d_name, 0) == 0)
			removed++;
	}
	closedir(dir);
	if (removed) {
		fsync(fd);
		fx_info("removed %" PRIu64 " temporary files of interrupted writes in '%s'",
			removed, path);
	}
}

/* The output directory: made if missing (0700), refused if others could
 * write in it, and cleared of an earlier run's cut-short writes. */
static int open_output(const char *path)
{
	char why[PATH_MAX + 256];
	int fd = fx_trust_dir(path, "output.directory", true, why, sizeof(why));

	if (fd < 0)
		return fx_log_errno(FX_LOG_ERR, -fd, "cannot write chunks: %s", why);
	remove_output_temps(fd, path);
	close(fd);
	return 0;
}

/* The targets of @cfg, each with an open window. @owned (may be NULL) is
 * freed with the gen. Returns NULL when out of memory. */
static struct gen *gen_new(const struct fx_config *cfg, struct fx_config *owned)
{
	size_t n = cfg->ntargets ? cfg->ntargets : 1;
	struct gen *g = calloc(1, sizeof(*g));

	if (!g)
		return NULL;
	g->cfg = cfg;
	g->refs = 1;
	g->t = calloc(n, sizeof(*g->t));
	if (!g->t)
		goto fail;
	g->nt = n;
	gethostname(g->host, sizeof(g->host) - 1);
	if (fx_config_label(cfg, "host"))
		snprintf(g->host, sizeof(g->host), "%s", fx_config_label(cfg, "host"));
	for (size_t i = 0; i < n; i++) {
		struct target_rt *t = &g->t[i];
		const struct fx_target *tc = cfg->ntargets ? &cfg->targets[i] : NULL;
		size_t nl = cfg->nlabels + (tc ? tc->nlabels : 0), k = 0;

		t->cfg = tc;
		t->name = tc ? tc->name : "system";
		t->cgroup = tc && is_cgroup_kind(tc);
		g->cgroup_mode |= t->cgroup;
		g->filter_procs |= tc && !t->cgroup;
		t->win = window_new(cfg);
		t->labels = calloc(nl + 1, sizeof(*t->labels));
		if (!t->win || !t->labels)
			goto fail;
		for (size_t l = 0; l < cfg->nlabels; l++)
			t->labels[k++] =
				(struct fx_profile_kv){ cfg->labels[l].key, cfg->labels[l].value };
		for (size_t l = 0; tc && l < tc->nlabels; l++)
			t->labels[k++] =
				(struct fx_profile_kv){ tc->labels[l].key, tc->labels[l].value };
		t->nlabels = k;
	}
	g->owned = owned;
	return g;
fail:
	g->owned = NULL; /* the caller still owns it */
	gen_free(g);
	return NULL;
}

static void set_current(struct daemon *d, struct gen *g)
{
	d->g = g;
	d->cfg = g->cfg;
	d->t = g->t;
	d->nt = g->nt;
	d->cgroup_mode = g->cgroup_mode;
	d->filter_procs = g->filter_procs;
}

/* process and pid targets next to cgroup ones: the root cgroup samples
 * everything, filtered here. */
static int add_root_cgroup(struct daemon *d)
{
	uint64_t id;
	int fd, ret;

	ret = fx_cgroup_open(d->mount, "/", &fd, &id);
	if (ret == 0) {
		ret = fx_sampler_add_cgroup(d->sampler, fd, TAG_ROOT);
		close(fd);
	}
	if (ret < 0)
		fx_log(FX_LOG_ERR, "cannot sample the root cgroup for process targets: %s",
		       strerror(-ret));
	return ret;
}

/* Opens the perf events (disabled), the unwinder and the recorder for the
 * current config. */
static int open_sampling(struct daemon *d)
{
	const struct fx_config *cfg = d->cfg;
	struct fx_sampler_opts so = { .frequency = cfg->sampling.frequency,
				      .kernel = cfg->sampling.kernel_stacks,
				      .user_regs_stack = cfg->sampling.dwarf,
				      .stack_bytes = cfg->sampling.stack_bytes,
				      .ring_pages = cfg->sampling.ring_bytes /
						    (size_t)sysconf(_SC_PAGESIZE),
				      .cgroups = d->cgroup_mode };
	struct fx_unwind_opts uo = { .mode = cfg->sampling.dwarf ? FX_UNWIND_DWARF : FX_UNWIND_FP,
				     .kernel = cfg->sampling.kernel_stacks,
				     .max_procs = UNWIND_CACHE_PROCS,
				     .objs = d->objs };
	struct fx_recorder_opts ro = { .include_idle = cfg->sampling.include_idle };
	struct fx_recorder_sink sink = {
		.before_sample = before_sample, .route = route, .lost = on_lost, .ctx = d
	};
	int ret;

	if (d->cgroup_mode && !d->mount[0]) {
		ret = fx_cgroup_find_mount("/proc/self/mountinfo", d->mount, sizeof(d->mount));
		if (ret < 0)
			return ret;
	}
	ret = fx_sampler_open(&so, &d->sampler);
	if (ret < 0)
		return ret;
	d->unwinder = fx_unwind_new(&uo);
	if (!d->unwinder)
		return -ENOMEM;
	if (d->cgroup_mode) {
		resolve_targets(d);
		if (d->filter_procs) {
			ret = add_root_cgroup(d);
			if (ret < 0)
				return ret;
		}
	}
	/* Without a window: the sink routes every sample. */
	fx_recorder_init(&d->rec, &ro, fx_sampler_fmt(d->sampler), d->procs, d->unwinder, NULL);
	fx_recorder_set_sink(&d->rec, &sink);
	return 0;
}

static void close_sampling(struct daemon *d)
{
	fx_unwind_free(d->unwinder);
	fx_sampler_free(d->sampler);
	d->unwinder = NULL;
	d->sampler = NULL;
}

static bool same_sampling(const struct fx_config *a, const struct fx_config *b)
{
	return a->sampling.frequency == b->sampling.frequency &&
	       a->sampling.dwarf == b->sampling.dwarf &&
	       a->sampling.stack_bytes == b->sampling.stack_bytes &&
	       a->sampling.ring_bytes == b->sampling.ring_bytes &&
	       a->sampling.kernel_stacks == b->sampling.kernel_stacks &&
	       a->sampling.include_idle == b->sampling.include_idle;
}

static void fmt_wall(const struct daemon *d, uint64_t mono, char *out, size_t len)
{
	time_t sec = (time_t)(((int64_t)mono + d->wall_minus_mono) / 1000000000);
	struct tm tm;

	gmtime_r(&sec, &tm);
	strftime(out, len, "%H:%M:%S UTC", &tm);
}

/* SIGHUP: reads the config again. A good one waits for the next window; a
 * bad one is logged (file:line:column) and the running one stays. */
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
	d->stats.reloads++;
	fmt_wall(d, d->win_end, when, sizeof(when));
	fx_log(FX_LOG_NOTICE, "config reloaded: it applies from the next window, at %s", when);
	fx_service_notify("READY=1");
}

/* At the end of the window after a reload: cuts the window, swaps in the new
 * targets, and reopens the perf events only when the sampling settings (or
 * whole-system versus cgroup sampling) changed. */
static int apply_pending(struct daemon *d)
{
	struct fx_config *nc = d->pending;
	struct gen *old = d->g, *ng = gen_new(nc, nc);
	bool reopen, had_root = old->cgroup_mode && old->filter_procs;
	uint64_t cut;
	int ret = 0;

	d->pending = NULL;
	if (!ng) {
		fx_config_release(nc);
		free(nc);
		fx_log(FX_LOG_ERR, "out of memory applying the reloaded config: the running "
				   "config stays");
		return 0;
	}
	reopen = !same_sampling(old->cfg, nc) || ng->cgroup_mode != old->cgroup_mode;
	fx_sampler_disable(d->sampler);
	fx_sampler_flush(d->sampler, fx_recorder_handle, &d->rec);
	cut = fx_now_ns(CLOCK_MONOTONIC);
	close_windows(d, cut, false);
	if (reopen) {
		close_sampling(d);
	} else if (d->cgroup_mode) {
		for (size_t i = 0; i < old->nt; i++)
			if (old->t[i].cg_id)
				fx_sampler_remove_cgroup(d->sampler, (uint32_t)i);
		if (had_root && !ng->filter_procs)
			fx_sampler_remove_cgroup(d->sampler, TAG_ROOT);
	}
	set_current(d, ng);
	gen_put(d, old);
	if (reopen) {
		ret = open_sampling(d);
	} else if (d->cgroup_mode) {
		resolve_targets(d);
		if (d->filter_procs && !had_root)
			ret = add_root_cgroup(d);
	}
	d->win_start = cut;
	d->win_end = window_end(d, cut);
	if (ret == 0)
		ret = fx_sampler_enable(d->sampler);
	if (ret < 0)
		return fx_log_errno(FX_LOG_ERR, -ret, "cannot sample with the reloaded config: %s",
				    strerror(-ret));
	fx_log(FX_LOG_NOTICE, "reloaded config applied: %zu target%s, %u s windows%s", d->nt,
	       d->nt == 1 ? "" : "s", d->cfg->window.seconds,
	       reopen ? ", perf events opened again" : "");
	return 0;
}

static void teardown(struct daemon *d)
{
	if (d->pub_started) {
		pthread_mutex_lock(&d->mu);
		d->quit = true;
		pthread_cond_signal(&d->cv);
		pthread_mutex_unlock(&d->mu);
		pthread_join(d->pub, NULL);
	} else {
		gen_put(d, d->sym_gen);
	}
	/* What the last window left goes while the collector answers, by the
	 * deadline begin_stop() set. */
	begin_stop(d);
	fx_shipper_stop(d->shipper, d->stop_at);
	gen_put(d, d->ship_gen);
	for (struct batch *b = d->head, *next; b; b = next) {
		next = b->next;
		for (size_t i = 0; i < b->njobs; i++) {
			window_free(b->jobs[i].win);
			free(b->jobs[i].names);
		}
		gen_put(d, b->g);
		free(b);
	}
	gen_put(d, d->g);
	if (d->pending) {
		fx_config_release(d->pending);
		free(d->pending);
	}
	close_sampling(d);
	fx_procs_free(d->procs);
	fx_objects_free(d->objs);
	pthread_cond_destroy(&d->cv);
	pthread_mutex_destroy(&d->mu);
}

int fx_daemon_run(const struct fx_config *cfg, const struct fx_daemon_ctl *ctl,
		  struct fx_daemon_stats *stats)
{
	struct daemon *d = calloc(1, sizeof(*d));
	uint64_t wall, mono, last_check = 0;
	bool said_stopping = false;
	int ret;

	if (!d)
		return -ENOMEM;
	d->ctl = ctl;
	pthread_mutex_init(&d->mu, NULL);
	pthread_cond_init(&d->cv, NULL);
	fx_service_watchdog_init(&d->wd);
	d->g = gen_new(cfg, NULL);
	if (!d->g) {
		ret = -ENOMEM;
		goto out;
	}
	set_current(d, d->g);
	/* The publisher's and the shipper's references to the first config. */
	d->g->refs += 2;
	d->sym_gen = d->ship_gen = d->g;
	ret = open_output(cfg->output.directory);
	if (ret < 0)
		goto out;
	if (cfg->upload.url) {
		ret = fx_shipper_start(cfg, d->g->host, &d->shipper);
		if (ret < 0)
			goto out;
	}
	d->objs = fx_objects_new("/proc", MAX_OPEN_OBJECTS);
	d->procs = d->objs ? fx_procs_new(d->objs, "/proc") : NULL;
	if (!d->procs) {
		ret = -ENOMEM;
		goto out;
	}
	ret = open_sampling(d);
	if (ret < 0)
		goto out;
	/* Sampling works: now say what else a missing capability costs. */
	fx_service_check_caps();
	ret = pthread_create(&d->pub, NULL, publisher, d);
	if (ret) {
		ret = fx_log_errno(FX_LOG_ERR, ret, "cannot start the publisher thread");
		goto out;
	}
	d->pub_started = true;
	pthread_setname_np(d->pub, "fx-publish");

	wall = fx_now_ns(CLOCK_REALTIME);
	mono = fx_now_ns(CLOCK_MONOTONIC);
	d->wall_minus_mono = (int64_t)wall - (int64_t)mono;
	d->win_start = mono;
	d->win_end = window_end(d, mono);
	ret = fx_sampler_enable(d->sampler);
	if (ret < 0)
		goto out;
	fx_log(FX_LOG_NOTICE, "sampling %s at %u Hz, %u s windows, chunks %s %s",
	       cfg->ntargets ? "the configured targets" : "the whole system",
	       cfg->sampling.frequency, cfg->window.seconds,
	       cfg->upload.url ? "uploaded from the spool in" : "in",
	       cfg->upload.url ? cfg->spool.directory : cfg->output.directory);
	fx_service_notifyf("READY=1\nSTATUS=sampling %zu target%s", d->nt, d->nt == 1 ? "" : "s");
	while (!*ctl->stop) {
		uint64_t now = fx_now_ns(CLOCK_MONOTONIC);
		int64_t left;

		fx_service_watchdog_tick(&d->wd, now);
		if (ctl->reload && *ctl->reload) {
			*ctl->reload = 0;
			reload(d);
		}
		/* The clock passed the window's end: what the rings hold from
		 * before it goes in first (before_sample() rotates at the first
		 * later sample). A reader that fell behind, on a loaded host,
		 * would otherwise put a window's samples in the next one. */
		if (now >= d->win_end) {
			ret = read_rings(d, 0);
			if (ret < 0)
				goto out;
		}
		if (d->pending && now >= d->win_end) {
			ret = apply_pending(d);
			if (ret < 0)
				goto out;
			continue;
		}
		if (now >= d->win_end)
			rotate(d, d->win_end);
		if (d->cgroup_mode && now - last_check >= 1000000000ull) {
			recheck_targets(d);
			last_check = now;
		}
		left = (int64_t)(d->win_end - fx_now_ns(CLOCK_MONOTONIC)) / 1000000;
		ret = read_rings(d, left < 0 ? 0 : left < 200 ? (int)left + 1 : 200);
		if (ret < 0)
			goto out;
	}
	begin_stop(d);
	fx_service_notify("STOPPING=1\nSTATUS=writing the last window");
	said_stopping = true;
	/* Stopped: the partial window is written too. */
	fx_sampler_disable(d->sampler);
	fx_sampler_flush(d->sampler, fx_recorder_handle, &d->rec);
	rotate(d, fx_now_ns(CLOCK_MONOTONIC));
	ret = 0;
out:
	if (!said_stopping)
		fx_service_notifyf("STOPPING=1\nSTATUS=failed: %s", strerror(-ret));
	teardown(d);
	if (stats)
		*stats = d->stats;
	free(d);
	return ret;
}

/* SPDX-License-Identifier: MIT */
#include "fxagent/daemon.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "fxagent/cgroup.h"
#include "fxagent/kallsyms.h"
#include "fxagent/log.h"
#include "fxagent/objects.h"
#include "fxagent/procs.h"
#include "fxagent/recorder.h"
#include "fxagent/report.h"
#include "fxagent/sampler.h"
#include "fxagent/shipper.h"
#include "fxagent/spool.h"
#include "fxagent/symbolize.h"
#include "fxagent/unwind.h"
#include "fxagent/util.h"
#include "fxagent/window.h"

#define TAG_ROOT	   (UINT32_MAX - 1) /* the root cgroup: samples for process/pid targets */
#define MAX_OPEN_OBJECTS   8192
#define UNWIND_CACHE_PROCS 256

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

struct job {
	struct target_rt *t;
	struct fx_window *win;
	struct fx_thread_name *names;
	size_t nnames;
};

struct batch {
	struct batch *next;
	int64_t seq;
	uint64_t start_mono, end_mono;
	double start_wall_ms, end_wall_ms;
	size_t njobs;
	struct job jobs[];
};

struct daemon {
	const struct fx_config *cfg;
	struct fx_sampler *sampler;
	struct fx_objects *objs;
	struct fx_procs *procs;
	struct fx_unwinder *unwinder;
	struct fx_recorder rec;
	struct target_rt *t;
	size_t nt;
	bool cgroup_mode;
	bool filter_procs; /* process/pid targets present */
	char mount[PATH_MAX];
	uint64_t win_start, win_end; /* CLOCK_MONOTONIC */
	int64_t wall_minus_mono;     /* ns */
	int64_t seq;
	char host[256];
	/* publisher */
	pthread_t pub;
	bool pub_started;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	struct batch *head, *tail;
	bool quit;
	struct fx_shipper *shipper; /* NULL without upload.url */
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
			fx_log(FX_LOG_NOTICE,
			       "target %s: %s has no cgroup yet; looking again every "
			       "window",
			       t->name, t->cfg->value);
		t->said_missing = true;
		return;
	}
	snprintf(t->cg_path, sizeof(t->cg_path), "%s", rel);
	if (id != t->cg_id) {
		if (t->cg_id)
			fx_sampler_remove_cgroup(d->sampler, (uint32_t)i);
		ret = fx_sampler_add_cgroup(d->sampler, fd, (uint32_t)i);
		if (ret < 0) {
			fx_log(FX_LOG_ERR, "target %s: cannot sample cgroup %s: %s", t->name, rel,
			       strerror(-ret));
			t->cg_id = 0;
		} else {
			fx_log(t->said_missing || t->cg_id ? FX_LOG_NOTICE : FX_LOG_INFO,
			       "target %s: sampling cgroup %s", t->name, rel);
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
	/* A ring does not say whose samples it lost: every window says it. */
	for (size_t i = 0; i < d->nt; i++)
		d->t[i].win->counters.lost += count;
}

static void publish(struct daemon *d, struct batch *b)
{
	pthread_mutex_lock(&d->mu);
	if (d->tail)
		d->tail->next = b;
	else
		d->head = b;
	d->tail = b;
	pthread_cond_signal(&d->cv);
	pthread_mutex_unlock(&d->mu);
}

/* Closes the open windows at @end (CLOCK_MONOTONIC) and opens the next ones.
 * This is all the sampler thread spends on a window change. */
static void rotate(struct daemon *d, uint64_t end)
{
	uint64_t t0 = fx_now_ns(CLOCK_MONOTONIC), c0 = fx_now_ns(CLOCK_THREAD_CPUTIME_ID), took,
		 cpu;
	struct batch *b = calloc(1, sizeof(*b) + d->nt * sizeof(struct job));

	if (b) {
		b->seq = d->seq;
		b->start_mono = d->win_start;
		b->end_mono = end;
		/* Integer nanoseconds to milliseconds once: a boundary stays exact. */
		b->start_wall_ms = (double)((int64_t)d->win_start + d->wall_minus_mono) / 1e6;
		b->end_wall_ms = (double)((int64_t)end + d->wall_minus_mono) / 1e6;
		for (size_t i = 0; i < d->nt; i++) {
			struct fx_window *fresh = window_new(d->cfg);
			struct job *j = &b->jobs[b->njobs];

			if (!fresh)
				break; /* out of memory: this target's window goes on */
			j->t = &d->t[i];
			j->win = d->t[i].win;
			if (fx_procs_names(d->procs, j->win, &j->names, &j->nnames) < 0)
				j->nnames = 0;
			d->stats.samples += j->win->counters.samples;
			d->t[i].win = fresh;
			b->njobs++;
		}
		publish(d, b);
	}
	d->seq++;
	d->stats.windows++;
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

	/* Rotation follows the samples' own clock: each lands in one window. */
	while (time_ns >= d->win_end)
		rotate(d, d->win_end);
}

/* ---- publisher thread ---- */

static void chunk_path(const struct daemon *d, const struct batch *b, const struct job *j,
		       char *out, size_t len)
{
	time_t sec = (time_t)(b->start_wall_ms / 1000);
	struct tm tm;
	char ts[32];

	gmtime_r(&sec, &tm);
	strftime(ts, sizeof(ts), "%Y%m%dT%H%M%SZ", &tm);
	snprintf(out, len, "%s/%s-%s-%06" PRId64 ".json.gz", d->cfg->output.directory, j->t->name,
		 ts, b->seq);
}

static void write_batch(struct daemon *d, struct fx_symbolizer *sym, const struct fx_kallsyms *ks,
			struct batch *b)
{
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
				.interval_ms = 1000.0 / d->cfg->sampling.frequency,
				.product = "fxagent",
				.host = d->host,
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

		if (d->shipper) {
			/* Into the spool first: nothing is lost if the upload fails. */
			snprintf(info.target, sizeof(info.target), "%s", j->t->name);
			fx_spool_new_id(&info);
			fx_spool_path(fx_shipper_spool(d->shipper), &info, path, sizeof(path));
		} else {
			chunk_path(d, b, j, path, sizeof(path));
		}
		if (fx_report_write(&in, path, &rs) == 0) {
			__atomic_add_fetch(&d->stats.chunks, 1, __ATOMIC_RELAXED);
			fx_log(FX_LOG_INFO, "wrote %s: %" PRIu64 " samples, %" PRIu64 " bytes",
			       path, rs.profile.samples, rs.profile.bytes);
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
	free(b);
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

static void *publisher(void *arg)
{
	struct daemon *d = arg;
	const char *const *dirs = (const char *const *)d->cfg->symbolization.debug_dirs;
	struct fx_symbolizer_opts so = { .debug_dirs =
						 d->cfg->symbolization.ndebug_dirs ? dirs : NULL,
					 .no_demangle = !d->cfg->symbolization.demangle };
	struct fx_symbolizer *sym = fx_symbolizer_new(&so);
	struct fx_kallsyms *ks = NULL;
	uint64_t ks_modules = 0;

	for (;;) {
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
		if (d->cfg->sampling.kernel_stacks) {
			uint64_t h = modules_hash();

			/* Modules come and go: read the kernel's symbols again then. */
			if (!ks || h != ks_modules) {
				fx_kallsyms_free(ks);
				ks = fx_kallsyms_load("/proc/kallsyms");
				ks_modules = h;
			}
		}
		if (sym)
			write_batch(d, sym, ks, b);
		if (d->shipper) {
			struct fx_shipper_stats st;

			fx_shipper_get_stats(d->shipper, &st);
			fx_log(FX_LOG_INFO,
			       "upload: %" PRIu64 " chunks uploaded, %" PRIu64 " retried, %" PRIu64
			       " rejected, %" PRIu64 " dropped; %" PRIu64 " pending (%" PRIu64
			       " bytes)",
			       st.uploaded, st.retried, st.rejected, st.dropped, st.pending,
			       st.spool_bytes);
		}
	}
	fx_kallsyms_free(ks);
	fx_symbolizer_free(sym);
	return NULL;
}

/* ---- set-up ---- */

/* The output directory, made if missing and writable. */
static int make_dirs(const char *path)
{
	int rc = fx_mkdir_parents(path);

	return rc < 0 ? rc : access(path, W_OK | X_OK) < 0 ? -errno : 0;
}

static int setup_targets(struct daemon *d)
{
	const struct fx_config *cfg = d->cfg;
	size_t n = cfg->ntargets ? cfg->ntargets : 1;

	d->t = calloc(n, sizeof(*d->t));
	if (!d->t)
		return -ENOMEM;
	d->nt = n;
	for (size_t i = 0; i < n; i++) {
		struct target_rt *t = &d->t[i];
		const struct fx_target *tc = cfg->ntargets ? &cfg->targets[i] : NULL;
		size_t nl = cfg->nlabels + (tc ? tc->nlabels : 0), k = 0;

		t->cfg = tc;
		t->name = tc ? tc->name : "system";
		t->cgroup = tc && is_cgroup_kind(tc);
		d->cgroup_mode |= t->cgroup;
		d->filter_procs |= tc && !t->cgroup;
		t->win = window_new(cfg);
		t->labels = calloc(nl + 1, sizeof(*t->labels));
		if (!t->win || !t->labels)
			return -ENOMEM;
		for (size_t l = 0; l < cfg->nlabels; l++)
			t->labels[k++] =
				(struct fx_profile_kv){ cfg->labels[l].key, cfg->labels[l].value };
		for (size_t l = 0; tc && l < tc->nlabels; l++)
			t->labels[k++] =
				(struct fx_profile_kv){ tc->labels[l].key, tc->labels[l].value };
		t->nlabels = k;
	}
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
	}
	/* One more upload round for what the last window left, bounded. */
	fx_shipper_stop(d->shipper, d->cfg->upload.timeout_ms + 1000);
	for (struct batch *b = d->head, *next; b; b = next) {
		next = b->next;
		for (size_t i = 0; i < b->njobs; i++) {
			window_free(b->jobs[i].win);
			free(b->jobs[i].names);
		}
		free(b);
	}
	for (size_t i = 0; i < d->nt; i++) {
		window_free(d->t[i].win);
		free(d->t[i].labels);
	}
	free(d->t);
	fx_unwind_free(d->unwinder);
	fx_procs_free(d->procs);
	fx_objects_free(d->objs);
	fx_sampler_free(d->sampler);
	pthread_cond_destroy(&d->cv);
	pthread_mutex_destroy(&d->mu);
}

int fx_daemon_run(const struct fx_config *cfg, volatile sig_atomic_t *stop,
		  struct fx_daemon_stats *stats)
{
	const uint64_t wlen = (uint64_t)cfg->window.seconds * 1000000000ull;
	struct fx_sampler_opts so = { .frequency = cfg->sampling.frequency,
				      .kernel = cfg->sampling.kernel_stacks,
				      .user_regs_stack = cfg->sampling.dwarf,
				      .stack_bytes = cfg->sampling.stack_bytes };
	struct fx_unwind_opts uo = { .mode = cfg->sampling.dwarf ? FX_UNWIND_DWARF : FX_UNWIND_FP,
				     .kernel = cfg->sampling.kernel_stacks,
				     .max_procs = UNWIND_CACHE_PROCS };
	struct fx_recorder_opts ro = { .include_idle = cfg->sampling.include_idle };
	struct fx_recorder_sink sink;
	struct daemon *d = calloc(1, sizeof(*d));
	uint64_t wall, mono, last_check = 0;
	int ret;

	if (!d)
		return -ENOMEM;
	d->cfg = cfg;
	pthread_mutex_init(&d->mu, NULL);
	pthread_cond_init(&d->cv, NULL);
	gethostname(d->host, sizeof(d->host) - 1);
	if (fx_config_label(cfg, "host"))
		snprintf(d->host, sizeof(d->host), "%s", fx_config_label(cfg, "host"));
	ret = make_dirs(cfg->output.directory);
	if (ret < 0) {
		fx_log(FX_LOG_ERR, "cannot write chunks to '%s' (output.directory): %s",
		       cfg->output.directory, strerror(-ret));
		goto out;
	}
	ret = setup_targets(d);
	if (ret < 0)
		goto out;
	if (cfg->upload.url) {
		ret = fx_shipper_start(cfg, d->host, &d->shipper);
		if (ret < 0)
			goto out;
	}
	if (d->cgroup_mode) {
		ret = fx_cgroup_find_mount("/proc/self/mountinfo", d->mount, sizeof(d->mount));
		if (ret < 0)
			goto out;
	}
	so.cgroups = d->cgroup_mode;
	ret = fx_sampler_open(&so, &d->sampler);
	if (ret < 0)
		goto out;
	d->objs = fx_objects_new("/proc", MAX_OPEN_OBJECTS);
	d->procs = d->objs ? fx_procs_new(d->objs, "/proc") : NULL;
	uo.objs = d->objs;
	d->unwinder = d->procs ? fx_unwind_new(&uo) : NULL;
	if (!d->unwinder) {
		ret = -ENOMEM;
		goto out;
	}
	if (d->cgroup_mode) {
		int fd;
		uint64_t id;

		resolve_targets(d);
		/* process and pid targets next to cgroup ones: the root cgroup
		 * samples everything, filtered here. */
		if (d->filter_procs) {
			ret = fx_cgroup_open(d->mount, "/", &fd, &id);
			if (ret == 0) {
				ret = fx_sampler_add_cgroup(d->sampler, fd, TAG_ROOT);
				close(fd);
			}
			if (ret < 0) {
				fx_log(FX_LOG_ERR,
				       "cannot sample the root cgroup for process "
				       "targets: %s",
				       strerror(-ret));
				goto out;
			}
		}
	}
	fx_recorder_init(&d->rec, &ro, fx_sampler_fmt(d->sampler), d->procs, d->unwinder,
			 d->t[0].win);
	sink = (struct fx_recorder_sink){
		.before_sample = before_sample, .route = route, .lost = on_lost, .ctx = d
	};
	fx_recorder_set_sink(&d->rec, &sink);
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
	/* Windows align to the wall clock: the first one ends at the next
	 * multiple of the window length since the epoch. */
	d->win_start = mono;
	d->win_end = mono + (wlen - wall % wlen);
	ret = fx_sampler_enable(d->sampler);
	if (ret < 0)
		goto out;
	fx_log(FX_LOG_NOTICE, "sampling %s at %u Hz, %u s windows, chunks %s %s",
	       cfg->ntargets ? "the configured targets" : "the whole system",
	       cfg->sampling.frequency, cfg->window.seconds,
	       cfg->upload.url ? "uploaded from the spool in" : "in",
	       cfg->upload.url ? cfg->spool.directory : cfg->output.directory);
	while (!*stop) {
		uint64_t now = fx_now_ns(CLOCK_MONOTONIC);
		int64_t left;

		if (now >= d->win_end)
			rotate(d, d->win_end);
		if (d->cgroup_mode && now - last_check >= 1000000000ull) {
			recheck_targets(d);
			last_check = now;
		}
		left = (int64_t)(d->win_end - fx_now_ns(CLOCK_MONOTONIC)) / 1000000;
		ret = fx_sampler_poll(d->sampler,
				      left < 0	   ? 0
				      : left < 200 ? (int)left + 1
						   : 200,
				      fx_recorder_handle, &d->rec);
		if (ret < 0) {
			fx_log(FX_LOG_ERR, "reading perf rings failed: %s", strerror(-ret));
			goto out;
		}
	}
	/* Stopped: the partial window is written too. */
	fx_sampler_disable(d->sampler);
	fx_sampler_flush(d->sampler, fx_recorder_handle, &d->rec);
	rotate(d, fx_now_ns(CLOCK_MONOTONIC));
	ret = 0;
out:
	teardown(d);
	if (stats)
		*stats = d->stats;
	free(d);
	return ret;
}

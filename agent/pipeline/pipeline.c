/* SPDX-License-Identifier: MIT */
/* The pipeline's sampling side: sources into windows, windows into batches.
 * Everything here runs on the caller's (sampling) thread. */
#include "fxagent/pipeline.h"

#include <errno.h>
#include <inttypes.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "fxagent/cgroup.h"
#include "fxagent/dwunwind.h"
#include "fxagent/log.h"
#include "fxagent/offcpu.h"
#include "fxagent/profile.h"
#include "fxagent/util.h"
#include "pipeline_int.h"

#define MAX_OPEN_OBJECTS   8192
#define UNWIND_CACHE_PROCS 256
/* Processes asked about at each window change whether they are gone without
 * an EXIT record: up to this many access() calls, about a millisecond on the
 * sampling thread, every process in turn. */
#define REAP_BUDGET 512

/* ---- recorder hooks ---- */

/* Closed windows that may wait for the publisher while it writes another.
 * Past that, the open window stays open: a publisher slower than the
 * windows (a slow or starved host, a big first symbolization) gets longer
 * windows to write, which cost less per sample (their stacks are shared),
 * and the windows held and the time a stop takes to write what is left stay
 * bounded. No sample is dropped for it; the open window's samples grow with
 * the delay (its distinct stacks are bounded by window.max_stacks). */
#define MAX_WAITING 2

static void rotate(struct fx_pipeline *p, uint64_t end);
static uint64_t window_end(const struct fx_pipeline *p, uint64_t start);

/* The open window's end came: close it, or keep it one window longer while
 * the publisher is behind. */
static void next_window(struct fx_pipeline *p)
{
	size_t waiting = p->opts.thread ? pipe_publish_waiting(p->pub) : 0;

	if (waiting >= MAX_WAITING) {
		if (!p->stretching)
			fx_log(FX_LOG_WARN,
			       "writing chunks takes longer than the windows last (%zu windows "
			       "wait): window %" PRId64 " stays open until they are written",
			       waiting, p->seq);
		p->stretching = true;
		__atomic_add_fetch(&p->stats.stretched, 1, __ATOMIC_RELAXED);
		p->win_end = window_end(p, p->win_end);
		return;
	}
	/* Said again only after the writer has caught up: a writer that stays
	 * slow (--check-names, a starved host) is said once, not per window. */
	if (!waiting)
		p->stretching = false;
	rotate(p, p->win_end);
}

/* Rotation follows the records' own clock: each sample and each LOST record
 * lands in the window its time falls in. Held (a reload pending), the driver
 * cuts the window instead. */
static void advance(struct fx_pipeline *p, uint64_t time_ns)
{
	while (time_ns >= p->win_end && !p->hold)
		next_window(p);
}

static void before_sample(void *ctx, uint64_t time_ns)
{
	advance(ctx, time_ns);
}

static void on_lost(void *ctx, uint64_t time_ns, uint64_t count)
{
	struct fx_pipeline *p = ctx;

	/* A LOST record read after its window closed stays in the open one,
	 * and the report places its marker at that window's start. */
	advance(p, time_ns);
	p->tot.lost += count;
	__atomic_add_fetch(&p->stats.lost, count, __ATOMIC_RELAXED);
	/* A ring does not say whose samples it lost: every window says it. */
	for (size_t i = 0; i < p->g->nt; i++) {
		struct target_rt *t = &p->g->t[i];

		t->win->counters.lost += count;
		if (t->lost->n < FX_RECORDER_MAX_LOST_EVENTS)
			t->lost->ev[t->lost->n++] =
				(struct fx_lost_event){ .time_ns = time_ns, .count = count };
		else
			t->lost->ev[t->lost->n - 1].count += count; /* the last takes the rest */
	}
}

/* ---- windows ---- */

static void mark_objects(struct fx_pipeline *p, const struct fx_window *w)
{
	if (w && w->nframes)
		fx_objects_mark(p->objs, &w->frames[0].object, w->nframes, sizeof(w->frames[0]));
}

/* The sampling thread's caches, for the metrics file. */
static void collect_caches(const struct fx_pipeline *p, struct sampler_caches *c)
{
	const struct fx_dwunwind *dw = p->unwinder ? fx_unwind_dwarf(p->unwinder) : NULL;
	struct fx_dwunwind_stats ds;
	struct fx_cfitab_stats ts;
	struct fx_jitunw_stats js;

	fx_procs_get_stats(p->procs, &c->procs);
	c->unwind = dw != NULL;
	c->unwind_evicted = p->unwind_evicted_base;
	c->cfi_evicted = p->cfi_evicted_base;
	if (dw) {
		fx_dwunwind_get_stats(dw, &ds);
		fx_dwunwind_table_stats(dw, &ts);
		c->unwind_live = ds.live;
		c->unwind_evicted += ds.evicted + ds.idle_dropped;
		c->cfi_tables = ts.objects;
		c->cfi_bytes = ts.bytes;
		c->cfi_evicted += ts.evicted + ts.idle_dropped;
		fx_dwunwind_jit_stats(dw, &js);
		c->jit_ranges = js.ranges;
		c->jit_bytes = js.bytes;
		c->jit_dropped = js.idle_dropped + js.over_bound;
	}
}

/* Moves target @t's open window into @j; with @reopen, a fresh one takes its
 * place. Returns false when out of memory for the fresh one. */
static bool take_window(struct fx_pipeline *p, struct target_rt *t, struct job *j, bool reopen)
{
	struct fx_window *fresh = reopen ? pipe_targets_window_take(p, p->g->cfg) : NULL;
	struct lost_log *fresh_lost = reopen ? calloc(1, sizeof(*fresh_lost)) : NULL;

	if (reopen && (!fresh || !fresh_lost)) {
		pipe_targets_window_free(fresh);
		free(fresh_lost);
		return false; /* this target's window goes on */
	}
	j->t = t;
	j->win = t->win;
	j->lost = t->lost;
	if (fx_procs_names(p->procs, j->win, &j->names, &j->nnames) < 0)
		j->nnames = 0;
	p->tot.samples += j->win->counters.samples;
	p->tot.waits += j->win->counters.waits;
	p->tot.wait_us += j->win->counters.wait_us;
	p->tot.waits_unstacked += j->win->counters.waits_unstacked;
	p->tot.waits_unstacked_us += j->win->counters.waits_unstacked_us;
	p->tot.truncated += j->win->counters.truncated;
	p->tot.dropped += j->win->counters.dropped_stacks;
	t->win = fresh;
	t->lost = fresh_lost;
	return true;
}

/* Closes the open windows at @end (CLOCK_MONOTONIC) and hands them to the
 * publisher. With @reopen, fresh windows take their place; without, the
 * targets are left without windows (a reconfigure replaces them). */
/* The waits lost since the last window (the program's ring, the agent's
 * queue and bound, ends without their start): a loss is not a target's, so
 * every window says it, as lost samples. */
static void count_wait_lost(struct fx_pipeline *p)
{
	const struct fx_offcpu *o = p->sampler ? fx_sampler_offcpu(p->sampler) : NULL;
	struct fx_offcpu_stats st;
	uint64_t n, ns;

	if (!o)
		return;
	fx_offcpu_get_stats(o, &st);
	n = st.lost + p->rec.counters.waits_lost + p->rec.counters.waits_unpaired;
	ns = st.lost_ns + p->rec.counters.waits_lost_ns;
	for (size_t i = 0; i < p->g->nt; i++) {
		struct fx_window *w = p->g->t[i].win;

		w->counters.waits_lost += n - p->wait_lost;
		w->counters.waits_lost_us += (ns - p->wait_lost_ns) / 1000;
	}
	p->tot.waits_lost += n - p->wait_lost;
	p->tot.waits_lost_us += (ns - p->wait_lost_ns) / 1000;
	p->wait_lost = n;
	p->wait_lost_ns = ns;
}

/* The agent's log says an episode of waits over the budget or lost once
 * when it begins, with the first window's figures, and once when it ends
 * (a window within the budget, or the agent's last), with the episode's
 * (the daemon's; --once says its own at the end). */
static void say_wait_episode(struct fx_pipeline *p, const struct totals *before)
{
	const struct totals d = {
		.waits = p->tot.waits - before->waits,
		.wait_us = p->tot.wait_us - before->wait_us,
		.waits_unstacked = p->tot.waits_unstacked - before->waits_unstacked,
		.waits_unstacked_us = p->tot.waits_unstacked_us - before->waits_unstacked_us,
		.waits_lost = p->tot.waits_lost - before->waits_lost,
		.waits_lost_us = p->tot.waits_lost_us - before->waits_lost_us,
	};
	const struct totals *say = &d;
	struct fx_profile_marker m;
	struct totals *e = &p->episode;
	bool over = d.waits_unstacked || d.waits_lost, begins = over && !p->episode_windows;
	char sum[512];

	if (!p->opts.rotate || (!over && !p->episode_windows))
		return;
	if (over) {
		e->waits += d.waits;
		e->wait_us += d.wait_us;
		e->waits_unstacked += d.waits_unstacked;
		e->waits_unstacked_us += d.waits_unstacked_us;
		e->waits_lost += d.waits_lost;
		e->waits_lost_us += d.waits_lost_us;
		p->episode_windows++;
	}
	if (!begins && over && !p->hold)
		return; /* said when it began; said when it ends */
	if (!begins)
		say = e;
	m = (struct fx_profile_marker){ .waits = (int64_t)say->waits,
					.wait_ms = (double)say->wait_us / 1000,
					.unstacked = (int64_t)say->waits_unstacked,
					.unstacked_ms = (double)say->waits_unstacked_us / 1000,
					.waits_lost = (int64_t)say->waits_lost,
					.lost_ms = (double)say->waits_lost_us / 1000 };
	fx_profile_offcpu_summary(&m, sum, sizeof(sum));
	if (begins)
		fx_log(FX_LOG_WARN,
		       "off-CPU: window %" PRIu64 ": %s (sampling.off_cpu.budget: %u a second "
		       "per CPU); said again when it ends",
		       p->seq, sum, p->g->cfg->sampling.off_cpu.budget);
	else
		fx_log(FX_LOG_NOTICE, "off-CPU: %s after %" PRIu64 " windows: %s",
		       over ? "the agent stops over the budget" : "within the budget again",
		       p->episode_windows, sum);
	if (!begins || p->hold) {
		p->episode_windows = 0;
		memset(e, 0, sizeof(*e));
	}
}

/* Keeps @cur (@n threads' counters) as the open window's start; none when
 * memory runs out. */
static void keep_tally(struct fx_pipeline *p, const struct fx_offcpu_thread *cur, ssize_t n)
{
	p->ntally = 0;
	if (n <= 0 || fx_grow(&p->tally, &p->tally_cap, (size_t)n, sizeof(*p->tally)) < 0)
		return;
	memcpy(p->tally, cur, (size_t)n * sizeof(*cur));
	p->ntally = (size_t)n;
}

/* The watched threads' counters, as the open window's start. */
static void tally_start(struct fx_pipeline *p)
{
	struct fx_offcpu *o = p->sampler ? fx_sampler_offcpu(p->sampler) : NULL;
	const struct fx_offcpu_thread *cur = NULL;
	ssize_t n = o ? fx_offcpu_tally(o, &cur) : 0;

	keep_tally(p, cur, n);
}

static int cmp_thread_tid(const void *key, const void *elem)
{
	uint32_t a = *(const uint32_t *)key, b = ((const struct fx_offcpu_thread *)elem)->tid;

	return a < b ? -1 : a > b;
}

/* The kernel's times of the watched threads in the window that ends now,
 * from their counters now and at its start (in p->times, by tid); and
 * those counters become the next window's start. Returns how many. */
static size_t tally_window(struct fx_pipeline *p)
{
	struct fx_offcpu *o = p->sampler ? fx_sampler_offcpu(p->sampler) : NULL;
	const struct fx_offcpu_thread *cur;
	ssize_t n = o ? fx_offcpu_tally(o, &cur) : 0;
	size_t k = 0;

	if (n <= 0 || fx_grow(&p->times, &p->times_cap, (size_t)n, sizeof(*p->times)) < 0) {
		p->ntally = 0;
		return 0;
	}
	for (size_t i = 0; i < (size_t)n; i++) {
		const struct fx_offcpu_thread *c = &cur[i], *was;

		was = bsearch(&c->tid, p->tally, p->ntally, sizeof(*p->tally), cmp_thread_tid);
		if (was && was->start_ns == c->start_ns && c->at_ns >= was->at_ns &&
		    c->on_ns >= was->on_ns && c->runq_ns >= was->runq_ns)
			p->times[k++] = (struct fx_window_thread_time){
				.tid = c->tid,
				.alive_ns = c->at_ns - was->at_ns,
				.on_ns = c->on_ns - was->on_ns,
				.runq_ns = c->runq_ns - was->runq_ns,
			};
		else if (c->start_ns >= p->win_start && c->at_ns >= c->start_ns)
			p->times[k++] = (struct fx_window_thread_time){
				.tid = c->tid,
				.alive_ns = c->at_ns - c->start_ns,
				.on_ns = c->on_ns,
				.runq_ns = c->runq_ns,
			};
		/* else: no counters from the window's start (a tally failed) */
	}
	keep_tally(p, cur, n);
	return k;
}

static void close_windows(struct fx_pipeline *p, uint64_t end, bool reopen)
{
	struct gen *g = p->g;
	struct totals before = p->tot;
	struct batch *b;

	/* Threads still waiting show their wait so far in this window; each
	 * thread's time in each state is that of all its drawn waits. */
	size_t ntimes;

	fx_recorder_cut_waits(&p->rec, end);
	ntimes = tally_window(p);
	fx_recorder_note_waiters(&p->rec, p->times, ntimes, end ? end - 1 : 0);
	for (size_t i = 0; i < g->nt; i++)
		fx_window_fold_waits(g->t[i].win, p->times, ntimes);
	count_wait_lost(p);
	b = calloc(1, sizeof(*b) + g->nt * sizeof(struct job));

	if (b) {
		b->g = g;
		b->seq = p->seq;
		b->start_mono = p->win_start;
		b->end_mono = end;
		/* Integer nanoseconds to milliseconds once: a boundary stays exact. */
		b->start_wall_ms = (double)((int64_t)p->win_start + p->wall_minus_mono) / 1e6;
		b->end_wall_ms = (double)((int64_t)end + p->wall_minus_mono) / 1e6;
		for (size_t i = 0; i < g->nt; i++) {
			if (!take_window(p, &g->t[i], &b->jobs[b->njobs], reopen))
				break;
			b->njobs++;
		}
	}
	say_wait_episode(p, &before);
	p->seq++;
	p->tot.windows++;
	__atomic_add_fetch(&p->stats.windows, 1, __ATOMIC_RELAXED);
	p->tot.targets = g->nt;
	p->tot.attached = 0;
	for (size_t i = 0; i < g->nt; i++)
		p->tot.attached += g->t[i].cgroup ? g->t[i].cg_id != 0 : 1;
	__atomic_store_n(&p->stats.samples, p->tot.samples, __ATOMIC_RELAXED);
	if (!b)
		return;
	/* What these windows, the live processes and any window left open
	 * (out of memory for a fresh one) use keeps its fd until the publisher
	 * has written them. */
	for (size_t i = 0; i < b->njobs; i++)
		mark_objects(p, b->jobs[i].win);
	for (size_t i = 0; i < g->nt; i++)
		mark_objects(p, g->t[i].win);
	fx_procs_mark_objects(p->procs);
	b->epoch = fx_objects_end_epoch(p->objs);
	b->tot = p->tot;
	collect_caches(p, &b->caches);
	pipe_publish_push(p->pub, b);
}

/* The end of the window that starts at @start: the next multiple of the
 * window length since the epoch (windows align to the wall clock). */
static uint64_t window_end(const struct fx_pipeline *p, uint64_t start)
{
	uint64_t wlen = (uint64_t)p->g->cfg->window.seconds * 1000000000ull;
	uint64_t wall = (uint64_t)((int64_t)start + p->wall_minus_mono);

	if (!p->opts.rotate)
		return UINT64_MAX;
	return start + (wlen - wall % wlen);
}

static void debug_state(struct fx_pipeline *p, size_t reaped)
{
	struct fx_dwunwind_stats ds;

	if (fx_log_get_level() < FX_LOG_DEBUG)
		return;
	if (fx_unwind_dwarf(p->unwinder)) {
		fx_dwunwind_get_stats(fx_unwind_dwarf(p->unwinder), &ds);
		fx_debug("dwarf: %" PRIu64 " processes cached, %" PRIu64 " created, %" PRIu64
			 " evicted, %" PRIu64 " dropped idle",
			 ds.live, ds.dwfl_new, ds.evicted, ds.idle_dropped);
	}
	if (reaped)
		fx_debug("procs: %zu processes gone without an EXIT record", reaped);
}

/* Closes the open windows at @end and opens the next ones. This is all the
 * sampling thread spends on a window change. */
static void rotate(struct fx_pipeline *p, uint64_t end)
{
	uint64_t t0 = fx_now_ns(CLOCK_MONOTONIC), c0 = fx_now_ns(CLOCK_THREAD_CPUTIME_ID), took,
		 cpu;
	struct fx_pipeline_stats *st = &p->stats;

	close_windows(p, end, true);
	/* Processes that did not run for a whole window give their Dwfl back,
	 * and their entries in the process table. */
	fx_unwind_drop_idle(p->unwinder, p->unwind_mark);
	p->unwind_mark = fx_unwind_mark(p->unwinder);
	fx_procs_drop_idle(p->procs, p->procs_mark);
	p->procs_mark = fx_procs_mark(p->procs);
	debug_state(p, fx_procs_reap_gone(p->procs, REAP_BUDGET));
	fx_procs_sweep(p->procs);
	pipe_targets_resolve(p);
	p->win_start = end;
	p->win_end = window_end(p, end);
	took = fx_now_ns(CLOCK_MONOTONIC) - t0;
	cpu = fx_now_ns(CLOCK_THREAD_CPUTIME_ID) - c0;
	st->rotation_ns_sum += took;
	st->rotation_cpu_ns_sum += cpu;
	if (took > st->rotation_ns_max)
		st->rotation_ns_max = took;
	if (cpu > st->rotation_cpu_ns_max)
		st->rotation_cpu_ns_max = cpu;
}

/* ---- sources ---- */

static struct fx_sampler_opts sampler_opts(const struct fx_config *cfg, bool cgroups)
{
	return (struct fx_sampler_opts){
		.frequency = cfg->sampling.frequency,
		.kernel = cfg->sampling.kernel_stacks,
		.user_regs_stack = cfg->sampling.dwarf,
		.stack_bytes = cfg->sampling.stack_bytes,
		.ring_pages = cfg->sampling.ring_bytes / (size_t)sysconf(_SC_PAGESIZE),
		.cgroups = cgroups,
	};
}

int fx_pipeline_ring_plan(const struct fx_config *cfg, struct fx_ringplan *out, char *msg,
			  size_t len)
{
	/* Cgroup mode's events write into the per-CPU rings: the same rings. */
	struct fx_sampler_opts so = sampler_opts(cfg, false);

	return fx_sampler_plan(&so, out, msg, len);
}

/* The off-CPU waits of the sampled threads, into the sampler's records. One
 * the kernel cannot give is said once, and CPU sampling goes on. */
static void open_offcpu(struct fx_pipeline *p, const struct fx_sampler_opts *so)
{
	const struct fx_config *cfg = p->g->cfg;
	struct fx_sampler_stats st;
	struct fx_offcpu_opts oo = {
		.min_block_ns = fx_config_min_block_ns(cfg),
		.budget = cfg->sampling.off_cpu.budget,
		.stack_bytes = so->user_regs_stack ? so->stack_bytes : 0,
		.kernel = so->kernel,
		.pids = p->opts.pids,
		.npids = p->opts.npids,
		.cgroups = so->cgroups,
	};
	struct fx_offcpu *o;
	char why[512];
	int ret;

	fx_sampler_get_stats(p->sampler, &st);
	oo.cpus = st.cpus;
	ret = fx_offcpu_open(&oo, fx_sampler_fmt(p->sampler), &o, why, sizeof(why));
	if (ret < 0) {
		fx_log(FX_LOG_WARN, "off-CPU time is not recorded: %s; CPU profiling goes on", why);
		return;
	}
	fx_sampler_set_offcpu(p->sampler, o);
}

/* Opens the perf events (disabled), the unwinder and the recorder for the
 * current config. */
static int open_sampling(struct fx_pipeline *p)
{
	const struct fx_config *cfg = p->g->cfg;
	struct fx_sampler_opts so = sampler_opts(cfg, p->g->cgroup_mode);
	struct fx_unwind_opts uo = { .mode = cfg->sampling.dwarf ? FX_UNWIND_DWARF : FX_UNWIND_FP,
				     .kernel = cfg->sampling.kernel_stacks,
				     .max_procs = UNWIND_CACHE_PROCS,
				     .engine = (enum fx_dwunwind_engine)cfg->sampling.dwarf_engine,
				     .jit = cfg->symbolization.jit,
				     .objs = p->objs };
	struct fx_recorder_opts ro = { .include_idle = cfg->sampling.include_idle,
				       .pids = p->opts.pids,
				       .npids = p->opts.npids };
	struct fx_recorder_sink sink = { .before_sample = before_sample,
					 .route = pipe_targets_route,
					 .lost = on_lost,
					 .ctx = p };
	int ret;

	if (p->g->cgroup_mode && !p->mount[0]) {
		ret = fx_cgroup_find_mount("/proc/self/mountinfo", p->mount, sizeof(p->mount));
		if (ret < 0)
			return ret;
	}
	ret = fx_sampler_open(&so, &p->sampler);
	if (ret < 0)
		return ret;
	if (fx_config_any_off_cpu(cfg))
		open_offcpu(p, &so);
	p->unwinder = fx_unwind_new(&uo);
	if (!p->unwinder)
		return fx_log_errno(FX_LOG_ERR, ENOMEM, "cannot set up the unwinder");
	if (p->g->cgroup_mode) {
		pipe_targets_resolve(p);
		if (p->g->filter_procs) {
			ret = pipe_targets_add_root(p);
			if (ret < 0)
				return ret;
		}
	}
	/* Without a window: the sink routes every sample. */
	fx_recorder_init(&p->rec, &ro, fx_sampler_fmt(p->sampler), p->procs, p->unwinder, NULL);
	fx_recorder_set_sink(&p->rec, &sink);
	return 0;
}

static void close_sampling(struct fx_pipeline *p)
{
	const struct fx_dwunwind *dw = p->unwinder ? fx_unwind_dwarf(p->unwinder) : NULL;
	struct fx_dwunwind_stats ds;
	struct fx_cfitab_stats ts;

	if (dw) {
		fx_dwunwind_get_stats(dw, &ds);
		fx_dwunwind_table_stats(dw, &ts);
		p->unwind_evicted_base += ds.evicted + ds.idle_dropped;
		p->cfi_evicted_base += ts.evicted + ts.idle_dropped;
	}
	fx_unwind_free(p->unwinder);
	fx_sampler_free(p->sampler);
	fx_recorder_release(&p->rec);
	p->unwinder = NULL;
	p->sampler = NULL;
	p->wait_lost = p->wait_lost_ns = 0; /* the program's counters go with it */
}

int fx_pipeline_new(const struct fx_pipeline_opts *opts, struct fx_pipeline **out)
{
	struct fx_pipeline *p = calloc(1, sizeof(*p));
	int ret;

	if (!p)
		return fx_log_errno(FX_LOG_ERR, ENOMEM, "cannot set up the pipeline");
	p->opts = *opts;
	p->names_log_left = 20; /* a wrong name is news: a few with details */
	pthread_mutex_init(&p->gen_mu, NULL);
	pthread_mutex_init(&p->spare_mu, NULL);
	p->g = pipe_targets_gen_new(opts->cfg, NULL);
	p->objs = fx_objects_new("/proc", MAX_OPEN_OBJECTS);
	p->procs = p->objs ? fx_procs_new(p->objs, "/proc") : NULL;
	if (!p->g || !p->procs) {
		ret = fx_log_errno(FX_LOG_ERR, ENOMEM, "cannot set up the pipeline");
		goto fail;
	}
	ret = pipe_publish_new(p, &p->pub);
	if (ret < 0)
		goto fail;
	ret = open_sampling(p);
	if (ret < 0)
		goto fail;
	*out = p;
	return 0;
fail:
	fx_pipeline_free(p);
	return ret;
}

int fx_pipeline_start(struct fx_pipeline *p)
{
	uint64_t wall = fx_now_ns(CLOCK_REALTIME), mono = fx_now_ns(CLOCK_MONOTONIC);
	int ret;

	p->wall_minus_mono = (int64_t)wall - (int64_t)mono;
	p->win_start = mono;
	p->win_end = window_end(p, mono);
	ret = fx_sampler_enable(p->sampler);
	if (ret == 0)
		tally_start(p);
	return ret;
}

static int read_rings(struct fx_pipeline *p, int timeout_ms)
{
	int ret = fx_sampler_poll(p->sampler, timeout_ms, fx_recorder_handle, &p->rec);

	if (ret < 0)
		fx_log_errno(FX_LOG_ERR, -ret, "cannot read the perf rings");
	return ret;
}

int fx_pipeline_step(struct fx_pipeline *p, int max_wait_ms)
{
	uint64_t now = fx_now_ns(CLOCK_MONOTONIC), left_ms;
	int ret;

	/* The clock passed the window's end: what the rings hold from before
	 * it goes in first (before_sample() rotates at the first later
	 * sample). A reader that fell behind, on a loaded host, would otherwise
	 * put a window's samples in the next one. */
	if (now >= p->win_end) {
		ret = read_rings(p, 0);
		if (ret < 0 || p->hold)
			return ret;
		if (now >= p->win_end)
			next_window(p);
	}
	if (p->g->cgroup_mode && now - p->last_check >= 1000000000ull) {
		pipe_targets_recheck(p);
		p->last_check = now;
	}
	now = fx_now_ns(CLOCK_MONOTONIC);
	left_ms = p->win_end > now ? (p->win_end - now) / 1000000 + 1 : 0;
	return read_rings(p, left_ms < (uint64_t)max_wait_ms ? (int)left_ms : max_wait_ms);
}

uint64_t fx_pipeline_window_end(const struct fx_pipeline *p)
{
	return p->win_end;
}

void fx_pipeline_hold(struct fx_pipeline *p)
{
	p->hold = true;
}

static bool same_sampling(const struct fx_config *a, const struct fx_config *b)
{
	return a->sampling.frequency == b->sampling.frequency &&
	       a->sampling.dwarf == b->sampling.dwarf &&
	       a->sampling.dwarf_engine == b->sampling.dwarf_engine &&
	       a->sampling.stack_bytes == b->sampling.stack_bytes &&
	       a->sampling.ring_bytes == b->sampling.ring_bytes &&
	       a->sampling.kernel_stacks == b->sampling.kernel_stacks &&
	       a->sampling.include_idle == b->sampling.include_idle &&
	       a->sampling.off_cpu.enabled == b->sampling.off_cpu.enabled &&
	       fx_config_min_block_ns(a) == fx_config_min_block_ns(b) &&
	       a->sampling.off_cpu.budget == b->sampling.off_cpu.budget;
}

/* Keeps the perf events: detaches the old targets' cgroups and attaches the
 * new ones'. */
static int retarget(struct fx_pipeline *p, const struct gen *old)
{
	bool had_root = old->cgroup_mode && old->filter_procs;

	if (!p->g->cgroup_mode)
		return 0;
	for (size_t i = 0; i < old->nt; i++)
		if (old->t[i].cg_id)
			fx_sampler_remove_cgroup(p->sampler, (uint32_t)i);
	if (had_root && !p->g->filter_procs)
		fx_sampler_remove_cgroup(p->sampler, TAG_ROOT);
	pipe_targets_resolve(p);
	return p->g->filter_procs && !had_root ? pipe_targets_add_root(p) : 0;
}

int fx_pipeline_reconfigure(struct fx_pipeline *p, struct fx_config *cfg)
{
	struct gen *old = p->g, *ng = pipe_targets_gen_new(cfg, cfg);
	bool reopen;
	uint64_t cut;
	int ret;

	if (!ng) {
		p->hold = false;
		fx_config_release(cfg);
		free(cfg);
		fx_log(FX_LOG_ERR, "out of memory applying the reloaded config: the running "
				   "config stays");
		return 0;
	}
	reopen = !same_sampling(old->cfg, cfg) || ng->cgroup_mode != old->cgroup_mode ||
		 fx_config_any_off_cpu(old->cfg) != fx_config_any_off_cpu(cfg);
	pipe_publish_setenv(cfg);
	fx_sampler_disable(p->sampler);
	/* Still held: what the rings hold goes into the window being cut, not
	 * into one that a rotation would open with the old config. */
	fx_sampler_flush(p->sampler, fx_recorder_handle, &p->rec);
	cut = fx_now_ns(CLOCK_MONOTONIC);
	close_windows(p, cut, false);
	p->hold = false;
	if (reopen)
		close_sampling(p);
	p->g = ng;
	ret = reopen ? open_sampling(p) : retarget(p, old);
	pipe_targets_gen_put(p, old);
	p->win_start = cut;
	p->win_end = window_end(p, cut);
	if (ret == 0)
		ret = fx_sampler_enable(p->sampler);
	if (ret < 0)
		return fx_log_errno(FX_LOG_ERR, -ret, "cannot sample with the reloaded config");
	tally_start(p);
	fx_log(FX_LOG_NOTICE, "reloaded config applied: %zu target%s, %u s windows%s", ng->nt,
	       ng->nt == 1 ? "" : "s", cfg->window.seconds,
	       reopen ? ", perf events opened again" : "");
	return 0;
}

/* The off-CPU counters into p->stats, while the sampler is there. */
static void snap_offcpu(struct fx_pipeline *p)
{
	const struct fx_offcpu *o = p->sampler ? fx_sampler_offcpu(p->sampler) : NULL;

	if (o) {
		p->stats.off_cpu = true;
		fx_offcpu_get_stats(o, &p->stats.offcpu);
	}
	p->stats.waits_lost = p->rec.counters.waits_lost;
	p->stats.waits_unpaired = p->rec.counters.waits_unpaired;
	p->stats.waits = p->tot.waits;
	p->stats.wait_us = p->tot.wait_us;
	p->stats.waits_unstacked = p->tot.waits_unstacked;
	p->stats.waits_unstacked_us = p->tot.waits_unstacked_us;
	p->stats.waits_lost_shown = p->tot.waits_lost;
	p->stats.waits_lost_us = p->tot.waits_lost_us;
}

int fx_pipeline_finish(struct fx_pipeline *p)
{
	int ret;

	fx_sampler_disable(p->sampler);
	/* What the rings still hold belongs to the last window. */
	ret = fx_sampler_flush(p->sampler, fx_recorder_handle, &p->rec);
	if (ret < 0)
		fx_log_errno(FX_LOG_ERR, -ret, "cannot read the perf rings");
	/* A count of records is no error: the checks below, the upload's
	 * wait and the stats of --once all go by 0. */
	if (ret > 0)
		ret = 0;
	p->hold = true; /* no rotation from here */
	close_windows(p, fx_now_ns(CLOCK_MONOTONIC), false);
	if (!p->opts.thread) {
		/* The rings and the unwinder's per-process Dwfl are done with:
		 * they go before the symbolizer reads debug info, so the two
		 * peaks do not add. */
		snap_offcpu(p);
		fx_sampler_free(p->sampler);
		p->sampler = NULL;
		fx_unwind_drop_idle(p->unwinder, fx_unwind_mark(p->unwinder));
		malloc_trim(0);
	}
	pipe_publish_finish(p->pub);
	if (ret == 0 && __atomic_load_n(&p->stats.chunk_errors, __ATOMIC_RELAXED))
		ret = -EIO;
	return ret;
}

void fx_pipeline_begin_stop(struct fx_pipeline *p, uint64_t deadline_ns)
{
	pipe_publish_begin_stop(p->pub, deadline_ns);
}

int fx_pipeline_drain(struct fx_pipeline *p, uint64_t timeout_ms)
{
	return pipe_publish_drain(p->pub, timeout_ms);
}

const char *fx_pipeline_where(const struct fx_pipeline *p)
{
	return pipe_publish_where(p->pub);
}

void fx_pipeline_get_stats(struct fx_pipeline *p, struct fx_pipeline_stats *out)
{
	snap_offcpu(p);
	*out = p->stats;
	/* The publisher thread counts these while the sampling thread reads. */
	out->chunks = __atomic_load_n(&p->stats.chunks, __ATOMIC_RELAXED);
	out->chunk_errors = __atomic_load_n(&p->stats.chunk_errors, __ATOMIC_RELAXED);
	out->idle = p->rec.counters.idle;
	out->filtered = p->rec.counters.filtered;
}

const struct fx_unwinder *fx_pipeline_unwinder(const struct fx_pipeline *p)
{
	return p->unwinder;
}

void fx_pipeline_free(struct fx_pipeline *p)
{
	if (!p)
		return;
	pipe_publish_free(p->pub);
	pipe_targets_gen_put(p, p->g);
	close_sampling(p);
	fx_procs_free(p->procs);
	fx_objects_free(p->objs);
	pipe_targets_spares_free(p);
	pthread_mutex_destroy(&p->gen_mu);
	pthread_mutex_destroy(&p->spare_mu);
	free(p->tally);
	free(p->times);
	free(p);
}

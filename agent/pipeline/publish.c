/* SPDX-License-Identifier: MIT */
/* The publisher: takes closed windows in batches, symbolizes each in one
 * pass, encodes it (report.h) and hands the chunk to the sink. On its own
 * thread for the daemon, on the caller's for --once. It owns the symbolizer,
 * the kernel's symbols and the sinks; a batch made with a reloaded config
 * gets the symbolizer and sinks of that config. */
#include <errno.h>
#include <inttypes.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "fxagent/debuginfod.h"
#include "fxagent/hash.h"
#include "fxagent/jvmrefresh.h"
#include "fxagent/kallsyms.h"
#include "fxagent/log.h"
#include "fxagent/memstat.h"
#include "fxagent/metrics.h"
#include "fxagent/report.h"
#include "fxagent/service.h"
#include "fxagent/util.h"
#include "pipeline_int.h"

/* The caches of the metrics file (cache_figures). */
#define MAX_CACHES 10

struct publisher {
	struct fx_pipeline *p;
	pthread_t thread;
	bool started;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	struct batch *head, *tail; /* under mu */
	size_t waiting;		   /* batches from head to tail; under mu */
	bool quit;		   /* under mu */
	uint64_t stop_at;	   /* CLOCK_MONOTONIC; set once a stop began; under mu */
	/* The sinks: the one file (--once --output), or output.directory and,
	 * with upload.url, the spool, which takes the chunks while it works. */
	struct fx_sink *file;
	struct fx_sink *spool;		 /* under mu (a stop may begin) */
	struct gen *sink_gen;		 /* the config the sinks were made for */
	struct fx_shipper_stats up_base; /* counts of the spool sinks replaced */
	/* The publisher thread's own. */
	struct gen *sym_gen;		      /* the config the symbolizer was made for */
	struct fx_debuginfod *dbgd;	      /* the symbolizer's, or NULL */
	struct fx_debuginfod_stats dbgd_base; /* counts of the clients replaced */
	struct fx_symbolizer *sym;
	uint64_t sym_mark;
	struct fx_symbolizer_stats sym_base; /* counts of the symbolizers replaced */
	struct fx_kallsyms *ks;
	uint64_t ks_modules;
	struct fx_jvmrefresh *jvm; /* when to ask JVMs for fresh perf maps; NULL: no memory */
	uint64_t ks_evicted;	   /* kernel symbols dropped as modules changed */
	bool metrics_failed;	   /* said once */
	/* The agent's summary at the default level: what the windows since the
	 * last one took (the first after the first window). */
	uint64_t sum_at, sum_windows, sum_samples, sum_chunks;
	/* The thread's CPU time writing windows (symbolizing, encoding,
	 * compressing, writing, giving memory back), for the metrics. */
	uint64_t publish_cpu_ns;
};

/* How often the agent says it is well at the default level. */
#define SUMMARY_NS (300 * 1000000000ull)

static struct fx_sink *current_sink(struct publisher *pub)
{
	struct fx_sink *s;

	pthread_mutex_lock(&pub->mu);
	s = pub->spool ? pub->spool : pub->file;
	pthread_mutex_unlock(&pub->mu);
	return s;
}

/* ---- one chunk per target ---- */

static void write_job(struct publisher *pub, struct batch *b, struct job *j)
{
	struct fx_pipeline *p = pub->p;
	const struct fx_config *cfg = b->g->cfg;
	struct fx_sink *sink = current_sink(pub);
	struct fx_sink_chunk c = { .target = j->t->name,
				   .seq = b->seq,
				   .start_wall_ms = b->start_wall_ms,
				   .end_wall_ms = b->end_wall_ms };
	struct fx_report_stats rs;
	char waits[40];
	struct fx_report_input in = {
		.window = j->win,
		.names = j->names,
		.nnames = j->nnames,
		.objs = p->objs,
		.symbolizer = pub->sym,
		.kallsyms = pub->ks,
		.lost = j->lost->ev,
		.nlost = j->lost->n,
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
			/* The daemon's windows; --once's one is its own length. */
			.window_ms = p->opts.rotate ? (uint64_t)cfg->window.seconds * 1000
						    : (b->end_mono - b->start_mono + 500000) / 1000000,
			.labels = j->t->labels,
			.nlabels = j->t->nlabels,
			.samples = j->win->counters.samples,
			.lost = j->win->counters.lost,
			.truncated = j->win->counters.truncated,
			.dropped = j->win->counters.dropped_stacks,
			.off_cpu = fx_config_off_cpu(cfg, j->t->cfg),
			.waits = j->win->counters.waits,
			.wait_ms = (double)j->win->counters.wait_us / 1000.0,
			.waits_unstacked = j->win->counters.waits_unstacked,
			.waits_unstacked_ms = (double)j->win->counters.waits_unstacked_us / 1000.0,
			.waits_lost = j->win->counters.waits_lost,
			.waits_lost_ms = (double)j->win->counters.waits_lost_us / 1000.0,
		},
		.seq = b->seq,
		.marker_pid = (uint32_t)getpid(),
		.marker_name = "fxagent",
		.on_symbolize = p->opts.on_symbolize,
		.name_check = cfg->symbolization.check_names ? &p->stats.names : NULL,
		.jit = cfg->symbolization.jit,
		.reuse_threads = cfg->window.reuse_threads,
		.jvm = pub->jvm,
		.jvm_ask = cfg->symbolization.jvm_perfmap,
		.name_check_log_left = &p->names_log_left,
	};

	if (fx_sink_prepare(sink, &c) < 0 || fx_report_write(&in, c.path, &rs) < 0) {
		__atomic_add_fetch(&p->stats.chunk_errors, 1, __ATOMIC_RELAXED);
		return;
	}
	/* --once says what it wrote itself. Waits where off-CPU is on. */
	snprintf(waits, sizeof(waits), ", %" PRIu64 " waits", j->win->counters.waits);
	fx_log_fields(p->opts.report_status ? FX_LOG_INFO : FX_LOG_DEBUG, j->t->name, c.id,
		      "wrote %s: %" PRIu64 " samples%s, %" PRIu64 " bytes", c.path,
		      j->win->counters.samples, in.meta.off_cpu ? waits : "", rs.profile.bytes);
	fx_sink_commit(sink, &c);
	snprintf(p->stats.last_path, sizeof(p->stats.last_path), "%s", c.path);
	p->stats.last_samples = j->win->counters.samples;
	p->stats.last_waits = j->win->counters.waits;
	p->stats.last_threads = rs.profile.threads;
	p->stats.last_bytes = rs.profile.bytes;
	p->stats.last_frames = j->win->nframes;
	p->stats.last_stacks = j->win->nstacks;
	p->stats.last_objects = rs.objects;
	__atomic_add_fetch(&p->stats.chunks, 1, __ATOMIC_RELAXED);
}

static void free_batch(struct fx_pipeline *p, struct batch *b)
{
	for (size_t i = 0; i < b->njobs; i++) {
		pipe_targets_window_give(p, b->jobs[i].win);
		free(b->jobs[i].lost);
		free(b->jobs[i].names);
	}
	pipe_targets_gen_put(p, b->g);
	free(b);
}

/* ---- what a reloaded config changes ---- */

static bool same_str(const char *a, const char *b)
{
	return a == b || (a && b && !strcmp(a, b));
}

static bool same_symbolization(const struct fx_config *a, const struct fx_config *b)
{
#define SAME(f) (a->symbolization.f == b->symbolization.f)
	if (!SAME(demangle) || !SAME(max_memory) || !SAME(ndebug_dirs) ||
	    !same_str(a->symbolization.debuginfod_urls, b->symbolization.debuginfod_urls) ||
	    !same_str(a->symbolization.debuginfod_cache, b->symbolization.debuginfod_cache) ||
	    !SAME(debuginfod_cache_max) || !SAME(debuginfod_timeout_ms) ||
	    !SAME(debuginfod_budget_ms) || !SAME(debuginfod_retry_s))
		return false;
#undef SAME
	for (size_t i = 0; i < a->symbolization.ndebug_dirs; i++)
		if (strcmp(a->symbolization.debug_dirs[i], b->symbolization.debug_dirs[i]))
			return false;
	return true;
}

static struct fx_debuginfod_opts debuginfod_opts(const struct fx_config *cfg)
{
	return (struct fx_debuginfod_opts){
		.urls = cfg->symbolization.debuginfod_urls,
		.cache_dir = cfg->symbolization.debuginfod_cache,
		.cache_max_bytes = cfg->symbolization.debuginfod_cache_max,
		.timeout_ms = cfg->symbolization.debuginfod_timeout_ms,
		.budget_ms = cfg->symbolization.debuginfod_budget_ms,
		.retry_s = cfg->symbolization.debuginfod_retry_s,
	};
}

void pipe_publish_setenv(const struct fx_config *cfg)
{
	struct fx_debuginfod_opts o = debuginfod_opts(cfg);

	fx_debuginfod_setenv(&o);
}

/* The symbolizer (and debuginfod client) of @g's config: kept while the
 * settings stay the same. */
static void switch_symbolizer(struct publisher *pub, struct gen *g)
{
	const struct fx_config *cfg = g->cfg;

	if (!pub->sym || !same_symbolization(pub->sym_gen->cfg, cfg)) {
		const char *const *dirs = (const char *const *)cfg->symbolization.debug_dirs;
		struct fx_debuginfod_opts dopts = debuginfod_opts(cfg);
		struct fx_debuginfod *nd = fx_debuginfod_new(&dopts);
		struct fx_symbolizer_opts so = {
			.debug_dirs = cfg->symbolization.ndebug_dirs ? dirs : NULL,
			.no_demangle = !cfg->symbolization.demangle,
			.max_bytes = cfg->symbolization.max_memory,
			.debuginfod = nd,
			.cache_dir = cfg->symbolization.debuginfod_cache,
			.cache_max_bytes = cfg->symbolization.debuginfod_cache_max,
		};
		struct fx_symbolizer *ns = fx_symbolizer_new(&so);

		if (ns) {
			struct fx_symbolizer_stats ss;
			struct fx_debuginfod_stats ds;

			if (pub->sym) {
				fx_symbolizer_get_stats(pub->sym, &ss);
				pub->sym_base.lookups += ss.lookups;
				pub->sym_base.cache_hits += ss.cache_hits;
				pub->sym_base.trimmed += ss.trimmed;
				pub->sym_base.evicted += ss.evicted;
				pub->sym_base.idle_dropped += ss.idle_dropped;
				pub->sym_base.dwarf_shed += ss.dwarf_shed;
				pub->sym_base.results_evicted += ss.results_evicted;
			}
			fx_debuginfod_get_stats(pub->dbgd, &ds);
			pub->dbgd_base.hits += ds.hits;
			pub->dbgd_base.misses += ds.misses;
			pub->dbgd_base.errors += ds.errors;
			pub->dbgd_base.bytes += ds.bytes;
			pub->dbgd_base.deferred += ds.deferred;
			pub->dbgd_base.evicted += ds.evicted;
			fx_symbolizer_free(pub->sym);
			fx_debuginfod_free(pub->dbgd);
			pub->sym = ns;
			pub->dbgd = nd;
			pub->sym_mark = 0;
		} else {
			fx_debuginfod_free(nd);
		}
	}
	if (pub->sym_gen != g) {
		pipe_targets_gen_get(pub->p, g);
		pipe_targets_gen_put(pub->p, pub->sym_gen);
		pub->sym_gen = g;
	}
}

/* A hash of /proc/modules: kernel symbols change only when modules do, and
 * reading /proc/kallsyms costs tens of milliseconds of CPU. */
static uint64_t modules_hash(void)
{
	uint64_t h = FX_HASH_INIT;
	char buf[4096];
	size_t n;
	FILE *f = fopen("/proc/modules", "re");

	if (!f)
		return 0;
	while ((n = fread(buf, 1, sizeof(buf), f)) > 0)
		h = fx_hash_add(h, buf, n);
	fclose(f);
	return fx_mix64(h);
}

static void refresh_kallsyms(struct publisher *pub, const struct fx_config *cfg)
{
	uint64_t h;

	if (!cfg->sampling.kernel_stacks)
		return;
	h = modules_hash();
	/* Modules come and go: read the kernel's symbols again then. */
	if (!pub->ks || h != pub->ks_modules) {
		pub->ks_evicted += fx_kallsyms_count(pub->ks);
		fx_kallsyms_free(pub->ks);
		pub->ks = fx_kallsyms_load_system();
		pub->ks_modules = h;
	}
}

/* A reloaded config gets a new uploader: upload settings, tokens and
 * certificates are read again. What the old one had not sent stays in its
 * spool; the new one picks it up when the spool is the same. */
static void switch_sinks(struct publisher *pub, struct gen *g)
{
	struct fx_sink *old, *s = NULL, *dir = NULL;
	struct fx_shipper_stats st;
	uint64_t stop_at;

	/* A new output.directory is checked as at start; refused, the old one
	 * stays (the reload's config check refused it already, normally). */
	if (!pub->p->opts.output && pub->file &&
	    strcmp(pub->sink_gen->cfg->output.directory, g->cfg->output.directory) != 0 &&
	    fx_sink_dir_new(g->cfg->output.directory, &dir) == 0) {
		fx_sink_free(pub->file, 0);
		pub->file = dir;
	}
	/* The sampling thread may begin a stop on the spool sink meanwhile. */
	pthread_mutex_lock(&pub->mu);
	old = pub->spool;
	pub->spool = NULL;
	stop_at = pub->stop_at;
	pthread_mutex_unlock(&pub->mu);
	fx_sink_get_stats(old, &st);
	pub->up_base.uploaded += st.uploaded;
	pub->up_base.retried += st.retried;
	pub->up_base.rejected += st.rejected;
	pub->up_base.refused += st.refused;
	pub->up_base.dropped += st.dropped;
	fx_sink_free(old, stop_at);
	pipe_targets_gen_get(pub->p, g);
	pipe_targets_gen_put(pub->p, pub->sink_gen);
	pub->sink_gen = g;
	if (!fx_config_uploads(g->cfg))
		return;
	if (fx_sink_spool_new(g->cfg, g->host, &s) < 0) {
		fx_log(FX_LOG_ERR, "uploads stop until the next reload; chunks go to %s meanwhile",
		       g->cfg->output.directory);
		return;
	}
	pthread_mutex_lock(&pub->mu);
	pub->spool = s;
	if (pub->stop_at)
		fx_sink_begin_stop(s, pub->stop_at);
	pthread_mutex_unlock(&pub->mu);
}

/* ---- status after each window ---- */

/* Each cache's entries, bytes and evictions (fxagent_cache_*). */
static size_t cache_figures(const struct publisher *pub, const struct batch *b,
			    const struct fx_symbolizer_stats *ss, struct fx_metrics_cache *c)
{
	const struct fx_symbolizer_stats *sb = &pub->sym_base;
	const struct sampler_caches *sc = &b->caches;
	struct fx_objects_stats os;
	size_t n = 0;

	fx_objects_get_stats(pub->p->objs, &os);
	c[n++] = (struct fx_metrics_cache){ "symbol_objects", ss->objects_held, ss->bytes, true,
					    sb->trimmed + sb->evicted + sb->idle_dropped +
						    ss->trimmed + ss->evicted + ss->idle_dropped };
	c[n++] = (struct fx_metrics_cache){ "symbol_dwarf", ss->dwarf_objects, ss->dwarf_bytes,
					    true, sb->dwarf_shed + ss->dwarf_shed };
	c[n++] = (struct fx_metrics_cache){ "symbol_results", ss->results, ss->results_bytes, true,
					    sb->results_evicted + ss->results_evicted };
	c[n++] = (struct fx_metrics_cache){ "objects", os.entries, os.bytes, true, os.retired };
	c[n++] = (struct fx_metrics_cache){ "processes", sc->procs.procs, sc->procs.proc_bytes,
					    true, sc->procs.idle_procs };
	c[n++] = (struct fx_metrics_cache){ "threads", sc->procs.threads, sc->procs.thread_bytes,
					    true, sc->procs.idle_threads };
	if (sc->unwind) {
		c[n++] = (struct fx_metrics_cache){ "unwind", sc->unwind_live, 0, false,
						    sc->unwind_evicted };
		c[n++] = (struct fx_metrics_cache){ "cfi_tables", sc->cfi_tables, sc->cfi_bytes,
						    true, sc->cfi_evicted };
		c[n++] = (struct fx_metrics_cache){ "jit_cfi", sc->jit_ranges, sc->jit_bytes, true,
						    sc->jit_dropped };
	}
	if (pub->ks)
		c[n++] = (struct fx_metrics_cache){ "kallsyms", fx_kallsyms_count(pub->ks),
						    fx_kallsyms_bytes(pub->ks), true,
						    pub->ks_evicted };
	return n;
}

/* The agent's counters, for node_exporter's textfile collector. */
/* The memory figures of @ms as metrics into @out: FX_MEM_NPARTS + 3 of them.
 * Returns how many. */
static size_t memory_metrics(const struct fx_memstat *ms, struct fx_metric *out)
{
	size_t n = 0;

	for (int i = 0; i < FX_MEM_NPARTS; i++)
		out[n++] = (struct fx_metric){
			"fxagent_memory_bytes",
			"Resident memory by kind: rings, heap, arenas, stacks, anon, "
			"files, other.",
			true,
			"part",
			fx_memstat_part_name((enum fx_mem_part)i),
			(double)ms->part[i],
		};
	out[n++] = (struct fx_metric){
		"fxagent_malloc_used_bytes", "Bytes malloc has handed out.", true, NULL, NULL,
		(double)ms->malloc_used
	};
	out[n++] = (struct fx_metric){ "fxagent_malloc_free_bytes",
				       "Bytes malloc holds free (not given back).",
				       true,
				       NULL,
				       NULL,
				       (double)ms->malloc_free };
	out[n++] = (struct fx_metric){ "fxagent_malloc_arenas",
				       "Threads' malloc arenas beside the main one.",
				       true,
				       NULL,
				       NULL,
				       (double)ms->arenas };
	return n;
}

static void write_metrics(struct publisher *pub, const struct batch *b,
			  const struct fx_shipper_stats *st, const struct fx_memstat *ms)
{
	const char *path = b->g->cfg->metrics.textfile;
	const struct fx_pipeline_stats *ps = &pub->p->stats;
	const struct fx_shipper_stats *ub = &pub->up_base;
	struct fx_symbolizer_stats ss = { 0 };
	struct fx_debuginfod_stats ds;
	const struct totals *t = &b->tot;
	int ret;

	if (!path)
		return;
	if (pub->sym)
		fx_symbolizer_get_stats(pub->sym, &ss);
	fx_debuginfod_get_stats(pub->dbgd, &ds);
	const struct fx_metric m[] = {
		{ "fxagent_windows_total", "Windows closed.", false, NULL, NULL,
		  (double)t->windows },
		{ "fxagent_windows_stretched_total",
		  "Window ends passed while the chunks were behind (each kept the open window "
		  "one window longer).",
		  false, NULL, NULL, (double)__atomic_load_n(&ps->stretched, __ATOMIC_RELAXED) },
		{ "fxagent_samples_total", "Samples recorded.", false, NULL, NULL,
		  (double)t->samples },
		{ "fxagent_publish_cpu_seconds_total",
		  "CPU time spent writing the windows' chunks: symbolizing, encoding, compressing, "
		  "writing.",
		  false, NULL, NULL, (double)pub->publish_cpu_ns / 1e9 },
		{ "fxagent_lost_samples_total", "Samples the kernel lost (rings overflowed).",
		  false, NULL, NULL, (double)t->lost },
		{ "fxagent_offcpu_waits_total",
		  "Off-CPU waits shown (sampling.off_cpu); a wait counts once in each window it "
		  "spans.",
		  false, NULL, NULL, (double)t->waits },
		{ "fxagent_offcpu_wait_seconds_total",
		  "Off-CPU time the waits shown stand for (their weights).", false, NULL, NULL,
		  (double)t->wait_us / 1e6 },
		{ "fxagent_offcpu_unstacked_total",
		  "Of the waits shown, those timed without their stacks (over "
		  "sampling.off_cpu.budget): their time is on their threads' other waits.",
		  false, NULL, NULL, (double)t->waits_unstacked },
		{ "fxagent_offcpu_unstacked_seconds_total",
		  "Off-CPU time of the waits timed without their stacks.", false, NULL, NULL,
		  (double)t->waits_unstacked_us / 1e6 },
		{ "fxagent_offcpu_lost_total",
		  "Off-CPU waits lost for room (the ring, the agent's queue): not shown.", false,
		  NULL, NULL, (double)t->waits_lost },
		{ "fxagent_offcpu_lost_seconds_total",
		  "Off-CPU time of the waits lost, where it is known.", false, NULL, NULL,
		  (double)t->waits_lost_us / 1e6 },
		{ "fxagent_truncated_stacks_total", "Samples whose stack was cut short.", false,
		  NULL, NULL, (double)t->truncated },
		{ "fxagent_dropped_stacks_total",
		  "Samples whose stack did not fit under window.max_stacks.", false, NULL, NULL,
		  (double)t->dropped },
		{ "fxagent_chunks_written_total", "Chunks written.", false, NULL, NULL,
		  (double)__atomic_load_n(&ps->chunks, __ATOMIC_RELAXED) },
		{ "fxagent_chunk_errors_total", "Chunks that could not be written.", false, NULL,
		  NULL, (double)__atomic_load_n(&ps->chunk_errors, __ATOMIC_RELAXED) },
		{ "fxagent_chunks_uploaded_total", "Chunks the collector accepted.", false, NULL,
		  NULL, (double)(ub->uploaded + st->uploaded) },
		{ "fxagent_upload_retries_total", "Failed uploads that will be tried again.", false,
		  NULL, NULL, (double)(ub->retried + st->retried) },
		{ "fxagent_chunks_rejected_total",
		  "Chunks the collector refused (moved to rejected/).", false, NULL, NULL,
		  (double)(ub->rejected + st->rejected) },
		{ "fxagent_spool_files_refused_total",
		  "Spool files that failed the check before sending (moved to rejected/ unsent).",
		  false, NULL, NULL, (double)(ub->refused + st->refused) },
		{ "fxagent_chunks_dropped_total", "Chunks dropped by the spool's bounds.", false,
		  NULL, NULL, (double)(ub->dropped + st->dropped) },
		{ "fxagent_spool_chunks", "Chunks waiting in the spool.", true, NULL, NULL,
		  (double)st->pending },
		{ "fxagent_spool_bytes", "Bytes of the chunks waiting in the spool.", true, NULL,
		  NULL, (double)st->spool_bytes },
		{ "fxagent_symbol_lookups_total", "Addresses symbolized.", false, NULL, NULL,
		  (double)(pub->sym_base.lookups + ss.lookups) },
		{ "fxagent_symbol_cache_hits_total", "Addresses answered from the symbol cache.",
		  false, NULL, NULL, (double)(pub->sym_base.cache_hits + ss.cache_hits) },
		{ "fxagent_debuginfod_hits_total",
		  "Debug files found on a debuginfod server or in its cache.", false, NULL, NULL,
		  (double)(pub->dbgd_base.hits + ds.hits) },
		{ "fxagent_debuginfod_misses_total",
		  "Debug files no debuginfod server has (remembered for debuginfod_retry).", false,
		  NULL, NULL, (double)(pub->dbgd_base.misses + ds.misses) },
		{ "fxagent_debuginfod_errors_total",
		  "debuginfod requests that failed or were cut at their time bound.", false, NULL,
		  NULL, (double)(pub->dbgd_base.errors + ds.errors) },
		{ "fxagent_debuginfod_bytes_total", "Bytes of debug files downloaded.", false, NULL,
		  NULL, (double)(pub->dbgd_base.bytes + ds.bytes) },
		{ "fxagent_debuginfod_deferred_total",
		  "debuginfod requests put off to a later window (debuginfod_budget spent).", false,
		  NULL, NULL, (double)(pub->dbgd_base.deferred + ds.deferred) },
		{ "fxagent_debuginfod_evicted_total",
		  "Debug files removed from the cache to stay under debuginfod_cache_max.", false,
		  NULL, NULL, (double)(pub->dbgd_base.evicted + ds.evicted) },
		{ "fxagent_targets", "Targets configured (1: the whole system).", true, NULL, NULL,
		  (double)t->targets },
		{ "fxagent_targets_sampled", "Targets being sampled (a cgroup found).", true, NULL,
		  NULL, (double)t->attached },
		{ "fxagent_last_window_end_seconds", "Wall-clock end of the last window written.",
		  true, NULL, NULL, b->end_wall_ms / 1000.0 },
		{ "fxagent_info", "The agent's version.", true, "version", FX_VERSION, 1 },
	};

	struct fx_metrics_cache caches[MAX_CACHES];
	struct fx_metric all[sizeof(m) / sizeof(m[0]) + FX_MEM_NPARTS + 3 + 3 * MAX_CACHES];
	size_t n = sizeof(m) / sizeof(m[0]);

	memcpy(all, m, sizeof(m));
	n += fx_metrics_caches(caches, cache_figures(pub, b, &ss, caches), all + n);
	if (ms)
		n += memory_metrics(ms, all + n);
	ret = fx_metrics_write(path, all, n);
	if (ret < 0 && !pub->metrics_failed)
		fx_log_errno(FX_LOG_WARN, -ret,
			     "cannot write the metrics file %s (metrics.textfile)", path);
	pub->metrics_failed = ret < 0;
}

/* Where the resident memory is, one line. */
static void debug_memory(const struct fx_memstat *ms)
{
	char line[512];
	size_t o;

	if (!ms)
		return;
	o = (size_t)snprintf(line, sizeof(line),
			     "memory: %.1f MiB resident:", (double)ms->rss / 1048576.0);
	for (int i = 0; i < FX_MEM_NPARTS && o < sizeof(line); i++)
		o += (size_t)snprintf(line + o, sizeof(line) - o, " %s %.1f",
				      fx_memstat_part_name((enum fx_mem_part)i),
				      (double)ms->part[i] / 1048576.0);
	fx_debug("%s; malloc %.1f MiB used, %.1f MiB free, %" PRIu64 " thread arenas", line,
		 (double)ms->malloc_used / 1048576.0, (double)ms->malloc_free / 1048576.0,
		 ms->arenas);
}

static void debug_state(struct publisher *pub, const struct fx_memstat *ms)
{
	struct fx_symbolizer_stats ss;
	struct fx_objects_stats os;

	if (fx_log_get_level() < FX_LOG_DEBUG)
		return;
	debug_memory(ms);
	if (pub->sym) {
		fx_symbolizer_get_stats(pub->sym, &ss);
		fx_debug("symbolizer: %" PRIu64 " objects, %.1f MiB (debug sections %.1f MiB, "
			 "%" PRIu64 " FDE ranges %.1f KiB)",
			 ss.objects_held, (double)ss.bytes / 1048576.0,
			 (double)ss.dwarf_bytes / 1048576.0, ss.fde_ranges,
			 (double)ss.fde_bytes / 1024.0);
	}
	fx_objects_get_stats(pub->p->objs, &os);
	fx_debug("objects: %" PRIu64 " known (%" PRIu64 " paths), %" PRIu64 " fds open, %" PRIu64
		 " retired as unused",
		 os.objects, os.entries, os.fds, os.retired);
}

/* The agent's line every few minutes at the default level: windows,
 * samples, chunks written and, when it uploads, sent and pending. */
static void summarize(struct publisher *pub, const struct fx_shipper_stats *st, uint64_t nsamples)
{
	uint64_t now = fx_now_ns(CLOCK_MONOTONIC);
	uint64_t chunks = __atomic_load_n(&pub->p->stats.chunks, __ATOMIC_RELAXED);
	char up[160] = "", when[32] = "first window";
	bool first = !pub->sum_at;

	pub->sum_windows++;
	pub->sum_samples += nsamples;
	if (!first && now - pub->sum_at < SUMMARY_NS)
		return;
	if (pub->spool)
		snprintf(up, sizeof(up),
			 "; %" PRIu64 " uploaded in all, %" PRIu64 " pending (%" PRIu64 " bytes)",
			 pub->up_base.uploaded + st->uploaded, st->pending, st->spool_bytes);
	if (!first)
		snprintf(when, sizeof(when), "last %" PRIu64 " s",
			 (uint64_t)((now - pub->sum_at) / 1000000000ull));
	fx_log(FX_LOG_NOTICE,
	       "%s: %" PRIu64 " window%s, %" PRIu64 " samples, %" PRIu64 " chunk%s written%s", when,
	       pub->sum_windows, pub->sum_windows == 1 ? "" : "s", pub->sum_samples,
	       chunks - pub->sum_chunks, chunks - pub->sum_chunks == 1 ? "" : "s", up);
	pub->sum_at = now;
	pub->sum_windows = pub->sum_samples = 0;
	pub->sum_chunks = chunks;
}

static void report_status(struct publisher *pub, const struct batch *b)
{
	bool metrics = pub->p->opts.report_status && b->g->cfg->metrics.textfile;
	struct fx_shipper_stats st;
	struct fx_memstat mem;
	const struct fx_memstat *ms = NULL;
	uint64_t nsamples = 0;

	/* /proc/self/smaps read once, for the debug log and the metrics. */
	if ((metrics || fx_log_get_level() >= FX_LOG_DEBUG) && fx_memstat_read(&mem) == 0)
		ms = &mem;
	fx_sink_get_stats(pub->spool, &st);
	/* --once's chunk is not sent yet: it says how the upload went itself. */
	if (pub->spool && pub->p->opts.report_status)
		fx_log(FX_LOG_INFO,
		       "upload: %" PRIu64 " chunks uploaded, %" PRIu64 " retried, %" PRIu64
		       " rejected, %" PRIu64 " dropped; %" PRIu64 " pending (%" PRIu64 " bytes)",
		       st.uploaded, st.retried, st.rejected, st.dropped, st.pending,
		       st.spool_bytes);
	debug_state(pub, ms);
	if (!pub->p->opts.report_status)
		return;
	write_metrics(pub, b, &st, ms);
	for (size_t i = 0; i < b->njobs; i++)
		nsamples += b->jobs[i].win->counters.samples;
	summarize(pub, &st, nsamples);
	fx_service_notifyf("STATUS=%zu of %zu targets sampled; %" PRIu64
			   " samples in the last window; %" PRIu64 " chunks written, %" PRIu64
			   " uploaded, %" PRIu64 " pending",
			   b->tot.attached, b->tot.targets, nsamples,
			   __atomic_load_n(&pub->p->stats.chunks, __ATOMIC_RELAXED),
			   pub->up_base.uploaded + st.uploaded, st.pending);
}

/* ---- one batch ---- */

static void write_batch(struct publisher *pub, struct batch *b)
{
	uint64_t mark, cpu0 = fx_now_ns(CLOCK_THREAD_CPUTIME_ID);

	if (b->g != pub->sink_gen)
		switch_sinks(pub, b->g);
	switch_symbolizer(pub, b->g);
	refresh_kallsyms(pub, b->g->cfg);
	if (pub->jvm)
		fx_jvmrefresh_begin_window(pub->jvm);
	if (pub->sym) {
		mark = fx_symbolizer_batch(pub->sym);
		for (size_t i = 0; i < b->njobs; i++)
			write_job(pub, b, &b->jobs[i]);
		/* Objects no chunk of this window or the one before used give
		 * their memory back. */
		fx_symbolizer_drop_idle(pub->sym, pub->sym_mark);
		pub->sym_mark = mark + 1;
	} else {
		fx_log_errno(FX_LOG_ERR, ENOMEM, "cannot symbolize window %" PRId64, b->seq);
		__atomic_add_fetch(&pub->p->stats.chunk_errors, b->njobs, __ATOMIC_RELAXED);
	}
	/* Binaries no live process maps and no window still to be written uses
	 * give their fds and entries back. */
	fx_objects_retire_unused(pub->p->objs, b->epoch);
	/* What the window's tables and dropped caches freed goes back to the
	 * system, not only to malloc's free lists (all arenas). */
	malloc_trim(0);
	pub->publish_cpu_ns += fx_now_ns(CLOCK_THREAD_CPUTIME_ID) - cpu0;
	report_status(pub, b);
	/* The windows are kept for the next ones (pipe_targets_window_give):
	 * no second trim for them. */
	free_batch(pub->p, b);
}

static struct batch *next_batch(struct publisher *pub, bool wait)
{
	struct batch *b;

	pthread_mutex_lock(&pub->mu);
	while (wait && !pub->head && !pub->quit)
		pthread_cond_wait(&pub->cv, &pub->mu);
	b = pub->head;
	if (b) {
		pub->head = b->next;
		if (!pub->head)
			pub->tail = NULL;
		pub->waiting--;
	}
	pthread_mutex_unlock(&pub->mu);
	return b;
}

static void *publisher_thread(void *arg)
{
	struct publisher *pub = arg;
	struct batch *b;

	while ((b = next_batch(pub, true)))
		write_batch(pub, b);
	return NULL; /* quit, and nothing left */
}

/* ---- the pipeline's side ---- */

static int open_sinks(struct publisher *pub, const struct gen *g)
{
	const struct fx_pipeline_opts *o = &pub->p->opts;
	int ret;

	if (o->output)
		return fx_sink_file_new(o->output, &pub->file);
	/* output.directory: the chunks' place without upload.url, and while
	 * the uploader of a reloaded config cannot start. */
	if (o->rotate) {
		ret = fx_sink_dir_new(g->cfg->output.directory, &pub->file);
		if (ret < 0)
			return ret;
	}
	if (fx_config_uploads(g->cfg))
		return fx_sink_spool_new(g->cfg, g->host, &pub->spool);
	return pub->file ? 0 : -EINVAL;
}

int pipe_publish_new(struct fx_pipeline *p, struct publisher **out)
{
	struct publisher *pub = calloc(1, sizeof(*pub));
	int ret;

	if (!pub)
		return fx_log_errno(FX_LOG_ERR, ENOMEM, "cannot set up the pipeline");
	pub->p = p;
	pthread_mutex_init(&pub->mu, NULL);
	pthread_cond_init(&pub->cv, NULL);
	/* The publisher's references to the first config. */
	pipe_targets_gen_get(p, p->g);
	pipe_targets_gen_get(p, p->g);
	pub->sym_gen = pub->sink_gen = p->g;
	pub->jvm = fx_jvmrefresh_new(&(struct fx_jvmrefresh_opts)FX_JVMREFRESH_DEFAULTS);
	if (!pub->jvm)
		fx_log(FX_LOG_WARN, "out of memory: JVMs are not asked for fresh perf maps");
	*out = pub;
	/* Before any thread of ours (the uploader, the publisher) starts. */
	pipe_publish_setenv(p->g->cfg);
	ret = open_sinks(pub, p->g);
	if (ret < 0 || !p->opts.thread)
		return ret;
	ret = pthread_create(&pub->thread, NULL, publisher_thread, pub);
	if (ret)
		return fx_log_errno(FX_LOG_ERR, ret, "cannot start the publisher thread");
	pub->started = true;
	pthread_setname_np(pub->thread, "fx-publish");
	return 0;
}

void pipe_publish_push(struct publisher *pub, struct batch *b)
{
	pipe_targets_gen_get(pub->p, b->g);
	pthread_mutex_lock(&pub->mu);
	if (pub->tail)
		pub->tail->next = b;
	else
		pub->head = b;
	pub->tail = b;
	pub->waiting++;
	pthread_cond_signal(&pub->cv);
	pthread_mutex_unlock(&pub->mu);
}

size_t pipe_publish_waiting(struct publisher *pub)
{
	size_t n;

	pthread_mutex_lock(&pub->mu);
	n = pub->waiting;
	pthread_mutex_unlock(&pub->mu);
	return n;
}

void pipe_publish_finish(struct publisher *pub)
{
	struct batch *b;

	if (pub->started) {
		pthread_mutex_lock(&pub->mu);
		pub->quit = true;
		pthread_cond_signal(&pub->cv);
		pthread_mutex_unlock(&pub->mu);
		pthread_join(pub->thread, NULL);
		pub->started = false;
		return;
	}
	while ((b = next_batch(pub, false)))
		write_batch(pub, b);
}

void pipe_publish_begin_stop(struct publisher *pub, uint64_t deadline_ns)
{
	pthread_mutex_lock(&pub->mu);
	if (!pub->stop_at) {
		pub->stop_at = deadline_ns;
		fx_sink_begin_stop(pub->spool, deadline_ns);
		/* The last window is symbolized with what is at hand. */
		fx_debuginfod_stop_all();
	}
	pthread_mutex_unlock(&pub->mu);
}

int pipe_publish_drain(struct publisher *pub, uint64_t timeout_ms)
{
	return fx_sink_drain(current_sink(pub), timeout_ms);
}

const char *pipe_publish_where(const struct publisher *pub)
{
	return pub->spool ? pub->spool->where : pub->file ? pub->file->where : "";
}

void pipe_publish_free(struct publisher *pub)
{
	uint64_t deadline;

	if (!pub)
		return;
	pipe_publish_finish(pub);
	/* What is left goes while the collector answers, by the stop's
	 * deadline (a second from now without one). */
	deadline = pub->stop_at ? pub->stop_at : fx_now_ns(CLOCK_MONOTONIC) + 1000000000ull;
	fx_sink_free(pub->spool, deadline);
	fx_sink_free(pub->file, 0);
	fx_kallsyms_free(pub->ks);
	fx_symbolizer_free(pub->sym);
	fx_debuginfod_free(pub->dbgd);
	fx_jvmrefresh_free(pub->jvm);
	pipe_targets_gen_put(pub->p, pub->sym_gen);
	pipe_targets_gen_put(pub->p, pub->sink_gen);
	pthread_cond_destroy(&pub->cv);
	pthread_mutex_destroy(&pub->mu);
	free(pub);
}

/* SPDX-License-Identifier: MIT */
/* fxagent: command line. `fxagent --once` records every CPU for a while and
 * writes one Firefox Profiler profile. */
#include <errno.h>
#include <malloc.h>
#include <getopt.h>
#include <inttypes.h>
#include <libgen.h>
#include <limits.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "fxagent/config.h"
#include "fxagent/daemon.h"
#include "fxagent/kallsyms.h"
#include "fxagent/log.h"
#include "fxagent/objects.h"
#include "fxagent/procs.h"
#include "fxagent/recorder.h"
#include "fxagent/report.h"
#include "fxagent/sampler.h"
#include "fxagent/service.h"
#include "fxagent/shipper.h"
#include "fxagent/spool.h"
#include "fxagent/symbolize.h"
#include "fxagent/unwind.h"
#include "fxagent/util.h"
#include "fxagent/window.h"

#define EXIT_USAGE 2
#define MAX_PIDS   1024

/* One per run, its fields in --help order.
 * NOLINTNEXTLINE(clang-analyzer-optin.performance.Padding) */
struct options {
	const struct fx_config *cfg; /* the loaded config, for what flags do not set */
	bool once;
	uint64_t duration_ms;
	unsigned frequency;
	const char *output;
	bool kernel;
	bool include_idle;
	uint32_t pids[MAX_PIDS];
	size_t npids;
	size_t ring_pages; /* 0 = sized for the records */
	enum fx_unwind_mode unwind;
	uint32_t stack_bytes;
	bool verbose;
	/* Daemon and config */
	const char *config;	 /* --config FILE */
	bool check_config;	 /* --check-config [FILE] */
	const char *output_dir;	 /* --output-dir DIR */
	unsigned window_seconds; /* --window SECONDS, 0 = from the config */
	/* Which sampling flags were given: they override the config. */
	bool set_frequency, set_kernel, set_idle, set_unwind, set_stack;
};

static volatile sig_atomic_t stop_requested, reload_requested;

static void on_signal(int sig)
{
	if (sig == SIGHUP)
		reload_requested = 1;
	else
		stop_requested = 1;
}

static void usage(FILE *f)
{
	fprintf(f,
		"Usage: fxagent [--config FILE] [OPTION]...   run as an agent\n"
		"       fxagent --once [OPTION]...            take one profile and exit\n"
		"       fxagent --check-config [FILE]         validate a config and exit\n"
		"Sample every CPU with perf_event_open and write Firefox Profiler profiles\n"
		"(gzip-compressed processed profiles; open them at https://profiler.firefox.com).\n"
		"As an agent, fxagent samples the whole system or the targets of its config and\n"
		"writes one chunk per target per window to output.directory.\n"
		"\n"
		"  -c, --config=FILE    the YAML config (default " FX_CONFIG_DEFAULT_PATH "\n"
		"                       if it exists); the flags below override its values\n"
		"      --check-config[=FILE]  validate FILE (or the default) and exit 0 or 2\n"
		"      --output-dir=DIR where the agent writes chunks (output.directory)\n"
		"      --window=SECONDS window length, 1-3600 (window.seconds)\n"
		"  --once               record once and write one profile, then exit\n"
		"  -d, --duration=TIME  how long to record: 500ms, 10s, 2m (default 10s)\n"
		"  -F, --frequency=HZ   samples per second per CPU, 1-10000 (default 99)\n"
		"  -o, --output=FILE    where to write the profile, - for stdout\n"
		"                       (default fxagent-HOST-TIME.json.gz)\n"
		"  -p, --pid=PID        only these processes (repeatable)\n"
		"      --no-kernel      leave out kernel frames\n"
		"      --include-idle   keep the samples of the idle task (pid 0)\n"
		"  -v, --verbose        log more\n"
		"  -h, --help           show this help and exit\n"
		"  -V, --version        show the version and exit\n"
		"\n"
		"Ctrl-C ends the recording early; the profile is still written.\n"
		"Exit status: 0 written, 1 runtime failure, 2 usage error.\n");
}

/* Parses "500ms", "10s", "2m", "1h" or a bare number of seconds. */
static int parse_duration(const char *s, uint64_t *ms)
{
	unsigned long long v;
	char *end;
	uint64_t mul;

	/* getopt_long() sets optarg for every option with an argument; the
	 * analyzer keeps it NULL from an earlier --check-config without one.
	 * NOLINTNEXTLINE(clang-analyzer-core.NullDereference) */
	if (!s[0] || s[0] == '-' || s[0] == '+')
		return -EINVAL;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (end == s || errno)
		return -EINVAL;
	if (!strcmp(end, "ms"))
		mul = 1;
	else if (!strcmp(end, "s") || !*end)
		mul = 1000;
	else if (!strcmp(end, "m"))
		mul = 60 * 1000;
	else if (!strcmp(end, "h"))
		mul = 3600 * 1000;
	else
		return -EINVAL;
	if (v == 0 || v > UINT64_MAX / mul / 1000000)
		return -ERANGE;
	*ms = v * mul;
	return 0;
}

static int parse_uint(const char *s, unsigned long long min, unsigned long long max,
		      unsigned long long *out)
{
	unsigned long long v;
	char *end;

	if (!s[0] || s[0] == '-' || s[0] == '+')
		return -EINVAL;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (end == s || *end || errno)
		return -EINVAL;
	if (v < min || v > max)
		return -ERANGE;
	*out = v;
	return 0;
}

static int parse_args(int argc, char **argv, struct options *o)
{
	enum {
		OPT_ONCE = 256,
		OPT_NO_KERNEL,
		OPT_INCLUDE_IDLE,
		OPT_UNWIND,
		OPT_STACK_BYTES,
		OPT_CHECK_CONFIG,
		OPT_OUTPUT_DIR,
		OPT_WINDOW,
	};
	static const struct option longopts[] = {
		{ "once", no_argument, NULL, OPT_ONCE },
		{ "duration", required_argument, NULL, 'd' },
		{ "frequency", required_argument, NULL, 'F' },
		{ "output", required_argument, NULL, 'o' },
		{ "pid", required_argument, NULL, 'p' },
		{ "no-kernel", no_argument, NULL, OPT_NO_KERNEL },
		{ "include-idle", no_argument, NULL, OPT_INCLUDE_IDLE },
		{ "unwind", required_argument, NULL, OPT_UNWIND },
		{ "stack-bytes", required_argument, NULL, OPT_STACK_BYTES },
		{ "config", required_argument, NULL, 'c' },
		{ "check-config", optional_argument, NULL, OPT_CHECK_CONFIG },
		{ "output-dir", required_argument, NULL, OPT_OUTPUT_DIR },
		{ "window", required_argument, NULL, OPT_WINDOW },
		{ "verbose", no_argument, NULL, 'v' },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },
		{ 0 },
	};
	unsigned long long v;
	int c;

	while ((c = getopt_long(argc, argv, "c:d:F:o:p:vhV", longopts, NULL)) != -1) {
		switch (c) {
		case OPT_ONCE:
			o->once = true;
			break;
		case 'c':
			o->config = optarg;
			break;
		case OPT_CHECK_CONFIG:
			o->check_config = true;
			/* --check-config FILE as well as --check-config=FILE */
			if (!optarg && optind < argc && argv[optind][0] != '-')
				optarg = argv[optind++];
			if (optarg)
				o->config = optarg;
			break;
		case OPT_OUTPUT_DIR:
			o->output_dir = optarg;
			break;
		case OPT_WINDOW:
			if (parse_uint(optarg, 1, 3600, &v) < 0) {
				fprintf(stderr,
					"fxagent: invalid --window '%s': expected a whole number "
					"of seconds from 1 to 3600\n",
					optarg);
				return -EINVAL;
			}
			o->window_seconds = (unsigned)v;
			break;
		case 'd':
			if (parse_duration(optarg, &o->duration_ms) < 0) {
				fprintf(stderr,
					"fxagent: invalid --duration '%s': expected a positive "
					"number with ms, s, m or h, e.g. 500ms, 10s, 2m\n",
					optarg);
				return -EINVAL;
			}
			break;
		case 'F':
			if (parse_uint(optarg, 1, 10000, &v) < 0) {
				fprintf(stderr,
					"fxagent: invalid --frequency '%s': expected a whole "
					"number of Hz from 1 to 10000\n",
					optarg);
				return -EINVAL;
			}
			o->frequency = (unsigned)v;
			o->set_frequency = true;
			break;
		case 'o':
			o->output = optarg;
			break;
		case 'p':
			if (parse_uint(optarg, 1, INT_MAX, &v) < 0) {
				fprintf(stderr,
					"fxagent: invalid --pid '%s': expected a process id\n",
					optarg);
				return -EINVAL;
			}
			if (o->npids == MAX_PIDS) {
				fprintf(stderr, "fxagent: too many --pid options (at most %d)\n",
					MAX_PIDS);
				return -EINVAL;
			}
			o->pids[o->npids++] = (uint32_t)v;
			break;
		case OPT_NO_KERNEL:
			o->kernel = false;
			o->set_kernel = true;
			break;
		case OPT_INCLUDE_IDLE:
			o->include_idle = true;
			o->set_idle = true;
			break;
		case OPT_UNWIND:
			/* Set by getopt_long(), as in parse_duration().
			 * NOLINTNEXTLINE(clang-analyzer-core.NonNullParamChecker) */
			if (!strcmp(optarg, "dwarf")) {
				o->unwind = FX_UNWIND_DWARF;
				o->set_unwind = true;
			} else if (!strcmp(optarg, "fp")) {
				o->unwind = FX_UNWIND_FP;
				o->set_unwind = true;
			} else {
				fprintf(stderr,
					"fxagent: invalid --unwind '%s': expected dwarf or fp\n",
					optarg);
				return -EINVAL;
			}
			break;
		case OPT_STACK_BYTES:
			if (parse_uint(optarg, 1024, 32768, &v) < 0 || v % 8) {
				fprintf(stderr,
					"fxagent: invalid --stack-bytes '%s': expected a multiple "
					"of 8 from 1024 to 32768\n",
					optarg);
				return -EINVAL;
			}
			o->stack_bytes = (uint32_t)v;
			o->set_stack = true;
			break;
		case 'v':
			o->verbose = true;
			break;
		case 'h':
			usage(stdout);
			exit(0);
		case 'V':
			printf("fxagent %s\n", FX_VERSION);
			exit(0);
		default:
			fprintf(stderr, "Try 'fxagent --help' for more information.\n");
			return -EINVAL;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "fxagent: unexpected argument '%s'\n", argv[optind]);
		return -EINVAL;
	}
	return 0;
}

/* The config: the file given, else the default file if there is one, else
 * the defaults; then the command line's flags over it; then, for the agent
 * (not --once, which uses neither its directories nor, with --output, its
 * upload), the files and directories it names, so that --check-config, the
 * start and a reload refuse the same things. Returns 0, or -EINVAL having
 * said what is wrong where (@cfg is then released). */
static int load_config(const struct options *o, struct fx_config *cfg)
{
	const char *path = o->config;
	char err[1024];
	int ret;

	if (!path && access(FX_CONFIG_DEFAULT_PATH, F_OK) == 0)
		path = FX_CONFIG_DEFAULT_PATH;
	if (path)
		ret = fx_config_load(path, cfg, err, sizeof(err));
	else
		ret = fx_config_defaults(cfg);
	if (ret < 0) {
		fx_log(FX_LOG_ERR, "%s", path ? err : "out of memory");
		return -EINVAL;
	}
	if (o->set_frequency)
		cfg->sampling.frequency = o->frequency;
	if (o->set_kernel)
		cfg->sampling.kernel_stacks = o->kernel;
	if (o->set_idle)
		cfg->sampling.include_idle = o->include_idle;
	if (o->set_unwind)
		cfg->sampling.dwarf = o->unwind == FX_UNWIND_DWARF;
	if (o->set_stack)
		cfg->sampling.stack_bytes = o->stack_bytes;
	if (o->window_seconds)
		cfg->window.seconds = o->window_seconds;
	if (o->output_dir) {
		char *dir = strdup(o->output_dir);

		if (!dir)
			return -ENOMEM;
		free(cfg->output.directory);
		cfg->output.directory = dir;
	}
	if (o->verbose)
		cfg->log.level = FX_LOG_DEBUG;
	if ((!o->once || o->check_config) && fx_config_check_files(cfg, err, sizeof(err)) < 0) {
		fx_log(FX_LOG_ERR, "%s", err);
		fx_config_release(cfg);
		return -EINVAL;
	}
	return 0;
}

/* SIGHUP: the same file, the same flags over it. */
static int reload_config(void *ctx, struct fx_config *out)
{
	const struct options *o = ctx;
	int ret = load_config(o, out);

	if (ret == -ENOMEM)
		fx_config_release(out);
	return ret;
}

static bool progress;

/* CPU time (user + system) this process used so far, in ns. */
static uint64_t cpu_ns(void)
{
	struct rusage ru;

	getrusage(RUSAGE_SELF, &ru);
	return (uint64_t)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000000000ull +
	       (uint64_t)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1000ull;
}

static void on_symbolize(size_t addresses, size_t objects)
{
	if (progress)
		fprintf(stderr, "\rsymbolizing %zu addresses in %zu objects...\033[K", addresses,
			objects);
}

static void raise_fd_limit(void)
{
	struct rlimit rl;

	/* Objects keep their files open until the window is written. */
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
}

static void default_output(char *buf, size_t len, const char *host)
{
	time_t t = time(NULL);
	struct tm tm;
	char ts[32];

	gmtime_r(&t, &tm);
	strftime(ts, sizeof(ts), "%Y%m%dT%H%M%SZ", &tm);
	snprintf(buf, len, "fxagent-%s-%s.json.gz", host, ts);
}

/* Fails early, before recording, when the profile could not be written. */
static int check_output(const char *path)
{
	char *dup, *dir;
	int ret = 0;

	if (!strcmp(path, "-"))
		return 0;
	dup = strdup(path);
	if (!dup)
		return -ENOMEM;
	dir = dirname(dup);
	if (access(dir, W_OK | X_OK) < 0)
		ret = fx_log_errno(FX_LOG_ERR, errno, "cannot write the profile to '%s': %s", path,
				   strerror(errno));
	free(dup);
	return ret;
}

static int record_once(const struct options *o)
{
	struct fx_sampler_opts sopts = { .frequency = o->frequency,
					 .kernel = o->kernel,
					 .ring_pages = o->ring_pages,
					 .user_regs_stack = o->unwind == FX_UNWIND_DWARF,
					 .stack_bytes = o->stack_bytes };
	struct fx_unwind_opts uopts = { .mode = o->unwind, .kernel = o->kernel, .max_procs = 256 };
	struct fx_recorder_opts ropts = {
		.include_idle = o->include_idle,
		.pids = o->npids ? o->pids : NULL,
		.npids = o->npids,
	};
	struct fx_sampler *sampler = NULL;
	struct fx_objects *objs = NULL;
	struct fx_procs *procs = NULL;
	struct fx_unwinder *unwinder = NULL;
	struct fx_symbolizer *symbolizer = NULL;
	struct fx_kallsyms *ks = NULL;
	struct fx_recorder *rec = NULL;
	struct fx_thread_name *names = NULL;
	size_t nnames = 0;
	struct fx_shipper *shipper = NULL;
	struct fx_chunk_info info;
	struct fx_profile_kv labels[FX_CONFIG_MAX_LABELS];
	struct fx_window window;
	struct fx_report_input rin;
	struct fx_report_stats rstats;
	struct sigaction sa = { .sa_handler = on_signal };
	char host[256] = "localhost", outbuf[512];
	const char *output = o->output;
	uint64_t start_ns, start_wall_ns, deadline, end_ns, cpu_start, cpu_rec, write_start;
	unsigned last_shown = UINT_MAX;
	int ret;

	fx_window_init(&window, 0);
	gethostname(host, sizeof(host) - 1);
	/* With upload.url and no --output, the snapshot goes through the spool
	 * to the collector, as the agent's chunks do. */
	if (!output && o->cfg->upload.url) {
		ret = fx_shipper_start(o->cfg, host, &shipper);
		if (ret < 0)
			goto out;
	}
	if (!output && !shipper) {
		default_output(outbuf, sizeof(outbuf), host);
		output = outbuf;
	}
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);

	ret = fx_sampler_open(&sopts, &sampler);
	if (ret < 0)
		goto out;
	/* Sampling works: now say what else a missing capability costs. */
	fx_service_check_caps();
	ret = output ? check_output(output) : 0;
	if (ret < 0)
		goto out;
	objs = fx_objects_new("/proc", 8192);
	procs = objs ? fx_procs_new(objs, "/proc") : NULL;
	uopts.objs = objs;
	unwinder = procs ? fx_unwind_new(&uopts) : NULL;
	rec = malloc(sizeof(*rec));
	if (!procs || !unwinder || !rec) {
		ret = fx_log_errno(FX_LOG_ERR, ENOMEM, "out of memory");
		goto out;
	}
	fx_recorder_init(rec, &ropts, fx_sampler_fmt(sampler), procs, unwinder, &window);

	cpu_start = cpu_ns();
	start_wall_ns = fx_now_ns(CLOCK_REALTIME);
	start_ns = fx_now_ns(CLOCK_MONOTONIC);
	deadline = start_ns + o->duration_ms * 1000000ull;
	ret = fx_sampler_enable(sampler);
	if (ret < 0)
		goto out;
	while (!stop_requested) {
		uint64_t now = fx_now_ns(CLOCK_MONOTONIC);
		int64_t left_ms = (int64_t)(deadline - now) / 1000000;

		if (now >= deadline)
			break;
		if (progress && (now - start_ns) / 1000000000ull != last_shown) {
			last_shown = (unsigned)((now - start_ns) / 1000000000ull);
			fprintf(stderr, "\rrecording %u/%" PRIu64 " s\033[K", last_shown,
				o->duration_ms / 1000);
		}
		ret = fx_sampler_poll(sampler, left_ms < 200 ? (int)left_ms + 1 : 200,
				      fx_recorder_handle, rec);
		if (ret < 0) {
			fx_log(FX_LOG_ERR, "reading perf rings failed: %s", strerror(-ret));
			goto out;
		}
	}
	fx_sampler_disable(sampler);
	end_ns = fx_now_ns(CLOCK_MONOTONIC);
	/* What the rings still hold belongs to the recording. */
	ret = fx_sampler_flush(sampler, fx_recorder_handle, rec);
	if (ret < 0)
		goto out;
	cpu_rec = cpu_ns() - cpu_start;
	write_start = fx_now_ns(CLOCK_MONOTONIC);
	/* The rings and the unwinder's per-process Dwfl are done with: let them
	 * go before the symbolizer reads debug info, so the two peaks do not add. */
	fx_sampler_free(sampler);
	sampler = NULL;
	fx_unwind_drop_idle(unwinder, fx_unwind_mark(unwinder));
	malloc_trim(0);

	for (size_t i = 0; i < o->cfg->nlabels && i < FX_CONFIG_MAX_LABELS; i++)
		labels[i] =
			(struct fx_profile_kv){ o->cfg->labels[i].key, o->cfg->labels[i].value };
	ret = fx_procs_names(procs, &window, &names, &nnames);
	if (ret < 0) {
		fx_err("out of memory");
		goto out;
	}
	symbolizer = fx_symbolizer_new(&(struct fx_symbolizer_opts){
		.debug_dirs = o->cfg->symbolization.ndebug_dirs
				      ? (const char *const *)o->cfg->symbolization.debug_dirs
				      : NULL,
		.no_demangle = !o->cfg->symbolization.demangle,
		.max_bytes = o->cfg->symbolization.max_memory });
	if (!symbolizer) {
		ret = fx_log_errno(FX_LOG_ERR, ENOMEM, "out of memory");
		goto out;
	}
	if (o->kernel) {
		ks = fx_kallsyms_load_system();
	}
	rin = (struct fx_report_input){
		.window = &window,
		.names = names,
		.nnames = nnames,
		.objs = objs,
		.symbolizer = symbolizer,
		.kallsyms = ks,
		.lost = rec->lost,
		.nlost = rec->nlost,
		.meta = {
			.start_time_ms = (double)start_wall_ns / 1e6,
			.start_ns = start_ns,
			.end_ns = end_ns,
			.interval_ms = 1000.0 / o->frequency,
			.product = "fxagent",
			.host = host,
			.target = "system",
			.seq = 0,
			.labels = labels,
			.nlabels = o->cfg->nlabels,
			.samples = window.counters.samples,
			.lost = window.counters.lost,
			.truncated = window.counters.truncated,
			.dropped = window.counters.dropped_stacks,
		},
		.seq = 0,
		.marker_pid = (uint32_t)getpid(),
		.marker_name = "fxagent",
		.on_symbolize = on_symbolize,
	};
	if (shipper) {
		info = (struct fx_chunk_info){
			.start_ms = (int64_t)(start_wall_ns / 1000000),
			.end_ms = (int64_t)((start_wall_ns + end_ns - start_ns) / 1000000),
			.seq = 0,
			.target = "system"
		};
		fx_spool_new_id(&info);
		fx_spool_path(fx_shipper_spool(shipper), &info, outbuf, sizeof(outbuf));
		output = outbuf;
	}
	ret = fx_report_write(&rin, output, &rstats);
	if (ret < 0)
		goto out;
	if (shipper) {
		fx_spool_add(fx_shipper_spool(shipper), &info);
		fx_shipper_kick(shipper);
		if (progress)
			fprintf(stderr, "\ruploading to %s ...\033[K", o->cfg->upload.url);
		/* Retries as the agent would, for a few request timeouts (30 s at
		 * most: someone waits for the answer); what is left stays in the
		 * spool for the agent to send. */
		uint64_t wait_ms = 3ull * o->cfg->upload.timeout_ms;
		struct fx_shipper_stats st;

		if (!fx_shipper_wait_empty(shipper, wait_ms < 30000 ? wait_ms : 30000)) {
			ret = fx_log_errno(FX_LOG_ERR, EIO,
					   "the snapshot could not be uploaded yet; it waits in %s "
					   "for the agent to send it",
					   output);
			goto out;
		}
		fx_shipper_get_stats(shipper, &st);
		if (st.refused) {
			ret = fx_log_errno(FX_LOG_ERR, EBADMSG,
					   "the snapshot's spool file failed its check and was not "
					   "sent; it was moved to the spool's rejected/");
			goto out;
		}
		if (st.rejected) {
			ret = fx_log_errno(
				FX_LOG_ERR, EPROTO,
				"the collector refused the snapshot; it was moved to the "
				"spool's rejected/");
			goto out;
		}
	}
	if (progress)
		fprintf(stderr,
			"\rwrote %s: %" PRIu64 " samples, %" PRIu64 " threads, %" PRIu64
			" bytes\033[K\n",
			output, rstats.profile.samples, rstats.profile.threads,
			rstats.profile.bytes);
	/* The figures bench/once.py reads. */
	fx_info("stats: recorded %.3f s, agent cpu while recording %.1f ms (%.3f%% of one cpu), "
		"symbolize+write %.1f ms, %" PRIu64
		" samples, %zu frames, %zu stacks, %zu objects, "
		"peak rss %.1f MiB",
		(double)(end_ns - start_ns) / 1e9, (double)cpu_rec / 1e6,
		100.0 * (double)cpu_rec / (double)(end_ns - start_ns),
		(double)(fx_now_ns(CLOCK_MONOTONIC) - write_start) / 1e6, window.counters.samples,
		window.nframes, window.nstacks, rstats.objects, (double)fx_peak_rss_kib() / 1024.0);
	if (fx_unwind_dwarf(unwinder)) {
		const struct fx_dwunwind *dw = fx_unwind_dwarf(unwinder);
		struct fx_dwunwind_stats ds;

		fx_dwunwind_get_stats(dw, &ds);
		fx_info("stats: dwarf unwinds %" PRIu64 ", median %.1f us, p99 %.1f us, truncated "
			"%" PRIu64 ", dwfl created %" PRIu64 ", updated %" PRIu64
			", evicted %" PRIu64,
			ds.unwinds, (double)fx_dwunwind_quantile_ns(dw, 0.5) / 1000.0,
			(double)fx_dwunwind_quantile_ns(dw, 0.99) / 1000.0, ds.truncated,
			ds.dwfl_new, ds.dwfl_update, ds.evicted);
	}
	if (window.counters.lost)
		fx_warn("%" PRIu64 " samples were lost (rings overflowed)", window.counters.lost);
	ret = 0;
out:
	if (progress && ret < 0)
		fputc('\n', stderr);
	free(names);
	fx_shipper_stop(shipper, fx_now_ns(CLOCK_MONOTONIC) + 1000000000ull);
	fx_kallsyms_free(ks);
	fx_symbolizer_free(symbolizer);
	fx_window_release(&window);
	free(rec);
	fx_unwind_free(unwinder);
	fx_procs_free(procs);
	fx_objects_free(objs);
	fx_sampler_free(sampler);
	return ret;
}

int main(int argc, char **argv)
{
	struct options o = {
		.duration_ms = 10000,
		.frequency = 99,
		.kernel = true,
		.unwind = FX_UNWIND_DWARF,
		.stack_bytes = 16384,
	};

	struct fx_config cfg;
	int ret;

	fx_log_open();
	if (parse_args(argc, argv, &o) < 0)
		return EXIT_USAGE;
	if (load_config(&o, &cfg) < 0)
		return EXIT_USAGE;
	if (o.check_config) {
		printf("%s: ok\n", o.config ? o.config : "defaults");
		fx_config_release(&cfg);
		return 0;
	}
	fx_log_set_level((enum fx_log_level)cfg.log.level);
	/* What --once samples is what the config says, flags included. */
	o.cfg = &cfg;
	o.frequency = cfg.sampling.frequency;
	o.kernel = cfg.sampling.kernel_stacks;
	o.include_idle = cfg.sampling.include_idle;
	o.unwind = cfg.sampling.dwarf ? FX_UNWIND_DWARF : FX_UNWIND_FP;
	o.stack_bytes = cfg.sampling.stack_bytes;
	o.ring_pages = cfg.sampling.ring_bytes / (size_t)sysconf(_SC_PAGESIZE);
	raise_fd_limit();
	if (o.once) {
		progress = isatty(STDERR_FILENO);
		ret = record_once(&o) < 0 ? 1 : 0;
	} else {
		struct sigaction sa = { .sa_handler = on_signal };
		struct fx_daemon_ctl ctl = { .stop = &stop_requested,
					     .reload = &reload_requested,
					     .load = reload_config,
					     .ctx = &o };

		sigemptyset(&sa.sa_mask);
		sigaction(SIGINT, &sa, NULL);
		sigaction(SIGTERM, &sa, NULL);
		sigaction(SIGHUP, &sa, NULL);
		struct fx_daemon_stats ds = { 0 };

		ret = fx_daemon_run(&cfg, &ctl, &ds) < 0 ? 1 : 0;
		/* The figures bench/daemon.py reads. */
		fx_info("stats: windows %" PRIu64 ", chunks %" PRIu64 ", chunk errors %" PRIu64
			", samples %" PRIu64 ", rotation avg %.1f us max %.1f us, rotation cpu avg "
			"%.1f us max %.1f us, peak rss %.1f MiB",
			ds.windows, ds.chunks, ds.chunk_errors, ds.samples,
			ds.windows ? (double)ds.rotation_ns_sum / (double)ds.windows / 1000.0 : 0,
			(double)ds.rotation_ns_max / 1000.0,
			ds.windows ? (double)ds.rotation_cpu_ns_sum / (double)ds.windows / 1000.0
				   : 0,
			(double)ds.rotation_cpu_ns_max / 1000.0,
			(double)fx_peak_rss_kib() / 1024.0);
	}
	fx_config_release(&cfg);
	return ret;
}

/* SPDX-License-Identifier: MIT */
/* fxagent: command line. `fxagent --once` records every CPU for a while and
 * writes one Firefox Profiler profile. */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <malloc.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "fxagent/config.h"
#include "fxagent/daemon.h"
#include "fxagent/dwunwind.h"
#include "fxagent/log.h"
#include "fxagent/pipeline.h"
#include "fxagent/profile.h"
#include "fxagent/sampler.h"
#include "fxagent/serve.h"
#include "fxagent/service.h"
#include "fxagent/shipper.h"
#include "fxagent/unwind.h"
#include "fxagent/util.h"
#include "fxagent/view.h"

#define EXIT_USAGE  2
#define EXIT_UPLOAD 3 /* --check-upload: the store refused or did not answer */
#define MAX_PIDS    1024

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
	enum fx_unwind_mode unwind;
	enum fx_dwunwind_engine engine;
	uint32_t stack_bytes;
	unsigned verbose;   /* -v: a line per window; -vv: debug */
	bool set_duration;  /* -d given */
	bool serve;	    /* --once --serve[=ADDR:PORT]: then serve the profile */
	const char *listen; /* its ADDR:PORT, NULL for the default */
	bool open;	    /* --open: and open it in the browser */
	/* Daemon and config */
	const char *config;	 /* --config FILE */
	bool check_config;	 /* --check-config [FILE] */
	bool check_upload;	 /* --check-upload: and ask the S3 store */
	const char *output_dir;	 /* --output-dir DIR */
	unsigned window_seconds; /* --window SECONDS, 0 = from the config */
	/* Which sampling flags were given: they override the config. */
	bool set_frequency, set_kernel, set_idle, set_unwind, set_stack, check_names;
	bool off_cpu;	     /* --off-cpu */
	bool no_jvm_perfmap; /* --no-jvm-perfmap */

	/* --reuse-threads */
	bool reuse_threads;
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
		"       fxagent view SOURCE... [OPTION]...    merge chunks into one profile\n"
		"                                             (fxagent view --help)\n"
		"Sample every CPU with perf_event_open and write Firefox Profiler profiles\n"
		"(gzip-compressed processed profiles; open them at https://profiler.firefox.com).\n"
		"As an agent, fxagent samples the whole system or the targets of its config and\n"
		"writes one chunk per target per window to output.directory.\n"
		"\n"
		"  -c, --config=FILE    the YAML config (default " FX_CONFIG_DEFAULT_PATH "\n"
		"                       if it exists); the flags below override its values\n"
		"      --check-config[=FILE]  validate FILE (or the default) and exit 0 or 2\n"
		"      --check-upload   with --check-config: ask the S3 store (upload.s3) once\n"
		"                       whether it accepts the credentials (exit 3 if not)\n"
		"      --output-dir=DIR where the agent writes chunks (output.directory)\n"
		"      --window=SECONDS window length, 1-3600 (window.seconds)\n"
		"  --once               record once and write one profile, then exit;\n"
		"                       -d, -o, -p and --serve imply it\n"
		"  -d, --duration=TIME  how long to record: 500ms, 10s, 2m (default 10s)\n"
		"  -F, --frequency=HZ   samples per second per CPU, 1-10000 (default 99)\n"
		"  -o, --output=FILE    where to write the profile, - for stdout\n"
		"                       (default fxagent-HOST-TIME.json.gz)\n"
		"      --serve[=ADDR:PORT]  then serve the profile to the Firefox Profiler\n"
		"                       until Ctrl-C (127.0.0.1, a port in 3000-3099)\n"
		"      --open           and open it in the browser (xdg-open)\n"
		"  -p, --pid=PID        only these processes (repeatable)\n"
		"      --no-kernel      leave out kernel frames\n"
		"      --unwind=MODE    user stacks: dwarf (default: rules compiled from\n"
		"                       .eh_frame, libdwfl where they cannot), fp (frame\n"
		"                       pointers), libdwfl (libdwfl only), check (both,\n"
		"                       compared; -v prints how many frames agree)\n"
		"      --stack-bytes=N  user stack copied per sample for dwarf: a multiple\n"
		"                       of 8 from 1024 to 32768 (default 16384)\n"
		"      --include-idle   keep the samples of the idle task (pid 0)\n"
		"      --off-cpu        and where threads wait, weighted by time: a track\n"
		"                       \"THREAD (off-CPU)\" beside each thread that waited\n"
		"      --reuse-threads  one track per process and thread name: threads of\n"
		"                       one name share it (window.reuse_threads)\n"
		"      --check-names    judge every name given against a reading of its\n"
		"                       object of its own (slow; -v prints the count)\n"
		"      --no-jvm-perfmap  do not ask JVMs for fresh perf maps (their\n"
		"                       attach listener, SIGQUIT)\n"
		"  -v, --verbose        log more: a line per window (-vv: debug)\n"
		"  -h, --help           show this help and exit\n"
		"  -V, --version        show the version and exit\n"
		"\n"
		"Ctrl-C ends the recording early; the profile is still written.\n"
		"Exit status: 0 written, 1 runtime failure, 2 usage error.\n");
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

/* Says what is wrong with an option's value. Returns -EINVAL. */
static int bad_value(const char *opt, const char *arg, const char *expected)
{
	fprintf(stderr, "fxagent: invalid --%s '%s': expected %s\n", opt, arg, expected);
	return -EINVAL;
}

enum {
	OPT_ONCE = 256,
	OPT_NO_KERNEL,
	OPT_INCLUDE_IDLE,
	OPT_UNWIND,
	OPT_STACK_BYTES,
	OPT_CHECK_CONFIG,
	OPT_CHECK_UPLOAD,
	OPT_OUTPUT_DIR,
	OPT_WINDOW,
	OPT_SERVE,
	OPT_OPEN,
	OPT_CHECK_NAMES,
	OPT_OFF_CPU,
	OPT_REUSE_THREADS,
	OPT_NO_JVM_PERFMAP,
};

/* The options that set how to sample. Returns 0, -EINVAL (said), or 1 for
 * an option that is not one of them. */
static int sampling_option(int c, const char *arg, struct options *o)
{
	unsigned long long v;

	switch (c) {
	case 'F':
		if (parse_uint(arg, 1, 10000, &v) < 0)
			return bad_value("frequency", arg, "a whole number of Hz from 1 to 10000");
		o->frequency = (unsigned)v;
		o->set_frequency = true;
		return 0;
	case 'p':
		if (parse_uint(arg, 1, INT_MAX, &v) < 0)
			return bad_value("pid", arg, "a process id");
		if (o->npids == MAX_PIDS) {
			fprintf(stderr, "fxagent: too many --pid options (at most %d)\n", MAX_PIDS);
			return -EINVAL;
		}
		o->pids[o->npids++] = (uint32_t)v;
		return 0;
	case OPT_NO_KERNEL:
		o->kernel = false;
		o->set_kernel = true;
		return 0;
	case OPT_INCLUDE_IDLE:
		o->include_idle = true;
		o->set_idle = true;
		return 0;
	case OPT_UNWIND:
		if (!strcmp(arg, "fp"))
			o->unwind = FX_UNWIND_FP;
		else if (!strcmp(arg, "dwarf"))
			o->engine = FX_DWUNWIND_TABLES;
		else if (!strcmp(arg, "libdwfl"))
			o->engine = FX_DWUNWIND_LIBDWFL;
		else if (!strcmp(arg, "check"))
			o->engine = FX_DWUNWIND_CHECK;
		else
			return bad_value("unwind", arg, "dwarf, fp, libdwfl or check");
		if (strcmp(arg, "fp") != 0)
			o->unwind = FX_UNWIND_DWARF;
		o->set_unwind = true;
		return 0;
	case OPT_CHECK_NAMES:
		o->check_names = true;
		return 0;
	case OPT_OFF_CPU:
		o->off_cpu = true;
		return 0;
	case OPT_REUSE_THREADS:
		o->reuse_threads = true;
		return 0;
	case OPT_NO_JVM_PERFMAP:
		o->no_jvm_perfmap = true;
		return 0;
	case OPT_STACK_BYTES:
		if (parse_uint(arg, 1024, 32768, &v) < 0 || v % 8)
			return bad_value("stack-bytes", arg, "a multiple of 8 from 1024 to 32768");
		o->stack_bytes = (uint32_t)v;
		o->set_stack = true;
		return 0;
	default:
		return 1;
	}
}

/* The options of the modes and their outputs; as sampling_option(). */
static int mode_option(int c, const char *arg, struct options *o)
{
	unsigned long long v;

	switch (c) {
	case OPT_ONCE:
		o->once = true;
		return 0;
	case 'c':
		o->config = arg;
		return 0;
	case OPT_OUTPUT_DIR:
		o->output_dir = arg;
		return 0;
	case OPT_WINDOW:
		if (parse_uint(arg, 1, 3600, &v) < 0)
			return bad_value("window", arg, "a whole number of seconds from 1 to 3600");
		o->window_seconds = (unsigned)v;
		return 0;
	case 'd':
		/* A day at most: a snapshot keeps its window in memory. */
		if (fx_config_parse_duration(arg, &o->duration_ms) < 0 || !o->duration_ms ||
		    o->duration_ms > 86400000)
			return bad_value("duration", arg, "from 1ms to 1d: " FX_DURATION_FORMS);
		o->set_duration = true;
		return 0;
	case 'o':
		o->output = arg;
		return 0;
	case 'v':
		o->verbose++;
		return 0;
	case OPT_SERVE:
		o->serve = true;
		o->listen = arg[0] ? arg : NULL;
		return 0;
	case OPT_OPEN:
		o->open = true;
		return 0;
	default:
		return 1;
	}
}

/* Says, as a usage error, that @flag does not go with @mode. Returns -EINVAL. */
static int not_with(const char *flag, const char *mode, const char *hint)
{
	fprintf(stderr, "fxagent: %s does not go with %s: %s\n", flag, mode, hint);
	return -EINVAL;
}

/* Says, as a usage error, that @flag needs @other. Returns -EINVAL. */
static int needs(const char *flag, const char *other, const char *hint)
{
	fprintf(stderr, "fxagent: %s needs %s: %s\n", flag, other, hint);
	return -EINVAL;
}

/* The flags of a snapshot say that one is wanted: they imply --once. The
 * agent's own flags then, or any recording with --check-config, would be
 * ignored without a word: refused instead. */
static int check_modes(struct options *o)
{
	const char *snapshot = o->set_duration ? "--duration"
			       : o->output     ? "--output"
			       : o->npids      ? "--pid"
			       : o->serve      ? "--serve"
			       : o->open       ? "--open"
			       : o->once       ? "--once"
					       : NULL;

	if (o->check_config && snapshot)
		return not_with(snapshot, "--check-config",
				"it checks a config and exits without recording");
	if (o->check_upload && !o->check_config)
		return needs("--check-upload", "--check-config",
			     "it asks the store when the config is checked");
	if (snapshot)
		o->once = true;
	if (o->once && (o->window_seconds || o->output_dir))
		return not_with(o->window_seconds ? "--window" : "--output-dir", snapshot,
				"a snapshot is one profile (-o FILE); windows and chunks are "
				"the agent's (leave out the snapshot flags)");
	if (o->open && !o->serve)
		return needs("--open", "--serve", "it opens the served profile in a browser");
	if (o->serve && o->output && !strcmp(o->output, "-"))
		return not_with("--serve", "--output -", "it serves a profile file");
	return 0;
}

static int parse_args(int argc, char **argv, struct options *o)
{
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
		{ "check-names", no_argument, NULL, OPT_CHECK_NAMES },
		{ "off-cpu", no_argument, NULL, OPT_OFF_CPU },
		{ "reuse-threads", no_argument, NULL, OPT_REUSE_THREADS },
		{ "no-jvm-perfmap", no_argument, NULL, OPT_NO_JVM_PERFMAP },
		{ "config", required_argument, NULL, 'c' },
		{ "check-config", optional_argument, NULL, OPT_CHECK_CONFIG },
		{ "check-upload", no_argument, NULL, OPT_CHECK_UPLOAD },
		{ "output-dir", required_argument, NULL, OPT_OUTPUT_DIR },
		{ "window", required_argument, NULL, OPT_WINDOW },
		{ "verbose", no_argument, NULL, 'v' },
		{ "serve", optional_argument, NULL, OPT_SERVE },
		{ "open", no_argument, NULL, OPT_OPEN },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },
		{ 0 },
	};
	int c, ret;

	while ((c = getopt_long(argc, argv, "c:d:F:o:p:vhV", longopts, NULL)) != -1) {
		if (c == OPT_CHECK_UPLOAD) {
			o->check_upload = true;
			continue;
		}
		if (c == OPT_CHECK_CONFIG) {
			o->check_config = true;
			/* --check-config FILE as well as --check-config=FILE */
			if (!optarg && optind < argc && argv[optind][0] != '-')
				optarg = argv[optind++];
			if (optarg)
				o->config = optarg;
			continue;
		}
		/* --serve ADDR as well as --serve=ADDR */
		if (c == OPT_SERVE && !optarg && optind < argc && fx_serve_is_listen(argv[optind]))
			optarg = argv[optind++];
		if (c == 'h') {
			usage(stdout);
			exit(0);
		}
		if (c == 'V') {
			printf("fxagent %s\n", FX_VERSION);
			exit(0);
		}
		/* Options without an argument get "" rather than NULL. */
		ret = sampling_option(c, optarg ? optarg : "", o);
		if (ret > 0)
			ret = mode_option(c, optarg ? optarg : "", o);
		if (ret < 0)
			return ret;
		if (ret > 0) {
			fprintf(stderr, "Try 'fxagent --help' for more information.\n");
			return -EINVAL;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "fxagent: unexpected argument '%s'\n", argv[optind]);
		return -EINVAL;
	}
	return check_modes(o);
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
	if (o->set_unwind) {
		cfg->sampling.dwarf = o->unwind == FX_UNWIND_DWARF;
		cfg->sampling.dwarf_engine = (uint8_t)o->engine;
	}
	if (o->set_stack)
		cfg->sampling.stack_bytes = o->stack_bytes;
	if (o->check_names)
		cfg->symbolization.check_names = true;
	if (o->off_cpu)
		cfg->sampling.off_cpu.enabled = true;
	if (o->reuse_threads)
		cfg->window.reuse_threads = true;
	if (o->no_jvm_perfmap)
		cfg->symbolization.jvm_perfmap = false;
	if (o->window_seconds)
		cfg->window.seconds = o->window_seconds;
	if (o->output_dir) {
		char *dir = strdup(o->output_dir);

		if (!dir)
			return -ENOMEM;
		free(cfg->output.directory);
		cfg->output.directory = dir;
	}
	if (o->verbose && cfg->log.level < (o->verbose > 1 ? FX_LOG_DEBUG : FX_LOG_INFO))
		cfg->log.level = o->verbose > 1 ? FX_LOG_DEBUG : FX_LOG_INFO;
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

/* --once --output FILE, or with upload.url or s3 through the spool: says how the
 * upload went. Returns 0 or -errno (said). */
static int wait_upload(struct fx_pipeline *p, const struct options *o, const char *path)
{
	/* Retries as the agent would, for a few request timeouts (30 s at
	 * most: someone waits for the answer); what is left stays in the
	 * spool for the agent to send. */
	uint64_t wait_ms = 3ull * o->cfg->upload.timeout_ms;
	int ret;

	if (progress && o->cfg->upload.s3.bucket)
		fprintf(stderr, "\ruploading to s3://%s/%s ...\033[K", o->cfg->upload.s3.bucket,
			o->cfg->upload.s3.prefix ? o->cfg->upload.s3.prefix : "");
	else if (progress)
		fprintf(stderr, "\ruploading to %s ...\033[K", o->cfg->upload.url);
	ret = fx_pipeline_drain(p, wait_ms < 30000 ? wait_ms : 30000);
	if (ret == -EAGAIN)
		fx_log(FX_LOG_ERR,
		       "the snapshot could not be uploaded yet; it waits in %s for the agent to "
		       "send it",
		       path);
	else if (ret == -EBADMSG)
		fx_log(FX_LOG_ERR, "the snapshot's spool file failed its check and was not sent; "
				   "it was moved to the spool's rejected/");
	else if (ret < 0)
		fx_log(FX_LOG_ERR,
		       "the collector refused the snapshot; it was moved to the spool's rejected/");
	return ret;
}

/* The figures bench/ reads (fxbench.py: ONCE_STATS, DWARF_STATS). */
/* --check-names: what was judged (asked for, so said at the default level). */
static void say_names(const struct fx_pipeline_stats *ps)
{
	const struct fx_namecheck_stats *n = &ps->names;

	if (n->checked || n->unnamed)
		fx_log(n->wrong ? FX_LOG_WARN : FX_LOG_NOTICE,
		       "name check: %" PRIu64 " of %" PRIu64 " names wrong; %" PRIu64
		       " addresses unnamed (not judged)",
		       n->wrong, n->checked, n->unnamed);
}

/* Whether process @pid has exited: gone, or a zombie its parent has not
 * reaped yet. */
static bool pid_exited(uint32_t pid)
{
	char path[32], buf[256];
	const char *paren;
	FILE *f;
	bool zombie = false;

	if (kill((pid_t)pid, 0) < 0 && errno == ESRCH)
		return true;
	snprintf(path, sizeof(path), "/proc/%u/stat", pid);
	f = fopen(path, "re");
	if (!f)
		return false;
	/* "pid (comm) S ...": the comm may hold spaces and parentheses. */
	if (fgets(buf, sizeof(buf), f) && (paren = strrchr(buf, ')')) && paren[1] == ' ')
		zombie = paren[2] == 'Z' || paren[2] == 'X';
	fclose(f);
	return zombie;
}

/* A recording with almost no samples (under a tenth of one busy CPU's):
 * why, so that an empty profile is not taken for a broken agent. */
static void say_few_samples(const struct options *o, const struct fx_pipeline_stats *ps,
			    uint64_t rec_ns)
{
	uint64_t busy = rec_ns / 1000000 * o->cfg->sampling.frequency / 1000;
	char why[512] = "";
	size_t n = 0;

	if (ps->samples * 10 >= busy)
		return;
	for (size_t i = 0; i < o->npids && n < sizeof(why); i++)
		if (pid_exited(o->pids[i]))
			n += (size_t)snprintf(why + n, sizeof(why) - n, "%spid %u exited",
					      n ? ", " : "", o->pids[i]);
	if (!n && o->npids)
		n = (size_t)snprintf(why, sizeof(why), "the processes of --pid used little CPU");
	if (!n && ps->idle)
		n = (size_t)snprintf(why, sizeof(why),
				     "the CPUs were idle: %" PRIu64
				     " samples of the idle task were "
				     "left out (--include-idle keeps them)",
				     ps->idle);
	if (!n)
		snprintf(why, sizeof(why), "little ran on the CPUs");
	fx_log(FX_LOG_WARN,
	       "only %" PRIu64 " samples in %.1f s (one busy CPU gives %" PRIu64 "): %s",
	       ps->samples, (double)rec_ns / 1e9, busy, why);
}

/* The off-CPU waits: what the profile shows and leaves out, in the words
 * and numbers of its marker and meta.fxagent.offCpu; with @warn, on stderr
 * whenever some had to go without their stacks or were lost (--once: the
 * daemon's log says it per episode). */
static void say_waits(const struct fx_config *cfg, const struct fx_pipeline_stats *ps, bool warn)
{
	struct fx_profile_marker m = { .waits = (int64_t)ps->waits,
				       .wait_ms = (double)ps->wait_us / 1000,
				       .unstacked = (int64_t)ps->waits_unstacked,
				       .unstacked_ms = (double)ps->waits_unstacked_us / 1000,
				       .waits_lost = (int64_t)ps->waits_lost_shown,
				       .lost_ms = (double)ps->waits_lost_us / 1000 };
	char sum[512];

	fx_profile_offcpu_summary(&m, sum, sizeof(sum));
	if (warn && (m.unstacked || m.waits_lost))
		fx_warn("off-CPU: %s (sampling.off_cpu.budget: %u a second per CPU; more shows "
			"more of their own stacks)",
			sum, cfg->sampling.off_cpu.budget);
	fx_info("stats: off-CPU: %s; the program: %" PRIu64 " waits begun, %" PRIu64
		" drawn and %" PRIu64 " in progress at the start: %" PRIu64 " with stacks, %" PRIu64
		" without, %" PRIu64 " lost; starts replaced %" PRIu64
		", ends without a start %" PRIu64 ", stacks unreadable %" PRIu64 ", bad %" PRIu64
		"; ring %zu KiB",
		sum, ps->offcpu.waits, ps->offcpu.drawn, ps->offcpu.seeded, ps->offcpu.stacked,
		ps->offcpu.unstacked, ps->offcpu.lost, ps->waits_lost, ps->waits_unpaired,
		ps->offcpu.stack_faults, ps->offcpu.bad, ps->offcpu.ring_bytes / 1024);
}

static void print_stats(struct fx_pipeline *p, const struct options *o, uint64_t rec_ns,
			uint64_t cpu_rec, uint64_t write_ns)
{
	const struct fx_unwinder *uw = fx_pipeline_unwinder(p);
	struct fx_pipeline_stats ps;
	char waits[48];

	fx_pipeline_get_stats(p, &ps);
	if (progress)
		fputs("\r\033[K", stderr);
	/* Always said: a script's log shows what the snapshot became. */
	snprintf(waits, sizeof(waits), ", %" PRIu64 " waits", ps.last_waits);
	if (o->output)
		fx_log(FX_LOG_NOTICE,
		       "wrote %s: %" PRIu64 " samples%s, %" PRIu64 " threads, %" PRIu64 " bytes",
		       o->output, ps.last_samples, ps.off_cpu ? waits : "", ps.last_threads,
		       ps.last_bytes);
	else
		fx_log(FX_LOG_NOTICE,
		       "uploaded to %s%s%s: %" PRIu64 " samples%s, %" PRIu64 " threads, %" PRIu64
		       " bytes",
		       o->cfg->upload.s3.bucket ? "s3://" : "",
		       o->cfg->upload.s3.bucket ? o->cfg->upload.s3.bucket : o->cfg->upload.url,
		       o->cfg->upload.s3.bucket ? "/" : "", ps.last_samples,
		       ps.off_cpu ? waits : "", ps.last_threads, ps.last_bytes);
	say_few_samples(o, &ps, rec_ns);
	if (ps.off_cpu)
		say_waits(o->cfg, &ps, true);
	fx_info("stats: recorded %.3f s, agent cpu while recording %.1f ms (%.3f%% of one cpu), "
		"symbolize+write %.1f ms, %" PRIu64
		" samples, %zu frames, %zu stacks, %zu objects, peak rss %.1f MiB",
		(double)rec_ns / 1e9, (double)cpu_rec / 1e6,
		100.0 * (double)cpu_rec / (double)rec_ns, (double)write_ns / 1e6, ps.samples,
		ps.last_frames, ps.last_stacks, ps.last_objects,
		(double)fx_peak_rss_kib() / 1024.0);
	if (uw && fx_unwind_dwarf(uw)) {
		const struct fx_dwunwind *dw = fx_unwind_dwarf(uw);
		struct fx_dwunwind_stats ds;

		struct fx_cfitab_stats ts;

		fx_dwunwind_get_stats(dw, &ds);
		fx_dwunwind_table_stats(dw, &ts);
		fx_info("stats: dwarf unwinds %" PRIu64 ", median %.1f us, p99 %.1f us, truncated "
			"%" PRIu64 ", dwfl created %" PRIu64 ", updated %" PRIu64
			", evicted %" PRIu64,
			ds.unwinds, (double)fx_dwunwind_quantile_ns(dw, 0.5) / 1000.0,
			(double)fx_dwunwind_quantile_ns(dw, 0.99) / 1000.0, ds.truncated,
			ds.dwfl_new, ds.dwfl_update, ds.evicted);
		fx_info("stats: copies that ran out %" PRIu64 ": walked on from the thread's "
			"memory %" PRIu64 ", by frame pointers then its outermost frames %" PRIu64
			", as the thread's last %" PRIu64 ", by frame pointers only %" PRIu64
			", no frame-pointer link %" PRIu64,
			ds.stitched + ds.cut_no_link, ds.stitch_live, ds.stitch_outer,
			ds.stitch_cached, ds.stitch_fp, ds.cut_no_link);
		fx_info("stats: unwound by tables %" PRIu64 ", by libdwfl %" PRIu64
			" (no mapping %" PRIu64 ", no table %" PRIu64 ", no rule %" PRIu64
			", register %" PRIu64 "); tables: peak %.1f KiB, functions %" PRIu64
			", rows %" PRIu64 ", compiled in %.1f ms, objects without %" PRIu64
			", functions cut at the row bound %" PRIu64,
			ds.by_tables, ds.by_libdwfl, ds.left_no_map, ds.left_no_table,
			ds.left_no_rule, ds.left_register, (double)ts.peak_bytes / 1024.0,
			ts.functions, ts.rows, (double)ts.compile_ns / 1e6, ts.no_table,
			ts.row_capped);
		if (ds.jit_by_cfi || ds.jit_by_fp)
			fx_info("stats: JIT frames walked by their runtime's CFI %" PRIu64
				", by frame pointers %" PRIu64,
				ds.jit_by_cfi, ds.jit_by_fp);
		if (ds.check_samples)
			fx_info("stats: unwind check: %" PRIu64 " of %" PRIu64
				" samples the same as libdwfl's, %" PRIu64 " of %" PRIu64
				" frames (%.3f%%)",
				ds.check_same, ds.check_samples, ds.check_frames_same,
				ds.check_frames,
				ds.check_frames ? 100.0 * (double)ds.check_frames_same /
							  (double)ds.check_frames
						: 100.0);
	}
	say_names(&ps);
	if (ps.lost)
		fx_warn("%" PRIu64 " samples were lost (rings overflowed)", ps.lost);
}

/* Samples until the duration is over or a signal comes. Returns 0 or -errno. */
static int sample_for(struct fx_pipeline *p, uint64_t duration_ms)
{
	uint64_t start = fx_now_ns(CLOCK_MONOTONIC), deadline = start + duration_ms * 1000000ull;
	unsigned last_shown = UINT_MAX;
	int ret = 0;

	while (!stop_requested && ret >= 0) {
		uint64_t now = fx_now_ns(CLOCK_MONOTONIC);
		int64_t left_ms = (int64_t)(deadline - now) / 1000000;

		if (now >= deadline)
			break;
		if (progress && (now - start) / 1000000000ull != last_shown) {
			last_shown = (unsigned)((now - start) / 1000000000ull);
			fprintf(stderr, "\rrecording %u/%" PRIu64 " s\033[K", last_shown,
				duration_ms / 1000);
		}
		ret = fx_pipeline_step(p, left_ms < FX_SAMPLER_DRAIN_MS ? (int)left_ms + 1
									: FX_SAMPLER_DRAIN_MS);
	}
	return ret < 0 ? ret : 0;
}

/* --once: what would make the recording useless, found before it starts: a
 * pid that is not there (a usage error: -EINVAL), an output file that cannot
 * be made (-EIO, as a failure to write it later would be). Said. */
static int check_snapshot(const struct options *o)
{
	char dir[PATH_MAX];
	struct stat st;
	const char *slash;

	for (size_t i = 0; i < o->npids; i++) {
		if (pid_exited(o->pids[i])) {
			fx_log(FX_LOG_ERR, "--pid %u: no such process", o->pids[i]);
			return -EINVAL;
		}
	}
	if (!o->output || !strcmp(o->output, "-"))
		return 0;
	if (stat(o->output, &st) == 0 && S_ISDIR(st.st_mode)) {
		fx_log(FX_LOG_ERR, "--output %s is a directory; give a file in it, such as %s/%s",
		       o->output, o->output, "profile.json.gz");
		return -EIO;
	}
	slash = strrchr(o->output, '/');
	if (!slash)
		snprintf(dir, sizeof(dir), ".");
	else
		snprintf(dir, sizeof(dir), "%.*s",
			 slash == o->output ? 1 : (int)(slash - o->output), o->output);
	if (stat(dir, &st) < 0) {
		fx_log_errno(FX_LOG_ERR, errno, "--output %s: its directory %s", o->output, dir);
		return -EIO;
	}
	if (!S_ISDIR(st.st_mode)) {
		fx_log(FX_LOG_ERR, "--output %s: %s is not a directory", o->output, dir);
		return -EIO;
	}
	if (access(dir, W_OK | X_OK) < 0) {
		fx_log_errno(FX_LOG_ERR, errno, "--output %s: cannot write in %s", o->output, dir);
		return -EIO;
	}
	return 0;
}

/* --once: a driver of the pipeline with one window, written on this thread
 * once sampling has stopped. */
static int record_once(const struct options *o, char *written, size_t written_size)
{
	struct fx_pipeline_opts po = { .cfg = o->cfg,
				       .pids = o->npids ? o->pids : NULL,
				       .npids = o->npids,
				       .output = o->output,
				       .on_symbolize = on_symbolize };
	struct sigaction sa = { .sa_handler = on_signal };
	struct fx_pipeline *p = NULL;
	char host[256] = "localhost", outbuf[512];
	uint64_t start_ns, cpu_start, rec_ns, cpu_rec, write_start;
	int ret;

	/* With upload.url or s3 and no --output, the snapshot goes through the spool
	 * to the collector, as the agent's chunks do. */
	if (!po.output && !fx_config_uploads(o->cfg)) {
		gethostname(host, sizeof(host) - 1);
		default_output(outbuf, sizeof(outbuf), host);
		po.output = outbuf;
	}
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	ret = fx_pipeline_new(&po, &p);
	if (ret < 0)
		goto out;
	/* Sampling works: now say what else a missing capability costs. */
	fx_service_check_caps();
	cpu_start = cpu_ns();
	start_ns = fx_now_ns(CLOCK_MONOTONIC);
	ret = fx_pipeline_start(p);
	if (ret == 0)
		ret = sample_for(p, o->duration_ms);
	rec_ns = fx_now_ns(CLOCK_MONOTONIC) - start_ns;
	cpu_rec = cpu_ns() - cpu_start;
	write_start = fx_now_ns(CLOCK_MONOTONIC);
	if (ret == 0)
		ret = fx_pipeline_finish(p);
	if (ret == 0 && !po.output) {
		struct fx_pipeline_stats ps;

		fx_pipeline_get_stats(p, &ps);
		ret = wait_upload(p, o, ps.last_path);
	}
	if (ret == 0) {
		struct options shown = *o;

		shown.output = po.output;
		print_stats(p, &shown, rec_ns, cpu_rec, fx_now_ns(CLOCK_MONOTONIC) - write_start);
	}
	if (ret == 0 && po.output)
		snprintf(written, written_size, "%s", po.output);
out:
	if (progress && ret < 0)
		fputc('\n', stderr);
	fx_pipeline_free(p);
	return ret;
}

/* --check-config: the perf rings the config maps on this machine and the
 * memory they lock, as this user with this process's limits (the service's
 * ExecReload runs it so): a plan the kernel would refuse fails the check,
 * since the agent would not start with it. Prints "NAME: ok" if @say_ok and
 * it is. Returns 0 or -EPERM (said). */
static int check_rings(const struct fx_config *cfg, const char *name, bool say_ok)
{
	struct fx_ringplan plan;
	char msg[2048];
	int ret = fx_pipeline_ring_plan(cfg, &plan, msg, sizeof(msg));
	const char *nl = strchr(msg, '\n');

	if (ret == -EPERM) {
		fx_log(FX_LOG_ERR, "%s: %s", name, nl ? nl + 1 : msg);
		return ret;
	}
	if (say_ok)
		printf("%s: ok\n", name);
	if (ret < 0)
		fx_log_errno(FX_LOG_WARN, -ret, "cannot plan the perf rings, ignoring");
	else
		printf("%s\n", msg);
	return 0;
}

/* --check-upload: one signed request to the S3 store. Returns 0 or -errno
 * (said). */
static int check_upload(const struct fx_config *cfg)
{
	char host[256] = "", msg[1024];
	int ret;

	if (!cfg->upload.s3.bucket) {
		fx_log(FX_LOG_ERR, "--check-upload: no upload.s3 in the config%s",
		       cfg->upload.url ? " (upload.url is not asked: a request there is a chunk)"
				       : "");
		return -EINVAL;
	}
	gethostname(host, sizeof(host) - 1);
	if (fx_config_label(cfg, "host"))
		snprintf(host, sizeof(host), "%s", fx_config_label(cfg, "host"));
	ret = fx_shipper_check_upload(cfg, host, msg, sizeof(msg));
	if (ret)
		fx_log(FX_LOG_ERR, "upload.s3: %s", msg);
	else
		printf("upload.s3: ok: %s\n", msg);
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
	/* A fixed threshold: blocks of 128 KiB and more (a window's tables, a
	 * symbol table being read) are mapped and unmapped whole. glibc's own
	 * threshold rises to the biggest block freed, and then such blocks stay
	 * in the heap, fragmenting it: 6 MiB more resident at steady state
	 * with Node.js and Java on the host (docs/performance.md). Setting it
	 * fixes the trim threshold at 128 KiB too, and the heap's top would go
	 * back to the kernel at every free (brk was a fifth of a window's
	 * symbolizing): the windows' ends trim it (malloc_trim), not free(). */
	mallopt(M_MMAP_THRESHOLD, 128 << 10);
	mallopt(M_TRIM_THRESHOLD, 8 << 20);
	if (argc > 1 && !strcmp(argv[1], "view"))
		return fx_view_main(argc - 1, argv + 1);
	if (parse_args(argc, argv, &o) < 0)
		return EXIT_USAGE;
	if (load_config(&o, &cfg) < 0)
		return EXIT_USAGE;
	if (o.check_config) {
		const char *name = o.config ? o.config : "defaults";

		/* With --check-upload, ok only once the store said so too. */
		ret = check_rings(&cfg, name, !o.check_upload);
		if (ret == 0 && o.check_upload) {
			ret = check_upload(&cfg);
			if (ret == 0)
				printf("%s: ok\n", name);
		}
		fx_config_release(&cfg);
		return ret == -EACCES || ret == -ENOENT || ret == -EXDEV || ret == -EIO
			       ? EXIT_UPLOAD
		       : ret < 0 ? EXIT_USAGE
				 : 0;
	}
	fx_log_set_level((enum fx_log_level)cfg.log.level);
	/* What --once samples is what the config says, flags included. */
	o.cfg = &cfg;
	o.frequency = cfg.sampling.frequency;
	o.kernel = cfg.sampling.kernel_stacks;
	o.include_idle = cfg.sampling.include_idle;
	o.unwind = cfg.sampling.dwarf ? FX_UNWIND_DWARF : FX_UNWIND_FP;
	o.stack_bytes = cfg.sampling.stack_bytes;
	raise_fd_limit();
	if (o.once) {
		progress = isatty(STDERR_FILENO);
		char written[4096] = "";

		ret = check_snapshot(&o);
		if (ret < 0) {
			fx_config_release(&cfg);
			return ret == -EINVAL ? EXIT_USAGE : 1;
		}
		ret = record_once(&o, written, sizeof(written)) < 0 ? 1 : 0;
		/* samply's flow: record, then look at it in the profiler. */
		if (ret == 0 && o.serve && written[0])
			ret = fx_view_serve_file(written, o.listen, o.open) < 0 ? 1 : 0;
		else if (ret == 0 && o.serve)
			ret = fx_log_errno(
				      FX_LOG_ERR, EINVAL,
				      "--serve: the profile went to the collector, not to a file") <
			      0;
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
		struct fx_daemon_stats st = { 0 };
		const struct fx_pipeline_stats *ds = &st.pipeline;

		ret = fx_daemon_run(&cfg, &ctl, &st) < 0 ? 1 : 0;
		/* The figures bench/daemon.py reads-> */
		fx_info("stats: windows %" PRIu64 " (stretched %" PRIu64 "), chunks %" PRIu64
			", chunk errors %" PRIu64 ", samples %" PRIu64
			", rotation avg %.1f us max %.1f us, rotation cpu avg "
			"%.1f us max %.1f us, peak rss %.1f MiB",
			ds->windows, ds->stretched, ds->chunks, ds->chunk_errors, ds->samples,
			ds->windows ? (double)ds->rotation_ns_sum / (double)ds->windows / 1000.0
				    : 0,
			(double)ds->rotation_ns_max / 1000.0,
			ds->windows ? (double)ds->rotation_cpu_ns_sum / (double)ds->windows / 1000.0
				    : 0,
			(double)ds->rotation_cpu_ns_max / 1000.0,
			(double)fx_peak_rss_kib() / 1024.0);
		if (ds->off_cpu)
			say_waits(&cfg, ds, false);
		say_names(ds);
	}
	fx_config_release(&cfg);
	return ret;
}

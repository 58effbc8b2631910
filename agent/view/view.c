/* SPDX-License-Identifier: MIT */
/* `fxagent view`: the driver. Options, then for each source its listing,
 * each chunk read and chosen by its meta, merged, and the result written or
 * served. Bad chunks are counted and named in one summary line. */
#include "fxagent/view.h"

#include <curl/curl.h>
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "fxagent/atomic_file.h"
#include "fxagent/config.h"
#include "fxagent/gzip.h"
#include "fxagent/log.h"
#include "fxagent/serve.h"
#include "fxagent/source.h"
#include "fxagent/util.h"
#include "view_int.h"

#define EXIT_USAGE	    2
#define MAX_FILTERS	    64
#define BAD_NAMED	    5
#define DEFAULT_MAX_SAMPLES 1000000
#define PROGRESS_EVERY_NS   (200 * 1000 * 1000ull)
#define SERVE_MAX_BYTES	    (1ull << 30)
#define VIEW_DEFAULT_LISTEN NULL

enum view_format {
	FORMAT_PROFILE, /* the Firefox Profiler's */
	FORMAT_FOLDED,	/* folded stacks: flamegraph.pl, inferno, speedscope */
	FORMAT_PPROF,	/* pprof's profile.proto, gzip-compressed */
};

struct view_opts {
	const char *sources[MAX_FILTERS];
	size_t nsources;
	const char *targets[MAX_FILTERS], *hosts[MAX_FILTERS], *labels[MAX_FILTERS];
	size_t ntargets, nhosts, nlabels;
	double from, to; /* Unix epoch ms; 0 = open */
	enum fx_view_merge merge;
	double bucket_ms;
	size_t max_samples;
	const char *output;
	bool serve, open, json;
	const char *listen;
	const char *debug_dirs[MAX_FILTERS];
	size_t ndebug_dirs;
	char *debuginfod_urls;		     /* space-separated, or NULL */
	const char *s3_endpoint, *s3_region; /* s3:// sources */
	bool s3_path_style;
	enum view_format format;
	size_t top;	  /* --top N; 0: none */
	bool merge_set;	  /* --merge given */
	bool compare;	  /* a second selection follows --compare */
	bool side_extras; /* options after --compare that are not a selection */

	/* --reuse-threads */
	bool reuse_threads;
};

struct view_run {
	const struct view_opts *o;
	struct merge m;
	struct view_pool *pool;
	size_t found, merged, unselected, duplicates, bad;
	uint64_t bytes;
	char *bad_names[BAD_NAMED];
	uint64_t start_ns, last_progress_ns;
	bool progress;
	size_t done, total; /* chunks handed back, listed */
	struct view_resym_stats resym;
	const char *side; /* --compare: "before" or "after"; NULL: one selection */
};

static volatile sig_atomic_t stop_serving;

static void on_stop(int sig)
{
	(void)sig;
	stop_serving = 1;
}

static void usage(FILE *f)
{
	fprintf(f,
		"Usage: fxagent view SOURCE... [OPTION]...\n"
		"Merge the chunks of SOURCEs into one profile for the Firefox Profiler.\n"
		"A SOURCE is a directory (read recursively), a chunk file, an http(s)://\n"
		"URL of a directory listed as JSON (nginx autoindex_format json), or\n"
		"s3://BUCKET/PREFIX (PREFIX as in upload.s3.prefix; the listing is narrowed\n"
		"by --target, --host and the time before anything is read).\n"
		"\n"
		"Which chunks, from their own metadata (all given must hold):\n"
		"  -t, --target=NAME    chunks of this target (repeatable: any of them)\n"
		"  -H, --host=NAME      chunks of this host (repeatable: any of them)\n"
		"  -l, --label=KEY=VALUE  chunks with this label (repeatable: all of them)\n"
		"      --since=DURATION the last 30m, 1h, 2d (whole numbers, as everywhere)\n"
		"      --from=TIME      from TIME: RFC 3339 (2026-11-25T12:00:00Z) or epoch "
		"seconds\n"
		"      --to=TIME        up to TIME\n"
		"How:\n"
		"  -m, --merge=HOW      threads (a track per host and thread, the default),\n"
		"                       processes (per host and process) or all (per host)\n"
		"      --reuse-threads  with threads: one track per process and thread name\n"
		"                       (threads of one name share it; the main thread not)\n"
		"      --bucket=DURATION  fold samples of one stack in each DURATION into one\n"
		"                       weighted sample (shares stay exact)\n"
		"      --max-samples=N  fold by itself above N samples, 1000 to 1000000000\n"
		"                       (default %d)\n"
		"Names for frames the chunks left unnamed (\"lib.so+0x1a2b0\"), by build-id:\n"
		"      --debug-dir=DIR  debug files under DIR/.build-id/ (repeatable)\n"
		"      --debuginfod=URL from this debuginfod server (repeatable; cached as\n"
		"                       debuginfod-find does)\n"
		"S3 (credentials from AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY and\n"
		"AWS_SESSION_TOKEN):\n"
		"      --endpoint=URL   the store (default AWS_ENDPOINT_URL_S3, AWS_ENDPOINT_URL\n"
		"                       or AWS's own)\n"
		"      --region=REGION  the bucket's region (default AWS_REGION,\n"
		"                       AWS_DEFAULT_REGION or us-east-1)\n"
		"      --path-style     URLs endpoint/bucket/key (Ceph, MinIO), not bucket.host\n"
		"                       (by itself for an IP address or localhost)\n"
		"Where:\n"
		"  -o, --output=FILE    write the profile to FILE (gzip; - for stdout)\n"
		"  -f, --format=FORMAT  profile (the Firefox Profiler's, the default),\n"
		"                       folded (flamegraph.pl, inferno, speedscope; text)\n"
		"                       or pprof (go tool pprof, Pyroscope; gzip); folded and\n"
		"                       pprof hold the on-CPU samples and go to FILE or stdout\n"
		"      --top=N          print the N functions with the most self samples\n"
		"                       (and their total) as a table, and serve nothing\n"
		"      --compare ...    a second selection follows: SOURCEs, --target, --host,\n"
		"                       --label and times given there replace the first's, an\n"
		"                       --output names its file; both are served with one link\n"
		"                       of the profiler's compare view (one track per host\n"
		"                       unless --merge says otherwise)\n"
		"      --serve[=ADDR:PORT]  serve it to the Firefox Profiler until Ctrl-C\n"
		"                       (the default; 127.0.0.1 and a port in 3000-3099,\n"
		"                       :0 for any port)\n"
		"      --open           open the profile in the browser (xdg-open)\n"
		"      --json           print a summary as JSON on stdout\n"
		"  -h, --help           show this help and exit\n"
		"\n"
		"Exit status: 0 merged, 1 nothing merged or a failure, 2 usage error.\n",
		DEFAULT_MAX_SAMPLES);
}

/* ---- option values ---- */

/* RFC 3339 (2026-11-25T12:00:00Z, fractions and +01:00 allowed, a space for
 * the T) or epoch seconds, in Unix epoch ms; NAN if bad. */
static double parse_time_ms(const char *s)
{
	struct tm tm = { 0 };
	const char *p;
	char *end;
	double frac = 0, v;
	long off = 0;

	v = strtod(s, &end);
	if (end != s && !*end && isfinite(v) && v >= 0)
		return v * 1000;
	p = strptime(s, "%Y-%m-%d", &tm);
	if (!p || (*p != 'T' && *p != 't' && *p != ' '))
		return NAN;
	p = strptime(p + 1, "%H:%M:%S", &tm);
	if (!p)
		return NAN;
	if (*p == '.') {
		frac = strtod(p, &end);
		p = end;
	}
	if (*p == 'Z' || *p == 'z') {
		p++;
	} else if ((*p == '+' || *p == '-') && strlen(p) == 6 && p[3] == ':') {
		long h = strtol(p + 1, NULL, 10), mi = strtol(p + 4, NULL, 10);

		off = (h * 3600 + mi * 60) * (*p == '-' ? -1 : 1);
		p += 6;
	} else {
		return NAN;
	}
	if (*p)
		return NAN;
	return ((double)(timegm(&tm) - off) + frac) * 1000;
}

static int bad_option(const char *opt, const char *arg, const char *expected)
{
	fx_err("view: %s '%s': expected %s", opt, arg, expected);
	return -EINVAL;
}

static int add_filter(const char **list, size_t *n, const char *v, const char *opt)
{
	if (*n == MAX_FILTERS)
		return bad_option(opt, v, "at most 64 of them");
	list[(*n)++] = v;
	return 0;
}

enum {
	OPT_SINCE = 256,
	OPT_FROM,
	OPT_TO,
	OPT_BUCKET,
	OPT_MAX,
	OPT_SERVE,
	OPT_OPEN,
	OPT_JSON,
	OPT_DEBUG_DIR,
	OPT_DEBUGINFOD,
	OPT_ENDPOINT,
	OPT_REGION,
	OPT_PATH_STYLE,
	OPT_TOP,
	OPT_REUSE_THREADS,
};

/* --debuginfod URL, added to the space-separated list libdebuginfod takes. */
static int add_debuginfod(struct view_opts *o, const char *url)
{
	size_t have = o->debuginfod_urls ? strlen(o->debuginfod_urls) + 1 : 0;
	char *v;

	if ((strncmp(url, "http://", 7) && strncmp(url, "https://", 8)) || strchr(url, ' '))
		return bad_option("--debuginfod", url, "an http:// or https:// URL without spaces");
	v = realloc(o->debuginfod_urls, have + strlen(url) + 1);
	if (!v)
		return -ENOMEM;
	if (have)
		v[have - 1] = ' ';
	memcpy(v + have, url, strlen(url) + 1);
	o->debuginfod_urls = v;
	return 0;
}

static int view_option(int c, const char *arg, struct view_opts *o)
{
	struct stat st;
	uint64_t ms;
	double v;

	switch (c) {
	case 't':
		return add_filter(o->targets, &o->ntargets, arg, "--target");
	case 'H':
		return add_filter(o->hosts, &o->nhosts, arg, "--host");
	case 'l':
		if (!strchr(arg, '=') || arg[0] == '=')
			return bad_option("--label", arg, "KEY=VALUE");
		return add_filter(o->labels, &o->nlabels, arg, "--label");
	case OPT_SINCE:
		if (fx_config_parse_duration(arg, &ms) < 0 || !ms)
			return bad_option("--since", arg, "a duration: " FX_DURATION_FORMS);
		o->from = (double)fx_now_ns(CLOCK_REALTIME) / 1e6 - (double)ms;
		return 0;
	case OPT_FROM:
	case OPT_TO:
		v = parse_time_ms(arg);
		if (isnan(v))
			return bad_option(c == OPT_FROM ? "--from" : "--to", arg,
					  "RFC 3339 (2026-11-25T12:00:00Z) or epoch seconds");
		*(c == OPT_FROM ? &o->from : &o->to) = v;
		return 0;
	case 'm':
		o->merge_set = true;
		if (!strcmp(arg, "threads"))
			o->merge = FX_VIEW_MERGE_THREADS;
		else if (!strcmp(arg, "processes"))
			o->merge = FX_VIEW_MERGE_PROCESSES;
		else if (!strcmp(arg, "all"))
			o->merge = FX_VIEW_MERGE_ALL;
		else
			return bad_option("--merge", arg, "threads, processes or all");
		return 0;
	case OPT_BUCKET:
		if (fx_config_parse_duration(arg, &ms) < 0 || !ms)
			return bad_option("--bucket", arg,
					  "a duration of 1ms or more: " FX_DURATION_FORMS);
		o->bucket_ms = (double)ms;
		return 0;
	case OPT_DEBUG_DIR:
		if (arg[0] != '/' || stat(arg, &st) < 0 || !S_ISDIR(st.st_mode))
			return bad_option("--debug-dir", arg, "the absolute path of a directory");
		return add_filter(o->debug_dirs, &o->ndebug_dirs, arg, "--debug-dir");
	case OPT_DEBUGINFOD:
		return add_debuginfod(o, arg);
	case 'f':
		if (!strcmp(arg, "profile"))
			o->format = FORMAT_PROFILE;
		else if (!strcmp(arg, "folded"))
			o->format = FORMAT_FOLDED;
		else if (!strcmp(arg, "pprof"))
			o->format = FORMAT_PPROF;
		else
			return bad_option("--format", arg, "profile, folded or pprof");
		return 0;
	case OPT_TOP: {
		char *end;
		unsigned long long n = strtoull(arg, &end, 10);

		if (*end || end == arg || arg[0] == '-' || n < 1 || n > 100000)
			return bad_option("--top", arg, "a number from 1 to 100000");
		o->top = (size_t)n;
		return 0;
	}
	case OPT_MAX: {
		char *end;
		unsigned long long n = strtoull(arg, &end, 10);

		if (*end || end == arg || arg[0] == '-' || n < 1000 || n > 1000000000)
			return bad_option("--max-samples", arg, "a number from 1000 to 1000000000");
		o->max_samples = (size_t)n;
		return 0;
	}
	default:
		return -EINVAL;
	}
}

/* Where each output goes: one of them at most on stdout, a binary one not
 * on a terminal, and serving only the profile. */
static int check_outputs(struct view_opts *o)
{
	bool to_stdout;

	if (o->format != FORMAT_PROFILE && !o->output)
		o->output = "-";
	to_stdout = o->output && !strcmp(o->output, "-");
	if (to_stdout + o->json + (o->top > 0) > 1) {
		fx_err("view: %s want stdout", o->json && o->top ? "--json and --top both"
					       : o->json	 ? "--json and the output both"
								 : "--top and the output both");
		return -EINVAL;
	}
	if (o->serve && o->format != FORMAT_PROFILE) {
		fx_err("view: --serve serves the profile format only");
		return -EINVAL;
	}
	if (to_stdout && o->format == FORMAT_PPROF && isatty(STDOUT_FILENO)) {
		fx_err("view: pprof is binary: give --output FILE, or send stdout elsewhere");
		return -EINVAL;
	}
	if (!o->output && !o->top)
		o->serve = true;
	return 0;
}

/* The options and SOURCEs of @argv (argv[0] is "view") into @o. */
static int parse_words(int argc, char **argv, struct view_opts *o)
{
	static const struct option longopts[] = {
		{ "target", required_argument, NULL, 't' },
		{ "host", required_argument, NULL, 'H' },
		{ "label", required_argument, NULL, 'l' },
		{ "since", required_argument, NULL, OPT_SINCE },
		{ "from", required_argument, NULL, OPT_FROM },
		{ "to", required_argument, NULL, OPT_TO },
		{ "merge", required_argument, NULL, 'm' },
		{ "reuse-threads", no_argument, NULL, OPT_REUSE_THREADS },
		{ "bucket", required_argument, NULL, OPT_BUCKET },
		{ "max-samples", required_argument, NULL, OPT_MAX },
		{ "output", required_argument, NULL, 'o' },
		{ "serve", optional_argument, NULL, OPT_SERVE },
		{ "open", no_argument, NULL, OPT_OPEN },
		{ "json", no_argument, NULL, OPT_JSON },
		{ "debug-dir", required_argument, NULL, OPT_DEBUG_DIR },
		{ "debuginfod", required_argument, NULL, OPT_DEBUGINFOD },
		{ "endpoint", required_argument, NULL, OPT_ENDPOINT },
		{ "region", required_argument, NULL, OPT_REGION },
		{ "path-style", no_argument, NULL, OPT_PATH_STYLE },
		{ "format", required_argument, NULL, 'f' },
		{ "top", required_argument, NULL, OPT_TOP },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	int c;

	optind = 1;
	while ((c = getopt_long(argc, argv, "t:H:l:m:o:f:h", longopts, NULL)) != -1) {
		if (c == 'h') {
			usage(stdout);
			exit(0);
		} else if (c == 'o') {
			o->output = optarg;
		} else if (c == OPT_SERVE) {
			o->serve = true;
			o->listen = optarg;
			/* --serve ADDR as well as --serve=ADDR */
			if (!optarg && optind < argc && fx_serve_is_listen(argv[optind]))
				o->listen = argv[optind++];
		} else if (c == OPT_OPEN) {
			o->open = true;
		} else if (c == OPT_JSON) {
			o->json = true;
		} else if (c == OPT_ENDPOINT) {
			o->s3_endpoint = optarg;
		} else if (c == OPT_REGION) {
			o->s3_region = optarg;
		} else if (c == OPT_PATH_STYLE) {
			o->s3_path_style = true;
		} else if (c == OPT_REUSE_THREADS) {
			o->reuse_threads = true;
		} else if (c == '?' || view_option(c, optarg ? optarg : "", o) < 0) {
			return -EINVAL;
		}
	}
	for (int i = optind; i < argc; i++) {
		if (add_filter(o->sources, &o->nsources, argv[i], "SOURCE") < 0)
			return -EINVAL;
	}
	return 0;
}

/* The second selection of --compare: @a's, with what the words after
 * --compare (@argc, @argv; argv[0] is "view") name instead. */
static int parse_compare(int argc, char **argv, const struct view_opts *a, struct view_opts *b)
{
	struct view_opts w = { 0 };
	int rc = parse_words(argc, argv, &w);

	free(w.debuginfod_urls);
	if (rc < 0)
		return rc;
	if (w.merge_set || w.bucket_ms || w.max_samples || w.serve || w.open || w.json ||
	    w.ndebug_dirs || w.debuginfod_urls || w.s3_endpoint || w.s3_region || w.s3_path_style ||
	    w.format || w.top || w.reuse_threads) {
		fx_err("view: after --compare: SOURCEs, --target, --host, --label, --since, "
		       "--from, --to and --output only (the rest is the first selection's)");
		return -EINVAL;
	}
	if (!a->output != !w.output || (w.output && !strcmp(w.output, "-"))) {
		fx_err("view: --compare writes two files: an --output before --compare and one "
		       "after it");
		return -EINVAL;
	}
	*b = *a;
	b->compare = false;
	b->debuginfod_urls = NULL; /* the first's, freed with it */
	b->output = w.output;
	if (w.nsources) {
		memcpy(b->sources, w.sources, sizeof(w.sources));
		b->nsources = w.nsources;
	}
	if (w.ntargets) {
		memcpy(b->targets, w.targets, sizeof(w.targets));
		b->ntargets = w.ntargets;
	}
	if (w.nhosts) {
		memcpy(b->hosts, w.hosts, sizeof(w.hosts));
		b->nhosts = w.nhosts;
	}
	if (w.nlabels) {
		memcpy(b->labels, w.labels, sizeof(w.labels));
		b->nlabels = w.nlabels;
	}
	if (w.from || w.to) {
		b->from = w.from;
		b->to = w.to;
	}
	if (b->from && b->to && b->from >= b->to) {
		fx_err("view: after --compare: --from is not before --to");
		return -EINVAL;
	}
	return 0;
}

static int parse_args(int argc, char **argv, struct view_opts *o)
{
	int rc = parse_words(argc, argv, o);

	if (rc < 0)
		return rc;
	if (!o->nsources) {
		fx_err("view: no SOURCE: name a directory, a chunk file, an http(s):// listing or "
		       "s3://BUCKET/PREFIX");
		return -EINVAL;
	}
	if (o->from && o->to && o->from >= o->to) {
		fx_err("view: --from is not before --to");
		return -EINVAL;
	}
	if (o->reuse_threads && o->merge_set && o->merge != FX_VIEW_MERGE_THREADS) {
		fx_err("view: --reuse-threads shares a track among threads of one name: it goes "
		       "with --merge threads only");
		return -EINVAL;
	}
	/* Two slices compare best as one track per host: processes come and
	 * go between them, hosts stay. */
	if (o->compare && !o->merge_set && !o->reuse_threads)
		o->merge = FX_VIEW_MERGE_ALL;
	if (check_outputs(o) < 0)
		return -EINVAL;
	if (o->compare && o->output && !strcmp(o->output, "-")) {
		fx_err("view: --compare writes two files: an --output FILE on each side");
		return -EINVAL;
	}
	return 0;
}

/* ---- choosing and reading chunks ---- */

static bool vstr_is(const struct vchunk *c, struct vstr s, const char *want)
{
	return s.len == strlen(want) && !memcmp(view_vstr_at(c, s), want, s.len);
}

static bool has_label(const struct vchunk *c, const char *kv)
{
	const char *eq = strchr(kv, '=');
	size_t klen = (size_t)(eq - kv);

	for (size_t i = 0; i < c->nlabels; i++) {
		const struct vlabel *l = &c->labels[i];

		if (l->key.len == klen && !memcmp(view_vstr_at(c, l->key), kv, klen) &&
		    vstr_is(c, l->value, eq + 1))
			return true;
	}
	return false;
}

static bool any_of(const struct vchunk *c, struct vstr s, const char *const *list, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		if (vstr_is(c, s, list[i]))
			return true;
	}
	return !n;
}

static bool selected(const struct view_opts *o, const struct vchunk *c)
{
	if (!any_of(c, c->target, o->targets, o->ntargets) ||
	    !any_of(c, c->host, o->hosts, o->nhosts))
		return false;
	for (size_t i = 0; i < o->nlabels; i++) {
		if (!has_label(c, o->labels[i]))
			return false;
	}
	return (!o->from || c->window_end > o->from) && (!o->to || c->window_start < o->to);
}

/* Called when a chunk's meta is read, on a reader thread: read on only for
 * one wanted. */
static bool on_meta(void *arg, const struct vchunk *c)
{
	return selected(arg, c);
}

static unsigned ncpus(void)
{
	long n = sysconf(_SC_NPROCESSORS_ONLN);

	return n > 1 ? (unsigned)n : 1;
}

static void progress(struct view_run *r, size_t done, size_t total, bool last)
{
	uint64_t now = fx_now_ns(CLOCK_MONOTONIC);
	double secs = (double)(now - r->start_ns) / 1e9;

	if (!r->progress || (!last && now - r->last_progress_ns < PROGRESS_EVERY_NS))
		return;
	r->last_progress_ns = now;
	fprintf(stderr, "\rview: %zu/%zu chunks, %.1f MiB, %.1f MiB/s\033[K%s", done, total,
		(double)r->bytes / 1048576.0, secs > 0 ? (double)r->bytes / 1048576.0 / secs : 0,
		last ? "\n" : "");
}

static void note_bad(struct view_run *r, const char *name, const char *why)
{
	if (r->bad < BAD_NAMED) {
		size_t len = strlen(name) + strlen(why) + 4;

		r->bad_names[r->bad] = malloc(len);
		if (r->bad_names[r->bad])
			snprintf(r->bad_names[r->bad], len, "%s (%s)", name, why);
	}
	r->bad++;
}

/* A chunk read (or not), in the listing's order: merged, or counted. */
static int on_read(void *arg, const char *name, struct vchunk *c, int rc, const char *why,
		   size_t len)
{
	struct view_run *r = arg;

	r->done++;
	r->bytes += len;
	if (rc == 0 && view_merge_has_window(&r->m, c))
		r->duplicates++;
	else if (rc == 0 && (rc = view_merge_add(&r->m, c)) == 0)
		r->merged++;
	if (rc == 1)
		r->unselected++;
	else if (rc == -ENOMEM)
		return fx_log_errno(FX_LOG_ERR, ENOMEM, "view: cannot merge '%s'", name);
	else if (rc < 0)
		note_bad(r, name, why[0] ? why : "not read");
	progress(r, r->done, r->total, false);
	return 0;
}

static int on_chunk(void *arg, size_t index, const struct fx_source_item *it, const void *data,
		    size_t len, int err)
{
	struct view_run *r = arg;

	(void)index;
	return view_pool_put(r->pool, it->name, data, len, err < 0 ? err : 0);
}

static int read_source(struct view_run *r, const char *spec)
{
	struct fx_source *s = NULL;
	struct fx_source_item *items = NULL;
	const struct view_opts *o = r->o;
	const struct fx_source_opts so = {
		.s3_endpoint = o->s3_endpoint,
		.s3_region = o->s3_region,
		.s3_path_style = o->s3_path_style,
		.targets = o->targets,
		.ntargets = o->ntargets,
		.hosts = o->hosts,
		.nhosts = o->nhosts,
		.from_ms = (int64_t)o->from,
		.to_ms = o->to > 0 ? (int64_t)o->to + 1 : 0,
	};
	size_t n = 0;
	int rc = fx_source_open(spec, &so, &s);

	if (rc == 0)
		rc = fx_source_list(s, &items, &n);
	if (rc == 0) {
		r->found += n;
		r->total += n;
		rc = fx_source_read_each(s, items, n, on_chunk, r);
		/* the names handed in live until here */
		if (rc == 0)
			rc = view_pool_drain(r->pool);
		else
			view_pool_drain(r->pool);
		progress(r, r->done, r->total, true);
	}
	fx_source_items_free(items, n);
	fx_source_free(s);
	return rc;
}

/* ---- results ---- */

static void summary(const struct view_run *r)
{
	fprintf(stderr,
		"view%s%s%s: merged %zu of %zu chunks: %llu samples on %zu tracks of %u hosts%s",
		r->side ? " (" : "", r->side ? r->side : "", r->side ? ")" : "", r->merged,
		r->found, (unsigned long long)r->m.raw_samples, r->m.tracks.n, r->m.nhosts,
		r->unselected || r->duplicates || r->bad ? "; skipped" : "\n");
	if (r->unselected)
		fprintf(stderr, " %zu not selected%s", r->unselected,
			r->duplicates || r->bad ? "," : "");
	if (r->duplicates)
		fprintf(stderr, " %zu duplicates%s", r->duplicates, r->bad ? "," : "");
	if (r->bad) {
		fprintf(stderr, " %zu bad:", r->bad);
		for (size_t i = 0; i < r->bad && i < BAD_NAMED; i++)
			fprintf(stderr, "%s %s", i ? ";" : "",
				r->bad_names[i] ? r->bad_names[i] : "?");
		if (r->bad > BAD_NAMED)
			fprintf(stderr, "; and %zu more", r->bad - BAD_NAMED);
	}
	if (r->unselected || r->duplicates || r->bad)
		fputc('\n', stderr);
	if (r->o->ndebug_dirs || r->o->debuginfod_urls)
		fprintf(stderr,
			"view: named %zu of %zu frames without a name: debug files of %zu "
			"libraries found, %zu not found\n",
			r->resym.frames_named, r->resym.frames_unnamed, r->resym.libs_named,
			r->resym.libs_missing);
}

static void json_summary(const struct view_run *r, uint64_t out_bytes)
{
	int fd = STDOUT_FILENO;
	struct fx_json *j = fx_json_new(fx_gzip_write_fd, &fd);

	if (!j)
		return;
	fx_json_object_begin(j);
	fx_json_key_int(j, "chunks_found", (int64_t)r->found);
	fx_json_key_int(j, "chunks_merged", (int64_t)r->merged);
	fx_json_key_int(j, "chunks_not_selected", (int64_t)r->unselected);
	fx_json_key_int(j, "chunks_duplicate", (int64_t)r->duplicates);
	fx_json_key_int(j, "chunks_bad", (int64_t)r->bad);
	fx_json_key_array(j, "bad");
	for (size_t i = 0; i < r->bad && i < BAD_NAMED; i++)
		fx_json_string(j, r->bad_names[i]);
	fx_json_array_end(j);
	fx_json_key_int(j, "frames_unnamed", (int64_t)r->resym.frames_unnamed);
	fx_json_key_int(j, "frames_named", (int64_t)r->resym.frames_named);
	fx_json_key_int(j, "samples", (int64_t)r->m.raw_samples);
	fx_json_key_int(j, "samples_written", (int64_t)r->m.nsamples);
	fx_json_key_int(j, "tracks", (int64_t)r->m.tracks.n);
	fx_json_key_int(j, "hosts", r->m.nhosts);
	fx_json_key_double(j, "bucket_ms", r->m.bucket_ms);
	fx_json_key_int(j, "bytes_read", (int64_t)r->bytes);
	fx_json_key_int(j, "bytes_written", (int64_t)out_bytes);
	fx_json_key_string(j, "output", r->o->output);
	fx_json_key_int(j, "peak_rss_kib", (int64_t)fx_peak_rss_kib());
	fx_json_key_double(j, "seconds", (double)(fx_now_ns(CLOCK_MONOTONIC) - r->start_ns) / 1e9);
	fx_json_object_end(j);
	fx_json_finish(j);
	fx_json_free(j);
	fputc('\n', stdout);
	fflush(stdout);
}

static int emit_merge(struct fx_json *j, void *arg)
{
	return view_write_json(arg, j);
}

struct file_job {
	const struct merge *m;
	uint64_t bytes;
};

static int write_job(int fd, void *arg)
{
	struct file_job *job = arg;

	return fx_gzip_json(emit_merge, (void *)job->m, fx_gzip_write_fd, &fd, &job->bytes);
}

static int serve_bytes(const void *data, size_t len, const char *listen, bool open)
{
	struct fx_serve_options so = { .listen = listen, .name = "profile.json.gz" };
	struct sigaction sa = { .sa_handler = on_stop };
	struct fx_serve *s = NULL;
	int rc = fx_serve_start(&so, data, len, &s);

	if (rc < 0)
		return rc;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	printf("Serving the profile at %s\nOpen it in the Firefox Profiler: %s\n"
	       "Press Ctrl-C to stop.\n",
	       fx_serve_url(s), fx_serve_link(s));
	fflush(stdout);
	if (open && fx_serve_open_browser(s) < 0)
		fx_warn("view: no xdg-open found: open the link above in a browser");
	fx_serve_wait(s, &stop_serving);
	fx_serve_free(s);
	return 0;
}

static int write_bytes(int fd, void *arg)
{
	const struct fx_gzip_buf *b = arg;

	return fx_gzip_write_fd(&fd, b->data, b->len);
}

/* --format folded or pprof: made whole in memory, then written. */
static int output_export(const struct view_run *r, uint64_t *bytes)
{
	const struct view_opts *o = r->o;
	const char *name = o->format == FORMAT_PPROF ? "pprof" : "folded";
	struct fx_gzip_buf buf = { 0 };
	int fd = STDOUT_FILENO;
	int rc = o->format == FORMAT_PPROF ? view_export_pprof(&r->m, &buf)
					   : view_export_folded(&r->m, &buf);

	if (rc < 0) {
		free(buf.data);
		return fx_log_errno(FX_LOG_ERR, -rc, "view: cannot make the %s export", name);
	}
	*bytes = buf.len;
	if (strcmp(o->output, "-"))
		rc = fx_atomic_file_write(o->output, 0644, FX_LOG_ERR, write_bytes, &buf);
	else if ((rc = fx_gzip_write_fd(&fd, buf.data, buf.len)) < 0)
		fx_log_errno(FX_LOG_ERR, -rc, "view: cannot write the %s export to stdout", name);
	free(buf.data);
	return rc;
}

/* The profile format to --output. */
static int output_profile(struct view_run *r, struct file_job *job)
{
	int fd = STDOUT_FILENO;
	int rc;

	if (strcmp(r->o->output, "-"))
		return fx_atomic_file_write(r->o->output, 0644, FX_LOG_ERR, write_job, job);
	rc = fx_gzip_json(emit_merge, &r->m, fx_gzip_write_fd, &fd, &job->bytes);
	if (rc < 0)
		return fx_log_errno(FX_LOG_ERR, -rc, "view: cannot write the profile to stdout");
	return 0;
}

/* --output, in its format. */
static int output_write(struct view_run *r, uint64_t *bytes)
{
	struct file_job job = { .m = &r->m };
	int rc;

	if (!r->o->output)
		return 0;
	if (r->o->format != FORMAT_PROFILE)
		return output_export(r, bytes);
	rc = output_profile(r, &job);
	*bytes = job.bytes;
	return rc;
}

static int output_top(struct view_run *r)
{
	int rc;

	if (r->side)
		printf("%s%s:\n", strcmp(r->side, "before") ? "\n" : "", r->side);
	rc = view_export_top(&r->m, r->o->top, stdout);
	fflush(stdout);
	if (rc < 0)
		return fx_log_errno(FX_LOG_ERR, -rc, "view: cannot count the top functions");
	return 0;
}

static int build_served(struct view_run *r, struct fx_gzip_buf *buf, uint64_t *bytes)
{
	int rc = fx_gzip_json(emit_merge, &r->m, fx_gzip_write_buf, buf, bytes);

	if (rc < 0)
		return fx_log_errno(FX_LOG_ERR, -rc, "view: cannot build the profile to serve");
	return 0;
}

/* The second server's address: the first's, on the next port when a port
 * was named (an ssh -L forwards both); as given otherwise. */
static const char *next_listen(const char *listen, unsigned int port, char *out, size_t size)
{
	const char *colon = listen ? strrchr(listen, ':') : NULL;

	if (!colon || colon[1] == '\0' || !strcmp(colon + 1, "0") ||
	    (strchr(listen, ']') && colon < strchr(listen, ']')))
		return listen;
	snprintf(out, size, "%.*s:%u", (int)(colon - listen), listen, port + 1);
	return out;
}

/* A profiler link that opens @link's profile with thread @thread chosen
 * (URL version 17 of the profiler's state), percent-encoded as a query
 * value; malloc'ed. */
static char *compare_entry(const char *link, size_t thread)
{
	char raw[4096];
	char *enc;

	snprintf(raw, sizeof(raw), "%scalltree/?thread=%zu&v=17", link, thread);
	enc = curl_easy_escape(NULL, raw, 0);
	return enc;
}

/* Serves both profiles, each from its own server, and prints one link of
 * the profiler's compare view that loads both with the same thread. */
static int serve_compare(struct fx_gzip_buf buf[2], size_t thread, const char *listen, bool open)
{
	static const char *const names[2] = { "before.json.gz", "after.json.gz" };
	struct sigaction sa = { .sa_handler = on_stop };
	struct fx_serve *s[2] = { NULL, NULL };
	char addr[300], *entry[2] = { NULL, NULL };
	const char *link, *from;
	int rc = 0;

	for (int i = 0; rc == 0 && i < 2; i++) {
		struct fx_serve_options so = {
			.listen = i ? next_listen(listen, fx_serve_port(s[0]), addr, sizeof(addr))
				    : listen,
			.name = names[i]
		};

		rc = fx_serve_start(&so, buf[i].data, buf[i].len, &s[i]);
		if (rc == 0 && !(entry[i] = compare_entry(fx_serve_link(s[i]), thread)))
			rc = -ENOMEM;
	}
	if (rc == 0) {
		link = fx_serve_link(s[0]);
		from = strstr(link, "/from-url/");
		sigemptyset(&sa.sa_mask);
		sigaction(SIGINT, &sa, NULL);
		sigaction(SIGTERM, &sa, NULL);
		printf("Serving the profiles at %s and %s\n"
		       "Compare them in the Firefox Profiler: "
		       "%.*s/compare/?profiles[]=%s&profiles[]=%s\n"
		       "Press Ctrl-C to stop.\n",
		       fx_serve_url(s[0]), fx_serve_url(s[1]), (int)(from ? from - link : 0), link,
		       entry[0], entry[1]);
		fflush(stdout);
		if (open)
			fx_warn("view: --open with --compare: open the link above in a browser");
		fx_serve_wait(s[0], &stop_serving);
	}
	curl_free(entry[0]);
	curl_free(entry[1]);
	fx_serve_free(s[0]);
	fx_serve_free(s[1]);
	return rc;
}

static int output(struct view_run *r)
{
	const struct view_opts *o = r->o;
	struct fx_gzip_buf buf = { .max = SERVE_MAX_BYTES };
	uint64_t bytes = 0;
	int rc = o->top ? output_top(r) : 0;

	if (rc == 0)
		rc = output_write(r, &bytes);
	if (rc == 0 && o->serve)
		rc = build_served(r, &buf, &bytes);
	if (rc == 0 && o->json)
		json_summary(r, bytes);
	if (rc == 0 && o->serve)
		rc = serve_bytes(buf.data, buf.len, o->listen, o->open);
	free(buf.data);
	return rc;
}

static int output_compare(struct view_run *a, struct view_run *b)
{
	const struct view_opts *o = a->o;
	struct fx_gzip_buf buf[2] = { { .max = SERVE_MAX_BYTES }, { .max = SERVE_MAX_BYTES } };
	uint64_t bytes[2] = { 0, 0 };
	int rc = 0;

	if (o->top) {
		rc = output_top(a);
		if (rc == 0)
			rc = output_top(b);
	}
	if (rc == 0)
		rc = output_write(a, &bytes[0]);
	if (rc == 0)
		rc = output_write(b, &bytes[1]);
	if (rc == 0 && o->serve)
		rc = build_served(a, &buf[0], &bytes[0]);
	if (rc == 0 && o->serve)
		rc = build_served(b, &buf[1], &bytes[1]);
	if (rc == 0 && o->json) {
		json_summary(a, bytes[0]);
		json_summary(b, bytes[1]);
	}
	if (rc == 0 && o->serve)
		rc = serve_compare(buf, view_busiest_track(&a->m), o->listen, o->open);
	free(buf[0].data);
	free(buf[1].data);
	return rc;
}

/* Merges the selection of r->o: every source read, the merge finished and
 * its frames named; the summary said. Returns 0, -ENOENT when nothing was
 * merged, or -errno. */
static int run_selection(struct view_run *r)
{
	const struct view_opts *o = r->o;
	int rc = 0;

	view_merge_init(&r->m, o->merge, o->bucket_ms, o->max_samples);
	r->m.reuse_threads = o->reuse_threads;
	r->m.from = o->from;
	r->m.to = o->to;
	r->progress = isatty(STDERR_FILENO) && !o->json;
	r->start_ns = fx_now_ns(CLOCK_MONOTONIC);
	/* Readers on the other CPUs; this thread merges. */
	if (view_pool_new(ncpus() - 1, on_meta, (void *)o, on_read, r, &r->pool) < 0)
		rc = fx_log_errno(FX_LOG_ERR, ENOMEM, "view: cannot start");
	for (size_t i = 0; rc == 0 && i < o->nsources; i++) {
		int src = read_source(r, o->sources[i]);

		if (src == -ENOMEM)
			rc = src;
	}
	view_pool_free(r->pool);
	r->pool = NULL;
	if (rc == 0)
		rc = view_merge_finish(&r->m);
	if (rc == 0) {
		struct view_resym_opts ro = { .debug_dirs = o->debug_dirs,
					      .ndebug_dirs = o->ndebug_dirs,
					      .debuginfod_urls = o->debuginfod_urls };

		rc = view_resym(&r->m, &ro, &r->resym);
	}
	summary(r);
	if (rc == 0 && !r->merged) {
		fx_err("view%s%s: no chunk to merge%s", r->side ? " " : "", r->side ? r->side : "",
		       r->found ? " (none selected or none good)" : " found");
		rc = -ENOENT;
	}
	return rc;
}

static void run_free(struct view_run *r)
{
	for (size_t i = 0; i < BAD_NAMED; i++)
		free(r->bad_names[i]);
	view_merge_free(&r->m);
}

/* The words before "--compare" are the first selection's, those after it
 * the second's; 0 when there is none. */
static int compare_at(int argc, char **argv)
{
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--compare"))
			return i;
	}
	return 0;
}

static int compare_main(struct view_opts *o, int at, int argc, char **argv)
{
	struct view_opts ob;
	struct view_run a = { .o = o, .side = "before" }, b = { .o = &ob, .side = "after" };
	char **words = calloc((size_t)(argc - at) + 1, sizeof(*words));
	int rc;

	if (!words)
		return 1;
	words[0] = argv[0];
	memcpy(words + 1, argv + at + 1, (size_t)(argc - at - 1) * sizeof(*words));
	rc = parse_compare(argc - at, words, o, &ob);
	free(words);
	if (rc < 0) {
		fprintf(stderr, "Try 'fxagent view --help'.\n");
		return EXIT_USAGE;
	}
	rc = run_selection(&a);
	if (rc == 0)
		rc = run_selection(&b);
	if (rc == 0)
		rc = view_merge_align(&a.m, &b.m);
	if (rc == 0)
		rc = output_compare(&a, &b);
	run_free(&a);
	run_free(&b);
	return rc < 0 ? 1 : 0;
}

int fx_view_main(int argc, char **argv)
{
	struct view_opts o = { .max_samples = DEFAULT_MAX_SAMPLES };
	struct view_run r = { .o = &o };
	int at = compare_at(argc, argv);
	int rc;

	o.compare = at > 0;
	if (parse_args(at ? at : argc, argv, &o) < 0) {
		free(o.debuginfod_urls);
		fprintf(stderr, "Try 'fxagent view --help'.\n");
		return EXIT_USAGE;
	}
	if (at) {
		rc = compare_main(&o, at, argc, argv);
		free(o.debuginfod_urls);
		return rc;
	}
	rc = run_selection(&r);
	if (rc == 0)
		rc = output(&r);
	run_free(&r);
	free(o.debuginfod_urls);
	return rc < 0 ? 1 : 0;
}

static int copy_item(void *arg, size_t index, const struct fx_source_item *it, const void *data,
		     size_t len, int err)
{
	(void)index;
	(void)it;
	return err < 0 ? err : fx_gzip_write_buf(arg, data, len);
}

int fx_view_serve_file(const char *path, const char *listen, bool open)
{
	struct fx_source *s = NULL;
	struct fx_source_item *items = NULL;
	size_t n = 0;
	struct fx_gzip_buf buf = { .max = SERVE_MAX_BYTES };
	int rc = fx_source_open(path, NULL, &s);

	if (rc == 0)
		rc = fx_source_list(s, &items, &n);
	if (rc == 0 && n != 1)
		rc = fx_log_errno(FX_LOG_ERR, EINVAL, "cannot serve '%s': not one profile file",
				  path);
	if (rc == 0)
		rc = fx_source_read_each(s, items, n, copy_item, &buf);
	fx_source_items_free(items, n);
	fx_source_free(s);
	if (rc == 0)
		rc = serve_bytes(buf.data, buf.len, listen, open);
	free(buf.data);
	return rc;
}

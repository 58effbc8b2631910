/* SPDX-License-Identifier: MIT */
/* `fxagent view`: the driver. Options, then for each source its listing,
 * each chunk read and chosen by its meta, merged, and the result written or
 * served. Bad chunks are counted and named in one summary line. */
#include "fxagent/view.h"

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

static int parse_args(int argc, char **argv, struct view_opts *o)
{
	static const struct option longopts[] = {
		{ "target", required_argument, NULL, 't' },
		{ "host", required_argument, NULL, 'H' },
		{ "label", required_argument, NULL, 'l' },
		{ "since", required_argument, NULL, OPT_SINCE },
		{ "from", required_argument, NULL, OPT_FROM },
		{ "to", required_argument, NULL, OPT_TO },
		{ "merge", required_argument, NULL, 'm' },
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
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	int c;

	optind = 1;
	while ((c = getopt_long(argc, argv, "t:H:l:m:o:h", longopts, NULL)) != -1) {
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
		} else if (c == '?' || view_option(c, optarg ? optarg : "", o) < 0) {
			return -EINVAL;
		}
	}
	for (int i = optind; i < argc; i++) {
		if (add_filter(o->sources, &o->nsources, argv[i], "SOURCE") < 0)
			return -EINVAL;
	}
	if (!o->nsources) {
		fx_err("view: no SOURCE: name a directory, a chunk file, an http(s):// listing or "
		       "s3://BUCKET/PREFIX");
		return -EINVAL;
	}
	if (o->from && o->to && o->from >= o->to) {
		fx_err("view: --from is not before --to");
		return -EINVAL;
	}
	if (o->output && !strcmp(o->output, "-") && o->json) {
		fx_err("view: --json and --output - both want stdout");
		return -EINVAL;
	}
	if (!o->output)
		o->serve = true;
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
	fprintf(stderr, "view: merged %zu of %zu chunks: %llu samples on %zu tracks of %u hosts%s",
		r->merged, r->found, (unsigned long long)r->m.raw_samples, r->m.tracks.n,
		r->m.nhosts, r->unselected || r->duplicates || r->bad ? "; skipped" : "\n");
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

static int output(struct view_run *r)
{
	const struct view_opts *o = r->o;
	struct fx_gzip_buf buf = { .max = SERVE_MAX_BYTES };
	struct file_job job = { .m = &r->m };
	int rc = 0;

	if (o->output && !strcmp(o->output, "-")) {
		int fd = STDOUT_FILENO;

		rc = fx_gzip_json(emit_merge, &r->m, fx_gzip_write_fd, &fd, &job.bytes);
		if (rc < 0)
			return fx_log_errno(FX_LOG_ERR, -rc,
					    "view: cannot write the profile to stdout");
	} else if (o->output) {
		rc = fx_atomic_file_write(o->output, 0644, FX_LOG_ERR, write_job, &job);
		if (rc < 0)
			return rc;
	}
	if (o->serve) {
		rc = fx_gzip_json(emit_merge, &r->m, fx_gzip_write_buf, &buf, &job.bytes);
		if (rc < 0) {
			free(buf.data);
			return fx_log_errno(FX_LOG_ERR, -rc,
					    "view: cannot build the profile to serve");
		}
	}
	if (o->json)
		json_summary(r, job.bytes);
	if (o->serve)
		rc = serve_bytes(buf.data, buf.len, o->listen, o->open);
	free(buf.data);
	return rc;
}

int fx_view_main(int argc, char **argv)
{
	struct view_opts o = { .max_samples = DEFAULT_MAX_SAMPLES };
	struct view_run r = { .o = &o };
	int rc = 0;

	if (parse_args(argc, argv, &o) < 0) {
		free(o.debuginfod_urls);
		fprintf(stderr, "Try 'fxagent view --help'.\n");
		return EXIT_USAGE;
	}
	view_merge_init(&r.m, o.merge, o.bucket_ms, o.max_samples);
	r.m.from = o.from;
	r.m.to = o.to;
	r.progress = isatty(STDERR_FILENO) && !o.json;
	r.start_ns = fx_now_ns(CLOCK_MONOTONIC);
	/* Readers on the other CPUs; this thread merges. */
	if (view_pool_new(ncpus() - 1, on_meta, &o, on_read, &r, &r.pool) < 0)
		rc = fx_log_errno(FX_LOG_ERR, ENOMEM, "view: cannot start");
	for (size_t i = 0; rc == 0 && i < o.nsources; i++) {
		int src = read_source(&r, o.sources[i]);

		if (src == -ENOMEM)
			rc = src;
	}
	view_pool_free(r.pool);
	if (rc == 0)
		rc = view_merge_finish(&r.m);
	if (rc == 0) {
		struct view_resym_opts ro = { .debug_dirs = o.debug_dirs,
					      .ndebug_dirs = o.ndebug_dirs,
					      .debuginfod_urls = o.debuginfod_urls };

		rc = view_resym(&r.m, &ro, &r.resym);
	}
	summary(&r);
	if (rc == 0 && !r.merged) {
		fx_err("view: no chunk to merge%s",
		       r.found ? " (none selected or none good)" : " found");
		rc = -ENOENT;
	}
	if (rc == 0)
		rc = output(&r);
	for (size_t i = 0; i < BAD_NAMED; i++)
		free(r.bad_names[i]);
	view_merge_free(&r.m);
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

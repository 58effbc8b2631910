/* SPDX-License-Identifier: MIT */
/* config: the agent's YAML configuration (libyaml) as one struct.
 *
 * fx_config_defaults() gives the documented defaults (config/fxagent.yaml
 * lists every key with its default). fx_config_load() overlays a file on them
 * and validates it: an unknown key, a wrong type, a value out of range or a
 * duplicate target name is an error whose message names the file, line and
 * column and says what was expected, e.g.
 *   "/etc/fxagent/fxagent.yaml:12:5: window.seconds: expected a whole number
 *    from 1 to 3600, got 0"
 * The struct owns all its strings; free with fx_config_release().
 */
#ifndef FXAGENT_CONFIG_H
#define FXAGENT_CONFIG_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define FX_CONFIG_DEFAULT_PATH	 "/etc/fxagent/fxagent.yaml"
#define FX_CONFIG_MAX_TARGETS	 256
#define FX_CONFIG_MAX_LABELS	 32
#define FX_CONFIG_MAX_DEBUG_DIRS 16

enum fx_target_kind {
	FX_TARGET_SYSTEMD_UNIT, /* value: "nginx.service" */
	FX_TARGET_CGROUP,	/* value: "/system.slice/foo.service", under the cgroup2 mount */
	FX_TARGET_PROCESS,	/* value: comm or executable base name */
	FX_TARGET_PID,		/* pid */
};

struct fx_label {
	char *key;
	char *value;
};

struct fx_target {
	char *name;
	enum fx_target_kind kind;
	char *value;  /* unit, cgroup path or process name; NULL for FX_TARGET_PID */
	uint32_t pid; /* FX_TARGET_PID */
	struct fx_label labels[FX_CONFIG_MAX_LABELS];
	size_t nlabels;
	/* off_cpu: its off-CPU waits, -1 (not set: sampling.off_cpu.enabled),
	 * 0 or 1 */
	int8_t off_cpu;
};

struct fx_config {
	struct {
		unsigned frequency; /* Hz, 1-10000; default 99 */
		bool dwarf;	    /* unwind: dwarf (default) | fp */
		/* with dwarf: 0 compiled rules (unwind "dwarf"), 1 libdwfl only
		 * ("libdwfl"), 2 both, compared ("check"): enum fx_dwunwind_engine */
		uint8_t dwarf_engine;
		uint32_t stack_bytes; /* 1024-32768, multiple of 8; default 16384 */
		bool kernel_stacks;   /* default true */
		bool include_idle;    /* default false */
		uint64_t ring_bytes;  /* ring_size per CPU: 0 (default) = sized for the rate
					 (ringplan.h), else a power of two, 4 KiB-64 MiB */
		struct {
			bool enabled; /* off_cpu.enabled; default false */
			/* 0-1000 (0: every wait); default FX_MIN_BLOCK_INTERVAL
			 * (below): fx_config_min_block_ns() */
			unsigned min_block_ms;
			unsigned budget; /* stack copies per second per CPU, 1-100000;
					    default 250 */
		} off_cpu;
	} sampling;
	struct {
		unsigned seconds;  /* 1-3600; default 60 */
		size_t max_stacks; /* distinct stacks per window, 1000-10000000; default 200000 */

		/* one track per process and thread name; default false */
		bool reuse_threads;
	} window;
	struct fx_target targets[FX_CONFIG_MAX_TARGETS]; /* none = the whole system */
	size_t ntargets;
	struct fx_label labels[FX_CONFIG_MAX_LABELS]; /* added to every chunk; "host" defaults
							 to the host name */
	size_t nlabels;
	struct {
		char *directory; /* default "/var/lib/fxagent/chunks" */
	} output;
	struct {
		char *debug_dirs[FX_CONFIG_MAX_DEBUG_DIRS]; /* default { "/usr/lib/debug" } */
		size_t ndebug_dirs;
		bool demangle;	  /* default true */
		bool check_names; /* judge every name (namecheck.h); default false */
		bool jit;	  /* name and unwind JIT code (jitdumps, perf maps); default true */
		bool jvm_perfmap; /* ask JVMs for fresh perf maps (jvmrefresh.h); default true */
		uint64_t max_memory; /* held between windows, 1 MiB-16 GiB; default 32 MiB */
		/* debuginfod_urls: servers, space-separated; NULL (not in the
		 * file): those of DEBUGINFOD_URLS in the environment; "": none. */
		char *debuginfod_urls;
		char *debuginfod_cache;		/* default "/var/lib/fxagent/debuginfod" */
		uint64_t debuginfod_cache_max;	/* bytes, 16 MiB-1 TiB; default 2 GiB */
		unsigned debuginfod_timeout_ms; /* one request, 1 s-10 min; default 10 s */
		unsigned debuginfod_budget_ms;	/* per window, 1 s-1 h; default 15 s */
		unsigned debuginfod_retry_s; /* a miss asked again after, 1 s-7 d; default 10 min */
	} symbolization;
	struct {
		int level; /* enum fx_log_level; "error" "warning" "notice" "info"
			      "debug"; default notice */
	} log;
	struct {
		char *url; /* NULL (default): chunks stay in output.directory */
		bool put;  /* method: POST (default) | PUT */
		struct fx_label headers[FX_CONFIG_MAX_LABELS]; /* extra request headers */
		size_t nheaders;
		char *bearer_token_file;	      /* NULL = none */
		char *ca_file, *cert_file, *key_file; /* NULL = none */
		bool insecure_skip_verify;	      /* default false */
		unsigned connect_timeout_ms;	      /* connect_timeout, default 10 s */
		unsigned timeout_ms;		      /* timeout, whole request, default 60 s */
		uint64_t initial_backoff_ms;	      /* retry.initial_backoff, default 1 s */
		uint64_t max_backoff_ms;	      /* retry.max_backoff, default 5 min */
		struct {
			char *bucket;		 /* NULL (default): no S3; else in place of url */
			char *region, *endpoint; /* endpoint NULL: AWS's, from the region */
			char *prefix;		 /* NULL: none */
			char *access_key_id_file, *secret_access_key_file; /* NULL: the
									      environment */
			char *storage_class; /* NULL: the bucket's default */
			bool path_style;     /* default false */
		} s3;
	} upload;
	struct {
		char *directory;    /* default "/var/lib/fxagent/spool" */
		uint64_t max_bytes; /* default 256 MiB */
		uint64_t max_age_s; /* default 7 days; 0 = no limit */
	} spool;
	struct {
		char *textfile; /* NULL (default): none; else the agent's counters are
				   written there after every window (Prometheus text) */
	} metrics;
};

/* Fills @c with the defaults. Returns 0 or -ENOMEM. */
/* Whether off-CPU waits are recorded for @t (NULL: the whole system). */
/* min_block's default: the sampling interval, so that a thread that waits
 * has its waits sampled about as often as one that runs has its CPU. */
#define FX_MIN_BLOCK_INTERVAL UINT_MAX

static inline uint64_t fx_config_min_block_ns(const struct fx_config *c)
{
	if (c->sampling.off_cpu.min_block_ms == FX_MIN_BLOCK_INTERVAL)
		return 1000000000ull / c->sampling.frequency;
	return (uint64_t)c->sampling.off_cpu.min_block_ms * 1000000;
}

static inline bool fx_config_off_cpu(const struct fx_config *c, const struct fx_target *t)
{
	return t && t->off_cpu >= 0 ? t->off_cpu : c->sampling.off_cpu.enabled;
}

/* Whether any target (or the whole system) records off-CPU waits. */
static inline bool fx_config_any_off_cpu(const struct fx_config *c)
{
	if (!c->ntargets)
		return c->sampling.off_cpu.enabled;
	for (size_t i = 0; i < c->ntargets; i++)
		if (fx_config_off_cpu(c, &c->targets[i]))
			return true;
	return false;
}

int fx_config_defaults(struct fx_config *c);

/* Loads @path over the defaults into @c (which need not be initialized).
 * The file must be a regular file (opened without blocking: a FIFO is
 * refused, not waited on) that nobody but root or the agent's user can
 * write. On error returns -EINVAL, -EFBIG for a file over 1 MiB, -EPERM for
 * its owner or mode, or -errno when it cannot be opened or read, and writes
 * a one-line message into @err (@errlen bytes): file:line:column for what
 * is in it, the path, its kind or mode and the fix for the file itself; @c
 * is then released and zeroed. */
int fx_config_load(const char *path, struct fx_config *c, char *err, size_t errlen);

/* The same for a YAML text in memory; @name stands for the file in messages. */
int fx_config_parse(const char *name, const char *text, size_t len, struct fx_config *c, char *err,
		    size_t errlen);

/* Checks the files and directories @c names against the disk, as the agent
 * would use them, so that a config that passes starts: the bearer token file
 * (a regular file, a secret: not readable by others, printable, not empty),
 * the TLS files (regular; certificates and the key parse with OpenSSL; the
 * key a secret), debug_dirs (directories where they exist), output.directory
 * and, with upload.url, spool.directory (fx_trust_dir: the agent's alone),
 * and metrics.textfile (in a directory; not a symlink or other kind where
 * the file is). Nothing is created. Returns 0, or -errno with one line in
 * @err naming the key, the path, what is wrong and the fix. */
int fx_config_check_files(const struct fx_config *c, char *err, size_t errlen);

void fx_config_release(struct fx_config *c);

/* A duration as every flag and key takes it: a whole number with ms, s, m,
 * h or d, or a whole number of seconds ("500ms", "10s", "2d", "90"); no
 * decimals, signs or spaces. Into *@ms; returns 0 or -EINVAL. */
#define FX_DURATION_FORMS "a whole number with ms, s, m, h or d, such as 500ms, 10s, 2m"
int fx_config_parse_duration(const char *s, uint64_t *ms);

/* The value of label @key, or NULL. */
const char *fx_config_label(const struct fx_config *c, const char *key);

/* Whether chunks leave the host: upload.url or upload.s3 is set. */
static inline bool fx_config_uploads(const struct fx_config *c)
{
	return c->upload.url || c->upload.s3.bucket;
}

#endif

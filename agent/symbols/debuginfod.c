/* SPDX-License-Identifier: MIT */
/* debuginfod: libdebuginfod with the agent's bounds (see debuginfod.h). */
#include "fxagent/debuginfod.h"

#include <dirent.h>
#include <elfutils/debuginfod.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "fxagent/atomic_file.h"
#include "fxagent/elf.h"
#include "fxagent/log.h"
#include "fxagent/trust.h"
#include "fxagent/util.h"

/* Files looked at when trimming the cache: a bound on the walk. */
#define TRIM_MAX_FILES 65536

struct fx_debuginfod {
	debuginfod_client *c;
	char *cache_dir;
	uint64_t cache_max_bytes;
	unsigned timeout_ms, budget_ms, retry_s;
	uint64_t batch_end_ns; /* CLOCK_MONOTONIC; 0: no budget */
	uint64_t req_end_ns;   /* the request's deadline, for progress() */
	bool cut;	       /* progress() cut the request */
	bool transferred;      /* the request reached a server */
	bool error_said;
	int null_fd; /* libdebuginfod's verbose output, discarded */
	struct fx_debuginfod_stats st;
};

/* Set once the agent stops (fx_debuginfod_stop_all). */
static bool stopping;

void fx_debuginfod_stop_all(void)
{
	__atomic_store_n(&stopping, true, __ATOMIC_RELAXED);
}

/* DEBUGINFOD_URLS as the process started: what urls NULL stands for. */
static const char *inherited_urls(void)
{
	static char *urls;
	static bool read;

	if (!read) {
		const char *e = getenv(DEBUGINFOD_URLS_ENV_VAR);

		urls = e ? strdup(e) : NULL;
		read = true;
	}
	return urls ? urls : "";
}

static const char *urls_of(const struct fx_debuginfod_opts *o)
{
	return o->urls ? o->urls : inherited_urls();
}

static int set_var(const char *name, const char *value)
{
	return setenv(name, value, 1) ? -errno : 0;
}

int fx_debuginfod_setenv(const struct fx_debuginfod_opts *o)
{
	unsigned timeout_s = ((o->timeout_ms ? o->timeout_ms : 10000) + 999) / 1000;
	char num[32];
	int r;

	r = set_var(DEBUGINFOD_URLS_ENV_VAR, urls_of(o));
	if (!r && o->cache_dir)
		r = set_var(DEBUGINFOD_CACHE_PATH_ENV_VAR, o->cache_dir);
	/* The first 100 KiB within the timeout, the whole file too: our own
	 * deadline (progress()) is the bound that counts, these end a stalled
	 * transfer on libcurl's side as well. */
	snprintf(num, sizeof(num), "%u", timeout_s);
	if (!r)
		r = set_var(DEBUGINFOD_TIMEOUT_ENV_VAR, num);
	if (!r)
		r = set_var(DEBUGINFOD_MAXTIME_ENV_VAR, num);
	snprintf(num, sizeof(num), "%" PRIu64, o->cache_max_bytes);
	if (!r)
		r = set_var(DEBUGINFOD_MAXSIZE_ENV_VAR, num);
	/* One attempt: a retry would spend the window's budget on a server
	 * that just failed. */
	if (!r)
		r = set_var(DEBUGINFOD_RETRY_LIMIT_ENV_VAR, "0");
	if (r)
		fx_log_errno(FX_LOG_WARN, -r, "debuginfod: cannot set its environment");
	return r;
}

/* libdebuginfod calls this about once a second while a request runs, and
 * ends the request when it returns non-zero. */
static int progress(debuginfod_client *c, long a, long b)
{
	struct fx_debuginfod *d = debuginfod_get_user_data(c);

	(void)a;
	(void)b;
	d->transferred = true;
	if (fx_now_ns(CLOCK_MONOTONIC) >= d->req_end_ns ||
	    __atomic_load_n(&stopping, __ATOMIC_RELAXED)) {
		d->cut = true;
		return 1;
	}
	return 0;
}

/* libdebuginfod's cache_miss_s: how long it remembers a miss. */
static void write_miss_seconds(const struct fx_debuginfod *d)
{
	char path[4096], text[32];
	int n = snprintf(text, sizeof(text), "%u\n", d->retry_s);

	if (snprintf(path, sizeof(path), "%s/cache_miss_s", d->cache_dir) < (int)sizeof(path))
		fx_atomic_file_write_buf(path, 0600, FX_LOG_WARN, text, (size_t)n);
}

struct fx_debuginfod *fx_debuginfod_new(const struct fx_debuginfod_opts *o)
{
	const char *urls = urls_of(o);
	struct fx_debuginfod *d;
	char err[512];
	int fd;

	if (!urls[strspn(urls, " ")])
		return NULL;
	d = calloc(1, sizeof(*d));
	if (!d)
		return NULL;
	d->null_fd = -1;
	d->cache_max_bytes = o->cache_max_bytes;
	d->timeout_ms = o->timeout_ms ? o->timeout_ms : 10000;
	d->budget_ms = o->budget_ms;
	d->retry_s = o->retry_s ? o->retry_s : 600;
	if (o->cache_dir) {
		d->cache_dir = strdup(o->cache_dir);
		if (!d->cache_dir)
			goto fail;
		fd = fx_trust_dir(o->cache_dir, "symbolization.debuginfod_cache", true, err,
				  sizeof(err));
		if (fd < 0) {
			fx_warn("debuginfod: not used: %s", err);
			goto fail;
		}
		close(fd);
		write_miss_seconds(d);
	}
	d->c = debuginfod_begin();
	if (!d->c) {
		fx_warn("debuginfod: not used: its client could not start");
		goto fail;
	}
	debuginfod_set_user_data(d->c, d);
	debuginfod_set_progressfn(d->c, progress);
	/* libdebuginfod 0.188 writes some of its verbose lines with dprintf()
	 * even to fd -1, and glibc 2.36's dprintf() leaks its 8 KiB buffer
	 * when the fd is bad (LeakSanitizer found 8 KiB a request): give it
	 * a good fd that discards them. */
	d->null_fd = open("/dev/null", O_WRONLY | O_CLOEXEC);
	if (d->null_fd >= 0)
		debuginfod_set_verbose_fd(d->c, d->null_fd);
	return d;
fail:
	free(d->cache_dir);
	free(d);
	return NULL;
}

void fx_debuginfod_free(struct fx_debuginfod *d)
{
	if (!d)
		return;
	if (d->c)
		debuginfod_end(d->c);
	if (d->null_fd >= 0)
		close(d->null_fd);
	free(d->cache_dir);
	free(d);
}

void fx_debuginfod_begin_batch(struct fx_debuginfod *d)
{
	if (d)
		d->batch_end_ns = d->budget_ms ? fx_now_ns(CLOCK_MONOTONIC) +
							 (uint64_t)d->budget_ms * 1000000ull
					       : 0;
}

unsigned fx_debuginfod_retry_s(const struct fx_debuginfod *d)
{
	return d ? d->retry_s : 0;
}

void fx_debuginfod_get_stats(const struct fx_debuginfod *d, struct fx_debuginfod_stats *out)
{
	if (d)
		*out = d->st;
	else
		memset(out, 0, sizeof(*out));
}

/* ---- the cache's size bound ---- */

struct cfile {
	char *dir, *name;
	uint64_t bytes;
	int64_t mtime;
};

static int by_mtime(const void *a, const void *b)
{
	const struct cfile *x = a, *y = b;

	return (x->mtime > y->mtime) - (x->mtime < y->mtime);
}

/* The files one level down in @cfd (libdebuginfod keeps one directory per
 * build-id; its control files at the top are left alone), appended to @v. */
static void list_dir(int cfd, const char *dname, struct cfile *v, size_t *n, uint64_t *total)
{
	int fd = openat(cfd, dname, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	struct dirent *e;
	DIR *dir;

	if (fd < 0)
		return;
	dir = fdopendir(fd);
	if (!dir) {
		close(fd);
		return;
	}
	while ((e = readdir(dir)) != NULL && *n < TRIM_MAX_FILES) {
		struct stat st;

		if (e->d_name[0] == '.' || fstatat(fd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 ||
		    !S_ISREG(st.st_mode))
			continue;
		v[*n] = (struct cfile){ .dir = strdup(dname),
					.name = strdup(e->d_name),
					.bytes = (uint64_t)st.st_blocks * 512,
					.mtime = st.st_mtime };
		if (!v[*n].dir || !v[*n].name) {
			free(v[*n].dir);
			free(v[*n].name);
			continue;
		}
		*total += v[(*n)++].bytes;
	}
	closedir(dir);
}

void fx_debuginfod_trim(const char *cache_dir, uint64_t max_bytes, uint64_t *evicted)
{
	struct cfile *v;
	struct dirent *e;
	uint64_t total = 0;
	size_t n = 0, i;
	DIR *top;
	int cfd;

	if (!cache_dir || !max_bytes)
		return;
	cfd = open(cache_dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (cfd < 0)
		return;
	v = calloc(TRIM_MAX_FILES, sizeof(*v));
	top = v ? fdopendir(dup(cfd)) : NULL;
	if (!top) {
		free(v);
		close(cfd);
		return;
	}
	while ((e = readdir(top)) != NULL && n < TRIM_MAX_FILES) {
		struct stat st;

		if (e->d_name[0] != '.' && fstatat(cfd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
		    S_ISDIR(st.st_mode))
			list_dir(cfd, e->d_name, v, &n, &total);
	}
	closedir(top);
	qsort(v, n, sizeof(*v), by_mtime);
	for (i = 0; i < n && total > max_bytes; i++) {
		int fd = openat(cfd, v[i].dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);

		if (fd < 0)
			continue;
		if (unlinkat(fd, v[i].name, 0) == 0) {
			total -= v[i].bytes;
			if (evicted)
				(*evicted)++;
			fx_debug("debuginfod: removed %s/%s/%s (%" PRIu64 " bytes) from the cache",
				 cache_dir, v[i].dir, v[i].name, v[i].bytes);
		}
		close(fd);
		/* A build-id's directory when it is empty now; the
		 * symbolizer's stays (it holds an fd to it). */
		if (strcmp(v[i].dir, "inflated") != 0)
			unlinkat(cfd, v[i].dir, AT_REMOVEDIR);
	}
	for (i = 0; i < n; i++) {
		free(v[i].dir);
		free(v[i].name);
	}
	free(v);
	close(cfd);
}

/* ---- finding a debug file ---- */

static void said_error(struct fx_debuginfod *d, const char *hex, int err)
{
	const char *url = debuginfod_get_url(d->c);

	if (d->error_said) {
		fx_debug("debuginfod: %s: %s", hex, strerror(err));
		return;
	}
	d->error_said = true;
	fx_log(FX_LOG_NOTICE,
	       "debuginfod: request for %s%s%s failed: %s; it is asked again after %u s, "
	       "and further failures are only counted (fxagent_debuginfod_errors_total)",
	       hex, url ? " at " : "", url ? url : "", strerror(err), d->retry_s);
}

int fx_debuginfod_find(struct fx_debuginfod *d, const uint8_t *id, size_t len, char *path,
		       size_t cap)
{
	char hex[2 * FX_BUILD_ID_MAX + 1];
	uint64_t now = fx_now_ns(CLOCK_MONOTONIC);
	char *p = NULL;
	struct stat st;
	int fd;

	if (!d || !id || len < 2 || len > FX_BUILD_ID_MAX)
		return -ENOENT;
	if ((d->batch_end_ns && now >= d->batch_end_ns) ||
	    __atomic_load_n(&stopping, __ATOMIC_RELAXED)) {
		d->st.deferred++;
		return -EAGAIN;
	}
	fx_elf_hex(id, len, hex);
	d->req_end_ns = now + (uint64_t)d->timeout_ms * 1000000ull;
	if (d->batch_end_ns && d->batch_end_ns < d->req_end_ns)
		d->req_end_ns = d->batch_end_ns;
	d->cut = d->transferred = false;
	fd = debuginfod_find_debuginfo(d->c, id, (int)len, &p);
	if (fd >= 0) {
		/* The file is the server's answer: a regular file of bytes,
		 * nothing else (its build-id is checked by the caller). */
		if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size <= 0 || !p ||
		    snprintf(path, cap, "%s", p) >= (int)cap) {
			close(fd);
			free(p);
			d->st.errors++;
			said_error(d, hex, EINVAL);
			return -EINVAL;
		}
		free(p);
		futimens(fd, NULL); /* last use, for fx_debuginfod_trim() */
		d->st.hits++;
		if (d->transferred) {
			d->st.bytes += (uint64_t)st.st_size;
			fx_info("debuginfod: downloaded the debug file of %s (%" PRIu64 " bytes)",
				hex, (uint64_t)st.st_size);
			fx_debuginfod_trim(d->cache_dir, d->cache_max_bytes, &d->st.evicted);
		}
		return fd;
	}
	free(p);
	/* A cut request comes back as a miss from libdebuginfod (and is
	 * remembered as one, for cache_miss_s): count it as the error it is. */
	if (d->cut)
		fd = -ETIMEDOUT;
	if (fd == -ENOENT) {
		d->st.misses++;
		fx_debug("debuginfod: no server has %s", hex);
		return -ENOENT;
	}
	d->st.errors++;
	said_error(d, hex, -fd);
	return fd;
}

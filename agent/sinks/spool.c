/* SPDX-License-Identifier: MIT */
/* spool: the on-disk queue of finished chunks.
 *
 * Memory holds one small entry per pending chunk (its name fields and size),
 * sorted oldest first in one array; the live part is e[first, first + n) so
 * that taking the oldest is O(1) and appending the newest is amortized O(1).
 * Everything else is on disk.
 *
 * One file for one concern, the spool directory's lifecycle: the chunk file
 * names, the index that mirrors the directory under one lock and its limits,
 * then the calls in the order a chunk meets them (open, add from incoming/,
 * peek, done or reject to rejected/). Each part works on both the index and
 * the directory: split, every file would need struct fx_spool and its lock.
 */
#include "fxagent/spool.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "fxagent/chunk.h"
#include "fxagent/log.h"
#include "fxagent/trust.h"
#include "fxagent/util.h"

#define SUFFIX	     ".json.gz"
#define SUFFIX_LEN   (sizeof(SUFFIX) - 1)
#define REJECTED_DIR "rejected"
/* Chunks are written here, then moved in once there is room for them. */
#define INCOMING_DIR "incoming"
/* The longest name: three 19-digit numbers, the id, the target, four dashes. */
#define NAME_LEN_MAX (3 * 19 + FX_CHUNK_ID_LEN + FX_TARGET_NAME_MAX + 4 + SUFFIX_LEN)

struct entry {
	struct fx_chunk_info info;
	uint64_t size;
};

struct fx_spool {
	pthread_mutex_t lock;
	char *dir; /* as given, without trailing slashes */
	int dirfd, rejfd, incfd;
	uint64_t max_bytes, max_age_s;
	struct entry *e; /* pending, oldest first, in e[first, first + n) */
	size_t first, n, cap;
	struct fx_spool_stats st; /* .pending is filled in by fx_spool_get_stats */
};

/* Chunks removed by one call, for its one log line per reason. */
struct drops {
	uint64_t n, bytes;
	uint64_t failed; /* unlink failures */
	int err;	 /* the last unlink errno */
};

/* Parses a decimal field followed by '-'; one spelling per number (no sign,
 * no leading zero) so that names round-trip. Returns the rest or NULL. */
static const char *parse_num(const char *s, int64_t *out)
{
	int64_t v = 0;
	const char *p = s;

	if (*p < '0' || *p > '9')
		return NULL;
	if (*p == '0' && p[1] >= '0' && p[1] <= '9')
		return NULL;
	for (; *p >= '0' && *p <= '9'; p++) {
		int d = *p - '0';

		if (v > (INT64_MAX - d) / 10)
			return NULL;
		v = v * 10 + d;
	}
	if (*p != '-')
		return NULL;
	*out = v;
	return p + 1;
}

static bool is_lower_hex(char c)
{
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
}

static bool is_target_char(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
	       c == '_' || c == '.' || c == '-';
}

int fx_spool_parse_name(const char *name, struct fx_chunk_info *info)
{
	struct fx_chunk_info ci;
	const char *p, *end;
	size_t len;

	if (!name || !info)
		return -EINVAL;
	len = strnlen(name, NAME_LEN_MAX + 1);
	if (len > NAME_LEN_MAX || len < SUFFIX_LEN || strcmp(name + len - SUFFIX_LEN, SUFFIX))
		return -EINVAL;
	end = name + len - SUFFIX_LEN;
	memset(&ci, 0, sizeof(ci));
	p = parse_num(name, &ci.start_ms);
	if (p)
		p = parse_num(p, &ci.end_ms);
	if (p)
		p = parse_num(p, &ci.seq);
	if (!p)
		return -EINVAL;
	/* Nothing consumed so far can be a '.', so p is before the suffix. */
	for (size_t i = 0; i < FX_CHUNK_ID_LEN; i++) {
		if (!is_lower_hex(p[i]))
			return -EINVAL;
		ci.id[i] = p[i];
	}
	p += FX_CHUNK_ID_LEN;
	if (*p != '-')
		return -EINVAL;
	p++;
	if (p >= end || end - p > FX_TARGET_NAME_MAX)
		return -EINVAL;
	for (const char *t = p; t < end; t++) {
		if (!is_target_char(*t))
			return -EINVAL;
	}
	memcpy(ci.target, p, (size_t)(end - p));
	*info = ci;
	return 0;
}

/* Formats the file name of @info, refusing anything fx_spool_parse_name would
 * refuse. Returns 0 or -EINVAL. */
static int format_name(const struct fx_chunk_info *info, char out[NAME_LEN_MAX + 1])
{
	struct fx_chunk_info back;
	int n;

	if (!memchr(info->id, '\0', sizeof(info->id)) ||
	    !memchr(info->target, '\0', sizeof(info->target)))
		return -EINVAL;
	n = snprintf(out, NAME_LEN_MAX + 1, "%" PRId64 "-%" PRId64 "-%" PRId64 "-%s-%s" SUFFIX,
		     info->start_ms, info->end_ms, info->seq, info->id, info->target);
	if (n < 0 || n > (int)NAME_LEN_MAX)
		return -EINVAL;
	/* One validator: what does not parse back the same is not a chunk name
	 * (a negative number, an upper-case id, a '/' in the target...). */
	if (fx_spool_parse_name(out, &back) < 0 || back.start_ms != info->start_ms ||
	    back.end_ms != info->end_ms || back.seq != info->seq || strcmp(back.id, info->id) ||
	    strcmp(back.target, info->target))
		return -EINVAL;
	return 0;
}

static int cmp_i64(int64_t a, int64_t b)
{
	return (a > b) - (a < b);
}

/* Oldest first: by end, then start, then sequence number, then id. */
static int info_cmp(const struct fx_chunk_info *a, const struct fx_chunk_info *b)
{
	int c = cmp_i64(a->end_ms, b->end_ms);

	if (!c)
		c = cmp_i64(a->start_ms, b->start_ms);
	if (!c)
		c = cmp_i64(a->seq, b->seq);
	if (!c)
		c = strcmp(a->id, b->id);
	if (!c)
		c = strcmp(a->target, b->target);
	return c;
}

static int entry_cmp(const void *a, const void *b)
{
	return info_cmp(&((const struct entry *)a)->info, &((const struct entry *)b)->info);
}

static int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* The index in e[] of the first pending entry not older than @info. */
static size_t lower_bound(const struct fx_spool *sp, const struct fx_chunk_info *info)
{
	size_t lo = sp->first, hi = sp->first + sp->n;

	/* The usual case: the newest chunk goes last. */
	if (!sp->n || info_cmp(&sp->e[hi - 1].info, info) < 0)
		return hi;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (info_cmp(&sp->e[mid].info, info) < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* The index in e[] of the pending chunk @info, or SIZE_MAX. */
static size_t find(const struct fx_spool *sp, const struct fx_chunk_info *info)
{
	size_t i = lower_bound(sp, info);

	if (i < sp->first + sp->n && !info_cmp(&sp->e[i].info, info))
		return i;
	return SIZE_MAX;
}

static int insert_at(struct fx_spool *sp, size_t pos, const struct entry *en)
{
	size_t end = sp->first + sp->n;

	if (end == sp->cap) {
		if (sp->first && sp->first >= sp->cap / 2) {
			/* The front half holds only taken entries: compact, not grow. */
			memmove(sp->e, sp->e + sp->first, sp->n * sizeof(*sp->e));
			pos -= sp->first;
			end -= sp->first;
			sp->first = 0;
		} else if (fx_grow(&sp->e, &sp->cap, end + 1, sizeof(*sp->e)) < 0) {
			return -ENOMEM;
		}
	}
	memmove(&sp->e[pos + 1], &sp->e[pos], (end - pos) * sizeof(*sp->e));
	sp->e[pos] = *en;
	sp->n++;
	sp->st.bytes += en->size;
	return 0;
}

static void remove_at(struct fx_spool *sp, size_t i)
{
	sp->st.bytes -= sp->e[i].size;
	if (i == sp->first)
		sp->first++;
	else
		memmove(&sp->e[i], &sp->e[i + 1], (sp->first + sp->n - i - 1) * sizeof(*sp->e));
	sp->n--;
	if (!sp->n)
		sp->first = 0;
}

static void unlink_counted(int dirfd, const struct entry *en, struct drops *d)
{
	char name[NAME_LEN_MAX + 1];

	/* Entries only come from names that parsed, so this cannot fail. */
	if (format_name(&en->info, name) == 0 && unlinkat(dirfd, name, 0) < 0 && errno != ENOENT) {
		d->failed++;
		d->err = errno;
	}
	d->n++;
	d->bytes += en->size;
}

static void drop_at(struct fx_spool *sp, size_t i, struct drops *d)
{
	unlink_counted(sp->dirfd, &sp->e[i], d);
	sp->st.dropped++;
	sp->st.dropped_bytes += sp->e[i].size;
	remove_at(sp, i);
}

/* Drops the chunks older than max_age, then the oldest while over max_bytes. */
static void enforce(struct fx_spool *sp, struct drops *aged, struct drops *full)
{
	if (sp->max_age_s) {
		int64_t now = now_ms();

		/* Sorted by end first, so the aged chunks are all at the front. */
		if (now >= 0 && sp->max_age_s <= (uint64_t)now / 1000) {
			int64_t limit = now - (int64_t)sp->max_age_s * 1000;

			while (sp->n && sp->e[sp->first].info.end_ms < limit)
				drop_at(sp, sp->first, aged);
		}
	}
	if (sp->max_bytes) {
		while (sp->n && sp->st.bytes > sp->max_bytes)
			drop_at(sp, sp->first, full);
	}
}

static void log_unlink_failures(const struct fx_spool *sp, const struct drops *d)
{
	if (d->failed)
		(void)fx_log_errno(FX_LOG_WARN, d->err,
				   "cannot delete %" PRIu64
				   " chunk files in the spool '%s', ignoring",
				   d->failed, sp->dir);
}

/* One line per reason per call, never one per chunk. */
static void log_drops(const struct fx_spool *sp, const struct drops *aged, const struct drops *big,
		      const struct drops *full)
{
	if (aged->n)
		fx_warn("dropped %" PRIu64 " chunks (%" PRIu64
			" bytes) from the spool, older than %" PRIu64 " s (spool.max_age)",
			aged->n, aged->bytes, sp->max_age_s);
	if (big->n)
		fx_warn("dropped %" PRIu64 " chunks (%" PRIu64
			" bytes) from the spool, each larger than %" PRIu64
			" bytes (spool.max_bytes)",
			big->n, big->bytes, sp->max_bytes);
	if (full->n)
		fx_warn("the spool is full: dropped %" PRIu64 " chunks (%" PRIu64
			" bytes), oldest first, to stay under %" PRIu64 " bytes (spool.max_bytes)",
			full->n, full->bytes, sp->max_bytes);
	log_unlink_failures(sp, aged);
	log_unlink_failures(sp, big);
	log_unlink_failures(sp, full);
}

/* A fresh directory stream on @dirfd (a dup would share its position). */
static DIR *open_dir_stream(int dirfd)
{
	int fd = openat(dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	DIR *d;

	if (fd < 0)
		return NULL;
	d = fdopendir(fd);
	if (!d)
		close(fd);
	return d;
}

/* A regular file's size, or -errno (a symlink or a directory is not a chunk). */
static int regular_size(int dirfd, const char *name, uint64_t *size)
{
	struct stat st;

	if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return -errno;
	if (!S_ISREG(st.st_mode))
		return -EINVAL;
	*size = (uint64_t)st.st_size;
	return 0;
}

/* Keeps rejected/ under max_bytes by deleting its oldest chunks. The listing
 * is per call: rejections are rare. */
static void trim_rejected(struct fx_spool *sp)
{
	struct entry *list = NULL;
	size_t n = 0, cap = 0;
	uint64_t total = 0;
	struct drops d = { 0 };
	struct dirent *de;
	DIR *dir;

	if (!sp->max_bytes)
		return;
	dir = open_dir_stream(sp->rejfd);
	if (!dir) {
		(void)fx_log_errno(FX_LOG_WARN, errno,
				   "cannot list '%s/" REJECTED_DIR "', ignoring", sp->dir);
		return;
	}
	while ((de = readdir(dir))) {
		struct entry en;

		if (fx_spool_parse_name(de->d_name, &en.info) < 0 ||
		    regular_size(sp->rejfd, de->d_name, &en.size) < 0)
			continue;
		if (fx_grow(&list, &cap, n + 1, sizeof(*list)) < 0)
			break; /* trim what was listed */
		list[n++] = en;
		total += en.size;
	}
	closedir(dir);
	if (total > sp->max_bytes) {
		qsort(list, n, sizeof(*list), entry_cmp);
		for (size_t i = 0; i < n && total > sp->max_bytes; i++) {
			unlink_counted(sp->rejfd, &list[i], &d);
			total -= list[i].size;
		}
		fx_warn("deleted %" PRIu64 " rejected chunks (%" PRIu64
			" bytes), oldest first, to keep '%s/" REJECTED_DIR
			"' under spool.max_bytes",
			d.n, d.bytes, sp->dir);
		log_unlink_failures(sp, &d);
		fsync(sp->rejfd);
	}
	free(list);
}

/* Whether @name is "<chunk name>.tmp<anything>", a write that was cut short. */
static bool is_temp_name(const char *name)
{
	struct fx_chunk_info info;
	char buf[NAME_LEN_MAX + 1];

	for (const char *p = strstr(name, ".tmp"); p; p = strstr(p + 1, ".tmp")) {
		size_t len = (size_t)(p - name);

		if (len > NAME_LEN_MAX)
			break;
		memcpy(buf, name, len);
		buf[len] = '\0';
		if (fx_spool_parse_name(buf, &info) == 0)
			return true;
	}
	return false;
}

/* Takes stock of the spool directory: chunks become pending (unsorted),
 * temporary leftovers are removed, anything else is left alone. */
/* Creates and opens the spool's subdirectory @name. Returns 0 or -errno
 * (logged). */
static int open_subdir(struct fx_spool *sp, const char *name, int *fd)
{
	if (mkdirat(sp->dirfd, name, 0700) < 0 && errno != EEXIST)
		return fx_log_errno(FX_LOG_ERR, errno, "cannot create '%s/%s'", sp->dir, name);
	*fd = openat(sp->dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (*fd < 0)
		return fx_log_errno(FX_LOG_ERR, errno, "cannot open '%s/%s'", sp->dir, name);
	return 0;
}

/* What an earlier run left in incoming/: whole chunks (written and renamed,
 * but not yet moved) go into the spool, interrupted writes are removed. */
static void settle_incoming(struct fx_spool *sp)
{
	struct fx_chunk_info info;
	struct dirent *de;
	DIR *dir = open_dir_stream(sp->incfd);

	if (!dir)
		return;
	while ((de = readdir(dir))) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		if (fx_spool_parse_name(de->d_name, &info) == 0)
			renameat(sp->incfd, de->d_name, sp->dirfd, de->d_name);
		else
			unlinkat(sp->incfd, de->d_name, 0);
	}
	closedir(dir);
}

static int scan(struct fx_spool *sp)
{
	uint64_t unrelated = 0, temps = 0, temp_failed = 0;
	char first_unrelated[NAME_LEN_MAX + 1] = "";
	struct dirent *de;
	DIR *dir;
	int rc = 0;

	dir = open_dir_stream(sp->dirfd);
	if (!dir)
		return fx_log_errno(FX_LOG_ERR, errno, "cannot list the spool '%s'", sp->dir);
	for (;;) {
		struct entry en;
		const char *name;

		errno = 0;
		de = readdir(dir);
		if (!de) {
			if (errno)
				rc = fx_log_errno(FX_LOG_ERR, errno, "cannot list the spool '%s'",
						  sp->dir);
			break;
		}
		name = de->d_name;
		if (!strcmp(name, ".") || !strcmp(name, "..") || !strcmp(name, REJECTED_DIR) ||
		    !strcmp(name, INCOMING_DIR))
			continue;
		if (fx_spool_parse_name(name, &en.info) == 0 &&
		    regular_size(sp->dirfd, name, &en.size) == 0) {
			rc = fx_grow(&sp->e, &sp->cap, sp->n + 1, sizeof(*sp->e));
			if (rc < 0) {
				rc = fx_log_errno(FX_LOG_ERR, -rc, "cannot list the spool '%s'",
						  sp->dir);
				break;
			}
			sp->e[sp->n++] = en;
			sp->st.bytes += en.size;
			sp->st.added++;
		} else if (is_temp_name(name)) {
			if (unlinkat(sp->dirfd, name, 0) < 0)
				temp_failed++;
			else
				temps++;
		} else if (!unrelated++) {
			snprintf(first_unrelated, sizeof(first_unrelated), "%.*s",
				 (int)NAME_LEN_MAX, name);
		}
	}
	closedir(dir);
	if (temps) {
		fx_info("removed %" PRIu64
			" temporary files of interrupted writes in the spool '%s'",
			temps, sp->dir);
		fsync(sp->dirfd);
	}
	if (temp_failed)
		fx_warn("cannot remove %" PRIu64
			" temporary files of interrupted writes in the spool '%s', ignoring",
			temp_failed, sp->dir);
	if (unrelated)
		fx_log(FX_LOG_NOTICE,
		       "leaving alone %" PRIu64
		       " files in the spool '%s' that are not chunks (such as '%s')",
		       unrelated, sp->dir, first_unrelated);
	return rc;
}

int fx_spool_open(const struct fx_spool_opts *opts, struct fx_spool **out)
{
	struct drops aged = { 0 }, big = { 0 }, full = { 0 };
	char why[PATH_MAX + 256];
	struct fx_spool *sp;
	size_t len;
	int rc;

	if (!opts || !out || !opts->directory || !*opts->directory) {
		fx_err("cannot open the spool: no directory given");
		return -EINVAL;
	}
	sp = calloc(1, sizeof(*sp));
	if (!sp)
		return fx_log_errno(FX_LOG_ERR, ENOMEM, "cannot open the spool '%s'",
				    opts->directory);
	sp->dirfd = sp->rejfd = sp->incfd = -1;
	pthread_mutex_init(&sp->lock, NULL);
	sp->max_bytes = opts->max_bytes;
	sp->max_age_s = opts->max_age_s;
	sp->dir = strdup(opts->directory);
	if (!sp->dir) {
		rc = fx_log_errno(FX_LOG_ERR, ENOMEM, "cannot open the spool '%s'",
				  opts->directory);
		goto fail;
	}
	len = strlen(sp->dir);
	while (len > 1 && sp->dir[len - 1] == '/')
		sp->dir[--len] = '\0';

	/* Others who could write here could swap a chunk for what they want
	 * sent with the agent's credentials: refused, with the fix. */
	sp->dirfd = fx_trust_dir(sp->dir, "spool.directory", true, why, sizeof(why));
	if (sp->dirfd < 0) {
		/* @why says it all, with the error text where there is one. */
		fx_err("%s", why);
		rc = sp->dirfd;
		sp->dirfd = -1;
		goto fail;
	}
	rc = open_subdir(sp, REJECTED_DIR, &sp->rejfd);
	if (rc == 0)
		rc = open_subdir(sp, INCOMING_DIR, &sp->incfd);
	if (rc < 0)
		goto fail;
	settle_incoming(sp);
	rc = scan(sp);
	if (rc < 0)
		goto fail;
	if (sp->n)
		qsort(sp->e, sp->n, sizeof(*sp->e), entry_cmp);
	/* A chunk bigger than the whole spool is dropped alone, not with the
	 * older chunks that would be dropped to make room for it. */
	for (size_t i = 0; sp->max_bytes && i < sp->n;) {
		if (sp->e[i].size > sp->max_bytes)
			drop_at(sp, i, &big);
		else
			i++;
	}
	enforce(sp, &aged, &full);
	log_drops(sp, &aged, &big, &full);
	if (aged.n || big.n || full.n)
		fsync(sp->dirfd);
	trim_rejected(sp);
	*out = sp;
	return 0;
fail:
	fx_spool_free(sp);
	return rc;
}

void fx_spool_free(struct fx_spool *sp)
{
	if (!sp)
		return;
	if (sp->rejfd >= 0)
		close(sp->rejfd);
	if (sp->incfd >= 0)
		close(sp->incfd);
	if (sp->dirfd >= 0)
		close(sp->dirfd);
	pthread_mutex_destroy(&sp->lock);
	free(sp->e);
	free(sp->dir);
	free(sp);
}

/* Fills @buf from getrandom(2); false when it is not available. */
static bool random_bytes(uint8_t *buf, size_t len)
{
	size_t got = 0;

	while (got < len) {
		ssize_t r = getrandom(buf + got, len - got, 0);

		if (r < 0) {
			if (errno == EINTR)
				continue;
			return false;
		}
		got += (size_t)r;
	}
	return true;
}

void fx_spool_new_id(struct fx_chunk_info *info)
{
	static const char hex[] = "0123456789abcdef";
	uint8_t b[FX_CHUNK_ID_LEN / 2];

	if (!random_bytes(b, sizeof(b))) {
		/* No getrandom (seccomp, old kernel): an id must be unique more
		 * than unpredictable; time, process and thread make it so. */
		struct timespec rt, mono;
		uint64_t x, y;

		clock_gettime(CLOCK_REALTIME, &rt);
		clock_gettime(CLOCK_MONOTONIC, &mono);
		x = fx_mix64(((uint64_t)rt.tv_sec * 1000000000u + (uint64_t)rt.tv_nsec) ^
			     ((uint64_t)getpid() << 40));
		y = fx_mix64(((uint64_t)mono.tv_sec * 1000000000u + (uint64_t)mono.tv_nsec) ^
			     ((uint64_t)gettid() << 40));
		memcpy(b, &x, sizeof(x));
		memcpy(b + sizeof(x), &y, sizeof(y));
	}
	for (size_t i = 0; i < sizeof(b); i++) {
		info->id[2 * i] = hex[b[i] >> 4];
		info->id[2 * i + 1] = hex[b[i] & 15];
	}
	info->id[FX_CHUNK_ID_LEN] = '\0';
}

int fx_spool_path(const struct fx_spool *sp, const struct fx_chunk_info *info, char *out,
		  size_t len)
{
	char name[NAME_LEN_MAX + 1];
	int n;

	if (!sp || !info || !out || format_name(info, name) < 0)
		return -EINVAL;
	n = snprintf(out, len, "%s/" INCOMING_DIR "/%s", sp->dir, name);
	if (n < 0 || (size_t)n >= len)
		return -ENAMETOOLONG;
	return 0;
}

int fx_spool_add(struct fx_spool *sp, const struct fx_chunk_info *info)
{
	struct drops aged = { 0 }, big = { 0 }, full = { 0 };
	char name[NAME_LEN_MAX + 1];
	struct entry en;
	size_t pos;
	int rc;

	if (!sp || !info || format_name(info, name) < 0) {
		fx_err("cannot add a chunk to the spool: invalid name fields");
		return -EINVAL;
	}
	/* The parsed copy is clean (nothing after the strings' ends). */
	fx_spool_parse_name(name, &en.info);
	rc = regular_size(sp->incfd, name, &en.size);
	if (rc < 0)
		return fx_log_errno(FX_LOG_ERR, -rc,
				    "cannot add '%s/" INCOMING_DIR "/%s' to the spool", sp->dir,
				    name);

	pthread_mutex_lock(&sp->lock);
	pos = find(sp, &en.info);
	if (pos != SIZE_MAX) {
		/* Added again (rewritten): replaced, not counted twice. */
		remove_at(sp, pos);
		sp->st.added--;
	}
	sp->st.added++;
	if (sp->max_bytes && en.size > sp->max_bytes) {
		sp->st.dropped++;
		sp->st.dropped_bytes += en.size;
		unlink_counted(sp->incfd, &en, &big);
	} else {
		/* Room first, then the move: the spool never holds more than
		 * max_bytes, not even for a moment. */
		while (sp->max_bytes && sp->n && sp->st.bytes + en.size > sp->max_bytes)
			drop_at(sp, sp->first, &full);
		if (renameat(sp->incfd, name, sp->dirfd, name) < 0)
			rc = -errno;
		else
			rc = insert_at(sp, lower_bound(sp, &en.info), &en);
		if (rc < 0) {
			/* Left on disk: the next start finds it. */
			sp->st.added--;
			rc = fx_log_errno(FX_LOG_ERR, -rc, "cannot add '%s/%s' to the spool",
					  sp->dir, name);
		}
	}
	enforce(sp, &aged, &full);
	log_drops(sp, &aged, &big, &full);
	pthread_mutex_unlock(&sp->lock);
	if (aged.n || big.n || full.n)
		fsync(sp->dirfd);
	return rc;
}

int fx_spool_peek(struct fx_spool *sp, struct fx_chunk_info *info, char *path, size_t len)
{
	struct fx_chunk_info head;
	int rc;

	if (!sp)
		return -EINVAL;
	pthread_mutex_lock(&sp->lock);
	if (!sp->n) {
		pthread_mutex_unlock(&sp->lock);
		return 0;
	}
	head = sp->e[sp->first].info;
	pthread_mutex_unlock(&sp->lock);
	if (path) {
		char name[NAME_LEN_MAX + 1];

		rc = format_name(&head, name);
		if (rc == 0 && snprintf(path, len, "%s/%s", sp->dir, name) >= (int)len)
			rc = -ENAMETOOLONG;
		if (rc < 0)
			return rc;
	}
	if (info)
		*info = head;
	return 1;
}

/* The pending chunk @info: its file name into @name and its index into *@i,
 * with the spool locked. Returns 0 (locked), -EINVAL or -ENOENT (unlocked). */
static int lock_pending(struct fx_spool *sp, const struct fx_chunk_info *info,
			char name[NAME_LEN_MAX + 1], size_t *i)
{
	if (!sp || !info || format_name(info, name) < 0)
		return -EINVAL;
	pthread_mutex_lock(&sp->lock);
	*i = find(sp, info);
	if (*i == SIZE_MAX) {
		pthread_mutex_unlock(&sp->lock);
		return -ENOENT;
	}
	return 0;
}

int fx_spool_done(struct fx_spool *sp, const struct fx_chunk_info *info)
{
	char name[NAME_LEN_MAX + 1];
	size_t i;
	int rc = lock_pending(sp, info, name, &i);

	if (rc < 0)
		return rc;
	/* Forgotten even when the unlink fails, or it would be sent forever. */
	if (unlinkat(sp->dirfd, name, 0) < 0 && errno != ENOENT)
		rc = fx_log_errno(FX_LOG_ERR, errno, "cannot delete the sent chunk '%s/%s'",
				  sp->dir, name);
	remove_at(sp, i);
	sp->st.uploaded++;
	pthread_mutex_unlock(&sp->lock);
	fsync(sp->dirfd);
	return rc;
}

/* Moves the pending chunk @info to rejected/. When it cannot be moved, a
 * chunk the collector refused is deleted (it must not be sent again); a file
 * that failed our own checks is left alone (it may not be ours to delete).
 * Either way it is no longer pending. */
static int move_to_rejected(struct fx_spool *sp, const struct fx_chunk_info *info,
			    bool delete_on_fail)
{
	char name[NAME_LEN_MAX + 1];
	size_t i;
	int rc = lock_pending(sp, info, name, &i);

	if (rc < 0)
		return rc;
	/* renameat moves a symlink itself, never what it points to. */
	if (renameat(sp->dirfd, name, sp->rejfd, name) < 0) {
		rc = fx_log_errno(FX_LOG_ERR, errno,
				  "cannot move the rejected chunk '%s/%s' to " REJECTED_DIR "/, %s",
				  sp->dir, name,
				  delete_on_fail ? "deleting it" : "leaving it alone");
		if (delete_on_fail)
			unlinkat(sp->dirfd, name, 0);
	}
	remove_at(sp, i);
	sp->st.rejected++;
	trim_rejected(sp);
	pthread_mutex_unlock(&sp->lock);
	fsync(sp->rejfd);
	fsync(sp->dirfd);
	return rc;
}

int fx_spool_reject(struct fx_spool *sp, const struct fx_chunk_info *info)
{
	return move_to_rejected(sp, info, true);
}

int fx_spool_open_chunk(struct fx_spool *sp, const struct fx_chunk_info *info, uint64_t *size,
			char *why, size_t whylen)
{
	const struct fx_trust_rules rules = { .nofollow = true,
					      .own = true,
					      .max_size = FX_CHUNK_MAX_BYTES };
	char name[NAME_LEN_MAX + 1];
	struct stat st;
	int fd, rc;

	if (!sp || !info || format_name(info, name) < 0) {
		snprintf(why, whylen, "invalid chunk name fields");
		return -EINVAL;
	}
	fd = fx_trust_open(sp->dirfd, name, "spool file", &rules, &st, why, whylen);
	if (fd < 0)
		return fd == -ENOENT ? -ENOENT : -EBADMSG;
	rc = fx_chunk_check_fd(fd, (uint64_t)st.st_size, why, whylen);
	if (rc < 0) {
		char what[256];

		snprintf(what, sizeof(what), "%s", why);
		snprintf(why, whylen, "spool file '%s' is not a chunk: %s", name, what);
		close(fd);
		return rc == -ENOMEM ? rc : -EBADMSG;
	}
	*size = (uint64_t)st.st_size;
	return fd;
}

int fx_spool_quarantine(struct fx_spool *sp, const struct fx_chunk_info *info, const char *why)
{
	fx_log_fields(FX_LOG_ERR, info->target, info->id,
		      "not sending chunk %s (target %s), moving it to the spool's " REJECTED_DIR
		      "/: %s",
		      info->id, info->target, why);
	return move_to_rejected(sp, info, false);
}

void fx_spool_get_stats(struct fx_spool *sp, struct fx_spool_stats *out)
{
	pthread_mutex_lock(&sp->lock);
	*out = sp->st;
	out->pending = sp->n;
	pthread_mutex_unlock(&sp->lock);
}

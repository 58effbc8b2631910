/* SPDX-License-Identifier: MIT */
/* source: where `fxagent view` finds chunks. This file picks the kind from
 * the spec, sorts what a kind lists, and holds the path kind: a directory
 * walked with openat() relative to each directory's fd, or one file. The
 * HTTP kind is in source_http.c.
 *
 * The tree is the user's, not the agent's: files are not required to be
 * anyone's in particular, but each is opened non-blocking and must end at a
 * regular file within FX_SOURCE_MAX_BYTES (fx_trust_open). Symlinked
 * directories are not entered, so the walk has no loops; a symlinked chunk
 * file is followed.
 */
#include "source_int.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fxagent/log.h"
#include "fxagent/trust.h"
#include "fxagent/util.h"

struct src_path {
	struct fx_source base; /* first: the container is the same pointer */
	char *path;
	bool dir;
};

/* ---- shared by the kinds ---- */

static bool ends_with(const char *s, const char *suffix)
{
	size_t n = strlen(s), k = strlen(suffix);

	return n >= k && !memcmp(s + n - k, suffix, k);
}

bool src_is_chunk_name(const char *name)
{
	if (name[0] == '.' || strstr(name, ".tmp"))
		return false;
	return ends_with(name, ".json.gz") || ends_with(name, ".json");
}

bool src_is_skipped_dir(const char *name)
{
	return name[0] == '.' || !strcmp(name, "rejected");
}

int src_list_visit(struct src_list *l)
{
	if (++l->seen > SRC_MAX_ENTRIES) {
		fx_err("view: '%s' has more than %u files and directories, the most one view lists",
		       l->top, SRC_MAX_ENTRIES);
		return -EFBIG;
	}
	return 0;
}

int src_list_add(struct src_list *l, char *name, int64_t size)
{
	if (!name || fx_grow(&l->items, &l->cap, l->n + 1, sizeof(*l->items))) {
		free(name);
		fx_err("view: out of memory listing '%s'", l->top);
		return -ENOMEM;
	}
	l->items[l->n++] = (struct fx_source_item){ .name = name, .size = size };
	return 0;
}

/* ---- the path kind ---- */

/* @dir/@name in a new string, one '/' between them; NULL without memory. */
static char *join(const char *dir, const char *name)
{
	size_t n = strlen(dir), k = strlen(name);
	bool slash = n && dir[n - 1] == '/';
	char *p = malloc(n + k + 2);

	if (p)
		snprintf(p, n + k + 2, "%s%s%s", dir, slash ? "" : "/", name);
	return p;
}

static unsigned char dtype_of(mode_t m)
{
	if (S_ISDIR(m))
		return DT_DIR;
	if (S_ISLNK(m))
		return DT_LNK;
	return S_ISREG(m) ? DT_REG : DT_UNKNOWN;
}

static int walk(int dfd, const char *path, unsigned depth, struct src_list *l);

/* The subdirectory @name of @d (at @path): entered, or logged and skipped.
 * Recursion bounded by SRC_MAX_DEPTH, one fd a level. NOLINTNEXTLINE(misc-no-recursion) */
static int enter(DIR *d, const char *path, const char *name, unsigned depth, struct src_list *l)
{
	char *sub = join(path, name);
	int fd, ret = 0;

	if (!sub)
		return src_list_add(l, NULL, 0); /* says out of memory */
	if (depth >= SRC_MAX_DEPTH) {
		fx_warn("view: '%s' is more than %u directories deep, ignoring it", sub,
			SRC_MAX_DEPTH);
		goto out;
	}
	/* O_NOFOLLOW: it was a directory when listed, a symlink now is a swap. */
	fd = openat(dirfd(d), name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0) {
		fx_log_errno(FX_LOG_WARN, errno, "cannot list '%s', ignoring it", sub);
		goto out;
	}
	ret = walk(fd, sub, depth + 1, l);
out:
	free(sub);
	return ret;
}

/* Lists the directory open at @dfd (taken) into @l. Returns 0, or -ENOMEM or
 * -EFBIG (logged); a directory that cannot be read is logged and skipped.
 * Recursion bounded by SRC_MAX_DEPTH. NOLINTNEXTLINE(misc-no-recursion) */
static int walk(int dfd, const char *path, unsigned depth, struct src_list *l)
{
	struct dirent *de;
	struct stat st;
	int ret = 0;
	DIR *d;

	d = fdopendir(dfd);
	if (!d) {
		ret = errno;
		close(dfd);
		fx_log_errno(FX_LOG_WARN, ret, "cannot list '%s', ignoring it", path);
		return 0;
	}
	for (;;) {
		unsigned char type;
		int64_t size = -1;

		errno = 0;
		de = readdir(d);
		if (!de) {
			if (errno)
				fx_log_errno(FX_LOG_WARN, errno,
					     "cannot list all of '%s', ignoring the rest", path);
			break;
		}
		if (de->d_name[0] == '.')
			continue; /* ".", ".." and dot-files */
		ret = src_list_visit(l);
		if (ret)
			break;
		type = de->d_type;
		if (type == DT_UNKNOWN && !fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW))
			type = dtype_of(st.st_mode);
		if (type == DT_DIR) {
			if (src_is_skipped_dir(de->d_name))
				continue;
			ret = enter(d, path, de->d_name, depth, l);
			if (ret)
				break;
			continue;
		}
		if (!src_is_chunk_name(de->d_name))
			continue;
		/* A symlink is followed for its size; to a directory, it is not
		 * entered. What is no regular file is listed all the same: reading
		 * it says what it is. */
		if (!fstatat(dirfd(d), de->d_name, &st, 0)) {
			if (S_ISDIR(st.st_mode))
				continue;
			if (S_ISREG(st.st_mode))
				size = st.st_size;
		}
		ret = src_list_add(l, join(path, de->d_name), size);
		if (ret)
			break;
	}
	closedir(d);
	return ret;
}

static int path_list(struct fx_source *s, struct src_list *l)
{
	struct src_path *p = (struct src_path *)s;
	int64_t size = -1;
	struct stat st;
	int fd;

	if (!p->dir) {
		if (!stat(p->path, &st) && S_ISREG(st.st_mode))
			size = st.st_size;
		return src_list_add(l, strdup(p->path), size);
	}
	fd = open(p->path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return fx_log_errno(FX_LOG_ERR, errno, "view: cannot list '%s'", p->path);
	return walk(fd, p->path, 0, l);
}

/* Reads the chunk file @path whole into *data (malloc'd), *len bytes. */
static int read_file(const char *path, char **data, size_t *len)
{
	const struct fx_trust_rules rules = { .max_size = FX_SOURCE_MAX_BYTES };
	char why[PATH_MAX + 128];
	size_t off = 0, size;
	struct stat st;
	ssize_t n;
	char *buf;
	int fd, ret = 0;

	fd = fx_trust_open(AT_FDCWD, path, "chunk", &rules, &st, why, sizeof(why));
	if (fd < 0) {
		fx_err("%s", why);
		return fd;
	}
	size = (size_t)st.st_size;
	buf = malloc(size ? size : 1);
	if (!buf) {
		fx_err("view: out of memory reading chunk '%s' (%zu bytes)", path, size);
		ret = -ENOMEM;
		goto out;
	}
	/* A file that shrank is read to its end; one that grew, to its size. */
	while (off < size) {
		n = read(fd, buf + off, size - off);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			ret = fx_log_errno(FX_LOG_ERR, errno, "cannot read chunk '%s'", path);
			free(buf);
			goto out;
		}
		if (!n)
			break;
		off += (size_t)n;
	}
	*data = buf;
	*len = off;
out:
	close(fd);
	return ret;
}

static int path_read_each(struct fx_source *s, const struct fx_source_item *items, size_t n,
			  fx_source_read_fn cb, void *arg)
{
	size_t i, len = 0;
	char *data = NULL;
	int ret, err;

	(void)s;
	for (i = 0; i < n; i++) {
		err = read_file(items[i].name, &data, &len);
		ret = cb(arg, i, &items[i], err ? NULL : data, err ? 0 : len, err);
		if (!err)
			free(data);
		data = NULL;
		if (ret)
			return ret;
	}
	return 0;
}

static void path_free(struct fx_source *s)
{
	struct src_path *p = (struct src_path *)s;

	free(p->path);
	free(p);
}

static int path_open(const char *spec, const struct fx_source_opts *o, struct fx_source **out);

static const struct src_ops src_path_ops = {
	.open = path_open,
	.list = path_list,
	.read_each = path_read_each,
	.free = path_free,
};

/* The user named the path: a symlink to the top directory is followed. */
static int path_open(const char *spec, const struct fx_source_opts *o, struct fx_source **out)
{
	struct src_path *p;
	struct stat st;

	(void)o;
	if (stat(spec, &st))
		return fx_log_errno(FX_LOG_ERR, errno, "view: cannot read '%s'", spec);
	if (!S_ISDIR(st.st_mode) && !S_ISREG(st.st_mode)) {
		fx_err("view: cannot read '%s': it is %s, not a directory or a file", spec,
		       fx_trust_kind(st.st_mode));
		return -EINVAL;
	}
	p = calloc(1, sizeof(*p));
	if (p)
		p->path = strdup(spec);
	if (!p || !p->path) {
		free(p);
		fx_err("view: out of memory");
		return -ENOMEM;
	}
	p->base.ops = &src_path_ops;
	p->base.name = p->path;
	p->dir = S_ISDIR(st.st_mode);
	*out = &p->base;
	return 0;
}

/* ---- the interface ---- */

/* The length of @spec's "scheme" in "scheme://...", or 0 (RFC 3986: a
 * letter, then letters, digits, '+', '-', '.'). */
static size_t scheme_len(const char *spec)
{
	size_t i;

	if (!((spec[0] >= 'a' && spec[0] <= 'z') || (spec[0] >= 'A' && spec[0] <= 'Z')))
		return 0;
	for (i = 1; spec[i]; i++) {
		char c = spec[i];

		if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		    c == '+' || c == '-' || c == '.')
			continue;
		return c == ':' && !strncmp(spec + i, "://", 3) ? i : 0;
	}
	return 0;
}

int fx_source_open(const char *spec, const struct fx_source_opts *opts, struct fx_source **out)
{
	static const struct fx_source_opts none;
	size_t k = scheme_len(spec);

	if (!opts)
		opts = &none;
	if (!k)
		return src_path_ops.open(spec, opts, out);
	if ((k == 4 && !strncasecmp(spec, "http", 4)) || (k == 5 && !strncasecmp(spec, "https", 5)))
		return src_http_ops.open(spec, opts, out);
	if (k == 2 && !strncasecmp(spec, "s3", 2))
		return src_s3_ops.open(spec, opts, out);
	fx_err("view: cannot read '%s': unknown scheme '%.*s' (known: http, https, s3, a directory "
	       "or a file)",
	       spec, (int)k, spec);
	return -EINVAL;
}

static int by_name(const void *a, const void *b)
{
	const struct fx_source_item *x = a, *y = b;

	return strcmp(x->name, y->name);
}

int fx_source_list(struct fx_source *s, struct fx_source_item **items, size_t *n)
{
	struct src_list l = { 0 };
	int ret;

	l.top = s->name;
	ret = s->ops->list(s, &l);
	if (ret) {
		fx_source_items_free(l.items, l.n);
		return ret;
	}
	if (l.n)
		qsort(l.items, l.n, sizeof(*l.items), by_name);
	*items = l.items;
	*n = l.n;
	return 0;
}

void fx_source_items_free(struct fx_source_item *items, size_t n)
{
	size_t i;

	for (i = 0; items && i < n; i++)
		free(items[i].name);
	free(items);
}

int fx_source_read_each(struct fx_source *s, const struct fx_source_item *items, size_t n,
			fx_source_read_fn cb, void *arg)
{
	return s->ops->read_each(s, items, n, cb, arg);
}

void fx_source_free(struct fx_source *s)
{
	if (s)
		s->ops->free(s);
}

/* SPDX-License-Identifier: MIT */
/* cgroup v2 discovery and target resolution (see include/fxagent/cgroup.h). */
#include "fxagent/cgroup.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fxagent/log.h"
#include "fxagent/util.h"

/* /proc/PID/cgroup has one short line per hierarchy; anything bigger is not it. */
#define PID_CGROUP_MAX 65536

static int copy_out(const char *s, char *out, size_t len)
{
	size_t n = strlen(s);

	if (n >= len)
		return -ENAMETOOLONG;
	memcpy(out, s, n + 1);
	return 0;
}

/* @mount + @rel ("/" or "/a/b") into @buf. */
static int join(char *buf, size_t len, const char *mount, const char *rel)
{
	int n;

	if (strcmp(rel, "/") == 0)
		rel = "";
	n = snprintf(buf, len, "%s%s", mount, rel);
	if (n < 0 || (size_t)n >= len)
		return -ENAMETOOLONG;
	return 0;
}

/* Undoes the \ooo escapes of mountinfo fields (space, tab, newline, backslash), in place. */
static void unescape_octal(char *s)
{
	char *w = s;

	while (*s) {
		if (s[0] == '\\' && s[1] >= '0' && s[1] <= '3' && s[2] >= '0' && s[2] <= '7' &&
		    s[3] >= '0' && s[3] <= '7') {
			*w++ = (char)((s[1] - '0') << 6 | (s[2] - '0') << 3 | (s[3] - '0'));
			s += 4;
		} else {
			*w++ = *s++;
		}
	}
	*w = '\0';
}

/* Lower is better; -1 for a line that is not a cgroup2 mount. */
static int mount_rank(char *line, char **mount_point)
{
	char *save = NULL, *tok, *root = NULL, *mp = NULL;
	bool sep = false;
	int i = 0;

	for (tok = strtok_r(line, " \n", &save); tok; tok = strtok_r(NULL, " \n", &save), i++) {
		if (i == 3)
			root = tok;
		else if (i == 4)
			mp = tok;
		else if (i > 5 && !sep && strcmp(tok, "-") == 0)
			sep = true;
		else if (sep)
			break; /* the file system type, first field after " - " */
	}
	if (!tok || !root || !mp || strcmp(tok, "cgroup2") != 0)
		return -1;
	unescape_octal(root);
	unescape_octal(mp);
	*mount_point = mp;
	if (strcmp(root, "/") != 0)
		return 3; /* a bind mount of a subtree: its paths are not /proc/PID/cgroup's */
	if (strcmp(mp, "/sys/fs/cgroup") == 0)
		return 0;
	if (strcmp(mp, "/sys/fs/cgroup/unified") == 0)
		return 1;
	return 2;
}

int fx_cgroup_find_mount(const char *mountinfo_path, char *out, size_t len)
{
	char *line = NULL, *best = NULL, *mp;
	size_t cap = 0;
	int best_rank = INT_MAX, rank, ret;
	FILE *f;

	f = fopen(mountinfo_path, "re");
	if (!f)
		return fx_log_errno(FX_LOG_ERR, errno, "cannot read '%s'", mountinfo_path);
	while (getline(&line, &cap, f) > 0) {
		rank = mount_rank(line, &mp);
		if (rank < 0 || rank >= best_rank)
			continue;
		free(best);
		best = strdup(mp);
		if (!best) {
			ret = -ENOMEM;
			goto out;
		}
		best_rank = rank;
	}
	if (!best) {
		fx_err("no cgroup2 file system is mounted (by '%s'): cgroup and systemd_unit "
		       "targets need cgroup v2; boot with systemd.unified_cgroup_hierarchy=1 "
		       "or mount one with 'mount -t cgroup2 none /sys/fs/cgroup/unified'",
		       mountinfo_path);
		ret = -ENOENT;
		goto out;
	}
	ret = copy_out(best, out, len);
	if (ret == 0)
		fx_debug("cgroup2 is mounted at '%s'", best);
out:
	free(best);
	free(line);
	fclose(f);
	return ret;
}

/* 0 for a directory, -ENOENT, -ENOTDIR or another -errno. */
static int stat_dir(const char *mount, const char *rel, struct stat *st)
{
	char full[PATH_MAX];
	int ret;

	ret = join(full, sizeof(full), mount, rel);
	if (ret)
		return ret;
	/* cgroupfs has no symbolic links: one in a tree is not a cgroup of that name. */
	if (strcmp(rel, "/") == 0 ? stat(full, st) : lstat(full, st))
		return -errno;
	return S_ISDIR(st->st_mode) ? 0 : -ENOTDIR;
}

/* Normalizes an absolute path with no "." or ".." component; -EINVAL otherwise. */
static int normalize(const char *path, char *out, size_t len)
{
	const char *p = path, *end;
	size_t n = 0, clen;

	if (path[0] != '/')
		return -EINVAL;
	while (*p) {
		while (*p == '/')
			p++;
		if (!*p)
			break;
		end = strchrnul(p, '/');
		clen = (size_t)(end - p);
		if ((clen == 1 && p[0] == '.') || (clen == 2 && p[0] == '.' && p[1] == '.'))
			return -EINVAL;
		if (n + 1 + clen >= len)
			return -ENAMETOOLONG;
		out[n++] = '/';
		memcpy(out + n, p, clen);
		n += clen;
		p = end;
	}
	if (n == 0) {
		if (len < 2)
			return -ENAMETOOLONG;
		out[n++] = '/';
	}
	out[n] = '\0';
	return 0;
}

int fx_cgroup_resolve_path(const char *mount, const char *path, char *out, size_t len)
{
	char norm[PATH_MAX];
	size_t mlen = strlen(mount);
	struct stat st;
	int ret;

	ret = normalize(path, norm, sizeof(norm));
	if (ret == -EINVAL) {
		fx_err("invalid cgroup '%s': expected an absolute path below the cgroup2 mount "
		       "without '.' or '..', like /system.slice/foo.service",
		       path);
		return -EINVAL;
	}
	if (ret)
		return fx_log_errno(FX_LOG_ERR, -ret, "cannot resolve cgroup '%.200s...'", path);
	ret = stat_dir(mount, norm, &st);
	if (ret == -ENOENT && mlen > 1 && strncmp(norm, mount, mlen) == 0 && norm[mlen] == '/' &&
	    stat_dir(mount, norm + mlen, &st) == 0) {
		fx_err("invalid cgroup '%s': give the path below the cgroup2 mount '%s', "
		       "that is '%s'",
		       path, mount, norm + mlen);
		return -EINVAL;
	}
	if (ret == -ENOENT) {
		fx_debug("no cgroup '%s' below '%s'", norm, mount);
		return ret;
	}
	if (ret)
		return fx_log_errno(FX_LOG_ERR, -ret, "cannot use cgroup '%s' below '%s'", norm,
				    mount);
	ret = copy_out(norm, out, len);
	if (ret)
		return fx_log_errno(FX_LOG_ERR, -ret, "cannot resolve cgroup '%s'", norm);
	return 0;
}

static bool has_suffix(const char *s, const char *suffix)
{
	size_t n = strlen(s), m = strlen(suffix);

	return n >= m && strcmp(s + n - m, suffix) == 0;
}

/* Unit types whose processes run in a cgroup of the unit's name. */
static const char *const cgroup_types[] = { ".service", ".scope", ".slice",
					    ".socket",	".mount", ".swap" };
static const char *const other_types[] = { ".target", ".device", ".timer", ".path", ".automount" };

/* Checks @unit and writes it to @out with ".service" added when it has no type. */
static int unit_name(const char *unit, char *out, size_t len)
{
	const char *dot = strrchr(unit, '.');
	size_t i;
	int n;

	if (!unit[0] || strchr(unit, '/') || unit[0] == '.') {
		fx_err("invalid systemd unit '%s': expected a unit name like nginx.service", unit);
		return -EINVAL;
	}
	for (i = 0; dot && i < sizeof(other_types) / sizeof(other_types[0]); i++)
		if (strcmp(dot, other_types[i]) == 0) {
			fx_err("invalid systemd unit '%s': %s units have no cgroup; name the "
			       ".service, .scope or .slice whose processes to profile",
			       unit, other_types[i]);
			return -EINVAL;
		}
	for (i = 0; dot && i < sizeof(cgroup_types) / sizeof(cgroup_types[0]); i++)
		if (strcmp(dot, cgroup_types[i]) == 0)
			break;
	if (dot && i < sizeof(cgroup_types) / sizeof(cgroup_types[0]))
		n = snprintf(out, len, "%s", unit);
	else
		n = snprintf(out, len, "%s.service", unit);
	if (n < 0 || (size_t)n >= len)
		return fx_log_errno(FX_LOG_ERR, ENAMETOOLONG, "invalid systemd unit '%.100s...'",
				    unit);
	return 0;
}

/* Appends @s to @buf (holding @*n bytes); false when it does not fit. */
static bool append(char *buf, size_t len, size_t *n, const char *s, size_t slen)
{
	if (*n + slen >= len)
		return false;
	memcpy(buf + *n, s, slen);
	*n += slen;
	buf[*n] = '\0';
	return true;
}

/* Where systemd puts @unit by default; false when there is no such place. */
static bool standard_place(const char *unit, char *out, size_t len)
{
	const char *at = strchr(unit, '@'), *p, *inst;
	char esc[8];
	size_t n = 0;
	int k;

	out[0] = '\0';
	if (strcmp(unit, "-.slice") == 0)
		return append(out, len, &n, "/", 1);
	if (has_suffix(unit, ".slice")) {
		/* foo-bar.slice lives in foo.slice; a '-' at either end or doubled is invalid. */
		size_t plen = strlen(unit) - strlen(".slice");

		/* unit_name() filled @unit or failed, but the analyzer takes
		 * fx_log_errno() (variadic, in log.c) for a possible 0.
		 * NOLINTNEXTLINE(clang-analyzer-core.UndefinedBinaryOperatorResult) */
		if (unit[0] == '-' || unit[plen - 1] == '-' || strstr(unit, "--"))
			return false;
		for (p = unit; (p = strchr(p, '-')) && (size_t)(p - unit) < plen; p++)
			if (!append(out, len, &n, "/", 1) ||
			    !append(out, len, &n, unit, (size_t)(p - unit)) ||
			    !append(out, len, &n, ".slice", 6))
				return false;
		return append(out, len, &n, "/", 1) && append(out, len, &n, unit, strlen(unit));
	}
	if (at && has_suffix(unit, ".service")) {
		inst = at + 1;
		if ((size_t)(at - unit) == 4 && strncmp(unit, "user", 4) == 0 && *inst >= '0' &&
		    *inst <= '9') {
			size_t ilen = strspn(inst, "0123456789");

			if (strcmp(inst + ilen, ".service") != 0)
				return false;
			return append(out, len, &n, "/user.slice/user-", 17) &&
			       append(out, len, &n, inst, ilen) &&
			       append(out, len, &n, ".slice/", 7) &&
			       append(out, len, &n, unit, strlen(unit));
		}
		/* Instances go to system-<template>.slice, '-' and '\' in the name as \xNN. */
		if (!append(out, len, &n, "/system.slice/system-", 21))
			return false;
		for (p = unit; p < at; p++) {
			/* As above: @unit is whole when unit_name() succeeded.
			 * NOLINTNEXTLINE(clang-analyzer-core.UndefinedBinaryOperatorResult) */
			if (*p == '-' || *p == '\\') {
				k = snprintf(esc, sizeof(esc), "\\x%02x", (unsigned char)*p);
				if (!append(out, len, &n, esc, (size_t)k))
					return false;
			} else if (!append(out, len, &n, p, 1)) {
				return false;
			}
		}
		return append(out, len, &n, ".slice/", 7) &&
		       append(out, len, &n, unit, strlen(unit));
	}
	return append(out, len, &n, "/system.slice/", 14) &&
	       append(out, len, &n, unit, strlen(unit));
}

/* The breadth-first queue: each entry is a name and its parent's index, so
 * memory grows with names, not with whole paths. */
struct bfs_node {
	size_t parent;
	size_t name; /* offset into names */
	unsigned depth;
};

struct bfs {
	struct bfs_node *nodes;
	size_t n, cap;
	char *names;
	size_t names_len, names_cap;
};

static int bfs_push(struct bfs *b, size_t parent, const char *name, unsigned depth)
{
	size_t nlen = strlen(name) + 1;
	int ret;

	ret = fx_grow(&b->nodes, &b->cap, b->n + 1, sizeof(*b->nodes));
	if (ret)
		return ret;
	ret = fx_grow(&b->names, &b->names_cap, b->names_len + nlen, 1);
	if (ret)
		return ret;
	memcpy(b->names + b->names_len, name, nlen);
	b->nodes[b->n].parent = parent;
	b->nodes[b->n].name = b->names_len;
	b->nodes[b->n].depth = depth;
	b->names_len += nlen;
	b->n++;
	return 0;
}

/* The path of node @i relative to the mount ("" for the root), plus "/@leaf" if given. */
static int bfs_path(const struct bfs *b, size_t i, const char *leaf, char *out, size_t len)
{
	size_t chain[FX_CGROUP_SEARCH_DEPTH + 1], depth = 0, n = 0;
	const char *name;

	for (; i != 0 && depth < FX_CGROUP_SEARCH_DEPTH + 1; i = b->nodes[i].parent)
		chain[depth++] = i;
	out[0] = '\0';
	while (depth > 0) {
		name = b->names + b->nodes[chain[--depth]].name;
		if (!append(out, len, &n, "/", 1) || !append(out, len, &n, name, strlen(name)))
			return -ENAMETOOLONG;
	}
	if (leaf && (!append(out, len, &n, "/", 1) || !append(out, len, &n, leaf, strlen(leaf))))
		return -ENAMETOOLONG;
	return 0;
}

static bool is_dir_entry(DIR *d, const struct dirent *de)
{
	struct stat st;

	if (de->d_type == DT_DIR)
		return true;
	if (de->d_type != DT_UNKNOWN)
		return false;
	return fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode);
}

/* Breadth-first search below @mount for a directory named @unit. Returns 0
 * with the shallowest match (smallest by strcmp among equals) in @out,
 * -ENOENT or -errno. */
static int search(const char *mount, const char *unit, char *out, size_t len)
{
	char rel[PATH_MAX], full[PATH_MAX], cand[PATH_MAX];
	struct bfs b = { 0 };
	unsigned match_depth = 0, depth;
	size_t head, seen = 0;
	struct dirent *de;
	bool full_stop = false;
	DIR *d;
	int fd, ret;

	out[0] = '\0';
	ret = bfs_push(&b, 0, "", 0);
	for (head = 0; ret == 0 && head < b.n && !full_stop; head++) {
		depth = b.nodes[head].depth;
		if (match_depth && depth + 1 > match_depth)
			break; /* every match at the shallowest depth is known */
		if (bfs_path(&b, head, NULL, rel, sizeof(rel)) ||
		    join(full, sizeof(full), mount, rel))
			continue;
		fd = open(full, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (fd < 0)
			continue; /* removed meanwhile, or not readable: not where the unit is */
		d = fdopendir(fd);
		if (!d) {
			close(fd);
			continue;
		}
		while (ret == 0 && (de = readdir(d))) {
			if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0 ||
			    !is_dir_entry(d, de))
				continue;
			if (++seen > FX_CGROUP_SEARCH_DIRS) {
				fx_debug("unit '%s': search stopped after %d cgroups below '%s'",
					 unit, FX_CGROUP_SEARCH_DIRS, mount);
				full_stop = true;
				break;
			}
			if (strcmp(de->d_name, unit) == 0) {
				if (bfs_path(&b, head, de->d_name, cand, sizeof(cand)) == 0 &&
				    (!out[0] || strcmp(cand, out) < 0) &&
				    copy_out(cand, out, len) == 0)
					match_depth = depth + 1;
				continue;
			}
			if (depth + 1 < FX_CGROUP_SEARCH_DEPTH && !match_depth)
				ret = bfs_push(&b, head, de->d_name, depth + 1);
		}
		closedir(d);
	}
	free(b.nodes);
	free(b.names);
	if (ret)
		return fx_log_errno(FX_LOG_ERR, -ret,
				    "cannot search '%s' for the cgroup of unit '%s'", mount, unit);
	return out[0] ? 0 : -ENOENT;
}

int fx_cgroup_resolve_unit(const char *mount, const char *unit, char *out, size_t len)
{
	char name[NAME_MAX + 1], path[PATH_MAX];
	struct stat st;
	int ret;

	ret = unit_name(unit, name, sizeof(name));
	if (ret)
		return ret;
	if (!standard_place(name, path, sizeof(path)) || stat_dir(mount, path, &st) != 0) {
		ret = search(mount, name, path, sizeof(path));
		if (ret == -ENOENT) {
			fx_debug("unit '%s': no cgroup of that name below '%s'", name, mount);
			return ret;
		}
		if (ret)
			return ret;
	}
	ret = copy_out(path, out, len);
	if (ret)
		return fx_log_errno(FX_LOG_ERR, -ret, "cannot resolve cgroup '%s' of unit '%s'",
				    path, name);
	fx_debug("unit '%s': cgroup '%s'", name, path);
	return 0;
}

int fx_cgroup_resolve(const char *mount, const struct fx_target *t, char *out, size_t len)
{
	if (!t->value)
		return -EINVAL;
	if (t->kind == FX_TARGET_SYSTEMD_UNIT)
		return fx_cgroup_resolve_unit(mount, t->value, out, len);
	if (t->kind == FX_TARGET_CGROUP)
		return fx_cgroup_resolve_path(mount, t->value, out, len);
	return -EINVAL;
}

int fx_cgroup_open(const char *mount, const char *relpath, int *fd_out, uint64_t *id_out)
{
	char full[PATH_MAX];
	struct stat st;
	int fd, ret;

	ret = join(full, sizeof(full), mount, relpath);
	if (ret)
		return fx_log_errno(FX_LOG_ERR, -ret, "cannot open cgroup '%s'", relpath);
	fd = open(full, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0 && errno == ENOENT) {
		fx_debug("cgroup '%s' is gone before it could be opened", full);
		return -ENOENT;
	}
	if (fd < 0)
		return fx_log_errno(FX_LOG_ERR, errno, "cannot open cgroup '%s'", full);
	if (fstat(fd, &st)) {
		ret = fx_log_errno(FX_LOG_ERR, errno, "cannot examine cgroup '%s'", full);
		close(fd);
		return ret;
	}
	*fd_out = fd;
	*id_out = st.st_ino;
	return 0;
}

int fx_cgroup_id(const char *mount, const char *relpath, uint64_t *id_out)
{
	struct stat st;
	int ret;

	ret = stat_dir(mount, relpath, &st);
	if (ret == -ENOENT)
		return ret;
	if (ret)
		return fx_log_errno(FX_LOG_ERR, -ret, "cannot use cgroup '%s' below '%s'", relpath,
				    mount);
	*id_out = st.st_ino;
	return 0;
}

int fx_cgroup_of_pid(const char *proc_root, uint32_t pid, char *out, size_t len)
{
	char path[PATH_MAX], *buf, *line, *end;
	size_t n = 0;
	ssize_t r = 0;
	int fd, ret;

	ret = snprintf(path, sizeof(path), "%s/%u/cgroup", proc_root, pid);
	if (ret < 0 || (size_t)ret >= sizeof(path))
		return -ENAMETOOLONG;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOENT || errno == ESRCH ? -ESRCH : -errno;
	buf = malloc(PID_CGROUP_MAX + 1);
	if (!buf) {
		close(fd);
		return -ENOMEM;
	}
	while (n < PID_CGROUP_MAX) {
		r = read(fd, buf + n, PID_CGROUP_MAX - n);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		n += (size_t)r;
	}
	ret = r < 0 ? (errno == ESRCH ? -ESRCH : -errno) : -ENOENT;
	close(fd);
	buf[n] = '\0';
	for (line = buf; ret == -ENOENT && line && *line; line = end ? end + 1 : NULL) {
		end = strchr(line, '\n');
		if (strncmp(line, "0::", 3) != 0)
			continue;
		if (!end && n == PID_CGROUP_MAX) {
			ret = -EINVAL; /* cut off by our bound */
			break;
		}
		if (end)
			*end = '\0';
		line += 3;
		if (line[0] != '/')
			ret = -EINVAL;
		else if (has_suffix(line, " (deleted)"))
			ret = -ENOENT;
		else
			ret = copy_out(line, out, len);
		break;
	}
	free(buf);
	if (ret)
		return fx_log_errno(FX_LOG_DEBUG, -ret,
				    "cannot read the cgroup of pid %u from '%s'", pid, path);
	return 0;
}

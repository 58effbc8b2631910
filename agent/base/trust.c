/* SPDX-License-Identifier: MIT */
#include "fxagent/trust.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fxagent/util.h"

const char *fx_trust_kind(mode_t m)
{
	if (S_ISREG(m))
		return "a regular file";
	if (S_ISDIR(m))
		return "a directory";
	if (S_ISFIFO(m))
		return "a FIFO";
	if (S_ISSOCK(m))
		return "a socket";
	if (S_ISCHR(m))
		return "a character device";
	if (S_ISBLK(m))
		return "a block device";
	if (S_ISLNK(m))
		return "a symlink";
	return "of an unknown kind";
}

/* A user's name, or its number when it has none. */
static void user_name(uid_t uid, char *out, size_t len)
{
	char buf[1024];
	struct passwd pw, *pwp = NULL;

	if (getpwuid_r(uid, &pw, buf, sizeof(buf), &pwp) == 0 && pwp)
		snprintf(out, len, "%s", pw.pw_name);
	else
		snprintf(out, len, "%u", (unsigned)uid);
}

/* "root:adm" or "1000:1000" when the names are unknown. */
static void owner_name(const struct stat *st, char *out, size_t len)
{
	char buf[1024], uname[64], gname[64];
	struct group gr, *grp = NULL;

	user_name(st->st_uid, uname, sizeof(uname));
	if (getgrgid_r(st->st_gid, &gr, buf, sizeof(buf), &grp) == 0 && grp)
		snprintf(gname, sizeof(gname), "%s", gr.gr_name);
	else
		snprintf(gname, sizeof(gname), "%u", (unsigned)st->st_gid);
	snprintf(out, len, "%s:%s", uname, gname);
}

/* Checks owner and mode of @st; @path names it in the message. Returns 0 or
 * -EPERM. */
static int check_owner_mode(const struct stat *st, const char *path, const char *what, bool secret,
			    char *err, size_t errlen)
{
	uid_t me = geteuid();
	char owner[160], user[64];
	const char *bad = NULL, *fix = NULL;

	owner_name(st, owner, sizeof(owner));
	if (st->st_uid != me && st->st_uid != 0) {
		user_name(me, user, sizeof(user));
		/* Running as root, only root will do: say it once. */
		snprintf(err, errlen, "%s '%s' is owned by %s, not by %s%s%s; run: chown %s '%s'",
			 what, path, owner, me ? "the agent's user " : "", user,
			 me ? " or root" : "", user, path);
		return -EPERM;
	}
	if (st->st_mode & S_IWOTH) {
		bad = "writable by others";
		fix = secret ? "o-rwx" : "go-w";
	} else if (st->st_mode & S_IWGRP) {
		bad = "writable by its group";
		fix = secret ? "g-w,o-rwx" : "go-w";
	} else if (secret && (st->st_mode & S_IROTH)) {
		bad = "readable by others";
		fix = "o-rwx";
	}
	if (!bad)
		return 0;
	snprintf(err, errlen, "%s '%s' is %s (mode %04o, owner %s); run: chmod %s '%s'", what, path,
		 bad, (unsigned)(st->st_mode & 07777), owner, fix, path);
	return -EPERM;
}

int fx_trust_open(int dirfd, const char *name, const char *what, const struct fx_trust_rules *rules,
		  struct stat *st, char *err, size_t errlen)
{
	int flags = O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC;
	struct stat sb;
	int fd, rc;

	if (rules->nofollow)
		flags |= O_NOFOLLOW;
	fd = openat(dirfd, name, flags);
	if (fd < 0) {
		rc = -errno;
		if (rc == -ELOOP && rules->nofollow)
			snprintf(err, errlen, "%s '%s' is a symlink, which is not followed", what,
				 name);
		else if (rc == -ENOENT)
			snprintf(err, errlen, "%s '%s' does not exist", what, name);
		else
			snprintf(err, errlen, "%s '%s' cannot be opened: %s", what, name,
				 strerror(-rc));
		return rc;
	}
	if (fstat(fd, &sb) < 0) {
		rc = -errno;
		snprintf(err, errlen, "%s '%s' cannot be examined: %s", what, name, strerror(-rc));
		goto fail;
	}
	if (!S_ISREG(sb.st_mode)) {
		rc = -EINVAL;
		snprintf(err, errlen, "%s '%s' is %s, not a regular file", what, name,
			 fx_trust_kind(sb.st_mode));
		goto fail;
	}
	if (rules->own && sb.st_uid != geteuid()) {
		char owner[160], user[64];

		owner_name(&sb, owner, sizeof(owner));
		user_name(geteuid(), user, sizeof(user));
		rc = -EPERM;
		snprintf(err, errlen, "%s '%s' is owned by %s, not by the agent's user %s", what,
			 name, owner, user);
		goto fail;
	}
	if (rules->own && sb.st_nlink != 1) {
		rc = -EPERM;
		snprintf(err, errlen, "%s '%s' has %ju hard links, not one", what, name,
			 (uintmax_t)sb.st_nlink);
		goto fail;
	}
	if (rules->secret || rules->trusted) {
		rc = check_owner_mode(&sb, name, what, rules->secret, err, errlen);
		if (rc < 0)
			goto fail;
	}
	if (rules->max_size && (uint64_t)sb.st_size > rules->max_size) {
		rc = -EFBIG;
		snprintf(err, errlen, "%s '%s' is %jd bytes, more than the %ju allowed", what, name,
			 (intmax_t)sb.st_size, (uintmax_t)rules->max_size);
		goto fail;
	}
	/* Reads block again: a regular file never waits, and callers expect it. */
	if (fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) < 0) {
		rc = -errno;
		snprintf(err, errlen, "%s '%s' cannot be opened: %s", what, name, strerror(-rc));
		goto fail;
	}
	if (st)
		*st = sb;
	return fd;
fail:
	close(fd);
	return rc;
}

/* Checks every directory above @path (which must be absolute): one that
 * others can write must be sticky, or they could rename ours away and put
 * theirs in its place. */
static int check_ancestors(const char *path, const char *what, char *err, size_t errlen)
{
	char buf[PATH_MAX];
	size_t len = strlen(path);

	if (len >= sizeof(buf))
		return -ENAMETOOLONG;
	memcpy(buf, path, len + 1);
	for (;;) {
		char *slash = strrchr(buf, '/');
		struct stat st;

		if (!slash)
			return 0;
		if (slash == buf)
			slash[1] = '\0';
		else
			*slash = '\0';
		if (stat(buf, &st) == 0 && S_ISDIR(st.st_mode) &&
		    (st.st_mode & (S_IWGRP | S_IWOTH)) && !(st.st_mode & S_ISVTX)) {
			char owner[160];

			owner_name(&st, owner, sizeof(owner));
			snprintf(err, errlen,
				 "%s '%s' is below '%s', which is writable by others and not "
				 "sticky (mode %04o, owner %s); run: chmod go-w '%s'",
				 what, path, buf, (unsigned)(st.st_mode & 07777), owner, buf);
			return -EPERM;
		}
		if (slash == buf)
			return 0;
	}
}

/* The deepest existing directory above a missing @path must be a directory
 * the agent can create in. A file in the way is named (open(2) only says
 * ENOTDIR). */
static int check_creatable(const char *path, const char *what, char *err, size_t errlen)
{
	char buf[PATH_MAX];
	size_t len = strlen(path);
	struct stat st;
	int e;

	if (len >= sizeof(buf))
		return -ENAMETOOLONG;
	memcpy(buf, path, len + 1);
	for (;;) {
		char *slash = strrchr(buf, '/');

		if (!slash)
			return 0;
		/* "/x": its parent is "/", which is checked like any other. */
		if (slash == buf)
			slash[1] = '\0';
		else
			*slash = '\0';
		if (stat(buf, &st) == 0)
			break;
		e = errno;
		if (e != ENOENT && e != ENOTDIR) {
			snprintf(err, errlen,
				 "%s '%s' cannot be created: '%s' cannot be examined: %s", what,
				 path, buf, strerror(e));
			return -e;
		}
		if (slash == buf)
			return 0;
	}
	if (!S_ISDIR(st.st_mode)) {
		snprintf(err, errlen, "%s '%s' cannot be created: '%s' is %s, not a directory",
			 what, path, buf, fx_trust_kind(st.st_mode));
		return -ENOTDIR;
	}
	if (access(buf, W_OK | X_OK) < 0) {
		e = errno;
		snprintf(err, errlen, "%s '%s' cannot be created in '%s': %s", what, path, buf,
			 strerror(e));
		return -e;
	}
	return 0;
}

int fx_trust_dir(const char *dir, const char *what, bool create, char *err, size_t errlen)
{
	char path[PATH_MAX];
	size_t len = strlen(dir);
	struct stat st;
	int fd, rc;

	if (dir[0] != '/') {
		snprintf(err, errlen, "%s '%s' is not an absolute path", what, dir);
		return -EINVAL;
	}
	if (len >= sizeof(path)) {
		snprintf(err, errlen, "%s '%.64s...' is longer than %d bytes", what, dir, PATH_MAX);
		return -ENAMETOOLONG;
	}
	while (len > 1 && dir[len - 1] == '/')
		len--;
	memcpy(path, dir, len);
	path[len] = '\0';
	rc = check_ancestors(path, what, err, errlen);
	if (rc < 0)
		return rc;
	/* Made 0700 (chunks name the host's processes); what is missing above
	 * it 0755, as mkdir -p. An existing one keeps its mode if it passes. */
	if (create && mkdir(path, 0700) < 0 && errno == ENOENT) {
		char parent[PATH_MAX];
		const char *slash = strrchr(path, '/');
		size_t n = (size_t)(slash - path);

		if (n && n < sizeof(parent)) {
			memcpy(parent, path, n);
			parent[n] = '\0';
			if (fx_mkdir_parents(parent) == 0)
				(void)mkdir(path, 0700);
		}
	}
	fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0) {
		rc = -errno;
		if (rc == -ENOTDIR && stat(path, &st) == 0) {
			snprintf(err, errlen, "%s '%s' is %s, not a directory", what, path,
				 fx_trust_kind(st.st_mode));
			return rc;
		}
		/* Missing, or something above it is no directory: say what. */
		if (rc == -ENOENT || rc == -ENOTDIR) {
			int why = check_creatable(path, what, err, errlen);

			if (why < 0 || !create)
				return why;
		}
		snprintf(err, errlen, "%s '%s' cannot be opened: %s", what, path, strerror(-rc));
		return rc;
	}
	if (fstat(fd, &st) < 0) {
		rc = -errno;
		snprintf(err, errlen, "%s '%s' cannot be examined: %s", what, path, strerror(-rc));
		close(fd);
		return rc;
	}
	rc = check_owner_mode(&st, path, what, false, err, errlen);
	if (rc == 0 && faccessat(fd, ".", W_OK | X_OK, AT_EACCESS) < 0) {
		rc = -errno;
		snprintf(err, errlen, "%s '%s' is not writable by the agent: %s", what, path,
			 strerror(-rc));
	}
	if (rc < 0 || !create) {
		close(fd);
		return rc;
	}
	return fd;
}

int fx_trust_read_secret(const char *path, const char *what, size_t max, char **out, size_t *len,
			 char *err, size_t errlen)
{
	static const struct fx_trust_rules rules = { .secret = true };
	size_t got = 0, start = 0, end, i;
	char *buf;
	ssize_t n;
	int fd, rc = 0;

	if (out)
		*out = NULL;
	fd = fx_trust_open(AT_FDCWD, path, what, &rules, NULL, err, errlen);
	if (fd < 0)
		return fd;
	buf = malloc(max + 1);
	if (!buf) {
		close(fd);
		snprintf(err, errlen, "%s '%s': out of memory", what, path);
		return -ENOMEM;
	}
	/* One byte past the bound tells a file that is too big. */
	while (got < max + 1) {
		n = read(fd, buf + got, max + 1 - got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			rc = -errno;
			snprintf(err, errlen, "%s '%s' cannot be read: %s", what, path,
				 strerror(-rc));
			goto out;
		}
		if (n == 0)
			break;
		got += (size_t)n;
	}
	if (got > max) {
		rc = -EFBIG;
		snprintf(err, errlen, "%s '%s' is more than %zu bytes", what, path, max);
		goto out;
	}
	end = got;
	while (start < end && buf[start] && strchr(" \t\r\n\v\f", buf[start]))
		start++;
	while (end > start && buf[end - 1] && strchr(" \t\r\n\v\f", buf[end - 1]))
		end--;
	if (start == end) {
		rc = -EINVAL;
		snprintf(err, errlen, "%s '%s' is empty; it must hold the secret", what, path);
		goto out;
	}
	/* Never a byte of the secret in a message: only where the bad one is. */
	for (i = start; i < end; i++) {
		if ((unsigned char)buf[i] <= 0x20 || (unsigned char)buf[i] >= 0x7f) {
			rc = -EINVAL;
			snprintf(err, errlen,
				 "%s '%s' has a space or a non-printable character at byte %zu; it "
				 "must hold one secret",
				 what, path, i + 1);
			goto out;
		}
	}
	if (out) {
		memmove(buf, buf + start, end - start);
		buf[end - start] = '\0';
		explicit_bzero(buf + (end - start), got - (end - start));
		*out = buf;
		if (len)
			*len = end - start;
		buf = NULL;
	}
out:
	if (buf) {
		explicit_bzero(buf, got);
		free(buf);
	}
	close(fd);
	return rc;
}

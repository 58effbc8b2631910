/* SPDX-License-Identifier: MIT */
#include "fxagent/atomic_file.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int fx_atomic_file_sync_dir(const char *path)
{
	const char *slash = strrchr(path, '/');
	char *dir;
	int fd, rc = 0;

	if (!slash)
		dir = strdup(".");
	else if (slash == path)
		dir = strdup("/");
	else
		dir = strndup(path, (size_t)(slash - path));
	if (!dir)
		return -ENOMEM;
	fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0 || fsync(fd) < 0)
		rc = -errno;
	if (fd >= 0)
		close(fd);
	free(dir);
	return rc;
}

/* Writes @tmp (open on @fd, which is closed here in any case), syncs it and
 * renames it over @path. Returns 0 or a logged -errno. */
static int write_and_rename(const char *path, const char *tmp, int fd, mode_t mode,
			    enum fx_log_level level, fx_atomic_file_fn writer, void *arg)
{
	int rc;

	/* mkostemp made it 0600. */
	if (fchmod(fd, mode) < 0) {
		rc = fx_log_errno(level, errno, "cannot set the mode of '%s'", tmp);
		close(fd);
		return rc;
	}
	rc = writer(fd, arg);
	if (rc < 0) {
		close(fd);
		return fx_log_errno(level, -rc, "cannot write '%s'", path);
	}
	if (fsync(fd) < 0) {
		rc = fx_log_errno(level, errno, "cannot write '%s' to disk", path);
		close(fd);
		return rc;
	}
	/* Linux closes the fd even when close() fails: no second try. */
	if (close(fd) < 0)
		return fx_log_errno(level, errno, "cannot write '%s'", path);
	if (rename(tmp, path) < 0)
		return fx_log_errno(level, errno, "cannot rename '%s' to '%s'", tmp, path);
	return 0;
}

int fx_atomic_file_write(const char *path, mode_t mode, enum fx_log_level level,
			 fx_atomic_file_fn writer, void *arg)
{
	char *tmp = NULL;
	int fd, rc;

	if (asprintf(&tmp, "%s.tmpXXXXXX", path) < 0)
		return fx_log_errno(level, ENOMEM, "cannot write '%s'", path);
	fd = mkostemp(tmp, O_CLOEXEC);
	if (fd < 0) {
		rc = fx_log_errno(level, errno, "cannot create a temporary file beside '%s'", path);
		free(tmp);
		return rc;
	}
	rc = write_and_rename(path, tmp, fd, mode, level, writer, arg);
	if (rc < 0) {
		unlink(tmp);
		free(tmp);
		return rc;
	}
	free(tmp);
	rc = fx_atomic_file_sync_dir(path);
	if (rc < 0)
		fx_log_errno(level < FX_LOG_WARN ? FX_LOG_WARN : level, -rc,
			     "cannot sync the directory of '%s', ignoring", path);
	return 0;
}

struct buf {
	const char *p;
	size_t len;
};

static int write_buf(int fd, void *arg)
{
	const struct buf *b = arg;

	for (size_t off = 0; off < b->len;) {
		ssize_t n = write(fd, b->p + off, b->len - off);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			return -EIO;
		off += (size_t)n;
	}
	return 0;
}

int fx_atomic_file_write_buf(const char *path, mode_t mode, enum fx_log_level level,
			     const void *buf, size_t len)
{
	struct buf b = { .p = buf, .len = len };

	return fx_atomic_file_write(path, mode, level, write_buf, &b);
}

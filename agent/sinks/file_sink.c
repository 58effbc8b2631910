/* SPDX-License-Identifier: MIT */
/* The file sinks: one given path, or one file per chunk in a directory. */
#include "fxagent/sink.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <libgen.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "fxagent/log.h"
#include "fxagent/trust.h"

struct file_sink {
	struct fx_sink base;
	char *path; /* the file, or the directory */
};

static void file_free(struct fx_sink *s, uint64_t deadline_ns)
{
	(void)deadline_ns;
	free(((struct file_sink *)s)->path);
	free(s);
}

static void file_commit(struct fx_sink *s, struct fx_sink_chunk *c)
{
	(void)s;
	(void)c; /* written in place */
}

static int file_prepare(struct fx_sink *s, struct fx_sink_chunk *c)
{
	const struct file_sink *f = (const struct file_sink *)s;

	snprintf(c->path, sizeof(c->path), "%s", f->path);
	c->id = c->path;
	return 0;
}

static const struct fx_sink_ops file_ops = {
	.prepare = file_prepare,
	.commit = file_commit,
	.free = file_free,
};

static int sink_new(const struct fx_sink_ops *ops, const char *path, struct fx_sink **out)
{
	struct file_sink *f = calloc(1, sizeof(*f));

	if (f)
		f->path = strdup(path);
	if (!f || !f->path) {
		free(f);
		return fx_log_errno(FX_LOG_ERR, ENOMEM, "cannot set up the sink");
	}
	f->base.ops = ops;
	f->base.where = f->path;
	*out = &f->base;
	return 0;
}

int fx_sink_file_new(const char *path, struct fx_sink **out)
{
	char *dup, *dir;
	int ret = 0;

	/* Fails early, before recording, when the profile could not be written. */
	if (strcmp(path, "-") != 0) {
		dup = strdup(path);
		if (!dup)
			return fx_log_errno(FX_LOG_ERR, ENOMEM, "cannot set up the sink");
		dir = dirname(dup);
		if (access(dir, W_OK | X_OK) < 0)
			ret = fx_log_errno(FX_LOG_ERR, errno, "cannot write the profile to '%s'",
					   path);
		free(dup);
		if (ret < 0)
			return ret;
	}
	return sink_new(&file_ops, path, out);
}

/* "<target>-<start UTC>-<seq>.json.gz" in the directory. */
static int dir_prepare(struct fx_sink *s, struct fx_sink_chunk *c)
{
	const struct file_sink *f = (const struct file_sink *)s;
	time_t sec = (time_t)(c->start_wall_ms / 1000);
	struct tm tm;
	char ts[32];

	gmtime_r(&sec, &tm);
	strftime(ts, sizeof(ts), "%Y%m%dT%H%M%SZ", &tm);
	snprintf(c->path, sizeof(c->path), "%s/%s-%s-%06" PRId64 ".json.gz", f->path, c->target, ts,
		 c->seq);
	c->id = strrchr(c->path, '/') + 1;
	return 0;
}

static const struct fx_sink_ops dir_ops = {
	.prepare = dir_prepare,
	.commit = file_commit,
	.free = file_free,
};

/* "<chunk>.json.gz.tmpXXXXXX": a write of fx_profile_write_file that a kill
 * cut short (mkostemp's six characters). */
static bool is_output_temp(const char *name)
{
	const char *p = strstr(name, ".json.gz.tmp");

	if (!p || p == name || strlen(p) != strlen(".json.gz.tmp") + 6)
		return false;
	for (p += strlen(".json.gz.tmp"); *p; p++)
		if (!isalnum((unsigned char)*p))
			return false;
	return true;
}

/* Removes what interrupted writes left in the directory @fd: only regular
 * files of ours with a temporary's name, never what they link to. */
static void remove_output_temps(int fd, const char *path)
{
	int dfd = openat(fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	DIR *dir = dfd >= 0 ? fdopendir(dfd) : NULL;
	uint64_t removed = 0;
	struct dirent *de;

	if (!dir) {
		if (dfd >= 0)
			close(dfd);
		fx_log_errno(FX_LOG_WARN, errno,
			     "cannot list output.directory '%s' for leftover temporaries", path);
		return;
	}
	while ((de = readdir(dir))) {
		struct stat st;

		if (!is_output_temp(de->d_name) ||
		    fstatat(fd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISREG(st.st_mode) ||
		    st.st_uid != geteuid())
			continue;
		if (unlinkat(fd, de->d_name, 0) == 0)
			removed++;
	}
	closedir(dir);
	if (removed) {
		fsync(fd);
		fx_info("removed %" PRIu64 " temporary files of interrupted writes in '%s'",
			removed, path);
	}
}

int fx_sink_dir_new(const char *dir, struct fx_sink **out)
{
	char why[PATH_MAX + 256];
	int fd = fx_trust_dir(dir, "output.directory", true, why, sizeof(why));

	if (fd < 0) {
		fx_log(FX_LOG_ERR, "cannot write chunks: %s", why);
		return fd;
	}
	remove_output_temps(fd, dir);
	close(fd);
	return sink_new(&dir_ops, dir, out);
}

/* SPDX-License-Identifier: MIT */
/* A profile as a gzip file, written atomically (atomic_file.h); Breakpad ids. */
#include "fxagent/atomic_file.h"
#include "fxagent/gzip.h"
#include "fxagent/log.h"
#include "fxagent/util.h"
#include "profile_int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- gzip file output ---- */

struct gz_job {
	const struct fx_profile_input *in;
	struct fx_profile_stats *stats;
};

static int emit_profile(struct fx_json *j, void *arg)
{
	const struct gz_job *job = arg;

	return fx_profile_write_json(job->in, j, job->stats);
}

/* Writes the whole gzip stream to @fd. Returns 0 or -errno, not logged. */
static int write_gz(const struct fx_profile_input *in, int fd, struct fx_profile_stats *stats)
{
	struct gz_job job = { .in = in, .stats = stats };
	uint64_t bytes = 0;
	int rc = fx_gzip_json(emit_profile, &job, fx_gzip_write_fd, &fd, &bytes);

	if (!rc && stats)
		stats->bytes = bytes;
	return rc;
}

/* The umask, read without changing it (umask(2) can only set it, and other
 * threads create files meanwhile). */
static mode_t file_umask(void)
{
	unsigned long long mask = 022;

	return fx_self_status("Umask", 8, &mask) == 0 ? (mode_t)(mask & 0777) : 022;
}

static int write_gz_job(int fd, void *arg)
{
	const struct gz_job *job = arg;

	return write_gz(job->in, fd, job->stats);
}

int fx_profile_write_file(const struct fx_profile_input *in, const char *path,
			  struct fx_profile_stats *stats)
{
	struct gz_job job = { .in = in, .stats = stats };
	int rc;

	if (!strcmp(path, "-")) {
		rc = write_gz(in, STDOUT_FILENO, stats);
		if (rc < 0)
			return fx_log_errno(FX_LOG_ERR, -rc, "cannot write the profile to stdout");
		return 0;
	}
	/* What open(0666) would give under the process's umask (the service's
	 * UMask=0027 keeps chunks private). */
	return fx_atomic_file_write(path, 0666 & ~file_umask(), FX_LOG_ERR, write_gz_job, &job);
}

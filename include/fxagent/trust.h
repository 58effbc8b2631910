/* SPDX-License-Identifier: MIT */
/* trust: the checks on what the agent reads from disk, made on the open fd.
 *
 * The agent runs as root on every server: a file that someone else can swap
 * or change could make it send the host's secrets, or hang it. So
 *  - its own directories (spool, output) must be the agent user's alone:
 *    owned by it (or by root), writable by nobody else, and so must every
 *    directory above them unless it is sticky (/tmp);
 *  - files in those directories are opened relative to the directory's fd
 *    with O_NOFOLLOW and checked on the fd: a regular file, owned by the
 *    agent's user, one link, within a size;
 *  - a secret (bearer token, TLS key) must not be readable by others;
 *  - every file is opened with O_NONBLOCK and must be a regular file, so a
 *    FIFO or a device cannot hang a read.
 * A refusal says what is wrong, where, and the command that fixes it, in the
 * habit of ssh's StrictModes:
 *   "spool.directory '/var/spool/fx' is writable by others (mode 0777, owner
 *    root:root); run: chmod go-w '/var/spool/fx'"
 */
#ifndef FXAGENT_TRUST_H
#define FXAGENT_TRUST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>

struct fx_trust_rules {
	bool nofollow;	   /* the last component may not be a symlink */
	bool own;	   /* owned by the agent's user (euid), one link */
	bool secret;	   /* not readable or writable by others, nor group-writable;
			      owned by root or the agent's user */
	bool trusted;	   /* input that steers the agent (its config, CA file):
			      owned by root or the agent's user, not writable by
			      group or others; readable by all is fine */
	uint64_t max_size; /* bytes; 0 = no limit */
};

/* "a regular file", "a FIFO", "a directory", ... for messages. */
const char *fx_trust_kind(mode_t m);

/* Opens @name (relative to @dirfd, or AT_FDCWD) read-only and checks it on
 * the fd against @rules. Returns the fd (O_CLOEXEC, blocking again) and fills
 * @st (may be NULL), or -errno with one line in @err naming @what and @name:
 * -ENOENT missing, -ELOOP a symlink, -EINVAL not a regular file, -EPERM
 * owner, mode or links, -EFBIG over max_size, or open(2)'s error. */
int fx_trust_open(int dirfd, const char *name, const char *what, const struct fx_trust_rules *rules,
		  struct stat *st, char *err, size_t errlen);

/* The agent's own directory @dir (@what names it for messages): with
 * @create, made if missing (mode 0700, missing parents 0755) and opened;
 * without, only checked (a missing one is fine if what is above it is).
 * Refused: not a directory, owned by another user than the agent's or root,
 * writable by group or others, or below a directory others may rename it
 * in. Returns the directory's fd (O_RDONLY | O_DIRECTORY), 0 when !@create,
 * or -errno with one line in @err. */
int fx_trust_dir(const char *dir, const char *what, bool create, char *err, size_t errlen);

/* Reads the secret file @path (@what names it in messages: a config key) as
 * fx_trust_open's secret rules allow: one run of printable characters of at
 * most @max bytes, white space around it ignored. Returns 0 with *@out the
 * secret (malloc'ed, NUL-terminated; wipe it before freeing) and *@len its
 * length, or -errno with one line in @err naming the file and what is wrong
 * (missing, empty, too big, a space or a non-printable character at byte N),
 * never a byte of the secret. With @out NULL, only checks. */
int fx_trust_read_secret(const char *path, const char *what, size_t max, char **out, size_t *len,
			 char *err, size_t errlen);

#endif

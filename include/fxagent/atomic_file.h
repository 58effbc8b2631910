/* SPDX-License-Identifier: MIT */
/* atomic_file: a file replaced whole or not at all.
 *
 * The new contents go to a fresh temporary file beside the target,
 * "PATH.tmpXXXXXX" (mkostemp: O_EXCL|O_CREAT, so nothing another user put
 * at a name, a symlink say, is ever followed or reused), which gets the
 * caller's mode, is written, synced and renamed over PATH (a symlink at
 * PATH is replaced, not followed); then PATH's directory is synced. On
 * any failure the temporary file is removed and PATH is left as it was.
 * daemon.c removes the "*.json.gz.tmpXXXXXX" a crash leaves: keep the name.
 */
#ifndef FXAGENT_ATOMIC_FILE_H
#define FXAGENT_ATOMIC_FILE_H

#include <stddef.h>
#include <sys/types.h>

#include "fxagent/log.h"

/* Writes the new contents to @fd (which it must not close). Returns 0 or
 * -errno. */
typedef int (*fx_atomic_file_fn)(int fd, void *arg);

/* Replaces @path with what @writer writes, with mode @mode (exactly: the
 * umask does not apply). A failure is logged once, at @level (FX_LOG_DEBUG
 * when the caller reports it itself); a failure to sync the directory after
 * the rename is logged, no louder than a warning, and ignored. Returns 0 or
 * -errno (that of @writer when it failed). */
int fx_atomic_file_write(const char *path, mode_t mode, enum fx_log_level level,
			 fx_atomic_file_fn writer, void *arg);

/* fx_atomic_file_write() of the @len bytes at @buf. */
int fx_atomic_file_write_buf(const char *path, mode_t mode, enum fx_log_level level,
			     const void *buf, size_t len);

/* Syncs the directory that holds @path ("." for a name without a slash), so
 * that a rename into it survives a crash. Returns 0 or -errno; logs nothing. */
int fx_atomic_file_sync_dir(const char *path);

#endif

/* SPDX-License-Identifier: MIT */
/* objects: the mapped files (executables, libraries) seen in any process.
 *
 * An object is identified by its GNU build-id when it has one, else by
 * (device, inode, path). It is opened once, when first seen, through the
 * process's own view (/proc/PID/map_files/START-END, then /proc/PID/root/PATH,
 * then PATH): so binaries of other mount namespaces (containers) and binaries
 * deleted after start stay readable for symbolization at the end of the window.
 * The fd is kept open while the object lives (bounded by max_open).
 *
 * Thread-safe: one thread may intern while others get; an object, once
 * returned, never changes and lives until fx_objects_free().
 */
#ifndef FXAGENT_OBJECTS_H
#define FXAGENT_OBJECTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "fxagent/elf.h"

struct fx_object {
	uint32_t id;
	char *path;	  /* path as the process saw it */
	const char *name; /* base name of path */
	int fd;		  /* open, verified fd; -1 when it could not be opened */
	uint8_t build_id[FX_BUILD_ID_MAX];
	size_t build_id_len; /* 0 = none known */
	uint64_t dev, ino;   /* 0 when unknown */
	bool special;	     /* [vdso] and the like: no file */
};

/* What the caller knows about one mapping (from /proc/PID/maps or MMAP2). */
struct fx_mapping_info {
	uint32_t pid;
	uint64_t start, end;
	const char *path;
	const uint8_t *build_id; /* NULL when not known */
	size_t build_id_len;
	uint64_t dev, ino; /* 0 when not known */
};

struct fx_objects_stats {
	uint64_t objects;
	uint64_t open_failed; /* objects whose file could not be opened */
	uint64_t fds;	      /* fds held */
};

struct fx_objects;

/* @proc_root is "/proc" (tests may point elsewhere). At most @max_open fds are
 * kept; objects seen after that are still named but not opened. NULL on ENOMEM. */
struct fx_objects *fx_objects_new(const char *proc_root, size_t max_open);
void fx_objects_free(struct fx_objects *objs);

/* Finds or creates the object behind a mapping. Returns its id, or FX_NONE
 * (see window.h) on ENOMEM or an empty path. */
uint32_t fx_objects_intern(struct fx_objects *objs, const struct fx_mapping_info *m);

/* NULL for an unknown id. Valid until fx_objects_free(). */
const struct fx_object *fx_objects_get(const struct fx_objects *objs, uint32_t id);
size_t fx_objects_count(const struct fx_objects *objs);
void fx_objects_get_stats(const struct fx_objects *objs, struct fx_objects_stats *out);

#endif

/* SPDX-License-Identifier: MIT */
/* objects: the mapped files (executables, libraries) seen in any process.
 *
 * An object is one file at one path: a file is identified by its GNU build-id
 * when it has one, else by (device, inode, path), and a file mapped at
 * several paths (byte-identical copies of a binary) is one object per path,
 * so each process's frames name the path that process mapped. The objects of
 * one file share its fd, and the symbolizer (keyed by build-id) shares its
 * ELF and DWARF state. A file is opened once, when first seen, through the
 * process's own view (/proc/PID/map_files/START-END, then /proc/PID/root/PATH,
 * then PATH): so binaries of other mount namespaces (containers) and binaries
 * deleted after start stay readable for symbolization at the end of the window.
 *
 * An object lives while it is in use (its fd too, at most max_open fds): a
 * daemon ends an epoch per window, marks what live processes map and what the
 * window's frames use, and once a window is written retires the objects
 * unused since (fx_objects_retire_unused): fd and entry; what is left of it
 * is its id's slot (8 bytes): ids are never given again, so a cache keyed by
 * id (the unwinder's tables) never sees another file under an id it knows.
 * Otherwise every binary a build or a deploy ever ran would keep an fd and
 * an entry. A file mapped again is a new object, opened through the new
 * mapping.
 *
 * Thread-safe: one thread may intern and mark while others get, dup and
 * retire; an object, once returned, never changes (its fd is not part of it)
 * and lives until an fx_objects_retire_unused() of an epoch after the last
 * one it was interned or marked in, or fx_objects_free().
 */
#ifndef FXAGENT_OBJECTS_H
#define FXAGENT_OBJECTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "fxagent/elf.h"

struct fx_object {
	uint32_t id;
	char *path;	  /* path as the process saw it, every byte (" (deleted)" cut) */
	const char *name; /* base name of path */
	uint8_t build_id[FX_BUILD_ID_MAX];
	size_t build_id_len; /* 0 = none known */
	uint64_t dev, ino;   /* 0 when unknown */
	bool special;	     /* [vdso] and the like: no file */
	/* A process's JIT code (its anonymous executable memory): named from
	 * its jitdump or perf map; addresses in it are absolute. 0 for other
	 * objects. */
	uint32_t jit_pid;
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
	uint64_t objects;	/* files: the objects of other paths of a file are not counted */
	uint64_t entries;	/* objects: one per file and path */
	uint64_t bytes;		/* heap bytes of the table: entries, paths, indexes */
	uint64_t open_failed;	/* objects whose file could not be opened */
	uint64_t fds;		/* fds held */
	uint64_t closed_unused; /* fds closed by fx_objects_retire_unused() */
	uint64_t retired;	/* objects (entries) retired by it */
};

struct fx_objects;

/* @proc_root is "/proc" (tests may point elsewhere). At most @max_open fds are
 * kept; objects seen after that are still named but not opened. NULL on ENOMEM. */
struct fx_objects *fx_objects_new(const char *proc_root, size_t max_open);
void fx_objects_free(struct fx_objects *objs);

/* Finds or creates the object behind a mapping, and marks it used. Returns
 * its id, or FX_NONE (see window.h) on ENOMEM or an empty path. */
uint32_t fx_objects_intern(struct fx_objects *objs, const struct fx_mapping_info *m);

/* The object of process @pid's JIT code (one per pid, "[jit pid N]"), or
 * FX_NONE on ENOMEM. Unlike [vdso], it retires when unused. */
uint32_t fx_objects_intern_jit(struct fx_objects *objs, uint32_t pid);

/* NULL for an unknown (or retired) id. Valid until the object is retired. */
const struct fx_object *fx_objects_get(const struct fx_objects *objs, uint32_t id);
/* A new close-on-exec fd of the object's verified file (the same file for
 * every path it is at), for the caller to close; -1 when none is open (not
 * openable, or retired). */
int fx_objects_dup_fd(const struct fx_objects *objs, uint32_t id);

/* The id of the object that holds @id's file state: the same for every
 * path of one file (one build-id), so per-file caches are shared. @id for an
 * unknown (or retired) id. */
uint32_t fx_objects_file(const struct fx_objects *objs, uint32_t id);

/* Marks @n ids, and so their files, as used in the current epoch. The ids
 * are @stride bytes apart (sizeof(uint32_t) for an array;
 * sizeof(struct fx_window_frame) from &frames[0].object); unknown ids
 * (FX_OBJ_KERNEL, ...) are skipped. Interning marks too. */
void fx_objects_mark(struct fx_objects *objs, const uint32_t *ids, size_t n, size_t stride);
/* Ends the current epoch and returns its number (the first is 1). */
uint64_t fx_objects_end_epoch(struct fx_objects *objs);
/* Retires the objects last interned or marked before @epoch (closes their
 * fds, frees them; their ids stay unknown), except [vdso] and the like. Call once nothing may use
 * their ids: after the windows of
 * @epoch are written. Returns how many were retired. */
size_t fx_objects_retire_unused(struct fx_objects *objs, uint64_t epoch);
/* Whether the path of @id, as the process that last mapped it sees it, no
 * longer names the object's file: deleted, or replaced (a package upgrade
 * renames a new build over a running binary). Its frames are still named
 * from the file that ran, through its mapping; a user who reads the file now
 * at the path must be told. Asked when the object is first seen and at most
 * once a second after (a stat; a build-id read when the path shows another
 * inode, once per inode); once replaced, always. False when it cannot tell
 * (the process is gone). */
bool fx_objects_replaced(const struct fx_objects *objs, uint32_t id);
/* One more than the highest id given: the size of an array by id. */
size_t fx_objects_count(const struct fx_objects *objs);
void fx_objects_get_stats(const struct fx_objects *objs, struct fx_objects_stats *out);

#endif

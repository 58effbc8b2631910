/* SPDX-License-Identifier: MIT */
/* cgroup: cgroup v2 discovery and target resolution.
 *
 * A target (`systemd_unit: nginx.service` or `cgroup: /system.slice/foo.service`)
 * becomes a directory path relative to the cgroup2 mount ("/system.slice/nginx.service",
 * "/" is the root cgroup), then an open directory fd plus its cgroup id for
 * perf_event_open(..., pid = fd, cpu >= 0, ..., PERF_FLAG_PID_CGROUP).
 *
 * The cgroup id is the inode number of the cgroup directory (the kernel's
 * cgroup id, also the handle of name_to_handle_at and the value of
 * PERF_SAMPLE_CGROUP). A restarted service gets a new directory and so a new
 * id: compare ids to tell a re-created cgroup from the same one.
 *
 * Every function takes the mount point (or /proc) as a parameter, so tests can
 * point it at a plain directory tree. No function keeps state between calls.
 */
#ifndef FXAGENT_CGROUP_H
#define FXAGENT_CGROUP_H

#include <stddef.h>
#include <stdint.h>

#include "fxagent/config.h"

/* Bounds of the search for a unit outside its standard place: depth below the
 * mount (/machine.slice is depth 1) and directories looked at. */
#define FX_CGROUP_SEARCH_DEPTH 8
#define FX_CGROUP_SEARCH_DIRS  100000

/* Finds the cgroup2 mount point in @mountinfo_path ("/proc/self/mountinfo")
 * and writes it (octal escapes like \040 undone) to @out. With several cgroup2
 * mounts: /sys/fs/cgroup, then /sys/fs/cgroup/unified, then the first one;
 * mounts of a subtree (root field not "/") only when nothing else exists.
 * Returns 0; -ENOENT when there is none (a cgroup v1-only host; logged at
 * error level with what to do); -ENAMETOOLONG when @len is too small; -errno
 * when the file cannot be read (logged). */
int fx_cgroup_find_mount(const char *mountinfo_path, char *out, size_t len);

/* Checks a `cgroup:` value and writes it to @out normalized (repeated and
 * trailing slashes dropped; "/" stays "/"). It must be absolute and have no
 * "." or ".." component: else -EINVAL (logged at error level: a config
 * mistake, do not retry). -ENOENT (debug level only) when @mount has no such
 * directory, -ENOTDIR (logged) when it is not a directory, -ENAMETOOLONG. */
int fx_cgroup_resolve_path(const char *mount, const char *path, char *out, size_t len);

/* Finds the cgroup of systemd unit @unit below @mount and writes its path
 * relative to @mount to @out. A name without a unit type gets ".service", as
 * systemctl does. First the standard place:
 *   foo.service        /system.slice/foo.service
 *   foo@x.service      /system.slice/system-foo.slice/foo@x.service
 *   user@1000.service  /user.slice/user-1000.slice/user@1000.service
 *   foo-bar.slice      /foo.slice/foo-bar.slice   ("-.slice" is "/")
 * then a breadth-first search (bounded by FX_CGROUP_SEARCH_DEPTH and
 * FX_CGROUP_SEARCH_DIRS, symlinks not followed) for a directory with exactly
 * that name: user units, units in containers (/machine.slice/...). The
 * shallowest match wins; among matches at one depth, the smallest path by
 * strcmp. Returns 0; -ENOENT when absent (debug level only: the unit may not
 * have started yet; the caller says so once and retries); -EINVAL (logged)
 * for a name that cannot be a unit with a cgroup (a '/', empty, too long, or a
 * type such as .timer or .target that has no cgroup); -ENOMEM; -ENAMETOOLONG. */
int fx_cgroup_resolve_unit(const char *mount, const char *unit, char *out, size_t len);

/* fx_cgroup_resolve_unit for FX_TARGET_SYSTEMD_UNIT, fx_cgroup_resolve_path
 * for FX_TARGET_CGROUP; -EINVAL for other kinds (not logged). */
int fx_cgroup_resolve(const char *mount, const struct fx_target *t, char *out, size_t len);

/* Opens @mount/@relpath (O_RDONLY | O_DIRECTORY | O_CLOEXEC) and gives its
 * cgroup id. On success *@fd_out is the caller's to close; nothing is written
 * on failure. Returns 0 or -errno (-ENOENT at debug level only: the cgroup
 * may be gone between resolution and open; others logged). */
int fx_cgroup_open(const char *mount, const char *relpath, int *fd_out, uint64_t *id_out);

/* The cgroup id of @mount/@relpath without keeping it open: the cheap check,
 * once a window, that an open cgroup is still the one at that path. Returns 0,
 * -ENOENT (not logged) or -errno (logged). */
int fx_cgroup_id(const char *mount, const char *relpath, uint64_t *id_out);

/* The cgroup v2 path of @pid from @proc_root/PID/cgroup (the "0::" line), as
 * the kernel shows it: relative to the reader's cgroup namespace root, which
 * is the mount root when the agent runs in the host's namespaces. Returns 0;
 * -ESRCH when the process is gone; -ENOENT when it has no v2 line (v1-only
 * host) or its cgroup was removed (" (deleted)"); -EINVAL for a malformed
 * file; -ENAMETOOLONG. Nothing is logged above debug level: processes come
 * and go. */
int fx_cgroup_of_pid(const char *proc_root, uint32_t pid, char *out, size_t len);

#endif

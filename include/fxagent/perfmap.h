/* SPDX-License-Identifier: MIT */
/* perfmap: names for JIT code from a runtime's perf map, /tmp/perf-PID.map
 * (Node --perf-basic-prof, CPython 3.12 -X perf, the JVM's
 * Compiler.perfmap, .NET, LuaJIT).
 *
 * A line is "START SIZE NAME": START and SIZE in hex (a "0x" before either
 * is taken), the name the rest of the line, spaces included. Runtimes append
 * as they compile and reuse freed code ranges, so of two lines that cover an
 * address the later one wins. A last line without its newline is being
 * written: it is left out. A line longer than FX_PERFMAP_MAX_LINE, or one
 * that does not parse, is skipped and counted.
 *
 * Memory: only the lines that cover an address asked for are kept; a map of
 * megabytes is read in blocks of 64 KiB and costs nothing past the call.
 *
 * Trust: /tmp is writable by everyone and the agent is root. The file is
 * opened relative to the process's own root (/proc/PID/root/tmp/, under
 * its namespace pid) with O_NOFOLLOW|O_NONBLOCK, and checked on the fd: a
 * regular file, owned by the process's uid or by root, not written before
 * the process started (a reused pid finds a stale map), at most
 * FX_PERFMAP_MAX_BYTES.
 */
#ifndef FXAGENT_PERFMAP_H
#define FXAGENT_PERFMAP_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define FX_PERFMAP_MAX_LINE  4096
#define FX_PERFMAP_MAX_BYTES (512ull << 20)

/* The line that names an address: its range and name (NUL-terminated). */
struct fx_perfmap_hit {
	uint64_t start, size;
	char *name; /* malloc'd; NULL when no line covers the address */
};

struct fx_perfmap_stats {
	uint64_t lines;	  /* lines read */
	uint64_t skipped; /* too long, or not START SIZE NAME */
	uint64_t partial; /* a last line without its newline (0 or 1) */
};

/* What fx_perfmap_open() checks the file against. */
struct fx_perfmap_owner {
	const char *proc_root; /* "/proc" (tests may use another) */
	pid_t pid;	       /* the process, as this agent sees it */
	pid_t ns_pid;	       /* its pid in its own namespace (the file's name) */
	uid_t uid;	       /* its real uid: the file's owner, or root */
	int64_t start_s;       /* when it started (CLOCK_REALTIME seconds) */
};

/* Reads what fx_perfmap_open() needs of process @pid from @proc_root
 * (/proc): its namespace pid (the last of NStgid), real uid and start time.
 * Returns 0 or -errno (-ESRCH: the process is gone). */
int fx_perfmap_owner_of(const char *proc_root, pid_t pid, struct fx_perfmap_owner *out);

/* Opens and checks the perf map of @o's process. Returns the fd, or -ENOENT
 * (none), -ELOOP (a symlink), -EINVAL (not a regular file), -EPERM (another
 * owner), -ESTALE (older than the process), -EFBIG (too big), or another
 * -errno. Logs nothing: the caller counts and says it once. */
int fx_perfmap_open(const struct fx_perfmap_owner *o);

/* Why fx_perfmap_open() refused a file, in words ("a symlink", ...), or
 * strerror(-@err) for another error. */
const char *fx_perfmap_why(int err);

/* For each of the @n addresses @addrs (sorted, ascending), the last line of
 * the map text @buf (@len bytes) that covers it, into @out[i] (which the
 * caller zeroed; a name already there is replaced). Returns 0 or -ENOMEM. */
int fx_perfmap_parse(const char *buf, size_t len, const uint64_t *addrs, size_t n,
		     struct fx_perfmap_hit *out, struct fx_perfmap_stats *st);

/* The same, reading @fd from its start to its end. Returns 0 or -errno. */
int fx_perfmap_read(int fd, const uint64_t *addrs, size_t n, struct fx_perfmap_hit *out,
		    struct fx_perfmap_stats *st);

/* Sets @out[i] for each of the @n sorted @addrs that [@start, @start +
 * @size) covers to that range and a copy of @name (@len bytes), replacing
 * what was there: one copy, shared by those hits. Returns 0 or -ENOMEM. */
int fx_perfmap_cover(const uint64_t *addrs, size_t n, struct fx_perfmap_hit *out, uint64_t start,
		     uint64_t size, const char *name, size_t len);

/* Checks an open file of @o's process as fx_perfmap_open() does. Returns 0
 * or its -errno. */
int fx_perfmap_check_fd(int fd, const struct fx_perfmap_owner *o);

/* Frees the names of @n hits. */
void fx_perfmap_hits_free(struct fx_perfmap_hit *hits, size_t n);

#endif

/* SPDX-License-Identifier: MIT */
/* procs: the process table: pid -> name, executable mappings; tid -> name.
 *
 * Processes that existed before the recording are read from /proc on first
 * use (their first sample or side-band record). Processes and threads that
 * start later come from the perf side-band records (FORK, COMM, MMAP2, EXIT),
 * which the caller feeds in time order. Exited processes stay until
 * fx_procs_sweep(), so their samples can still be named when the window is
 * written. Processes and threads that go idle (no sample, no record for a
 * while) are dropped by fx_procs_drop_idle() and read from /proc again if
 * they run again: the table holds what runs, not everything that exists.
 */
#ifndef FXAGENT_PROCS_H
#define FXAGENT_PROCS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "fxagent/objects.h"
#include "fxagent/window.h"

/* A comm: up to 15 bytes, any but NUL (newlines and control bytes too), and a NUL. */
#define FX_COMM_LEN 16

struct fx_map {
	uint64_t start, end, pgoff;
	uint32_t object; /* object id, or FX_OBJ_UNKNOWN for anonymous code */
};

struct fx_proc {
	uint32_t pid;
	char comm[FX_COMM_LEN];
	bool exited;
	bool loaded;	     /* maps were read from /proc or built from records */
	struct fx_map *maps; /* sorted by start, not overlapping */
	size_t nmaps, maps_cap;
	/* Both from one counter of the table, so a value is never reused: */
	uint64_t image;	     /* changes when the address space is replaced (new, fork, exec) */
	uint64_t generation; /* changes with any change of the mappings */
	uint64_t used;	     /* the fx_procs_mark() round of its last sample or record */
};

struct fx_thread {
	uint32_t tid;
	uint32_t pid;
	char comm[FX_COMM_LEN];
	bool exited;
	uint64_t used; /* as fx_proc.used */
};

struct fx_procs_stats {
	uint64_t procs; /* live entries */
	uint64_t threads;
	uint64_t proc_reads;   /* /proc/PID loads */
	uint64_t proc_missing; /* processes gone before we could read them */
	uint64_t reaped_gone;  /* processes found gone without an EXIT record */
	uint64_t idle_procs;   /* processes dropped by fx_procs_drop_idle() */
	uint64_t idle_threads; /* threads dropped by it */
	/* Heap bytes: of the processes (entries, mappings, the table's index)
	 * and of the threads (entries, index). */
	uint64_t proc_bytes;
	uint64_t thread_bytes;
};

struct fx_procs;

/* @objs must outlive the table. @proc_root is "/proc" (tests may use another
 * tree laid out the same way). NULL on ENOMEM. */
struct fx_procs *fx_procs_new(struct fx_objects *objs, const char *proc_root);
void fx_procs_free(struct fx_procs *p);

/* The process @pid, read from /proc if not known yet; never NULL for pid > 0
 * unless out of memory (a process gone from /proc gets an entry named
 * "pid N" with no mappings). */
struct fx_proc *fx_procs_get(struct fx_procs *p, uint32_t pid);
/* The thread @tid of @pid, named from /proc/PID/task/TID/comm if not known. */
struct fx_thread *fx_procs_thread(struct fx_procs *p, uint32_t pid, uint32_t tid);
/* Lookups that never read /proc; NULL when unknown. */
struct fx_proc *fx_procs_find(const struct fx_procs *p, uint32_t pid);
struct fx_thread *fx_procs_find_thread(const struct fx_procs *p, uint32_t tid);

/* Side-band records, in time order. */
void fx_procs_on_mmap(struct fx_procs *p, const struct fx_mapping_info *m, uint64_t pgoff);
void fx_procs_on_comm(struct fx_procs *p, uint32_t pid, uint32_t tid, const char *comm, bool exec);
void fx_procs_on_fork(struct fx_procs *p, uint32_t pid, uint32_t ppid, uint32_t tid, uint32_t ptid);
void fx_procs_on_exit(struct fx_procs *p, uint32_t pid, uint32_t tid);

/* Translates a user address of @proc: returns true and sets @object and
 * @offset (file offset) when a mapping holds it. */
bool fx_procs_resolve(const struct fx_proc *proc, uint64_t addr, uint32_t *object,
		      uint64_t *offset);

/* Drops processes and threads that exited. */
void fx_procs_sweep(struct fx_procs *p);

/* A mark of now, for fx_procs_drop_idle(): starts a new round. */
uint64_t fx_procs_mark(struct fx_procs *p);
/* Drops every process and thread with no sample or record (fx_procs_get(),
 * fx_procs_thread() and the side-band records) since @mark: each costs
 * about a kilobyte (its executable mappings), and a host has many more
 * processes than run. One that runs again is read from /proc again.
 * Returns how many processes were dropped. */
size_t fx_procs_drop_idle(struct fx_procs *p, uint64_t mark);

/* A process whose EXIT record was lost (a ring overflowed under fork churn)
 * would otherwise stay for good, and with it the fds of the binaries it
 * mapped. Looks at up to @budget more live processes, taking turns across
 * calls, and marks exited those gone from the proc root, with their threads,
 * for the next fx_procs_sweep(). Returns how many processes it marked. */
size_t fx_procs_reap_gone(struct fx_procs *p, size_t budget);

/* Marks the objects that processes in the table map as used
 * (fx_objects_mark), so their fds stay open. */
void fx_procs_mark_objects(const struct fx_procs *p);

/* Parses one line of /proc/PID/maps. Returns 1 and fills the out values for
 * an executable mapping (its path "" when anonymous: JIT code), 0 for a line
 * to ignore, -EINVAL for a malformed line. @path points into @line (@line is modified: the kernel's
 * escape of a newline, \012, is turned back into one and the " (deleted)"
 * suffix is cut off). A name that held a literal \012 reads as a newline:
 * the table reads the exact path from /proc/PID/map_files when it can. */
int fx_procs_parse_maps_line(char *line, uint64_t *start, uint64_t *end, uint64_t *pgoff,
			     uint64_t *dev, uint64_t *ino, char **path);

/* A thread's names, copied so another thread can use them while the table
 * changes. */
struct fx_thread_name {
	uint32_t pid, tid;
	char thread[FX_COMM_LEN];
	char process[FX_COMM_LEN];
};

/* Names every thread that has samples in @w, and the main thread (tid == pid)
 * of each of their processes: the track the profiler groups a process by.
 * Sorted by pid, the main thread first. Returns 0 and a malloc'ed array in
 * *@out (free it), or -ENOMEM. */
int fx_procs_names(const struct fx_procs *p, const struct fx_window *w, struct fx_thread_name **out,
		   size_t *n);

void fx_procs_get_stats(const struct fx_procs *p, struct fx_procs_stats *out);

#endif

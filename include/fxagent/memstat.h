/* SPDX-License-Identifier: MIT */
/* memstat: where the agent's resident memory is, for the debug log and the
 * metrics (fxagent_memory_bytes{part=...}).
 *
 * From /proc/self/smaps, each mapping's resident bytes by kind:
 *  - rings: the perf ring buffers (anon_inode:[perf_event]): their size,
 *    as their pages are the kernel's, locked, and not counted in VmRSS;
 *  - heap: the main malloc arena ([heap]);
 *  - arenas: the other threads' malloc arenas (glibc reserves 64 MiB each
 *    and makes the front part usable: an anonymous mapping with its
 *    PROT_NONE rest right after it);
 *  - stacks: thread stacks (an anonymous mapping right after its PROT_NONE
 *    guard page; the main thread's [stack]);
 *  - anon: other anonymous memory (malloc's own mappings of big blocks,
 *    libraries' buffers);
 *  - files: code and data of the agent and its libraries, and binaries
 *    libdw maps to unwind (clean page-cache pages, shared and reclaimable);
 *  - other: [vdso], [vvar] and the like.
 * And from malloc (mallinfo2, every arena): what the program holds and what
 * malloc keeps free. */
#ifndef FXAGENT_MEMSTAT_H
#define FXAGENT_MEMSTAT_H

#include <stddef.h>
#include <stdint.h>

enum fx_mem_part {
	FX_MEM_RINGS,
	FX_MEM_HEAP,
	FX_MEM_ARENAS,
	FX_MEM_STACKS,
	FX_MEM_ANON,
	FX_MEM_FILES,
	FX_MEM_OTHER,
	FX_MEM_NPARTS,
};

struct fx_memstat {
	uint64_t rss;		      /* the sum of the parts */
	uint64_t part[FX_MEM_NPARTS]; /* resident bytes */
	uint64_t malloc_used;	      /* bytes malloc has handed out */
	uint64_t malloc_free;	      /* bytes malloc holds free */
	uint64_t arenas;	      /* thread malloc arenas seen in smaps */
};

/* "rings", "heap", "arenas", "stacks", "anon", "files", "other". */
const char *fx_memstat_part_name(enum fx_mem_part p);

/* Reads @smaps (a /proc/PID/smaps text of @len bytes) into @out's parts and
 * rss; the malloc fields are left alone. */
void fx_memstat_parse(const char *smaps, size_t len, struct fx_memstat *out);

/* /proc/self/smaps and malloc's counts. Returns 0 or -errno. */
int fx_memstat_read(struct fx_memstat *out);

#endif

/* SPDX-License-Identifier: MIT */
/* jitunw: unwinding rules for JIT code, from the .eh_frame its runtime wrote
 * in its jitdump (CPython 3.13 -X perf_jit writes one for each trampoline).
 *
 * The unwinder asks for the rule of an address in a process's anonymous
 * executable memory. The process's jitdump (jitdump.h) is read on the
 * unwinder's thread, incrementally: when an address is not covered, what the
 * runtime appended since is read (at most every FX_JITUNW_REREAD_NS, and at
 * most FX_JITUNW_READ_BYTES a time). Each CODE_UNWINDING_INFO is compiled
 * into rules (cfitab.h) for the load that follows it; runtimes repeat the
 * same CFI for every piece of code of one kind, so equal CFI is compiled
 * once. A dump whose first FX_JITUNW_PROBE_LOADS loads carry no unwinding
 * information (V8 writes none on x86-64) is not read further: that code is
 * walked by frame pointers (dwunwind.h).
 *
 * Bounded: at most FX_JITUNW_MAX_RANGES ranges a process (further loads are
 * counted, not kept); a process's rules go with fx_jitunw_forget() or when
 * idle. One thread only.
 */
#ifndef FXAGENT_JITUNW_H
#define FXAGENT_JITUNW_H

#include <stddef.h>
#include <stdint.h>

#include "fxagent/cfitab.h"

#define FX_JITUNW_REREAD_NS   (100ull * 1000 * 1000)
#define FX_JITUNW_REOPEN_NS   (1000ull * 1000 * 1000)
#define FX_JITUNW_READ_BYTES  (16u << 20)
#define FX_JITUNW_PROBE_LOADS 1000
#define FX_JITUNW_MAX_RANGES  (1u << 17)

struct fx_jitunw_stats {
	uint64_t procs;	       /* processes with a jitdump held now */
	uint64_t ranges;       /* code ranges with rules held now */
	uint64_t bytes;	       /* heap bytes of the rules and ranges */
	uint64_t records;      /* jitdump records read */
	uint64_t compiled;     /* distinct CFI compiled */
	uint64_t bad_cfi;      /* unwinding info libdw could not read (its code: no rule) */
	uint64_t over_bound;   /* loads past FX_JITUNW_MAX_RANGES */
	uint64_t refused;      /* jitdumps not opened (see fx_jitdump_open) */
	uint64_t idle_dropped; /* processes let go by fx_jitunw_drop_idle() */
	uint64_t found;	       /* lookups answered with a rule */
	uint64_t missed;       /* lookups without one */
};

struct fx_jitunw;

/* NULL on ENOMEM. */
struct fx_jitunw *fx_jitunw_new(void);
void fx_jitunw_free(struct fx_jitunw *j);

/* The rule for address @pc of process @pid's JIT code (for a return
 * address, the call's byte). 0 with *@out set, -ENOENT when no unwinding
 * information covers it. @image: the process's fx_proc.image (an exec
 * starts over). @now: CLOCK_MONOTONIC ns, which paces the reads. */
int fx_jitunw_find(struct fx_jitunw *j, uint32_t pid, uint64_t image, uint64_t pc, uint64_t now,
		   struct fx_cfi_rule *out);

/* Forgets process @pid (it exited or execed). */
void fx_jitunw_forget(struct fx_jitunw *j, uint32_t pid);

/* Sets the mark a lookup stamps on its process (the caller's count of
 * unwinds, as fx_cfitab_set_now()). */
void fx_jitunw_set_mark(struct fx_jitunw *j, uint64_t mark);
/* Forgets the processes not looked up after @mark. Returns how many. */
size_t fx_jitunw_drop_idle(struct fx_jitunw *j, uint64_t mark);

void fx_jitunw_get_stats(const struct fx_jitunw *j, struct fx_jitunw_stats *out);

#endif

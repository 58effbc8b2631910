/* SPDX-License-Identifier: MIT */
/* dwunwind: user-stack unwinding from a sample's registers and stack copy
 * through DWARF CFI (.eh_frame, else .debug_frame).
 *
 * Most samples are unwound with rules compiled from each object's .eh_frame
 * (cfitab.h), shared by every process that maps the object: a binary search
 * and a read or two from the stack copy per frame. A sample the rules cannot
 * walk whole (a frame they cannot express, code without .eh_frame) is
 * unwound again from the start with libdwfl, the reference.
 *
 * For libdwfl, one Dwfl per process is kept (a fresh one per sample costs ten times more),
 * its modules reported with the load bias of each mapping, and attached once
 * with callbacks that read the current sample's registers and stack copy. A
 * process that execs gets a new Dwfl; one that maps new code (dlopen) gets the
 * new modules added. The cache is bounded, least recently used out. Nothing
 * here looks for debug files or touches the network: CFI comes from the
 * binaries themselves.
 */
#ifndef FXAGENT_DWUNWIND_H
#define FXAGENT_DWUNWIND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "fxagent/cfitab.h"
#include "fxagent/jitunw.h"
#include "fxagent/objects.h"
#include "fxagent/procs.h"
#include "fxagent/record.h"

/* attr.sample_regs_user for x86-64: AX BX CX DX SI DI BP SP IP and R8-R15. */
#define FX_DWUNWIND_REGS_MASK 0xff01ffULL
/* DWARF x86-64 registers 0-16: rax rdx rcx rbx rsi rdi rbp rsp r8-r15 rip. */
#define FX_DWUNWIND_NREGS 17

/* How samples are unwound. */
enum fx_dwunwind_engine {
	FX_DWUNWIND_TABLES,  /* compiled rules; libdwfl for what they cannot walk */
	FX_DWUNWIND_LIBDWFL, /* libdwfl only (to compare, or should the rules be wrong);
			      * past a copy that ran out, the rules still walk on */
	FX_DWUNWIND_CHECK,   /* both for every sample, compared; the rules' answer is kept */
};

/* Bytes of a thread's stack read past the copy, at most, to walk on where
 * the copy ran out (fx_dwunwind_user()). */
#define FX_DWUNWIND_LIVE_BYTES (16u << 10)

/* Bytes of compiled rules kept (cfitab.h). */
#define FX_DWUNWIND_TABLE_BYTES (8u << 20)

struct fx_dwunwind_stats {
	uint64_t unwinds;    /* samples unwound */
	uint64_t by_tables;  /* walked whole by the compiled rules */
	uint64_t by_libdwfl; /* by libdwfl (the rules could not, or FX_DWUNWIND_LIBDWFL) */
	/* Why the rules could not: a frame's address in no mapping of the
	 * process (JIT code, a stale map), in an object without a table (no
	 * .eh_frame_hdr, no fd), with no rule there (no FDE, a signal frame, an
	 * expression), or a CFA from a register the rules do not follow. */
	uint64_t left_no_map, left_no_table, left_no_rule, left_register;
	/* Frames of JIT code walked by its runtime's unwinding information
	 * (jitunw.h), and by frame pointers where it had none. */
	uint64_t jit_by_cfi, jit_by_fp;
	/* FX_DWUNWIND_CHECK: samples compared, those with every frame the
	 * same (and the same truncation), libdwfl's frames, and of those the
	 * ones the rules gave too (the same address at the same depth, up to
	 * the first difference). */
	uint64_t check_samples, check_same, check_frames, check_frames_same;
	uint64_t dwfl_new;     /* Dwfl created (first sample, exec, eviction) */
	uint64_t dwfl_update;  /* modules added to a live Dwfl (dlopen) */
	uint64_t evicted;      /* Dwfl dropped for the cache bound */
	uint64_t idle_dropped; /* Dwfl dropped by fx_dwunwind_drop_idle() */
	uint64_t truncated;    /* unwinds that stopped before the outermost frame */
	/* Walks the copy could not hold (a frame bigger than what was left of
	 * it): those whose slot the kernel's frame-pointer chain names
	 * (stitched), and of them the ones walked on from the thread's memory
	 * to the outermost frame (stitch_live), those whose memory had moved
	 * on, given the chain's frames and the outermost ones from memory
	 * (stitch_outer), those given the frames the thread's last such
	 * sample found, its chain unchanged (stitch_cached), and those given
	 * the chain's frames alone (stitch_fp); and those with no link there
	 * (cut_no_link: code without frame pointers around the big frame). */
	uint64_t stitched, stitch_live, stitch_outer, stitch_cached, stitch_fp, cut_no_link;
	uint64_t no_regs; /* samples without user registers (kernel threads) */
	uint64_t ns;	  /* time spent unwinding, estimated from every 8th walk */
	uint64_t live;	  /* Dwfl held now (processes cached) */
};

struct fx_dwunwind;

/* @objs must outlive the unwinder. At most @max_procs Dwfl are kept.
 * NULL on ENOMEM. */
struct fx_dwunwind *fx_dwunwind_new(const struct fx_objects *objs, size_t max_procs,
				    enum fx_dwunwind_engine engine);
void fx_dwunwind_free(struct fx_dwunwind *d);

/* Unwinds the user stack of @s (sampled with FX_DWUNWIND_REGS_MASK and a
 * stack copy) in @proc. Writes up to @cap instruction addresses, innermost
 * first, return addresses already moved back into their call instruction.
 * Where the copy runs out before the outermost frame, the walk goes on from
 * the user part of @s's callchain (the kernel's frame-pointer walk at the
 * sample, when it was asked for) and the thread's memory, read with
 * process_vm_readv (at most FX_DWUNWIND_LIVE_BYTES) and checked against that
 * chain. Returns the count; sets *@truncated exactly when the frames do not
 * reach the outermost one (_start, a thread's start): no CFI, a copy that ran
 * out and could not be walked on, @cap reached. */
size_t fx_dwunwind_user(struct fx_dwunwind *d, const struct fx_proc *proc,
			const struct fx_record_sample *s, uint64_t *ips, size_t cap,
			bool *truncated);

/* Whether JIT code's own unwinding information is read from its runtime's
 * jitdump (jitunw.h; the config's symbolization.jit). Off: JIT code is
 * walked by frame pointers only. Off at first. */
void fx_dwunwind_set_jit(struct fx_dwunwind *d, bool on);

/* Drops the Dwfl of @pid (it exited). */
void fx_dwunwind_forget(struct fx_dwunwind *d, uint32_t pid);

/* A mark of now, for fx_dwunwind_drop_idle(). */
uint64_t fx_dwunwind_mark(const struct fx_dwunwind *d);
/* Drops every Dwfl and compiled table not used since @mark: a process that
 * stopped running gives its memory back (a Dwfl holds its modules' parsed
 * CFI, up to a few MiB) and is rebuilt if it runs again. Returns how many
 * Dwfl were dropped. */
size_t fx_dwunwind_drop_idle(struct fx_dwunwind *d, uint64_t mark);

void fx_dwunwind_get_stats(const struct fx_dwunwind *d, struct fx_dwunwind_stats *out);
/* The JIT unwinding information's figures (jitunw.h). */
void fx_dwunwind_jit_stats(const struct fx_dwunwind *d, struct fx_jitunw_stats *out);
/* The compiled tables' figures. */
void fx_dwunwind_table_stats(const struct fx_dwunwind *d, struct fx_cfitab_stats *out);

/* The @q-quantile (0 to 1) of the time one unwind took, in nanoseconds, to
 * 100 ns (200 us and above all count as 200 us), from every 8th unwind, the
 * first included. 0 before any unwind. */
uint64_t fx_dwunwind_quantile_ns(const struct fx_dwunwind *d, double q);

/* Orders the sampled registers (@regs, one per bit of @mask, lowest bit
 * first, as perf writes them) as DWARF registers 0-16. Returns 0, or -EINVAL
 * when @mask lacks one of them. */
int fx_dwunwind_dwarf_regs(const uint64_t *regs, uint64_t mask, uint64_t out[FX_DWUNWIND_NREGS]);

/* The load bias of a mapping [@start, ...) at file offset @pgoff of the ELF
 * file on @fd: @start minus the page-aligned p_vaddr of the PT_LOAD whose
 * page-aligned p_offset is @pgoff (executable segments first). 0 for ET_EXEC.
 * Returns 0, -ENOEXEC for a file that is not ELF, -ENOENT when no segment
 * maps @pgoff. */
int fx_dwunwind_load_bias(int fd, uint64_t start, uint64_t pgoff, uint64_t *bias);

#endif

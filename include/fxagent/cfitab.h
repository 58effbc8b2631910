/* SPDX-License-Identifier: MIT */
/* cfitab: call frame information compiled into rules, per object, for the
 * unwinder's fast path.
 *
 * Interpreting DWARF CFI for every frame of every sample is what made an
 * unwind cost about 12 us. On x86-64 nearly every row of CFI says one of a
 * few things: the CFA is rsp or rbp plus a constant (or, in a PLT, rsp plus 8
 * or 16 by the address; or, after a stack realignment, the word at rbp plus
 * a constant), the return address is at CFA - 8, rbp is unchanged or saved at
 * CFA plus a constant. So a row is compiled once into a 4-byte rule, and a
 * frame costs a binary search and one or two reads from the stack copy.
 *
 * A function is compiled on its first lookup, from the object's own
 * .eh_frame through libdw (dwarf_cfi_addrframe, row by row): only the code
 * that runs costs memory. Functions are found through .eh_frame_hdr's sorted
 * table. What a rule cannot express (signal frames, other expressions, a CFA
 * from another register past the first frame) is answered "ask libdwfl", and
 * so is an address no FDE of .eh_frame covers (.debug_frame, code without
 * CFI): the caller unwinds that sample with libdwfl, whose answer is the
 * reference (tests/integration/test_unwind_check.py compares the two). One
 * place without CFI is known for what it is: the entry point's code up to
 * the next FDE (ld.so's _start, which calls _dl_start: every process passes
 * there at exec) is the first frame, and a walk that reaches it is whole
 * where libdwfl calls it cut short.
 *
 * Tables are kept per object (build-id, so every process mapping a library
 * shares one), bounded in bytes, least recently used out, and dropped when
 * idle. One thread only.
 */
#ifndef FXAGENT_CFITAB_H
#define FXAGENT_CFITAB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "fxagent/objects.h"

enum fx_cfi_kind {
	FX_CFI_NONE = 0,      /* no rule here: ask libdwfl */
	FX_CFI_REG = 1,	      /* CFA = reg + off */
	FX_CFI_DEREF = 2,     /* CFA = *(reg + off) */
	FX_CFI_PLT = 3,	      /* CFA = rsp + 8, + 8 more when (rip & 15) >= off */
	FX_CFI_OUTERMOST = 4, /* the return address is undefined, or the entry point:
			       * the last frame */
	FX_CFI_FP = 5,	      /* CFA = rbp + off, a guess (JIT code without CFI): the
			       * walk checks that it climbs the stack */
};

/* The rule of one address. */
struct fx_cfi_rule {
	enum fx_cfi_kind kind;
	unsigned reg; /* DWARF register of the CFA's base (6 rbp, 7 rsp, ...) */
	int32_t off;  /* the CFA's offset (FX_CFI_PLT: the threshold) */
	int32_t rbp;  /* rbp saved at CFA + rbp; 0: rbp unchanged */
};

/* A rule from @start on: bytes from the start of a piece of JIT code. */
struct fx_cfi_row {
	uint32_t start;
	struct fx_cfi_rule rule;
};

/* Compiles the rules of a piece of JIT code of @code_size bytes from the
 * .eh_frame (@eh, @eh_len) and .eh_frame_hdr (@hdr, @hdr_len) its runtime
 * wrote for it (a jitdump's CODE_UNWINDING_INFO: laid out after the code,
 * the header's table giving the code's place). Through libdw, as an
 * object's rules are; at most @cap rows, equal neighbours merged, a range
 * without a rule a FX_CFI_NONE row. Returns the count of rows, -EINVAL when
 * the header is not the usual one (version 1, pc-relative .eh_frame
 * pointer, a table relative to itself) or libdw cannot read the CFI, or
 * -ENOMEM. */
int fx_cfitab_compile_jit(const uint8_t *eh, size_t eh_len, const uint8_t *hdr, size_t hdr_len,
			  uint64_t code_size, struct fx_cfi_row *rows, size_t cap);

struct fx_cfitab_stats {
	uint64_t objects;      /* tables held now */
	uint64_t bytes;	       /* their size */
	uint64_t peak_bytes;   /* the most they took */
	uint64_t functions;    /* functions compiled (since start) */
	uint64_t rows;	       /* rows compiled (since start) */
	uint64_t no_table;     /* objects without a table (no .eh_frame_hdr, unreadable) */
	uint64_t row_capped;   /* functions cut at the row bound (cfitab.c), the rest libdwfl's */
	uint64_t evicted;      /* tables dropped for the byte bound */
	uint64_t idle_dropped; /* tables dropped by fx_cfitab_drop_idle() */
	uint64_t compile_ns;   /* time spent compiling */
};

struct fx_cfitab;

/* @objs must outlive the cache. At most @max_bytes of tables are kept (a
 * table over it is still built, and evicts every other). NULL on ENOMEM. */
struct fx_cfitab *fx_cfitab_new(const struct fx_objects *objs, size_t max_bytes);
void fx_cfitab_free(struct fx_cfitab *t);

/* The rule for file offset @off of object @object: 0 with *@out set (its
 * kind may be FX_CFI_NONE), -ENOENT when the object has no table. */
int fx_cfitab_find(struct fx_cfitab *t, uint32_t object, uint64_t off, struct fx_cfi_rule *out);

/* Whether file offset @off of object @object is in an outermost frame
 * (_start, clone3's child: the return address undefined): 1 yes, 0 no, -1
 * not known (the object has no table: .debug_frame only, no fd). */
int fx_cfitab_outermost(struct fx_cfitab *t, uint32_t object, uint64_t off);

/* Sets the time a lookup stamps on the table it uses: the caller's count of
 * unwinds, say, so that one mark serves it and this cache. */
void fx_cfitab_set_now(struct fx_cfitab *t, uint64_t now);
/* Drops every table not used after @mark (a value given to
 * fx_cfitab_set_now()); it is rebuilt if needed again. Objects found to have
 * no table are tried again after this. The tables kept give back the pages
 * of their files that compiling read. Returns how many were dropped. */
size_t fx_cfitab_drop_idle(struct fx_cfitab *t, uint64_t mark);

void fx_cfitab_get_stats(const struct fx_cfitab *t, struct fx_cfitab_stats *out);

#endif

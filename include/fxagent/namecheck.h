/* SPDX-License-Identifier: MIT */
/* namecheck: the names the symbolizer gave, checked against a reading of the
 * object of its own, as `--unwind check` checks stacks against libdwfl.
 *
 * Nothing of the symbolizer's tables or caches is used: the file is opened
 * again and its .symtab and .dynsym (and the debug file's .symtab), its
 * .plt sections, its .eh_frame_hdr table and its DWARF subprograms are read
 * for each call. A name is right when:
 * - from a symbol table: a symbol of that name (raw or demangled) covers the
 *   address: [start, start + size), or, unsized, up to the next symbol;
 * - "NAME@plt": the address lies in .plt or .plt.sec;
 * - from DWARF (no symbol covers the address): a subprogram whose ranges hold
 *   the address has that name; an inline level, an inlined subroutine there;
 * - "<file>+0x<start>" (no_symbol): no symbol covers the address, and the
 *   .eh_frame_hdr function that holds it starts at that file offset.
 * Addresses given no name ("<file>+0x<address>") are counted as unnamed,
 * not judged. Slow by design (a mode for tests and a fleet's self-check,
 * --check-names), never on by default.
 */
#ifndef FXAGENT_NAMECHECK_H
#define FXAGENT_NAMECHECK_H

#include <stddef.h>
#include <stdint.h>

#include "fxagent/symbolize.h"

struct fx_namecheck_stats {
	uint64_t checked; /* names judged (each inline level counts) */
	uint64_t wrong;	  /* of those, names of a function that does not hold the address */
	uint64_t unnamed; /* addresses left unnamed: not judged */
};

/* Judges @res[0..@n) that fx_symbolizer_resolve() gave for @src (the same fd
 * or path; @debug_path: the debug file fx_symbolizer_origin() named, or
 * NULL). Adds to @st. The first *@log_left wrong names are logged at
 * warning level with the object, the address, the name and what the object
 * says is there; *@log_left counts down. Returns 0, or -errno when the
 * object cannot be read again (nothing judged). */
int fx_namecheck(const struct fx_elf_source *src, const char *debug_path,
		 const struct fx_sym_result *res, size_t n, unsigned *log_left,
		 struct fx_namecheck_stats *st);

#endif

/* SPDX-License-Identifier: MIT */
#include "fxagent/demangle.h"

#include <demangle.h>
#include <stddef.h>

char *fx_demangle(const char *name)
{
	/* Only names with a mangling prefix: cplus_demangle() in AUTO style would
	 * also try other schemes (GNAT, D) on plain C names. */
	if (!name || name[0] != '_' || (name[1] != 'Z' && name[1] != 'R'))
		return NULL;
	/* AUTO style tries Rust first (legacy _ZN...E and v0 _R...), then the
	 * Itanium C++ ABI. Without DMGL_VERBOSE the Rust legacy hash suffix
	 * "::h<16 hex>" is left out. */
	return cplus_demangle(name, DMGL_PARAMS | DMGL_ANSI);
}

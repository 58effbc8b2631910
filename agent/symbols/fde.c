/* SPDX-License-Identifier: MIT */
/* Function ranges of a stripped object, from its .eh_frame_hdr: `strip`
 * keeps the call frame information, one FDE per function, and the linker's
 * .eh_frame_hdr lists every FDE's start, sorted. An address without a
 * symbol then belongs to the function that starts last at or before it, and
 * every sample in that function shares one frame ("libfoo.so+0x1a2b0", the
 * function's start) instead of one frame per address. A function runs to
 * the next one's start (what lies between is alignment padding, never run);
 * the last one to its FDE's pc_range.
 *
 * Cheap by design, as it is paid for every stripped object read: only the
 * table is read (fx_elf_read_fdes(), shared with the unwinder's compiled
 * rules), and kept as 4 bytes a function. (libdw's CFI reader
 * gives the range of a frame row, not of the FDE, and reads all of
 * .eh_frame.) */
#include "symbols_int.h"

#include <errno.h>

#include "fxagent/search.h"

int sym_load_fdes(struct object *o, Elf *elf, int fd)
{
	struct fx_elf_fdes t;
	int ret = fx_elf_read_fdes(elf, fd, o->base, MAX_FUNCS, &t);

	if (ret < 0)
		return ret == -ENOMEM ? ret : 0;
	o->fde_starts = t.starts;
	o->n_fdes = t.n;
	o->fde_last_end = t.last_end;
	return 0;
}

bool sym_lookup_fde(const struct object *o, uint64_t addr, struct fde_range *out)
{
	size_t i;

	if (!o->n_fdes || addr < o->base || addr - o->base > UINT32_MAX)
		return false;
	i = fx_search_last_le_u32(o->fde_starts, o->n_fdes, (uint32_t)(addr - o->base));
	if (i == SIZE_MAX)
		return false;
	out->start = o->base + o->fde_starts[i];
	out->end = i + 1 < o->n_fdes ? o->base + o->fde_starts[i + 1] : o->fde_last_end;
	return addr < out->end;
}

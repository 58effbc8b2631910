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
 * table is read (8 bytes a function, through a buffer on the stack, not a
 * copy of the section), and kept as 4 bytes a function. (libdw's CFI reader
 * gives the range of a frame row, not of the FDE, and reads all of
 * .eh_frame.) */
#include "symbols_int.h"

#include <dwarf.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fxagent/search.h"

/* .eh_frame_hdr as GNU ld and lld write it: version 1, the table's entries
 * two signed 4-byte offsets from the header's start. */
#define EH_HDR_VERSION		1
#define EH_TABLE_DATAREL_SDATA4 (DW_EH_PE_datarel | DW_EH_PE_sdata4)
#define EH_COUNT_UDATA4		DW_EH_PE_udata4
#define EH_HDR_SIZE		12
#define EH_ENTRY_SIZE		8
/* Table entries read at a time. */
#define READ_ENTRIES 4096

static int32_t read_s32(const unsigned char *p)
{
	int32_t v;

	memcpy(&v, p, sizeof(v));
	return v;
}

static bool read_at(int fd, void *buf, size_t len, uint64_t off)
{
	return pread(fd, buf, len, (off_t)off) == (ssize_t)len;
}

/* The end of the last function: its FDE's pc_begin + pc_range, read in the
 * encoding GCC and Clang write on x86-64 (pc-relative signed 4 bytes, then 4
 * bytes of range) and used only when pc_begin is @start; else 0. */
static uint64_t last_end(Elf *elf, int fd, uint64_t fde_addr, uint64_t start)
{
	GElf_Shdr esh;
	unsigned char p[16];
	uint32_t len, range;

	if (!sym_find_section(elf, ".eh_frame", &esh) || esh.sh_type != SHT_PROGBITS ||
	    esh.sh_size < sizeof(p) || fde_addr < esh.sh_addr ||
	    fde_addr - esh.sh_addr > esh.sh_size - sizeof(p) ||
	    !read_at(fd, p, sizeof(p), esh.sh_offset + (fde_addr - esh.sh_addr)))
		return 0;
	memcpy(&len, p, sizeof(len));
	memcpy(&range, p + 12, sizeof(range));
	if (len == 0xffffffffu || len < 12 ||
	    fde_addr + 8 + (uint64_t)(int64_t)read_s32(p + 8) != start)
		return 0;
	return range ? start + range : 0;
}

int sym_load_fdes(struct object *o, Elf *elf, int fd)
{
	unsigned char hdr[EH_HDR_SIZE], buf[READ_ENTRIES * EH_ENTRY_SIZE];
	GElf_Shdr sh;
	uint32_t count, *v;
	uint64_t prev = 0, last_fde = 0, at;
	size_t k = 0;

	if (!sym_find_section(elf, ".eh_frame_hdr", &sh) || sh.sh_type != SHT_PROGBITS ||
	    sh.sh_size < EH_HDR_SIZE || !read_at(fd, hdr, sizeof(hdr), sh.sh_offset))
		return 0;
	/* version, eh_frame_ptr encoding, fde_count encoding, table encoding;
	 * then the eh_frame pointer (4 bytes in every form we read), the count */
	if (hdr[0] != EH_HDR_VERSION || hdr[2] != EH_COUNT_UDATA4 ||
	    hdr[3] != EH_TABLE_DATAREL_SDATA4 || (hdr[1] & 0x0f) != DW_EH_PE_sdata4)
		return 0;
	memcpy(&count, hdr + 8, sizeof(count));
	if (!count || count > MAX_FUNCS || (sh.sh_size - EH_HDR_SIZE) / EH_ENTRY_SIZE < count)
		return 0;
	v = malloc(count * sizeof(*v));
	if (!v)
		return -ENOMEM;
	at = sh.sh_offset + EH_HDR_SIZE;
	for (uint32_t i = 0; i < count;) {
		uint32_t n = count - i < READ_ENTRIES ? count - i : READ_ENTRIES;

		if (!read_at(fd, buf, (size_t)n * EH_ENTRY_SIZE, at))
			goto none;
		at += (uint64_t)n * EH_ENTRY_SIZE;
		for (uint32_t j = 0; j < n; j++, i++) {
			uint64_t start = sh.sh_addr + (uint64_t)(int64_t)read_s32(buf + 8 * j);

			/* Kept relative to the image base in 4 bytes; an
			 * object larger than that is not grouped. */
			if (start < o->base || start - o->base > UINT32_MAX)
				goto none;
			/* a table out of order is not trusted */
			if (k && start <= prev)
				goto none;
			prev = start;
			last_fde = sh.sh_addr + (uint64_t)(int64_t)read_s32(buf + 8 * j + 4);
			v[k++] = (uint32_t)(start - o->base);
		}
	}
	o->fde_last_end = last_end(elf, fd, last_fde, prev);
	if (!o->fde_last_end || o->fde_last_end - o->base > UINT32_MAX)
		o->fde_last_end = prev + 1;
	o->fde_starts = v;
	o->n_fdes = k;
	return 0;
none:
	free(v);
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

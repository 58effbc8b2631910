/* SPDX-License-Identifier: MIT */
/* Function ranges of a stripped object, from its .eh_frame: `strip` keeps
 * the call frame information, one FDE per function. An address without a
 * symbol then belongs to the function its FDE covers, and every sample in
 * that function shares one frame ("libfoo.so+0x1a2b0", the function's start)
 * instead of one frame per address. The starts come from .eh_frame_hdr's
 * sorted table; each FDE's end from its own pc_begin and pc_range, read in
 * the encoding GCC and Clang write on x86-64 (pc-relative signed 4 bytes,
 * then 4 bytes of range) and used only when pc_begin matches the table's
 * start. (libdw's CFI reader gives the range of a frame row, not of the FDE;
 * the FDE entries it iterates leave the pointer decoding to the caller.)
 * Where it does not match, the next function's start ends the range. */
#include "symbols_int.h"

#include <dwarf.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "fxagent/search.h"

/* .eh_frame_hdr as GNU ld and lld write it: version 1, the table's entries
 * two signed 4-byte offsets from the header's start. */
#define EH_HDR_VERSION		1
#define EH_TABLE_DATAREL_SDATA4 (DW_EH_PE_datarel | DW_EH_PE_sdata4)
#define EH_COUNT_UDATA4		DW_EH_PE_udata4
#define EH_PTR_SIZE		4

static int32_t read_s32(const unsigned char *p)
{
	int32_t v;

	memcpy(&v, p, sizeof(v));
	return v;
}

/* The end of the function whose FDE is at @fde_addr (in .eh_frame @ef, at
 * @ef_addr) and starts at @start, or 0 when the FDE is not in the form read
 * or does not say @start. */
static uint64_t fde_end(const Elf_Data *ef, uint64_t ef_addr, uint64_t fde_addr, uint64_t start)
{
	const unsigned char *p;
	uint32_t len, range;
	uint64_t off;

	if (!ef || fde_addr < ef_addr || fde_addr - ef_addr > ef->d_size ||
	    ef->d_size - (fde_addr - ef_addr) < 16)
		return 0;
	off = fde_addr - ef_addr;
	p = (const unsigned char *)ef->d_buf + off;
	memcpy(&len, p, sizeof(len));
	/* length, CIE pointer, pc_begin, pc_range: 12 bytes after the length */
	if (len == 0xffffffffu || len < 12 || len > ef->d_size - off - 4)
		return 0;
	if (fde_addr + 8 + (uint64_t)(int64_t)read_s32(p + 8) != start)
		return 0;
	memcpy(&range, p + 12, sizeof(range));
	return range ? start + range : 0;
}

int sym_load_fdes(struct object *o, Elf *elf)
{
	GElf_Shdr sh, esh;
	Elf_Scn *scn = sym_find_section(elf, ".eh_frame_hdr", &sh);
	Elf_Scn *escn = sym_find_section(elf, ".eh_frame", &esh);
	Elf_Data *d = scn ? elf_getdata(scn, NULL) : NULL;
	Elf_Data *ef = escn && esh.sh_type == SHT_PROGBITS ? elf_getdata(escn, NULL) : NULL;
	const unsigned char *p;
	uint32_t count;
	size_t k = 0;

	if (!d || !d->d_buf || sh.sh_type != SHT_PROGBITS || d->d_size < 12 || (ef && !ef->d_buf))
		return 0;
	p = d->d_buf;
	/* version, eh_frame_ptr encoding, fde_count encoding, table encoding;
	 * then the eh_frame pointer (4 bytes in every form we read) */
	if (p[0] != EH_HDR_VERSION || p[2] != EH_COUNT_UDATA4 || p[3] != EH_TABLE_DATAREL_SDATA4 ||
	    (p[1] & 0x0f) != DW_EH_PE_sdata4)
		return 0;
	memcpy(&count, p + 4 + EH_PTR_SIZE, sizeof(count));
	if (!count || count > MAX_FUNCS || (d->d_size - 12) / 8 < count)
		return 0;
	o->fdes = malloc(count * sizeof(*o->fdes));
	if (!o->fdes)
		return -ENOMEM;
	for (uint32_t i = 0; i < count; i++) {
		const unsigned char *e = p + 12 + 8 * (size_t)i;
		uint64_t start = sh.sh_addr + (uint64_t)(int64_t)read_s32(e);
		uint64_t fde = sh.sh_addr + (uint64_t)(int64_t)read_s32(e + 4);
		uint64_t end = fde_end(ef, esh.sh_addr, fde, start);

		/* without its own end, the next function's start */
		if (!end && i + 1 < count)
			end = sh.sh_addr + (uint64_t)(int64_t)read_s32(e + 8);
		/* a table out of order or overlapping is skipped, not trusted */
		if (end <= start || (k && start < o->fdes[k - 1].end))
			continue;
		o->fdes[k++] = (struct fde_range){ .start = start, .end = end };
	}
	o->n_fdes = k;
	return 0;
}

const struct fde_range *sym_lookup_fde(const struct object *o, uint64_t addr)
{
	size_t i = FX_SEARCH_LAST_LE(o->fdes, o->n_fdes, start, addr);

	if (i == SIZE_MAX || addr >= o->fdes[i].end)
		return NULL;
	return &o->fdes[i];
}

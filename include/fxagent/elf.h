/* SPDX-License-Identifier: MIT */
/* elf: small helpers over libelf shared by the object table and the symbolizer. */
#ifndef FXAGENT_ELF_H
#define FXAGENT_ELF_H

#include <gelf.h>
#include <stddef.h>
#include <stdint.h>

#define FX_BUILD_ID_MAX 64

/* Sets up libelf (elf_version) once per process; call it before any other
 * libelf or libdw function. Thread-safe, cheap after the first call. */
void fx_elf_init(void);

/* Reads the GNU build-id note of the ELF file open on @fd (read with pread;
 * the file offset is not used, the fd is not consumed). On success writes up to
 * @cap bytes to @out and returns the build-id length (> 0). Returns -ENOENT when
 * the file has no build-id, -ENOEXEC when it is not a readable ELF file. */
int fx_elf_build_id_fd(int fd, uint8_t *out, size_t cap);

/* Opens @path read-only (O_CLOEXEC) if it is a regular file, and never opens
 * anything else: a path a binary or a process names may be a FIFO (whose open
 * blocks for ever) or a device (whose open may act). Returns the fd, -ENOEXEC
 * when @path is no regular file, or -errno. */
int fx_elf_open_regular(const char *path);

/* The section named @name, its header in *@sh_out if not NULL; NULL when
 * there is none. */
Elf_Scn *fx_elf_section(Elf *elf, const char *name, GElf_Shdr *sh_out);

/* The functions .eh_frame_hdr lists: `strip` keeps the call frame
 * information, one FDE per function, and the linker's .eh_frame_hdr lists
 * every FDE's start, sorted. */
struct fx_elf_fdes {
	uint32_t *starts; /* malloc'ed: each FDE's start minus the base, sorted */
	size_t n;
	uint64_t last_end; /* the last FDE's end (pc_begin + pc_range), an address */
};

/* Reads the table of .eh_frame_hdr (as GNU ld and lld write it) of the ELF
 * file @elf open on @fd, through a buffer on the stack (8 bytes a function,
 * not a copy of the section). Starts are kept relative to @base in 4 bytes.
 * Returns 0, -ENOENT when there is no table or it is not one we read (other
 * encodings, out of order, more than @max entries, an address below @base or
 * 4 GiB above it), or -ENOMEM. */
int fx_elf_read_fdes(Elf *elf, int fd, uint64_t base, uint32_t max, struct fx_elf_fdes *out);

/* Formats @len bytes of @id as lower-case hex into @out (2 * len + 1 bytes). */
void fx_elf_hex(const uint8_t *id, size_t len, char *out);

#endif

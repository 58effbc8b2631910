/* SPDX-License-Identifier: MIT */
#include "fxagent/elf.h"

#include <dwarf.h>
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static pthread_once_t elf_once = PTHREAD_ONCE_INIT;

static void elf_init_once(void)
{
	elf_version(EV_CURRENT);
}

void fx_elf_init(void)
{
	pthread_once(&elf_once, elf_init_once);
}

/* Scans one block of notes for NT_GNU_BUILD_ID. Returns the length, or 0. */
static int build_id_in(Elf_Data *data, uint8_t *out, size_t cap)
{
	GElf_Nhdr nhdr;
	size_t pos = 0, name_off, desc_off, next;

	while (pos < data->d_size) {
		next = gelf_getnote(data, pos, &nhdr, &name_off, &desc_off);
		if (next == 0 || next <= pos)
			break;
		if (nhdr.n_type == NT_GNU_BUILD_ID && nhdr.n_namesz == sizeof(ELF_NOTE_GNU) &&
		    memcmp((const char *)data->d_buf + name_off, ELF_NOTE_GNU,
			   sizeof(ELF_NOTE_GNU)) == 0 &&
		    nhdr.n_descsz > 0) {
			size_t len = nhdr.n_descsz < cap ? nhdr.n_descsz : cap;

			memcpy(out, (const char *)data->d_buf + desc_off, len);
			return (int)len;
		}
		pos = next;
	}
	return 0;
}

int fx_elf_build_id_fd(int fd, uint8_t *out, size_t cap)
{
	Elf *elf;
	Elf_Scn *scn = NULL;
	size_t i, nphdr;
	int ret = 0;

	fx_elf_init();
	/* ELF_C_READ reads with pread: no mmap of a file another process may truncate. */
	elf = elf_begin(fd, ELF_C_READ, NULL);
	if (!elf)
		return -ENOEXEC;
	if (elf_kind(elf) != ELF_K_ELF) {
		ret = -ENOEXEC;
		goto out;
	}
	/* Program headers first: a stripped debug file keeps its notes there too. */
	if (elf_getphdrnum(elf, &nphdr) == 0) {
		for (i = 0; i < nphdr && ret == 0; i++) {
			GElf_Phdr ph;
			Elf_Data *d;

			if (!gelf_getphdr(elf, (int)i, &ph) || ph.p_type != PT_NOTE)
				continue;
			d = elf_getdata_rawchunk(elf, (int64_t)ph.p_offset, ph.p_filesz,
						 ph.p_align == 8 ? ELF_T_NHDR8 : ELF_T_NHDR);
			if (d)
				ret = build_id_in(d, out, cap);
		}
	}
	while (ret == 0 && (scn = elf_nextscn(elf, scn)) != NULL) {
		GElf_Shdr sh;
		Elf_Data *d;

		if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_NOTE)
			continue;
		d = elf_getdata(scn, NULL);
		if (d)
			ret = build_id_in(d, out, cap);
	}
	if (ret == 0) {
		if (elf_getphdrnum(elf, &nphdr) != 0 && elf_nextscn(elf, NULL) == NULL)
			ret = -ENOEXEC;
		else
			ret = -ENOENT;
	}
out:
	elf_end(elf);
	return ret;
}

int fx_elf_open_regular(const char *path)
{
	char proc[64];
	struct stat st;
	int pfd, fd;

	/* An O_PATH fd opens neither a FIFO nor a device; it is reopened
	 * through /proc once known to be a regular file. */
	pfd = open(path, O_PATH | O_CLOEXEC);
	if (pfd < 0)
		return -errno;
	if (fstat(pfd, &st) != 0 || !S_ISREG(st.st_mode)) {
		close(pfd);
		return -ENOEXEC;
	}
	snprintf(proc, sizeof(proc), "/proc/self/fd/%d", pfd);
	fd = open(proc, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		fd = -errno;
	close(pfd);
	return fd;
}

void fx_elf_hex(const uint8_t *id, size_t len, char *out)
{
	static const char digits[] = "0123456789abcdef";
	size_t i;

	for (i = 0; i < len; i++) {
		out[2 * i] = digits[id[i] >> 4];
		out[2 * i + 1] = digits[id[i] & 0xf];
	}
	out[2 * len] = '\0';
}

Elf_Scn *fx_elf_section(Elf *elf, const char *name, GElf_Shdr *sh_out)
{
	Elf_Scn *scn = NULL;
	size_t shstrndx;

	if (elf_getshdrstrndx(elf, &shstrndx) != 0)
		return NULL;
	while ((scn = elf_nextscn(elf, scn)) != NULL) {
		GElf_Shdr sh;
		const char *n;

		if (!gelf_getshdr(scn, &sh))
			continue;
		n = elf_strptr(elf, shstrndx, sh.sh_name);
		if (n && strcmp(n, name) == 0) {
			if (sh_out)
				*sh_out = sh;
			return scn;
		}
	}
	return NULL;
}

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

	if (!fx_elf_section(elf, ".eh_frame", &esh) || esh.sh_type != SHT_PROGBITS ||
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

int fx_elf_read_fdes(Elf *elf, int fd, uint64_t base, uint32_t max, struct fx_elf_fdes *out)
{
	unsigned char hdr[EH_HDR_SIZE], buf[READ_ENTRIES * EH_ENTRY_SIZE];
	GElf_Shdr sh;
	uint32_t count, *v;
	uint64_t prev = 0, last_fde = 0, at;
	size_t k = 0;

	memset(out, 0, sizeof(*out));
	if (!fx_elf_section(elf, ".eh_frame_hdr", &sh) || sh.sh_type != SHT_PROGBITS ||
	    sh.sh_size < EH_HDR_SIZE || !read_at(fd, hdr, sizeof(hdr), sh.sh_offset))
		return -ENOENT;
	/* version, eh_frame_ptr encoding, fde_count encoding, table encoding;
	 * then the eh_frame pointer (4 bytes in every form we read), the count */
	if (hdr[0] != EH_HDR_VERSION || hdr[2] != EH_COUNT_UDATA4 ||
	    hdr[3] != EH_TABLE_DATAREL_SDATA4 || (hdr[1] & 0x0f) != DW_EH_PE_sdata4)
		return -ENOENT;
	memcpy(&count, hdr + 8, sizeof(count));
	if (!count || count > max || (sh.sh_size - EH_HDR_SIZE) / EH_ENTRY_SIZE < count)
		return -ENOENT;
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

			if (start < base || start - base > UINT32_MAX)
				goto none;
			/* a table out of order is not trusted */
			if (k && start <= prev)
				goto none;
			prev = start;
			last_fde = sh.sh_addr + (uint64_t)(int64_t)read_s32(buf + 8 * j + 4);
			v[k++] = (uint32_t)(start - base);
		}
	}
	out->last_end = last_end(elf, fd, last_fde, prev);
	if (!out->last_end || out->last_end - base > UINT32_MAX)
		out->last_end = prev + 1;
	out->starts = v;
	out->n = k;
	return 0;
none:
	free(v);
	return -ENOENT;
}

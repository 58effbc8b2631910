/* SPDX-License-Identifier: MIT */
#include "fxagent/elf.h"

#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <pthread.h>
#include <stdio.h>
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

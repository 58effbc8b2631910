/* SPDX-License-Identifier: MIT */
/* The ELF files of the symbolizer: opening one, its sections, and finding
 * the separate debug file of an object (by build-id, by .gnu_debuglink, by
 * path under the debug dirs). */
#include "symbols_int.h"

#include <errno.h>
#include <gelf.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "fxagent/debuginfod.h"
#include "fxagent/log.h"

/* The path comes from a binary (its debug link) or a process: only a regular
 * file is opened. */
int sym_open_elf(const char *path, int *fd_out, Elf **elf_out)
{
	int fd = fx_elf_open_regular(path);
	Elf *elf;

	if (fd < 0)
		return fd;
	/* ELF_C_READ reads with pread into memory: a file truncated under us
	 * cannot raise SIGBUS as a mapping would. */
	elf = elf_begin(fd, ELF_C_READ, NULL);
	if (!elf || elf_kind(elf) != ELF_K_ELF) {
		elf_end(elf);
		close(fd);
		return -ENOEXEC;
	}
	*fd_out = fd;
	*elf_out = elf;
	return 0;
}

void sym_close_elf(int *fd, Elf **elf)
{
	if (*elf)
		elf_end(*elf);
	*elf = NULL;
	if (*fd >= 0)
		close(*fd);
	*fd = -1;
}

bool sym_has_dwarf(Elf *elf)
{
	GElf_Shdr sh;

	if (fx_elf_section(elf, ".debug_info", &sh) && sh.sh_type != SHT_NOBITS && sh.sh_size)
		return true;
	return fx_elf_section(elf, ".zdebug_info", &sh) && sh.sh_type != SHT_NOBITS;
}

static uint32_t file_crc32(int fd)
{
	unsigned char buf[65536];
	uLong crc = crc32(0L, Z_NULL, 0);
	off_t pos = 0;
	ssize_t r;

	while ((r = pread(fd, buf, sizeof(buf), pos)) > 0) {
		crc = crc32(crc, buf, (uInt)r);
		pos += r;
	}
	return (uint32_t)crc;
}

static int try_debug_file(const char *path, const struct debug_want *w, int *fd_out, Elf **elf_out)
{
	uint8_t id[FX_BUILD_ID_MAX];
	struct stat st;
	int fd = -1, len, ret;
	Elf *elf = NULL;

	ret = sym_open_elf(path, &fd, &elf);
	if (ret)
		return ret;
	if (fstat(fd, &st) == 0 && st.st_dev == w->dev && st.st_ino == w->ino)
		goto reject;
	if (w->id) {
		len = fx_elf_build_id_fd(fd, id, sizeof(id));
		if (len != (int)w->id_len || memcmp(id, w->id, w->id_len) != 0)
			goto reject;
	} else if (w->check_crc && file_crc32(fd) != w->crc) {
		goto reject;
	}
	fx_debug("symbolize: debug file '%s'", path);
	if (w->found)
		snprintf(w->found, PATH_MAX, "%s", path);
	*fd_out = fd;
	*elf_out = elf;
	return 0;
reject:
	sym_close_elf(&fd, &elf);
	return -ENOENT;
}

/* Reads .gnu_debuglink: the debug file's base name and the CRC of its contents. */
static bool read_debuglink(Elf *elf, char *name, size_t cap, uint32_t *crc)
{
	Elf_Scn *scn = fx_elf_section(elf, ".gnu_debuglink", NULL);
	Elf_Data *d;
	size_t len, crc_off;

	if (!scn)
		return false;
	d = elf_getdata(scn, NULL);
	if (!d || !d->d_buf || d->d_size < 5)
		return false;
	len = strnlen(d->d_buf, d->d_size);
	crc_off = (len + 4) & ~(size_t)3;
	if (len == 0 || len >= cap || crc_off + 4 > d->d_size)
		return false;
	memcpy(name, d->d_buf, len);
	name[len] = '\0';
	/* A base name only: the binary must not steer us to arbitrary paths. */
	if (strchr(name, '/') || strcmp(name, ".") == 0 || strcmp(name, "..") == 0)
		return false;
	memcpy(crc, (const char *)d->d_buf + crc_off, 4);
	if (elf_getident(elf, NULL) && elf_getident(elf, NULL)[EI_DATA] != ELFDATA2LSB)
		*crc = __builtin_bswap32(*crc);
	return true;
}

/* Formats a candidate path and tries it; a path too long is no candidate. */
int __attribute__((format(printf, 4, 5)))
sym_try_debug_path(const struct debug_want *w, int *fd_out, Elf **elf_out, const char *fmt, ...)
{
	char buf[PATH_MAX];
	va_list ap;
	int len;

	va_start(ap, fmt);
	len = vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	if (len < 0 || (size_t)len >= sizeof(buf))
		return -ENAMETOOLONG;
	return try_debug_file(buf, w, fd_out, elf_out);
}

int sym_find_debug_file(struct fx_symbolizer *s, const char *path, Elf *elf, const uint8_t *id,
			size_t id_len, const struct stat *st, int *fd_out, Elf **elf_out,
			char *found)
{
	struct debug_want w = {
		.id = id, .id_len = id_len, .dev = st->st_dev, .ino = st->st_ino, .found = found
	};
	char hex[2 * FX_BUILD_ID_MAX + 1], link[256];
	char **d;
	const char *slash;
	int dir_len;
	uint32_t crc;

	if (id && id_len >= 2) {
		fx_elf_hex(id, id_len, hex);
		for (d = s->debug_dirs; *d; d++) {
			if (!sym_try_debug_path(&w, fd_out, elf_out, "%s/.build-id/%.2s/%s.debug",
						*d, hex, hex + 2))
				return 0;
		}
	}
	if (!path || !*path)
		return -ENOENT;
	slash = strrchr(path, '/');
	dir_len = slash ? (int)(slash - path) : 1;
	if (!slash)
		path = ".";
	if (read_debuglink(elf, link, sizeof(link), &crc)) {
		w.check_crc = !id;
		w.crc = crc;
		if (!sym_try_debug_path(&w, fd_out, elf_out, "%.*s/%s", dir_len, path, link) ||
		    !sym_try_debug_path(&w, fd_out, elf_out, "%.*s/.debug/%s", dir_len, path, link))
			return 0;
		for (d = s->debug_dirs; *d; d++) {
			if (!sym_try_debug_path(&w, fd_out, elf_out, "%s%.*s/%s", *d, dir_len, path,
						link))
				return 0;
		}
	}
	if (path[0] == '/' && (id || w.check_crc)) {
		for (d = s->debug_dirs; *d; d++) {
			if (!sym_try_debug_path(&w, fd_out, elf_out, "%s%s.debug", *d, path))
				return 0;
		}
	}
	return -ENOENT;
}

int sym_fetch_debug_file(struct fx_symbolizer *s, const uint8_t *id, size_t id_len,
			 const struct stat *st, int *fd_out, Elf **elf_out, char *found)
{
	struct debug_want w = {
		.id = id, .id_len = id_len, .dev = st->st_dev, .ino = st->st_ino, .found = found
	};
	char path[PATH_MAX];
	int fd;

	if (!s->dbgd || !id || id_len < 2)
		return -ENOENT;
	fd = fx_debuginfod_find(s->dbgd, id, id_len, path, sizeof(path));
	if (fd < 0)
		return fd;
	close(fd);
	/* Opened again as every debug file is: a regular file, an ELF file
	 * with the object's build-id. */
	return sym_try_debug_path(&w, fd_out, elf_out, "%s", path);
}

/* SPDX-License-Identifier: MIT */
/* Inflated copies of debug files, to be mapped instead of read into the heap.
 *
 * libdw reads every debug section whole when a Dwarf begins, and inflates
 * the compressed ones: libc's debug file from libc6-dbg is 4 MB on disk and
 * 10 MB in the heap, for as long as the agent keeps it. Here such a file is
 * written once, its debug sections inflated, to a file of the agent's
 * (<cache>/<build-id>-<source>.debug, 0600, in a 0700 directory) and mapped
 * read-only: its pages come from the page cache as look-ups touch them and
 * leave the agent's memory when the object is parked after each window
 * (madvise MADV_DONTNEED; see sym_park_dwarf).
 *
 * Mapped, not read: only a file of the agent's own, which no one else can
 * truncate under the mapping (a binary's own file could: SIGBUS). The name
 * holds the source file's identity (device, inode, size, mtime) besides the
 * build-id, so that a container's file claiming libc's build-id gets a copy
 * of its own, never libc's. The copy is written by hand (ELF64 header,
 * sections, section table: small and ours), read back by libelf and libdw
 * like any debug file. The files share the debuginfod cache's bound. */
#include "symbols_int.h"

#include <dwarf.h>
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "fxagent/debuginfod.h"
#include "fxagent/hash.h"
#include "fxagent/log.h"
#include "fxagent/trust.h"

#define MAX_SECTIONS 64
#define SECTION_MAX  ((uint64_t)1 << 32)
#define COPY_CHUNK   (64 * 1024)
#define SHSTRTAB_MAX 4096
/* A copy's bound when the cache has none: a crafted header cannot ask more. */
#define TOTAL_MAX ((uint64_t)4 << 30)

struct out_section {
	const char *name;
	GElf_Shdr sh;  /* of the source */
	uint64_t size; /* written */
	uint64_t align;
	uint64_t at;	  /* offset in the copy */
	uint32_t name_at; /* in the copy's .shstrtab */
	bool zlib;	  /* ELFCOMPRESS_ZLIB: inflated on the way */
};

static bool kept_section(const char *n)
{
	return strncmp(n, ".debug_", 7) == 0 || strcmp(n, ".gnu_debugaltlink") == 0 ||
	       strcmp(n, ".note.gnu.build-id") == 0;
}

/* The sections to copy, in @v. Returns their count, or -ENOTSUP for a file
 * this does not copy (not ELF64 little-endian, relocatable, .zdebug_ or a
 * compression other than zlib, too many sections) or whose debug sections
 * are under @min_bytes together. */
static int plan(Elf *src, struct out_section *v, uint64_t min_bytes, uint64_t *total)
{
	GElf_Ehdr eh;
	Elf_Scn *scn = NULL;
	size_t shstrndx, names = 1 + sizeof(".shstrtab");
	int n = 0;

	*total = 0;
	if (!gelf_getehdr(src, &eh) || gelf_getclass(src) != ELFCLASS64 ||
	    eh.e_ident[EI_DATA] != ELFDATA2LSB || (eh.e_type != ET_EXEC && eh.e_type != ET_DYN) ||
	    elf_getshdrstrndx(src, &shstrndx) != 0)
		return -ENOTSUP;
	while ((scn = elf_nextscn(src, scn)) != NULL) {
		struct out_section *o = &v[n];
		const char *name;

		if (!gelf_getshdr(scn, &o->sh))
			return -ENOTSUP;
		name = elf_strptr(src, shstrndx, o->sh.sh_name);
		if (!name)
			continue;
		if (strncmp(name, ".zdebug", 7) == 0)
			return -ENOTSUP;
		if (!kept_section(name) || o->sh.sh_type == SHT_NOBITS)
			continue;
		/* the copy's .shstrtab is a buffer of SHSTRTAB_MAX bytes */
		names += strlen(name) + 1;
		if (n == MAX_SECTIONS || names > SHSTRTAB_MAX)
			return -ENOTSUP;
		o->name = name;
		o->zlib = false;
		o->size = o->sh.sh_size;
		o->align = o->sh.sh_addralign;
		if (o->sh.sh_flags & SHF_COMPRESSED) {
			GElf_Chdr ch;

			if (!gelf_getchdr(scn, &ch) || ch.ch_type != ELFCOMPRESS_ZLIB)
				return -ENOTSUP;
			o->zlib = true;
			o->size = ch.ch_size;
			o->align = ch.ch_addralign;
		}
		if (o->size > SECTION_MAX || (o->align & (o->align - 1)) || o->align > 4096)
			return -ENOTSUP;
		*total += o->size;
		n++;
	}
	if (*total > TOTAL_MAX)
		return -EFBIG;
	return n && *total >= min_bytes ? n : -ENOTSUP;
}

static bool write_at(int fd, const void *p, size_t len, uint64_t at)
{
	return pwrite(fd, p, len, (off_t)at) == (ssize_t)len;
}

/* Section @o's bytes from @src_fd, inflated if need be, at @o->at of @fd. */
static int copy_section(int src_fd, int fd, const struct out_section *o, unsigned char *in,
			unsigned char *out)
{
	uint64_t from = o->sh.sh_offset, left = o->sh.sh_size, done = 0;
	z_stream z = { 0 };
	int zr = Z_OK;

	if (!o->zlib) {
		while (left) {
			size_t k = left < COPY_CHUNK ? (size_t)left : COPY_CHUNK;

			if (pread(src_fd, in, k, (off_t)from) != (ssize_t)k ||
			    !write_at(fd, in, k, o->at + done))
				return -EIO;
			from += k;
			done += k;
			left -= k;
		}
		return 0;
	}
	/* Elf64_Chdr, then one zlib stream of ch_size bytes. */
	if (left < sizeof(Elf64_Chdr) || inflateInit(&z) != Z_OK)
		return -EIO;
	from += sizeof(Elf64_Chdr);
	left -= sizeof(Elf64_Chdr);
	while (zr != Z_STREAM_END) {
		if (!z.avail_in) {
			size_t k = left < COPY_CHUNK ? (size_t)left : COPY_CHUNK;

			if (!k || pread(src_fd, in, k, (off_t)from) != (ssize_t)k)
				break;
			from += k;
			left -= k;
			z.next_in = in;
			z.avail_in = (uInt)k;
		}
		z.next_out = out;
		z.avail_out = COPY_CHUNK;
		zr = inflate(&z, Z_NO_FLUSH);
		if (zr != Z_OK && zr != Z_STREAM_END)
			break;
		/* never more than the header said: a crafted stream is cut */
		if (done + (COPY_CHUNK - z.avail_out) > o->size ||
		    !write_at(fd, out, COPY_CHUNK - z.avail_out, o->at + done))
			break;
		done += COPY_CHUNK - z.avail_out;
	}
	inflateEnd(&z);
	return zr == Z_STREAM_END && done == o->size ? 0 : -EIO;
}

/* Writes the copy of @src (its @n sections @v) to @fd. */
static int write_copy(Elf *src, int src_fd, int fd, struct out_section *v, int n)
{
	char shstrtab[SHSTRTAB_MAX];
	unsigned char *in = malloc(COPY_CHUNK), *out = malloc(COPY_CHUNK);
	Elf64_Shdr sh[MAX_SECTIONS + 2];
	Elf64_Ehdr eh;
	GElf_Ehdr seh;
	uint64_t at = sizeof(Elf64_Ehdr), shoff;
	uint32_t strlen_ = 1;
	int ret = -ENOMEM;

	if (!in || !out)
		goto out;
	shstrtab[0] = '\0';
	memset(sh, 0, sizeof(sh));
	for (int i = 0; i < n; i++) {
		size_t l = strlen(v[i].name) + 1;
		uint64_t a = v[i].align ? v[i].align : 1;

		memcpy(shstrtab + strlen_, v[i].name, l);
		v[i].name_at = strlen_;
		strlen_ += (uint32_t)l;
		at = (at + a - 1) & ~(a - 1);
		v[i].at = at;
		ret = copy_section(src_fd, fd, &v[i], in, out);
		if (ret)
			goto out;
		at += v[i].size;
		sh[i + 1] = (Elf64_Shdr){
			.sh_name = v[i].name_at,
			.sh_type = v[i].sh.sh_type,
			.sh_flags = v[i].sh.sh_flags & ~(uint64_t)(SHF_COMPRESSED | SHF_ALLOC),
			.sh_offset = v[i].at,
			.sh_size = v[i].size,
			.sh_addralign = v[i].align,
			.sh_entsize = v[i].sh.sh_entsize,
		};
	}
	memcpy(shstrtab + strlen_, ".shstrtab", 10);
	sh[n + 1] = (Elf64_Shdr){
		.sh_name = strlen_, .sh_type = SHT_STRTAB, .sh_offset = at, .sh_addralign = 1
	};
	strlen_ += 10;
	sh[n + 1].sh_size = strlen_;
	ret = -EIO;
	if (!write_at(fd, shstrtab, strlen_, at))
		goto out;
	shoff = (at + strlen_ + 7) & ~(uint64_t)7;
	if (!write_at(fd, sh, (size_t)(n + 2) * sizeof(sh[0]), shoff) || !gelf_getehdr(src, &seh))
		goto out;
	memset(&eh, 0, sizeof(eh));
	memcpy(eh.e_ident, seh.e_ident, EI_NIDENT);
	eh.e_type = seh.e_type;
	eh.e_machine = seh.e_machine;
	eh.e_version = EV_CURRENT;
	eh.e_shoff = shoff;
	eh.e_flags = seh.e_flags;
	eh.e_ehsize = sizeof(eh);
	eh.e_shentsize = sizeof(sh[0]);
	eh.e_shnum = (Elf64_Half)(n + 2);
	eh.e_shstrndx = (Elf64_Half)(n + 1);
	if (write_at(fd, &eh, sizeof(eh), 0) && fsync(fd) == 0)
		ret = 0;
out:
	free(in);
	free(out);
	return ret;
}

/* "<build-id>-<source identity>.debug" */
static void copy_name(const uint8_t *id, size_t id_len, const struct stat *st, char *out,
		      size_t len)
{
	char hex[2 * FX_BUILD_ID_MAX + 1];
	uint64_t h = fx_mix64_pair((uint64_t)st->st_dev, (uint64_t)st->st_ino);

	h = fx_mix64_pair(h, (uint64_t)st->st_size);
	h = fx_mix64_pair(h, (uint64_t)st->st_mtim.tv_sec * 1000000000ull +
				     (uint64_t)st->st_mtim.tv_nsec);
	fx_elf_hex(id, id_len, hex);
	snprintf(out, len, "%s-%016" PRIx64 ".debug", hex, h);
}

/* The copy @name if it is ours, whole and of build-id @id: mapped by us
 * (read-only, private) and read by libelf from memory, so that the pages
 * given back are known to be the copy's and nothing else. */
static int open_copy(int dirfd, const char *name, const uint8_t *id, size_t id_len,
		     struct sym_mapped *out)
{
	/* the agent's own regular file, one link, written by no one else */
	static const struct fx_trust_rules ours = { .nofollow = true,
						    .own = true,
						    .trusted = true };
	uint8_t got[FX_BUILD_ID_MAX];
	char err[256];
	struct stat st;
	void *map;
	Elf *elf;
	int fd = fx_trust_open(dirfd, name, "inflated copy", &ours, &st, err, sizeof(err));

	if (fd == -ENOENT)
		return fd;
	if (fd < 0)
		return -EBADF;
	if (st.st_size < (off_t)sizeof(Elf64_Ehdr) ||
	    fx_elf_build_id_fd(fd, got, sizeof(got)) != (int)id_len ||
	    memcmp(got, id, id_len) != 0) {
		close(fd);
		return -EBADF;
	}
	map = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
	if (map == MAP_FAILED) {
		close(fd);
		return -ENOMEM;
	}
	elf = elf_memory(map, (size_t)st.st_size);
	if (!elf || elf_kind(elf) != ELF_K_ELF) {
		elf_end(elf);
		munmap(map, (size_t)st.st_size);
		close(fd);
		return -EBADF;
	}
	futimens(fd, NULL); /* last use: the cache's bound goes by it */
	*out = (struct sym_mapped){ .fd = fd, .elf = elf, .map = map, .len = (size_t)st.st_size };
	return 0;
}

int sym_inflated_open(struct fx_symbolizer *s, Elf *src, int src_fd, const uint8_t *id,
		      size_t id_len, struct sym_mapped *out)
{
	struct out_section v[MAX_SECTIONS];
	char name[2 * FX_BUILD_ID_MAX + 32], tmp[sizeof(name) + 32];
	uint64_t total;
	struct stat st;
	int n, fd, ret;

	if (s->inflated_fd < 0 || !id || id_len < 2 || id_len > FX_BUILD_ID_MAX ||
	    fstat(src_fd, &st) != 0)
		return -ENOENT;
	copy_name(id, id_len, &st, name, sizeof(name));
	ret = open_copy(s->inflated_fd, name, id, id_len, out);
	if (ret == 0) {
		s->stats.inflated_hits++;
		return 0;
	}
	if (ret != -ENOENT) {
		/* Not ours, or not whole (a crash while writing it): written again. */
		unlinkat(s->inflated_fd, name, 0);
	}
	n = plan(src, v, s->inflated_min_bytes, &total);
	if (n < 0)
		return n;
	if (s->inflated_max_bytes && total > s->inflated_max_bytes / 2)
		return -EFBIG;
	snprintf(tmp, sizeof(tmp), ".%s.%d", name, (int)getpid());
	fd = openat(s->inflated_fd, tmp, O_RDWR | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0)
		return -errno;
	ret = write_copy(src, src_fd, fd, v, n);
	close(fd);
	if (ret == 0 && renameat(s->inflated_fd, tmp, s->inflated_fd, name) != 0)
		ret = -errno;
	if (ret) {
		unlinkat(s->inflated_fd, tmp, 0);
		s->stats.inflated_errors++;
		fx_debug("symbolize: no inflated copy of the debug sections of build-id %s: %s",
			 name, strerror(-ret));
		return ret;
	}
	s->stats.inflated_written++;
	s->stats.inflated_bytes += total;
	if (s->inflated_max_bytes)
		fx_debuginfod_trim(s->cache_dir, s->inflated_max_bytes, NULL);
	return open_copy(s->inflated_fd, name, id, id_len, out);
}

void sym_inflated_release_pages(void *map, size_t len)
{
	if (map && len)
		madvise(map, len, MADV_DONTNEED);
}

int sym_inflated_setup(struct fx_symbolizer *s, const char *cache_dir, uint64_t max_bytes)
{
	char err[512];
	int dfd, fd;
	struct stat st;

	s->inflated_fd = -1;
	if (!cache_dir)
		return 0;
	s->cache_dir = strdup(cache_dir);
	if (!s->cache_dir)
		return -ENOMEM;
	s->inflated_max_bytes = max_bytes;
	dfd = fx_trust_dir(cache_dir, "symbolization.debuginfod_cache", true, err, sizeof(err));
	if (dfd < 0) {
		fx_debug("symbolize: debug sections are read into memory: %s", err);
		return 0;
	}
	if (mkdirat(dfd, "inflated", 0700) != 0 && errno != EEXIST) {
		close(dfd);
		return 0;
	}
	fd = openat(dfd, "inflated", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	close(dfd);
	if (fd < 0)
		return 0;
	/* The agent's alone: the copies in it are mapped. */
	if (fstat(fd, &st) != 0 || st.st_uid != geteuid() || (st.st_mode & 022)) {
		fx_debug("symbolize: %s/inflated is not the agent's alone: not used", cache_dir);
		close(fd);
		return 0;
	}
	s->inflated_fd = fd;
	return 0;
}

/* SPDX-License-Identifier: MIT */
/* Loading an object: its segments, its function table, and its DWARF (from
 * the debug file or the object), attached within the memory budget and
 * released, to be read again, when the budget needs it. */
#include "symbols_int.h"

#include <elfutils/libdwelf.h>
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <limits.h>
#include <malloc.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fxagent/debuginfod.h"
#include "fxagent/log.h"
#include "fxagent/util.h"

/* The least recently used object, other than @skip, that holds DWARF (with
 * @dwarf) and that the current batch has not used (with @old): its index, or
 * SIZE_MAX. The one choice of what the bounds give up first: here, where the
 * budget is first met (DWARF read), and used by cache.c's trimming too. */
size_t sym_lru_object(const struct fx_symbolizer *s, bool dwarf, bool old,
		      const struct object *skip)
{
	size_t v = SIZE_MAX;

	for (size_t i = 0; i < s->n_objects; i++) {
		const struct object *o = s->objects[i];

		if (o == skip || (dwarf && !sym_holds_dwarf(o)) || (old && o->batch == s->batch))
			continue;
		if (v == SIZE_MAX || o->last_use < s->objects[v]->last_use)
			v = i;
	}
	return v;
}

static int load_segments(struct object *o, Elf *elf)
{
	size_t i, n;
	uint64_t min = UINT64_MAX;

	if (elf_getphdrnum(elf, &n) != 0)
		return -ENOEXEC;
	o->loads = calloc(n ? n : 1, sizeof(*o->loads));
	if (!o->loads)
		return -ENOMEM;
	for (i = 0; i < n; i++) {
		GElf_Phdr ph;

		if (!gelf_getphdr(elf, (int)i, &ph) || ph.p_type != PT_LOAD)
			continue;
		o->loads[o->n_loads++] = (struct load){
			.offset = ph.p_offset,
			.vaddr = ph.p_vaddr,
			.filesz = ph.p_filesz,
			.exec = ph.p_flags & PF_X,
		};
		if (ph.p_vaddr < min)
			min = ph.p_vaddr;
	}
	o->base = o->n_loads ? min & ~(uint64_t)(PAGE_SIZE_MIN - 1) : 0;
	return 0;
}

/* File offset -> SVMA through the PT_LOAD holding it; an executable segment
 * wins where page-rounded segments share a page. */
uint64_t sym_offset_to_svma(const struct object *o, uint64_t off)
{
	const struct load *best = NULL;
	size_t i;
	int pass;

	for (pass = 0; pass < 2 && !best; pass++) {
		for (i = 0; i < o->n_loads; i++) {
			const struct load *l = &o->loads[i];
			uint64_t lo = l->offset, hi = l->offset + l->filesz;

			if (pass == 1) {
				lo &= ~(uint64_t)(PAGE_SIZE_MIN - 1);
				hi = (hi + PAGE_SIZE_MIN - 1) & ~(uint64_t)(PAGE_SIZE_MIN - 1);
			}
			if (off < lo || off >= hi)
				continue;
			if (!best || (l->exec && !best->exec))
				best = l;
		}
	}
	if (!best)
		return off + o->base;
	return off - best->offset + best->vaddr;
}

/* libdw 0.188 reads names from the string sections with strlen(): a section
 * that does not end in NUL (a corrupt file) would make it read past the end. */
static bool dwarf_strings_sane(Elf *elf)
{
	static const char *const names[] = { ".debug_str", ".debug_line_str", ".zdebug_str",
					     ".zdebug_line_str" };
	size_t i;

	for (i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		GElf_Shdr sh;
		Elf_Scn *scn = fx_elf_section(elf, names[i], &sh);
		Elf_Data *d;

		if (!scn || sh.sh_type == SHT_NOBITS)
			continue;
		/* Decompress as libdw would; it then finds the section uncompressed. */
		if ((sh.sh_flags & SHF_COMPRESSED) && elf_compress(scn, 0, 0) < 0)
			return false;
		if (names[i][1] == 'z' && elf_compress_gnu(scn, 0, 0) < 0)
			return false;
		d = elf_getdata(scn, NULL);
		if (!d)
			return false;
		if (d->d_size && (!d->d_buf || ((const char *)d->d_buf)[d->d_size - 1] != '\0'))
			return false;
	}
	return true;
}

/* Opens @elf's DWARF for reading without its fd: libdw reads every debug
 * section at dwarf_begin_elf(), and hundreds of cached objects must not hold
 * hundreds of fds. */
static Dwarf *dwarf_open(Elf *elf, int *fd)
{
	Dwarf *dw = NULL;

	if (dwarf_strings_sane(elf))
		dw = dwarf_begin_elf(elf, DWARF_C_READ, NULL);

	elf_cntl(elf, ELF_C_FDDONE);
	close(*fd);
	*fd = -1;
	return dw;
}

/* A dwz-compressed debug file refers to a common file by build-id. libdw looks
 * for it only under /usr/lib/debug: look under our debug dirs first. Returns
 * 0 when there is no such reference or the file was set as @o's alt, else
 * -ENOENT: libdw left alone would then open the path the binary names, which
 * may be a FIFO (its open blocks for ever) or a device. */
static int open_alt(struct fx_symbolizer *s, struct object *o)
{
	struct debug_want w = { 0 };
	char hex[2 * FX_BUILD_ID_MAX + 1];
	const char *name;
	const void *id;
	ssize_t len;
	char **d;
	int fd = -1;

	len = dwelf_dwarf_gnu_debugaltlink(o->dw, &name, &id);
	if (len <= 0)
		return 0;
	if (len < 2 || len > FX_BUILD_ID_MAX)
		return -ENOENT;
	w.id = id;
	w.id_len = (size_t)len;
	fx_elf_hex(id, (size_t)len, hex);
	for (d = s->debug_dirs; *d; d++) {
		if (sym_try_debug_path(&w, &fd, &o->alt_elf, "%s/.build-id/%.2s/%s.debug", *d, hex,
				       hex + 2) == 0)
			break;
	}
	if (!o->alt_elf)
		return -ENOENT;
	o->alt_dw = dwarf_open(o->alt_elf, &fd);
	if (!o->alt_dw)
		return -ENOENT;
	dwarf_setalt(o->dw, o->alt_dw);
	return 0;
}

/* Bytes libdw will hold for @elf: its debug sections, uncompressed. */
static uint64_t dwarf_bytes(Elf *elf)
{
	Elf_Scn *scn = NULL;
	size_t shstrndx;
	uint64_t sum = 0;

	if (elf_getshdrstrndx(elf, &shstrndx) != 0)
		return 0;
	while ((scn = elf_nextscn(elf, scn)) != NULL) {
		GElf_Shdr sh;
		GElf_Chdr ch;
		const char *n;

		if (!gelf_getshdr(scn, &sh) || sh.sh_type == SHT_NOBITS)
			continue;
		n = elf_strptr(elf, shstrndx, sh.sh_name);
		if (!n || (strncmp(n, ".debug_", 7) != 0 && strncmp(n, ".zdebug_", 8) != 0))
			continue;
		if ((sh.sh_flags & SHF_COMPRESSED) && gelf_getchdr(scn, &ch))
			sum += ch.ch_size;
		else
			sum += sh.sh_size;
	}
	return sum;
}

/* The CU tables go with the debug sections, not with a Dwarf over them. */
static void free_cu_tables(struct object *o)
{
	for (size_t i = 0; i < o->n_cus; i++)
		free(o->cus[i].funcs);
	free(o->cus);
	free(o->cu_ranges);
	o->cus = NULL;
	o->cu_ranges = NULL;
	o->n_cus = o->n_cu_ranges = 0;
	o->cus_loaded = false;
}

void sym_release_dwarf(struct fx_symbolizer *s, struct object *o)
{
	if (o->dw)
		dwarf_end(o->dw);
	if (o->alt_dw)
		dwarf_end(o->alt_dw);
	if (o->alt_elf)
		elf_end(o->alt_elf);
	sym_close_elf(&o->dw_fd, &o->dw_elf);
	if (o->dw_map)
		munmap(o->dw_map, o->dw_map_len);
	o->dw_map = NULL;
	o->dw_map_len = 0;
	o->dw = o->alt_dw = NULL;
	o->alt_elf = NULL;
	o->dw_parked = false;
	free_cu_tables(o);
	s->dw_bytes -= o->dw_bytes;
	o->dw_bytes = 0;
	o->dw_sections_bytes = 0;
}

void sym_park_dwarf(struct fx_symbolizer *s, struct object *o)
{
	if (!o->dw)
		return;
	/* The CU tables stay (counted in the object's bytes): built again,
	 * they cost a walk of every unit and of a touched CU's top DIEs in
	 * each window that looks up an address not seen before. */
	dwarf_end(o->dw);
	if (o->alt_dw)
		dwarf_end(o->alt_dw);
	o->dw = o->alt_dw = NULL;
	o->dw_parked = true;
	sym_inflated_release_pages(o->dw_map, o->dw_map_len);
	s->dw_bytes -= o->dw_bytes - o->dw_sections_bytes;
	o->dw_bytes = o->dw_sections_bytes;
}

void sym_unpark_dwarf(struct object *o)
{
	o->dw_parked = false;
	/* Every debug section was read at the first dwarf_begin_elf(): the
	 * Elf no longer needs its fd. */
	o->dw = dwarf_begin_elf(o->dw_elf, DWARF_C_READ, NULL);
	if (!o->dw || !o->alt_elf)
		return;
	o->alt_dw = dwarf_begin_elf(o->alt_elf, DWARF_C_READ, NULL);
	if (o->alt_dw) {
		dwarf_setalt(o->dw, o->alt_dw);
	} else {
		dwarf_end(o->dw);
		o->dw = NULL;
	}
}

/* Lets go of @o's debug sections; they are read again if needed. */
void sym_shed_dwarf(struct fx_symbolizer *s, struct object *o)
{
	if (sym_holds_dwarf(o))
		s->stats.dwarf_shed++;
	sym_release_dwarf(s, o);
	o->dw_released = true;
}

/* Bytes malloc has handed out, all threads. libdw keeps no count of its own
 * memory, and its tables (line tables, abbreviations, CUs) grow to twice its
 * sections and more as lookups touch CUs: the budget counts what the heap
 * grew by. Other threads' allocations meanwhile count too, which errs on the
 * side of giving memory back. (Under ASan, whose allocator malloc's counts do
 * not see, this stays flat and the sections' size is what counts.) */
uint64_t sym_heap_bytes(void)
{
	struct mallinfo2 mi = mallinfo2();

	return (uint64_t)mi.uordblks + (uint64_t)mi.hblkhd;
}

/* Takes @elf and @fd (both consumed) as @o's DWARF, within the budget. */
static void attach_dwarf(struct fx_symbolizer *s, struct object *o, Elf *elf, int fd)
{
	struct sym_mapped m;
	uint64_t bytes, heap0, heap;

	/* Mapped from an inflated copy, the sections are not the heap's. */
	if (sym_inflated_open(s, elf, fd, o->dw_id_len ? o->dw_id : NULL, o->dw_id_len, &m) == 0) {
		sym_close_elf(&fd, &elf);
		elf = m.elf;
		fd = m.fd;
		o->dw_map = m.map;
		o->dw_map_len = m.len;
	}
	bytes = o->dw_map ? 0 : dwarf_bytes(elf);

	while (s->dw_bytes + bytes > s->max_bytes) {
		size_t v = sym_lru_object(s, true, false, o);

		if (v == SIZE_MAX)
			break;
		sym_shed_dwarf(s, s->objects[v]);
	}
	o->dw_elf = elf;
	o->dw_fd = fd;
	heap0 = sym_heap_bytes();
	o->dw = dwarf_open(elf, &o->dw_fd);
	if (!o->dw) {
		fx_debug("symbolize: no usable DWARF in '%s': %s", o->base_name, dwarf_errmsg(-1));
		return;
	}
	if (open_alt(s, o) < 0) {
		fx_debug("symbolize: DWARF of '%s' not used: its alt file is not under the "
			 "debug dirs",
			 o->base_name);
		dwarf_end(o->dw);
		o->dw = NULL;
		return;
	}
	/* Compressed sections are inflated as libdw opens them. */
	heap = sym_heap_bytes();
	if (heap > heap0 && heap - heap0 > bytes)
		bytes = heap - heap0;
	o->dw_bytes = o->dw_sections_bytes = bytes;
	s->dw_bytes += bytes;
}

/* Reads again the DWARF released for the budget: from its path, or, for an
 * object first read through an fd (no path to open again: another mount
 * namespace, a deleted file), through the source asked for now, @src (its
 * fd, else its path): the build-id check below makes sure it is the same
 * file. Gives up for good on failure. */
void sym_reattach_dwarf(struct fx_symbolizer *s, struct object *o, const struct fx_elf_source *src)
{
	uint8_t id[FX_BUILD_ID_MAX];
	Elf *elf = NULL;
	int fd = -1;

	o->dw_released = false;
	if (o->dw_path) {
		if (sym_open_elf(o->dw_path, &fd, &elf) != 0)
			return;
	} else if (src && src->fd >= 0) {
		fd = fcntl(src->fd, F_DUPFD_CLOEXEC, 3);
		if (fd < 0)
			return;
		elf = elf_begin(fd, ELF_C_READ, NULL);
		if (!elf || elf_kind(elf) != ELF_K_ELF) {
			sym_close_elf(&fd, &elf);
			return;
		}
	} else if (!src || !src->path || sym_open_elf(src->path, &fd, &elf) != 0) {
		return;
	}
	if (o->dw_id_len && (fx_elf_build_id_fd(fd, id, sizeof(id)) != (int)o->dw_id_len ||
			     memcmp(id, o->dw_id, o->dw_id_len) != 0)) {
		sym_close_elf(&fd, &elf);
		return;
	}
	attach_dwarf(s, o, elf, fd);
}

int sym_load_object(struct fx_symbolizer *s, struct object *o, const struct fx_elf_source *src)
{
	char dpath[PATH_MAX];
	struct func_vec fv = { 0 };
	uint8_t id_buf[FX_BUILD_ID_MAX];
	const uint8_t *id = src->build_id;
	size_t id_len = src->build_id_len;
	int fd = -1, dfd = -1, ret, len;
	Elf *elf = NULL, *delf = NULL;
	bool has_symtab;
	struct stat st;

	if (src->fd >= 0) {
		fd = fcntl(src->fd, F_DUPFD_CLOEXEC, 3);
		if (fd < 0)
			return -errno;
	} else if (src->path) {
		fd = fx_elf_open_regular(src->path);
		if (fd < 0)
			return fd;
	} else {
		return -EINVAL;
	}
	if (fstat(fd, &st) != 0) {
		ret = -errno;
		close(fd);
		return ret;
	}
	elf = elf_begin(fd, ELF_C_READ, NULL);
	if (!elf || elf_kind(elf) != ELF_K_ELF) {
		ret = -ENOEXEC;
		goto out;
	}
	ret = load_segments(o, elf);
	if (ret)
		goto out;
	len = fx_elf_build_id_fd(fd, id_buf, sizeof(id_buf));
	if (id && len > 0 && ((size_t)len != id_len || memcmp(id, id_buf, id_len) != 0)) {
		/* The file at this path is not the one that was mapped. */
		ret = -ESTALE;
		goto out;
	}
	if (!id && len > 0) {
		id = id_buf;
		id_len = (size_t)len;
	}
	ret = sym_find_debug_file(s, src->path, elf, id, id_len, &st, &dfd, &delf, dpath);
	if (ret == 0) {
		o->origin = FX_SYM_DEBUG_FILE;
	} else if (s->dbgd && id && !sym_has_dwarf(elf)) {
		ret = sym_fetch_debug_file(s, id, id_len, &st, &dfd, &delf, dpath);
		if (ret == 0) {
			o->origin = FX_SYM_DEBUGINFOD;
		} else {
			/* Deferred: the next batch; a miss or an error: after
			 * the client's retry time. */
			o->dbgd_again = true;
			o->dbgd_again_ns = 0;
			if (ret != -EAGAIN)
				o->dbgd_again_ns =
					fx_now_ns(CLOCK_MONOTONIC) +
					(uint64_t)fx_debuginfod_retry_s(s->dbgd) * 1000000000ull;
		}
	}
	if (delf) {
		o->debug_path = strdup(dpath);
		ret = sym_add_symbols(o, &fv, delf, dfd, NAMES_DEBUG, SHT_SYMTAB);
		if (ret)
			goto out;
	}
	has_symtab = fx_elf_section(elf, ".symtab", NULL) ||
		     (delf && fx_elf_section(delf, ".symtab", NULL));
	if (!o->origin)
		o->origin = has_symtab ? FX_SYM_SYMTAB : FX_SYM_STRIPPED;
	ret = sym_add_symbols(o, &fv, elf, fd, NAMES_OBJECT, SHT_SYMTAB);
	/* The object's .symtab lists every .dynsym function too: read
	 * twice, each of node's 60,000 exported functions would be an alias
	 * to tell apart. (A debug file's .symtab is not enough: libc's names
	 * "pthread_create@@GLIBC_2.34" where .dynsym has the plain name.) */
	if (!ret && !fx_elf_section(elf, ".symtab", NULL))
		ret = sym_add_symbols(o, &fv, elf, fd, NAMES_OBJECT, SHT_DYNSYM);
	if (!ret)
		ret = sym_add_plt(o, elf, fd);
	/* No symbol table anywhere (a stripped binary, no debug file): its
	 * functions' ranges from .eh_frame name what .dynsym does not. */
	if (!ret && !has_symtab)
		ret = sym_load_fdes(o, elf, fd);
	if (!ret)
		ret = sym_finish_funcs(o, &fv, (const int[NAMES_FILES]){ fd, dfd });
	if (ret)
		goto out;
	if (!s->no_inline) {
		if (id && id_len <= sizeof(o->dw_id)) {
			memcpy(o->dw_id, id, id_len);
			o->dw_id_len = id_len;
		}
		if (delf && sym_has_dwarf(delf)) {
			o->dw_path = strdup(dpath);
			attach_dwarf(s, o, delf, dfd);
			delf = NULL;
			dfd = -1;
		} else if (sym_has_dwarf(elf)) {
			/* An fd from the caller (another mount namespace, a deleted
			 * file) cannot be opened again by path. */
			o->dw_path = src->fd < 0 && src->path ? strdup(src->path) : NULL;
			attach_dwarf(s, o, elf, fd);
			elf = NULL;
			fd = -1;
		}
	}
	ret = 0;
out:
	free(fv.v);
	sym_close_elf(&dfd, &delf);
	if (elf)
		elf_end(elf);
	if (fd >= 0)
		close(fd);
	return ret;
}

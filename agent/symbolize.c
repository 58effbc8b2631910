/* SPDX-License-Identifier: MIT */
/*
 * Batch symbolization. Per object: a sorted function table (binary search),
 * the DWARF of the object or of its debug file (inline chains and lines, walked
 * from a per-CU sorted table of subprograms), and an (offset -> result) cache.
 * Objects are kept in a bounded LRU set. Not thread-safe: one publisher thread
 * owns a symbolizer.
 */
#include "fxagent/symbolize.h"
#include "fxagent/arena.h"
#include "fxagent/demangle.h"
#include "fxagent/elf.h"
#include "fxagent/hash.h"
#include "fxagent/hashtab.h"
#include "fxagent/log.h"
#include "fxagent/util.h"

#include <dwarf.h>
#include <elfutils/libdw.h>
#include <elfutils/libdwelf.h>
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <inttypes.h>
#include <libelf.h>
#include <limits.h>
#include <malloc.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#define MAX_OBJECTS 512
/* Distinct offsets cached per object before its cache is reset. */
#define MAX_RESULTS	 (1u << 18)
#define MAX_FUNCS	 (1u << 24)
#define MAX_INLINE_DEPTH 64
#define MAX_DIE_DEPTH	 32
/* DIEs visited per CU table and per lookup: corrupt sibling links must not
 * loop forever. */
#define MAX_DIE_STEPS	 (1u << 22)
#define MAX_LOOKUP_STEPS (1u << 16)
#define PAGE_SIZE_MIN	 4096
/* What the symbolizer holds between batches (fx_symbolizer_opts.max_bytes):
 * tables, cached results, and DWARF: the debug sections, which libdw reads
 * whole, and libdw's tables. Over it, the least recently used objects release
 * their DWARF (read again if needed), then go entirely. libc's DWARF with
 * most of its CUs touched is about 28 MiB: the default keeps it. */
#define DEFAULT_MAX_BYTES ((uint64_t)32 << 20)

/* Interned strings of one object. */
struct strpool {
	struct fx_arena mem;
	const char **v;
	size_t n, cap;
	struct fx_hashtab index;
};

struct func {
	uint64_t start; /* SVMA */
	uint64_t size;
	const char *name;  /* raw symbol name, in the object's string arena */
	const char *shown; /* demangled (or raw) name, set on first use */
	uint8_t local;
	uint8_t label; /* an STT_NOTYPE code label (asm entry points like _start) */
};

struct dfunc {
	uint64_t lo, hi;
	Dwarf_Off off;
};

struct cu {
	Dwarf_Die die;
	struct dfunc *funcs; /* built on first use */
	size_t n_funcs;
	bool loaded;
};

struct cu_range {
	uint64_t lo, hi;
	size_t cu;
};

struct load {
	uint64_t offset, vaddr, filesz;
	bool exec;
};

struct cached {
	uint64_t offset;
	struct fx_sym_result res;
};

struct object {
	char *key;
	char *base_name;
	char *src_path; /* as first asked for */
	bool from_fd;
	int err; /* != 0: the object could not be read; every result is a fallback */
	uint64_t last_use;
	uint64_t batch; /* the batch that used it last */

	uint64_t base;
	struct load *loads;
	size_t n_loads;

	struct func *funcs;
	size_t n_funcs;
	struct strpool strs;

	/* DWARF, from the debug file or from the object itself. */
	int dw_fd;
	Elf *dw_elf;
	Dwarf *dw;
	uint64_t dw_bytes; /* sections, and libdw's tables as they grew */
	char *dw_path;	   /* to read it again after a release; NULL if not possible */
	uint8_t dw_id[FX_BUILD_ID_MAX];
	size_t dw_id_len;
	bool dw_released;
	Elf *alt_elf; /* dwz common file, when found under our debug dirs */
	Dwarf *alt_dw;
	bool cus_loaded;
	struct cu *cus;
	size_t n_cus;
	struct cu_range *cu_ranges;
	size_t n_cu_ranges;

	/* Results, reset together when the cache is full. */
	struct fx_arena res_mem;
	struct cached *cache;
	size_t n_cache, cap_cache;
	struct fx_hashtab cache_index;
};

struct fx_symbolizer {
	char **debug_dirs;
	bool no_demangle, no_inline;
	/* MAX_OBJECTS, unless one batch uses more: its results must stay valid. */
	struct object **objects;
	size_t n_objects, cap_objects;
	uint64_t tick;
	uint64_t batch;
	uint64_t dw_bytes;
	uint64_t max_bytes;
	struct fx_symbolizer_stats stats;
};

/* ---- memory ---- */

static uint64_t pool_hash_at(const void *ctx, uint32_t i)
{
	return fx_hash_str(((const struct strpool *)ctx)->v[i]);
}

static bool pool_eq(const void *ctx, uint32_t i, const void *key)
{
	return strcmp(((const struct strpool *)ctx)->v[i], key) == 0;
}

static const char *pool_intern(struct strpool *p, const char *s)
{
	size_t len = strlen(s), pos;
	uint32_t i;
	char *copy;

	if (fx_hashtab_reserve(&p->index, p->n + 1, pool_hash_at, p) < 0 ||
	    fx_grow(&p->v, &p->cap, p->n + 1, sizeof(*p->v)) < 0)
		return NULL;
	pos = fx_hashtab_probe(&p->index, fx_hash_bytes(s, len), pool_eq, p, s);
	i = fx_hashtab_at(&p->index, pos);
	if (i != FX_HASHTAB_NONE)
		return p->v[i];
	copy = fx_arena_strndup(&p->mem, s, len);
	if (!copy)
		return NULL;
	p->v[p->n] = copy;
	fx_hashtab_put(&p->index, pos, (uint32_t)p->n++);
	return copy;
}

static void pool_free(struct strpool *p)
{
	fx_arena_free(&p->mem);
	free(p->v);
	p->v = NULL;
	p->n = p->cap = 0;
	fx_hashtab_free(&p->index);
}

/* ---- files ---- */

/* The path comes from a binary (its debug link) or a process: only a regular
 * file is opened. */
static int open_elf(const char *path, int *fd_out, Elf **elf_out)
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

static void close_elf(int *fd, Elf **elf)
{
	if (*elf)
		elf_end(*elf);
	*elf = NULL;
	if (*fd >= 0)
		close(*fd);
	*fd = -1;
}

static Elf_Scn *find_section(Elf *elf, const char *name, GElf_Shdr *sh_out)
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

static bool has_dwarf(Elf *elf)
{
	GElf_Shdr sh;

	if (find_section(elf, ".debug_info", &sh) && sh.sh_type != SHT_NOBITS && sh.sh_size)
		return true;
	return find_section(elf, ".zdebug_info", &sh) && sh.sh_type != SHT_NOBITS;
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

struct debug_want {
	const uint8_t *id; /* build-id the debug file must have, or NULL */
	size_t id_len;
	bool check_crc;
	uint32_t crc;
	dev_t dev; /* the object itself, never its own debug file */
	ino_t ino;
	char *found; /* PATH_MAX bytes for the path found, or NULL */
};

static int try_debug_file(const char *path, const struct debug_want *w, int *fd_out, Elf **elf_out)
{
	uint8_t id[FX_BUILD_ID_MAX];
	struct stat st;
	int fd = -1, len, ret;
	Elf *elf = NULL;

	ret = open_elf(path, &fd, &elf);
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
	close_elf(&fd, &elf);
	return -ENOENT;
}

/* Reads .gnu_debuglink: the debug file's base name and the CRC of its contents. */
static bool read_debuglink(Elf *elf, char *name, size_t cap, uint32_t *crc)
{
	Elf_Scn *scn = find_section(elf, ".gnu_debuglink", NULL);
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
static int __attribute__((format(printf, 4, 5)))
try_debug_path(const struct debug_want *w, int *fd_out, Elf **elf_out, const char *fmt, ...)
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

static int find_debug_file(struct fx_symbolizer *s, const char *path, Elf *elf, const uint8_t *id,
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
			if (!try_debug_path(&w, fd_out, elf_out, "%s/.build-id/%.2s/%s.debug", *d,
					    hex, hex + 2))
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
		if (!try_debug_path(&w, fd_out, elf_out, "%.*s/%s", dir_len, path, link) ||
		    !try_debug_path(&w, fd_out, elf_out, "%.*s/.debug/%s", dir_len, path, link))
			return 0;
		for (d = s->debug_dirs; *d; d++) {
			if (!try_debug_path(&w, fd_out, elf_out, "%s%.*s/%s", *d, dir_len, path,
					    link))
				return 0;
		}
	}
	if (path[0] == '/' && (id || w.check_crc)) {
		for (d = s->debug_dirs; *d; d++) {
			if (!try_debug_path(&w, fd_out, elf_out, "%s%s.debug", *d, path))
				return 0;
		}
	}
	return -ENOENT;
}

/* ---- function table ---- */

static unsigned leading_underscores(const char *n)
{
	unsigned k = 0;

	while (n[k] == '_')
		k++;
	return k;
}

/* Orders by start; among aliases the best name first: sized, global, fewest
 * leading underscores ("malloc" over "__libc_malloc"), shortest. */
static int cmp_func(const void *a, const void *b)
{
	const struct func *x = a, *y = b;
	unsigned ux, uy;
	size_t lx, ly;

	if (x->start != y->start)
		return x->start < y->start ? -1 : 1;
	if ((x->size != 0) != (y->size != 0))
		return x->size ? -1 : 1;
	if (x->label != y->label)
		return x->label ? 1 : -1;
	if (x->local != y->local)
		return x->local ? 1 : -1;
	ux = leading_underscores(x->name);
	uy = leading_underscores(y->name);
	if (ux != uy)
		return ux < uy ? -1 : 1;
	lx = strlen(x->name);
	ly = strlen(y->name);
	if (lx != ly)
		return lx < ly ? -1 : 1;
	return strcmp(x->name, y->name);
}

struct func_vec {
	struct func *v;
	size_t n, cap;
};

/* Hand-written assembly (ld.so's _start, say) has untyped labels only: they
 * count as functions when they are in code. */
static bool in_code(Elf *elf, size_t shndx)
{
	Elf_Scn *scn;
	GElf_Shdr sh;

	if (shndx == SHN_UNDEF || shndx >= SHN_LORESERVE)
		return false;
	scn = elf_getscn(elf, shndx);
	/* NOBITS: the .text of a separate debug file, whose .symtab names it. */
	return scn && gelf_getshdr(scn, &sh) &&
	       (sh.sh_type == SHT_PROGBITS || sh.sh_type == SHT_NOBITS) &&
	       (sh.sh_flags & SHF_EXECINSTR);
}

static int add_symbols(struct object *o, struct func_vec *fv, Elf *elf, Elf64_Word type)
{
	Elf_Scn *scn = NULL;

	while ((scn = elf_nextscn(elf, scn)) != NULL) {
		GElf_Shdr sh;
		Elf_Data *d;
		size_t i, n;

		if (!gelf_getshdr(scn, &sh) || sh.sh_type != type || sh.sh_entsize == 0)
			continue;
		d = elf_getdata(scn, NULL);
		if (!d)
			continue;
		n = d->d_size / sh.sh_entsize;
		for (i = 0; i < n; i++) {
			GElf_Sym sym;
			const char *name;
			int st;

			if (!gelf_getsym(d, (int)i, &sym))
				break;
			st = GELF_ST_TYPE(sym.st_info);
			if ((st != STT_FUNC && st != STT_GNU_IFUNC &&
			     !(st == STT_NOTYPE && in_code(elf, sym.st_shndx))) ||
			    sym.st_shndx == SHN_UNDEF || sym.st_value == 0)
				continue;
			name = elf_strptr(elf, sh.sh_link, sym.st_name);
			if (!name || !*name)
				continue;
			if (fv->n == fv->cap) {
				size_t cap = fv->cap ? fv->cap * 2 : 1024;
				struct func *p;

				if (fv->n >= MAX_FUNCS)
					return 0;
				p = realloc(fv->v, cap * sizeof(*p));
				if (!p)
					return -ENOMEM;
				fv->v = p;
				fv->cap = cap;
			}
			fv->v[fv->n] = (struct func){
				.start = sym.st_value,
				.size = sym.st_size,
				.local = GELF_ST_BIND(sym.st_info) == STB_LOCAL,
				.label = st == STT_NOTYPE,
				.name = fx_arena_strndup(&o->strs.mem, name, strlen(name)),
			};
			if (!fv->v[fv->n].name)
				return -ENOMEM;
			fv->n++;
		}
	}
	return 0;
}

static void finish_funcs(struct object *o, struct func_vec *fv)
{
	size_t i, k = 0;

	if (fv->n)
		qsort(fv->v, fv->n, sizeof(*fv->v), cmp_func);
	for (i = 0; i < fv->n; i++) {
		const struct func *prev = k ? &fv->v[k - 1] : NULL;

		if (prev && prev->start == fv->v[i].start)
			continue;
		/* A label inside a sized function is a jump target, not a function. */
		if (prev && fv->v[i].label && prev->size &&
		    fv->v[i].start - prev->start < prev->size)
			continue;
		fv->v[k++] = fv->v[i];
	}
	o->funcs = fv->v;
	o->n_funcs = k;
}

static const struct func *lookup_func(const struct object *o, uint64_t addr)
{
	size_t lo = 0, hi = o->n_funcs;
	const struct func *f;

	if (!o->n_funcs || addr < o->funcs[0].start)
		return NULL;
	while (hi - lo > 1) {
		size_t mid = lo + (hi - lo) / 2;

		if (o->funcs[mid].start <= addr)
			lo = mid;
		else
			hi = mid;
	}
	f = &o->funcs[lo];
	if (f->size && addr - f->start >= f->size)
		return NULL;
	return f;
}

/* ---- loading ---- */

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
static uint64_t offset_to_svma(const struct object *o, uint64_t off)
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
		Elf_Scn *scn = find_section(elf, names[i], &sh);
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
		if (try_debug_path(&w, &fd, &o->alt_elf, "%s/.build-id/%.2s/%s.debug", *d, hex,
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

static void release_dwarf(struct fx_symbolizer *s, struct object *o)
{
	size_t i;

	if (o->dw)
		dwarf_end(o->dw);
	if (o->alt_dw)
		dwarf_end(o->alt_dw);
	if (o->alt_elf)
		elf_end(o->alt_elf);
	close_elf(&o->dw_fd, &o->dw_elf);
	o->dw = o->alt_dw = NULL;
	o->alt_elf = NULL;
	/* The CU tables hold DIEs that point into libdw's memory. */
	for (i = 0; i < o->n_cus; i++)
		free(o->cus[i].funcs);
	free(o->cus);
	free(o->cu_ranges);
	o->cus = NULL;
	o->cu_ranges = NULL;
	o->n_cus = o->n_cu_ranges = 0;
	o->cus_loaded = false;
	s->dw_bytes -= o->dw_bytes;
	o->dw_bytes = 0;
}

/* The least recently used object, other than @skip, that holds DWARF (with
 * @dwarf) and that the current batch has not used (with @old): its index, or
 * SIZE_MAX. The one choice of what the bounds give up first. */
static size_t lru_object(const struct fx_symbolizer *s, bool dwarf, bool old,
			 const struct object *skip)
{
	size_t v = SIZE_MAX;

	for (size_t i = 0; i < s->n_objects; i++) {
		const struct object *o = s->objects[i];

		if (o == skip || (dwarf && !o->dw) || (old && o->batch == s->batch))
			continue;
		if (v == SIZE_MAX || o->last_use < s->objects[v]->last_use)
			v = i;
	}
	return v;
}

/* Lets go of @o's debug sections; they are read again if needed. */
static void shed_dwarf(struct fx_symbolizer *s, struct object *o)
{
	release_dwarf(s, o);
	o->dw_released = true;
}

/* Bytes malloc has handed out, all threads. libdw keeps no count of its own
 * memory, and its tables (line tables, abbreviations, CUs) grow to twice its
 * sections and more as lookups touch CUs: the budget counts what the heap
 * grew by. Other threads' allocations meanwhile count too, which errs on the
 * side of giving memory back. (Under ASan, whose allocator malloc's counts do
 * not see, this stays flat and the sections' size is what counts.) */
static uint64_t heap_bytes(void)
{
	struct mallinfo2 mi = mallinfo2();

	return (uint64_t)mi.uordblks + (uint64_t)mi.hblkhd;
}

/* Takes @elf and @fd (both consumed) as @o's DWARF, within the budget. */
static void attach_dwarf(struct fx_symbolizer *s, struct object *o, Elf *elf, int fd)
{
	uint64_t bytes = dwarf_bytes(elf), heap0, heap;

	while (s->dw_bytes + bytes > s->max_bytes) {
		size_t v = lru_object(s, true, false, o);

		if (v == SIZE_MAX)
			break;
		shed_dwarf(s, s->objects[v]);
	}
	o->dw_elf = elf;
	o->dw_fd = fd;
	heap0 = heap_bytes();
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
	heap = heap_bytes();
	if (heap > heap0 && heap - heap0 > bytes)
		bytes = heap - heap0;
	o->dw_bytes = bytes;
	s->dw_bytes += bytes;
}

/* Reads again the DWARF released for the budget; gives up for good on failure. */
static void reattach_dwarf(struct fx_symbolizer *s, struct object *o)
{
	uint8_t id[FX_BUILD_ID_MAX];
	Elf *elf = NULL;
	int fd = -1;

	o->dw_released = false;
	if (!o->dw_path || open_elf(o->dw_path, &fd, &elf) != 0)
		return;
	if (o->dw_id_len && (fx_elf_build_id_fd(fd, id, sizeof(id)) != (int)o->dw_id_len ||
			     memcmp(id, o->dw_id, o->dw_id_len) != 0)) {
		close_elf(&fd, &elf);
		return;
	}
	attach_dwarf(s, o, elf, fd);
}

static int load_object(struct fx_symbolizer *s, struct object *o, const struct fx_elf_source *src)
{
	char dpath[PATH_MAX];
	struct func_vec fv = { 0 };
	uint8_t id_buf[FX_BUILD_ID_MAX];
	const uint8_t *id = src->build_id;
	size_t id_len = src->build_id_len;
	int fd = -1, dfd = -1, ret, len;
	Elf *elf = NULL, *delf = NULL;
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
	if (find_debug_file(s, src->path, elf, id, id_len, &st, &dfd, &delf, dpath) == 0) {
		ret = add_symbols(o, &fv, delf, SHT_SYMTAB);
		if (ret)
			goto out;
	}
	ret = add_symbols(o, &fv, elf, SHT_SYMTAB);
	if (!ret)
		ret = add_symbols(o, &fv, elf, SHT_DYNSYM);
	if (ret)
		goto out;
	finish_funcs(o, &fv);
	fv.v = NULL;
	if (!s->no_inline) {
		if (id && id_len <= sizeof(o->dw_id)) {
			memcpy(o->dw_id, id, id_len);
			o->dw_id_len = id_len;
		}
		if (delf && has_dwarf(delf)) {
			o->dw_path = strdup(dpath);
			attach_dwarf(s, o, delf, dfd);
			delf = NULL;
			dfd = -1;
		} else if (has_dwarf(elf)) {
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
	close_elf(&dfd, &delf);
	if (elf)
		elf_end(elf);
	if (fd >= 0)
		close(fd);
	return ret;
}

/* ---- DWARF ---- */

static int cmp_cu_range(const void *a, const void *b)
{
	const struct cu_range *x = a, *y = b;

	if (x->lo != y->lo)
		return x->lo < y->lo ? -1 : 1;
	return x->hi < y->hi ? -1 : x->hi > y->hi;
}

static int cmp_dfunc(const void *a, const void *b)
{
	const struct dfunc *x = a, *y = b;

	if (x->lo != y->lo)
		return x->lo < y->lo ? -1 : 1;
	return x->hi < y->hi ? -1 : x->hi > y->hi;
}

/* Table of CU address ranges: .debug_aranges may be missing (clang). */
static void load_cus(struct object *o)
{
	Dwarf_CU *cu = NULL, *next;
	Dwarf_Die cudie;
	uint8_t unit_type;
	Dwarf_Half version;
	size_t cap_cus = 0, cap_r = 0;

	o->cus_loaded = true;
	/* No subdie: for a skeleton unit libdw would open the .dwo file the
	 * binary names (a FIFO there blocks for ever). */
	while (dwarf_get_units(o->dw, cu, &next, &version, &unit_type, &cudie, NULL) == 0) {
		ptrdiff_t off = 0;
		Dwarf_Addr base, lo, hi;

		cu = next;
		if (unit_type != DW_UT_compile && unit_type != DW_UT_partial)
			continue;
		if (o->n_cus == cap_cus) {
			size_t cap = cap_cus ? cap_cus * 2 : 64;
			struct cu *p = realloc(o->cus, cap * sizeof(*p));

			if (!p)
				return;
			o->cus = p;
			cap_cus = cap;
		}
		o->cus[o->n_cus] = (struct cu){ .die = cudie };
		while ((off = dwarf_ranges(&cudie, off, &base, &lo, &hi)) > 0) {
			if (hi <= lo)
				continue;
			if (o->n_cu_ranges == cap_r) {
				size_t cap = cap_r ? cap_r * 2 : 64;
				struct cu_range *p = realloc(o->cu_ranges, cap * sizeof(*p));

				if (!p)
					return;
				o->cu_ranges = p;
				cap_r = cap;
			}
			o->cu_ranges[o->n_cu_ranges++] =
				(struct cu_range){ .lo = lo, .hi = hi, .cu = o->n_cus };
		}
		o->n_cus++;
	}
	if (o->n_cu_ranges)
		qsort(o->cu_ranges, o->n_cu_ranges, sizeof(*o->cu_ranges), cmp_cu_range);
}

static int add_dfunc(struct cu *c, size_t *cap, uint64_t lo, uint64_t hi, Dwarf_Off off)
{
	if (c->n_funcs == *cap) {
		size_t ncap = *cap ? *cap * 2 : 64;
		struct dfunc *p = realloc(c->funcs, ncap * sizeof(*p));

		if (!p)
			return -ENOMEM;
		c->funcs = p;
		*cap = ncap;
	}
	c->funcs[c->n_funcs++] = (struct dfunc){ .lo = lo, .hi = hi, .off = off };
	return 0;
}

/* Collects the subprograms with code under @parent, looking into namespaces
 * and classes (member functions can be defined there). */
/* Recursion bounded by MAX_DIE_DEPTH. NOLINTNEXTLINE(misc-no-recursion) */
static int collect_dfuncs(struct cu *c, size_t *cap, Dwarf_Die *parent, int depth, unsigned *steps)
{
	Dwarf_Die child;
	int r;

	if (depth > MAX_DIE_DEPTH || dwarf_child(parent, &child) != 0)
		return 0;
	do {
		int tag = dwarf_tag(&child);

		if (++*steps > MAX_DIE_STEPS)
			return -ELOOP;

		if (tag == DW_TAG_subprogram) {
			ptrdiff_t off = 0;
			Dwarf_Addr base, lo, hi;

			while ((off = dwarf_ranges(&child, off, &base, &lo, &hi)) > 0) {
				if (hi > lo && add_dfunc(c, cap, lo, hi, dwarf_dieoffset(&child)))
					return -ENOMEM;
			}
		} else if (tag == DW_TAG_namespace || tag == DW_TAG_class_type ||
			   tag == DW_TAG_structure_type || tag == DW_TAG_union_type ||
			   tag == DW_TAG_module) {
			r = collect_dfuncs(c, cap, &child, depth + 1, steps);
			if (r)
				return r;
		}
	} while (dwarf_siblingof(&child, &child) == 0);
	return 0;
}

static struct cu *find_cu(struct object *o, uint64_t addr)
{
	size_t lo = 0, hi, i, k;

	if (!o->cus_loaded)
		load_cus(o);
	hi = o->n_cu_ranges;
	if (!o->n_cu_ranges || addr < o->cu_ranges[0].lo)
		return NULL;
	while (hi - lo > 1) {
		size_t mid = lo + (hi - lo) / 2;

		if (o->cu_ranges[mid].lo <= addr)
			lo = mid;
		else
			hi = mid;
	}
	/* Ranges rarely overlap; look back a little in case they do. */
	for (k = 0, i = lo + 1; i-- > 0 && k < 8; k++) {
		if (addr < o->cu_ranges[i].hi)
			return &o->cus[o->cu_ranges[i].cu];
	}
	return NULL;
}

static const struct dfunc *find_dfunc(struct cu *c, uint64_t addr)
{
	size_t lo = 0, hi, i, k;

	if (!c->loaded) {
		size_t cap = 0;
		unsigned steps = 0;

		c->loaded = true;
		/* On a corrupt CU keep what was found: it is still sorted below. */
		collect_dfuncs(c, &cap, &c->die, 0, &steps);
		if (c->n_funcs)
			qsort(c->funcs, c->n_funcs, sizeof(*c->funcs), cmp_dfunc);
	}
	hi = c->n_funcs;
	if (!hi || addr < c->funcs[0].lo)
		return NULL;
	while (hi - lo > 1) {
		size_t mid = lo + (hi - lo) / 2;

		if (c->funcs[mid].lo <= addr)
			lo = mid;
		else
			hi = mid;
	}
	for (k = 0, i = lo + 1; i-- > 0 && k < 8; k++) {
		if (addr < c->funcs[i].hi)
			return &c->funcs[i];
	}
	return NULL;
}

/* Name of a subprogram or inlined instance: demangled linkage name, else
 * DW_AT_name, both through DW_AT_abstract_origin / DW_AT_specification. */
static const char *die_name(struct fx_symbolizer *s, struct object *o, Dwarf_Die *die)
{
	Dwarf_Attribute attr;
	const char *n = NULL;

	if (dwarf_attr_integrate(die, DW_AT_linkage_name, &attr) ||
	    dwarf_attr_integrate(die, DW_AT_MIPS_linkage_name, &attr))
		n = dwarf_formstring(&attr);
	if (n && *n) {
		char *d = s->no_demangle ? NULL : fx_demangle(n);

		if (d) {
			const char *r = pool_intern(&o->strs, d);

			free(d);
			return r;
		}
		return pool_intern(&o->strs, n);
	}
	if (dwarf_attr_integrate(die, DW_AT_name, &attr))
		n = dwarf_formstring(&attr);
	return n && *n ? pool_intern(&o->strs, n) : NULL;
}

struct dw_level {
	Dwarf_Die die;
	const char *name;
	const char *file;
	uint32_t line;
};

static uint32_t attr_udata(Dwarf_Die *die, unsigned int name)
{
	Dwarf_Attribute attr;
	Dwarf_Word w;

	if (!dwarf_attr(die, name, &attr) || dwarf_formudata(&attr, &w) != 0 || w > UINT32_MAX)
		return 0;
	return (uint32_t)w;
}

/* Inline chain at @addr: levels[0] the subprogram, then each inlined
 * subroutine containing @addr, innermost last. Returns the number of levels
 * (0 when the CU has no subprogram at @addr). *file_out and *line_out get the
 * line-table position of @addr in any case. */
static size_t dwarf_levels(struct fx_symbolizer *s, struct object *o, uint64_t addr,
			   struct dw_level *lv, const struct dfunc **df_out, const char **file_out,
			   uint32_t *line_out)
{
	struct cu *c;
	const struct dfunc *df;
	Dwarf_Line *dl;
	Dwarf_Files *files = NULL;
	size_t n = 0, nfiles = 0, i;
	unsigned steps = 0, depth = 0;
	Dwarf_Die cur;
	int lineno = 0;

	*file_out = NULL;
	*line_out = 0;
	*df_out = NULL;
	c = find_cu(o, addr);
	if (!c)
		return 0;
	dl = dwarf_getsrc_die(&c->die, addr);
	if (dl && dwarf_lineno(dl, &lineno) == 0 && lineno > 0) {
		const char *f = dwarf_linesrc(dl, NULL, NULL);

		*line_out = (uint32_t)lineno;
		*file_out = f ? pool_intern(&o->strs, f) : NULL;
	}
	df = find_dfunc(c, addr);
	if (!df || !dwarf_offdie(o->dw, df->off, &cur))
		return 0;
	*df_out = df;
	lv[n++] = (struct dw_level){ .die = cur };
	/* Descend through the inlined subroutines (and lexical blocks) holding addr. */
	while (n < MAX_INLINE_DEPTH && ++depth < 4 * MAX_INLINE_DEPTH) {
		Dwarf_Die child;
		bool found = false;

		if (dwarf_child(&cur, &child) != 0)
			break;
		do {
			int tag = dwarf_tag(&child);

			if (++steps > MAX_LOOKUP_STEPS)
				break;

			if ((tag == DW_TAG_inlined_subroutine || tag == DW_TAG_lexical_block) &&
			    dwarf_haspc(&child, addr) == 1) {
				found = true;
				break;
			}
		} while (dwarf_siblingof(&child, &child) == 0);
		if (!found)
			break;
		cur = child;
		if (dwarf_tag(&cur) == DW_TAG_inlined_subroutine)
			lv[n++] = (struct dw_level){ .die = cur };
	}
	for (i = 0; i < n; i++)
		lv[i].name = die_name(s, o, &lv[i].die);
	/* Line of an outer level: the call site of the level inside it. */
	lv[n - 1].line = *line_out;
	lv[n - 1].file = *file_out;
	if (n > 1 && dwarf_getsrcfiles(&c->die, &files, &nfiles) != 0)
		files = NULL;
	for (i = 0; i + 1 < n; i++) {
		uint32_t fidx = attr_udata(&lv[i + 1].die, DW_AT_call_file);
		const char *f = NULL;

		lv[i].line = attr_udata(&lv[i + 1].die, DW_AT_call_line);
		if (files && fidx < nfiles)
			f = dwarf_filesrc(files, fidx, NULL, NULL);
		lv[i].file = f ? pool_intern(&o->strs, f) : NULL;
	}
	return n;
}

/* ---- results ---- */

static const char *func_name(struct fx_symbolizer *s, struct object *o, struct func *f)
{
	char *d;

	if (f->shown)
		return f->shown;
	d = s->no_demangle ? NULL : fx_demangle(f->name);
	if (d) {
		f->shown = pool_intern(&o->strs, d);
		free(d);
	}
	if (!f->shown)
		f->shown = f->name;
	return f->shown;
}

/* The name of an address with no symbol: "<base>+0x<file offset>". */
static const struct fx_sym_frame *fallback_frame(struct object *o, const char *base,
						 uint64_t offset)
{
	struct fx_sym_frame *fr = fx_arena_alloc(&o->res_mem, sizeof(*fr));
	char buf[300];

	if (!fr)
		return NULL;
	snprintf(buf, sizeof(buf), "%s+0x%" PRIx64, base, offset);
	fr->name = fx_arena_strndup(&o->res_mem, buf, strlen(buf));
	if (!fr->name)
		return NULL;
	fr->file = NULL;
	fr->line = 0;
	return fr;
}

static int fallback(struct object *o, uint64_t offset, struct fx_sym_result *r)
{
	const struct fx_sym_frame *fr = fallback_frame(o, o->base_name, offset);

	if (!fr)
		return -ENOMEM;
	r->sym_name = NULL;
	r->sym_addr = 0;
	r->sym_size = 0;
	r->n_frames = 1;
	r->frames = fr;
	return 0;
}

static int compute(struct fx_symbolizer *s, struct object *o, uint64_t offset,
		   struct fx_sym_result *r)
{
	struct dw_level lv[MAX_INLINE_DEPTH];
	struct func *f = NULL;
	const struct dfunc *df = NULL;
	struct fx_sym_frame *fr;
	const char *line_file = NULL, *name0 = NULL;
	uint32_t line = 0;
	uint64_t svma;
	size_t n = 0, i;

	memset(r, 0, sizeof(*r));
	if (o->err) {
		/* No program headers: the offset is the best address we have. */
		r->rel_addr = offset;
		return fallback(o, offset, r);
	}
	if (o->dw_released)
		reattach_dwarf(s, o);
	svma = offset_to_svma(o, offset);
	r->rel_addr = svma - o->base;
	f = (struct func *)lookup_func(o, svma);
	if (o->dw)
		n = dwarf_levels(s, o, svma, lv, &df, &line_file, &line);
	if (f) {
		name0 = func_name(s, o, f);
		r->sym_name = name0;
		r->sym_addr = f->start - o->base;
		r->sym_size = f->size;
	} else if (n && lv[0].name) {
		name0 = lv[0].name;
		r->sym_name = name0;
		r->sym_addr = df->lo - o->base;
		r->sym_size = df->hi - df->lo;
	}
	if (!name0)
		return fallback(o, offset, r);
	fr = fx_arena_alloc(&o->res_mem, (n ? n : 1) * sizeof(*fr));
	if (!fr)
		return -ENOMEM;
	if (!n) {
		fr[0] = (struct fx_sym_frame){ .name = name0, .file = line_file, .line = line };
		n = 1;
	} else {
		for (i = 0; i < n; i++) {
			fr[i] = (struct fx_sym_frame){
				.name = lv[i].name ? lv[i].name : "??",
				.file = lv[i].file,
				.line = lv[i].line,
			};
		}
		/* The symbol table's name is the fully qualified one. */
		fr[0].name = name0;
	}
	r->n_frames = (uint32_t)n;
	r->frames = fr;
	return 0;
}

static uint64_t cache_hash_at(const void *ctx, uint32_t i)
{
	return fx_mix64(((const struct object *)ctx)->cache[i].offset);
}

static bool cache_eq(const void *ctx, uint32_t i, const void *key)
{
	return ((const struct object *)ctx)->cache[i].offset == *(const uint64_t *)key;
}

/* The cached result of @offset, or NULL; *@pos gets the slot where
 * cache_add() puts it, or SIZE_MAX when it cannot be cached (no memory). */
static const struct cached *cache_find(struct object *o, uint64_t offset, size_t *pos)
{
	uint32_t i;

	*pos = SIZE_MAX;
	if (fx_hashtab_reserve(&o->cache_index, o->n_cache + 1, cache_hash_at, o) < 0 ||
	    fx_grow(&o->cache, &o->cap_cache, o->n_cache + 1, sizeof(*o->cache)) < 0)
		return NULL;
	*pos = fx_hashtab_probe(&o->cache_index, fx_mix64(offset), cache_eq, o, &offset);
	i = fx_hashtab_at(&o->cache_index, *pos);
	return i == FX_HASHTAB_NONE ? NULL : &o->cache[i];
}

/* Caches @r for @offset in the slot cache_find() gave, the cache unchanged since. */
static void cache_add(struct object *o, size_t pos, uint64_t offset, const struct fx_sym_result *r)
{
	o->cache[o->n_cache] = (struct cached){ .offset = offset, .res = *r };
	fx_hashtab_put(&o->cache_index, pos, (uint32_t)o->n_cache++);
}

static void cache_reset(struct object *o)
{
	free(o->cache);
	o->cache = NULL;
	o->n_cache = o->cap_cache = 0;
	fx_hashtab_free(&o->cache_index);
	fx_arena_free(&o->res_mem);
}

/* ---- objects ---- */

static void object_free(struct fx_symbolizer *s, struct object *o)
{
	if (!o)
		return;
	release_dwarf(s, o);
	free(o->dw_path);
	free(o->src_path);
	free(o->funcs);
	free(o->loads);
	pool_free(&o->strs);
	cache_reset(o);
	free(o->key);
	free(o->base_name);
	free(o);
}

/* Frees object @i; the last one takes its place. */
static void drop_object(struct fx_symbolizer *s, size_t i)
{
	object_free(s, s->objects[i]);
	s->objects[i] = s->objects[--s->n_objects];
}

/* The base name of @path, as fallback frames show it. */
static const char *base_name_of(const char *path)
{
	const char *base = path ? strrchr(path, '/') : NULL;

	base = base ? base + 1 : path;
	return base && *base ? base : "unknown";
}

static char *make_key(const struct fx_elf_source *src, const struct stat *st)
{
	char buf[PATH_MAX + 128];
	char hex[2 * FX_BUILD_ID_MAX + 1];

	if (src->build_id && src->build_id_len && src->build_id_len <= FX_BUILD_ID_MAX) {
		fx_elf_hex(src->build_id, src->build_id_len, hex);
		snprintf(buf, sizeof(buf), "b:%s", hex);
	} else if (st) {
		/* Without a build-id the file identity tells versions of one path apart. */
		snprintf(buf, sizeof(buf), "p:%s:%llx:%llx:%lld:%lld", src->path ? src->path : "",
			 (unsigned long long)st->st_dev, (unsigned long long)st->st_ino,
			 (long long)st->st_mtime, (long long)st->st_size);
	} else {
		snprintf(buf, sizeof(buf), "p:%s", src->path ? src->path : "");
	}
	return strdup(buf);
}

static struct object *get_object(struct fx_symbolizer *s, const struct fx_elf_source *src)
{
	struct object *o;
	struct stat st;
	bool have_st = false;
	char *key;
	size_t i, victim;

	if (!(src->build_id && src->build_id_len)) {
		if (src->fd >= 0)
			have_st = fstat(src->fd, &st) == 0;
		else if (src->path)
			have_st = stat(src->path, &st) == 0;
	}
	key = make_key(src, have_st ? &st : NULL);
	if (!key)
		return NULL;
	for (i = 0; i < s->n_objects; i++) {
		o = s->objects[i];
		if (strcmp(o->key, key) != 0)
			continue;
		/* A failure is remembered for the same source only: the same
		 * build-id may be readable through another path or fd. */
		if (o->err &&
		    (o->from_fd != (src->fd >= 0) ||
		     strcmp(o->src_path ? o->src_path : "", src->path ? src->path : ""))) {
			drop_object(s, i);
			break;
		}
		free(key);
		o->last_use = ++s->tick;
		/* Results from earlier batches may go now; this batch's stay. */
		if (o->batch != s->batch && o->n_cache >= MAX_RESULTS)
			cache_reset(o);
		o->batch = s->batch;
		return o;
	}
	o = calloc(1, sizeof(*o));
	if (!o) {
		free(key);
		return NULL;
	}
	o->key = key;
	o->dw_fd = -1;
	o->from_fd = src->fd >= 0;
	o->src_path = src->path ? strdup(src->path) : NULL;
	o->base_name = strdup(base_name_of(src->path));
	if (!o->base_name) {
		object_free(s, o);
		return NULL;
	}
	o->err = load_object(s, o, src);
	if (o->err) {
		fx_log_errno(FX_LOG_DEBUG, -o->err, "symbolize: cannot read '%s'",
			     src->path ? src->path : "?");
		/* Keep the failure cached; drop half-built tables. */
		free(o->funcs);
		o->funcs = NULL;
		o->n_funcs = 0;
	}
	s->stats.objects++;
	if (s->n_objects >= MAX_OBJECTS) {
		/* The least recently used object that this batch has not used. */
		victim = lru_object(s, false, true, NULL);
		if (victim != SIZE_MAX)
			drop_object(s, victim);
	}
	if (s->n_objects == s->cap_objects) {
		size_t ncap = s->cap_objects ? s->cap_objects * 2 : 64;
		/* An array of pointers. NOLINTNEXTLINE(bugprone-sizeof-expression) */
		struct object **v = realloc(s->objects, ncap * sizeof(*v));

		if (!v) {
			object_free(s, o);
			return NULL;
		}
		s->objects = v;
		s->cap_objects = ncap;
	}
	o->last_use = ++s->tick;
	o->batch = s->batch;
	s->objects[s->n_objects++] = o;
	return o;
}

/* ---- public ---- */

struct fx_symbolizer *fx_symbolizer_new(const struct fx_symbolizer_opts *opts)
{
	static const char *const default_dirs[] = { "/usr/lib/debug", NULL };
	const char *const *dirs = opts && opts->debug_dirs ? opts->debug_dirs : default_dirs;
	struct fx_symbolizer *s;
	size_t n = 0, i;

	fx_elf_init();
	s = calloc(1, sizeof(*s));
	if (!s)
		return NULL;
	while (dirs[n])
		n++;
	s->debug_dirs = calloc(n + 1, sizeof(*s->debug_dirs));
	if (!s->debug_dirs)
		goto fail;
	for (i = 0; i < n; i++) {
		s->debug_dirs[i] = strdup(dirs[i]);
		if (!s->debug_dirs[i])
			goto fail;
	}
	if (opts) {
		s->no_demangle = opts->no_demangle;
		s->no_inline = opts->no_inline;
	}
	s->max_bytes = opts && opts->max_bytes ? opts->max_bytes : DEFAULT_MAX_BYTES;
	return s;
fail:
	fx_symbolizer_free(s);
	return NULL;
}

void fx_symbolizer_free(struct fx_symbolizer *s)
{
	size_t i;

	if (!s)
		return;
	for (i = 0; i < s->n_objects; i++)
		object_free(s, s->objects[i]);
	free(s->objects);
	if (s->debug_dirs) {
		for (i = 0; s->debug_dirs[i]; i++)
			free(s->debug_dirs[i]);
		free(s->debug_dirs);
	}
	free(s);
}

/* Heap bytes @o holds: its tables and results, and its DWARF as measured
 * (dw_bytes). */
static uint64_t object_bytes(const struct object *o)
{
	uint64_t b = sizeof(*o) + o->n_funcs * sizeof(*o->funcs) + fx_arena_bytes(&o->strs.mem) +
		     o->strs.cap * sizeof(*o->strs.v) + fx_hashtab_bytes(&o->strs.index) +
		     fx_arena_bytes(&o->res_mem) + o->cap_cache * sizeof(*o->cache) +
		     fx_hashtab_bytes(&o->cache_index) + o->n_loads * sizeof(*o->loads) +
		     o->n_cus * sizeof(*o->cus) + o->n_cu_ranges * sizeof(*o->cu_ranges) +
		     o->dw_bytes;

	for (size_t i = 0; i < o->n_cus; i++)
		b += o->cus[i].n_funcs * sizeof(*o->cus[i].funcs);
	return b;
}

int fx_symbolizer_resolve(struct fx_symbolizer *s, const struct fx_elf_source *src,
			  const uint64_t *offsets, size_t n, struct fx_sym_result *out)
{
	/* Last resort when even the fallback cannot be allocated. */
	static const struct fx_sym_frame oom_frame = { .name = "[unknown]" };
	struct object *o;
	uint64_t heap0 = 0, counted0 = 0;
	bool measuring = false, other_path;
	const char *base = base_name_of(src->path);
	size_t i;

	o = get_object(s, src);
	/* One build-id may be mapped at several paths: the object and its
	 * cached results are shared, but an address with no symbol is named
	 * after the path it was asked for. */
	other_path = o && strcmp(base, o->base_name) != 0;
	for (i = 0; i < n; i++) {
		const struct cached *c = NULL;
		size_t pos = SIZE_MAX;

		s->stats.lookups++;
		if (o)
			c = cache_find(o, offsets[i], &pos);
		if (!c && o && !measuring) {
			/* Lookups that miss read DWARF: libdw's tables grow. */
			measuring = true;
			heap0 = heap_bytes();
			counted0 = object_bytes(o);
		}
		if (c) {
			s->stats.cache_hits++;
			out[i] = c->res;
		} else if (o && compute(s, o, offsets[i], &out[i]) == 0) {
			if (pos != SIZE_MAX)
				cache_add(o, pos, offsets[i], &out[i]);
		} else {
			out[i] = (struct fx_sym_result){ .n_frames = 1, .frames = &oom_frame };
		}
		if (!out[i].sym_name) {
			s->stats.unresolved++;
			if (other_path && out[i].frames != &oom_frame) {
				const struct fx_sym_frame *fr = fallback_frame(o, base, offsets[i]);

				if (fr)
					out[i].frames = fr;
			}
		}
	}
	if (measuring && o->dw) {
		/* What the heap grew by beyond what the object counts already
		 * (results, tables, sections read again) is libdw's. */
		int64_t grew = ((int64_t)heap_bytes() - (int64_t)heap0) -
			       ((int64_t)object_bytes(o) - (int64_t)counted0);

		if (grew > 0) {
			o->dw_bytes += (uint64_t)grew;
			s->dw_bytes += (uint64_t)grew;
		}
	}
	return o ? o->err : -ENOMEM;
}

/* Back under max_bytes, least recently used first: debug sections go
 * before whole objects (tables and results are what lookups need most). */
static void trim(struct fx_symbolizer *s)
{
	uint64_t total = 0;

	for (size_t i = 0; i < s->n_objects; i++)
		total += object_bytes(s->objects[i]);
	while (total > s->max_bytes && s->n_objects) {
		/* Objects with DWARF first, then by last use. */
		size_t v = lru_object(s, true, false, NULL);
		uint64_t before;

		if (v != SIZE_MAX) {
			before = object_bytes(s->objects[v]);
			shed_dwarf(s, s->objects[v]);
			total -= before - object_bytes(s->objects[v]);
		} else {
			v = lru_object(s, false, false, NULL);
			total -= object_bytes(s->objects[v]);
			drop_object(s, v);
			s->stats.trimmed++;
		}
	}
}

void fx_symbolizer_begin_batch(struct fx_symbolizer *s)
{
	/* The last batch's results are no longer needed: make room. */
	trim(s);
	s->batch++;
}

uint64_t fx_symbolizer_batch(const struct fx_symbolizer *s)
{
	return s->batch;
}

size_t fx_symbolizer_drop_idle(struct fx_symbolizer *s, uint64_t batch)
{
	size_t n = 0;

	for (size_t i = 0; i < s->n_objects;) {
		if (s->objects[i]->batch < batch) {
			drop_object(s, i);
			n++;
		} else {
			i++;
		}
	}
	trim(s);
	return n;
}

void fx_symbolizer_get_stats(const struct fx_symbolizer *s, struct fx_symbolizer_stats *out)
{
	*out = s->stats;
	out->objects_held = s->n_objects;
	out->dwarf_bytes = s->dw_bytes;
	out->bytes = 0;
	for (size_t i = 0; i < s->n_objects; i++)
		out->bytes += object_bytes(s->objects[i]);
}

/* SPDX-License-Identifier: MIT */
/* The function table of an object (from .symtab and .dynsym, sorted, one
 * name per address, 12 bytes a function), its names read from the files'
 * string tables when first used, and the object's pool of interned strings. */
#include "symbols_int.h"

#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fxagent/demangle.h"
#include "fxagent/hash.h"
#include "fxagent/util.h"

static uint64_t pool_hash_at(const void *ctx, uint32_t i)
{
	return fx_hash_str(((const struct strpool *)ctx)->v[i]);
}

static bool pool_eq(const void *ctx, uint32_t i, const void *key)
{
	return strcmp(((const struct strpool *)ctx)->v[i], key) == 0;
}

const char *sym_pool_intern(struct strpool *p, const char *s)
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

void sym_pool_free(struct strpool *p)
{
	fx_arena_free(&p->mem);
	free(p->v);
	p->v = NULL;
	p->n = p->cap = 0;
	fx_hashtab_free(&p->index);
}

static unsigned leading_underscores(const char *n)
{
	unsigned k = 0;

	while (n[k] == '_')
		k++;
	return k;
}

/* Orders by start; among aliases sized first, then functions before labels,
 * globals before locals. The names decide what is left (pick_alias). */
static int cmp_func(const void *a, const void *b)
{
	const struct func_load *x = a, *y = b;

	if (x->start != y->start)
		return x->start < y->start ? -1 : 1;
	if ((x->size != 0) != (y->size != 0))
		return x->size ? -1 : 1;
	if (x->label != y->label)
		return x->label ? 1 : -1;
	if (x->local != y->local)
		return x->local ? 1 : -1;
	return 0;
}

/* Whether name @x names an alias better than @y: fewest leading
 * underscores ("malloc" over "__libc_malloc"), shortest, then by bytes. */
static bool better_name(const char *x, const char *y)
{
	unsigned ux = leading_underscores(x), uy = leading_underscores(y);
	size_t lx = strlen(x), ly = strlen(y);

	if (ux != uy)
		return ux < uy;
	if (lx != ly)
		return lx < ly;
	return strcmp(x, y) < 0;
}

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

static int push_func(struct func_vec *fv, const struct func_load *f)
{
	if (fv->n == fv->cap) {
		size_t cap = fv->cap ? fv->cap * 2 : 1024;
		struct func_load *p;

		if (fv->n >= MAX_FUNCS)
			return 1;
		p = realloc(fv->v, cap * sizeof(*p));
		if (!p)
			return -ENOMEM;
		fv->v = p;
		fv->cap = cap;
	}
	fv->v[fv->n++] = *f;
	return 0;
}

void sym_note_file(struct object *o, int file, int fd)
{
	struct stat st;

	if (fstat(fd, &st) != 0)
		return;
	o->ids[file] = (struct file_id){ .dev = st.st_dev,
					 .ino = st.st_ino,
					 .size = st.st_size,
					 .mtime = st.st_mtim,
					 .set = true };
}

/* The string table of section @link of @elf as @o's table: its index, or
 * -1 when names cannot come from it. A compressed table (no linker makes
 * one; a hand-made file may) is the one copied. */
static int add_tab(struct object *o, Elf *elf, size_t link, int file)
{
	Elf_Scn *scn = elf_getscn(elf, link);
	struct name_tab t = { .file = (uint8_t)file };
	GElf_Shdr sh;

	if (!scn || !gelf_getshdr(scn, &sh) || sh.sh_type != SHT_STRTAB || !sh.sh_size)
		return -1;
	for (size_t i = 0; i < o->n_tabs; i++)
		if (o->tabs[i].file == file && o->tabs[i].off == sh.sh_offset)
			return (int)i;
	if (o->n_tabs == MAX_NAME_TABS)
		return -1;
	t.off = sh.sh_offset;
	t.size = sh.sh_size;
	if (sh.sh_flags & SHF_COMPRESSED) {
		Elf_Data *d;
		GElf_Chdr ch;

		/* the size it claims, bounded before it is allocated */
		if (!gelf_getchdr(scn, &ch) || ch.ch_size > MAX_COPIED_TAB ||
		    elf_compress(scn, 0, 0) < 0 || !(d = elf_getdata(scn, NULL)) || !d->d_size ||
		    !d->d_buf)
			return -1;
		t.copy = malloc(d->d_size);
		if (!t.copy)
			return -1;
		memcpy(t.copy, d->d_buf, d->d_size);
		t.size = d->d_size;
		t.off = 0;
	}
	o->tabs[o->n_tabs] = t;
	return (int)o->n_tabs++;
}

int sym_add_symbols(struct object *o, struct func_vec *fv, Elf *elf, int fd, int file,
		    Elf64_Word type)
{
	Elf_Scn *scn = NULL;

	if (!o->ids[file].set)
		sym_note_file(o, file, fd);
	while ((scn = elf_nextscn(elf, scn)) != NULL) {
		GElf_Shdr sh;
		Elf_Data *d;
		size_t i, n;
		int tab;

		if (!gelf_getshdr(scn, &sh) || sh.sh_type != type || sh.sh_entsize == 0)
			continue;
		tab = add_tab(o, elf, sh.sh_link, file);
		d = tab >= 0 ? elf_getdata(scn, NULL) : NULL;
		if (!d)
			continue;
		n = d->d_size / sh.sh_entsize;
		/* Room for every symbol at once: doubling a big binary's
		 * vector (node's 110,000 functions) would hold twice it. */
		if (fv->n + n > fv->cap && fv->n + n <= MAX_FUNCS) {
			struct func_load *p = realloc(fv->v, (fv->n + n) * sizeof(*p));

			if (!p)
				return -ENOMEM;
			fv->v = p;
			fv->cap = fv->n + n;
		}
		for (i = 0; i < n; i++) {
			GElf_Sym sym;
			int st, ret;

			if (!gelf_getsym(d, (int)i, &sym))
				break;
			st = GELF_ST_TYPE(sym.st_info);
			if ((st != STT_FUNC && st != STT_GNU_IFUNC &&
			     !(st == STT_NOTYPE && in_code(elf, sym.st_shndx))) ||
			    sym.st_shndx == SHN_UNDEF || sym.st_value == 0)
				continue;
			/* no name, or not in the table; beyond what the
			 * compact table holds (4 GiB from the base) */
			if (!sym.st_name || sym.st_name >= o->tabs[tab].size ||
			    sym.st_value < o->base || sym.st_value - o->base > UINT32_MAX)
				continue;
			ret = push_func(fv, &(struct func_load){
						    .start = sym.st_value,
						    .size = sym.st_size,
						    .name = sym.st_name,
						    .tab = (uint8_t)tab,
						    .local = GELF_ST_BIND(sym.st_info) == STB_LOCAL,
						    .label = st == STT_NOTYPE,
					    });
			/* 1: the table is full (MAX_FUNCS) */
			if (ret)
				return ret < 0 ? -ENOMEM : 0;
		}
	}
	return 0;
}

/* ---- names, read from the files ---- */

static bool same_file(const struct file_id *id, int fd)
{
	struct stat st;

	return id->set && fstat(fd, &st) == 0 && st.st_dev == id->dev && st.st_ino == id->ino &&
	       st.st_size == id->size && st.st_mtim.tv_sec == id->mtime.tv_sec &&
	       st.st_mtim.tv_nsec == id->mtime.tv_nsec;
}

/* An fd of @path if it is the file @id describes, else -1. */
static int open_same(const char *path, const struct file_id *id)
{
	int fd = path ? fx_elf_open_regular(path) : -1;

	if (fd >= 0 && !same_file(id, fd)) {
		close(fd);
		fd = -1;
	}
	return fd;
}

/* An fd of @o's @file, the same file its tables were read from (an object
 * may be asked for through several paths and fds): @src's fd or path, else
 * the path it was read from. -1 when none is that file. */
static int names_fd(struct object *o, int file, const struct fx_elf_source *src)
{
	const struct file_id *id = &o->ids[file];
	int fd = -1;

	if (o->name_fds[file] >= 0)
		return o->name_fds[file];
	if (file == NAMES_DEBUG) {
		fd = open_same(o->debug_path, id);
	} else {
		if (src && src->fd >= 0 && same_file(id, src->fd))
			fd = fcntl(src->fd, F_DUPFD_CLOEXEC, 3);
		if (fd < 0 && src)
			fd = open_same(src->path, id);
		if (fd < 0)
			fd = open_same(o->src_path, id);
	}
	return o->name_fds[file] = fd;
}

void sym_close_names(struct object *o)
{
	for (int i = 0; i < NAMES_FILES; i++) {
		if (o->name_fds[i] >= 0)
			close(o->name_fds[i]);
		o->name_fds[i] = -1;
	}
}

/* Read failures of read_name(). */
#define NAME_NO_FILE (-1) /* no fd of the file the table was read from */
#define NAME_BAD     (-2) /* no name there: no NUL in the table or the bound */

/* The name at @off of table @t into @buf (grown as needed, up to
 * MAX_NAME_LEN): its length, or NAME_NO_FILE or NAME_BAD. */
static ssize_t read_name(const struct name_tab *t, int fd, uint64_t off, char **buf, size_t *cap)
{
	size_t have = 0, want = 256;

	if (off >= t->size)
		return NAME_BAD;
	if (t->copy) {
		const char *n = t->copy + off;
		size_t len = strnlen(n, t->size - off);

		if (len == t->size - off || len > MAX_NAME_LEN || fx_grow(buf, cap, len + 1, 1) < 0)
			return NAME_BAD;
		memcpy(*buf, n, len + 1);
		return (ssize_t)len;
	}
	if (fd < 0)
		return NAME_NO_FILE;
	for (;;) {
		size_t left = t->size - off - have, n = want - have;
		ssize_t got;
		char *nul;

		if (n > left)
			n = left;
		if (!n || fx_grow(buf, cap, have + n, 1) < 0)
			return NAME_BAD;
		/* the same file: a short read is a table past its end */
		got = pread(fd, *buf + have, n, (off_t)(t->off + off + have));
		if (got <= 0)
			return NAME_BAD;
		nul = memchr(*buf + have, '\0', (size_t)got);
		if (nul)
			return nul - *buf;
		have += (size_t)got;
		if (have >= MAX_NAME_LEN)
			return NAME_BAD;
		want = have * 4 < MAX_NAME_LEN ? have * 4 : MAX_NAME_LEN;
	}
}

int sym_add_plt(struct object *o, Elf *elf, int fd)
{
	GElf_Shdr rsh, psh, dsh;
	GElf_Ehdr eh;
	Elf_Scn *rel = fx_elf_section(elf, ".rela.plt", &rsh), *plt, *dyn;
	Elf_Data *rd, *dd;
	size_t first = 0, n, slots, cap = 0;
	char *name = NULL;
	int tab;

	if (!gelf_getehdr(elf, &eh) || eh.e_machine != EM_X86_64 || !rel ||
	    rsh.sh_type != SHT_RELA || !rsh.sh_entsize)
		return 0;
	/* With IBT, .plt.sec holds the stubs code jumps to; else .plt, whose
	 * first entry is the resolver's. */
	plt = fx_elf_section(elf, ".plt.sec", &psh);
	if (!plt) {
		plt = fx_elf_section(elf, ".plt", &psh);
		first = 1;
	}
	dyn = elf_getscn(elf, rsh.sh_link);
	if (!plt || psh.sh_type != SHT_PROGBITS || !dyn || !gelf_getshdr(dyn, &dsh) ||
	    dsh.sh_type != SHT_DYNSYM || psh.sh_size / PLT_ENTRY <= first)
		return 0;
	rd = elf_getdata(rel, NULL);
	dd = elf_getdata(dyn, NULL);
	/* the names read from the file, as the function table's: node's
	 * .dynstr is megabytes */
	tab = add_tab(o, elf, dsh.sh_link, NAMES_OBJECT);
	if (!rd || !dd || tab < 0)
		return 0;
	n = rd->d_size / rsh.sh_entsize;
	slots = psh.sh_size / PLT_ENTRY - first;
	if (n < slots)
		slots = n;
	if (!slots || slots > MAX_FUNCS)
		return 0;
	/* Slot i's stub is at a fixed place: looked up by index, not sorted
	 * into the function table. */
	o->plt_names = calloc(slots, sizeof(*o->plt_names));
	if (!o->plt_names)
		return -ENOMEM;
	o->plt_start = psh.sh_addr + PLT_ENTRY * first;
	o->plt_slots = slots;
	for (size_t i = 0; i < slots; i++) {
		GElf_Rela r;
		GElf_Sym sym;
		ssize_t len;
		char *p;

		if (!gelf_getrela(rd, (int)i, &r) || GELF_R_TYPE(r.r_info) != R_X86_64_JUMP_SLOT ||
		    !gelf_getsym(dd, (int)GELF_R_SYM(r.r_info), &sym) || !sym.st_name)
			continue;
		len = read_name(&o->tabs[tab], o->tabs[tab].copy ? -1 : fd, sym.st_name, &name,
				&cap);
		if (len <= 0 || len > 512)
			continue;
		p = fx_arena_alloc(&o->strs.mem, (size_t)len + sizeof("@plt"));
		if (!p) {
			free(name);
			return -ENOMEM;
		}
		memcpy(p, name, (size_t)len);
		memcpy(p + len, "@plt", sizeof("@plt"));
		o->plt_names[i] = p;
	}
	free(name);
	return 0;
}

/* Picks the best named alias of @v[0..@n) (same start, same rank by
 * cmp_func) into v[0]. Names that cannot be read lose. */
static int pick_alias(struct object *o, struct func_load *v, size_t n, const int *fds)
{
	char *best = NULL, *cur = NULL;
	size_t best_cap = 0, cur_cap = 0, pick = SIZE_MAX;

	for (size_t i = 0; i < n; i++) {
		const struct name_tab *t = &o->tabs[v[i].tab];
		char *tmp;
		size_t tcap;

		if (read_name(t, fds[t->file], v[i].name, &cur, &cur_cap) <= 0)
			continue;
		if (pick == SIZE_MAX || better_name(cur, best)) {
			tmp = best;
			tcap = best_cap;
			best = cur;
			best_cap = cur_cap;
			cur = tmp;
			cur_cap = tcap;
			pick = i;
		}
	}
	free(best);
	free(cur);
	if (pick != SIZE_MAX && pick) {
		struct func_load t = v[0];

		v[0] = v[pick];
		v[pick] = t;
	}
	return 0;
}

int sym_finish_funcs(struct object *o, struct func_vec *fv, const int *fds)
{
	size_t i, k = 0, j;
	struct func *out;

	if (fv->n)
		qsort(fv->v, fv->n, sizeof(*fv->v), cmp_func);
	/* Aliases of one rank: the names choose. */
	for (i = 0; i < fv->n; i = j) {
		for (j = i + 1; j < fv->n && cmp_func(&fv->v[i], &fv->v[j]) == 0; j++)
			;
		if (j - i > 1)
			pick_alias(o, &fv->v[i], j - i, fds);
	}
	out = malloc((fv->n ? fv->n : 1) * sizeof(*out));
	if (!out)
		return -ENOMEM;
	for (i = 0; i < fv->n; i++) {
		const struct func_load *f = &fv->v[i];
		const struct func *prev = k ? &out[k - 1] : NULL;
		uint64_t size = f->size < FUNC_SIZE_MASK ? f->size : FUNC_SIZE_MASK;
		uint32_t start = (uint32_t)(f->start - o->base);

		if (prev && prev->start == start)
			continue;
		/* A label inside a sized function is a jump target, not a function. */
		if (prev && f->label && FUNC_SIZE(prev) && start - prev->start < FUNC_SIZE(prev))
			continue;
		out[k++] =
			(struct func){ .start = start,
				       .size = (uint32_t)size | (uint32_t)f->tab << FUNC_TAB_SHIFT,
				       .name = f->name };
	}
	free(fv->v);
	fv->v = NULL;
	fv->n = fv->cap = 0;
	/* Shrunk to what it holds: the table stays for the object's life. */
	o->funcs = k ? realloc(out, k * sizeof(*out)) : out;
	if (!o->funcs)
		o->funcs = out;
	o->n_funcs = k;
	return 0;
}

const char *sym_lookup_plt(const struct object *o, uint64_t addr, uint64_t *start, uint64_t *size)
{
	uint64_t i;

	if (!o->plt_slots || addr < o->plt_start)
		return NULL;
	i = (addr - o->plt_start) / PLT_ENTRY;
	if (i >= o->plt_slots || !o->plt_names[i])
		return NULL;
	/* Shown as perf shows it: not demangled. */
	*start = o->plt_start + i * PLT_ENTRY;
	*size = PLT_ENTRY;
	return o->plt_names[i];
}

const struct func *sym_lookup_func(const struct object *o, uint64_t addr)
{
	uint64_t rel = addr - o->base;
	size_t lo;
	const struct func *f;

	if (addr < o->base || rel > UINT32_MAX)
		return NULL;
	/* the last function starting at or below rel (4-byte keys: not
	 * fx_search_last_le's) */
	lo = 0;
	for (size_t hi = o->n_funcs; lo < hi;) {
		size_t mid = lo + (hi - lo) / 2;

		if (o->funcs[mid].start <= rel)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (!lo)
		return NULL;
	f = &o->funcs[lo - 1];
	if (FUNC_SIZE(f) && rel - f->start >= FUNC_SIZE(f))
		return NULL;
	return f;
}

static uint64_t named_hash_at(const void *ctx, uint32_t i)
{
	return fx_mix64(((const struct object *)ctx)->named[i].func);
}

static bool named_eq(const void *ctx, uint32_t i, const void *key)
{
	return ((const struct object *)ctx)->named[i].func == *(const uint32_t *)key;
}

const char *sym_func_name(struct fx_symbolizer *s, struct object *o,
			  const struct fx_elf_source *src, const struct func *f)
{
	uint32_t idx = (uint32_t)(f - o->funcs);
	const struct name_tab *t = &o->tabs[FUNC_TAB(f)];
	const char *shown = NULL;
	ssize_t len;
	size_t pos;
	uint32_t i;
	char *d;

	if (fx_hashtab_reserve(&o->named_index, o->n_named + 1, named_hash_at, o) < 0 ||
	    fx_grow(&o->named, &o->cap_named, o->n_named + 1, sizeof(*o->named)) < 0)
		return NULL;
	pos = fx_hashtab_probe(&o->named_index, fx_mix64(idx), named_eq, o, &idx);
	i = fx_hashtab_at(&o->named_index, pos);
	if (i != FX_HASHTAB_NONE)
		return o->named[i].shown;
	len = read_name(t, t->copy ? -1 : names_fd(o, t->file, src), f->name, &s->name_buf,
			&s->name_cap);
	if (len == NAME_NO_FILE) {
		/* The file changed or went since it was read: read anew
		 * next batch; this one names the address as it can. */
		s->stats.names_unread++;
		o->names_lost = true;
		return NULL;
	}
	if (len <= 0)
		return NULL; /* an empty or malformed name: none */
	d = s->no_demangle ? NULL : fx_demangle(s->name_buf);
	if (d) {
		shown = sym_pool_intern(&o->strs, d);
		free(d);
	}
	if (!shown)
		shown = sym_pool_intern(&o->strs, s->name_buf);
	if (!shown)
		return NULL;
	o->named[o->n_named] = (struct func_name){ .func = idx, .shown = shown };
	fx_hashtab_put(&o->named_index, pos, (uint32_t)o->n_named++);
	return shown;
}

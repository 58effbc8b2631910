/* SPDX-License-Identifier: MIT */
/* The function table of an object (from .symtab and .dynsym, sorted, one
 * name per address) and the object's pool of interned strings. */
#include "symbols_int.h"

#include <errno.h>
#include <gelf.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

#include "fxagent/demangle.h"
#include "fxagent/search.h"
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

static int push_func(struct func_vec *fv, const struct func *f)
{
	if (fv->n == fv->cap) {
		size_t cap = fv->cap ? fv->cap * 2 : 1024;
		struct func *p;

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

int sym_add_symbols(struct object *o, struct func_vec *fv, Elf *elf, Elf64_Word type)
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
			int st, ret;

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
			ret = push_func(fv, &(struct func){
						    .start = sym.st_value,
						    .size = sym.st_size,
						    .local = GELF_ST_BIND(sym.st_info) == STB_LOCAL,
						    .label = st == STT_NOTYPE,
						    .name = fx_arena_strndup(&o->strs.mem, name,
									     strlen(name)),
					    });
			/* 1: the table is full (MAX_FUNCS) */
			if (ret)
				return ret < 0 ? -ENOMEM : 0;
			if (!fv->v[fv->n - 1].name)
				return -ENOMEM;
		}
	}
	return 0;
}

int sym_add_plt(struct object *o, Elf *elf)
{
	GElf_Shdr rsh, psh, dsh;
	GElf_Ehdr eh;
	Elf_Scn *rel = fx_elf_section(elf, ".rela.plt", &rsh), *plt, *dyn;
	Elf_Data *rd, *dd;
	size_t first = 0, n, slots;

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
	if (!rd || !dd)
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
		const char *name;
		GElf_Rela r;
		GElf_Sym sym;
		size_t len;
		char *p;

		if (!gelf_getrela(rd, (int)i, &r) || GELF_R_TYPE(r.r_info) != R_X86_64_JUMP_SLOT ||
		    !gelf_getsym(dd, (int)GELF_R_SYM(r.r_info), &sym))
			continue;
		name = elf_strptr(elf, dsh.sh_link, sym.st_name);
		if (!name || !*name || (len = strlen(name)) > 512)
			continue;
		p = fx_arena_alloc(&o->strs.mem, len + sizeof("@plt"));
		if (!p)
			return -ENOMEM;
		memcpy(p, name, len);
		memcpy(p + len, "@plt", sizeof("@plt"));
		o->plt_names[i] = p;
	}
	return 0;
}

const struct func *sym_lookup_plt(const struct object *o, uint64_t addr, struct func *tmp)
{
	uint64_t i;

	if (!o->plt_slots || addr < o->plt_start)
		return NULL;
	i = (addr - o->plt_start) / PLT_ENTRY;
	if (i >= o->plt_slots || !o->plt_names[i])
		return NULL;
	/* Shown as perf shows it: not demangled. */
	*tmp = (struct func){ .start = o->plt_start + i * PLT_ENTRY,
			      .size = PLT_ENTRY,
			      .name = o->plt_names[i],
			      .shown = o->plt_names[i] };
	return tmp;
}

void sym_finish_funcs(struct object *o, struct func_vec *fv)
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

const struct func *sym_lookup_func(const struct object *o, uint64_t addr)
{
	size_t lo = FX_SEARCH_LAST_LE(o->funcs, o->n_funcs, start, addr);
	const struct func *f;

	if (lo == SIZE_MAX)
		return NULL;
	f = &o->funcs[lo];
	if (f->size && addr - f->start >= f->size)
		return NULL;
	return f;
}

const char *sym_func_name(struct fx_symbolizer *s, struct object *o, struct func *f)
{
	char *d;

	if (f->shown)
		return f->shown;
	d = s->no_demangle ? NULL : fx_demangle(f->name);
	if (d) {
		f->shown = sym_pool_intern(&o->strs, d);
		free(d);
	}
	if (!f->shown)
		f->shown = f->name;
	return f->shown;
}

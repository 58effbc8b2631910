/* SPDX-License-Identifier: MIT */
/* DWARF look-ups: the CU holding an address (a sorted table of CU ranges:
 * .debug_aranges may be missing), the subprogram holding it (a sorted table
 * per CU, built on first use), the chain of inlined calls down to it, and
 * file:line of each level. */
#include "symbols_int.h"

#include <dwarf.h>
#include <errno.h>
#include <stdlib.h>

#include "fxagent/demangle.h"
#include "fxagent/search.h"

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
		o->cus[o->n_cus] = (struct cu){ .off = dwarf_dieoffset(&cudie) };
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
	/* The walk touched a page of nearly every CU of a mapped copy: let
	 * them go now; the look-ups bring back the few they read. */
	sym_inflated_release_pages(o->dw_map, o->dw_map_len);
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
	size_t lo, i, k;

	if (!o->cus_loaded)
		load_cus(o);
	lo = FX_SEARCH_LAST_LE(o->cu_ranges, o->n_cu_ranges, lo, addr);
	if (lo == SIZE_MAX)
		return NULL;
	/* Ranges rarely overlap; look back a little in case they do. */
	for (k = 0, i = lo + 1; i-- > 0 && k < 8; k++) {
		if (addr < o->cu_ranges[i].hi)
			return &o->cus[o->cu_ranges[i].cu];
	}
	return NULL;
}

static const struct dfunc *find_dfunc(struct cu *c, Dwarf_Die *cudie, uint64_t addr)
{
	size_t lo, i, k;

	if (!c->loaded) {
		size_t cap = 0;
		unsigned steps = 0;

		c->loaded = true;
		/* On a corrupt CU keep what was found: it is still sorted below. */
		collect_dfuncs(c, &cap, cudie, 0, &steps);
		if (c->n_funcs)
			qsort(c->funcs, c->n_funcs, sizeof(*c->funcs), cmp_dfunc);
	}
	lo = FX_SEARCH_LAST_LE(c->funcs, c->n_funcs, lo, addr);
	if (lo == SIZE_MAX)
		return NULL;
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
			const char *r = sym_pool_intern(&o->strs, d);

			free(d);
			return r;
		}
		return sym_pool_intern(&o->strs, n);
	}
	if (dwarf_attr_integrate(die, DW_AT_name, &attr))
		n = dwarf_formstring(&attr);
	return n && *n ? sym_pool_intern(&o->strs, n) : NULL;
}

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
size_t sym_dwarf_levels(struct fx_symbolizer *s, struct object *o, uint64_t addr,
			struct dw_level *lv, const struct dfunc **df_out, const char **file_out,
			uint32_t *line_out)
{
	struct cu *c;
	const struct dfunc *df;
	Dwarf_Line *dl;
	Dwarf_Files *files = NULL;
	size_t n = 0, nfiles = 0, i;
	unsigned steps = 0, depth = 0;
	Dwarf_Die cur, cudie;
	int lineno = 0;

	*file_out = NULL;
	*line_out = 0;
	*df_out = NULL;
	c = find_cu(o, addr);
	if (!c || !dwarf_offdie(o->dw, c->off, &cudie))
		return 0;
	dl = dwarf_getsrc_die(&cudie, addr);
	if (dl && dwarf_lineno(dl, &lineno) == 0 && lineno > 0) {
		const char *f = dwarf_linesrc(dl, NULL, NULL);

		*line_out = (uint32_t)lineno;
		*file_out = f ? sym_pool_intern(&o->strs, f) : NULL;
	}
	df = find_dfunc(c, &cudie, addr);
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
	if (n > 1 && dwarf_getsrcfiles(&cudie, &files, &nfiles) != 0)
		files = NULL;
	for (i = 0; i + 1 < n; i++) {
		uint32_t fidx = attr_udata(&lv[i + 1].die, DW_AT_call_file);
		const char *f = NULL;

		lv[i].line = attr_udata(&lv[i + 1].die, DW_AT_call_line);
		if (files && fidx < nfiles)
			f = dwarf_filesrc(files, fidx, NULL, NULL);
		lv[i].file = f ? sym_pool_intern(&o->strs, f) : NULL;
	}
	return n;
}

/* SPDX-License-Identifier: MIT */
/* The names of a batch judged against a second, plain reading of the object
 * (fxagent/namecheck.h): sorted symbols, sections, the .eh_frame_hdr table
 * and libdw's scopes, read for the call and freed after it. */
#include "fxagent/namecheck.h"

#include <dwarf.h>
#include <elfutils/libdw.h>
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fxagent/demangle.h"
#include "fxagent/elf.h"
#include "fxagent/log.h"
#include "fxagent/search.h"

#define PAGE 4096u

struct sym {
	uint64_t start, size;
	const char *name; /* in the ELF's string table: valid while it is open */
};

struct seg {
	uint64_t vaddr, offset, filesz;
};

/* The DWARF functions whose ranges hold an address: subprograms and
 * inlined subroutines, outermost first, found by walking the CU's DIEs
 * (libdw's dwarf_getscopes() stops at the innermost inline instance). */
#define MAX_HOLDERS 64

struct holders {
	Dwarf_Die die[MAX_HOLDERS];
	size_t n;
};

struct reading {
	int fd, dfd;
	Elf *elf, *delf;
	Dwarf *dw;
	uint64_t base;
	struct seg *segs;
	size_t nsegs;
	struct sym *syms;
	size_t nsyms, cap;
	uint64_t plt[2][2]; /* [start, end) of .plt and .plt.sec */
	struct fx_elf_fdes fdes;
	bool have_fdes;
	struct holders held; /* of held_addr, when held_valid */
	uint64_t held_addr;
	bool held_valid;
};

static int cmp_sym(const void *a, const void *b)
{
	const struct sym *x = a, *y = b;

	return x->start < y->start ? -1 : x->start > y->start;
}

static int add_syms(struct reading *r, Elf *elf, Elf64_Word type)
{
	Elf_Scn *scn = NULL;

	while ((scn = elf_nextscn(elf, scn)) != NULL) {
		GElf_Shdr sh;
		Elf_Data *d;

		if (!gelf_getshdr(scn, &sh) || sh.sh_type != type || !sh.sh_entsize)
			continue;
		d = elf_getdata(scn, NULL);
		if (!d)
			continue;
		for (size_t i = 0; i < d->d_size / sh.sh_entsize; i++) {
			GElf_Sym s;
			const char *name;
			int t;

			if (!gelf_getsym(d, (int)i, &s))
				break;
			t = GELF_ST_TYPE(s.st_info);
			if ((t != STT_FUNC && t != STT_GNU_IFUNC && t != STT_NOTYPE) ||
			    s.st_shndx == SHN_UNDEF || s.st_shndx >= SHN_LORESERVE || !s.st_value)
				continue;
			name = elf_strptr(elf, sh.sh_link, s.st_name);
			if (!name || !*name)
				continue;
			if (r->nsyms == r->cap) {
				size_t cap = r->cap ? r->cap * 2 : 4096;
				struct sym *v = realloc(r->syms, cap * sizeof(*v));

				if (!v)
					return -ENOMEM;
				r->syms = v;
				r->cap = cap;
			}
			r->syms[r->nsyms++] = (struct sym){ s.st_value, s.st_size, name };
		}
	}
	return 0;
}

static void section_range(Elf *elf, const char *name, uint64_t out[2])
{
	GElf_Shdr sh;

	if (fx_elf_section(elf, name, &sh)) {
		out[0] = sh.sh_addr;
		out[1] = sh.sh_addr + sh.sh_size;
	}
}

static void reading_free(struct reading *r)
{
	if (r->dw)
		dwarf_end(r->dw);
	if (r->delf)
		elf_end(r->delf);
	if (r->elf)
		elf_end(r->elf);
	if (r->dfd >= 0)
		close(r->dfd);
	if (r->fd >= 0)
		close(r->fd);
	free(r->segs);
	free(r->syms);
	free(r->fdes.starts);
}

static int reading_open(struct reading *r, const struct fx_elf_source *src, const char *dpath)
{
	size_t nph;
	uint64_t min = UINT64_MAX;
	int ret;

	*r = (struct reading){ .fd = -1, .dfd = -1 };
	r->fd = src->fd >= 0 ? fcntl(src->fd, F_DUPFD_CLOEXEC, 3)
			     : (src->path ? fx_elf_open_regular(src->path) : -EINVAL);
	if (r->fd < 0)
		return src->fd >= 0 ? -errno : r->fd;
	r->elf = elf_begin(r->fd, ELF_C_READ, NULL);
	if (!r->elf || elf_kind(r->elf) != ELF_K_ELF || elf_getphdrnum(r->elf, &nph) != 0)
		return -ENOEXEC;
	r->segs = calloc(nph ? nph : 1, sizeof(*r->segs));
	if (!r->segs)
		return -ENOMEM;
	for (size_t i = 0; i < nph; i++) {
		GElf_Phdr ph;

		if (!gelf_getphdr(r->elf, (int)i, &ph) || ph.p_type != PT_LOAD)
			continue;
		r->segs[r->nsegs++] = (struct seg){ ph.p_vaddr, ph.p_offset, ph.p_filesz };
		if (ph.p_vaddr < min)
			min = ph.p_vaddr;
	}
	r->base = r->nsegs ? min & ~(uint64_t)(PAGE - 1) : 0;
	if (dpath) {
		r->dfd = fx_elf_open_regular(dpath);
		if (r->dfd >= 0) {
			r->delf = elf_begin(r->dfd, ELF_C_READ, NULL);
			if (r->delf && elf_kind(r->delf) != ELF_K_ELF) {
				elf_end(r->delf);
				r->delf = NULL;
			}
		}
	}
	ret = add_syms(r, r->elf, SHT_SYMTAB);
	if (!ret)
		ret = add_syms(r, r->elf, SHT_DYNSYM);
	if (!ret && r->delf)
		ret = add_syms(r, r->delf, SHT_SYMTAB);
	if (ret)
		return ret;
	if (r->nsyms)
		qsort(r->syms, r->nsyms, sizeof(*r->syms), cmp_sym);
	section_range(r->elf, ".plt", r->plt[0]);
	section_range(r->elf, ".plt.sec", r->plt[1]);
	r->have_fdes = fx_elf_read_fdes(r->elf, r->fd, r->base, UINT32_MAX, &r->fdes) == 0;
	/* DWARF from the debug file, else from the object itself. */
	if (r->delf)
		r->dw = dwarf_begin_elf(r->delf, DWARF_C_READ, NULL);
	if (!r->dw)
		r->dw = dwarf_begin_elf(r->elf, DWARF_C_READ, NULL);
	return 0;
}

/* Whether symbol @i holds @a: within its size, or, unsized, before the
 * next symbol's start. */
static bool holds(const struct reading *r, size_t i, uint64_t a)
{
	const struct sym *s = &r->syms[i];

	if (a < s->start)
		return false;
	if (s->size)
		return a - s->start < s->size;
	for (size_t k = i + 1; k < r->nsyms; k++)
		if (r->syms[k].start > s->start)
			return a < r->syms[k].start;
	return true;
}

static bool same_name(const char *raw, const char *name)
{
	char *d;
	bool same;

	if (!strcmp(raw, name))
		return true;
	d = fx_demangle(raw);
	same = d && !strcmp(d, name);
	free(d);
	return same;
}

/* How far below an address a sized symbol that holds it may start: no
 * function is bigger. */
#define MAX_SPAN (64ull << 20)

/* Calls @fn on each symbol that holds @a; stops when it returns true. */
static bool any_holding(const struct reading *r, uint64_t a,
			bool (*fn)(const struct sym *s, const void *arg), const void *arg)
{
	size_t i = FX_SEARCH_LAST_LE(r->syms, r->nsyms, start, a);

	for (; i != SIZE_MAX; i--) {
		const struct sym *s = &r->syms[i];

		if (a - s->start > MAX_SPAN)
			break;
		if (holds(r, i, a) && fn(s, arg))
			return true;
		if (i == 0)
			break;
	}
	return false;
}

static bool named(const struct sym *s, const void *arg)
{
	return same_name(s->name, arg);
}

static bool first_name(const struct sym *s, const void *arg)
{
	*(const char **)arg = s->name;
	return true;
}

/* Recursion bounded by MAX_HOLDERS levels. NOLINTNEXTLINE(misc-no-recursion) */
static void walk(Dwarf_Die *parent, uint64_t a, struct holders *h, int depth)
{
	Dwarf_Die child;

	if (depth > MAX_HOLDERS || dwarf_child(parent, &child) != 0)
		return;
	do {
		switch (dwarf_tag(&child)) {
		case DW_TAG_namespace:
		case DW_TAG_class_type:
		case DW_TAG_structure_type:
		case DW_TAG_union_type:
			/* Definitions nest in these, which have no ranges. */
			walk(&child, a, h, depth + 1);
			break;
		case DW_TAG_subprogram:
		case DW_TAG_inlined_subroutine:
			if (dwarf_haspc(&child, a) == 1 && h->n < MAX_HOLDERS)
				h->die[h->n++] = child;
			/* fallthrough */
		case DW_TAG_lexical_block:
			if (dwarf_haspc(&child, a) == 1)
				walk(&child, a, h, depth + 1);
			break;
		default:
			break;
		}
	} while (dwarf_siblingof(&child, &child) == 0);
}

/* Whether a DWARF function holding @a (@inlined: an inlined subroutine,
 * else a subprogram) is called @name: its DW_AT_name within it (qualified
 * names end with the DIE's), or its linkage name, demangled. */
static bool dwarf_names(struct reading *r, uint64_t a, const char *name, bool inlined)
{
	struct holders *h = &r->held;
	Dwarf_Die cu;

	/* One walk an address, whatever its levels ask. */
	if (!r->held_valid || r->held_addr != a) {
		h->n = 0;
		r->held_addr = a;
		r->held_valid = true;
		if (r->dw && dwarf_addrdie(r->dw, a, &cu))
			walk(&cu, a, h, 0);
	}
	for (size_t i = 0; i < h->n; i++) {
		Dwarf_Attribute at;
		const char *dn;

		if (dwarf_tag(&h->die[i]) !=
		    (inlined ? DW_TAG_inlined_subroutine : DW_TAG_subprogram))
			continue;
		dn = dwarf_formstring(dwarf_attr_integrate(&h->die[i], DW_AT_name, &at));
		if (dn && strstr(name, dn))
			return true;
		dn = dwarf_formstring(dwarf_attr_integrate(&h->die[i], DW_AT_linkage_name, &at));
		if (dn && same_name(dn, name))
			return true;
	}
	return false;
}

/* The file offset of SVMA @a, or @a when no segment holds it. */
static uint64_t file_offset(const struct reading *r, uint64_t a)
{
	for (size_t i = 0; i < r->nsegs; i++)
		if (a >= r->segs[i].vaddr && a - r->segs[i].vaddr < r->segs[i].filesz)
			return a - r->segs[i].vaddr + r->segs[i].offset;
	return a;
}

/* The .eh_frame_hdr function holding @a: its start (SVMA), or 0. */
static uint64_t fde_start(const struct reading *r, uint64_t a)
{
	size_t i;

	if (!r->have_fdes || a < r->base || a - r->base > UINT32_MAX)
		return 0;
	i = fx_search_last_le_u32(r->fdes.starts, r->fdes.n, (uint32_t)(a - r->base));
	if (i == SIZE_MAX || (i + 1 == r->fdes.n && a >= r->fdes.last_end))
		return 0;
	return r->base + r->fdes.starts[i];
}

/* Judges one name; on a wrong one, says what the object holds in @why. */
static bool judge(struct reading *r, const struct fx_sym_result *res, uint32_t level, uint64_t a,
		  char *why, size_t len)
{
	const char *name = res->frames[level].name, *other = NULL;
	size_t nlen = strlen(name);

	if (level > 0) {
		if (dwarf_names(r, a, name, true) || dwarf_names(r, a, name, false))
			return true;
		snprintf(why, len, "no inlined subroutine of that name holds it");
		return false;
	}
	if (res->no_symbol) {
		uint64_t start = fde_start(r, a);
		char want[32];
		const char *plus = strrchr(name, '+');

		if (any_holding(r, a, first_name, &other)) {
			snprintf(why, len, "the symbol %s holds it", other);
			return false;
		}
		snprintf(want, sizeof(want), "+0x%" PRIx64, file_offset(r, start));
		if (start && plus && !strcmp(plus, want))
			return true;
		if (start)
			snprintf(why, len, "its .eh_frame_hdr function starts at %s", want);
		else
			snprintf(why, len, "no .eh_frame_hdr function holds it");
		return false;
	}
	if (nlen > 4 && !strcmp(name + nlen - 4, "@plt")) {
		for (int i = 0; i < 2; i++)
			if (a >= r->plt[i][0] && a < r->plt[i][1])
				return true;
		snprintf(why, len, "not in .plt or .plt.sec");
		return false;
	}
	if (any_holding(r, a, named, name))
		return true;
	if (!any_holding(r, a, first_name, &other)) {
		/* A name from DWARF alone. */
		if (dwarf_names(r, a, name, false))
			return true;
		snprintf(why, len, "no symbol and no DWARF subprogram of that name holds it");
		return false;
	}
	snprintf(why, len, "the symbol %s holds it", other);
	return false;
}

int fx_namecheck(const struct fx_elf_source *src, const char *debug_path,
		 const struct fx_sym_result *res, size_t n, unsigned *log_left,
		 struct fx_namecheck_stats *st)
{
	struct reading r;
	int ret = reading_open(&r, src, debug_path);

	if (ret < 0) {
		reading_free(&r);
		return ret;
	}
	for (size_t i = 0; i < n; i++) {
		uint64_t a = res[i].rel_addr + r.base;

		if (!res[i].frames || !res[i].n_frames || (!res[i].sym_name && !res[i].no_symbol)) {
			st->unnamed++;
			continue;
		}
		for (uint32_t k = 0; k < res[i].n_frames; k++) {
			char why[320];

			/* An inline level whose DIE has no name. */
			if (!strcmp(res[i].frames[k].name, "??"))
				continue;
			st->checked++;
			if (judge(&r, &res[i], k, a, why, sizeof(why)))
				continue;
			st->wrong++;
			if (*log_left) {
				(*log_left)--;
				fx_log(FX_LOG_WARN,
				       "name check: %s+0x%" PRIx64
				       " (level %u) is named %s, but %s",
				       src->path ? src->path : "?", res[i].rel_addr, k,
				       res[i].frames[k].name, why);
			}
		}
	}
	reading_free(&r);
	return 0;
}

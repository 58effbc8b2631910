/* SPDX-License-Identifier: MIT */
#include "fxagent/cfitab.h"

#include <dwarf.h>
#include <elfutils/libdw.h>
#include <errno.h>
#include <gelf.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "fxagent/elf.h"
#include "fxagent/hash.h"
#include "fxagent/search.h"

/* x86-64 DWARF registers */
#define REG_RBP 6
#define REG_RSP 7
#define REG_RA	16

#define MAX_LOADS 8
/* Functions an object may list (a table is 12 bytes a function). */
#define MAX_FUNCS (1u << 22)
/* Rows of one function asked of libdw. libdw runs a function's CFA program
 * from its start for each row, so a crafted binary's function of a million
 * rows would hold the sampling thread for minutes; past this the rest of the
 * function is libdwfl's. Counted before equal rows are merged, so rows that
 * differ only in registers the rules leave out count too. Debian's largest:
 * 366 rows (perl). */
#define MAX_FN_ROWS 1024

/* One row: from @start (relative to the table's base) on, @rule. */
struct row {
	uint32_t start;
	uint32_t rule;
};

/* A rule in 4 bytes: kind (3 bits), register (4), whether the CFA's offset
 * is in units of 8 (1: big frames), rbp's offset / 8 (8, signed), the CFA's
 * offset (16, signed). */
#define RULE(kind, reg, scaled, rbp8, off)                                                         \
	((uint32_t)(kind) | (uint32_t)(reg) << 3 | (uint32_t)(scaled) << 7 |                       \
	 (uint32_t)(uint8_t)(int8_t)(rbp8) << 8 | (uint32_t)(uint16_t)(int16_t)(off) << 16)
#define RULE_NONE RULE(FX_CFI_NONE, 0, 0, 0, 0)

struct load {
	uint64_t vaddr, off, filesz;
};

/* A function's rows: rows[first .. first + n); n == 0: not compiled yet. */
struct fn {
	uint32_t first, n;
};

struct table {
	uint32_t file; /* the objects module's id of the file */
	Elf *elf;      /* over map, its fd closed; kept to compile more functions */
	void *map;     /* the file, mapped read-only here (not by libelf: its pages
			* are let go between windows, see release_pages) */
	size_t map_len;
	Dwarf_CFI *cfi;
	uint64_t base; /* the lowest PT_LOAD's page */
	struct load loads[MAX_LOADS];
	size_t nloads;
	uint32_t *starts; /* functions, from .eh_frame_hdr */
	struct fn *fns;
	size_t nfns;
	uint32_t end; /* the last function's end */
	/* The entry point's code when no FDE covers it ([entry, entry_end),
	 * relative to base): ld.so's _start, which calls _dl_start without CFI.
	 * A walk that reaches it has reached the process's first frame. */
	uint64_t entry, entry_end;
	struct row *rows;
	size_t nrows, rows_cap;
	size_t bytes;
	uint64_t last_use;
};

/* by_file values besides a table index + 2. */
#define SLOT_UNKNOWN 0
#define SLOT_NONE    1

/* A rule found lately: the same return addresses come back sample after
 * sample, and this saves the searches of the function and its rows. Valid
 * while its table is: drop() starts a new generation. */
struct hit {
	struct table *tb;
	uint64_t gen; /* 0: empty */
	uint64_t off;
	uint32_t object;
	struct fx_cfi_rule rule;
};

#define HITS 1024

struct fx_cfitab {
	const struct fx_objects *objs;
	struct hit *hits; /* HITS, by a hash of object and offset */
	uint64_t gen;	  /* of the hits that are valid, from 1 */
	size_t max_bytes, bytes;
	/* object id -> file id + 1 (0: not seen) */
	uint32_t *file_of;
	size_t file_of_cap;
	/* file id -> SLOT_* or table index + 2 */
	uint32_t *slot;
	size_t slot_cap;
	struct table **v;
	size_t n, cap;
	uint64_t now;
	struct fx_cfitab_stats stats;
};

static int grow_u32(uint32_t **v, size_t *cap, size_t need)
{
	size_t n = *cap ? *cap : 64;
	uint32_t *p;

	if (need < *cap)
		return 0;
	while (n <= need)
		n *= 2;
	p = realloc(*v, n * sizeof(*p));
	if (!p)
		return -ENOMEM;
	memset(p + *cap, 0, (n - *cap) * sizeof(*p));
	*v = p;
	*cap = n;
	return 0;
}

struct fx_cfitab *fx_cfitab_new(const struct fx_objects *objs, size_t max_bytes)
{
	struct fx_cfitab *t = calloc(1, sizeof(*t));

	if (!t)
		return NULL;
	fx_elf_init();
	t->objs = objs;
	t->max_bytes = max_bytes;
	t->gen = 1;
	t->hits = calloc(HITS, sizeof(*t->hits));
	if (!t->hits) {
		free(t);
		return NULL;
	}
	return t;
}

static void table_free(struct table *tb)
{
	if (!tb)
		return;
	if (tb->cfi)
		dwarf_cfi_end(tb->cfi);
	if (tb->elf)
		elf_end(tb->elf);
	if (tb->map)
		munmap(tb->map, tb->map_len);
	free(tb->starts);
	free(tb->fns);
	free(tb->rows);
	free(tb);
}

void fx_cfitab_free(struct fx_cfitab *t)
{
	if (!t)
		return;
	for (size_t i = 0; i < t->n; i++)
		table_free(t->v[i]);
	free(t->v);
	free(t->file_of);
	free(t->slot);
	free(t->hits);
	free(t);
}

/* ---- compiling ---- */

static bool breg(const Dwarf_Op *op, unsigned *reg, int64_t *off)
{
	if (op->atom >= DW_OP_breg0 && op->atom <= DW_OP_breg31) {
		*reg = op->atom - DW_OP_breg0;
		*off = (int64_t)op->number;
		return true;
	}
	if (op->atom == DW_OP_bregx) {
		*reg = (unsigned)op->number;
		*off = (int64_t)op->number2;
		return true;
	}
	return false;
}

/* The CFA expression of a PLT (GCC and the linkers write it for lazy and
 * IBT PLTs): rsp + 8 + ((rip & 15) >= N) << 3. Returns N, or -1. */
static int plt_threshold(const Dwarf_Op *o, size_t n)
{
	unsigned reg;
	int64_t off;

	if (n != 9 || !breg(&o[0], &reg, &off) || reg != REG_RSP || off != 8 ||
	    !breg(&o[1], &reg, &off) || reg != REG_RA || off != 0 || o[2].atom != DW_OP_lit15 ||
	    o[3].atom != DW_OP_and || o[4].atom < DW_OP_lit0 || o[4].atom > DW_OP_lit15 ||
	    o[5].atom != DW_OP_ge || o[6].atom != DW_OP_lit3 || o[7].atom != DW_OP_shl ||
	    o[8].atom != DW_OP_plus)
		return -1;
	return o[4].atom - DW_OP_lit0;
}

/* "saved at CFA + off": libdw's form of the offset(N) rule. */
static bool cfa_offset(const Dwarf_Op *o, size_t n, int64_t *off)
{
	if (n == 1 && o[0].atom == DW_OP_call_frame_cfa) {
		*off = 0;
		return true;
	}
	if (n == 2 && o[0].atom == DW_OP_call_frame_cfa && o[1].atom == DW_OP_plus_uconst) {
		*off = (int64_t)o[1].number;
		return true;
	}
	return false;
}

static uint32_t compile_rule(Dwarf_Frame *f)
{
	Dwarf_Op mem[3], *ops;
	size_t nops;
	unsigned reg;
	int64_t off, rbp = 0;
	bool sig;
	int kind, thr;

	if (dwarf_frame_info(f, NULL, NULL, &sig) < 0 || sig)
		return RULE_NONE;
	/* The return address first: undefined marks the outermost frame. */
	if (dwarf_frame_register(f, REG_RA, mem, &ops, &nops) != 0)
		return RULE_NONE;
	if (nops == 0 && ops == mem)
		return RULE(FX_CFI_OUTERMOST, 0, 0, 0, 0);
	if (!cfa_offset(ops, nops, &off) || off != -8)
		return RULE_NONE;
	/* rsp: the CFA itself (the ABI's default: val_offset(0)). */
	if (dwarf_frame_register(f, REG_RSP, mem, &ops, &nops) != 0 || nops != 2 ||
	    ops[0].atom != DW_OP_call_frame_cfa || ops[1].atom != DW_OP_stack_value)
		return RULE_NONE;
	/* rbp: unchanged, or saved at CFA + off. */
	if (dwarf_frame_register(f, REG_RBP, mem, &ops, &nops) != 0)
		return RULE_NONE;
	if (!(nops == 0 && ops == NULL)) {
		if (!cfa_offset(ops, nops, &rbp) || rbp == 0 || rbp % 8 || rbp < -1024 ||
		    rbp > 1016)
			return RULE_NONE;
	}
	if (dwarf_frame_cfa(f, &ops, &nops) != 0 || nops == 0)
		return RULE_NONE;
	if (nops == 1 && breg(&ops[0], &reg, &off)) {
		kind = FX_CFI_REG;
	} else if (nops == 2 && breg(&ops[0], &reg, &off) && ops[1].atom == DW_OP_deref) {
		kind = FX_CFI_DEREF;
	} else if ((thr = plt_threshold(ops, nops)) >= 0) {
		kind = FX_CFI_PLT;
		reg = REG_RSP;
		off = thr;
	} else {
		return RULE_NONE;
	}
	if (reg > 15)
		return RULE_NONE;
	if (off >= INT16_MIN && off <= INT16_MAX)
		return RULE(kind, reg, 0, rbp / 8, off);
	if (off % 8 == 0 && off / 8 >= INT16_MIN && off / 8 <= INT16_MAX)
		return RULE(kind, reg, 1, rbp / 8, off / 8);
	return RULE_NONE;
}

static int push_row(struct fx_cfitab *t, struct table *tb, uint32_t start, uint32_t rule)
{
	if (tb->nrows == tb->rows_cap) {
		size_t n = tb->rows_cap ? tb->rows_cap * 2 : 64;
		struct row *p = realloc(tb->rows, n * sizeof(*p));

		if (!p)
			return -ENOMEM;
		tb->bytes += (n - tb->rows_cap) * sizeof(*p);
		t->bytes += (n - tb->rows_cap) * sizeof(*p);
		if (t->bytes > t->stats.peak_bytes)
			t->stats.peak_bytes = t->bytes;
		tb->rows = p;
		tb->rows_cap = n;
	}
	tb->rows[tb->nrows++] = (struct row){ start, rule };
	t->stats.rows++;
	return 0;
}

/* Compiles function @i: row by row through libdw, from its start to the
 * next function's. Equal neighbours are one row (rules leave out the
 * registers the fast path does not follow). A range libdw has no row for
 * gets a "none" row: libdwfl decides there. */
static int compile_fn(struct fx_cfitab *t, struct table *tb, size_t i)
{
	uint64_t lo = tb->base + tb->starts[i];
	uint64_t hi = tb->base + (i + 1 < tb->nfns ? tb->starts[i + 1] : tb->end);
	uint64_t at = lo;
	size_t first = tb->nrows, asked = 0;
	struct timespec t0, t1;
	int ret = 0;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	while (at < hi && ret == 0) {
		Dwarf_Frame *f = NULL;
		Dwarf_Addr s, e;
		uint32_t rule = RULE_NONE;

		if (asked++ == MAX_FN_ROWS) {
			t->stats.row_capped++;
			ret = push_row(t, tb, (uint32_t)(at - tb->base), RULE_NONE);
			break;
		}
		if (dwarf_cfi_addrframe(tb->cfi, at, &f) != 0) {
			ret = push_row(t, tb, (uint32_t)(at - tb->base), RULE_NONE);
			break;
		}
		if (dwarf_frame_info(f, &s, &e, NULL) >= 0 && e > at)
			rule = compile_rule(f);
		else
			e = hi;
		free(f);
		if (tb->nrows == first || tb->rows[tb->nrows - 1].rule != rule)
			ret = push_row(t, tb, (uint32_t)(at - tb->base), rule);
		at = e;
	}
	if (ret == 0 && tb->nrows == first)
		ret = push_row(t, tb, (uint32_t)(lo - tb->base), RULE_NONE);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	t->stats.compile_ns += (uint64_t)(t1.tv_sec - t0.tv_sec) * 1000000000ull +
			       (uint64_t)t1.tv_nsec - (uint64_t)t0.tv_nsec;
	if (ret < 0) {
		tb->nrows = first;
		return ret;
	}
	tb->fns[i] = (struct fn){ (uint32_t)first, (uint32_t)(tb->nrows - first) };
	t->stats.functions++;
	return 0;
}

static struct table *table_build(uint32_t file, int fd)
{
	const uint64_t page = 4096;
	struct table *tb = calloc(1, sizeof(*tb));
	struct fx_elf_fdes fdes;
	struct stat st;
	GElf_Ehdr eh;
	size_t phnum;
	uint64_t min = UINT64_MAX;

	if (!tb)
		return NULL;
	tb->file = file;
	if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size < (off_t)sizeof(eh))
		goto fail;
	tb->map = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
	if (tb->map == MAP_FAILED) {
		tb->map = NULL;
		goto fail;
	}
	tb->map_len = (size_t)st.st_size;
	tb->elf = elf_memory(tb->map, tb->map_len);
	if (!tb->elf || !gelf_getehdr(tb->elf, &eh) || eh.e_machine != EM_X86_64 ||
	    elf_getphdrnum(tb->elf, &phnum) != 0)
		goto fail;
	for (size_t i = 0; i < phnum; i++) {
		GElf_Phdr ph;

		if (!gelf_getphdr(tb->elf, (int)i, &ph) || ph.p_type != PT_LOAD)
			continue;
		if (tb->nloads == MAX_LOADS)
			goto fail;
		tb->loads[tb->nloads++] = (struct load){ ph.p_vaddr, ph.p_offset, ph.p_filesz };
		if (ph.p_vaddr < min)
			min = ph.p_vaddr;
	}
	if (!tb->nloads)
		goto fail;
	tb->base = min & ~(page - 1);
	if (fx_elf_read_fdes(tb->elf, fd, tb->base, MAX_FUNCS, &fdes) < 0 || !fdes.n) {
		free(fdes.starts);
		goto fail;
	}
	tb->starts = fdes.starts;
	tb->nfns = fdes.n;
	tb->end = (uint32_t)(fdes.last_end - tb->base);
	if (eh.e_entry >= tb->base && eh.e_entry - tb->base < UINT32_MAX) {
		size_t i = fx_search_last_le_u32(tb->starts, tb->nfns,
						 (uint32_t)(eh.e_entry - tb->base));

		tb->entry = eh.e_entry - tb->base;
		tb->entry_end = i + 1 < tb->nfns ? tb->starts[i + 1]
				: i == SIZE_MAX	 ? tb->starts[0]
						 : tb->entry;
		if (tb->entry_end < tb->entry)
			tb->entry_end = tb->entry;
	}
	tb->fns = calloc(tb->nfns, sizeof(*tb->fns));
	tb->cfi = dwarf_getcfi_elf(tb->elf);
	if (!tb->fns || !tb->cfi)
		goto fail;
	tb->bytes = sizeof(*tb) + tb->nfns * (sizeof(*tb->starts) + sizeof(*tb->fns));
	return tb;
fail:
	table_free(tb);
	return NULL;
}

/* ---- the cache ---- */

static void drop(struct fx_cfitab *t, size_t i)
{
	struct table *tb = t->v[i];

	t->slot[tb->file] = SLOT_UNKNOWN;
	t->bytes -= tb->bytes;
	t->gen++;
	table_free(tb);
	t->v[i] = t->v[--t->n];
	if (i < t->n)
		t->slot[t->v[i]->file] = (uint32_t)i + 2;
}

static void evict_for(struct fx_cfitab *t, const struct table *keep)
{
	while (t->bytes > t->max_bytes && t->n > 1) {
		size_t lru = SIZE_MAX;

		for (size_t i = 0; i < t->n; i++)
			if (t->v[i] != keep &&
			    (lru == SIZE_MAX || t->v[i]->last_use < t->v[lru]->last_use))
				lru = i;
		if (lru == SIZE_MAX)
			break;
		drop(t, lru);
		t->stats.evicted++;
	}
}

/* The table of @object, built on its first use. */
static struct table *table_of(struct fx_cfitab *t, uint32_t object)
{
	uint32_t file, s;
	struct table *tb;
	int fd;

	if (object >= t->file_of_cap || !t->file_of[object]) {
		if (grow_u32(&t->file_of, &t->file_of_cap, object) < 0)
			return NULL;
		t->file_of[object] = fx_objects_file(t->objs, object) + 1;
	}
	file = t->file_of[object] - 1;
	if (file >= t->slot_cap && grow_u32(&t->slot, &t->slot_cap, file) < 0)
		return NULL;
	s = t->slot[file];
	if (s == SLOT_NONE)
		return NULL;
	if (s != SLOT_UNKNOWN)
		return t->v[s - 2];
	if (t->n == t->cap) {
		size_t n = t->cap ? t->cap * 2 : 16;
		struct table **p = realloc(t->v, n * sizeof(struct table *));

		if (!p)
			return NULL;
		t->v = p;
		t->cap = n;
	}
	fd = fx_objects_dup_fd(t->objs, file);
	tb = fd >= 0 ? table_build(file, fd) : NULL;
	if (fd >= 0)
		close(fd);
	if (!tb) {
		/* Until the next fx_cfitab_drop_idle(): an object without an fd
		 * now may be opened again by a new mapping. */
		t->slot[file] = SLOT_NONE;
		t->stats.no_table++;
		return NULL;
	}
	t->v[t->n] = tb;
	t->slot[file] = (uint32_t)t->n + 2;
	t->n++;
	t->bytes += tb->bytes;
	if (t->bytes > t->stats.peak_bytes)
		t->stats.peak_bytes = t->bytes;
	return tb;
}

static bool vaddr_of(const struct table *tb, uint64_t off, uint64_t *vaddr)
{
	for (size_t i = 0; i < tb->nloads; i++) {
		const struct load *l = &tb->loads[i];

		if (off >= l->off && off - l->off < l->filesz) {
			*vaddr = l->vaddr + (off - l->off);
			return true;
		}
	}
	return false;
}

static void decode(uint32_t r, struct fx_cfi_rule *out)
{
	out->kind = (enum fx_cfi_kind)(r & 7);
	out->reg = (r >> 3) & 15;
	out->rbp = (int32_t)(int8_t)(uint8_t)(r >> 8) * 8;
	out->off = (int16_t)(uint16_t)(r >> 16);
	if (r & 0x80)
		out->off *= 8;
}

/* fx_cfitab_find() without the hits: 1 when the answer may be kept. */
static int find(struct fx_cfitab *t, struct table *tb, uint64_t off, struct fx_cfi_rule *out)
{
	const struct row *r;
	uint64_t va, rel;
	size_t i, lo, hi;

	memset(out, 0, sizeof(*out));
	if (!vaddr_of(tb, off, &va) || va < tb->base || va - tb->base >= tb->end)
		return 1;
	rel = va - tb->base;
	i = fx_search_last_le_u32(tb->starts, tb->nfns, (uint32_t)rel);
	if (i == SIZE_MAX)
		goto entry;
	if (!tb->fns[i].n) {
		size_t before = tb->bytes;

		if (compile_fn(t, tb, i) < 0)
			return 0; /* out of memory, maybe not next time */
		if (tb->bytes != before)
			evict_for(t, tb);
	}
	/* The last row at or before @rel, in the function's rows. */
	r = tb->rows + tb->fns[i].first;
	lo = 0;
	hi = tb->fns[i].n;
	while (hi - lo > 1) {
		size_t mid = lo + (hi - lo) / 2;

		if (r[mid].start <= rel)
			lo = mid;
		else
			hi = mid;
	}
	if (r[lo].start <= rel)
		decode(r[lo].rule, out);
	if (out->kind != FX_CFI_NONE)
		return 1;
entry:
	if (rel >= tb->entry && rel < tb->entry_end)
		out->kind = FX_CFI_OUTERMOST;
	return 1;
}

int fx_cfitab_find(struct fx_cfitab *t, uint32_t object, uint64_t off, struct fx_cfi_rule *out)
{
	struct hit *h = &t->hits[fx_mix64(off ^ ((uint64_t)object << 44)) % HITS];
	struct table *tb;

	if (h->gen == t->gen && h->off == off && h->object == object) {
		h->tb->last_use = t->now;
		*out = h->rule;
		return 0;
	}
	tb = table_of(t, object);
	if (!tb)
		return -ENOENT;
	tb->last_use = t->now;
	if (find(t, tb, off, out))
		*h = (struct hit){
			.tb = tb, .gen = t->gen, .off = off, .object = object, .rule = *out
		};
	return 0;
}

/* Where the code is put in the image built for libdw: any address would do,
 * the CFI's pointers being relative. */
#define JIT_CODE_AT 0x100000u

int fx_cfitab_compile_jit(const uint8_t *eh, size_t eh_len, const uint8_t *hdr, size_t hdr_len,
			  uint64_t code_size, struct fx_cfi_row *rows, size_t cap)
{
	static const char names[] = "\0.eh_frame\0.shstrtab";
	size_t shoff = (sizeof(Elf64_Ehdr) + eh_len + sizeof(names) + 7) & ~(size_t)7;
	size_t size = shoff + 3 * sizeof(Elf64_Shdr), n = 0;
	int32_t eh_ptr, code_rel;
	uint64_t hdr_at, at = JIT_CODE_AT;
	Elf64_Ehdr *e;
	Elf64_Shdr *sh;
	Dwarf_CFI *cfi;
	char *image;
	Elf *elf;

	/* {version 1, eh_frame_ptr pcrel|sdata4, fde_count udata4, table
	 * datarel|sdata4}, the pointer, the count, the first entry's start. */
	if (hdr_len < 20 || hdr[0] != 1 || hdr[1] != 0x1b || hdr[2] != 0x03 || hdr[3] != 0x3b ||
	    !eh_len || eh_len > (64u << 10) || !code_size || code_size > UINT32_MAX || !cap)
		return -EINVAL;
	memcpy(&eh_ptr, hdr + 4, 4);
	memcpy(&code_rel, hdr + 12, 4);
	/* The header is at code + -code_rel; .eh_frame at header + 4 + eh_ptr. */
	hdr_at = JIT_CODE_AT - (int64_t)code_rel;
	image = calloc(1, size);
	if (!image)
		return -ENOMEM;
	e = (Elf64_Ehdr *)image;
	memcpy(e->e_ident, ELFMAG, SELFMAG);
	e->e_ident[EI_CLASS] = ELFCLASS64;
	e->e_ident[EI_DATA] = ELFDATA2LSB;
	e->e_ident[EI_VERSION] = EV_CURRENT;
	e->e_type = ET_DYN;
	e->e_machine = EM_X86_64;
	e->e_version = EV_CURRENT;
	e->e_ehsize = sizeof(*e);
	e->e_shoff = shoff;
	e->e_shentsize = sizeof(Elf64_Shdr);
	e->e_shnum = 3;
	e->e_shstrndx = 2;
	memcpy(image + sizeof(*e), eh, eh_len);
	memcpy(image + sizeof(*e) + eh_len, names, sizeof(names));
	sh = (Elf64_Shdr *)(image + shoff);
	sh[1] = (Elf64_Shdr){ .sh_name = 1,
			      .sh_type = SHT_PROGBITS,
			      .sh_flags = SHF_ALLOC,
			      .sh_addr = hdr_at + 4 + (int64_t)eh_ptr,
			      .sh_offset = sizeof(*e),
			      .sh_size = eh_len,
			      .sh_addralign = 8 };
	sh[2] = (Elf64_Shdr){ .sh_name = 11,
			      .sh_type = SHT_STRTAB,
			      .sh_offset = sizeof(*e) + eh_len,
			      .sh_size = sizeof(names),
			      .sh_addralign = 1 };
	fx_elf_init();
	elf = elf_memory(image, size);
	cfi = elf ? dwarf_getcfi_elf(elf) : NULL;
	while (cfi && at < JIT_CODE_AT + code_size && n < cap) {
		Dwarf_Frame *f = NULL;
		Dwarf_Addr s, end;
		uint32_t rule = RULE_NONE;
		struct fx_cfi_rule r;

		if (dwarf_cfi_addrframe(cfi, at, &f) != 0 ||
		    dwarf_frame_info(f, &s, &end, NULL) < 0 || end <= at) {
			free(f);
			end = JIT_CODE_AT + code_size;
		} else {
			rule = compile_rule(f);
			free(f);
		}
		decode(rule, &r);
		if (!n || memcmp(&rows[n - 1].rule, &r, sizeof(r)))
			rows[n++] = (struct fx_cfi_row){ (uint32_t)(at - JIT_CODE_AT), r };
		at = end;
	}
	if (cfi)
		dwarf_cfi_end(cfi);
	if (elf)
		elf_end(elf);
	free(image);
	if (!cfi)
		return -EINVAL;
	return (int)n;
}

void fx_cfitab_set_now(struct fx_cfitab *t, uint64_t now)
{
	t->now = now;
}

/* Lets the pages of @tb's file that compiling touched leave the agent's
 * memory: a big binary's .eh_frame is megabytes (node's, libjvm's), and they
 * come back from the page cache when the next function is compiled. The
 * mapping is read-only: none of its pages holds anything but the file. */
static void release_pages(struct table *tb)
{
	if (tb->map)
		madvise(tb->map, tb->map_len, MADV_DONTNEED);
}

size_t fx_cfitab_drop_idle(struct fx_cfitab *t, uint64_t mark)
{
	size_t n = 0;

	for (size_t i = t->n; i-- > 0;) {
		if (t->v[i]->last_use <= mark) {
			drop(t, i);
			n++;
		} else {
			release_pages(t->v[i]);
		}
	}
	for (size_t i = 0; i < t->slot_cap; i++)
		if (t->slot[i] == SLOT_NONE)
			t->slot[i] = SLOT_UNKNOWN;
	t->stats.idle_dropped += n;
	return n;
}

void fx_cfitab_get_stats(const struct fx_cfitab *t, struct fx_cfitab_stats *out)
{
	*out = t->stats;
	out->objects = t->n;
	out->bytes = t->bytes;
}

int fx_cfitab_outermost(struct fx_cfitab *t, uint32_t object, uint64_t off)
{
	struct fx_cfi_rule r;

	if (fx_cfitab_find(t, object, off, &r) < 0)
		return -1;
	return r.kind == FX_CFI_OUTERMOST;
}

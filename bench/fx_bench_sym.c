/* SPDX-License-Identifier: MIT */
/* fx-bench-sym: the symbolizer benchmark's helper (bench/symbolize.py).
 *
 *   fx-bench-sym pick FILE N [SEED]
 *	prints N distinct code addresses of FILE (link-time addresses, as
 *	addr2line takes them), one "0xADDR KIND" a line, chosen from its DWARF:
 *	KIND "start" (a function's entry), "body" (a line-table row outside any
 *	inlined code) and "inline" (a row inside an inlined call), about 1/4,
 *	1/4 and 1/2 of them. The DWARF may be in FILE or in its debug file.
 *   fx-bench-sym pick-code FILE N [SEED]
 *	the same for a stripped FILE, which has no DWARF: N distinct addresses
 *	at random in its executable PT_LOAD segments, every byte as likely,
 *	KIND "code" (bench/stripped.py).
 *   fx-bench-sym resolve FILE ADDRS ROUNDS [OUT]
 *	resolves the addresses of ADDRS (the lines pick prints) with the agent's
 *	symbolizer in one batch, as the agent does for a window: per round a new
 *	symbolizer (cold), then the same batch again (warm). Prints one line per
 *	round, "round R cold_us C warm_us W unresolved U" and then what the
 *	symbolizer holds after the cold batch: "grouped G" (addresses named
 *	after their FDE's function, no_symbol), "fde_ranges F fde_bytes B"
 *	(its FDE tables), "held_bytes H" (all it counts), "heap_bytes P" (what
 *	malloc's heap grew by since before fx_symbolizer_new) and "rss_kib K"
 *	(what the process's RSS grew by: the first round's is the one to read,
 *	later rounds reuse the memory the last one freed). It writes the results
 *	of the first round to OUT in the form bench/symbolize.py compares with
 *	addr2line's: "0xADDR" then one "NAME<TAB>FILE:LINE" line per function,
 *	the innermost first (as addr2line -i prints them).
 * Older revisions' helpers print a round's line up to "unresolved U" and
 * have no pick-code: bench/stripped.py runs their resolve as it is.
 */
#include <dwarf.h>
#include <elfutils/libdwfl.h>
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <inttypes.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fxagent/elf.h"
#include "fxagent/symbolize.h"
#include "fxagent/util.h"

struct u64s {
	uint64_t *v;
	size_t n, cap;
};

struct range {
	uint64_t lo, hi;
};

struct ranges {
	struct range *v;
	size_t n, cap;
};

/* The executable PT_LOAD segments of the file: where code lives. */
struct segs {
	GElf_Phdr ph[32];
	size_t n;
};

static int push(struct u64s *a, uint64_t x)
{
	if (fx_grow(&a->v, &a->cap, a->n + 1, sizeof(*a->v)) < 0)
		return -ENOMEM;
	a->v[a->n++] = x;
	return 0;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return (x > y) - (x < y);
}

static int cmp_range(const void *a, const void *b)
{
	const struct range *x = a, *y = b;

	return (x->lo > y->lo) - (x->lo < y->lo);
}

static void sort_unique(struct u64s *a)
{
	size_t i, j = 0;

	qsort(a->v, a->n, sizeof(*a->v), cmp_u64);
	for (i = 0; i < a->n; i++) {
		if (j == 0 || a->v[j - 1] != a->v[i])
			a->v[j++] = a->v[i];
	}
	a->n = j;
}

static bool sorted_has(const struct u64s *a, uint64_t x)
{
	size_t lo = 0, hi = a->n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (a->v[mid] < x)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < a->n && a->v[lo] == x;
}

/* After merge_ranges: is @x inside one of them? */
static bool in_ranges(const struct ranges *r, uint64_t x)
{
	size_t lo = 0, hi = r->n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (r->v[mid].hi <= x)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < r->n && r->v[lo].lo <= x;
}

static void merge_ranges(struct ranges *r)
{
	size_t i, j = 0;

	qsort(r->v, r->n, sizeof(*r->v), cmp_range);
	for (i = 0; i < r->n; i++) {
		if (j && r->v[i].lo <= r->v[j - 1].hi) {
			if (r->v[i].hi > r->v[j - 1].hi)
				r->v[j - 1].hi = r->v[i].hi;
		} else {
			r->v[j++] = r->v[i];
		}
	}
	r->n = j;
}

static int read_segs(const char *path, struct segs *s)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	size_t i, n = 0;
	Elf *elf;
	int ret = 0;

	if (fd < 0)
		return -errno;
	elf_version(EV_CURRENT);
	elf = elf_begin(fd, ELF_C_READ, NULL);
	if (!elf || elf_getphdrnum(elf, &n) < 0) {
		ret = -ENOEXEC;
		goto out;
	}
	s->n = 0;
	for (i = 0; i < n && s->n < sizeof(s->ph) / sizeof(s->ph[0]); i++) {
		GElf_Phdr ph;

		if (gelf_getphdr(elf, (int)i, &ph) && ph.p_type == PT_LOAD && (ph.p_flags & PF_X))
			s->ph[s->n++] = ph;
	}
	if (!s->n)
		ret = -ENOEXEC;
out:
	elf_end(elf);
	close(fd);
	return ret;
}

/* Link-time address to file offset (what the agent's mappings give), or -1. */
static int64_t to_offset(const struct segs *s, uint64_t addr)
{
	for (size_t i = 0; i < s->n; i++) {
		const GElf_Phdr *ph = &s->ph[i];

		if (addr >= ph->p_vaddr && addr < ph->p_vaddr + ph->p_filesz)
			return (int64_t)(addr - ph->p_vaddr + ph->p_offset);
	}
	return -1;
}

struct pick {
	const struct segs *segs;
	struct u64s starts, rows;
	struct ranges inl;
};

static int walk_dies(struct pick *p, Dwarf_Die *die)
{
	Dwarf_Die child;
	int ret = 0;

	do {
		int tag = dwarf_tag(die);

		if (tag == DW_TAG_subprogram) {
			Dwarf_Addr base, lo, hi;

			/* A function split in hot and cold parts has only
			 * DW_AT_ranges: its entry is the first range. */
			if ((dwarf_lowpc(die, &lo) == 0 ||
			     dwarf_ranges(die, 0, &base, &lo, &hi) > 0) &&
			    to_offset(p->segs, lo) >= 0)
				ret = push(&p->starts, lo);
		} else if (tag == DW_TAG_inlined_subroutine) {
			Dwarf_Addr base, lo, hi;
			ptrdiff_t off = 0;

			while (!ret && (off = dwarf_ranges(die, off, &base, &lo, &hi)) > 0) {
				if (hi <= lo)
					continue;
				if (fx_grow(&p->inl.v, &p->inl.cap, p->inl.n + 1,
					    sizeof(*p->inl.v)) < 0)
					return -ENOMEM;
				p->inl.v[p->inl.n++] = (struct range){ lo, hi };
			}
		}
		if (!ret && dwarf_child(die, &child) == 0)
			ret = walk_dies(p, &child);
	} while (!ret && dwarf_siblingof(die, die) == 0);
	return ret;
}

static int collect(struct pick *p, Dwarf *dw)
{
	Dwarf_Off off = 0, next;
	size_t hsize;
	uint8_t unit_type;
	int ret = 0;

	while (!ret &&
	       dwarf_next_unit(dw, off, &next, &hsize, NULL, NULL, NULL, NULL, NULL, NULL) == 0) {
		Dwarf_Die cu, child;
		Dwarf_Lines *lines;
		size_t nlines = 0;

		if (!dwarf_offdie(dw, off + hsize, &cu) ||
		    dwarf_cu_info(cu.cu, NULL, &unit_type, NULL, NULL, NULL, NULL, NULL) != 0 ||
		    (unit_type != DW_UT_compile && unit_type != DW_UT_partial)) {
			off = next;
			continue;
		}
		if (dwarf_getsrclines(&cu, &lines, &nlines) == 0) {
			for (size_t i = 0; i < nlines && !ret; i++) {
				Dwarf_Line *l = dwarf_onesrcline(lines, i);
				Dwarf_Addr a;
				bool end = false;

				if (!l || dwarf_lineaddr(l, &a) != 0 ||
				    dwarf_lineendsequence(l, &end) != 0 || end)
					continue;
				/* Address 0 is where a linker leaves discarded code. */
				if (a && to_offset(p->segs, a) >= 0)
					ret = push(&p->rows, a);
			}
		}
		if (!ret && dwarf_child(&cu, &child) == 0)
			ret = walk_dies(p, &child);
		off = next;
	}
	return ret;
}

static uint64_t rnd(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

/* Prints up to @want entries of @a not printed yet, at random: a partial
 * Fisher-Yates shuffle that keeps its place in *@used. */
static size_t take(struct u64s *a, size_t *used, size_t want, const char *kind, uint64_t *seed)
{
	size_t got = 0;

	for (; *used < a->n && got < want; (*used)++, got++) {
		size_t i = *used, j = i + (size_t)(rnd(seed) % (a->n - i));
		uint64_t t = a->v[i];

		a->v[i] = a->v[j];
		a->v[j] = t;
		printf("0x%" PRIx64 " %s\n", a->v[i], kind);
	}
	return got;
}

static int cmd_pick(const char *path, size_t n, uint64_t seed)
{
	static const Dwfl_Callbacks cb = {
		.find_elf = dwfl_build_id_find_elf,
		.find_debuginfo = dwfl_standard_find_debuginfo,
		.section_address = dwfl_offline_section_address,
	};
	struct segs segs;
	struct pick p = { .segs = &segs };
	struct u64s body = { 0 }, inl = { 0 };
	size_t used_inl = 0, used_start = 0, used_body = 0;
	Dwfl *dwfl = NULL;
	Dwfl_Module *mod;
	Dwarf_Addr bias;
	Dwarf *dw;
	size_t got;
	int ret;

	ret = read_segs(path, &segs);
	if (ret < 0) {
		fprintf(stderr, "%s: not an ELF file with code: %s\n", path, strerror(-ret));
		return 1;
	}
	dwfl = dwfl_begin(&cb);
	mod = dwfl ? dwfl_report_offline(dwfl, "", path, -1) : NULL;
	dw = mod ? dwfl_module_getdwarf(mod, &bias) : NULL;
	if (!dw) {
		fprintf(stderr, "%s: no DWARF (in it or a debug file): %s\n", path,
			dwfl_errmsg(-1));
		ret = 1;
		goto out;
	}
	ret = collect(&p, dw);
	if (ret < 0) {
		fprintf(stderr, "out of memory\n");
		ret = 1;
		goto out;
	}
	sort_unique(&p.starts);
	sort_unique(&p.rows);
	merge_ranges(&p.inl);
	for (size_t i = 0; i < p.rows.n && !ret; i++) {
		uint64_t a = p.rows.v[i];

		if (sorted_has(&p.starts, a))
			continue;
		ret = push(in_ranges(&p.inl, a) ? &inl : &body, a);
	}
	if (ret < 0) {
		fprintf(stderr, "out of memory\n");
		ret = 1;
		goto out;
	}
	/* Rows and starts are disjoint here, so only the shares need care: what
	 * one kind lacks, the others make up. */
	got = take(&inl, &used_inl, n / 2, "inline", &seed);
	got += take(&p.starts, &used_start, (n - got) / 2, "start", &seed);
	got += take(&body, &used_body, n - got, "body", &seed);
	got += take(&inl, &used_inl, n - got, "inline", &seed);
	got += take(&p.starts, &used_start, n - got, "start", &seed);
	fprintf(stderr,
		"%s: %zu function starts, %zu rows outside inlined code, %zu inside; "
		"picked %zu\n",
		path, p.starts.n, body.n, inl.n, got);
	ret = got ? 0 : 1;
out:
	free(p.starts.v);
	free(p.rows.v);
	free(p.inl.v);
	free(body.v);
	free(inl.v);
	dwfl_end(dwfl);
	return ret;
}

/* The address @at bytes into the code of @s, counting the segments' file
 * bytes one after the other. */
static uint64_t code_addr(const struct segs *s, uint64_t at)
{
	for (size_t i = 0; i < s->n; i++) {
		if (at < s->ph[i].p_filesz)
			return s->ph[i].p_vaddr + at;
		at -= s->ph[i].p_filesz;
	}
	return s->ph[s->n - 1].p_vaddr;
}

static int cmd_pick_code(const char *path, size_t n, uint64_t seed)
{
	struct u64s a = { 0 };
	struct segs segs;
	uint64_t total = 0;
	size_t used = 0, got;
	int ret;

	ret = read_segs(path, &segs);
	if (ret < 0) {
		fprintf(stderr, "%s: not an ELF file with code: %s\n", path, strerror(-ret));
		return 1;
	}
	for (size_t i = 0; i < segs.n; i++)
		total += segs.ph[i].p_filesz;
	if (!total) {
		fprintf(stderr, "%s: its code segments are empty\n", path);
		return 1;
	}
	if (n > total)
		n = (size_t)total;
	/* Draws with repeats, keeping the distinct ones, until there are
	 * enough; in a few MiB of code 2000 draws repeat a handful. */
	for (int tries = 0; a.n < n && tries < 64; tries++) {
		for (size_t k = a.n; k < n; k++) {
			if (push(&a, code_addr(&segs, rnd(&seed) % total)) < 0) {
				fprintf(stderr, "out of memory\n");
				free(a.v);
				return 1;
			}
		}
		sort_unique(&a);
	}
	/* Sorted now: printed in a random order, as a window's frames come. */
	got = take(&a, &used, n, "code", &seed);
	fprintf(stderr, "%s: %" PRIu64 " bytes of code in %zu segments; picked %zu\n", path, total,
		segs.n, got);
	free(a.v);
	return got ? 0 : 1;
}

/* Resident KiB of this process. */
static uint64_t rss_kib(void)
{
	unsigned long long size = 0, resident = 0;
	FILE *f = fopen("/proc/self/statm", "re");

	if (!f)
		return 0;
	if (fscanf(f, "%llu %llu", &size, &resident) != 2)
		resident = 0;
	fclose(f);
	return resident * (uint64_t)sysconf(_SC_PAGESIZE) / 1024;
}

/* Bytes malloc has handed out (as the symbolizer counts its own). */
static uint64_t heap_bytes(void)
{
	struct mallinfo2 mi = mallinfo2();

	return (uint64_t)mi.uordblks + (uint64_t)mi.hblkhd;
}

static void write_results(FILE *f, const uint64_t *addrs, const struct fx_sym_result *res, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		fprintf(f, "0x%" PRIx64 "\n", addrs[i]);
		if (!res[i].sym_name) {
			fprintf(f, "??\t??:0\n");
			continue;
		}
		for (uint32_t k = res[i].n_frames; k-- > 0;) {
			const struct fx_sym_frame *fr = &res[i].frames[k];

			fprintf(f, "%s\t%s:%" PRIu32 "\n", fr->name, fr->file ? fr->file : "??",
				fr->line);
		}
	}
}

static int cmd_resolve(const char *path, const char *addr_path, int rounds, const char *out)
{
	struct u64s addrs = { 0 }, offs = { 0 };
	struct fx_elf_source src = { .fd = -1 };
	struct fx_sym_result *res = NULL;
	uint8_t id[FX_BUILD_ID_MAX];
	struct segs segs;
	char line[256];
	FILE *f = NULL;
	int ret = 1, fd, len;

	if (read_segs(path, &segs) < 0) {
		fprintf(stderr, "%s: not an ELF file with code\n", path);
		return 1;
	}
	fd = fx_elf_open_regular(path);
	len = fd >= 0 ? fx_elf_build_id_fd(fd, id, sizeof(id)) : fd;
	if (fd >= 0)
		close(fd);
	f = fopen(addr_path, "re");
	if (!f) {
		fprintf(stderr, "%s: %s\n", addr_path, strerror(errno));
		return 1;
	}
	while (fgets(line, sizeof(line), f)) {
		uint64_t a = strtoull(line, NULL, 16);
		int64_t off = to_offset(&segs, a);

		if (off < 0) {
			fprintf(stderr, "0x%" PRIx64 " is not in the code of %s\n", a, path);
			goto out;
		}
		if (push(&addrs, a) < 0 || push(&offs, (uint64_t)off) < 0)
			goto oom;
	}
	fclose(f);
	f = NULL;
	res = calloc(addrs.n ? addrs.n : 1, sizeof(*res));
	if (!res)
		goto oom;
	/* What the agent hands over: the path as mapped, and the build-id that
	 * the MMAP2 record carried. */
	src.path = path;
	src.build_id = len > 0 ? id : NULL;
	src.build_id_len = len > 0 ? (size_t)len : 0;
	for (int r = 0; r < rounds; r++) {
		uint64_t t0, t1, t2, heap0, rss0, heap1, rss1;
		struct fx_symbolizer_stats st;
		size_t unresolved, grouped;
		struct fx_symbolizer *s;

		heap0 = heap_bytes();
		rss0 = rss_kib();
		t0 = fx_now_ns(CLOCK_MONOTONIC);
		s = fx_symbolizer_new(NULL);
		if (!s)
			goto oom;
		fx_symbolizer_begin_batch(s);
		fx_symbolizer_resolve(s, &src, offs.v, offs.n, res);
		t1 = fx_now_ns(CLOCK_MONOTONIC);
		heap1 = heap_bytes();
		rss1 = rss_kib();
		fx_symbolizer_get_stats(s, &st);
		unresolved = grouped = 0;
		for (size_t i = 0; i < addrs.n; i++) {
			unresolved += !res[i].sym_name;
			grouped += res[i].no_symbol;
		}
		if (r == 0 && out) {
			f = fopen(out, "we");
			if (!f) {
				fprintf(stderr, "%s: %s\n", out, strerror(errno));
				fx_symbolizer_free(s);
				goto out;
			}
			write_results(f, addrs.v, res, addrs.n);
			fclose(f);
			f = NULL;
		}
		t2 = fx_now_ns(CLOCK_MONOTONIC);
		fx_symbolizer_begin_batch(s);
		fx_symbolizer_resolve(s, &src, offs.v, offs.n, res);
		t2 = fx_now_ns(CLOCK_MONOTONIC) - t2;
		printf("round %d cold_us %.1f warm_us %.1f unresolved %zu", r + 1,
		       (double)(t1 - t0) / 1e3, (double)t2 / 1e3, unresolved);
		printf(" grouped %zu fde_ranges %" PRIu64 " fde_bytes %" PRIu64, grouped,
		       st.fde_ranges, st.fde_bytes);
		printf(" held_bytes %" PRIu64 " heap_bytes %" PRId64 " rss_kib %" PRId64 "\n",
		       st.bytes, (int64_t)(heap1 - heap0), (int64_t)(rss1 - rss0));
		fflush(stdout);
		fx_symbolizer_free(s);
	}
	ret = 0;
	goto out;
oom:
	fprintf(stderr, "out of memory\n");
out:
	if (f)
		fclose(f);
	free(res);
	free(addrs.v);
	free(offs.v);
	return ret;
}

/* A whole positive number no larger than @max, or 0. */
static uint64_t number(const char *s, uint64_t max)
{
	char *end = NULL;
	unsigned long long v;

	errno = 0;
	v = strtoull(s, &end, 0);
	if (errno || end == s || *end || s[0] == '-' || v > max)
		return 0;
	return v;
}

int main(int argc, char **argv)
{
	if (argc >= 4 && argc <= 5 && strcmp(argv[1], "pick") == 0) {
		uint64_t n = number(argv[3], 1u << 24);
		uint64_t seed = argc == 5 ? number(argv[4], UINT64_MAX) : 0x5eed;

		/* xorshift needs a seed other than 0. */
		if (n && seed)
			return cmd_pick(argv[2], (size_t)n, seed);
	}
	if (argc >= 4 && argc <= 5 && strcmp(argv[1], "pick-code") == 0) {
		uint64_t n = number(argv[3], 1u << 24);
		uint64_t seed = argc == 5 ? number(argv[4], UINT64_MAX) : 0x5eed;

		if (n && seed)
			return cmd_pick_code(argv[2], (size_t)n, seed);
	}
	if (argc >= 5 && argc <= 6 && strcmp(argv[1], "resolve") == 0) {
		uint64_t rounds = number(argv[4], 1000);

		if (rounds)
			return cmd_resolve(argv[2], argv[3], (int)rounds,
					   argc == 6 ? argv[5] : NULL);
	}
	fprintf(stderr,
		"usage: %s pick FILE N [SEED]\n"
		"       %s pick-code FILE N [SEED]\n"
		"       %s resolve FILE ADDRS ROUNDS [OUT]\n",
		argv[0], argv[0], argv[0]);
	return 2;
}

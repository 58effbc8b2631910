/* SPDX-License-Identifier: MIT */
/* Compiled CFI rules against binutils' reading of the same .eh_frame
 * (`readelf --debug-dump=frames-interp`, a separate implementation), row by
 * row, for this test binary (its PLT included) and libc; and the cache's
 * byte bound and idle drop. */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <link.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "fxagent/cfitab.h"
#include "fxagent/elf.h"
#include "fxagent/procs.h"

/* A function of 1100 rows, the CFA 8 bytes further at each nop: more than
 * the rules compile for one function (the rest is left to libdwfl). */
__asm__(".text\n"
	".globl fx_many_rows\n"
	".type fx_many_rows, @function\n"
	"fx_many_rows:\n"
	".cfi_startproc\n"
	".rept 1100\n"
	"nop\n"
	".cfi_adjust_cfa_offset 8\n"
	".endr\n"
	"ret\n"
	".cfi_endproc\n"
	".size fx_many_rows, . - fx_many_rows\n");
void fx_many_rows(void);
/* 1100 rows that differ only in where rbx is saved: one rule to the fast
 * path, 1100 rows to ask libdw for. */
__asm__(".text\n"
	".globl fx_many_same\n"
	".type fx_many_same, @function\n"
	"fx_many_same:\n"
	".cfi_startproc\n"
	".rept 550\n"
	"nop\n"
	".cfi_offset rbx, -16\n"
	"nop\n"
	".cfi_restore rbx\n"
	".endr\n"
	"ret\n"
	".cfi_endproc\n"
	".size fx_many_same, . - fx_many_same\n");
void fx_many_same(void);

struct seg {
	uint64_t vaddr, off, filesz;
};

/* The PT_LOADs of @path, read here with libelf. */
static size_t read_segs(const char *path, struct seg *out, size_t cap)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	Elf *elf;
	size_t phnum, n = 0;

	assert_true(fd >= 0);
	fx_elf_init();
	elf = elf_begin(fd, ELF_C_READ, NULL);
	assert_non_null(elf);
	assert_int_equal(elf_getphdrnum(elf, &phnum), 0);
	for (size_t i = 0; i < phnum && n < cap; i++) {
		GElf_Phdr ph;

		if (gelf_getphdr(elf, (int)i, &ph) && ph.p_type == PT_LOAD)
			out[n++] = (struct seg){ ph.p_vaddr, ph.p_offset, ph.p_filesz };
	}
	elf_end(elf);
	close(fd);
	return n;
}

/* The object id of the mapping of this process whose path ends in @suffix. */
static uint32_t object_of(struct fx_procs *procs, struct fx_objects *objs, const char *suffix,
			  const char **path)
{
	const struct fx_proc *p = fx_procs_get(procs, (uint32_t)getpid());

	assert_non_null(p);
	for (size_t i = 0; i < p->nmaps; i++) {
		const struct fx_object *ob = fx_objects_get(objs, p->maps[i].object);
		size_t l = ob ? strlen(ob->path) : 0, sl = strlen(suffix);

		if (ob && l >= sl && !strcmp(ob->path + l - sl, suffix)) {
			*path = ob->path;
			return ob->id;
		}
	}
	fail_msg("no mapping of *%s", suffix);
	return 0;
}

struct tally {
	size_t rows, none, plt, outermost;
	uint64_t skip_lo, skip_hi, skip2_lo, skip2_hi; /* link-time addresses not compared */
};

/* The columns of readelf's table for one FDE: "LOC CFA rbx rbp ... ra". */
struct cols {
	int rbp, ra, rsp;
};

static void parse_header(char *line, struct cols *c)
{
	int i = 0;

	c->rbp = c->ra = c->rsp = -1;
	for (char *t = strtok(line, " \t\n"); t; t = strtok(NULL, " \t\n"), i++) {
		if (!strcmp(t, "rbp"))
			c->rbp = i;
		else if (!strcmp(t, "ra"))
			c->ra = i;
		else if (!strcmp(t, "rsp"))
			c->rsp = i;
	}
}

/* Checks one row of readelf's table against the rule at the same address. */
static void check_row(struct fx_cfitab *t, uint32_t object, const struct seg *segs, size_t nsegs,
		      char *line, const struct cols *c, struct tally *ty)
{
	char *tok[32];
	int n = 0;
	uint64_t loc, off = UINT64_MAX;
	struct fx_cfi_rule r;
	const char *cfa, *ra, *rbp;

	/* "r10 (r10)" is one column: the name in parentheses is left out. */
	for (char *x = strtok(line, " \t\n"); x && n < 32; x = strtok(NULL, " \t\n"))
		if (x[0] != '(')
			tok[n++] = x;
	if (n < 2 || c->ra < 0 || c->ra >= n)
		return;
	loc = strtoull(tok[0], NULL, 16);
	if ((loc >= ty->skip_lo && loc < ty->skip_hi) ||
	    (loc >= ty->skip2_lo && loc < ty->skip2_hi))
		return; /* test_row_cap's */
	for (size_t i = 0; i < nsegs; i++)
		if (loc >= segs[i].vaddr && loc - segs[i].vaddr < segs[i].filesz)
			off = loc - segs[i].vaddr + segs[i].off;
	assert_true(off != UINT64_MAX);
	assert_int_equal(fx_cfitab_find(t, object, off, &r), 0);
	cfa = tok[1];
	ra = tok[c->ra];
	rbp = c->rbp >= 0 && c->rbp < n ? tok[c->rbp] : "u";
	ty->rows++;
	if (!strcmp(ra, "u")) {
		assert_int_equal(r.kind, FX_CFI_OUTERMOST);
		ty->outermost++;
		return;
	}
	if (r.kind == FX_CFI_NONE) {
		/* Allowed only where a rule cannot say it; counted. */
		ty->none++;
		return;
	}
	if (c->rsp >= 0 && c->rsp < n && strcmp(tok[c->rsp], "u") != 0)
		fail_msg("row %s: rsp has a rule (%s) but the rule is kind %d", tok[0], tok[c->rsp],
			 r.kind);
	assert_string_equal(ra, "c-8");
	if (!strcmp(rbp, "u"))
		assert_int_equal(r.rbp, 0);
	else
		assert_int_equal(r.rbp, (int32_t)strtol(rbp + 1, NULL, 10));
	if (!strcmp(cfa, "exp")) {
		/* readelf does not show expressions: a PLT's, or a realigned
		 * frame's *(rbp - 8). */
		assert_true(r.kind == FX_CFI_PLT || r.kind == FX_CFI_DEREF);
		ty->plt += r.kind == FX_CFI_PLT;
		return;
	}
	assert_int_equal(r.kind, FX_CFI_REG);
	if (!strncmp(cfa, "rsp+", 4))
		assert_int_equal(r.reg, 7);
	else if (!strncmp(cfa, "rbp+", 4))
		assert_int_equal(r.reg, 6);
	else
		return; /* another register: only the first frame may use it */
	assert_int_equal(r.off, (int32_t)strtol(cfa + 4, NULL, 10));
}

/* The link-time address of @fn of object @object, whose segments are @segs. */
static uint64_t link_addr(struct fx_procs *procs, uint32_t object, const struct seg *segs,
			  size_t nsegs, void (*fn)(void))
{
	uint32_t o;
	uint64_t off;

	assert_true(fx_procs_resolve(fx_procs_get(procs, (uint32_t)getpid()),
				     (uint64_t)(uintptr_t)fn, &o, &off));
	assert_int_equal(o, object);
	for (size_t i = 0; i < nsegs; i++)
		if (off >= segs[i].off && off - segs[i].off < segs[i].filesz)
			return off - segs[i].off + segs[i].vaddr;
	fail_msg("no segment holds offset %#llx", (unsigned long long)off);
	return 0;
}

static void compare_with_readelf(const char *suffix, size_t min_rows, struct tally *ty,
				 void (*skip)(void))
{
	struct fx_objects *objs = fx_objects_new("/proc", 64);
	struct fx_procs *procs = fx_procs_new(objs, "/proc");
	struct fx_cfitab *t = fx_cfitab_new(objs, 64u << 20);
	struct seg segs[8];
	size_t nsegs;
	const char *path;
	uint32_t object = object_of(procs, objs, suffix, &path);
	char cmd[4200], line[1024];
	struct cols c = { -1, -1, -1 };
	bool in_eh = false, in_fde = false;
	FILE *f;

	nsegs = read_segs(path, segs, 8);
	snprintf(cmd, sizeof(cmd), "readelf --debug-dump=frames-interp '%s'", path);
	f = popen(cmd, "r");
	assert_non_null(f);
	memset(ty, 0, sizeof(*ty));
	if (skip) {
		ty->skip_lo = link_addr(procs, object, segs, nsegs, skip);
		ty->skip_hi = ty->skip_lo + 1200;
		ty->skip2_lo = link_addr(procs, object, segs, nsegs, fx_many_same);
		ty->skip2_hi = ty->skip2_lo + 1200;
	}
	while (fgets(line, sizeof(line), f)) {
		if (!strncmp(line, "Contents of the ", 16)) {
			in_eh = strstr(line, ".eh_frame section") != NULL;
			continue;
		}
		if (!in_eh)
			continue;
		/* A CIE's initial row is no code's: only FDEs' rows. */
		if (strstr(line, " FDE "))
			in_fde = true;
		else if (strstr(line, " CIE") || strstr(line, "ZERO terminator"))
			in_fde = false;
		else if (!strncmp(line, "   LOC", 6))
			parse_header(line, &c);
		else if (in_fde && line[0] == '0')
			check_row(t, object, segs, nsegs, line, &c, ty);
	}
	/* readelf 2.40 exits 1 on libc.so.6 without a word; the rows are read. */
	assert_true(WIFEXITED(pclose(f)));
	print_message("%s: %zu rows, %zu plt, %zu outermost, %zu left to libdwfl\n", suffix,
		      ty->rows, ty->plt, ty->outermost, ty->none);
	assert_true(ty->rows >= min_rows);
	/* Signal frames (__restore_rt) and rare expressions only. */
	assert_true(ty->none * 1000 <= ty->rows);
	fx_cfitab_free(t);
	fx_procs_free(procs);
	fx_objects_free(objs);
}

static void test_self(void **state)
{
	struct tally ty;

	(void)state;
	compare_with_readelf("/test_cfitab", 100, &ty, fx_many_rows);
	assert_true(ty.plt > 0); /* the PLT's expression was compiled, not left */
}

static void test_libc(void **state)
{
	struct tally ty;

	(void)state;
	compare_with_readelf("/libc.so.6", 10000, &ty, NULL);
	assert_true(ty.outermost > 0); /* clone3's and the like's last frame */
}

/* ld.so's _start calls _dl_start without CFI: a walk that gets there (a
 * process still in the loader, at every exec) reached the first frame, and
 * is whole, not cut short. */
static void test_entry_point(void **state)
{
	struct fx_objects *objs = fx_objects_new("/proc", 64);
	struct fx_procs *procs = fx_procs_new(objs, "/proc");
	struct fx_cfitab *t = fx_cfitab_new(objs, 64u << 20);
	struct seg segs[8];
	struct fx_cfi_rule r;
	const char *path;
	uint32_t ld = object_of(procs, objs, "/ld-linux-x86-64.so.2", &path);
	size_t nsegs = read_segs(path, segs, 8);
	uint64_t entry = 0, off = UINT64_MAX;
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	Elf *elf = elf_begin(fd, ELF_C_READ, NULL);
	GElf_Ehdr eh;

	(void)state;
	assert_non_null(gelf_getehdr(elf, &eh));
	entry = eh.e_entry;
	elf_end(elf);
	close(fd);
	for (size_t i = 0; i < nsegs; i++)
		if (entry >= segs[i].vaddr && entry - segs[i].vaddr < segs[i].filesz)
			off = entry - segs[i].vaddr + segs[i].off;
	assert_true(off != UINT64_MAX);
	/* The return address of its call to _dl_start, moved into the call. */
	assert_int_equal(fx_cfitab_find(t, ld, off + 7, &r), 0);
	assert_int_equal(r.kind, FX_CFI_OUTERMOST);
	fx_cfitab_free(t);
	fx_procs_free(procs);
	fx_objects_free(objs);
}

/* A function's rows are compiled up to MAX_FN_ROWS (1024); the rest of it is
 * libdwfl's: a crafted binary cannot hold the sampling thread. */
static void test_row_cap(void **state)
{
	struct fx_objects *objs = fx_objects_new("/proc", 64);
	struct fx_procs *procs = fx_procs_new(objs, "/proc");
	struct fx_cfitab *t = fx_cfitab_new(objs, 64u << 20);
	const struct fx_proc *p = fx_procs_get(procs, (uint32_t)getpid());
	struct fx_cfitab_stats st;
	struct fx_cfi_rule r;
	uint32_t o;
	uint64_t off;

	(void)state;
	assert_true(fx_procs_resolve(p, (uint64_t)(uintptr_t)&fx_many_rows, &o, &off));
	for (uint64_t k = 0; k < 1024; k += 31) {
		assert_int_equal(fx_cfitab_find(t, o, off + k, &r), 0);
		assert_int_equal(r.kind, FX_CFI_REG);
		assert_int_equal(r.reg, 7);
		assert_int_equal(r.off, 8 + 8 * (int32_t)k);
	}
	assert_int_equal(fx_cfitab_find(t, o, off + 1023, &r), 0);
	assert_int_equal(r.off, 8 + 8 * 1023);
	assert_int_equal(fx_cfitab_find(t, o, off + 1024, &r), 0);
	assert_int_equal(r.kind, FX_CFI_NONE);
	assert_int_equal(fx_cfitab_find(t, o, off + 1099, &r), 0);
	assert_int_equal(r.kind, FX_CFI_NONE);
	fx_cfitab_get_stats(t, &st);
	assert_int_equal(st.row_capped, 1);
	/* Rows merged into one rule are counted as libdw's rows: the bound is
	 * on the work, not on what is kept. */
	assert_true(fx_procs_resolve(p, (uint64_t)(uintptr_t)&fx_many_same, &o, &off));
	assert_int_equal(fx_cfitab_find(t, o, off + 10, &r), 0);
	assert_int_equal(r.kind, FX_CFI_REG);
	assert_int_equal(r.off, 8);
	assert_int_equal(fx_cfitab_find(t, o, off + 1050, &r), 0);
	assert_int_equal(r.kind, FX_CFI_NONE);
	fx_cfitab_get_stats(t, &st);
	assert_int_equal(st.row_capped, 2);
	fx_cfitab_free(t);
	fx_procs_free(procs);
	fx_objects_free(objs);
}

static void test_bound_and_idle(void **state)
{
	struct fx_objects *objs = fx_objects_new("/proc", 64);
	struct fx_procs *procs = fx_procs_new(objs, "/proc");
	struct fx_cfitab *t = fx_cfitab_new(objs, 1); /* fits no table: one at a time */
	struct fx_cfitab_stats st;
	struct fx_cfi_rule r;
	const char *path;
	uint32_t self = object_of(procs, objs, "/test_cfitab", &path);
	uint32_t libc = object_of(procs, objs, "/libc.so.6", &path);
	void *libc_handle, *libc_qsort;
	uint64_t off;
	uint32_t o;

	(void)state;
	assert_true(fx_procs_resolve(fx_procs_get(procs, (uint32_t)getpid()),
				     (uint64_t)(uintptr_t)&test_bound_and_idle, &o, &off));
	assert_int_equal(o, self);
	fx_cfitab_set_now(t, 1);
	assert_int_equal(fx_cfitab_find(t, self, off, &r), 0);
	assert_int_equal(r.kind, FX_CFI_REG);
	fx_cfitab_set_now(t, 2);
	/* libc's own qsort: &qsort is ASan's interceptor in a sanitizer build */
	libc_handle = dlopen("libc.so.6", RTLD_NOW | RTLD_NOLOAD);
	assert_non_null(libc_handle);
	libc_qsort = dlsym(libc_handle, "qsort");
	assert_non_null(libc_qsort);
	assert_true(fx_procs_resolve(fx_procs_get(procs, (uint32_t)getpid()),
				     (uint64_t)(uintptr_t)libc_qsort, &o, &off));
	assert_int_equal(o, libc);
	assert_int_equal(fx_cfitab_find(t, libc, off, &r), 0);
	/* qsort's first instruction: the CFA is rsp + 8, rbp untouched */
	assert_int_equal(r.kind, FX_CFI_REG);
	assert_int_equal(r.reg, 7);
	assert_int_equal(r.off, 8);
	assert_int_equal(r.rbp, 0);
	fx_cfitab_get_stats(t, &st);
	assert_int_equal(st.objects, 1); /* this binary's table went for libc's */
	assert_int_equal(st.evicted, 1);
	assert_true(st.functions >= 2);
	/* An id no object has. */
	assert_int_equal(fx_cfitab_find(t, 999999, 0, &r), -ENOENT);
	/* Used at 2, not after: dropped at mark 2, not at mark 1. */
	assert_int_equal(fx_cfitab_drop_idle(t, 1), 0);
	assert_int_equal(fx_cfitab_drop_idle(t, 2), 1);
	fx_cfitab_get_stats(t, &st);
	assert_int_equal(st.objects, 0);
	assert_int_equal(st.bytes, 0);
	assert_int_equal(st.idle_dropped, 1);
	dlclose(libc_handle);
	fx_cfitab_free(t);
	fx_procs_free(procs);
	fx_objects_free(objs);
}

/* Answers kept for return addresses seen before (the hits) are the
 * tables' own: equal to a roomy cache's, when each lookup of the other
 * object evicts the table an answer came from and builds it again. */
static void test_hits_follow_tables(void **state)
{
	struct fx_objects *objs = fx_objects_new("/proc", 64);
	struct fx_procs *procs = fx_procs_new(objs, "/proc");
	struct fx_cfitab *tight = fx_cfitab_new(objs, 1), *roomy = fx_cfitab_new(objs, 64u << 20);
	const struct fx_proc *me = fx_procs_get(procs, (uint32_t)getpid());
	const char *path;
	uint32_t self = object_of(procs, objs, "/test_cfitab", &path);
	void *libc_handle = dlopen("libc.so.6", RTLD_NOW | RTLD_NOLOAD);
	uintptr_t fns[4] = { (uintptr_t)&test_hits_follow_tables, (uintptr_t)&test_bound_and_idle,
			     0, 0 };
	struct fx_cfitab_stats st;
	size_t switches = 0;

	(void)state;
	assert_non_null(libc_handle);
	fns[2] = (uintptr_t)dlsym(libc_handle, "qsort");
	fns[3] = (uintptr_t)dlsym(libc_handle, "memcpy");
	assert_true(fns[2] && fns[3]);
	for (int round = 0; round < 3; round++) {
		for (size_t k = 0; k < 4; k++) {
			for (uint64_t d = 0; d < 64; d += 4) {
				struct fx_cfi_rule a, b;
				uint64_t off;
				uint32_t o;

				assert_true(fx_procs_resolve(me, (uint64_t)(uintptr_t)fns[k] + d,
							     &o, &off));
				assert_int_equal(o == self, k < 2);
				assert_int_equal(fx_cfitab_find(tight, o, off, &a), 0);
				assert_int_equal(fx_cfitab_find(roomy, o, off, &b), 0);
				assert_int_equal(a.kind, b.kind);
				assert_int_equal(a.reg, b.reg);
				assert_int_equal(a.off, b.off);
				assert_int_equal(a.rbp, b.rbp);
			}
			switches += k == 0 || k == 2;
		}
	}
	fx_cfitab_get_stats(tight, &st);
	/* each change of object evicted the other's table */
	assert_true(st.evicted + 1 >= switches);
	dlclose(libc_handle);
	fx_cfitab_free(tight);
	fx_cfitab_free(roomy);
	fx_procs_free(procs);
	fx_objects_free(objs);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_self),	       cmocka_unit_test(test_libc),
		cmocka_unit_test(test_entry_point),    cmocka_unit_test(test_row_cap),
		cmocka_unit_test(test_bound_and_idle), cmocka_unit_test(test_hits_follow_tables),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

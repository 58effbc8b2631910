/* SPDX-License-Identifier: MIT */
/*
 * Symbolizes ELF fixtures built at test time (tests/unit/fixtures). Expected
 * addresses come from the fixtures' own .symtab (read here with libelf),
 * expected lines from "LINE:<tag>" comments in the fixture source.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <gelf.h>
#include <inttypes.h>
#include <libelf.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fxagent/elf.h"
#include "fxagent/symbolize.h"

#ifndef FX_FIXTURE_DIR
#error "FX_FIXTURE_DIR comes from tests/unit/fixtures/CMakeLists.txt"
#endif

#define FIX(name) FX_FIXTURE_DIR "/" name

struct elf_sym {
	uint64_t vaddr, size;
	uint64_t offset; /* file offset of vaddr */
	uint64_t base;	 /* image base of the file */
};

/* @path opened with libelf; the test fails if it cannot be. */
static Elf *read_elf(const char *path, int *fd)
{
	Elf *elf;

	elf_version(EV_CURRENT);
	*fd = open(path, O_RDONLY | O_CLOEXEC);
	assert_true(*fd >= 0);
	elf = elf_begin(*fd, ELF_C_READ, NULL);
	assert_non_null(elf);
	return elf;
}

/* Reads symbol @name from the .symtab of @path, the way the test expects the
 * symbolizer to see it. */
static struct elf_sym fixture_sym(const char *path, const char *name)
{
	struct elf_sym r = { 0 };
	Elf_Scn *scn = NULL;
	size_t i, n, nph;
	bool found = false;
	uint64_t min = UINT64_MAX;
	Elf *elf;
	int fd;

	elf = read_elf(path, &fd);
	while (!found && (scn = elf_nextscn(elf, scn)) != NULL) {
		GElf_Shdr sh;
		Elf_Data *d;

		if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_SYMTAB)
			continue;
		d = elf_getdata(scn, NULL);
		n = sh.sh_size / sh.sh_entsize;
		for (i = 0; i < n; i++) {
			GElf_Sym sym;
			const char *sn;

			gelf_getsym(d, (int)i, &sym);
			sn = elf_strptr(elf, sh.sh_link, sym.st_name);
			if (sn && strcmp(sn, name) == 0) {
				r.vaddr = sym.st_value;
				r.size = sym.st_size;
				found = true;
				break;
			}
		}
	}
	if (!found)
		fail_msg("no symbol %s in %s", name, path);
	assert_int_equal(elf_getphdrnum(elf, &nph), 0);
	for (i = 0; i < nph; i++) {
		GElf_Phdr ph;

		gelf_getphdr(elf, (int)i, &ph);
		if (ph.p_type != PT_LOAD)
			continue;
		if (ph.p_vaddr < min)
			min = ph.p_vaddr;
		if ((ph.p_flags & PF_X) && r.vaddr >= ph.p_vaddr &&
		    r.vaddr < ph.p_vaddr + ph.p_filesz)
			r.offset = r.vaddr - ph.p_vaddr + ph.p_offset;
	}
	assert_true(r.offset != 0);
	r.base = min & ~(uint64_t)4095;
	elf_end(elf);
	close(fd);
	return r;
}

/* Line of the "LINE:<tag>" comment in the fixture source. */
static uint32_t marker_line(const char *tag)
{
	char line[512], want[64];
	uint32_t no = 0;
	FILE *f = fopen(FX_FIXTURE_SRC "/fxfix.c", "re");

	assert_non_null(f);
	snprintf(want, sizeof(want), "LINE:%s ", tag);
	while (fgets(line, sizeof(line), f)) {
		no++;
		if (strstr(line, want)) {
			fclose(f);
			return no;
		}
	}
	fclose(f);
	fail_msg("no marker %s", tag);
	return 0;
}

static bool ends_with(const char *s, const char *suffix)
{
	size_t a = s ? strlen(s) : 0, b = strlen(suffix);

	return a >= b && strcmp(s + a - b, suffix) == 0;
}

static int resolve_path(struct fx_symbolizer *s, const char *path, const uint64_t *offs, size_t n,
			struct fx_sym_result *out)
{
	struct fx_elf_source src = { .fd = -1, .path = path };

	return fx_symbolizer_resolve(s, &src, offs, n, out);
}

/* Resolves @sym's start + 1 in @path (its address read from @sym_path, which
 * has the same layout) and checks the outer function. */
static struct fx_sym_result expect_function_in(struct fx_symbolizer *s, const char *path,
					       const char *sym_path, const char *sym,
					       const char *want_name)
{
	struct elf_sym e = fixture_sym(sym_path, sym);
	uint64_t off = e.offset + 1;
	struct fx_sym_result r;

	assert_int_equal(resolve_path(s, path, &off, 1, &r), 0);
	assert_non_null(r.sym_name);
	assert_string_equal(r.sym_name, want_name);
	assert_true(r.n_frames >= 1);
	assert_string_equal(r.frames[0].name, want_name);
	assert_int_equal(r.rel_addr, e.vaddr + 1 - e.base);
	assert_int_equal(r.sym_addr, e.vaddr - e.base);
	assert_int_equal(r.sym_size, e.size);
	return r;
}

static struct fx_sym_result expect_function(struct fx_symbolizer *s, const char *path,
					    const char *sym, const char *want_name)
{
	return expect_function_in(s, path, path, sym, want_name);
}

static void test_functions(void **state)
{
	struct fx_symbolizer *s = fx_symbolizer_new(NULL);
	struct fx_sym_result r;

	(void)state;
	assert_non_null(s);
	r = expect_function(s, FIX("libfxfix.so"), "fx_fix_alpha", "fx_fix_alpha");
	assert_true(ends_with(r.frames[0].file, "fxfix.c"));
	assert_true(r.frames[0].line > 0);
	expect_function(s, FIX("libfxfix.so"), "fx_fix_beta", "fx_fix_beta");
	expect_function(s, FIX("libfxfix.so"), "fx_fix_hidden", "fx_fix_hidden");
	expect_function(s, FIX("fxfix-pie"), "main", "main");
	expect_function(s, FIX("fxfix-pie"), "fx_fix_beta", "fx_fix_beta");
	/* Non-PIE: the image base is the first PT_LOAD (0x400000), not 0. */
	r = expect_function(s, FIX("fxfix-nopie"), "fx_fix_alpha", "fx_fix_alpha");
	assert_true(r.sym_addr < 0x100000);
	expect_function(s, FIX("fxfix-nopie"), "main", "main");
	fx_symbolizer_free(s);
}

/* An STT_NOTYPE label in code names the code after it (ld.so's _start); a
 * label inside a sized function does not split it (check_inline_in). */
static void test_asm_label(void **state)
{
	struct fx_symbolizer *s = fx_symbolizer_new(NULL);
	struct elf_sym e = fixture_sym(FIX("libfxfix.so"), "fx_fix_asm_entry");
	uint64_t off = e.offset + 1;
	struct fx_sym_result r;

	(void)state;
	assert_int_equal(e.size, 0);
	assert_int_equal(resolve_path(s, FIX("libfxfix.so"), &off, 1, &r), 0);
	assert_non_null(r.sym_name);
	assert_string_equal(r.sym_name, "fx_fix_asm_entry");
	assert_int_equal(r.sym_addr, e.vaddr - e.base);
	fx_symbolizer_free(s);
}

static void check_inline_in(struct fx_symbolizer *s, const char *path, const char *sym_path)
{
	struct elf_sym here = fixture_sym(sym_path, "fx_fix_inline_mark");
	struct fx_sym_result r;

	assert_int_equal(resolve_path(s, path, &here.offset, 1, &r), 0);
	assert_int_equal(r.n_frames, 2);
	assert_string_equal(r.sym_name, "fx_fix_caller");
	assert_string_equal(r.frames[0].name, "fx_fix_caller");
	assert_int_equal(r.frames[0].line, marker_line("call"));
	assert_true(ends_with(r.frames[0].file, "fxfix.c"));
	assert_string_equal(r.frames[1].name, "fx_fix_helper");
	assert_int_equal(r.frames[1].line, marker_line("helper"));
	assert_true(ends_with(r.frames[1].file, "fxfix.c"));
}

static void check_inline(struct fx_symbolizer *s, const char *path)
{
	check_inline_in(s, path, path);
}

static void test_inline_frames(void **state)
{
	struct fx_symbolizer *s = fx_symbolizer_new(NULL);
	struct fx_symbolizer_opts no_inline = { .no_inline = true };
	struct elf_sym e = fixture_sym(FIX("libfxfix.so"), "fx_fix_inline_mark");
	struct fx_sym_result r;

	(void)state;
	check_inline(s, FIX("libfxfix.so"));
	check_inline(s, FIX("fxfix-pie"));
	fx_symbolizer_free(s);

	/* Without DWARF: the function only. */
	s = fx_symbolizer_new(&no_inline);
	assert_int_equal(resolve_path(s, FIX("libfxfix.so"), &e.offset, 1, &r), 0);
	assert_int_equal(r.n_frames, 1);
	assert_string_equal(r.frames[0].name, "fx_fix_caller");
	assert_int_equal(r.frames[0].line, 0);
	fx_symbolizer_free(s);
}

static void test_cpp_demangled(void **state)
{
	struct fx_symbolizer_opts raw = { .no_demangle = true };
	struct fx_symbolizer *s = fx_symbolizer_new(NULL);

	(void)state;
	expect_function(s, FIX("libfxfix-cpp.so"), "_ZN4fxns5twiceIiEET_S1_",
			"int fxns::twice<int>(int)");
	expect_function(s, FIX("libfxfix-cpp.so"), "_ZN4fxns5twiceIlEET_S1_",
			"long fxns::twice<long>(long)");
	fx_symbolizer_free(s);
	s = fx_symbolizer_new(&raw);
	expect_function(s, FIX("libfxfix-cpp.so"), "_ZN4fxns5twiceIiEET_S1_",
			"_ZN4fxns5twiceIiEET_S1_");
	fx_symbolizer_free(s);
}

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	return remove(path);
}

/* A debug root holding libfxfix.debug under .build-id/xx/rest.debug. */
static void make_debug_root(char *root, size_t cap)
{
	char hex[2 * FX_BUILD_ID_MAX + 1], dir[4096], link[8192];
	uint8_t id[FX_BUILD_ID_MAX];
	int fd, len;

	snprintf(root, cap, "/tmp/fx-symbolize-test.XXXXXX");
	assert_non_null(mkdtemp(root));
	fd = open(FIX("libfxfix.debug"), O_RDONLY | O_CLOEXEC);
	assert_true(fd >= 0);
	len = fx_elf_build_id_fd(fd, id, sizeof(id));
	close(fd);
	assert_true(len > 2);
	fx_elf_hex(id, (size_t)len, hex);
	snprintf(dir, sizeof(dir), "%s/.build-id", root);
	assert_int_equal(mkdir(dir, 0755), 0);
	snprintf(dir, sizeof(dir), "%s/.build-id/%.2s", root, hex);
	assert_int_equal(mkdir(dir, 0755), 0);
	snprintf(link, sizeof(link), "%s/%s.debug", dir, hex + 2);
	assert_int_equal(symlink(FIX("libfxfix.debug"), link), 0);
}

static int count_fds(void)
{
	char path[64];
	int n = 0, fd;

	for (fd = 0; fd < 1024; fd++) {
		snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
		n += access(path, F_OK) == 0;
	}
	return n;
}

/* A stripped object without a debug file: every address of a function that
 * has no symbol gets the one name of the function's start, from
 * .eh_frame_hdr;
 * an address no FDE covers keeps the plain "<base>+0x<offset>". Asked at
 * another path, the same file's names follow that path. */
static void test_fde_names(void **state)
{
	const char *dirs[] = { "/nonexistent-fx-debug", NULL };
	struct fx_symbolizer_opts opts = { .debug_dirs = dirs };
	struct elf_sym hid = fixture_sym(FIX("libfxfix.so"), "fx_fix_hidden");
	uint64_t offs[3] = { hid.offset + 1, hid.offset + hid.size - 1, 0x10 };
	struct fx_sym_result r[3], o[3];
	char want[96], other[128], want_other[96];
	struct fx_symbolizer_stats st;
	struct fx_symbolizer *s;

	(void)state;
	s = fx_symbolizer_new(&opts);
	assert_non_null(s);
	assert_int_equal(resolve_path(s, FIX("libfxfix-stripped.so"), offs, 3, r), 0);
	/* The stats count the FDE table as part of the object's bytes. */
	fx_symbolizer_get_stats(s, &st);
	assert_true(st.fde_ranges > 0);
	assert_true(st.fde_bytes >= st.fde_ranges && st.fde_bytes < st.bytes);
	snprintf(want, sizeof(want), "libfxfix-stripped.so+0x%" PRIx64, hid.offset);
	for (int i = 0; i < 2; i++) {
		assert_true(r[i].no_symbol);
		assert_non_null(r[i].sym_name);
		assert_string_equal(r[i].sym_name, want);
		assert_int_equal(r[i].n_frames, 1);
		assert_string_equal(r[i].frames[0].name, want);
		assert_int_equal(r[i].sym_addr, hid.vaddr - hid.base);
		/* to the next function's start: its size and the padding after */
		assert_true(r[i].sym_size >= hid.size && r[i].sym_size < hid.size + 16);
	}
	assert_false(r[2].no_symbol);
	assert_null(r[2].sym_name);
	assert_string_equal(r[2].frames[0].name, "libfxfix-stripped.so+0x10");

	snprintf(other, sizeof(other), "%s/libother.so", FX_FIXTURE_DIR);
	unlink(other);
	assert_int_equal(symlink(FIX("libfxfix-stripped.so"), other), 0);
	assert_int_equal(resolve_path(s, other, offs, 2, o), 0);
	snprintf(want_other, sizeof(want_other), "libother.so+0x%" PRIx64, hid.offset);
	assert_string_equal(o[0].sym_name, want_other);
	assert_string_equal(o[1].frames[0].name, want_other);
	unlink(other);
	fx_symbolizer_free(s);
}

/* PLT stubs are named "<symbol>@plt" as binutils names them: every stub
 * objdump labels in a system binary gets the same name. */
static void test_plt_names(void **state)
{
	const char *bin = "/usr/bin/ls";
	char cmd[256], line[512], name[256];
	GElf_Shdr sh = { 0 };
	Elf_Scn *scn = NULL;
	size_t shstrndx, checked = 0;
	const char *sec = ".plt";
	unsigned long long addr;
	struct fx_symbolizer *s;
	FILE *p;
	Elf *elf;
	int fd;

	(void)state;
	elf = read_elf(bin, &fd);
	assert_int_equal(elf_getshdrstrndx(elf, &shstrndx), 0);
	while ((scn = elf_nextscn(elf, scn)) != NULL) {
		GElf_Shdr h;
		const char *n;

		if (!gelf_getshdr(scn, &h))
			continue;
		n = elf_strptr(elf, shstrndx, h.sh_name);
		if (n && (!strcmp(n, ".plt.sec") || (!strcmp(n, ".plt") && !sh.sh_size))) {
			sh = h;
			sec = !strcmp(n, ".plt.sec") ? ".plt.sec" : ".plt";
		}
	}
	elf_end(elf);
	close(fd);
	assert_true(sh.sh_size > 32);
	snprintf(cmd, sizeof(cmd), "objdump -d -j %s %s", sec, bin);
	p = popen(cmd, "r");
	assert_non_null(p);
	s = fx_symbolizer_new(NULL);
	while (fgets(line, sizeof(line), p)) {
		uint64_t off;
		struct fx_sym_result r;

		/* "<x@plt>": a stub; "<x@plt-0x10>" is the resolver before them */
		if (sscanf(line, "%llx <%255[^>]>:", &addr, name) != 2 || !ends_with(name, "@plt"))
			continue;
		off = addr - sh.sh_addr + sh.sh_offset + 4;
		assert_int_equal(resolve_path(s, bin, &off, 1, &r), 0);
		assert_non_null(r.sym_name);
		assert_string_equal(r.sym_name, name);
		assert_false(r.no_symbol);
		checked++;
	}
	assert_int_equal(pclose(p), 0);
	/* ls calls dozens of libc functions through its PLT */
	assert_true(checked >= 10);
	fx_symbolizer_free(s);
}

static void test_debug_file_by_build_id(void **state)
{
	char root[64], empty[128];
	const char *dirs[] = { NULL, NULL };
	struct fx_symbolizer_opts opts = { .debug_dirs = dirs };
	struct elf_sym hid = fixture_sym(FIX("libfxfix.so"), "fx_fix_hidden");
	struct fx_symbolizer *s;
	struct fx_sym_result r;
	int fds;

	(void)state;
	make_debug_root(root, sizeof(root));
	snprintf(empty, sizeof(empty), "%s/.build-id/00", root);

	/* Stripped and no debug file: the hidden function has no name. */
	dirs[0] = empty;
	s = fx_symbolizer_new(&opts);
	hid.offset += 1;
	assert_int_equal(resolve_path(s, FIX("libfxfix-stripped.so"), &hid.offset, 1, &r), 0);
	assert_true(r.sym_name == NULL || strcmp(r.sym_name, "fx_fix_hidden") != 0);
	fx_symbolizer_free(s);

	/* With the debug root: names, lines and inline frames come back. */
	dirs[0] = root;
	fds = count_fds();
	s = fx_symbolizer_new(&opts);
	r = expect_function_in(s, FIX("libfxfix-stripped.so"), FIX("libfxfix.so"), "fx_fix_hidden",
			       "fx_fix_hidden");
	assert_true(r.frames[0].line > 0);
	check_inline_in(s, FIX("libfxfix-stripped.so"), FIX("libfxfix.so"));
	/* Cached objects keep no file open. */
	assert_int_equal(count_fds(), fds);
	fx_symbolizer_free(s);
	assert_int_equal(nftw(root, rm_entry, 8, FTW_DEPTH | FTW_PHYS), 0);
}

static void test_debug_file_by_debuglink(void **state)
{
	const char *dirs[] = { "/nonexistent-debug-root", NULL };
	struct fx_symbolizer_opts opts = { .debug_dirs = dirs };
	struct fx_symbolizer *s = fx_symbolizer_new(&opts);

	(void)state;
	expect_function_in(s, FIX("libfxfix-dl.so"), FIX("libfxfix.so"), "fx_fix_hidden",
			   "fx_fix_hidden");
	check_inline_in(s, FIX("libfxfix-dl.so"), FIX("libfxfix.so"));
	fx_symbolizer_free(s);
}

static void test_lld_segments(void **state)
{
#ifdef FX_HAVE_LLD_FIXTURE
	struct fx_symbolizer *s = fx_symbolizer_new(NULL);
	struct elf_sym e = fixture_sym(FIX("libfxfix-lld.so"), "fx_fix_alpha");

	(void)state;
	/* The case that matters: text's address differs from its file offset. */
	assert_true(e.vaddr != e.offset);
	expect_function(s, FIX("libfxfix-lld.so"), "fx_fix_alpha", "fx_fix_alpha");
	expect_function(s, FIX("libfxfix-lld.so"), "fx_fix_call_hidden", "fx_fix_call_hidden");
	check_inline(s, FIX("libfxfix-lld.so"));
	fx_symbolizer_free(s);
#else
	(void)state;
	skip();
#endif
}

static void write_file(const char *path, const void *data, size_t len)
{
	FILE *f = fopen(path, "we");

	assert_non_null(f);
	assert_int_equal(fwrite(data, 1, len, f), len);
	assert_int_equal(fclose(f), 0);
}

static void expect_fallback(struct fx_symbolizer *s, const char *path, const char *base_name,
			    bool want_error)
{
	uint64_t offs[] = { 0x0, 0x1234, 0x10 };
	struct fx_sym_result r[3];
	char want[256];
	int ret;
	size_t i;

	ret = resolve_path(s, path, offs, 3, r);
	if (want_error)
		assert_true(ret < 0);
	for (i = 0; i < 3; i++) {
		assert_null(r[i].sym_name);
		assert_int_equal(r[i].n_frames, 1);
		snprintf(want, sizeof(want), "%s+0x%" PRIx64, base_name, offs[i]);
		assert_string_equal(r[i].frames[0].name, want);
	}
}

static void test_bad_files(void **state)
{
	char dir[64], trunc[128], rnd[128], empty[128];
	unsigned char buf[4096];
	struct fx_symbolizer *s = fx_symbolizer_new(NULL);
	struct fx_symbolizer_stats st;
	FILE *f;
	size_t i;

	(void)state;
	snprintf(dir, sizeof(dir), "/tmp/fx-symbolize-bad.XXXXXX");
	assert_non_null(mkdtemp(dir));
	f = fopen(FIX("libfxfix.so"), "re");
	assert_non_null(f);
	assert_int_equal(fread(buf, 1, 1000, f), 1000);
	fclose(f);
	snprintf(trunc, sizeof(trunc), "%s/trunc.so", dir);
	write_file(trunc, buf, 1000);
	srand(42);
	for (i = 0; i < sizeof(buf); i++)
		buf[i] = (unsigned char)rand();
	snprintf(rnd, sizeof(rnd), "%s/random.bin", dir);
	write_file(rnd, buf, sizeof(buf));
	snprintf(empty, sizeof(empty), "%s/empty", dir);
	write_file(empty, buf, 0);

	/* A truncated ELF file is readable in part: no symbols, no error needed. */
	expect_fallback(s, trunc, "trunc.so", false);
	expect_fallback(s, rnd, "random.bin", true);
	expect_fallback(s, empty, "empty", true);
	expect_fallback(s, "/nonexistent/dir/libgone.so.1", "libgone.so.1", true);
	fx_symbolizer_get_stats(s, &st);
	assert_int_equal(st.lookups, 12);
	assert_int_equal(st.unresolved, 12);
	/* Failures are remembered: asking again does not open the files again. */
	expect_fallback(s, rnd, "random.bin", true);
	fx_symbolizer_get_stats(s, &st);
	assert_int_equal(st.objects, 4);
	assert_int_equal(st.cache_hits, 3);
	fx_symbolizer_free(s);
	assert_int_equal(nftw(dir, rm_entry, 8, FTW_DEPTH | FTW_PHYS), 0);
}

static void test_no_symbol_fallback(void **state)
{
	struct fx_symbolizer *s = fx_symbolizer_new(NULL);
	uint64_t off = 0x10; /* inside the ELF header */
	struct fx_sym_result r;

	(void)state;
	assert_int_equal(resolve_path(s, FIX("libfxfix.so"), &off, 1, &r), 0);
	assert_null(r.sym_name);
	assert_int_equal(r.n_frames, 1);
	assert_string_equal(r.frames[0].name, "libfxfix.so+0x10");
	fx_symbolizer_free(s);
}

/* One build-id at two paths (a copy of a binary): one object, read once, and
 * an address with no symbol named after the path it was asked for. */
static void test_fallback_per_path(void **state)
{
	struct fx_symbolizer *s = fx_symbolizer_new(NULL);
	struct elf_sym a = fixture_sym(FIX("libfxfix.so"), "fx_fix_alpha");
	uint64_t offs[] = { 0x10, a.offset };
	struct fx_sym_result r1[2], r2[2];
	struct fx_symbolizer_stats st;
	uint8_t bid[FX_BUILD_ID_MAX];
	int fd = open(FIX("libfxfix.so"), O_RDONLY | O_CLOEXEC), len;
	struct fx_elf_source one = { .fd = fd, .path = "/a/libone.so", .build_id = bid };
	struct fx_elf_source two = { .fd = fd, .path = "/b\n/lib\ntwo.so", .build_id = bid };

	(void)state;
	assert_true(fd >= 0);
	len = fx_elf_build_id_fd(fd, bid, sizeof(bid));
	assert_true(len > 0);
	one.build_id_len = two.build_id_len = (size_t)len;
	assert_int_equal(fx_symbolizer_resolve(s, &one, offs, 2, r1), 0);
	assert_int_equal(fx_symbolizer_resolve(s, &two, offs, 2, r2), 0);
	assert_string_equal(r1[0].frames[0].name, "libone.so+0x10");
	assert_string_equal(r2[0].frames[0].name, "lib\ntwo.so+0x10");
	assert_int_equal(r1[0].rel_addr, r2[0].rel_addr);
	assert_string_equal(r2[1].sym_name, "fx_fix_alpha");
	assert_ptr_equal(r1[1].frames, r2[1].frames);
	/* Asked for again at the first path: its own name again. */
	assert_int_equal(fx_symbolizer_resolve(s, &one, offs, 1, r1), 0);
	assert_string_equal(r1[0].frames[0].name, "libone.so+0x10");
	fx_symbolizer_get_stats(s, &st);
	assert_int_equal(st.objects, 1);
	close(fd);
	fx_symbolizer_free(s);
}

static void test_fd_source_and_cache(void **state)
{
	struct fx_symbolizer *s = fx_symbolizer_new(NULL);
	struct elf_sym a = fixture_sym(FIX("libfxfix.so"), "fx_fix_alpha");
	struct elf_sym b = fixture_sym(FIX("libfxfix.so"), "fx_fix_beta");
	uint64_t offs[] = { a.offset, b.offset + 2, a.offset + 3 };
	struct fx_sym_result r1[3], r2[3];
	struct fx_symbolizer_stats st;
	struct fx_elf_source src = { .path = "/some/where/libfxfix.so" };
	int fd = open(FIX("libfxfix.so"), O_RDONLY | O_CLOEXEC);
	size_t i;

	(void)state;
	assert_true(fd >= 0);
	/* The fd is read (the path need not exist) and not consumed. */
	src.fd = fd;
	assert_int_equal(fx_symbolizer_resolve(s, &src, offs, 3, r1), 0);
	fx_symbolizer_get_stats(s, &st);
	assert_int_equal(st.objects, 1);
	assert_int_equal(st.lookups, 3);
	assert_int_equal(st.cache_hits, 0);
	assert_string_equal(r1[0].sym_name, "fx_fix_alpha");
	assert_string_equal(r1[1].sym_name, "fx_fix_beta");
	assert_string_equal(r1[2].sym_name, "fx_fix_alpha");
	assert_int_equal(fcntl(fd, F_GETFD), FD_CLOEXEC);

	assert_int_equal(fx_symbolizer_resolve(s, &src, offs, 3, r2), 0);
	fx_symbolizer_get_stats(s, &st);
	assert_int_equal(st.objects, 1);
	assert_int_equal(st.lookups, 6);
	assert_int_equal(st.cache_hits, 3);
	assert_int_equal(st.unresolved, 0);
	for (i = 0; i < 3; i++) {
		assert_ptr_equal(r1[i].frames, r2[i].frames);
		assert_int_equal(r1[i].rel_addr, r2[i].rel_addr);
	}
	close(fd);
	fx_symbolizer_free(s);
	fx_symbolizer_free(NULL);
}

/* DWARF shed for the budget is read again through the source asked for
 * now: an object read through an fd (as the agent reads every object) has
 * no path of its own to open again, and lost its lines and inline frames
 * for good (found by test_symstate). */
static void test_shed_dwarf_from_fd(void **state)
{
	/* Any DWARF at all is over this budget: the next object's sheds it. */
	struct fx_symbolizer_opts o = { .max_bytes = 1 };
	struct fx_symbolizer *s = fx_symbolizer_new(&o);
	struct elf_sym a = fixture_sym(FIX("libfxfix.so"), "fx_fix_alpha");
	struct elf_sym b = fixture_sym(FIX("libfxfix.so"), "fx_fix_beta");
	struct fx_elf_source fix = { .fd = open(FIX("libfxfix.so"), O_RDONLY | O_CLOEXEC),
				     .path = "/gone/libfxfix.so" };
	struct fx_elf_source other = { .fd = -1, .path = FIX("libfxfix-cpp.so") };
	struct fx_symbolizer_stats st;
	struct fx_sym_result r;
	uint64_t off;

	(void)state;
	assert_true(fix.fd >= 0);
	fx_symbolizer_begin_batch(s);
	off = a.offset;
	fx_symbolizer_resolve(s, &fix, &off, 1, &r);
	assert_non_null(r.frames[0].file);
	off = 0x1000;
	fx_symbolizer_resolve(s, &other, &off, 1, &r);
	fx_symbolizer_get_stats(s, &st);
	assert_true(st.dwarf_shed >= 1);
	/* A new fd of the same file, an address not cached. (In the same
	 * batch: a new one would trim the whole object, over such a budget.) */
	close(fix.fd);
	fix.fd = open(FIX("libfxfix.so"), O_RDONLY | O_CLOEXEC);
	off = b.offset + 2;
	fx_symbolizer_resolve(s, &fix, &off, 1, &r);
	assert_string_equal(r.sym_name, "fx_fix_beta");
	assert_non_null(r.frames[0].file);
	assert_true(r.frames[r.n_frames - 1].line > 0);
	close(fix.fd);
	fx_symbolizer_free(s);
}

/* The object set is bounded: the least recently used object of an earlier
 * batch is dropped; the objects of the current batch stay, so its results do. */
static void test_object_lru(void **state)
{
	struct fx_symbolizer *s = fx_symbolizer_new(NULL);
	struct fx_symbolizer_stats st;
	struct fx_sym_result r;
	uint8_t id[20] = { 0 };
	struct fx_elf_source src = {
		.fd = -1, .path = FIX("libfxfix.so"), .build_id = id, .build_id_len = 20
	};
	uint64_t off = 0x10;
	unsigned i;

	(void)state;
	/* Build-ids the file does not have: the mapping was of another file. */
	for (i = 0; i < 600; i++) {
		fx_symbolizer_begin_batch(s);
		memcpy(id, &i, sizeof(i));
		assert_int_equal(fx_symbolizer_resolve(s, &src, &off, 1, &r), -ESTALE);
		assert_string_equal(r.frames[0].name, "libfxfix.so+0x10");
	}
	fx_symbolizer_get_stats(s, &st);
	assert_int_equal(st.objects, 600);
	/* 512 held, the other 88 evicted and counted. */
	assert_int_equal(st.objects_held, 512);
	assert_int_equal(st.evicted, 88);
	assert_int_equal(st.trimmed + st.idle_dropped, 0);
	/* The most recent one is still known, the first one was dropped. */
	memcpy(id, &(unsigned){ 599 }, sizeof(i));
	fx_symbolizer_resolve(s, &src, &off, 1, &r);
	fx_symbolizer_get_stats(s, &st);
	assert_int_equal(st.objects, 600);
	memcpy(id, &(unsigned){ 0 }, sizeof(i));
	fx_symbolizer_resolve(s, &src, &off, 1, &r);
	fx_symbolizer_get_stats(s, &st);
	assert_int_equal(st.objects, 601);
	assert_int_equal(st.objects_held, 512);
	assert_int_equal(st.evicted, 89);
	fx_symbolizer_free(s);
}

/* One batch using more objects than the bound keeps every result valid. */
/* Memory is given back: objects no batch since a mark used are freed, and
 * between batches what is held stays under max_bytes; lookups after either
 * give the same answers (the files are read again). */
static void test_memory_bounds(void **state)
{
	struct fx_symbolizer_opts opts = { .max_bytes = 1 };
	struct fx_symbolizer *s = fx_symbolizer_new(&opts);
	struct fx_symbolizer_stats st;
	struct elf_sym a = fixture_sym(FIX("libfxfix.so"), "fx_fix_inline_mark");
	struct fx_sym_result r1, r2;
	uint64_t off = a.offset, mark;

	(void)state;
	fx_symbolizer_begin_batch(s);
	assert_int_equal(resolve_path(s, FIX("libfxfix.so"), &off, 1, &r1), 0);
	expect_function(s, FIX("fxfix-pie"), "fx_fix_alpha", "fx_fix_alpha");
	fx_symbolizer_get_stats(s, &st);
	/* Within a batch the bound waits: its results stay valid. */
	assert_int_equal(st.objects_held, 2);
	assert_true(st.bytes > 1);
	/* Reading the second's DWARF let the first's go (counted). */
	assert_int_equal(st.dwarf_objects, 1);
	assert_int_equal(st.dwarf_shed, 1);
	assert_int_equal(st.results, 2);
	assert_true(st.results_bytes > 0 && st.results_bytes < st.bytes);
	assert_int_equal(r1.n_frames, 2);
	assert_string_equal(r1.frames[1].name, "fx_fix_helper");

	fx_symbolizer_begin_batch(s);
	/* Between batches: under the bound, here nothing at all; the DWARF
	 * went first, then the objects. */
	fx_symbolizer_get_stats(s, &st);
	assert_int_equal(st.objects_held, 0);
	assert_int_equal(st.trimmed, 2);
	assert_int_equal(st.dwarf_shed, 2);
	assert_int_equal(st.dwarf_objects, 0);
	assert_int_equal(st.results, 0);
	assert_int_equal(st.bytes, 0);
	off = a.offset;
	assert_int_equal(resolve_path(s, FIX("libfxfix.so"), &off, 1, &r2), 0);
	assert_int_equal(r2.n_frames, 2);
	assert_string_equal(r2.frames[0].name, "fx_fix_caller");
	assert_string_equal(r2.frames[1].name, "fx_fix_helper");
	assert_int_equal(r2.frames[1].line, marker_line("helper"));
	fx_symbolizer_free(s);

	/* drop_idle: the object the last batch did not use goes, the other stays
	 * (with a bound large enough to keep both). */
	s = fx_symbolizer_new(NULL);
	fx_symbolizer_begin_batch(s);
	expect_function(s, FIX("fxfix-pie"), "fx_fix_alpha", "fx_fix_alpha");
	fx_symbolizer_begin_batch(s);
	mark = fx_symbolizer_batch(s);
	off = a.offset;
	assert_int_equal(resolve_path(s, FIX("libfxfix.so"), &off, 1, &r1), 0);
	assert_int_equal(fx_symbolizer_drop_idle(s, mark), 1);
	fx_symbolizer_get_stats(s, &st);
	assert_int_equal(st.objects_held, 1);
	assert_int_equal(st.idle_dropped, 1);
	assert_int_equal(st.trimmed + st.evicted + st.dwarf_shed, 0);
	fx_symbolizer_free(s);
}

/* An object's (offset -> result) cache is bounded (2^18 results, as
 * symbolize.h says): once past it, the next batch that uses the object
 * starts it afresh, and the results dropped are counted. */
static void test_results_bound(void **state)
{
	enum { BOUND = 1 << 18, N = BOUND + 10 };
	/* max_bytes out of the way: 2^18 results are over 32 MiB. */
	struct fx_symbolizer_opts opts = { .max_bytes = 1ull << 30 };
	struct fx_symbolizer *s = fx_symbolizer_new(&opts);
	struct fx_elf_source src = { .fd = -1, .path = "/nonexistent/libgone.so" };
	struct fx_symbolizer_stats st;
	struct fx_sym_result *out = calloc(N, sizeof(*out));
	uint64_t *offs = calloc(N, sizeof(*offs));

	(void)state;
	assert_non_null(out);
	assert_non_null(offs);
	for (size_t i = 0; i < N; i++)
		offs[i] = 0x1000 + i;
	/* A batch may go over it: its results stay valid to its end. */
	fx_symbolizer_begin_batch(s);
	assert_int_equal(fx_symbolizer_resolve(s, &src, offs, N, out), -ENOENT);
	fx_symbolizer_get_stats(s, &st);
	assert_int_equal(st.results, N);
	assert_int_equal(st.results_evicted, 0);
	assert_string_equal(out[N - 1].frames[0].name, "libgone.so+0x41009");
	/* Used again in the next batch: the cache starts afresh. */
	fx_symbolizer_begin_batch(s);
	assert_int_equal(fx_symbolizer_resolve(s, &src, offs, 1, out), -ENOENT);
	fx_symbolizer_get_stats(s, &st);
	assert_int_equal(st.results, 1);
	assert_int_equal(st.results_evicted, N);
	assert_int_equal(st.cache_hits, 0);
	assert_string_equal(out[0].frames[0].name, "libgone.so+0x1000");
	fx_symbolizer_free(s);
	free(out);
	free(offs);
}

/* File offsets of up to @cap function entries of @path's executable code. */
static size_t function_offsets(const char *path, uint64_t *offs, size_t cap)
{
	Elf_Scn *scn = NULL;
	size_t n = 0, nph;
	Elf64_Word type;
	Elf *elf;
	int fd;

	elf = read_elf(path, &fd);
	/* .dynsym when there is no .symtab (a stripped library) */
	type = fx_elf_section(elf, ".symtab", NULL) ? SHT_SYMTAB : SHT_DYNSYM;
	assert_int_equal(elf_getphdrnum(elf, &nph), 0);
	while ((scn = elf_nextscn(elf, scn)) != NULL) {
		GElf_Shdr sh;
		Elf_Data *d;

		if (!gelf_getshdr(scn, &sh) || sh.sh_type != type)
			continue;
		d = elf_getdata(scn, NULL);
		for (size_t i = 0; i < sh.sh_size / sh.sh_entsize && n < cap; i++) {
			GElf_Sym sym;

			gelf_getsym(d, (int)i, &sym);
			if (GELF_ST_TYPE(sym.st_info) != STT_FUNC || !sym.st_value)
				continue;
			for (size_t k = 0; k < nph; k++) {
				GElf_Phdr ph;

				gelf_getphdr(elf, (int)k, &ph);
				if (ph.p_type == PT_LOAD && (ph.p_flags & PF_X) &&
				    sym.st_value >= ph.p_vaddr &&
				    sym.st_value < ph.p_vaddr + ph.p_filesz)
					offs[n++] = sym.st_value - ph.p_vaddr + ph.p_offset;
			}
		}
	}
	elf_end(elf);
	close(fd);
	return n;
}

/* Bytes malloc has handed out. */
static size_t heap_now(void)
{
	struct mallinfo2 mi = mallinfo2();

	return mi.uordblks + mi.hblkhd;
}

/* max_bytes bounds what the symbolizer really holds: the memory libdw's
 * tables take (line tables, abbreviations, CUs: twice the debug sections and
 * more) is counted, not only the sections. Every function of the agent's
 * binary, with its DWARF. */
static void test_memory_counts_libdw(void **state)
{
	enum { CAP = 20000 };
	struct fx_elf_source src = { .fd = -1, .path = FX_AGENT_EXE };
	struct fx_symbolizer_stats st;
	struct fx_symbolizer *s;
	struct fx_sym_result *out;
	uint64_t *offs;
	size_t n, heap0, grew;

	(void)state;
#if defined(__SANITIZE_ADDRESS__)
	print_message("skipped: ASan's allocator is not malloc's, mallinfo2 does not see it\n");
	skip();
#endif
	offs = calloc(CAP, sizeof(*offs));
	out = calloc(CAP, sizeof(*out));
	assert_non_null(offs);
	assert_non_null(out);
	n = function_offsets(FX_AGENT_EXE, offs, CAP);
	assert_true(n > 100);
	heap0 = heap_now();
	s = fx_symbolizer_new(NULL);
	fx_symbolizer_begin_batch(s);
	fx_symbolizer_resolve(s, &src, offs, n, out);
	fx_symbolizer_get_stats(s, &st);
	grew = heap_now() - heap0;
	print_message("%zu functions: the heap grew %.2f MiB, the symbolizer counts %.2f MiB "
		      "(DWARF %.2f MiB)\n",
		      n, grew / 1048576.0, st.bytes / 1048576.0, st.dwarf_bytes / 1048576.0);
	assert_true(grew > (1u << 20));
	assert_true(st.bytes >= grew * 8 / 10);
	assert_true(st.bytes <= grew * 12 / 10);
	fx_symbolizer_free(s);
	free(offs);
	free(out);
}

/* libdw's tables for one object's look-ups are freed within the batch as
 * they pass their bound (a fifth of max_bytes), and that changes no answer:
 * every function of the agent's binary, with a bound it passes, against a
 * symbolizer whose bound it does not. */
static void test_dwarf_tables_bounded(void **state)
{
	enum { CAP = 20000 };
	struct fx_elf_source src = { .fd = -1, .path = FX_AGENT_EXE };
	struct fx_symbolizer_opts small = { .max_bytes = 1u << 20 };
	struct fx_symbolizer *s, *ref;
	struct fx_symbolizer_stats st, rst;
	struct fx_sym_result *out, *want;
	uint64_t *offs;
	size_t n;

	(void)state;
#if defined(__SANITIZE_ADDRESS__)
	print_message("skipped: ASan's allocator is not malloc's, mallinfo2 does not see it\n");
	skip();
#endif
	offs = calloc(CAP, sizeof(*offs));
	out = calloc(CAP, sizeof(*out));
	want = calloc(CAP, sizeof(*want));
	assert_non_null(offs);
	assert_non_null(out);
	assert_non_null(want);
	n = function_offsets(FX_AGENT_EXE, offs, CAP);
	assert_true(n > 100);
	for (size_t i = 0; i < n; i++)
		offs[i] += 1; /* inside the function: its line, not its first */
	s = fx_symbolizer_new(&small);
	ref = fx_symbolizer_new(NULL);
	fx_symbolizer_begin_batch(s);
	fx_symbolizer_begin_batch(ref);
	assert_int_equal(fx_symbolizer_resolve(s, &src, offs, n, out), 0);
	assert_int_equal(fx_symbolizer_resolve(ref, &src, offs, n, want), 0);
	fx_symbolizer_get_stats(s, &st);
	fx_symbolizer_get_stats(ref, &rst);
	print_message("%zu functions: tables freed %" PRIu64 " times within the batch (at 1 MiB), "
		      "%" PRIu64 " at 32 MiB\n",
		      n, st.dwarf_tables_freed, rst.dwarf_tables_freed);
	assert_true(st.dwarf_tables_freed > 0);
	for (size_t i = 0; i < n; i++) {
		assert_int_equal(out[i].n_frames, want[i].n_frames);
		for (uint32_t k = 0; k < out[i].n_frames; k++) {
			assert_string_equal(out[i].frames[k].name, want[i].frames[k].name);
			assert_int_equal(out[i].frames[k].line, want[i].frames[k].line);
			if (want[i].frames[k].file)
				assert_string_equal(out[i].frames[k].file, want[i].frames[k].file);
		}
	}
	fx_symbolizer_free(s);
	fx_symbolizer_free(ref);
	free(offs);
	free(out);
	free(want);
}

/* The uncompressed size of @path's debug sections. */
static uint64_t debug_sections_bytes(const char *path)
{
	int fd = open(path, O_RDONLY);
	Elf *elf = elf_begin(fd, ELF_C_READ, NULL);
	Elf_Scn *scn = NULL;
	uint64_t sum = 0;
	size_t shstrndx;

	assert_non_null(elf);
	assert_int_equal(elf_getshdrstrndx(elf, &shstrndx), 0);
	while ((scn = elf_nextscn(elf, scn)) != NULL) {
		GElf_Shdr sh;
		const char *n;

		if (gelf_getshdr(scn, &sh) && (n = elf_strptr(elf, shstrndx, sh.sh_name)) &&
		    strncmp(n, ".debug_", 7) == 0)
			sum += sh.sh_size;
	}
	elf_end(elf);
	close(fd);
	return sum;
}

/* Once an object's addresses are answered, it gives back what libdw built
 * for the look-ups (units, line tables: 2-3 times the sections here), keeps
 * its sections (not read again: nothing shed) and its CU tables, and
 * answers the next window's new addresses (5 bytes into each function,
 * in the CUs the first window's tables cover) as a fresh symbolizer does:
 * names, lines and files of every inline level. */
static void test_dwarf_parked(void **state)
{
	enum { CAP = 20000 };
	struct fx_elf_source src = { .fd = -1, .path = FX_AGENT_EXE };
	struct fx_symbolizer_stats st1, st2;
	struct fx_symbolizer *s, *fresh;
	struct fx_sym_result *out, *want;
	uint64_t *offs, *two, sections = debug_sections_bytes(FX_AGENT_EXE);
	size_t n, half;

	(void)state;
	offs = calloc(CAP, sizeof(*offs));
	two = calloc(CAP, sizeof(*two));
	out = calloc(CAP, sizeof(*out));
	want = calloc(CAP, sizeof(*want));
	assert_true(offs && two && out && want);
	n = function_offsets(FX_AGENT_EXE, offs, CAP / 2);
	assert_true(n > 100);
	/* And a return address's distance into each: inline chains, lines. */
	for (size_t i = 0; i < n; i++)
		offs[n + i] = offs[i] + 5;
	n *= 2;
	half = n / 2;
	s = fx_symbolizer_new(NULL);
	fx_symbolizer_begin_batch(s);
	fx_symbolizer_resolve(s, &src, offs, half, out);
	fx_symbolizer_get_stats(s, &st1);
	fx_symbolizer_drop_idle(s, fx_symbolizer_batch(s));
	fx_symbolizer_get_stats(s, &st2);
	print_message("DWARF held after the look-ups %.2f MiB, its sections %.2f MiB\n",
		      st1.dwarf_bytes / 1048576.0, sections / 1048576.0);
	assert_int_equal(st2.objects_held, 1);
	assert_int_equal(st2.dwarf_objects, 1);
	assert_int_equal(st2.dwarf_bytes, st1.dwarf_bytes);
#if !defined(__SANITIZE_ADDRESS__)
	/* malloc's counts (not ASan's allocator): the sections and little more. */
	assert_true(st1.dwarf_bytes <= sections + sections / 4);
#endif
	/* The next window: the other half, and the first half's again (from the
	 * results cache), as a fresh symbolizer answers them. */
	memcpy(two, offs + half, (n - half) * sizeof(*two));
	memcpy(two + (n - half), offs, half * sizeof(*two));
	fx_symbolizer_begin_batch(s);
	fx_symbolizer_resolve(s, &src, two, n, out);
	fresh = fx_symbolizer_new(NULL);
	fx_symbolizer_begin_batch(fresh);
	fx_symbolizer_resolve(fresh, &src, two, n, want);
	for (size_t i = 0; i < n; i++) {
		assert_int_equal(out[i].n_frames, want[i].n_frames);
		for (uint32_t k = 0; k < out[i].n_frames; k++) {
			const char *f1 = out[i].frames[k].file, *f2 = want[i].frames[k].file;

			assert_string_equal(out[i].frames[k].name, want[i].frames[k].name);
			assert_int_equal(out[i].frames[k].line, want[i].frames[k].line);
			assert_string_equal(f1 ? f1 : "-", f2 ? f2 : "-");
		}
	}
	fx_symbolizer_get_stats(s, &st2);
	assert_int_equal(st2.dwarf_shed, 0);
	fx_symbolizer_free(fresh);
	fx_symbolizer_free(s);
	free(offs);
	free(two);
	free(out);
	free(want);
}

/* The one inflated copy in @dir/inflated: its path in @out (0), or -1. */
static int inflated_copy(const char *dir, char *out, size_t len)
{
	char sub[256];
	struct dirent *e;
	DIR *d;
	int n = 0;

	snprintf(sub, sizeof(sub), "%s/inflated", dir);
	d = opendir(sub);
	if (!d)
		return -1;
	while ((e = readdir(d)) != NULL) {
		if (e->d_name[0] == '.')
			continue;
		snprintf(out, len, "%s/%s", sub, e->d_name);
		n++;
	}
	closedir(d);
	return n == 1 ? 0 : -1;
}

/* Resident KiB of this process's mappings of @path (/proc/self/smaps). */
static long mapped_rss_kib(const char *path)
{
	FILE *f = fopen("/proc/self/smaps", "re");
	char line[4096];
	bool in = false;
	long kib = 0, v;

	assert_non_null(f);
	while (fgets(line, sizeof(line), f)) {
		if (strchr(line, '-') && strchr(line, ' ') && line[0] != ' ' &&
		    strspn(line, "0123456789abcdef") > 4 &&
		    line[strspn(line, "0123456789abcdef")] == '-')
			in = strstr(line, path) != NULL;
		else if (in && sscanf(line, "Rss: %ld kB", &v) == 1)
			kib += v;
	}
	fclose(f);
	return kib;
}

/* A new symbolizer (the agent started again) names libfxfix-z.so's inline
 * frames; its counts. */
static struct fx_symbolizer_stats inflated_round(const struct fx_symbolizer_opts *opts)
{
	struct fx_symbolizer *s = fx_symbolizer_new(opts);
	struct fx_symbolizer_stats st;

	assert_non_null(s);
	fx_symbolizer_begin_batch(s);
	check_inline(s, FIX("libfxfix-z.so"));
	fx_symbolizer_get_stats(s, &st);
	fx_symbolizer_free(s);
	return st;
}

/* Compressed debug sections (as Debian ships them) are inflated once into a
 * file of the agent's, mapped, and given back after each window; the names,
 * lines and inline frames are the same; the copy is used again by the next
 * symbolizer; a copy that is not the agent's own, or not whole, is never
 * used (written again), and a symlink in its place is not followed. */
static void test_inflated_copies(void **state)
{
	char dir[] = "/tmp/fxsym-inflated-XXXXXX", copy[512], victim[600];
	struct fx_symbolizer_opts opts = { .cache_max_bytes = 1ull << 30, .inflate_min_bytes = 1 };
	struct fx_symbolizer_stats st;
	struct fx_symbolizer *s;
	struct stat st1, st2;
	int fd;

	(void)state;
	assert_non_null(mkdtemp(dir));
	opts.cache_dir = dir;
	s = fx_symbolizer_new(&opts);
	assert_non_null(s);
	fx_symbolizer_begin_batch(s);
	check_inline(s, FIX("libfxfix-z.so"));
	fx_symbolizer_get_stats(s, &st);
	assert_int_equal(st.inflated_written, 1);
	assert_int_equal(st.inflated_hits, 0);
	assert_true(st.inflated_bytes > 0);
	assert_int_equal(inflated_copy(dir, copy, sizeof(copy)), 0);
	assert_int_equal(stat(copy, &st1), 0);
	assert_int_equal(st1.st_mode & 0777, 0600);
	/* The look-ups done, the copy's pages have left this process; the
	 * next window's look-ups get the same answers. */
	assert_int_equal(mapped_rss_kib(copy), 0);
	fx_symbolizer_drop_idle(s, fx_symbolizer_batch(s));
	fx_symbolizer_begin_batch(s);
	check_inline(s, FIX("libfxfix-z.so"));
	fx_symbolizer_get_stats(s, &st);
	assert_int_equal(st.inflated_written, 1);
	fx_symbolizer_free(s);

	/* Another symbolizer (the agent started again): the same copy. */
	st = inflated_round(&opts);
	assert_int_equal(st.inflated_hits, 1);
	assert_int_equal(st.inflated_written, 0);
	assert_int_equal(stat(copy, &st2), 0);
	assert_int_equal(st2.st_ino, st1.st_ino);

	/* Not whole (a crash while writing, a disk error): written again. */
	fd = open(copy, O_WRONLY | O_TRUNC);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, "\177ELF", 4), 4);
	close(fd);
	assert_int_equal(inflated_round(&opts).inflated_written, 1);

	/* A symlink in its place: not followed, its target untouched. */
	snprintf(victim, sizeof(victim), "%s/victim", dir);
	fd = open(victim, O_WRONLY | O_CREAT | O_EXCL, 0600);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, "keep", 4), 4);
	close(fd);
	assert_int_equal(unlink(copy), 0);
	assert_int_equal(symlink(victim, copy), 0);
	inflated_round(&opts);
	assert_int_equal(lstat(copy, &st2), 0);
	assert_true(S_ISREG(st2.st_mode));
	assert_int_equal(stat(victim, &st2), 0);
	assert_int_equal(st2.st_size, 4);

	/* Another user's file: never mapped (root can give it away). */
	if (geteuid() == 0) {
		assert_int_equal(chown(copy, 65534, 65534), 0);
		assert_int_equal(inflated_round(&opts).inflated_written, 1);
		assert_int_equal(stat(copy, &st2), 0);
		assert_int_equal(st2.st_uid, 0);
	}

	/* Section names past what a copy's name table takes (crafted): no
	 * copy, read into memory, the same answers. */
	assert_int_equal(unlink(copy), 0);
	s = fx_symbolizer_new(&opts);
	fx_symbolizer_begin_batch(s);
	check_inline(s, FIX("libfxfix-longnames.so"));
	fx_symbolizer_get_stats(s, &st);
	assert_int_equal(st.inflated_written, 0);
	assert_int_equal(inflated_copy(dir, copy, sizeof(copy)), -1);
	fx_symbolizer_free(s);

	/* No copy larger than half the cache's bound: read into memory. */
	opts.cache_max_bytes = 1024;
	assert_int_equal(inflated_round(&opts).inflated_written, 0);
	assert_int_equal(inflated_copy(dir, copy, sizeof(copy)), -1);
	assert_int_equal(nftw(dir, rm_entry, 8, FTW_DEPTH | FTW_PHYS), 0);
}

static void test_batch_keeps_results(void **state)
{
	struct fx_symbolizer *s = fx_symbolizer_new(NULL);
	struct fx_symbolizer_stats st;
	struct fx_sym_result r[600];
	uint8_t id[20] = { 0 };
	struct fx_elf_source src = {
		.fd = -1, .path = FIX("libfxfix.so"), .build_id = id, .build_id_len = 20
	};
	uint64_t off = 0x10;
	unsigned i;

	(void)state;
	fx_symbolizer_begin_batch(s);
	for (i = 0; i < 600; i++) {
		memcpy(id, &i, sizeof(i));
		fx_symbolizer_resolve(s, &src, &off, 1, &r[i]);
	}
	/* Nothing was evicted: the first object is still known... */
	memcpy(id, &(unsigned){ 0 }, sizeof(i));
	fx_symbolizer_resolve(s, &src, &off, 1, &r[0]);
	fx_symbolizer_get_stats(s, &st);
	assert_int_equal(st.objects, 600);
	/* ...and every result still reads (ASan would catch a freed one). */
	for (i = 0; i < 600; i++)
		assert_string_equal(r[i].frames[0].name, "libfxfix.so+0x10");
	/* The next batch may drop them again, down to the bound. */
	fx_symbolizer_begin_batch(s);
	memcpy(id, &(unsigned){ 1000 }, sizeof(i));
	fx_symbolizer_resolve(s, &src, &off, 1, &r[0]);
	memcpy(id, &(unsigned){ 1 }, sizeof(i));
	fx_symbolizer_resolve(s, &src, &off, 1, &r[0]);
	fx_symbolizer_get_stats(s, &st);
	assert_int_equal(st.objects, 602);
	fx_symbolizer_free(s);
}

/* A build-id that could not be read at one path is tried again at another. */
static void test_failure_not_sticky(void **state)
{
	struct fx_symbolizer *s = fx_symbolizer_new(NULL);
	struct elf_sym e = fixture_sym(FIX("libfxfix.so"), "fx_fix_beta");
	uint8_t id[FX_BUILD_ID_MAX];
	struct fx_elf_source src = { .fd = -1, .path = "/nonexistent/libfxfix.so", .build_id = id };
	struct fx_sym_result r;
	int fd, len;

	(void)state;
	fd = open(FIX("libfxfix.so"), O_RDONLY | O_CLOEXEC);
	assert_true(fd >= 0);
	len = fx_elf_build_id_fd(fd, id, sizeof(id));
	close(fd);
	assert_true(len > 0);
	src.build_id_len = (size_t)len;
	assert_int_equal(fx_symbolizer_resolve(s, &src, &e.offset, 1, &r), -ENOENT);
	assert_null(r.sym_name);
	src.path = FIX("libfxfix.so");
	assert_int_equal(fx_symbolizer_resolve(s, &src, &e.offset, 1, &r), 0);
	assert_string_equal(r.sym_name, "fx_fix_beta");
	/* Once read, the build-id answers for any path. */
	src.path = "/elsewhere/libfxfix.so";
	assert_int_equal(fx_symbolizer_resolve(s, &src, &e.offset, 1, &r), 0);
	assert_string_equal(r.sym_name, "fx_fix_beta");
	fx_symbolizer_free(s);
}

/* Copies @from to @to (a new file, 0644). */
static void copy_to(const char *from, const char *to)
{
	int in = open(from, O_RDONLY | O_CLOEXEC);
	struct stat st;
	char *buf;

	assert_true(in >= 0);
	assert_int_equal(fstat(in, &st), 0);
	buf = malloc((size_t)st.st_size);
	assert_non_null(buf);
	assert_int_equal(read(in, buf, (size_t)st.st_size), st.st_size);
	close(in);
	write_file(to, buf, (size_t)st.st_size);
	free(buf);
}

/* Function symbols of @path's .symtab (.dynsym without one), and the bytes
 * their names take. */
static size_t count_functions(const char *path, size_t *name_bytes)
{
	Elf_Scn *scn = NULL;
	size_t n = 0;
	int fd;
	Elf *elf = read_elf(path, &fd);
	Elf64_Word type = fx_elf_section(elf, ".symtab", NULL) ? SHT_SYMTAB : SHT_DYNSYM;

	*name_bytes = 0;
	while ((scn = elf_nextscn(elf, scn)) != NULL) {
		GElf_Shdr sh;
		Elf_Data *d;

		if (!gelf_getshdr(scn, &sh) || sh.sh_type != type || !sh.sh_entsize)
			continue;
		d = elf_getdata(scn, NULL);
		for (size_t i = 0; d && i < sh.sh_size / sh.sh_entsize; i++) {
			GElf_Sym sym;
			const char *name;

			if (!gelf_getsym(d, (int)i, &sym) ||
			    GELF_ST_TYPE(sym.st_info) != STT_FUNC || !sym.st_value ||
			    sym.st_shndx == SHN_UNDEF)
				continue;
			name = elf_strptr(elf, sh.sh_link, sym.st_name);
			n++;
			*name_bytes += name ? strlen(name) + 1 : 0;
		}
	}
	elf_end(elf);
	close(fd);
	return n;
}

/* A symbol table is not copied: an object holds 12 bytes a function and
 * the names looked up, not the names of every function. The agent, and
 * libstdc++ (5,000 functions and 300 KB of C++ names, in .dynsym). */
static void test_names_not_copied(void **state)
{
	static const char *const paths[] = { FX_AGENT_EXE,
					     "/usr/lib/x86_64-linux-gnu/libstdc++.so.6" };
	struct fx_symbolizer_opts opts = { .no_inline = true };

	(void)state;
	for (size_t k = 0; k < sizeof(paths) / sizeof(paths[0]); k++) {
		struct fx_symbolizer *s;
		struct fx_symbolizer_stats st;
		struct fx_sym_result r[64];
		uint64_t offs[64];
		size_t names, funcs, n;

		if (access(paths[k], R_OK) != 0) {
			print_message("names: no %s here: left out\n", paths[k]);
			continue;
		}
		funcs = count_functions(paths[k], &names);
		n = function_offsets(paths[k], offs, 64);
		assert_true(funcs > 500 && n > 0);
		s = fx_symbolizer_new(&opts);
		fx_symbolizer_begin_batch(s);
		assert_int_equal(resolve_path(s, paths[k], offs, n, r), 0);
		for (size_t i = 0; i < n; i++)
			assert_non_null(r[i].sym_name);
		fx_symbolizer_get_stats(s, &st);
		print_message("names: %s: %zu functions, their names %zu bytes; %zu looked up; "
			      "the object holds %" PRIu64 " bytes\n",
			      paths[k], funcs, names, n, st.bytes);
		/* the table at 12 bytes a function, and what 64 look-ups and
		 * the PLT hold (results, names, "@plt" names); copied, the
		 * names would take 40 bytes a function and their own bytes */
		assert_true(st.bytes <= 12 * funcs + (128u << 10));
		/* a big table: less than its names alone would take */
		if (names > (128u << 10))
			assert_true(st.bytes < names);
		fx_symbolizer_free(s);
	}
}

/* A name is read from the file it was listed in, or not at all: an object
 * whose file was replaced under it names the addresses it can without it
 * (DWARF, or the address), never with the new file's bytes at the old
 * offsets, and is read anew by the next batch. */
static void test_names_file_replaced(void **state)
{
	struct elf_sym a = fixture_sym(FIX("libfxfix.so"), "fx_fix_alpha");
	struct elf_sym b = fixture_sym(FIX("libfxfix.so"), "fx_fix_beta");
	struct fx_symbolizer_opts opts = { .no_inline = true };
	struct fx_symbolizer *s = fx_symbolizer_new(&opts), *fresh;
	char dir[] = "/tmp/fxsym-replace-XXXXXX", path[64], next[64];
	uint8_t id[FX_BUILD_ID_MAX];
	/* as the agent asks: by path, with the mapping's build-id */
	struct fx_elf_source src = { .fd = -1, .path = path, .build_id = id };
	struct fx_symbolizer_stats st;
	struct fx_sym_result r, want;
	int fd, len;

	(void)state;
	assert_non_null(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/libx.so", dir);
	snprintf(next, sizeof(next), "%s/libx.so.new", dir);
	copy_to(FIX("libfxfix.so"), path);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	assert_true(fd >= 0);
	len = fx_elf_build_id_fd(fd, id, sizeof(id));
	close(fd);
	assert_true(len > 0);
	src.build_id_len = (size_t)len;
	fx_symbolizer_begin_batch(s);
	assert_int_equal(fx_symbolizer_resolve(s, &src, &a.offset, 1, &r), 0);
	assert_string_equal(r.sym_name, "fx_fix_alpha");
	/* The same build-id written again (a deploy): another file. */
	copy_to(FIX("libfxfix.so"), next);
	assert_int_equal(rename(next, path), 0);
	assert_int_equal(fx_symbolizer_resolve(s, &src, &b.offset, 1, &r), 0);
	/* no name read from another file than the table's: the address */
	assert_null(r.sym_name);
	assert_true(strncmp(r.frames[0].name, "libx.so+0x", 10) == 0);
	fx_symbolizer_get_stats(s, &st);
	assert_int_equal(st.names_unread, 1);
	/* The next batch reads the object anew: a fresh symbolizer's answer. */
	fx_symbolizer_begin_batch(s);
	assert_int_equal(fx_symbolizer_resolve(s, &src, &b.offset, 1, &r), 0);
	fresh = fx_symbolizer_new(&opts);
	assert_int_equal(fx_symbolizer_resolve(fresh, &src, &b.offset, 1, &want), 0);
	assert_string_equal(r.sym_name, want.sym_name);
	assert_string_equal(r.sym_name, "fx_fix_beta");
	fx_symbolizer_get_stats(s, &st);
	assert_int_equal(st.names_unread, 1);
	fx_symbolizer_free(fresh);
	fx_symbolizer_free(s);
	unlink(path);
	rmdir(dir);
}

/* Same answers as elfutils' own eu-addr2line -f -i for the inline site. */
static void test_matches_eu_addr2line(void **state)
{
#ifdef FX_EU_ADDR2LINE
	struct elf_sym e = fixture_sym(FIX("libfxfix.so"), "fx_fix_inline_mark");
	struct fx_symbolizer *s = fx_symbolizer_new(NULL);
	char cmd[512], line[512];
	char names[4][512];
	uint32_t lines[4];
	struct fx_sym_result r;
	unsigned n = 0, k;
	FILE *p;

	(void)state;
	snprintf(cmd, sizeof(cmd), "%s -f -i -e %s 0x%" PRIx64, FX_EU_ADDR2LINE, FIX("libfxfix.so"),
		 e.vaddr);
	p = popen(cmd, "r");
	assert_non_null(p);
	/* Pairs of lines: "name[ inlined at ...]" then "file:line[:col]", innermost first. */
	while (n < 4 && fgets(line, sizeof(line), p)) {
		char *sp = strchr(line, ' '), *nl = strchr(line, '\n'), *colon;

		if (nl)
			*nl = '\0';
		if (sp)
			*sp = '\0';
		snprintf(names[n], sizeof(names[n]), "%s", line);
		if (!fgets(line, sizeof(line), p))
			break;
		colon = strchr(line, ':');
		lines[n] = colon ? (uint32_t)strtoul(colon + 1, NULL, 10) : 0;
		n++;
	}
	if (pclose(p) != 0) {
		/* elfutils 0.188 needs .debug_aranges, which clang does not emit. */
		fx_symbolizer_free(s);
		skip();
		return;
	}
	assert_int_equal(resolve_path(s, FIX("libfxfix.so"), &e.offset, 1, &r), 0);
	assert_int_equal(r.n_frames, n);
	for (k = 0; k < n; k++) {
		assert_string_equal(r.frames[r.n_frames - 1 - k].name, names[k]);
		assert_int_equal(r.frames[r.n_frames - 1 - k].line, lines[k]);
	}
	fx_symbolizer_free(s);
#else
	(void)state;
	skip();
#endif
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_functions),
		cmocka_unit_test(test_inline_frames),
		cmocka_unit_test(test_asm_label),
		cmocka_unit_test(test_memory_bounds),
		cmocka_unit_test(test_cpp_demangled),
		cmocka_unit_test(test_debug_file_by_build_id),
		cmocka_unit_test(test_fde_names),
		cmocka_unit_test(test_plt_names),
		cmocka_unit_test(test_debug_file_by_debuglink),
		cmocka_unit_test(test_lld_segments),
		cmocka_unit_test(test_bad_files),
		cmocka_unit_test(test_no_symbol_fallback),
		cmocka_unit_test(test_fallback_per_path),
		cmocka_unit_test(test_fd_source_and_cache),
		cmocka_unit_test(test_object_lru),
		cmocka_unit_test(test_results_bound),
		cmocka_unit_test(test_memory_counts_libdw),
		cmocka_unit_test(test_dwarf_parked),
		cmocka_unit_test(test_shed_dwarf_from_fd),
		cmocka_unit_test(test_inflated_copies),
		cmocka_unit_test(test_batch_keeps_results),
		cmocka_unit_test(test_failure_not_sticky),
		cmocka_unit_test(test_names_not_copied),
		cmocka_unit_test(test_names_file_replaced),
		cmocka_unit_test(test_dwarf_tables_bounded),
		cmocka_unit_test(test_matches_eu_addr2line),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

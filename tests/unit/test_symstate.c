/* SPDX-License-Identifier: MIT */
/*
 * A property of the symbolizer's state: whatever it went through, an answer
 * is the one a fresh symbolizer gives for the same address. One symbolizer
 * with small bounds (so that DWARF is shed and read again, objects are
 * trimmed, results dropped) and a cache of inflated debug files goes
 * through a random sequence (a fixed seed) of batches, look-ups by fd and by
 * path, objects dropped as idle and read again, one build-id under several
 * paths, the inflated copies removed under it, and the symbolizer made
 * anew; every answer is compared with the one a fresh symbolizer gave for
 * that (path, offset) when the test began, and every so often judged by
 * fxagent/namecheck.h as well.
 *
 * The objects: the ELF fixtures (with DWARF, stripped, debug file by
 * .gnu_debuglink, compressed debug sections, C++, PIE and not, lld's
 * layout), the agent itself, and, where this machine has them, Debian's
 * stripped perl, python3.11, libsqlite3 and liblzma, and libc with
 * libc6-dbg's debug file.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <fcntl.h>
#include <ftw.h>
#include <gelf.h>
#include <inttypes.h>
#include <libelf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fxagent/elf.h"
#include "fxagent/log.h"
#include "fxagent/namecheck.h"
#include "fxagent/symbolize.h"

#define FIX(name) FX_FIXTURE_DIR "/" name
#define POOL	  256  /* offsets per object */
#define OPS	  2500 /* steps of the sequence */
#define MAX_ASK	  48   /* offsets per look-up */
#define SEED	  0x5eed

struct answer {
	uint64_t rel_addr, sym_addr, sym_size;
	bool no_symbol, has_sym;
	uint32_t n;
	char *names, *files; /* n names, n files, "\n"-joined */
	uint32_t lines[8];
};

struct obj {
	const char *path;
	uint64_t offs[POOL];
	struct answer want[POOL];
	size_t n;
};

static struct obj objs[32];
static size_t nobjs;
static char tmp[] = "/tmp/fx-symstate-XXXXXX";
static char cache[300], alias[300], other[300];
static uint64_t rng = SEED;

static uint64_t rnd(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

static char *join(const struct fx_sym_result *r, bool files)
{
	size_t len = 1;
	char *s;

	for (uint32_t k = 0; k < r->n_frames; k++) {
		const char *v = files ? r->frames[k].file : r->frames[k].name;

		len += (v ? strlen(v) : 1) + 1;
	}
	s = calloc(1, len);
	assert_non_null(s);
	for (uint32_t k = 0; k < r->n_frames; k++) {
		const char *v = files ? r->frames[k].file : r->frames[k].name;

		strcat(s, v ? v : "-");
		strcat(s, "\n");
	}
	return s;
}

static void keep(struct answer *a, const struct fx_sym_result *r)
{
	*a = (struct answer){ .rel_addr = r->rel_addr,
			      .sym_addr = r->sym_addr,
			      .sym_size = r->sym_size,
			      .no_symbol = r->no_symbol,
			      .has_sym = r->sym_name != NULL,
			      .n = r->n_frames,
			      .names = join(r, false),
			      .files = join(r, true) };
	for (uint32_t k = 0; k < r->n_frames && k < 8; k++)
		a->lines[k] = r->frames[k].line;
}

/* The same answer as @a, or a message saying how it differs. */
static bool same(const struct answer *a, const struct fx_sym_result *r, char *why, size_t len)
{
	struct answer b;
	bool ok;

	keep(&b, r);
	ok = a->rel_addr == b.rel_addr && a->sym_addr == b.sym_addr && a->sym_size == b.sym_size &&
	     a->no_symbol == b.no_symbol && a->has_sym == b.has_sym && a->n == b.n &&
	     !strcmp(a->names, b.names) && !strcmp(a->files, b.files) &&
	     !memcmp(a->lines, b.lines, sizeof(a->lines));
	if (!ok)
		snprintf(why, len,
			 "fresh: 0x%" PRIx64 " [%s] sym 0x%" PRIx64 "+%" PRIu64
			 " files [%s] line %u"
			 " | now: 0x%" PRIx64 " [%s] sym 0x%" PRIx64 "+%" PRIu64
			 " files [%s] line %u",
			 a->rel_addr, a->names, a->sym_addr, a->sym_size, a->files, a->lines[0],
			 b.rel_addr, b.names, b.sym_addr, b.sym_size, b.files, b.lines[0]);
	free(b.names);
	free(b.files);
	return ok;
}

/* Offsets in @path's executable segments: most inside its functions
 * (.symtab/.dynsym), the rest anywhere in the code. */
static size_t pick_offsets(const char *path, uint64_t *out, size_t cap)
{
	uint64_t fn[4096][2];
	size_t nfn = 0, nph, n = 0;
	uint64_t xv = 0, xo = 0, xs = 0;
	Elf_Scn *scn = NULL;
	Elf *elf;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return 0;
	elf = elf_begin(fd, ELF_C_READ, NULL);
	if (!elf || elf_getphdrnum(elf, &nph) != 0) {
		close(fd);
		return 0;
	}
	for (size_t k = 0; k < nph; k++) {
		GElf_Phdr ph;

		if (gelf_getphdr(elf, (int)k, &ph) && ph.p_type == PT_LOAD && (ph.p_flags & PF_X)) {
			xv = ph.p_vaddr;
			xo = ph.p_offset;
			xs = ph.p_filesz;
		}
	}
	while ((scn = elf_nextscn(elf, scn)) != NULL && nfn < 4096) {
		GElf_Shdr sh;
		Elf_Data *d;

		if (!gelf_getshdr(scn, &sh) ||
		    (sh.sh_type != SHT_SYMTAB && sh.sh_type != SHT_DYNSYM) || !sh.sh_entsize)
			continue;
		d = elf_getdata(scn, NULL);
		for (size_t i = 0; d && i < sh.sh_size / sh.sh_entsize && nfn < 4096; i++) {
			GElf_Sym s;

			if (gelf_getsym(d, (int)i, &s) && GELF_ST_TYPE(s.st_info) == STT_FUNC &&
			    s.st_value >= xv && s.st_value < xv + xs && s.st_size)
				fn[nfn][0] = s.st_value, fn[nfn++][1] = s.st_size;
		}
	}
	while (xs && n < cap) {
		uint64_t v;

		if (nfn && rnd() % 4) {
			size_t i = rnd() % nfn;

			v = fn[i][0] + rnd() % fn[i][1];
		} else {
			v = xv + rnd() % xs;
		}
		out[n++] = v - xv + xo;
	}
	elf_end(elf);
	close(fd);
	return n;
}

static void add_object(const char *path)
{
	struct fx_elf_source src = { .fd = -1, .path = path };
	struct fx_sym_result out[POOL];
	struct fx_symbolizer *fresh;
	struct obj *o = &objs[nobjs];

	if (access(path, R_OK) != 0) {
		print_message("symstate: no %s here: left out\n", path);
		return;
	}
	o->path = path;
	o->n = pick_offsets(path, o->offs, POOL);
	assert_true(o->n > 0);
	/* A fresh symbolizer, one batch, nothing but this object. */
	fresh = fx_symbolizer_new(NULL);
	assert_non_null(fresh);
	fx_symbolizer_begin_batch(fresh);
	fx_symbolizer_resolve(fresh, &src, o->offs, o->n, out);
	for (size_t i = 0; i < o->n; i++)
		keep(&o->want[i], &out[i]);
	fx_symbolizer_free(fresh);
	nobjs++;
}

static int rm_entry(const char *p, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	return remove(p);
}

static void copy_file(const char *from, const char *to)
{
	char buf[65536];
	int in = open(from, O_RDONLY | O_CLOEXEC), out;
	ssize_t n;

	assert_true(in >= 0);
	out = open(to, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	assert_true(out >= 0);
	while ((n = read(in, buf, sizeof(buf))) > 0)
		assert_int_equal(write(out, buf, (size_t)n), n);
	close(in);
	close(out);
}

static int setup(void **state)
{
	(void)state;
	elf_version(EV_CURRENT);
	fx_log_set_level(FX_LOG_ERR);
	assert_non_null(mkdtemp(tmp));
	snprintf(cache, sizeof(cache), "%s/cache", tmp);
	/* One build-id under other paths: a copy with the same base name
	 * elsewhere, a hard link under another base name. */
	snprintf(alias, sizeof(alias), "%s/libfxfix.so", tmp);
	copy_file(FIX("libfxfix-stripped.so"), alias);
	snprintf(other, sizeof(other), "%s/libother-name.so", tmp);
	assert_int_equal(link(alias, other), 0);
	add_object(FIX("libfxfix.so"));
	add_object(FIX("libfxfix-stripped.so"));
	add_object(FIX("libfxfix-dl.so"));
	add_object(FIX("libfxfix-z.so"));
	add_object(FIX("libfxfix-cpp.so"));
	add_object(FIX("libfxfix-nobid.so"));
	add_object(FIX("fxfix-pie"));
	add_object(FIX("fxfix-nopie"));
#ifdef FX_HAVE_LLD_FIXTURE
	add_object(FIX("libfxfix-lld.so"));
#endif
	add_object(alias);
	add_object(other);
	add_object(FX_AGENT_EXE);
	add_object("/usr/bin/perl");
	add_object("/usr/bin/python3.11");
	add_object("/usr/lib/x86_64-linux-gnu/libsqlite3.so.0");
	add_object("/usr/lib/x86_64-linux-gnu/liblzma.so.5");
	add_object("/usr/lib/x86_64-linux-gnu/libc.so.6");
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	for (size_t i = 0; i < nobjs; i++)
		for (size_t k = 0; k < objs[i].n; k++) {
			free(objs[i].want[k].names);
			free(objs[i].want[k].files);
		}
	nftw(tmp, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
	return 0;
}

static struct fx_symbolizer *make(void)
{
	/* Bounds small enough that the sequence crosses them all the time. */
	struct fx_symbolizer_opts o = { .max_bytes = 3u << 20,
					.cache_dir = cache,
					.inflate_min_bytes = 4096 };
	struct fx_symbolizer *s = fx_symbolizer_new(&o);

	assert_non_null(s);
	return s;
}

static void test_state_never_changes_an_answer(void **state)
{
	struct fx_namecheck_stats nc = { 0 };
	struct fx_symbolizer_stats st;
	struct fx_symbolizer *s = make();
	uint64_t asked = 0, shed = 0, trimmed = 0, idle = 0, remade = 0, wiped = 0;
	unsigned log_left = 5;

	(void)state;
	assert_true(nobjs >= 8);
	fx_symbolizer_begin_batch(s);
	for (int step = 0; step < OPS; step++) {
		uint64_t r = rnd() % 100;

		if (r < 15) {
			fx_symbolizer_begin_batch(s);
		} else if (r < 20) {
			uint64_t b = fx_symbolizer_batch(s);

			idle += fx_symbolizer_drop_idle(s, b - (b > 2 ? rnd() % 3 : 0));
		} else if (r < 21) {
			fx_symbolizer_get_stats(s, &st);
			shed += st.dwarf_shed;
			trimmed += st.trimmed;
			fx_symbolizer_free(s);
			s = make();
			fx_symbolizer_begin_batch(s);
			remade++;
		} else if (r < 23) {
			char sub[320];

			/* The inflated copies go under a symbolizer that maps them. */
			snprintf(sub, sizeof(sub), "%s/inflated", cache);
			nftw(sub, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
			wiped++;
		} else {
			struct obj *o = &objs[rnd() % nobjs];
			size_t n = 1 + rnd() % MAX_ASK, idx[MAX_ASK];
			uint64_t offs[MAX_ASK];
			struct fx_sym_result out[MAX_ASK];
			int fd = -1;
			struct fx_elf_source src = { .fd = -1, .path = o->path };

			for (size_t i = 0; i < n; i++) {
				idx[i] = rnd() % o->n;
				offs[i] = o->offs[idx[i]];
			}
			if (rnd() % 2) {
				fd = open(o->path, O_RDONLY | O_CLOEXEC);
				assert_true(fd >= 0);
				src.fd = fd;
			}
			fx_symbolizer_resolve(s, &src, offs, n, out);
			asked += n;
			for (size_t i = 0; i < n; i++) {
				char why[1024];

				if (!same(&o->want[idx[i]], &out[i], why, sizeof(why)))
					fail_msg("step %d: %s offset 0x%" PRIx64 ": %s", step,
						 o->path, offs[i], why);
			}
			if (step % 10 == 0) {
				const char *dpath = NULL;

				fx_symbolizer_origin(s, &src, &dpath);
				assert_int_equal(fx_namecheck(&src, dpath, out, n, &log_left, &nc),
						 0);
			}
			if (fd >= 0)
				close(fd);
		}
	}
	fx_symbolizer_get_stats(s, &st);
	shed += st.dwarf_shed;
	trimmed += st.trimmed;
	print_message("symstate: %zu objects, %d steps, %" PRIu64 " look-ups; DWARF shed %" PRIu64
		      ", objects trimmed %" PRIu64 ", dropped idle %" PRIu64 ", symbolizer made "
		      "anew %" PRIu64 ", inflated copies wiped %" PRIu64 "; names judged %" PRIu64
		      ", wrong %" PRIu64 "\n",
		      nobjs, OPS, asked, shed, trimmed, idle, remade, wiped, nc.checked, nc.wrong);
	/* The sequence went through what it is for. */
	assert_true(shed > 0 && idle > 0 && remade > 0 && wiped > 0);
	assert_true(nc.checked > 1000);
	assert_int_equal(nc.wrong, 0);
	fx_symbolizer_free(s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_state_never_changes_an_answer),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}

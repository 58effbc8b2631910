/* SPDX-License-Identifier: MIT */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fxagent/kallsyms.h"

static struct fx_kallsyms *load_sample(void)
{
	struct fx_kallsyms *ks = fx_kallsyms_load(FX_TEST_DATA "/kallsyms/sample.txt");

	assert_non_null(ks);
	return ks;
}

static void expect(const struct fx_kallsyms *ks, uint64_t addr, const char *name,
		   const char *module, uint64_t start, uint64_t size)
{
	static struct fx_ksym_cursor cur;
	struct fx_ksym sym;

	assert_int_equal(fx_kallsyms_lookup(ks, addr, &cur, &sym), 0);
	assert_string_equal(sym.name, name);
	assert_string_equal(sym.module, module);
	assert_int_equal(sym.start, start);
	assert_int_equal(sym.size, size);
}

static void test_parse_filters_and_sorts(void **state)
{
	struct fx_kallsyms *ks = load_sample();

	(void)state;
	/* Text symbols only (A and D dropped), malformed lines skipped, and of
	 * _text and its local alias startup_64 only _text. */
	assert_int_equal(fx_kallsyms_count(ks), 9);
	assert_int_equal(fx_kallsyms_base(ks), 0xffffffff81000000ull);
	/* What the metrics file reports: the table and its names. */
	assert_true(fx_kallsyms_bytes(ks) > 9 * sizeof(uint64_t));
	assert_int_equal(fx_kallsyms_bytes(NULL), 0);
	fx_kallsyms_free(ks);
}

static void test_lookup(void **state)
{
	struct fx_kallsyms *ks = load_sample();
	static struct fx_ksym_cursor cur;
	struct fx_ksym sym;

	(void)state;
	/* Start of a symbol with a local alias: the global name wins. */
	expect(ks, 0xffffffff81000000ull, "_text", "", 0xffffffff81000000ull, 0x40);
	/* Middle, and last byte before the next symbol (an input line out of order). */
	expect(ks, 0xffffffff81000050ull, "secondary_startup_64", "", 0xffffffff81000040ull, 0x40);
	expect(ks, 0xffffffff8100007full, "secondary_startup_64", "", 0xffffffff81000040ull, 0x40);
	expect(ks, 0xffffffff81000080ull, "unsorted_fn", "", 0xffffffff81000080ull, 0x80);
	expect(ks, 0xffffffff810001ffull, "weak_fn", "", 0xffffffff81000180ull, 0x180);
	/* Data symbols do not split text: some_data at ...200 was dropped. */
	expect(ks, 0xffffffff81000250ull, "weak_fn", "", 0xffffffff81000180ull, 0x180);
	expect(ks, 0xffffffffc0001050ull, "mod_fn", "mymod", 0xffffffffc0001000ull, 0x100);
	expect(ks, 0xffffffffc0001100ull, "mod_fn2", "mymod", 0xffffffffc0001100ull, 0xf00);
	/* The last symbol has no known end. */
	expect(ks, 0xffffffffc0002fffull, "other_fn", "othermod", 0xffffffffc0002000ull, 0);
	assert_int_equal(fx_kallsyms_lookup(ks, 0xffffffff80ffffffull, &cur, &sym), -ENOENT);
	assert_int_equal(fx_kallsyms_lookup(ks, 0, &cur, &sym), -ENOENT);
	fx_kallsyms_free(ks);
}

static struct fx_kallsyms *parse_text(const char *text)
{
	struct fx_kallsyms *ks;
	FILE *f = fmemopen((void *)text, strlen(text), "r");

	assert_non_null(f);
	ks = fx_kallsyms_parse(f);
	fclose(f);
	return ks;
}

static void test_all_zero_is_eperm(void **state)
{
	struct fx_kallsyms *ks;

	(void)state;
	errno = 0;
	ks = parse_text("0000000000000000 T _text\n"
			"0000000000000000 t foo\n"
			"0000000000000000 D bar\n"
			"0000000000000000 T baz\t[mod]\n");
	assert_null(ks);
	assert_int_equal(errno, EPERM);
}

static void test_empty_and_missing(void **state)
{
	struct fx_kallsyms *ks;
	static struct fx_ksym_cursor cur;
	struct fx_ksym sym;

	(void)state;
	ks = parse_text("");
	assert_non_null(ks);
	assert_int_equal(fx_kallsyms_count(ks), 0);
	assert_int_equal(fx_kallsyms_lookup(ks, 0xffffffff81000000ull, &cur, &sym), -ENOENT);
	fx_kallsyms_free(ks);
	errno = 0;
	assert_null(fx_kallsyms_load(FX_TEST_DATA "/kallsyms/does-not-exist"));
	assert_int_equal(errno, ENOENT);
	fx_kallsyms_free(NULL);
}

/* The real table when this machine shows it (root or CAP_SYSLOG). */
static void test_proc_kallsyms(void **state)
{
	struct fx_kallsyms *ks;
	static struct fx_ksym_cursor cur;
	struct fx_ksym sym;

	(void)state;
	ks = fx_kallsyms_load("/proc/kallsyms");
	if (!ks && (errno == EPERM || errno == ENOENT || errno == EACCES)) {
		skip();
		return;
	}
	assert_non_null(ks);
	assert_true(fx_kallsyms_count(ks) > 1000);
	assert_int_equal(fx_kallsyms_lookup(ks, fx_kallsyms_base(ks), &cur, &sym), 0);
	assert_string_equal(sym.module, "");
	assert_int_equal(sym.start, fx_kallsyms_base(ks));
	/* Compressed names: well under the 32 bytes a symbol took before its
	 * name, and under the names' own length (25 bytes on average). */
	assert_true(fx_kallsyms_bytes(ks) < fx_kallsyms_count(ks) * 16);
	fx_kallsyms_free(ks);
}

/* Many symbols over many name blocks, given out of address order, with
 * local aliases, modules between core symbols and a name too long. */
#define BIG_N 1000
static void test_blocks(void **state)
{
	static struct fx_ksym_cursor cur, cur2;
	size_t cap = 200 * BIG_N, len = 0;
	char *text = malloc(cap), want[64];
	struct fx_kallsyms *ks, *ks2;
	struct fx_ksym sym;
	FILE *f;

	(void)state;
	assert_non_null(text);
	for (unsigned i = BIG_N; i-- > 0;) {
		uint64_t a = 0xffffffff81000000ull + 0x100ull * i;

		/* every tenth in a module; every seventh with a local alias first */
		if (i % 7 == 0)
			len += (size_t)snprintf(text + len, cap - len, "%016llx t alias_%u\n",
						(unsigned long long)a, i);
		len += (size_t)snprintf(text + len, cap - len, "%016llx T fn_%05u%s\n",
					(unsigned long long)a, i, i % 10 == 3 ? "\t[mod_a]" : "");
	}
	len += (size_t)snprintf(text + len, cap - len, "ffffffff90000000 T %0600d\n", 0);
	f = fmemopen(text, len, "r");
	assert_non_null(f);
	ks = fx_kallsyms_parse(f);
	fclose(f);
	assert_non_null(ks);
	assert_int_equal(fx_kallsyms_count(ks), BIG_N);
	for (unsigned k = 0; k < BIG_N; k++) {
		unsigned i = (k * 389) % BIG_N; /* jumps between blocks */

		assert_int_equal(fx_kallsyms_lookup(ks, 0xffffffff81000000ull + 0x100ull * i + 0x3f,
						    &cur, &sym),
				 0);
		snprintf(want, sizeof(want), "fn_%05u", i);
		assert_string_equal(sym.name, want);
		assert_string_equal(sym.module, i % 10 == 3 ? "mod_a" : "");
		assert_int_equal(sym.start, 0xffffffff81000000ull + 0x100ull * i);
		assert_int_equal(sym.size, i + 1 < BIG_N ? 0x100 : 0);
	}
	/* One cursor over two tables: each lookup is its own table's. */
	f = fmemopen((void *)"ffffffff81000000 T other\n", 25, "r");
	ks2 = fx_kallsyms_parse(f);
	fclose(f);
	assert_non_null(ks2);
	assert_int_equal(fx_kallsyms_lookup(ks, 0xffffffff81000000ull, &cur2, &sym), 0);
	assert_string_equal(sym.name, "fn_00000");
	assert_int_equal(fx_kallsyms_lookup(ks2, 0xffffffff81000000ull, &cur2, &sym), 0);
	assert_string_equal(sym.name, "other");
	assert_true(fx_kallsyms_bytes(ks) < BIG_N * 12 + 4096);
	fx_kallsyms_free(ks2);
	fx_kallsyms_free(ks);
	free(text);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_parse_filters_and_sorts),
		cmocka_unit_test(test_lookup),
		cmocka_unit_test(test_all_zero_is_eperm),
		cmocka_unit_test(test_empty_and_missing),
		cmocka_unit_test(test_blocks),
		cmocka_unit_test(test_proc_kallsyms),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

/* SPDX-License-Identifier: MIT */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
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
	struct fx_ksym sym;

	assert_int_equal(fx_kallsyms_lookup(ks, addr, &sym), 0);
	assert_string_equal(sym.name, name);
	assert_string_equal(sym.module, module);
	assert_int_equal(sym.start, start);
	assert_int_equal(sym.size, size);
}

static void test_parse_filters_and_sorts(void **state)
{
	struct fx_kallsyms *ks = load_sample();

	(void)state;
	/* Text symbols only (A and D dropped), malformed lines skipped. */
	assert_int_equal(fx_kallsyms_count(ks), 10);
	assert_int_equal(fx_kallsyms_base(ks), 0xffffffff81000000ull);
	/* What the metrics file reports: the table and its names. */
	assert_true(fx_kallsyms_bytes(ks) > 10 * 3 * sizeof(uint64_t));
	assert_int_equal(fx_kallsyms_bytes(NULL), 0);
	fx_kallsyms_free(ks);
}

static void test_lookup(void **state)
{
	struct fx_kallsyms *ks = load_sample();
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
	assert_int_equal(fx_kallsyms_lookup(ks, 0xffffffff80ffffffull, &sym), -ENOENT);
	assert_int_equal(fx_kallsyms_lookup(ks, 0, &sym), -ENOENT);
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
	struct fx_ksym sym;

	(void)state;
	ks = parse_text("");
	assert_non_null(ks);
	assert_int_equal(fx_kallsyms_count(ks), 0);
	assert_int_equal(fx_kallsyms_lookup(ks, 0xffffffff81000000ull, &sym), -ENOENT);
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
	struct fx_ksym sym;

	(void)state;
	ks = fx_kallsyms_load("/proc/kallsyms");
	if (!ks && (errno == EPERM || errno == ENOENT || errno == EACCES)) {
		skip();
		return;
	}
	assert_non_null(ks);
	assert_true(fx_kallsyms_count(ks) > 1000);
	assert_int_equal(fx_kallsyms_lookup(ks, fx_kallsyms_base(ks), &sym), 0);
	assert_string_equal(sym.module, "");
	assert_int_equal(sym.start, fx_kallsyms_base(ks));
	fx_kallsyms_free(ks);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_parse_filters_and_sorts),
		cmocka_unit_test(test_lookup),
		cmocka_unit_test(test_all_zero_is_eperm),
		cmocka_unit_test(test_empty_and_missing),
		cmocka_unit_test(test_proc_kallsyms),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

/* SPDX-License-Identifier: MIT */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>

#include "fxagent/demangle.h"

static void expect(const char *mangled, const char *want)
{
	char *got = fx_demangle(mangled);

	if (!want) {
		assert_null(got);
		return;
	}
	assert_non_null(got);
	assert_string_equal(got, want);
	free(got);
}

static void test_cpp(void **state)
{
	(void)state;
	expect("_ZN4fxns5twiceIiEET_S1_", "int fxns::twice<int>(int)");
	expect("_ZNSt6vectorIiSaIiEE9push_backERKi",
	       "std::vector<int, std::allocator<int> >::push_back(int const&)");
	/* GCC clone suffixes stay visible. */
	expect("_ZN2ns3fooEv.constprop.0", "ns::foo() [clone .constprop.0]");
}

static void test_rust_legacy_drops_hash(void **state)
{
	(void)state;
	expect("_ZN4core3fmt9Formatter3pad17h0123456789abcdefE", "core::fmt::Formatter::pad");
	expect("_ZN3std2rt10lang_start28_$u7b$$u7b$closure$u7d$$u7d$17h5e6ac6cf1d8c8ad0E",
	       "std::rt::lang_start::{{closure}}");
}

static void test_rust_v0(void **state)
{
	(void)state;
	expect("_RNvNvCs1234_7mycrate3foo3bar", "mycrate::foo::bar");
	expect("_RINvNtC3std3mem8align_ofdE", "std::mem::align_of::<f64>");
}

static void test_not_mangled(void **state)
{
	(void)state;
	expect("main", NULL);
	expect("memcpy", NULL);
	expect("_start", NULL);
	expect("_Z", NULL);
	expect("_Rnot_valid", NULL);
	expect("", NULL);
	expect(NULL, NULL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_cpp),
		cmocka_unit_test(test_rust_legacy_drops_hash),
		cmocka_unit_test(test_rust_v0),
		cmocka_unit_test(test_not_mangled),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

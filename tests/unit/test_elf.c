/* SPDX-License-Identifier: MIT */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <libelf.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "fxagent/elf.h"

#ifndef FX_FIXTURE_DIR
#error "FX_FIXTURE_DIR comes from tests/unit/fixtures/CMakeLists.txt"
#endif

static int open_fixture(const char *name)
{
	char path[4096];
	int fd;

	snprintf(path, sizeof(path), "%s/%s", FX_FIXTURE_DIR, name);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	assert_true(fd >= 0);
	return fd;
}

static void test_build_id_fixed(void **state)
{
	static const uint8_t want[] = {
		0x01, 0x23, 0x45, 0x67, 0x89, 0xab, 0xcd, 0xef, 0xfe, 0xdc,
		0xba, 0x98, 0x76, 0x54, 0x32, 0x10, 0x00, 0x11, 0x22, 0x33
	};
	uint8_t id[FX_BUILD_ID_MAX];
	char hex[2 * FX_BUILD_ID_MAX + 1];
	int fd = open_fixture("libfxfix-bid.so");
	int len;

	(void)state;
	/* The fd's file offset is not used: reading twice from anywhere works. */
	assert_int_equal(lseek(fd, 123, SEEK_SET), 123);
	len = fx_elf_build_id_fd(fd, id, sizeof(id));
	assert_int_equal(len, sizeof(want));
	assert_memory_equal(id, want, sizeof(want));
	assert_int_equal(lseek(fd, 0, SEEK_CUR), 123);
	assert_int_equal(fx_elf_build_id_fd(fd, id, sizeof(id)), sizeof(want));
	fx_elf_hex(id, (size_t)len, hex);
	assert_string_equal(hex, "0123456789abcdeffedcba987654321000112233");
	close(fd);
}

static void test_build_id_capped(void **state)
{
	uint8_t id[4];
	int fd = open_fixture("libfxfix-bid.so");

	(void)state;
	assert_int_equal(fx_elf_build_id_fd(fd, id, sizeof(id)), 4);
	assert_int_equal(id[0], 0x01);
	assert_int_equal(id[3], 0x67);
	close(fd);
}

static void test_build_id_stripped_and_debug(void **state)
{
	uint8_t a[FX_BUILD_ID_MAX], b[FX_BUILD_ID_MAX], c[FX_BUILD_ID_MAX];
	int fa = open_fixture("libfxfix.so"), fb = open_fixture("libfxfix-stripped.so");
	int fc = open_fixture("libfxfix.debug");
	int la, lb, lc;

	(void)state;
	la = fx_elf_build_id_fd(fa, a, sizeof(a));
	lb = fx_elf_build_id_fd(fb, b, sizeof(b));
	lc = fx_elf_build_id_fd(fc, c, sizeof(c));
	assert_true(la >= 8);
	assert_int_equal(la, lb);
	assert_int_equal(la, lc);
	assert_memory_equal(a, b, (size_t)la);
	assert_memory_equal(a, c, (size_t)la);
	close(fa);
	close(fb);
	close(fc);
}

static void test_no_build_id(void **state)
{
	uint8_t id[FX_BUILD_ID_MAX];
	int fd = open_fixture("libfxfix-nobid.so");

	(void)state;
	assert_int_equal(fx_elf_build_id_fd(fd, id, sizeof(id)), -ENOENT);
	close(fd);
}

static void test_not_elf(void **state)
{
	char path[4096];
	uint8_t id[FX_BUILD_ID_MAX];
	int fd;

	(void)state;
	snprintf(path, sizeof(path), "%s/fxfix.c", FX_FIXTURE_SRC);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	assert_true(fd >= 0);
	assert_int_equal(fx_elf_build_id_fd(fd, id, sizeof(id)), -ENOEXEC);
	close(fd);
	assert_int_equal(fx_elf_build_id_fd(-1, id, sizeof(id)), -ENOEXEC);
}

static void test_hex(void **state)
{
	static const uint8_t id[] = { 0x00, 0x0f, 0xa0, 0xff };
	char out[9];

	(void)state;
	fx_elf_hex(id, sizeof(id), out);
	assert_string_equal(out, "000fa0ff");
	fx_elf_hex(id, 0, out);
	assert_string_equal(out, "");
}

static void *init_thread(void *arg)
{
	(void)arg;
	fx_elf_init();
	return NULL;
}

/* Threads racing to set libelf up do it once; it is set up after. */
static void test_init(void **state)
{
	pthread_t t[4];
	Elf *elf;
	int fd;

	(void)state;
	for (int i = 0; i < 4; i++)
		assert_int_equal(pthread_create(&t[i], NULL, init_thread, NULL), 0);
	fx_elf_init();
	for (int i = 0; i < 4; i++)
		pthread_join(t[i], NULL);
	/* Without it elf_begin() fails (ELF_E_NO_VERSION). */
	fd = open("/proc/self/exe", O_RDONLY | O_CLOEXEC);
	assert_true(fd >= 0);
	elf = elf_begin(fd, ELF_C_READ, NULL);
	assert_non_null(elf);
	assert_int_equal(elf_kind(elf), ELF_K_ELF);
	elf_end(elf);
	close(fd);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_init),
		cmocka_unit_test(test_build_id_fixed),
		cmocka_unit_test(test_build_id_capped),
		cmocka_unit_test(test_build_id_stripped_and_debug),
		cmocka_unit_test(test_no_build_id),
		cmocka_unit_test(test_not_elf),
		cmocka_unit_test(test_hex),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

/* SPDX-License-Identifier: MIT */
/* memstat: mappings sorted into kinds, from an smaps text as the kernel
 * writes it, and the agent's own smaps against its VmRSS. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fxagent/memstat.h"

#define KIB 1024u

/* One of each kind; Rss in kB as smaps writes it. */
static const char smaps[] =
	"55a9cc0c5000-55a9cc145000 r-xp 00000000 fe:00 10977538                   "
	"/usr/bin/fxagent\n"
	"Size:                512 kB\n"
	"Rss:                 100 kB\n"
	"Pss:                 100 kB\n"
	"55a9e8b6b000-55a9e8c46000 rw-p 00000000 00:00 0                          [heap]\n"
	"Rss:                 800 kB\n"
	/* a thread's malloc arena: usable front, then the PROT_NONE rest */
	"7f0000000000-7f0000100000 rw-p 00000000 00:00 0 \n"
	"Rss:                 600 kB\n"
	"7f0000100000-7f0004000000 ---p 00000000 00:00 0 \n"
	"Rss:                   0 kB\n"
	/* a thread's stack: its guard page, then the stack */
	"7f1000000000-7f1000001000 ---p 00000000 00:00 0 \n"
	"Rss:                   0 kB\n"
	"7f1000001000-7f1000801000 rw-p 00000000 00:00 0 \n"
	"Rss:                  40 kB\n"
	/* a second thread's stack right after the first */
	"7f1000801000-7f1000802000 ---p 00000000 00:00 0 \n"
	"Rss:                   0 kB\n"
	"7f1000802000-7f1001002000 rw-p 00000000 00:00 0 \n"
	"Rss:                  24 kB\n"
	/* a big block malloc mapped on its own */
	"7f2000000000-7f2000200000 rw-p 00000000 00:00 0 \n"
	"Rss:                2048 kB\n"
	"7f82b38ea000-7f82b396b000 rw-s 00000000 00:10 1038                       "
	"anon_inode:[perf_event]\n"
	"Size:               1028 kB\n"
	"Rss:                   0 kB\n"
	"7ffd1c1d1000-7ffd1c1f2000 rw-p 00000000 00:00 0                          [stack]\n"
	"Rss:                  12 kB\n"
	"7ffd1c1fc000-7ffd1c1fe000 r-xp 00000000 00:00 0                          [vdso]\n"
	"Rss:                   4 kB\n";

static void test_parse(void **state)
{
	struct fx_memstat m = { 0 };

	(void)state;
	fx_memstat_parse(smaps, sizeof(smaps) - 1, &m);
	assert_int_equal(m.part[FX_MEM_FILES], 100 * KIB);
	assert_int_equal(m.part[FX_MEM_HEAP], 800 * KIB);
	assert_int_equal(m.part[FX_MEM_ARENAS], 600 * KIB);
	assert_int_equal(m.arenas, 1);
	assert_int_equal(m.part[FX_MEM_STACKS], (40 + 24 + 12) * KIB);
	assert_int_equal(m.part[FX_MEM_ANON], 2048 * KIB);
	/* the rings by their size: their pages are not in Rss */
	assert_int_equal(m.part[FX_MEM_RINGS], 1028 * KIB);
	assert_int_equal(m.part[FX_MEM_OTHER], 4 * KIB);
	assert_int_equal(m.rss, (100 + 800 + 600 + 76 + 2048 + 4) * KIB);
	assert_string_equal(fx_memstat_part_name(FX_MEM_ARENAS), "arenas");
}

static uint64_t vm_rss(void)
{
	char line[256];
	uint64_t kb = 0;
	FILE *f = fopen("/proc/self/status", "r");

	assert_non_null(f);
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "VmRSS: %" SCNu64 " kB", &kb) == 1)
			break;
	fclose(f);
	return kb * KIB;
}

static void *touch_arena(void *arg)
{
	/* A thread's small allocations come from an arena of its own. */
	char *p = malloc(64 * KIB);

	memset(p, 1, 64 * KIB);
	*(char **)arg = p;
	return NULL;
}

/* This process: the parts add up to VmRSS (within what changes between the
 * two reads), and the thread's arena is seen. */
static void test_self(void **state)
{
	struct fx_memstat m;
	pthread_t th;
	char *p = NULL;
	uint64_t rss;

	(void)state;
	assert_int_equal(pthread_create(&th, NULL, touch_arena, &p), 0);
	assert_int_equal(pthread_join(th, NULL), 0);
	assert_int_equal(fx_memstat_read(&m), 0);
	rss = vm_rss();
	assert_true(m.part[FX_MEM_FILES] > 0);
	assert_true(m.part[FX_MEM_STACKS] > 0);
#ifndef __SANITIZE_ADDRESS__
	/* ASan's allocator replaces glibc's: no arenas, no mallinfo2. */
	assert_true(m.arenas >= 1);
	assert_true(m.malloc_used >= 64 * KIB);
#endif
	assert_true(m.rss > rss * 9 / 10 && m.rss < rss * 11 / 10);
	free(p);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_parse),
		cmocka_unit_test(test_self),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

/* SPDX-License-Identifier: MIT */
/* Decoding perf records as the sampler opens them (TID|TIME|CPU|PERIOD|IP|
 * CALLCHAIN, sample_id_all), and refusing records whose lengths lie. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "fxagent/record.h"
#include "recbuild.h"

static const struct fx_record_fmt fmt = {
	.sample_type = PERF_SAMPLE_IP | PERF_SAMPLE_TID | PERF_SAMPLE_TIME | PERF_SAMPLE_CPU |
		       PERF_SAMPLE_PERIOD | PERF_SAMPLE_CALLCHAIN,
	.sample_id_all = true,
};

static void test_sample(void **state)
{
	struct rec r;
	struct fx_record_sample s;
	const struct perf_event_header *h;

	(void)state;
	rec_begin(&r, PERF_RECORD_SAMPLE, PERF_RECORD_MISC_USER);
	rec_u64(&r, 0x401234);	 /* ip */
	rec_u32x2(&r, 100, 101); /* pid, tid */
	rec_u64(&r, 123456789);	 /* time */
	rec_u32x2(&r, 1, 0);	 /* cpu */
	rec_u64(&r, 10101010);	 /* period */
	rec_u64(&r, 4);		 /* nr */
	rec_u64(&r, PERF_CONTEXT_USER);
	rec_u64(&r, 0x401234);
	rec_u64(&r, 0x401100);
	rec_u64(&r, 0x400800);
	h = rec_end(&r);
	assert_int_equal(fx_record_sample(&fmt, h, &s), 0);
	assert_int_equal(s.ip, 0x401234);
	assert_int_equal(s.pid, 100);
	assert_int_equal(s.tid, 101);
	assert_int_equal(s.time, 123456789);
	assert_int_equal(s.cpu, 1);
	assert_int_equal(s.nr, 4);
	assert_int_equal(s.ips[0], PERF_CONTEXT_USER);
	assert_int_equal(s.ips[3], 0x400800);
	assert_int_equal(fx_record_time(&fmt, h), 123456789);

	/* A callchain longer than the record: refused, not read past the end. */
	r.buf[6] = 40;
	assert_int_equal(fx_record_sample(&fmt, h, &s), -EINVAL);
	/* A record cut short in its fixed part. */
	r.buf[6] = 4;
	r.n = 24;
	rec_end(&r);
	assert_int_equal(fx_record_sample(&fmt, h, &s), -EINVAL);
}

static void test_mmap2_build_id(void **state)
{
	static const uint8_t bid[20] = {
		0xf0, 0xfc, 0x29, 0x16, 0x5c, 0xbe, 0x60, 0x88, 0xc0, 0xe1,
		0xad, 0xf0, 0x3b, 0x00, 0x48, 0xfb, 0xec, 0xbc, 0x00, 0x3a
	};
	uint8_t idbuf[24] = { 20 };
	struct rec r;
	struct fx_record_mmap m;

	(void)state;
	memcpy(idbuf + 4, bid, 20);
	rec_begin(&r, PERF_RECORD_MMAP2, PERF_RECORD_MISC_USER | PERF_RECORD_MISC_MMAP_BUILD_ID);
	rec_u32x2(&r, 200, 200);
	rec_u64(&r, 0x7f0000001000);
	rec_u64(&r, 0x2000);
	rec_u64(&r, 0x1000);
	rec_bytes(&r, idbuf, 24);
	rec_u32x2(&r, 5, 2); /* prot, flags */
	rec_str(&r, "/usr/lib/x86_64-linux-gnu/libc.so.6");
	rec_trailer(&r, 200, 200, 555);
	assert_int_equal(fx_record_mmap2(&fmt, rec_end(&r), &m), 0);
	assert_int_equal(m.pid, 200);
	assert_int_equal(m.start, 0x7f0000001000);
	assert_int_equal(m.len, 0x2000);
	assert_int_equal(m.pgoff, 0x1000);
	assert_true(m.has_build_id);
	assert_int_equal(m.build_id_len, 20);
	assert_memory_equal(m.build_id, bid, 20);
	assert_string_equal(m.filename, "/usr/lib/x86_64-linux-gnu/libc.so.6");
	assert_true(m.exec);
	assert_int_equal(m.id.time, 555);
	assert_int_equal(fx_record_time(&fmt, rec_end(&r)), 555);
}

static void test_mmap2_unterminated_name(void **state)
{
	struct rec r;
	struct fx_record_mmap m;

	(void)state;
	rec_begin(&r, PERF_RECORD_MMAP2, 0);
	rec_u32x2(&r, 1, 1);
	rec_u64(&r, 0x1000);
	rec_u64(&r, 0x1000);
	rec_u64(&r, 0);
	rec_u64(&r, 0);
	rec_u64(&r, 0);
	rec_u64(&r, 0);
	rec_u32x2(&r, 5, 2);
	rec_bytes(&r, "abcdefgh", 8); /* no NUL before the end */
	assert_int_equal(fx_record_mmap2(&(struct fx_record_fmt){ .sample_type = fmt.sample_type },
					 rec_end(&r), &m),
			 -EINVAL);
}

static void test_comm_exec(void **state)
{
	struct rec r;
	struct fx_record_comm c;

	(void)state;
	rec_begin(&r, PERF_RECORD_COMM, PERF_RECORD_MISC_COMM_EXEC);
	rec_u32x2(&r, 300, 300);
	rec_str(&r, "fx-short");
	rec_trailer(&r, 300, 300, 777);
	assert_int_equal(fx_record_comm(&fmt, rec_end(&r), &c), 0);
	assert_int_equal(c.pid, 300);
	assert_string_equal(c.comm, "fx-short");
	assert_true(c.exec);
	assert_int_equal(c.id.time, 777);
}

static void test_fork_and_lost(void **state)
{
	struct rec r;
	struct fx_record_task t;
	struct fx_record_lost l;

	(void)state;
	rec_begin(&r, PERF_RECORD_FORK, 0);
	rec_u32x2(&r, 401, 400);
	rec_u32x2(&r, 401, 400);
	rec_u64(&r, 999);
	rec_trailer(&r, 400, 400, 999);
	assert_int_equal(fx_record_task(&fmt, rec_end(&r), &t), 0);
	assert_int_equal(t.pid, 401);
	assert_int_equal(t.ppid, 400);
	assert_int_equal(t.time, 999);

	rec_begin(&r, PERF_RECORD_LOST, 0);
	rec_u64(&r, 1); /* id */
	rec_u64(&r, 17);
	rec_trailer(&r, 0, 0, 1000);
	assert_int_equal(fx_record_lost(&fmt, rec_end(&r), &l), 0);
	assert_int_equal(l.lost, 17);
	assert_int_equal(l.id.time, 1000);

	rec_begin(&r, PERF_RECORD_LOST_SAMPLES, 0);
	rec_u64(&r, 5);
	rec_trailer(&r, 0, 0, 1001);
	assert_int_equal(fx_record_lost(&fmt, rec_end(&r), &l), 0);
	assert_int_equal(l.lost, 5);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_sample),
		cmocka_unit_test(test_mmap2_build_id),
		cmocka_unit_test(test_mmap2_unterminated_name),
		cmocka_unit_test(test_comm_exec),
		cmocka_unit_test(test_fork_and_lost),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

/* SPDX-License-Identifier: MIT */
/* The ring reader over a fake mmap'ed ring: records in order, records (and
 * headers) that wrap around the end, impossible sizes, and data_tail. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "fxagent/ring.h"

#define PAGE 4096
#define DATA 4096

struct fake {
	union {
		struct perf_event_mmap_page meta;
		uint8_t page[PAGE];
	};
	uint8_t data[DATA];
};

/* Writes a record of @size bytes whose payload bytes are @fill at the ring's
 * current head, wrapping, and advances head. */
static void put(struct fake *f, uint16_t type, uint16_t size, uint8_t fill)
{
	uint8_t rec[65536];
	struct perf_event_header h = { .type = type, .misc = 0, .size = size };
	uint64_t head = f->meta.data_head;

	memset(rec, fill, size);
	memcpy(rec, &h, sizeof(h));
	for (uint16_t i = 0; i < size; i++)
		f->data[(head + i) % DATA] = rec[i];
	f->meta.data_head = head + size;
}

static struct fake *fake_new(uint64_t start)
{
	struct fake *f = calloc(1, sizeof(*f));

	f->meta.data_head = start;
	f->meta.data_tail = start;
	return f;
}

static void test_reads_in_order(void **state)
{
	struct fake *f = fake_new(0);
	struct fx_ring r;
	const struct perf_event_header *h;

	(void)state;
	assert_int_equal(fx_ring_init(&r, &f->meta, PAGE, DATA), 0);
	put(f, PERF_RECORD_SAMPLE, 64, 0xaa);
	put(f, PERF_RECORD_COMM, 40, 0xbb);
	fx_ring_begin(&r);
	h = fx_ring_next(&r);
	assert_non_null(h);
	assert_int_equal(h->type, PERF_RECORD_SAMPLE);
	assert_int_equal(h->size, 64);
	assert_int_equal(((const uint8_t *)h)[63], 0xaa);
	h = fx_ring_next(&r);
	assert_non_null(h);
	assert_int_equal(h->type, PERF_RECORD_COMM);
	assert_null(fx_ring_next(&r));
	fx_ring_end(&r);
	assert_int_equal(f->meta.data_tail, 104);
	fx_ring_release(&r);
	free(f);
}

/* The sampler's merge: a record newer than the round's cut is put back and
 * read again next round, wrapped or not; the space of each record handled is
 * given back at once, and never that of one read but not handled. */
static void test_unread_and_give_back(void **state)
{
	struct fake *f = fake_new(DATA - 40);
	struct fx_ring r;
	const struct perf_event_header *h;

	(void)state;
	assert_int_equal(fx_ring_init(&r, &f->meta, PAGE, DATA), 0);
	put(f, PERF_RECORD_COMM, 24, 0x11);
	put(f, PERF_RECORD_SAMPLE, 64, 0x22); /* wraps */
	fx_ring_begin(&r);
	h = fx_ring_next(&r);
	assert_int_equal(h->type, PERF_RECORD_COMM);
	fx_ring_end(&r);
	assert_int_equal(f->meta.data_tail, DATA - 16);
	h = fx_ring_next(&r);
	assert_int_equal(h->type, PERF_RECORD_SAMPLE);
	fx_ring_unread(&r, h);
	fx_ring_end(&r);
	assert_int_equal(f->meta.data_tail, DATA - 16); /* not handled: still ours */
	fx_ring_begin(&r);
	h = fx_ring_next(&r);
	assert_non_null(h);
	assert_int_equal(h->type, PERF_RECORD_SAMPLE);
	assert_int_equal(((const uint8_t *)h)[63], 0x22);
	assert_null(fx_ring_next(&r));
	fx_ring_end(&r);
	assert_int_equal(f->meta.data_tail, DATA + 48);
	fx_ring_release(&r);
	free(f);
}

static void test_record_wraps(void **state)
{
	/* Start 24 bytes before the end: the 200-byte record wraps. */
	struct fake *f = fake_new(DATA - 24);
	struct fx_ring r;
	const struct perf_event_header *h;
	const uint8_t *p;

	(void)state;
	assert_int_equal(fx_ring_init(&r, &f->meta, PAGE, DATA), 0);
	put(f, PERF_RECORD_SAMPLE, 200, 0x5c);
	put(f, PERF_RECORD_EXIT, 48, 0x11);
	fx_ring_begin(&r);
	h = fx_ring_next(&r);
	assert_non_null(h);
	assert_int_equal(h->size, 200);
	p = (const uint8_t *)h;
	for (int i = 8; i < 200; i++)
		assert_int_equal(p[i], 0x5c);
	h = fx_ring_next(&r);
	assert_non_null(h);
	assert_int_equal(h->type, PERF_RECORD_EXIT);
	assert_null(fx_ring_next(&r));
	fx_ring_end(&r);
	assert_int_equal(f->meta.data_tail, DATA - 24 + 248);
	fx_ring_release(&r);
	free(f);
}

static void test_header_wraps(void **state)
{
	/* Only 4 bytes left before the end: even the header is split. */
	struct fake *f = fake_new(DATA - 4);
	struct fx_ring r;
	const struct perf_event_header *h;

	(void)state;
	assert_int_equal(fx_ring_init(&r, &f->meta, PAGE, DATA), 0);
	put(f, PERF_RECORD_FORK, 40, 0x77);
	fx_ring_begin(&r);
	h = fx_ring_next(&r);
	assert_non_null(h);
	assert_int_equal(h->type, PERF_RECORD_FORK);
	assert_int_equal(h->size, 40);
	assert_int_equal(((const uint8_t *)h)[39], 0x77);
	fx_ring_release(&r);
	free(f);
}

static void test_partial_record_waits(void **state)
{
	/* A header claiming more bytes than head has published is impossible
	 * (the kernel publishes whole records): the read stops and counts it. */
	struct fake *f = fake_new(0);
	struct fx_ring r;

	(void)state;
	assert_int_equal(fx_ring_init(&r, &f->meta, PAGE, DATA), 0);
	put(f, PERF_RECORD_SAMPLE, 64, 0);
	f->meta.data_head = 32;
	fx_ring_begin(&r);
	assert_null(fx_ring_next(&r));
	assert_int_equal(r.corrupt, 1);
	fx_ring_release(&r);
	free(f);
}

static void test_bogus_size(void **state)
{
	struct fake *f = fake_new(0);
	struct fx_ring r;

	(void)state;
	assert_int_equal(fx_ring_init(&r, &f->meta, PAGE, DATA), 0);
	put(f, PERF_RECORD_SAMPLE, 64, 0);
	f->data[offsetof(struct perf_event_header, size)] = 4; /* smaller than a header */
	f->data[offsetof(struct perf_event_header, size) + 1] = 0;
	fx_ring_begin(&r);
	assert_null(fx_ring_next(&r));
	assert_int_equal(r.corrupt, 1);
	fx_ring_end(&r);
	/* The unreadable rest is skipped, so the kernel can go on writing. */
	assert_int_equal(f->meta.data_tail, 64);
	fx_ring_release(&r);
	free(f);
}

static void test_rejects_bad_size(void **state)
{
	struct fake *f = fake_new(0);
	struct fx_ring r;

	(void)state;
	assert_int_equal(fx_ring_init(&r, &f->meta, PAGE, 3000), -EINVAL);
	free(f);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_reads_in_order),
		cmocka_unit_test(test_unread_and_give_back),
		cmocka_unit_test(test_record_wraps),
		cmocka_unit_test(test_header_wraps),
		cmocka_unit_test(test_partial_record_waits),
		cmocka_unit_test(test_bogus_size),
		cmocka_unit_test(test_rejects_bad_size),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

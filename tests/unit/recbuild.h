/* SPDX-License-Identifier: MIT */
/* A little builder of perf records, 8-byte aligned, for the unit tests. */
#ifndef FX_TEST_RECBUILD_H
#define FX_TEST_RECBUILD_H

#include <linux/perf_event.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

struct rec {
	uint64_t buf[512];
	size_t n; /* bytes */
};

static inline void rec_begin(struct rec *r, uint32_t type, uint16_t misc)
{
	struct perf_event_header h = { .type = type, .misc = misc, .size = 0 };

	memset(r, 0, sizeof(*r));
	memcpy(r->buf, &h, sizeof(h));
	r->n = 8;
}

static inline void rec_u64(struct rec *r, uint64_t v)
{
	memcpy((uint8_t *)r->buf + r->n, &v, 8);
	r->n += 8;
}

static inline void rec_u32x2(struct rec *r, uint32_t a, uint32_t b)
{
	rec_u64(r, (uint64_t)a | ((uint64_t)b << 32));
}

static inline void rec_bytes(struct rec *r, const void *p, size_t len)
{
	memcpy((uint8_t *)r->buf + r->n, p, len);
	r->n += len;
}

/* A NUL-terminated string padded to 8 bytes. */
static inline void rec_str(struct rec *r, const char *s)
{
	size_t len = (strlen(s) + 8) & ~(size_t)7;

	memcpy((uint8_t *)r->buf + r->n, s, strlen(s));
	r->n += len;
}

/* The sample_id trailer of TID|TIME|CPU: pid/tid, time, cpu. */
static inline void rec_trailer(struct rec *r, uint32_t pid, uint32_t tid, uint64_t time)
{
	rec_u32x2(r, pid, tid);
	rec_u64(r, time);
	rec_u32x2(r, 1, 0);
}

static inline const struct perf_event_header *rec_end(struct rec *r)
{
	uint16_t size = (uint16_t)r->n;

	/* memcpy: buf is u64 storage, and -O2 enforces the aliasing rules. */
	memcpy((uint8_t *)r->buf + offsetof(struct perf_event_header, size), &size, sizeof(size));
	return (const struct perf_event_header *)r->buf;
}

/* The sample the sampler asks for: IP|TID|TIME|CPU|PERIOD|CALLCHAIN. */
static inline const struct perf_event_header *rec_sample(struct rec *r, uint32_t pid, uint32_t tid,
							 uint64_t time, const uint64_t *ips,
							 uint64_t nr)
{
	rec_begin(r, PERF_RECORD_SAMPLE, PERF_RECORD_MISC_USER);
	rec_u64(r, nr ? ips[nr - 1] : 0);
	rec_u32x2(r, pid, tid);
	rec_u64(r, time);
	rec_u32x2(r, 1, 0);
	rec_u64(r, 10101010);
	rec_u64(r, nr);
	for (uint64_t i = 0; i < nr; i++)
		rec_u64(r, ips[i]);
	return rec_end(r);
}

#endif

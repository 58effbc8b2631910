/* SPDX-License-Identifier: MIT */
/* Fuzz target: the perf ring reader (ring.h) and the record decoders
 * (record.h) over arbitrary ring contents.
 *
 * Input (little-endian), then the ring's data bytes (zero-filled or cut to
 * the ring size):
 *   u16 sample-type bits (see type_bits[]), u8 flags, u8 ring order,
 *   u32 bytes published in round 1, u32 more bytes published in round 2
 *   (each modulo what the ring has room for, rounded down to 8 bytes),
 *   u64 regs_user mask, u64 initial data_tail (the ring position, rounded
 *   down to 8 bytes; positions near 2^64 wrap).
 * flags: bit 0 sample_id_all, bit 1 describe the data area through
 * meta->data_offset/data_size (as the kernel does), bit 2 a data size that is
 * not a power of two (init must refuse it).
 *
 * Checks: every record handed out lies in the ring or in the bounce buffer
 * and holds exactly the bytes of the ring at that position (wrapping), a
 * reading round ends with less than a header left or the rest skipped as
 * corrupt, data_tail is published, and whatever a decoder returns points
 * inside its record.
 */
#include "fuzz.h"

#include <errno.h>
#include <stdbool.h>
#include <string.h>

#include "fxagent/record.h"
#include "fxagent/ring.h"

#define HEAD_SIZE   28
#define PAGE	    4096
#define BOUNCE_SIZE 65536
#define MAX_RECORDS 4096

static const uint64_t type_bits[16] = {
	PERF_SAMPLE_IDENTIFIER,
	PERF_SAMPLE_IP,
	PERF_SAMPLE_TID,
	PERF_SAMPLE_TIME,
	PERF_SAMPLE_ADDR,
	PERF_SAMPLE_ID,
	PERF_SAMPLE_STREAM_ID,
	PERF_SAMPLE_CPU,
	PERF_SAMPLE_PERIOD,
	PERF_SAMPLE_CALLCHAIN,
	PERF_SAMPLE_REGS_USER,
	PERF_SAMPLE_STACK_USER,
	/* Never asked for by the agent: the decoder must refuse them. */
	PERF_SAMPLE_READ,
	PERF_SAMPLE_RAW,
	PERF_SAMPLE_BRANCH_STACK,
	PERF_SAMPLE_WEIGHT,
};

struct span {
	const uint8_t *lo, *hi;
};

static bool within(const struct span *rec, const void *p, uint64_t len)
{
	const uint8_t *b = p;

	return b >= rec->lo && b <= rec->hi && len <= (uint64_t)(rec->hi - b);
}

static bool cstr_within(const struct span *rec, const char *s)
{
	return within(rec, s, 1) && memchr(s, '\0', (size_t)(rec->hi - (const uint8_t *)s));
}

static void check_id(const struct fx_record_fmt *fmt, const struct fx_record_id *id)
{
	if (!fmt->sample_id_all)
		FUZZ_CHECK(!id->pid && !id->tid && !id->time && !id->cpu, "trailer without "
									  "sample_id_all");
}

static void decode(const struct fx_record_fmt *fmt, const struct perf_event_header *h)
{
	struct span rec = { (const uint8_t *)h, (const uint8_t *)h + h->size };
	struct fx_record_sample s;
	struct fx_record_mmap m;
	struct fx_record_comm c;
	struct fx_record_task t;
	struct fx_record_lost l;
	struct fx_record_offcpu o;
	struct fx_record_offcpu_end e;
	int r;

	r = fx_record_sample(fmt, h, &s);
	FUZZ_CHECK(r == 0 || r == -EINVAL || r == -EOPNOTSUPP, "sample: %d", r);
	if (h->type != PERF_RECORD_SAMPLE)
		FUZZ_CHECK(r == -EINVAL, "sample decoder took type %u", h->type);
	if (r == 0) {
		FUZZ_CHECK(!(fmt->sample_type & PERF_SAMPLE_READ), "READ samples decoded");
		FUZZ_CHECK(s.nr == 0 || within(&rec, s.ips, s.nr * 8), "callchain of %llu",
			   (unsigned long long)s.nr);
		if (s.abi)
			FUZZ_CHECK(
				within(&rec, s.regs,
				       8ull * (unsigned)__builtin_popcountll(fmt->regs_user_mask)),
				"registers outside the record");
		FUZZ_CHECK(s.stack_size == 0 || within(&rec, s.stack, s.stack_size),
			   "stack of %llu outside the record", (unsigned long long)s.stack_size);
		FUZZ_CHECK(s.stack_dyn_size <= s.stack_size, "dyn_size %llu > size %llu",
			   (unsigned long long)s.stack_dyn_size, (unsigned long long)s.stack_size);
		FUZZ_CHECK(fx_record_time(fmt, h) == s.time, "time differs");
	}

	r = fx_record_mmap2(fmt, h, &m);
	FUZZ_CHECK(r == 0 || r == -EINVAL, "mmap2: %d", r);
	if (h->type != PERF_RECORD_MMAP2)
		FUZZ_CHECK(r == -EINVAL, "mmap2 decoder took type %u", h->type);
	if (r == 0) {
		FUZZ_CHECK(cstr_within(&rec, m.filename), "file name not terminated in record");
		FUZZ_CHECK(m.build_id_len <= 20, "build-id of %u", m.build_id_len);
		FUZZ_CHECK(m.has_build_id || !m.build_id_len, "build-id length without build-id");
		check_id(fmt, &m.id);
	}

	r = fx_record_comm(fmt, h, &c);
	FUZZ_CHECK(r == 0 || r == -EINVAL, "comm: %d", r);
	if (h->type != PERF_RECORD_COMM)
		FUZZ_CHECK(r == -EINVAL, "comm decoder took type %u", h->type);
	if (r == 0) {
		FUZZ_CHECK(cstr_within(&rec, c.comm), "comm not terminated in record");
		check_id(fmt, &c.id);
	}

	r = fx_record_task(fmt, h, &t);
	FUZZ_CHECK(r == 0 || r == -EINVAL, "task: %d", r);
	if (h->type != PERF_RECORD_FORK && h->type != PERF_RECORD_EXIT)
		FUZZ_CHECK(r == -EINVAL, "task decoder took type %u", h->type);
	if (r == 0)
		check_id(fmt, &t.id);

	r = fx_record_lost(fmt, h, &l);
	FUZZ_CHECK(r == 0 || r == -EINVAL, "lost: %d", r);
	if (h->type != PERF_RECORD_LOST && h->type != PERF_RECORD_LOST_SAMPLES)
		FUZZ_CHECK(r == -EINVAL, "lost decoder took type %u", h->type);
	if (r == 0)
		check_id(fmt, &l.id);

	/* The agent's own off-CPU records: a start holds a whole sample, an end
	 * its interval; each carries its time without a trailer. */
	r = fx_record_offcpu(fmt, h, &o);
	FUZZ_CHECK(r == 0 || r == -EINVAL || r == -EOPNOTSUPP, "offcpu: %d", r);
	if (h->type != FX_RECORD_OFFCPU)
		FUZZ_CHECK(r == -EINVAL, "offcpu decoder took type %u", h->type);
	if (r == 0) {
		FUZZ_CHECK(o.p && o.p <= FX_RECORD_OFFCPU_P1, "probability %u", o.p);
		FUZZ_CHECK(o.q <= FX_RECORD_OFFCPU_P1, "stacks' probability %u", o.q);
		FUZZ_CHECK(o.s.nr == 0 || within(&rec, o.s.ips, o.s.nr * 8),
			   "wait's callchain of %llu", (unsigned long long)o.s.nr);
		FUZZ_CHECK(o.s.stack_size == 0 || within(&rec, o.s.stack, o.s.stack_size),
			   "wait's stack of %llu outside the record",
			   (unsigned long long)o.s.stack_size);
		FUZZ_CHECK(fx_record_time(fmt, h) == o.s.time, "wait's time differs");
	}
	r = fx_record_offcpu_end(h, &e);
	FUZZ_CHECK(r == 0 || r == -EINVAL, "offcpu end: %d", r);
	if (h->type != FX_RECORD_OFFCPU_END)
		FUZZ_CHECK(r == -EINVAL, "offcpu end decoder took type %u", h->type);
	if (r == 0) {
		FUZZ_CHECK(e.t_in >= e.t_out, "wait ends before it starts");
		FUZZ_CHECK(!e.t_wake || (e.t_wake >= e.t_out && e.t_wake <= e.t_in),
			   "woken outside the wait");
		FUZZ_CHECK(fx_record_time(fmt, h) == e.t_in, "wait end's time differs");
	}

	if (h->type != PERF_RECORD_SAMPLE && h->type != FX_RECORD_OFFCPU &&
	    h->type != FX_RECORD_OFFCPU_END && !fmt->sample_id_all)
		FUZZ_CHECK(fx_record_time(fmt, h) == 0, "time without a trailer");
}

/* Reads what was published since the last round; checks each record against
 * the ring bytes at its position. */
static void read_round(struct fx_ring *r, const struct fx_record_fmt *fmt, const uint8_t *ring,
		       uint64_t size)
{
	const struct perf_event_header *h;
	uint64_t pos, corrupt = r->corrupt, i;
	unsigned n = 0;

	fx_ring_begin(r);
	FUZZ_CHECK(r->head == r->meta->data_head, "head not taken");
	for (;;) {
		struct span ringspan = { ring, ring + size };
		struct span bounce = { r->bounce, r->bounce + BOUNCE_SIZE };

		pos = r->tail;
		h = fx_ring_next(r);
		if (!h)
			break;
		FUZZ_CHECK(++n <= MAX_RECORDS, "more records than bytes");
		FUZZ_CHECK(!((uintptr_t)h & 7), "record at a misaligned address");
		FUZZ_CHECK(h->size >= sizeof(*h) && h->size <= size, "record of %u bytes", h->size);
		FUZZ_CHECK(within(&ringspan, h, h->size) || within(&bounce, h, h->size),
			   "record outside the ring and the bounce buffer");
		FUZZ_CHECK(r->tail == pos + h->size, "tail moved by %llu for %u bytes",
			   (unsigned long long)(r->tail - pos), h->size);
		FUZZ_CHECK(r->head - pos >= h->size, "record past head");
		for (i = 0; i < h->size; i++)
			FUZZ_CHECK(((const uint8_t *)h)[i] == ring[(pos + i) & (size - 1)],
				   "byte %llu of the record at %llu differs", (unsigned long long)i,
				   (unsigned long long)pos);
		decode(fmt, h);
	}
	/* Either less than a header is left, or the rest was skipped as corrupt. */
	FUZZ_CHECK(r->head - r->tail < sizeof(*h) ||
			   (r->tail == r->head && r->corrupt == corrupt + 1),
		   "stopped with %llu bytes left", (unsigned long long)(r->head - r->tail));
	fx_ring_end(r);
	FUZZ_CHECK(r->meta->data_tail == r->tail, "data_tail not published");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fuzz_in in = { data, size };
	struct fx_record_fmt fmt = { 0 };
	struct perf_event_mmap_page *meta;
	struct fx_ring r;
	uint64_t ring_size, avail1, avail2, tail;
	unsigned bits, flags, order, i;
	uint8_t *mem, *ring;
	size_t n;
	int ret;

	if (size < HEAD_SIZE)
		return 0;
	bits = (unsigned)fuzz_take(&in, 2);
	flags = (unsigned)fuzz_take(&in, 1);
	order = (unsigned)fuzz_take(&in, 1);
	avail1 = fuzz_take(&in, 4);
	avail2 = fuzz_take(&in, 4);
	fmt.regs_user_mask = fuzz_take(&in, 8);
	/* Only the reader moves the tail, by whole records: always 8-aligned. */
	tail = fuzz_take(&in, 8) & ~(uint64_t)7;
	for (i = 0; i < 16; i++)
		if (bits & (1u << i))
			fmt.sample_type |= type_bits[i];
	fmt.sample_id_all = flags & 1;
	ring_size = 64ull << (order % 11); /* 64 B to 64 KiB */

	/* Exactly the meta page and the data: ASan watches both ends. */
	mem = calloc(1, PAGE + ring_size);
	FUZZ_CHECK(mem, "out of memory");
	meta = (struct perf_event_mmap_page *)mem;
	ring = mem + PAGE;
	n = in.n < ring_size ? in.n : (size_t)ring_size;
	memcpy(ring, in.p, n);
	meta->data_tail = tail;
	meta->data_head = tail;
	if (flags & 2) {
		meta->data_offset = PAGE;
		meta->data_size = ring_size;
	}
	if (flags & 4) {
		ret = fx_ring_init(&r, meta, PAGE, (size_t)ring_size - 8);
		if (flags & 2)
			FUZZ_CHECK(ret == 0, "init: %d", ret);
		else
			FUZZ_CHECK(ret == -EINVAL, "init took a size that is no power of two: %d",
				   ret);
	} else {
		ret = fx_ring_init(&r, meta, PAGE, (size_t)ring_size);
		FUZZ_CHECK(ret == 0, "init: %d", ret);
	}
	if (ret == 0) {
		FUZZ_CHECK(r.data == ring && r.size == ring_size && r.tail == tail,
			   "ring not set up from the meta page");
		/* The kernel publishes whole records (whole u64s), and never
		 * more than a ring ahead of the reader. */
		avail1 = avail1 % (ring_size + 1) & ~(uint64_t)7;
		meta->data_head = tail + avail1;
		read_round(&r, &fmt, ring, ring_size);
		avail2 = avail2 % (ring_size - (meta->data_head - r.tail) + 1) & ~(uint64_t)7;
		meta->data_head += avail2;
		read_round(&r, &fmt, ring, ring_size);
		fx_ring_release(&r);
	}
	free(mem);
	return 0;
}

/* SPDX-License-Identifier: MIT */
#include "fxagent/record.h"

#include <errno.h>
#include <string.h>

/* A bounds-checked cursor over one record. */
struct cur {
	const uint8_t *p;
	const uint8_t *end;
	bool bad;
};

static void cur_init(struct cur *c, const struct perf_event_header *h)
{
	c->p = (const uint8_t *)(h + 1);
	c->end = (const uint8_t *)h + h->size;
	c->bad = h->size < sizeof(*h);
}

static const void *take(struct cur *c, uint64_t n)
{
	const uint8_t *p = c->p;

	if (c->bad || n > (uint64_t)(c->end - c->p)) {
		c->bad = true;
		return NULL;
	}
	c->p += n;
	return p;
}

static uint64_t u64(struct cur *c)
{
	uint64_t v = 0;
	const void *p = take(c, 8);

	if (p)
		memcpy(&v, p, 8);
	return v;
}

static void u32x2(struct cur *c, uint32_t *a, uint32_t *b)
{
	uint32_t v[2] = { 0, 0 };
	const void *p = take(c, 8);

	if (p)
		memcpy(v, p, 8);
	*a = v[0];
	*b = v[1];
}

/* The bytes of the u64 fields of @st among @fields. */
static size_t u64s(uint64_t st, uint64_t fields)
{
	return 8 * (size_t)__builtin_popcountll(st & fields);
}

/* The sample_id trailer sits at the end of the record: read it backwards. */
static int parse_id(const struct fx_record_fmt *fmt, const struct perf_event_header *h,
		    struct fx_record_id *id)
{
	uint64_t st = fmt->sample_type;
	size_t n;
	struct cur c;

	memset(id, 0, sizeof(*id));
	if (!fmt->sample_id_all)
		return 0;
	n = u64s(st, PERF_SAMPLE_TID | PERF_SAMPLE_TIME | PERF_SAMPLE_ID | PERF_SAMPLE_STREAM_ID |
			     PERF_SAMPLE_CPU | PERF_SAMPLE_IDENTIFIER);
	if (h->size < sizeof(*h) + n)
		return -EINVAL;
	c.p = (const uint8_t *)h + h->size - n;
	c.end = (const uint8_t *)h + h->size;
	c.bad = false;
	if (st & PERF_SAMPLE_TID)
		u32x2(&c, &id->pid, &id->tid);
	if (st & PERF_SAMPLE_TIME)
		id->time = u64(&c);
	if (st & PERF_SAMPLE_ID)
		u64(&c);
	if (st & PERF_SAMPLE_STREAM_ID)
		u64(&c);
	if (st & PERF_SAMPLE_CPU) {
		uint32_t res;

		u32x2(&c, &id->cpu, &res);
	}
	return 0;
}

int fx_record_sample(const struct fx_record_fmt *fmt, const struct perf_event_header *h,
		     struct fx_record_sample *out)
{
	uint64_t st = fmt->sample_type;
	struct fx_record_sample s;
	struct cur c;

	if (h->type != PERF_RECORD_SAMPLE)
		return -EINVAL;
	/* Sample types we never ask for would shift every field after them. */
	if (st & (PERF_SAMPLE_READ | PERF_SAMPLE_RAW | PERF_SAMPLE_BRANCH_STACK |
		  PERF_SAMPLE_WEIGHT | PERF_SAMPLE_DATA_SRC | PERF_SAMPLE_TRANSACTION |
		  PERF_SAMPLE_REGS_INTR | PERF_SAMPLE_PHYS_ADDR))
		return -EOPNOTSUPP;
	memset(&s, 0, sizeof(s));
	cur_init(&c, h);
	if (st & PERF_SAMPLE_IDENTIFIER)
		s.id = u64(&c);
	if (st & PERF_SAMPLE_IP)
		s.ip = u64(&c);
	if (st & PERF_SAMPLE_TID)
		u32x2(&c, &s.pid, &s.tid);
	if (st & PERF_SAMPLE_TIME)
		s.time = u64(&c);
	if (st & PERF_SAMPLE_ADDR)
		u64(&c);
	if (st & PERF_SAMPLE_ID)
		s.id = u64(&c);
	if (st & PERF_SAMPLE_STREAM_ID)
		u64(&c);
	if (st & PERF_SAMPLE_CPU) {
		uint32_t res;

		u32x2(&c, &s.cpu, &res);
	}
	if (st & PERF_SAMPLE_PERIOD)
		s.period = u64(&c);
	if (st & PERF_SAMPLE_CALLCHAIN) {
		s.nr = u64(&c);
		if (s.nr > 0xffff) /* never more than PERF_MAX_STACK_DEPTH-ish */
			return -EINVAL;
		s.ips = take(&c, s.nr * 8);
	}
	if (st & PERF_SAMPLE_REGS_USER) {
		s.abi = u64(&c);
		if (s.abi) {
			unsigned n = (unsigned)__builtin_popcountll(fmt->regs_user_mask);

			s.regs = take(&c, (uint64_t)n * 8);
		}
	}
	if (st & PERF_SAMPLE_STACK_USER) {
		s.stack_size = u64(&c);
		if (s.stack_size) {
			s.stack = take(&c, s.stack_size);
			s.stack_dyn_size = u64(&c);
			if (s.stack_dyn_size > s.stack_size)
				return -EINVAL;
		}
	}
	if (c.bad)
		return -EINVAL;
	*out = s;
	return 0;
}

int fx_record_offcpu(const struct fx_record_fmt *fmt, const struct perf_event_header *h,
		     struct fx_record_offcpu *out)
{
	struct fx_record_offcpu o;
	const struct perf_event_header *inner;
	uint32_t flags, pad;
	struct cur c;
	int ret;

	if (h->type != FX_RECORD_OFFCPU)
		return -EINVAL;
	memset(&o, 0, sizeof(o));
	cur_init(&c, h);
	u32x2(&c, &o.state, &o.tag);
	u32x2(&c, &o.p, &o.q);
	u32x2(&c, &flags, &pad);
	if (c.bad || !o.p || o.p > FX_RECORD_OFFCPU_P1 || o.q > FX_RECORD_OFFCPU_P1)
		return -EINVAL;
	o.seeded = flags & FX_RECORD_OFFCPU_SEEDED;
	inner = take(&c, sizeof(*inner));
	if (!inner || inner->size < sizeof(*inner) ||
	    inner->size > (size_t)(c.end - (const uint8_t *)inner))
		return -EINVAL;
	ret = fx_record_sample(fmt, inner, &o.s);
	if (ret < 0)
		return ret;
	*out = o;
	return 0;
}

int fx_record_offcpu_end(const struct perf_event_header *h, struct fx_record_offcpu_end *out)
{
	struct fx_record_offcpu_end e;
	struct cur c;

	if (h->type != FX_RECORD_OFFCPU_END)
		return -EINVAL;
	cur_init(&c, h);
	u32x2(&c, &e.pid, &e.tid);
	e.t_out = u64(&c);
	e.t_in = u64(&c);
	e.t_wake = u64(&c);
	e.weight_ns = u64(&c);
	u32x2(&c, &e.state, &e.tag);
	if (c.bad || e.t_in < e.t_out || (e.t_wake && (e.t_wake < e.t_out || e.t_wake > e.t_in)))
		return -EINVAL;
	*out = e;
	return 0;
}

/* A NUL-terminated string of at most the rest of the record, 8-byte padded. */
static const char *take_str(struct cur *c)
{
	const char *s = (const char *)c->p;
	size_t max = c->bad ? 0 : (size_t)(c->end - c->p);
	size_t len = strnlen(s, max);

	if (len == max) {
		c->bad = true;
		return NULL;
	}
	take(c, (len + 8) & ~(size_t)7);
	return s;
}

int fx_record_mmap2(const struct fx_record_fmt *fmt, const struct perf_event_header *h,
		    struct fx_record_mmap *out)
{
	struct fx_record_mmap m;
	struct cur c;
	const uint8_t *p;

	if (h->type != PERF_RECORD_MMAP2)
		return -EINVAL;
	memset(&m, 0, sizeof(m));
	cur_init(&c, h);
	u32x2(&c, &m.pid, &m.tid);
	m.start = u64(&c);
	m.len = u64(&c);
	m.pgoff = u64(&c);
	p = take(&c, 24);
	if (p && (h->misc & PERF_RECORD_MISC_MMAP_BUILD_ID)) {
		m.has_build_id = true;
		m.build_id_len = p[0] > 20 ? 20 : p[0];
		memcpy(m.build_id, p + 4, m.build_id_len);
	} else if (p) {
		memcpy(&m.maj, p, 4);
		memcpy(&m.min, p + 4, 4);
		memcpy(&m.ino, p + 8, 8);
	}
	u32x2(&c, &m.prot, &m.flags);
	m.filename = take_str(&c);
	m.exec = !(h->misc & PERF_RECORD_MISC_MMAP_DATA);
	if (c.bad || parse_id(fmt, h, &m.id) < 0)
		return -EINVAL;
	*out = m;
	return 0;
}

int fx_record_comm(const struct fx_record_fmt *fmt, const struct perf_event_header *h,
		   struct fx_record_comm *out)
{
	struct fx_record_comm m;
	struct cur c;

	if (h->type != PERF_RECORD_COMM)
		return -EINVAL;
	memset(&m, 0, sizeof(m));
	cur_init(&c, h);
	u32x2(&c, &m.pid, &m.tid);
	m.comm = take_str(&c);
	m.exec = h->misc & PERF_RECORD_MISC_COMM_EXEC;
	if (c.bad || parse_id(fmt, h, &m.id) < 0)
		return -EINVAL;
	*out = m;
	return 0;
}

int fx_record_task(const struct fx_record_fmt *fmt, const struct perf_event_header *h,
		   struct fx_record_task *out)
{
	struct fx_record_task t;
	struct cur c;

	if (h->type != PERF_RECORD_FORK && h->type != PERF_RECORD_EXIT)
		return -EINVAL;
	memset(&t, 0, sizeof(t));
	cur_init(&c, h);
	u32x2(&c, &t.pid, &t.ppid);
	u32x2(&c, &t.tid, &t.ptid);
	t.time = u64(&c);
	if (c.bad || parse_id(fmt, h, &t.id) < 0)
		return -EINVAL;
	*out = t;
	return 0;
}

int fx_record_lost(const struct fx_record_fmt *fmt, const struct perf_event_header *h,
		   struct fx_record_lost *out)
{
	struct fx_record_lost l;
	struct cur c;

	memset(&l, 0, sizeof(l));
	cur_init(&c, h);
	if (h->type == PERF_RECORD_LOST)
		u64(&c); /* id */
	else if (h->type != PERF_RECORD_LOST_SAMPLES)
		return -EINVAL;
	l.lost = u64(&c);
	if (c.bad || parse_id(fmt, h, &l.id) < 0)
		return -EINVAL;
	*out = l;
	return 0;
}

/* Bytes of a stack copy prefetched. */
#define FX_RECORD_PREFETCH_STACK 4096

void fx_record_prefetch(const struct fx_record_fmt *fmt, const struct perf_event_header *h,
			const uint8_t *at)
{
	uint64_t st = fmt->sample_type, nr = 0;
	size_t off, regs;

	if (h->type != PERF_RECORD_SAMPLE || !(st & PERF_SAMPLE_STACK_USER))
		return;
	/* the fields before the callchain, as fx_record_sample() reads them */
	off = sizeof(*h) + u64s(st, PERF_SAMPLE_IDENTIFIER | PERF_SAMPLE_IP | PERF_SAMPLE_TID |
					    PERF_SAMPLE_TIME | PERF_SAMPLE_ADDR | PERF_SAMPLE_ID |
					    PERF_SAMPLE_STREAM_ID | PERF_SAMPLE_CPU |
					    PERF_SAMPLE_PERIOD);
	if (st & PERF_SAMPLE_CALLCHAIN) {
		if (off + 8 > h->size)
			return;
		memcpy(&nr, (const uint8_t *)h + off, 8);
		off += 8 + (nr > 0xffff ? 0 : nr) * 8;
	}
	regs = off;
	if (st & PERF_SAMPLE_REGS_USER)
		off += 8 + (size_t)__builtin_popcountll(fmt->regs_user_mask) * 8;
	off += 8; /* the stack copy's size; the copy starts at the sampled sp */
	if (off >= h->size)
		return;
	__builtin_prefetch(at + regs);
	/* the frames nearest the sampled one: most walks end within */
	for (size_t k = 0; k < FX_RECORD_PREFETCH_STACK && off + k < h->size; k += 64)
		__builtin_prefetch(at + off + k);
	__builtin_prefetch(at + h->size - 8);
}

uint64_t fx_record_time(const struct fx_record_fmt *fmt, const struct perf_event_header *h)
{
	struct fx_record_id id;

	if (h->type == FX_RECORD_OFFCPU) {
		struct fx_record_offcpu o;

		return fx_record_offcpu(fmt, h, &o) < 0 ? 0 : o.s.time;
	}
	if (h->type == FX_RECORD_OFFCPU_END) {
		struct fx_record_offcpu_end e;

		return fx_record_offcpu_end(h, &e) < 0 ? 0 : e.t_in;
	}
	if (h->type == PERF_RECORD_SAMPLE) {
		/* Only fixed-size fields come before the time: it is read where
		 * it is, not by a parse that touches the stack copy's far end
		 * (the sample is parsed whole when it is handled). */
		uint64_t st = fmt->sample_type, t = 0;
		size_t at = sizeof(*h) +
			    u64s(st, PERF_SAMPLE_IDENTIFIER | PERF_SAMPLE_IP | PERF_SAMPLE_TID);

		if (!(st & PERF_SAMPLE_TIME) || h->size < at + 8)
			return 0;
		memcpy(&t, (const uint8_t *)h + at, 8);
		return t;
	}
	if (parse_id(fmt, h, &id) < 0)
		return 0;
	return id.time;
}

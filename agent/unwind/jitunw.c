/* SPDX-License-Identifier: MIT */
#include "fxagent/jitunw.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fxagent/jitdump.h"
#include "fxagent/search.h"

/* Rows of one piece of code (a trampoline has three). */
#define MAX_ROWS 1024
/* Distinct CFI remembered a process. */
#define SEEN 8

struct range {
	uint64_t start; /* first: the search key */
	uint32_t size;
	uint32_t first, n; /* rows */
	uint32_t seq;	   /* load order: the later of two at one start wins */
};

struct seen {
	uint8_t *key; /* .eh_frame, .eh_frame_hdr, the code's size */
	size_t len;
	uint32_t first, n;
	uint64_t used;
};

enum state {
	ST_CLOSED, /* no jitdump open: look again after FX_JITUNW_REOPEN_NS */
	ST_OPEN,
	ST_DONE, /* refused, unreadable, or without unwinding information */
};

struct proc {
	uint32_t pid;
	uint64_t image;
	enum state state;
	int fd;
	uint64_t off; /* next record; 0: the header first */
	uint64_t last_try, last_use;
	uint64_t loads;
	bool any_unwind;
	uint8_t *pending; /* the last unwinding info, for the next load */
	size_t pending_len, pending_eh;
	struct range *r;
	size_t nr, rcap;
	bool sorted;
	uint32_t seq;
	struct fx_cfi_row *rows;
	size_t nrows, rowcap;
	struct seen seen[SEEN];
	size_t nseen;
};

struct fx_jitunw {
	struct proc **v;
	size_t n, cap;
	uint64_t mark;
	struct fx_jitunw_stats stats;
};

struct fx_jitunw *fx_jitunw_new(void)
{
	return calloc(1, sizeof(struct fx_jitunw));
}

static void proc_clear(struct proc *p)
{
	if (p->fd >= 0)
		close(p->fd);
	for (size_t i = 0; i < p->nseen; i++)
		free(p->seen[i].key);
	free(p->pending);
	free(p->r);
	free(p->rows);
	*p = (struct proc){ .pid = p->pid, .image = p->image, .fd = -1 };
}

void fx_jitunw_free(struct fx_jitunw *j)
{
	if (!j)
		return;
	for (size_t i = 0; i < j->n; i++) {
		proc_clear(j->v[i]);
		free(j->v[i]);
	}
	free(j->v);
	free(j);
}

static struct proc *proc_get(struct fx_jitunw *j, uint32_t pid)
{
	struct proc *p;

	for (size_t i = 0; i < j->n; i++)
		if (j->v[i]->pid == pid)
			return j->v[i];
	if (j->n == j->cap) {
		size_t cap = j->cap ? j->cap * 2 : 8;
		struct proc **v = realloc(j->v, cap * sizeof(struct proc *));

		if (!v)
			return NULL;
		j->v = v;
		j->cap = cap;
	}
	p = calloc(1, sizeof(*p));
	if (!p)
		return NULL;
	p->pid = pid;
	p->fd = -1;
	j->v[j->n++] = p;
	return p;
}

static void proc_drop(struct fx_jitunw *j, size_t i)
{
	proc_clear(j->v[i]);
	free(j->v[i]);
	j->v[i] = j->v[--j->n];
}

void fx_jitunw_forget(struct fx_jitunw *j, uint32_t pid)
{
	for (size_t i = 0; i < j->n; i++)
		if (j->v[i]->pid == pid) {
			proc_drop(j, i);
			return;
		}
}

void fx_jitunw_set_mark(struct fx_jitunw *j, uint64_t mark)
{
	j->mark = mark;
}

size_t fx_jitunw_drop_idle(struct fx_jitunw *j, uint64_t mark)
{
	size_t n = 0;

	for (size_t i = j->n; i-- > 0;)
		if (j->v[i]->last_use <= mark) {
			proc_drop(j, i);
			n++;
		}
	j->stats.idle_dropped += n;
	return n;
}

static int cmp_range(const void *a, const void *b)
{
	const struct range *x = a, *y = b;

	if (x->start != y->start)
		return x->start < y->start ? -1 : 1;
	return x->seq < y->seq ? -1 : x->seq > y->seq;
}

static bool lookup(struct proc *p, uint64_t pc, struct fx_cfi_rule *out)
{
	const struct range *r;
	size_t i, k;

	if (!p->nr)
		return false;
	if (!p->sorted) {
		qsort(p->r, p->nr, sizeof(*p->r), cmp_range);
		p->sorted = true;
	}
	i = fx_search_last_le(p->r, p->nr, sizeof(*p->r), 0, pc);
	if (i == SIZE_MAX || pc - p->r[i].start >= p->r[i].size)
		return false;
	r = &p->r[i];
	for (k = r->n; k-- > 0;)
		if (p->rows[r->first + k].start <= pc - r->start)
			break;
	if (k == SIZE_MAX || p->rows[r->first + k].rule.kind == FX_CFI_NONE)
		return false;
	*out = p->rows[r->first + k].rule;
	return true;
}

static int add_range(struct fx_jitunw *j, struct proc *p, uint64_t start, uint64_t size,
		     uint32_t first, uint32_t n)
{
	if (!size || size > UINT32_MAX)
		return 0;
	if (p->nr == FX_JITUNW_MAX_RANGES) {
		j->stats.over_bound++;
		return 0;
	}
	if (p->nr == p->rcap) {
		size_t cap = p->rcap ? p->rcap * 2 : 64;
		struct range *v = realloc(p->r, cap * sizeof(*v));

		if (!v)
			return -ENOMEM;
		p->r = v;
		p->rcap = cap;
	}
	p->r[p->nr++] = (struct range){ start, (uint32_t)size, first, n, p->seq++ };
	p->sorted = false;
	return 1;
}

/* The rows of the pending unwinding info for code of @size bytes: compiled
 * once for each distinct CFI. */
static int rows_for(struct fx_jitunw *j, struct proc *p, uint64_t size, uint32_t *first,
		    uint32_t *n)
{
	struct fx_cfi_row tmp[MAX_ROWS];
	size_t len = p->pending_len + sizeof(size), lru = 0;
	uint8_t *key = malloc(len);
	int got;

	if (!key)
		return -ENOMEM;
	memcpy(key, p->pending, p->pending_len);
	memcpy(key + p->pending_len, &size, sizeof(size));
	for (size_t i = 0; i < p->nseen; i++) {
		struct seen *s = &p->seen[i];

		if (s->len == len && !memcmp(s->key, key, len)) {
			free(key);
			s->used = p->seq;
			*first = s->first;
			*n = s->n;
			return 0;
		}
		if (s->used < p->seen[lru].used)
			lru = i;
	}
	got = fx_cfitab_compile_jit(p->pending, p->pending_eh, p->pending + p->pending_eh,
				    p->pending_len - p->pending_eh, size, tmp, MAX_ROWS);
	if (got <= 0) {
		free(key);
		j->stats.bad_cfi += got != -ENOMEM;
		return got < 0 ? got : -EINVAL;
	}
	if (p->nrows + (size_t)got > p->rowcap) {
		size_t cap = p->rowcap ? p->rowcap : 64;
		struct fx_cfi_row *v;

		while (cap < p->nrows + (size_t)got)
			cap *= 2;
		v = realloc(p->rows, cap * sizeof(*v));
		if (!v) {
			free(key);
			return -ENOMEM;
		}
		p->rows = v;
		p->rowcap = cap;
	}
	memcpy(p->rows + p->nrows, tmp, (size_t)got * sizeof(*tmp));
	*first = (uint32_t)p->nrows;
	*n = (uint32_t)got;
	p->nrows += (size_t)got;
	j->stats.compiled++;
	if (p->nseen < SEEN)
		lru = p->nseen++;
	else
		free(p->seen[lru].key);
	p->seen[lru] = (struct seen){ key, len, *first, *n, p->seq };
	return 0;
}

static int keep_pending(struct proc *p, const struct fx_jitdump_record *r)
{
	size_t len = r->eh_frame_len + r->eh_frame_hdr_len;
	uint8_t *v = realloc(p->pending, len ? len : 1);

	if (!v)
		return -ENOMEM;
	/* The two are adjacent in the record: .eh_frame, then its header. */
	memcpy(v, r->eh_frame, len);
	p->pending = v;
	p->pending_len = len;
	p->pending_eh = r->eh_frame_len;
	return 0;
}

/* A move keeps the rules of the code it moves. */
static int move_range(struct fx_jitunw *j, struct proc *p, const struct fx_jitdump_record *r)
{
	struct fx_cfi_rule unused;

	if (!lookup(p, r->old_addr, &unused))
		return 0;
	for (size_t i = 0; i < p->nr; i++)
		if (p->r[i].start == r->old_addr)
			return add_range(j, p, r->addr, r->size, p->r[i].first, p->r[i].n);
	return 0;
}

static void open_dump(struct fx_jitunw *j, struct proc *p)
{
	struct fx_perfmap_owner own;
	int fd = fx_perfmap_owner_of("/proc", (pid_t)p->pid, &own);

	if (fd == 0)
		fd = fx_jitdump_open(&own);
	if (fd >= 0) {
		p->fd = fd;
		p->state = ST_OPEN;
		p->off = 0;
	} else if (fd != -ENOENT && fd != -EAGAIN) {
		j->stats.refused++;
		p->state = ST_DONE;
	}
}

/* Reads what the runtime appended. Returns ranges added, or -errno. */
static int read_more(struct fx_jitunw *j, struct proc *p)
{
	struct fx_jitdump_cursor c;
	struct fx_jitdump_stats st = { 0 };
	struct fx_jitdump_record r;
	uint64_t from;
	uint32_t pid;
	int ret, added = 0;

	ret = p->off ? fx_jitdump_resume(&c, p->fd, NULL, 0, p->off)
		     : fx_jitdump_begin(&c, p->fd, NULL, 0, &pid);
	from = c.off;
	while (ret == 0 && c.off - from < FX_JITUNW_READ_BYTES &&
	       (ret = fx_jitdump_next(&c, &r, &st)) == 1) {
		ret = 0;
		if (r.id == FX_JITDUMP_CODE_UNWINDING_INFO) {
			p->any_unwind = true;
			ret = keep_pending(p, &r);
		} else if (r.id == FX_JITDUMP_CODE_LOAD) {
			uint32_t first, n;

			p->loads++;
			if (p->pending_len) {
				if (rows_for(j, p, r.size, &first, &n) == 0)
					ret = add_range(j, p, r.addr, r.size, first, n);
				p->pending_len = 0;
			}
		} else if (r.id == FX_JITDUMP_CODE_MOVE) {
			ret = move_range(j, p, &r);
		}
		if (ret > 0) {
			added += ret;
			ret = 0;
		}
	}
	if (ret != -EAGAIN && ret != -EBADMSG && ret < 0 && ret != -ENOMEM)
		ret = 0;
	p->off = c.off;
	fx_jitdump_end(&c);
	j->stats.records += st.records;
	if (ret == -EBADMSG || (!p->any_unwind && p->loads >= FX_JITUNW_PROBE_LOADS)) {
		close(p->fd);
		p->fd = -1;
		p->state = ST_DONE;
	}
	return ret == -EAGAIN ? 0 : ret < 0 ? ret : added;
}

int fx_jitunw_find(struct fx_jitunw *j, uint32_t pid, uint64_t image, uint64_t pc, uint64_t now,
		   struct fx_cfi_rule *out)
{
	struct proc *p = proc_get(j, pid);

	if (!p)
		return -ENOMEM;
	if (p->image != image) {
		proc_clear(p);
		p->image = image;
	}
	p->last_use = j->mark;
	if (lookup(p, pc, out))
		goto found;
	if (p->state == ST_DONE)
		goto missed;
	if (p->state == ST_CLOSED) {
		if (p->last_try && now - p->last_try < FX_JITUNW_REOPEN_NS)
			goto missed;
		p->last_try = now;
		open_dump(j, p);
		if (p->state != ST_OPEN)
			goto missed;
	} else if (now - p->last_try < FX_JITUNW_REREAD_NS) {
		goto missed;
	}
	p->last_try = now;
	if (read_more(j, p) > 0 && lookup(p, pc, out))
		goto found;
missed:
	j->stats.missed++;
	return -ENOENT;
found:
	j->stats.found++;
	return 0;
}

void fx_jitunw_get_stats(const struct fx_jitunw *j, struct fx_jitunw_stats *out)
{
	*out = j->stats;
	out->procs = out->ranges = 0;
	out->bytes = j->cap * sizeof(struct proc *);
	for (size_t i = 0; i < j->n; i++) {
		const struct proc *p = j->v[i];

		out->procs += p->fd >= 0;
		out->ranges += p->nr;
		out->bytes += sizeof(*p) + p->rcap * sizeof(*p->r) + p->rowcap * sizeof(*p->rows) +
			      p->pending_len;
		for (size_t k = 0; k < p->nseen; k++)
			out->bytes += p->seen[k].len;
	}
}

/* SPDX-License-Identifier: MIT */
#include "fxagent/jitdump.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fxagent/search.h"

/* What the cursor holds of the file: the largest record it reads whole (an
 * unwinding info, a name) fits. */
#define BLOCK (256u << 10)

#define HEADER_MIN 40 /* magic .. flags */
#define HEADER_MAX 4096
#define PREFIX	   16 /* id, total_size, timestamp */
#define LOAD_FIXED 40 /* pid, tid, vma, code_addr, code_size, code_index */
#define MOVE_FIXED 48 /* pid, tid, vma, old, new, code_size, code_index */
#define UNW_FIXED  24 /* unwinding_size, eh_frame_hdr_size, mapped_size */

static uint32_t get32(const uint8_t *p)
{
	uint32_t v;

	memcpy(&v, p, sizeof(v));
	return v;
}

static uint64_t get64(const uint8_t *p)
{
	uint64_t v;

	memcpy(&v, p, sizeof(v));
	return v;
}

/* @len bytes at @off (within c->size), through the block. NULL on a read
 * error or a file that shrank. */
static const uint8_t *at(struct fx_jitdump_cursor *c, uint64_t off, size_t len)
{
	size_t got = 0, want;

	if (off > c->size || len > c->size - off)
		return NULL;
	if (c->fd < 0)
		return c->mem + off;
	if (off >= c->buf_off && off - c->buf_off <= c->buf_len &&
	    len <= c->buf_len - (off - c->buf_off))
		return c->buf + (off - c->buf_off);
	if (len > BLOCK)
		return NULL;
	if (!c->buf && !(c->buf = malloc(BLOCK)))
		return NULL;
	want = c->size - off < BLOCK ? (size_t)(c->size - off) : BLOCK;
	c->buf_off = off;
	c->buf_len = 0;
	while (got < want) {
		ssize_t r = pread(c->fd, c->buf + got, want - got, (off_t)(off + got));

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		got += (size_t)r;
	}
	c->buf_len = got;
	return got >= len ? c->buf : NULL;
}

static int set_source(struct fx_jitdump_cursor *c, int fd, const void *mem, size_t len)
{
	struct stat st;

	*c = (struct fx_jitdump_cursor){ .fd = fd, .mem = mem, .size = len };
	if (fd >= 0) {
		if (fstat(fd, &st) < 0)
			return -errno;
		c->size = (uint64_t)st.st_size;
	}
	return 0;
}

int fx_jitdump_begin(struct fx_jitdump_cursor *c, int fd, const void *mem, size_t len,
		     uint32_t *pid)
{
	const uint8_t *h;
	uint32_t hsize;
	int ret = set_source(c, fd, mem, len);

	if (ret < 0)
		return ret;
	if (c->size < HEADER_MIN)
		return -EAGAIN;
	h = at(c, 0, HEADER_MIN);
	if (!h)
		return -EIO;
	/* The other byte order's magic is another machine's file. */
	hsize = get32(h + 8);
	if (get32(h) != FX_JITDUMP_MAGIC || hsize < HEADER_MIN || hsize > HEADER_MAX) {
		c->bad = true;
		return -EBADMSG;
	}
	if (c->size < hsize)
		return -EAGAIN;
	*pid = get32(h + 20);
	c->off = hsize;
	return 0;
}

int fx_jitdump_resume(struct fx_jitdump_cursor *c, int fd, const void *mem, size_t len,
		      uint64_t off)
{
	int ret = set_source(c, fd, mem, len);

	c->off = off;
	return ret;
}

void fx_jitdump_end(struct fx_jitdump_cursor *c)
{
	free(c->buf);
	c->buf = NULL;
	c->buf_len = 0;
}

/* The name of a code load: NUL-terminated within its record, cut at
 * FX_JITDUMP_MAX_NAME. false when the record holds no NUL. */
static bool load_name(struct fx_jitdump_cursor *c, uint64_t off, uint64_t room,
		      struct fx_jitdump_record *r)
{
	size_t scan = room > FX_JITDUMP_MAX_NAME + 1 ? FX_JITDUMP_MAX_NAME + 1 : (size_t)room;
	const uint8_t *p = at(c, off, scan);
	const uint8_t *nul = p ? memchr(p, '\0', scan) : NULL;

	if (!p || (!nul && scan <= FX_JITDUMP_MAX_NAME))
		return false;
	r->name = (const char *)p;
	r->name_len = nul ? (size_t)(nul - p) : FX_JITDUMP_MAX_NAME;
	return true;
}

int fx_jitdump_next(struct fx_jitdump_cursor *c, struct fx_jitdump_record *r,
		    struct fx_jitdump_stats *st)
{
	for (;;) {
		const uint8_t *p;
		uint64_t total, body, rec;
		uint32_t id;

		if (c->bad)
			return -EBADMSG;
		if (c->size - c->off < PREFIX) {
			st->partial += c->size != c->off;
			return 0;
		}
		if (!(p = at(c, c->off, PREFIX)))
			return -EIO;
		id = get32(p);
		total = get32(p + 4);
		if (total < PREFIX || total > FX_JITDUMP_MAX_RECORD) {
			c->bad = true;
			return -EBADMSG;
		}
		if (total > c->size - c->off) {
			st->partial++;
			return 0;
		}
		*r = (struct fx_jitdump_record){ .id = id, .timestamp = get64(p + 8) };
		rec = c->off + PREFIX;
		body = total - PREFIX;
		c->off += total;
		st->records++;
		if (id == FX_JITDUMP_CODE_LOAD) {
			if (body < LOAD_FIXED || !(p = at(c, rec, LOAD_FIXED)))
				goto skip;
			r->addr = get64(p + 16);
			r->size = get64(p + 24);
			r->index = get64(p + 32);
			if (!load_name(c, rec + LOAD_FIXED, body - LOAD_FIXED, r))
				goto skip;
			st->loads++;
			return 1;
		}
		if (id == FX_JITDUMP_CODE_MOVE) {
			if (body < MOVE_FIXED || !(p = at(c, rec, MOVE_FIXED)))
				goto skip;
			r->old_addr = get64(p + 16);
			r->addr = get64(p + 24);
			r->size = get64(p + 32);
			r->index = get64(p + 40);
			st->moves++;
			return 1;
		}
		if (id == FX_JITDUMP_CODE_UNWINDING_INFO) {
			uint64_t len, hdr;

			if (body < UNW_FIXED || !(p = at(c, rec, UNW_FIXED)))
				goto skip;
			len = get64(p);
			hdr = get64(p + 8);
			if (len > FX_JITDUMP_MAX_UNWIND || len > body - UNW_FIXED || hdr > len ||
			    !(p = at(c, rec + UNW_FIXED, (size_t)len)))
				goto skip;
			r->eh_frame = p;
			r->eh_frame_len = (size_t)(len - hdr);
			r->eh_frame_hdr = p + (len - hdr);
			r->eh_frame_hdr_len = (size_t)hdr;
			st->unwinds++;
			return 1;
		}
		continue; /* debug info, close, a later version's records */
	skip:
		st->skipped++;
	}
}

int fx_jitdump_open(const struct fx_perfmap_owner *o)
{
	char path[PATH_MAX], line[PATH_MAX + 128], want[64];
	unsigned long long lo = 0, hi = 0;
	struct fx_jitdump_cursor c;
	size_t wlen;
	uint32_t pid;
	bool found = false;
	int fd, ret;
	FILE *f;

	snprintf(path, sizeof(path), "%s/%d/maps", o->proc_root, (int)o->pid);
	f = fopen(path, "re");
	if (!f)
		return errno == ENOENT ? -ESRCH : -errno;
	wlen = (size_t)snprintf(want, sizeof(want), "/jit-%d.dump", (int)o->ns_pid);
	while (fgets(line, sizeof(line), f)) {
		size_t len = strcspn(line, "\n");
		unsigned long long s, e;

		line[len] = '\0';
		/* The runtime's own mapping of it, by name; the last one wins. */
		if (len >= wlen && !strcmp(line + len - wlen, want) &&
		    sscanf(line, "%llx-%llx", &s, &e) == 2) {
			lo = s;
			hi = e;
			found = true;
		}
	}
	fclose(f);
	if (!found)
		return -ENOENT;
	snprintf(path, sizeof(path), "%s/%d/map_files/%llx-%llx", o->proc_root, (int)o->pid, lo,
		 hi);
	fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOENT ? -ESRCH : -errno;
	ret = fx_perfmap_check_fd(fd, o);
	if (ret == 0) {
		ret = fx_jitdump_begin(&c, fd, NULL, 0, &pid);
		fx_jitdump_end(&c);
		if (ret == 0 && pid != (uint32_t)o->ns_pid && pid != (uint32_t)o->pid)
			ret = -EBADMSG;
	}
	if (ret < 0) {
		close(fd);
		return ret;
	}
	return fd;
}

/* The first of the @n sorted @addrs at or above @a. */
static size_t first_at(const uint64_t *addrs, size_t n, uint64_t a)
{
	size_t i = a ? fx_search_last_le(addrs, n, sizeof(*addrs), 0, a - 1) : SIZE_MAX;

	return i == SIZE_MAX ? 0 : i + 1;
}

/* Whether @r is stamped after @until, by the samples' clock (see jitdump.h). */
static bool after(const struct fx_jitdump_record *r, uint64_t until)
{
	return r->timestamp > until && r->timestamp - until <= FX_JITDUMP_CLOCK_SLACK_NS;
}

#define NO_INDEX UINT64_MAX

struct want {
	uint64_t index; /* first: the search key */
	size_t i;
};

static int cmp_want(const void *a, const void *b)
{
	const struct want *x = a, *y = b;

	return x->index < y->index ? -1 : x->index > y->index;
}

/* Names the addresses whose last record was a move (@moved[i], the index)
 * from the loads of those indexes. */
static int name_moves(struct fx_jitdump_cursor *c, int fd, const void *mem, size_t len,
		      const uint64_t *addrs, size_t n, uint64_t until, struct fx_perfmap_hit *out,
		      const uint64_t *moved)
{
	struct want *w = malloc((n + 1) * sizeof(*w));
	struct fx_jitdump_stats again = { 0 };
	struct fx_jitdump_record r;
	size_t nw = 0;
	uint32_t pid;
	int ret;

	if (!w)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++)
		if (moved[i] != NO_INDEX)
			w[nw++] = (struct want){ moved[i], i };
	qsort(w, nw, sizeof(*w), cmp_want);
	fx_jitdump_end(c);
	ret = fx_jitdump_begin(c, fd, mem, len, &pid);
	while (ret == 0 && (ret = fx_jitdump_next(c, &r, &again)) == 1) {
		size_t k = fx_search_last_le(w, nw, sizeof(*w), 0, r.index);

		ret = 0;
		if (r.id != FX_JITDUMP_CODE_LOAD || after(&r, until))
			continue;
		for (; k != SIZE_MAX && w[k].index == r.index && ret == 0; k = k ? k - 1 : SIZE_MAX)
			ret = fx_perfmap_cover(addrs + w[k].i, 1, out + w[k].i, out[w[k].i].start,
					       out[w[k].i].size, r.name, r.name_len);
	}
	free(w);
	return ret == -EBADMSG ? 0 : ret;
}

int fx_jitdump_names(int fd, const void *mem, size_t len, const uint64_t *addrs, size_t n,
		     uint64_t until, struct fx_perfmap_hit *out, struct fx_jitdump_stats *st)
{
	/* A moved piece of code keeps its index: its name is the load's. */
	uint64_t *moved = malloc((n + 1) * sizeof(*moved));
	struct fx_jitdump_cursor c;
	struct fx_jitdump_record r;
	bool any_moved = false;
	uint32_t pid;
	int ret;

	if (!moved)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++)
		moved[i] = NO_INDEX;
	ret = fx_jitdump_begin(&c, fd, mem, len, &pid);
	while (ret == 0 && (ret = fx_jitdump_next(&c, &r, st)) == 1) {
		size_t i = first_at(addrs, n, r.addr);
		uint64_t last;

		ret = 0;
		if (r.id == FX_JITDUMP_CODE_UNWINDING_INFO || !r.size)
			continue;
		if (after(&r, until)) {
			st->later++;
			continue;
		}
		last = r.size - 1 > UINT64_MAX - r.addr ? UINT64_MAX : r.addr + (r.size - 1);
		if (r.id == FX_JITDUMP_CODE_LOAD)
			ret = fx_perfmap_cover(addrs, n, out, r.addr, r.size, r.name, r.name_len);
		else /* a name found in a second pass */
			ret = fx_perfmap_cover(addrs, n, out, r.addr, r.size, "", 0);
		for (; i < n && addrs[i] <= last; i++) {
			moved[i] = r.id == FX_JITDUMP_CODE_MOVE ? r.index : NO_INDEX;
			any_moved |= r.id == FX_JITDUMP_CODE_MOVE;
		}
	}
	if (ret == -EBADMSG || ret == -EAGAIN)
		ret = 0; /* what came before is good; the rest unnamed */
	if (ret == 0 && any_moved)
		ret = name_moves(&c, fd, mem, len, addrs, n, until, out, moved);
	/* A move whose load was not found names nothing. */
	for (size_t i = 0; i < n; i++)
		if (out[i].name && !out[i].name[0])
			fx_perfmap_hits_free(out + i, 1);
	fx_jitdump_end(&c);
	free(moved);
	return ret;
}

/* SPDX-License-Identifier: MIT */
/* memstat: the agent's resident memory by kind (see memstat.h). */
#include "fxagent/memstat.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <malloc.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

const char *fx_memstat_part_name(enum fx_mem_part p)
{
	static const char *const names[FX_MEM_NPARTS] = { "rings", "heap",  "arenas", "stacks",
							  "anon",  "files", "other" };

	return p < FX_MEM_NPARTS ? names[p] : "?";
}

struct map {
	uint64_t start, end, rss;
	bool anon_rw; /* anonymous, private, readable and writable */
	bool guard;   /* anonymous, no access */
	enum fx_mem_part part;
};

/* The kind of a mapping from its header line: "start-end perms off dev inode [path]". */
static bool parse_header(const char *line, const char *eol, struct map *m)
{
	char perms[5] = "";
	unsigned long long a, b, ino;
	int path_at = 0;
	const char *path;

	if (sscanf(line, "%llx-%llx %4s %*x %*x:%*x %llu %n", &a, &b, perms, &ino, &path_at) < 4 ||
	    !path_at)
		return false;
	path = line + path_at;
	*m = (struct map){ .start = a, .end = b };
	if (path < eol && *path == '/')
		m->part = FX_MEM_FILES;
	else if (path < eol && !strncmp(path, "[heap]", 6))
		m->part = FX_MEM_HEAP;
	else if (path < eol && !strncmp(path, "[stack]", 7))
		m->part = FX_MEM_STACKS;
	else if (path < eol && memmem(path, (size_t)(eol - path), "[perf_event]", 12))
		m->part = FX_MEM_RINGS;
	else if (path < eol && *path != '\n')
		m->part = FX_MEM_OTHER;
	else
		m->part = FX_MEM_ANON;
	m->anon_rw = m->part == FX_MEM_ANON && !strcmp(perms, "rw-p");
	m->guard = m->part == FX_MEM_ANON && !strcmp(perms, "---p");
	return true;
}

static void add(struct fx_memstat *out, const struct map *m)
{
	out->part[m->part] += m->rss;
	if (m->part != FX_MEM_RINGS)
		out->rss += m->rss;
	if (m->part == FX_MEM_ARENAS)
		out->arenas++;
}

struct parser {
	struct map prev, cur;
	bool have_prev, have_cur;
};

/* A mapping's last line was read: classify the one before it, now that its
 * neighbours are known, and count it. */
static void flush(struct parser *ps, struct fx_memstat *out)
{
	struct map *c = &ps->cur;

	if (c->anon_rw && c->part == FX_MEM_ANON && ps->have_prev && ps->prev.guard &&
	    ps->prev.end == c->start)
		c->part = FX_MEM_STACKS;
	add(out, c);
	ps->prev = *c;
	ps->have_prev = true;
}

static void parse_line(struct parser *ps, const char *line, const char *eol, struct fx_memstat *out)
{
	struct map m;

	/* The rings' pages are the kernel's, locked, and not in Rss: their
	 * size is what they cost. */
	if (!strncmp(line, "Rss:", 4) || !strncmp(line, "Size:", 5)) {
		bool size = line[0] == 'S';

		if (ps->have_cur && size == (ps->cur.part == FX_MEM_RINGS))
			ps->cur.rss = strtoull(line + (size ? 5 : 4), NULL, 10) * 1024;
		return;
	}
	if (!parse_header(line, eol, &m))
		return;
	/* A guard right after a mapping: that one is an arena's usable
	 * front (its guard before it, if any, is another arena's tail). */
	if (ps->have_cur && m.guard && m.start == ps->cur.end && ps->cur.anon_rw &&
	    !(ps->have_prev && ps->prev.guard && ps->prev.end == ps->cur.start))
		ps->cur.part = FX_MEM_ARENAS;
	if (ps->have_cur)
		flush(ps, out);
	ps->cur = m;
	ps->have_cur = true;
}

static void reset(struct fx_memstat *out)
{
	memset(out->part, 0, sizeof(out->part));
	out->rss = 0;
	out->arenas = 0;
}

void fx_memstat_parse(const char *smaps, size_t len, struct fx_memstat *out)
{
	const char *p = smaps, *end = smaps + len;
	struct parser ps = { 0 };

	reset(out);
	while (p < end) {
		const char *eol = memchr(p, '\n', (size_t)(end - p));

		if (!eol)
			eol = end;
		parse_line(&ps, p, eol, out);
		p = eol + 1;
	}
	if (ps.have_cur)
		flush(&ps, out);
}

int fx_memstat_read(struct fx_memstat *out)
{
	struct mallinfo2 mi = mallinfo2();
	struct parser ps = { 0 };
	char *line = NULL;
	size_t cap = 0;
	ssize_t n;
	FILE *f = fopen("/proc/self/smaps", "re");

	if (!f)
		return -errno;
	reset(out);
	while ((n = getline(&line, &cap, f)) > 0)
		parse_line(&ps, line, line + n, out);
	if (ps.have_cur)
		flush(&ps, out);
	free(line);
	fclose(f);
	out->malloc_used = (uint64_t)mi.uordblks + (uint64_t)mi.hblkhd;
	out->malloc_free = (uint64_t)mi.fordblks;
	return 0;
}

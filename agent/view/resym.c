/* SPDX-License-Identifier: MIT */
/* Names, at view time, the frames a chunk left unnamed.
 *
 * A chunk written without debug info names code without a symbol
 * "<library>+0x<file offset>" and keeps what is needed to name it later: the
 * library's build-id (libs[].codeId) and the frame's address relative to the
 * library's image base (frameTable.address). With the debug file of that
 * build-id (under a --debug-dir, laid out as /usr/lib/debug/.build-id, or
 * from a --debuginfod server), the symbolizer reads the debug file in place
 * of the binary and each such frame becomes the function and the functions
 * inlined into it, the inner ones as frames of their own (inlineDepth).
 * Stacks through them are rebuilt with the new frames; samples follow. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fxagent/debuginfod.h"
#include "fxagent/elf.h"
#include "fxagent/log.h"
#include "fxagent/symbolize.h"
#include "fxagent/util.h"
#include "view_int.h"

/* Frame records: address (a double's bits), inline depth, category, func,
 * native symbol, line; see merge.c. */
enum { FR_ADDR, FR_DEPTH, FR_CAT, FR_FUNC, FR_NSYM, FR_LINE };

struct chain {
	uint32_t *v; /* new frames, outer first; NULL: the frame stays */
	uint32_t n;
};

static double addr_of(const uint64_t *fr)
{
	double d;

	memcpy(&d, &fr[FR_ADDR], sizeof(d));
	return d;
}

/* The library of frame @f if its function is named "<lib name>+0x<hex>",
 * else UINT32_MAX. */
static uint32_t unnamed_lib(const struct merge *m, const uint64_t *fr)
{
	const uint64_t *fn, *res, *lib;
	const char *name, *lname;
	size_t nlen, llen;

	if (fr[FR_DEPTH] != 0 && fr[FR_DEPTH] != NONE64)
		return UINT32_MAX;
	fn = view_rectab_at(&m->funcs, fr[FR_FUNC]);
	if (fn[1] == NONE64)
		return UINT32_MAX;
	res = view_rectab_at(&m->res, fn[1]);
	if (res[1] == NONE64)
		return UINT32_MAX;
	lib = view_rectab_at(&m->libs, res[1]);
	name = view_strtab_at(&m->strs, (uint32_t)fn[0], &nlen);
	lname = view_strtab_at(&m->strs, (uint32_t)lib[VLIB_NAME], &llen);
	if (nlen <= llen + 3 || memcmp(name, lname, llen) != 0 ||
	    memcmp(name + llen, "+0x", 3) != 0 ||
	    strspn(name + llen + 3, "0123456789abcdef") != nlen - llen - 3)
		return UINT32_MAX;
	return (uint32_t)res[1];
}

/* The build-id of library @lib from its codeId; its length, or 0. */
static size_t build_id_of(const struct merge *m, uint32_t lib, uint8_t *id)
{
	size_t len, i;
	const char *hex = view_strtab_at(
		&m->strs, (uint32_t)view_rectab_at(&m->libs, lib)[VLIB_CODE_ID], &len);

	if (len < 4 || len % 2 || len / 2 > FX_BUILD_ID_MAX)
		return 0;
	for (i = 0; i < len / 2; i++) {
		unsigned v;

		if (sscanf(hex + 2 * i, "%2x", &v) != 1 ||
		    !strchr("0123456789abcdef", hex[2 * i]) ||
		    !strchr("0123456789abcdef", hex[2 * i + 1]))
			return 0;
		id[i] = (uint8_t)v;
	}
	return len / 2;
}

/* The debug file of @id: under a debug dir, else from debuginfod. */
static int find_debug_file(const struct view_resym_opts *o, struct fx_debuginfod *d,
			   const uint8_t *id, size_t len, char *path, size_t cap)
{
	char hex[2 * FX_BUILD_ID_MAX + 1];
	int fd;

	fx_elf_hex(id, len, hex);
	for (size_t i = 0; i < o->ndebug_dirs; i++) {
		if (snprintf(path, cap, "%s/.build-id/%.2s/%s.debug", o->debug_dirs[i], hex,
			     hex + 2) < (int)cap &&
		    access(path, R_OK) == 0)
			return 0;
	}
	fd = fx_debuginfod_find(d, id, len, path, cap);
	if (fd < 0)
		return fd;
	close(fd);
	return 0;
}

/* The frames one result stands for, interned; @fr is the frame named. */
static int chain_of(struct merge *m, const uint64_t *fr, uint32_t res_idx, uint32_t lib,
		    const struct fx_sym_result *r, struct chain *ch)
{
	uint64_t rec[REC_MAX] = { 0 }, nsym;
	uint32_t name;

	name = view_strtab_add(&m->strs, r->sym_name, strlen(r->sym_name));
	rec[0] = lib;
	rec[1] = r->sym_addr;
	rec[2] = name;
	rec[3] = r->sym_size ? r->sym_size : NONE64;
	nsym = name == UINT32_MAX ? UINT32_MAX : view_rectab_add(&m->nsyms, rec);
	ch->v = calloc(r->n_frames, sizeof(*ch->v));
	if (nsym == UINT32_MAX || !ch->v)
		return -ENOMEM;
	for (uint32_t k = 0; k < r->n_frames; k++) {
		const struct fx_sym_frame *f = &r->frames[k];
		uint64_t func[REC_MAX] = { 0 };

		func[0] = view_strtab_add(&m->strs, f->name, strlen(f->name));
		func[1] = res_idx;
		memset(rec, 0, sizeof(rec));
		rec[FR_ADDR] = fr[FR_ADDR];
		rec[FR_DEPTH] = k;
		rec[FR_CAT] = fr[FR_CAT];
		rec[FR_FUNC] =
			func[0] == UINT32_MAX ? UINT32_MAX : view_rectab_add(&m->funcs, func);
		rec[FR_NSYM] = nsym;
		rec[FR_LINE] = f->line ? f->line : NONE64;
		if (rec[FR_FUNC] == UINT32_MAX ||
		    (ch->v[k] = view_rectab_add(&m->frames, rec)) == UINT32_MAX)
			return -ENOMEM;
	}
	ch->n = r->n_frames;
	return 0;
}

/* Names the unnamed frames of library @lib (@frames, @n of them). */
static int name_lib(struct merge *m, const struct view_resym_opts *o, struct fx_symbolizer *s,
		    struct fx_debuginfod *d, uint32_t lib, const uint32_t *frames, size_t n,
		    struct chain *chains, struct view_resym_stats *st)
{
	uint8_t id[FX_BUILD_ID_MAX];
	size_t id_len = build_id_of(m, lib, id);
	char path[PATH_MAX];
	uint64_t *addrs;
	struct fx_sym_result *out;
	int rc = 0;

	if (!n || !id_len || find_debug_file(o, d, id, id_len, path, sizeof(path)) < 0) {
		st->libs_missing++;
		return 0;
	}
	addrs = malloc(n * sizeof(*addrs));
	out = malloc(n * sizeof(*out));
	if (!addrs || !out) {
		free(addrs);
		free(out);
		return -ENOMEM;
	}
	for (size_t i = 0; i < n; i++)
		addrs[i] = (uint64_t)addr_of(view_rectab_at(&m->frames, frames[i]));
	struct fx_elf_source src = {
		.fd = -1, .path = path, .build_id = id, .build_id_len = id_len
	};

	if (fx_symbolizer_resolve(s, &src, addrs, n, out) < 0) {
		st->libs_missing++;
	} else {
		st->libs_named++;
		for (size_t i = 0; i < n && !rc; i++) {
			/* Copied: interning may move the frame table. */
			uint64_t fr[REC_MAX];
			const uint64_t *fn;

			if (!out[i].sym_name || out[i].no_symbol)
				continue;
			memcpy(fr, view_rectab_at(&m->frames, frames[i]), sizeof(fr));
			fn = view_rectab_at(&m->funcs, fr[FR_FUNC]);
			rc = chain_of(m, fr, (uint32_t)fn[1], lib, &out[i], &chains[frames[i]]);
			st->frames_named += !rc;
		}
	}
	free(addrs);
	free(out);
	return rc;
}

/* The stacks again, each frame replaced by its chain; samples follow. */
static int rebuild_stacks(struct merge *m, const struct chain *chains)
{
	struct rectab ns = { .width = 2 };
	uint32_t *map = malloc((m->stacks.n + 1) * sizeof(*map));

	if (!map)
		return -ENOMEM;
	for (size_t i = 0; i < m->stacks.n; i++) {
		const uint64_t *st = view_rectab_at(&m->stacks, i);
		uint64_t rec[REC_MAX] = { 0 }, prefix = st[1] == NONE64 ? NONE64 : map[st[1]];
		const struct chain *c = &chains[st[0]];
		uint32_t one = (uint32_t)st[0];
		const uint32_t *v = c->v ? c->v : &one;
		uint32_t k, n = c->v ? c->n : 1;

		for (k = 0; k < n; k++) {
			rec[0] = v[k];
			rec[1] = prefix;
			prefix = view_rectab_add(&ns, rec);
			if (prefix == UINT32_MAX) {
				free(map);
				view_rectab_free(&ns);
				return -ENOMEM;
			}
		}
		map[i] = (uint32_t)prefix;
	}
	for (size_t i = 0; i < m->nsamples; i++) {
		if (m->samples[i].stack != UINT32_MAX)
			m->samples[i].stack = map[m->samples[i].stack];
	}
	free(map);
	view_rectab_free(&m->stacks);
	m->stacks = ns;
	return 0;
}

static int by_lib(const void *a, const void *b, void *ctx)
{
	const uint32_t *lib_of = ctx, x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	if (lib_of[x] != lib_of[y])
		return lib_of[x] < lib_of[y] ? -1 : 1;
	return (x > y) - (x < y);
}

int view_resym(struct merge *m, const struct view_resym_opts *o, struct view_resym_stats *st)
{
	struct fx_symbolizer_opts so = { .debug_dirs = NULL, .rel_addrs = true };
	struct fx_debuginfod_opts dopts = { .urls = o->debuginfod_urls ? o->debuginfod_urls : "",
					    .timeout_ms = 30000 };
	struct fx_debuginfod *d = NULL;
	struct fx_symbolizer *s = NULL;
	struct chain *chains = NULL;
	uint32_t *order = NULL, *lib_of = NULL;
	size_t nf = m->frames.n, n = 0, i, j;
	int rc = -ENOMEM;

	memset(st, 0, sizeof(*st));
	if (!o->ndebug_dirs && !o->debuginfod_urls)
		return 0;
	if (o->debuginfod_urls) {
		fx_debuginfod_setenv(&dopts);
		d = fx_debuginfod_new(&dopts);
	}
	s = fx_symbolizer_new(&so);
	chains = calloc(nf + 1, sizeof(*chains));
	order = malloc((nf + 1) * sizeof(*order));
	lib_of = malloc((nf + 1) * sizeof(*lib_of));
	if (!s || !chains || !order || !lib_of)
		goto out;
	/* The unnamed frames, by library. */
	for (i = 0; i < nf; i++) {
		lib_of[i] = unnamed_lib(m, view_rectab_at(&m->frames, i));
		if (lib_of[i] != UINT32_MAX)
			order[n++] = (uint32_t)i;
	}
	st->frames_unnamed = n;
	qsort_r(order, n, sizeof(*order), by_lib, lib_of);
	fx_symbolizer_begin_batch(s);
	rc = 0;
	for (i = 0; i < n && !rc; i = j) {
		for (j = i; j < n && lib_of[order[j]] == lib_of[order[i]]; j++)
			;
		rc = name_lib(m, o, s, d, lib_of[order[i]], order + i, j - i, chains, st);
	}
	if (!rc && st->frames_named)
		rc = rebuild_stacks(m, chains);
out:
	for (i = 0; chains && i < nf; i++)
		free(chains[i].v);
	free(chains);
	free(order);
	free(lib_of);
	fx_symbolizer_free(s);
	fx_debuginfod_free(d);
	return rc;
}

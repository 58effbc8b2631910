/* SPDX-License-Identifier: MIT */
/* The batch resolver: the symbolizer's public functions (symbolize.h), and
 * the result of one offset from the function table and the DWARF, or a
 * "<base>+0x<offset>" fallback. */
#include "symbols_int.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fxagent/debuginfod.h"
#include "fxagent/elf.h"

/* The name of an address with no symbol: "<base>+0x<file offset>". Formatted
 * by hand: a cold batch of a stripped object names most of its addresses
 * so, and snprintf was a third of the cost of each. */
static const struct fx_sym_frame *fallback_frame(struct object *o, const char *base,
						 uint64_t offset)
{
	static const char digits[] = "0123456789abcdef";
	struct fx_sym_frame *fr = fx_arena_alloc(&o->res_mem, sizeof(*fr));
	size_t blen = strlen(base), n = 0;
	char hex[16], *name;

	if (!fr)
		return NULL;
	do {
		hex[n++] = digits[offset & 0xf];
		offset >>= 4;
	} while (offset);
	name = fx_arena_alloc(&o->res_mem, blen + 3 + n + 1);
	if (!name)
		return NULL;
	memcpy(name, base, blen);
	memcpy(name + blen, "+0x", 3);
	for (size_t i = 0; i < n; i++)
		name[blen + 3 + i] = hex[n - 1 - i];
	name[blen + 3 + n] = '\0';
	*fr = (struct fx_sym_frame){ .name = name };
	return fr;
}

static int fallback(struct object *o, uint64_t offset, struct fx_sym_result *r)
{
	const struct fx_sym_frame *fr = fallback_frame(o, o->base_name, offset);

	if (!fr)
		return -ENOMEM;
	r->sym_name = NULL;
	r->sym_addr = 0;
	r->sym_size = 0;
	r->n_frames = 1;
	r->frames = fr;
	return 0;
}

/* An address without a symbol in a function whose FDE @fde covers it: named
 * after the function's start, so its samples share one frame. */
static int fde_result(struct object *o, uint64_t offset, uint64_t svma, const struct fde_range *fde,
		      struct fx_sym_result *r)
{
	const struct fx_sym_frame *fr;
	uint64_t start_off;

	if (svma - fde->start > offset)
		return fallback(o, offset, r);
	start_off = offset - (svma - fde->start);
	if (o->fde_frame && o->fde_frame_off == start_off) {
		fr = o->fde_frame;
	} else {
		fr = fallback_frame(o, o->base_name, start_off);
		if (!fr)
			return -ENOMEM;
		o->fde_frame = fr;
		o->fde_frame_off = start_off;
	}
	r->sym_name = fr->name;
	r->sym_addr = fde->start - o->base;
	r->sym_size = fde->end - fde->start;
	r->no_symbol = true;
	r->n_frames = 1;
	r->frames = fr;
	return 0;
}

/* The result of @offset in @o into @r, its frames in @o's result arena: the
 * function table's name with the DWARF's inline chain and lines, or a
 * fallback. @src: the source asked for now (DWARF shed is read again
 * through it). Returns 0 or -ENOMEM. */
static int compute(struct fx_symbolizer *s, struct object *o, const struct fx_elf_source *src,
		   uint64_t offset, struct fx_sym_result *r)
{
	struct dw_level lv[MAX_INLINE_DEPTH];
	const struct func *f = NULL;
	const struct dfunc *df = NULL;
	struct fx_sym_frame *fr;
	const char *line_file = NULL, *name0 = NULL;
	uint32_t line = 0;
	uint64_t svma, fstart = 0, fsize = 0;
	size_t n = 0, i;

	memset(r, 0, sizeof(*r));
	if (o->err) {
		/* No program headers: the offset is the best address we have. */
		r->rel_addr = offset;
		return fallback(o, offset, r);
	}
	if (o->dw_released)
		sym_reattach_dwarf(s, o, src);
	else if (o->dw_parked)
		sym_unpark_dwarf(o);
	svma = s->rel_addrs ? o->base + offset : sym_offset_to_svma(o, offset);
	r->rel_addr = svma - o->base;
	name0 = sym_lookup_plt(o, svma, &fstart, &fsize);
	if (!name0 && (f = sym_lookup_func(o, svma)) != NULL) {
		name0 = sym_func_name(s, o, src, f);
		fstart = o->base + f->start;
		fsize = FUNC_SIZE(f);
	}
	if (o->dw)
		n = sym_dwarf_levels(s, o, svma, lv, &df, &line_file, &line);
	if (name0) {
		r->sym_name = name0;
		r->sym_addr = fstart - o->base;
		r->sym_size = fsize;
	} else if (n && lv[0].name) {
		name0 = lv[0].name;
		r->sym_name = name0;
		r->sym_addr = df->lo - o->base;
		r->sym_size = df->hi - df->lo;
	}
	if (!name0) {
		struct fde_range fde;

		return sym_lookup_fde(o, svma, &fde) ? fde_result(o, offset, svma, &fde, r)
						     : fallback(o, offset, r);
	}
	fr = fx_arena_alloc(&o->res_mem, (n ? n : 1) * sizeof(*fr));
	if (!fr)
		return -ENOMEM;
	if (!n) {
		fr[0] = (struct fx_sym_frame){ .name = name0, .file = line_file, .line = line };
		n = 1;
	} else {
		for (i = 0; i < n; i++) {
			fr[i] = (struct fx_sym_frame){
				.name = lv[i].name ? lv[i].name : "??",
				.file = lv[i].file,
				.line = lv[i].line,
			};
		}
		/* The symbol table's name is the fully qualified one. */
		fr[0].name = name0;
	}
	r->n_frames = (uint32_t)n;
	r->frames = fr;
	return 0;
}

struct fx_symbolizer *fx_symbolizer_new(const struct fx_symbolizer_opts *opts)
{
	static const char *const default_dirs[] = { "/usr/lib/debug", NULL };
	const char *const *dirs = opts && opts->debug_dirs ? opts->debug_dirs : default_dirs;
	struct fx_symbolizer *s;
	size_t n = 0, i;

	fx_elf_init();
	s = calloc(1, sizeof(*s));
	if (!s)
		return NULL;
	s->inflated_fd = -1;
	while (dirs[n])
		n++;
	s->debug_dirs = calloc(n + 1, sizeof(*s->debug_dirs));
	if (!s->debug_dirs)
		goto fail;
	for (i = 0; i < n; i++) {
		s->debug_dirs[i] = strdup(dirs[i]);
		if (!s->debug_dirs[i])
			goto fail;
	}
	if (opts) {
		s->no_demangle = opts->no_demangle;
		s->no_inline = opts->no_inline;
		s->dbgd = opts->debuginfod;
		s->rel_addrs = opts->rel_addrs;
	}
	s->max_bytes = opts && opts->max_bytes ? opts->max_bytes : DEFAULT_MAX_BYTES;
	s->inflated_min_bytes =
		opts && opts->inflate_min_bytes ? opts->inflate_min_bytes : DEFAULT_INFLATE_MIN;
	if (sym_inflated_setup(s, opts ? opts->cache_dir : NULL, opts ? opts->cache_max_bytes : 0))
		goto fail;
	return s;
fail:
	fx_symbolizer_free(s);
	return NULL;
}

void fx_symbolizer_free(struct fx_symbolizer *s)
{
	size_t i;

	if (!s)
		return;
	for (i = 0; i < s->n_objects; i++)
		sym_object_free(s, s->objects[i]);
	free(s->objects);
	if (s->debug_dirs) {
		for (i = 0; s->debug_dirs[i]; i++)
			free(s->debug_dirs[i]);
		free(s->debug_dirs);
	}
	if (s->inflated_fd >= 0)
		close(s->inflated_fd);
	free(s->cache_dir);
	free(s->name_buf);
	free(s);
}

int fx_symbolizer_resolve(struct fx_symbolizer *s, const struct fx_elf_source *src,
			  const uint64_t *offsets, size_t n, struct fx_sym_result *out)
{
	/* Last resort when even the fallback cannot be allocated. */
	static const struct fx_sym_frame oom_frame = { .name = "[unknown]" };
	struct object *o;
	uint64_t heap0 = 0, counted0 = 0, tables0 = 0, bound = s->max_bytes / DWARF_TABLES_SHARE;
	bool measuring = false, other_path;
	unsigned misses = 0;
	const char *base = sym_base_name_of(src->path);
	size_t i;

	o = sym_get_object(s, src);
	/* One build-id may be mapped at several paths: the object and its
	 * cached results are shared, but an address with no symbol is named
	 * after the path it was asked for. */
	other_path = o && strcmp(base, o->base_name) != 0;
	for (i = 0; i < n; i++) {
		const struct cached *c = NULL;
		size_t pos = SIZE_MAX;

		s->stats.lookups++;
		if (o)
			c = sym_cache_find(o, offsets[i], &pos);
		if (!c && o && !measuring) {
			/* Lookups that miss read DWARF: libdw's tables grow. */
			measuring = true;
			heap0 = sym_heap_bytes();
			counted0 = sym_object_bytes(o);
		}
		if (c) {
			s->stats.cache_hits++;
			out[i] = c->res;
		} else if (o && compute(s, o, src, offsets[i], &out[i]) == 0) {
			if (pos != SIZE_MAX)
				sym_cache_add(o, pos, offsets[i], &out[i]);
			if (!tables0)
				tables0 = heap0;
			/* libdw builds a whole CU's line table for one line, and
			 * a window's new addresses in libc touch 200 CUs: 14-18
			 * MiB of tables at once. Over the bound they go now,
			 * not at the end; the addresses come sorted, so a CU's
			 * table is seldom built twice. The bound doubles at each
			 * freeing: a single CU bigger than it (a C++ program's
			 * templates in one unit) is built a few times, not at
			 * every check. (mallinfo2 walks the arenas: asked every
			 * few misses.) */
			if (o->dw && ++misses % 8 == 0) {
				uint64_t h = sym_heap_bytes();

				if (h > tables0 && h - tables0 > bound) {
					sym_park_dwarf(s, o);
					s->stats.dwarf_tables_freed++;
					tables0 = sym_heap_bytes();
					bound *= 2;
				}
			}
		} else {
			out[i] = (struct fx_sym_result){ .n_frames = 1, .frames = &oom_frame };
		}
		if (!out[i].sym_name || out[i].no_symbol) {
			s->stats.unresolved++;
			if (other_path && out[i].frames != &oom_frame) {
				/* of the function's start, or of the address */
				uint64_t off =
					out[i].no_symbol
						? offsets[i] - (out[i].rel_addr - out[i].sym_addr)
						: offsets[i];
				const struct fx_sym_frame *fr = fallback_frame(o, base, off);

				if (fr) {
					out[i].frames = fr;
					if (out[i].no_symbol)
						out[i].sym_name = fr->name;
				}
			}
		}
	}
	if (measuring && o->dw) {
		/* What the heap grew by beyond what the object counts already
		 * (results, tables, sections read again) is libdw's. */
		int64_t grew = ((int64_t)sym_heap_bytes() - (int64_t)heap0) -
			       ((int64_t)sym_object_bytes(o) - (int64_t)counted0);

		if (grew > 0) {
			o->dw_bytes += (uint64_t)grew;
			s->dw_bytes += (uint64_t)grew;
		}
	}
	/* libdw's tables for these look-ups are not needed past them (the
	 * results are ours): one object's tables at a time, not a window's. */
	if (o && o->dw)
		sym_park_dwarf(s, o);
	/* Names are read in batches of one object: no fd held between. */
	if (o)
		sym_close_names(o);
	return o ? o->err : -ENOMEM;
}

void fx_symbolizer_begin_batch(struct fx_symbolizer *s)
{
	/* The last batch's results are no longer needed: make room. */
	sym_trim(s);
	s->batch++;
	fx_debuginfod_begin_batch(s->dbgd);
}

uint64_t fx_symbolizer_batch(const struct fx_symbolizer *s)
{
	return s->batch;
}

size_t fx_symbolizer_drop_idle(struct fx_symbolizer *s, uint64_t batch)
{
	size_t n = 0;

	for (size_t i = 0; i < s->n_objects;) {
		if (s->objects[i]->batch < batch) {
			sym_drop_object(s, i);
			s->stats.idle_dropped++;
			n++;
		} else {
			/* Kept. Its look-ups parked its DWARF already; whatever
			 * else libdw still holds for it goes too. */
			sym_park_dwarf(s, s->objects[i]);
			i++;
		}
	}
	sym_trim(s);
	return n;
}

void fx_symbolizer_get_stats(const struct fx_symbolizer *s, struct fx_symbolizer_stats *out)
{
	*out = s->stats;
	out->objects_held = s->n_objects;
	out->dwarf_bytes = s->dw_bytes;
	out->bytes = 0;
	out->fde_ranges = 0;
	out->fde_bytes = 0;
	out->dwarf_objects = 0;
	out->results = 0;
	out->results_bytes = 0;
	for (size_t i = 0; i < s->n_objects; i++) {
		const struct object *o = s->objects[i];

		out->bytes += sym_object_bytes(o);
		out->fde_ranges += o->n_fdes;
		out->fde_bytes += o->n_fdes * sizeof(*o->fde_starts);
		out->dwarf_objects += sym_holds_dwarf(o);
		out->results += o->n_cache;
		out->results_bytes += fx_arena_bytes(&o->res_mem) +
				      o->cap_cache * sizeof(*o->cache) +
				      fx_hashtab_bytes(&o->cache_index);
	}
}

const char *fx_sym_origin_name(enum fx_sym_origin o)
{
	switch (o) {
	case FX_SYM_STRIPPED:
		return "stripped";
	case FX_SYM_SYMTAB:
		return "symtab";
	case FX_SYM_DEBUG_FILE:
		return "debug file";
	case FX_SYM_DEBUGINFOD:
		return "debuginfod";
	case FX_SYM_UNREADABLE:
		break;
	}
	return "unreadable";
}

enum fx_sym_origin fx_symbolizer_origin(struct fx_symbolizer *s, const struct fx_elf_source *src,
					const char **debug_path)
{
	struct object *o = sym_get_object(s, src);

	*debug_path = o && !o->err ? o->debug_path : NULL;
	return o && !o->err ? o->origin : FX_SYM_UNREADABLE;
}

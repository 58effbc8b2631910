/* SPDX-License-Identifier: MIT */
/* What the symbolizer keeps: the objects, found by build-id or file
 * identity, each with its cache of results; their memory, and what goes
 * first when it is over the bounds (least recently used: DWARF, then whole
 * objects, never what the current batch uses). */
#include "symbols_int.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fxagent/hash.h"
#include "fxagent/log.h"
#include "fxagent/util.h"

static uint64_t cache_hash_at(const void *ctx, uint32_t i)
{
	return fx_mix64(((const struct object *)ctx)->cache[i].offset);
}

static bool cache_eq(const void *ctx, uint32_t i, const void *key)
{
	return ((const struct object *)ctx)->cache[i].offset == *(const uint64_t *)key;
}

/* The cached result of @offset, or NULL; *@pos gets the slot where
 * sym_cache_add() puts it, or SIZE_MAX when it cannot be cached (no memory). */
const struct cached *sym_cache_find(struct object *o, uint64_t offset, size_t *pos)
{
	uint32_t i;

	*pos = SIZE_MAX;
	if (fx_hashtab_reserve(&o->cache_index, o->n_cache + 1, cache_hash_at, o) < 0 ||
	    fx_grow(&o->cache, &o->cap_cache, o->n_cache + 1, sizeof(*o->cache)) < 0)
		return NULL;
	*pos = fx_hashtab_probe(&o->cache_index, fx_mix64(offset), cache_eq, o, &offset);
	i = fx_hashtab_at(&o->cache_index, *pos);
	return i == FX_HASHTAB_NONE ? NULL : &o->cache[i];
}

/* Caches @r for @offset in the slot sym_cache_find() gave, the cache unchanged since. */
void sym_cache_add(struct object *o, size_t pos, uint64_t offset, const struct fx_sym_result *r)
{
	o->cache[o->n_cache] = (struct cached){ .offset = offset, .res = *r };
	fx_hashtab_put(&o->cache_index, pos, (uint32_t)o->n_cache++);
}

static void cache_reset(struct object *o)
{
	free(o->cache);
	o->cache = NULL;
	o->n_cache = o->cap_cache = 0;
	fx_hashtab_free(&o->cache_index);
	fx_arena_free(&o->res_mem);
	o->fde_frame = NULL;
}

void sym_object_free(struct fx_symbolizer *s, struct object *o)
{
	if (!o)
		return;
	sym_release_dwarf(s, o);
	free(o->dw_path);
	free(o->debug_path);
	free(o->src_path);
	free(o->funcs);
	for (size_t i = 0; i < o->n_tabs; i++)
		free(o->tabs[i].copy);
	sym_close_names(o);
	free(o->named);
	fx_hashtab_free(&o->named_index);
	free(o->fde_starts);
	free(o->plt_names);
	free(o->loads);
	sym_pool_free(&o->strs);
	cache_reset(o);
	free(o->key);
	free(o->base_name);
	free(o);
}

/* Frees object @i; the last one takes its place. */
void sym_drop_object(struct fx_symbolizer *s, size_t i)
{
	sym_object_free(s, s->objects[i]);
	s->objects[i] = s->objects[--s->n_objects];
}

/* The base name of @path, as fallback frames show it. */
const char *sym_base_name_of(const char *path)
{
	const char *base = path ? strrchr(path, '/') : NULL;

	base = base ? base + 1 : path;
	return base && *base ? base : "unknown";
}

static char *make_key(const struct fx_elf_source *src, const struct stat *st)
{
	char buf[PATH_MAX + 128];
	char hex[2 * FX_BUILD_ID_MAX + 1];

	if (src->build_id && src->build_id_len && src->build_id_len <= FX_BUILD_ID_MAX) {
		fx_elf_hex(src->build_id, src->build_id_len, hex);
		snprintf(buf, sizeof(buf), "b:%s", hex);
	} else if (st) {
		/* Without a build-id the file identity tells versions of one path apart. */
		snprintf(buf, sizeof(buf), "p:%s:%llx:%llx:%lld:%lld", src->path ? src->path : "",
			 (unsigned long long)st->st_dev, (unsigned long long)st->st_ino,
			 (long long)st->st_mtime, (long long)st->st_size);
	} else {
		snprintf(buf, sizeof(buf), "p:%s", src->path ? src->path : "");
	}
	return strdup(buf);
}

struct object *sym_get_object(struct fx_symbolizer *s, const struct fx_elf_source *src)
{
	struct object *o;
	struct stat st;
	bool have_st = false;
	char *key;
	size_t i, victim;

	if (!(src->build_id && src->build_id_len)) {
		if (src->fd >= 0)
			have_st = fstat(src->fd, &st) == 0;
		else if (src->path)
			have_st = stat(src->path, &st) == 0;
	}
	key = make_key(src, have_st ? &st : NULL);
	if (!key)
		return NULL;
	for (i = 0; i < s->n_objects; i++) {
		o = s->objects[i];
		if (strcmp(o->key, key) != 0)
			continue;
		/* A failure is remembered for the same source only: the same
		 * build-id may be readable through another path or fd. */
		if (o->err &&
		    (o->from_fd != (src->fd >= 0) ||
		     strcmp(o->src_path ? o->src_path : "", src->path ? src->path : ""))) {
			sym_drop_object(s, i);
			break;
		}
		/* Read again, to ask debuginfod again or because a name could
		 * not be read from the file again, in a batch that has not
		 * used it yet (its results of this batch must stay). */
		if (o->batch != s->batch &&
		    (o->names_lost ||
		     (o->dbgd_again && fx_now_ns(CLOCK_MONOTONIC) >= o->dbgd_again_ns))) {
			sym_drop_object(s, i);
			break;
		}
		free(key);
		o->last_use = ++s->tick;
		/* Results from earlier batches may go now; this batch's stay. */
		if (o->batch != s->batch && o->n_cache >= MAX_RESULTS) {
			s->stats.results_evicted += o->n_cache;
			cache_reset(o);
		}
		o->batch = s->batch;
		return o;
	}
	o = calloc(1, sizeof(*o));
	if (!o) {
		free(key);
		return NULL;
	}
	o->key = key;
	o->dw_fd = -1;
	for (i = 0; i < NAMES_FILES; i++)
		o->name_fds[i] = -1;
	o->from_fd = src->fd >= 0;
	o->src_path = src->path ? strdup(src->path) : NULL;
	o->base_name = strdup(sym_base_name_of(src->path));
	if (!o->base_name) {
		sym_object_free(s, o);
		return NULL;
	}
	o->err = sym_load_object(s, o, src);
	if (o->err) {
		fx_log_errno(FX_LOG_DEBUG, -o->err, "symbolize: cannot read '%s'",
			     src->path ? src->path : "?");
		/* Keep the failure cached; drop half-built tables. */
		free(o->funcs);
		o->funcs = NULL;
		o->n_funcs = 0;
	}
	s->stats.objects++;
	if (s->n_objects >= MAX_OBJECTS) {
		/* The least recently used object that this batch has not used. */
		victim = sym_lru_object(s, false, true, NULL);
		if (victim != SIZE_MAX) {
			sym_drop_object(s, victim);
			s->stats.evicted++;
		}
	}
	if (s->n_objects == s->cap_objects) {
		size_t ncap = s->cap_objects ? s->cap_objects * 2 : 64;
		/* An array of pointers. NOLINTNEXTLINE(bugprone-sizeof-expression) */
		struct object **v = realloc(s->objects, ncap * sizeof(*v));

		if (!v) {
			sym_object_free(s, o);
			return NULL;
		}
		s->objects = v;
		s->cap_objects = ncap;
	}
	o->last_use = ++s->tick;
	o->batch = s->batch;
	s->objects[s->n_objects++] = o;
	return o;
}

/* Heap bytes @o holds: its tables and results, and its DWARF as measured
 * (dw_bytes). */
uint64_t sym_object_bytes(const struct object *o)
{
	uint64_t b = sizeof(*o) + o->n_funcs * sizeof(*o->funcs) +
		     o->n_fdes * sizeof(*o->fde_starts) + o->plt_slots * sizeof(*o->plt_names) +
		     fx_arena_bytes(&o->strs.mem) + o->strs.cap * sizeof(*o->strs.v) +
		     fx_hashtab_bytes(&o->strs.index) + fx_arena_bytes(&o->res_mem) +
		     o->cap_cache * sizeof(*o->cache) + fx_hashtab_bytes(&o->cache_index) +
		     o->n_loads * sizeof(*o->loads) + o->n_cus * sizeof(*o->cus) +
		     o->n_cu_ranges * sizeof(*o->cu_ranges) + o->dw_bytes +
		     o->cap_named * sizeof(*o->named) + fx_hashtab_bytes(&o->named_index);

	for (size_t i = 0; i < o->n_cus; i++)
		b += o->cus[i].n_funcs * sizeof(*o->cus[i].funcs);
	for (size_t i = 0; i < o->n_tabs; i++)
		b += o->tabs[i].copy ? o->tabs[i].size : 0;
	return b;
}

/* Back under max_bytes, least recently used first: debug sections go
 * before whole objects (tables and results are what lookups need most). */
void sym_trim(struct fx_symbolizer *s)
{
	uint64_t total = 0;

	for (size_t i = 0; i < s->n_objects; i++)
		total += sym_object_bytes(s->objects[i]);
	while (total > s->max_bytes && s->n_objects) {
		/* Objects with DWARF first, then by last use. */
		size_t v = sym_lru_object(s, true, false, NULL);
		uint64_t before;

		if (v != SIZE_MAX) {
			before = sym_object_bytes(s->objects[v]);
			sym_shed_dwarf(s, s->objects[v]);
			total -= before - sym_object_bytes(s->objects[v]);
		} else {
			v = sym_lru_object(s, false, false, NULL);
			total -= sym_object_bytes(s->objects[v]);
			sym_drop_object(s, v);
			s->stats.trimmed++;
		}
	}
}

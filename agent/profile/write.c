/* SPDX-License-Identifier: MIT */
/* The processed profile (v66) as JSON, streamed through fx_json from the
 * tables; the text itself is never held in memory. */
#include "fxagent/elf.h"
#include "fxagent/log.h"
#include "profile_int.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ---- writing ---- */

/* Seconds of @ms for gmtime_r(): a double past time_t's range does not
 * convert (fuzz_view). The last second of the year 9999 bounds it. */
static time_t wall_secs(double ms)
{
	return ms >= 0 && ms < 253402300800000.0 - 500 ? (time_t)(ms / 1000 + 0.5) : 0;
}

void fx_profile_wallclock(double start_ms, double end_ms, char *buf, size_t size)
{
	time_t a = wall_secs(start_ms), b = wall_secs(end_ms);
	struct tm ta, tb;
	char sa[32], sb[16];

	gmtime_r(&a, &ta);
	gmtime_r(&b, &tb);
	strftime(sa, sizeof(sa), "%Y-%m-%dT%H:%M:%SZ", &ta);
	strftime(sb, sizeof(sb), "%H:%M:%SZ", &tb);
	snprintf(buf, size, "%s - %s", sa, sb);
}

/* "45.1 s" or "820 ms" */
static void say_ms(char *buf, size_t size, double ms)
{
	if (ms >= 1000)
		snprintf(buf, size, "%.1f s", ms / 1000);
	else
		snprintf(buf, size, "%.0f ms", ms);
}

void fx_profile_offcpu_summary(const struct fx_profile_marker *m, char *buf, size_t size)
{
	char a[32], b[32], c[32];
	int n;

	say_ms(a, sizeof(a), m->wait_ms);
	say_ms(b, sizeof(b), m->unstacked_ms);
	say_ms(c, sizeof(c), m->lost_ms);
	n = snprintf(buf, size, "%" PRId64 " waits (%s)", m->waits, a);
	if (n >= 0 && (size_t)n < size && m->unstacked)
		n += snprintf(buf + n, size - (size_t)n,
			      "; %" PRId64 " of them (%s) over the budget, timed without their "
			      "own stacks: their time is on their threads' other waits in the "
			      "same state",
			      m->unstacked, b);
	if (n >= 0 && (size_t)n < size && m->waits_lost)
		snprintf(buf + n, size - (size_t)n, "; %" PRId64 " lost (%s, not shown)",
			 m->waits_lost, c);
}

int fx_profile_breakpad_id(const uint8_t *build_id, size_t len, char out[34])
{
	/* GUID layout: the first three fields (4, 2, 2 bytes) are little-endian. */
	static const uint8_t order[16] = { 3, 2, 1, 0, 5, 4, 7, 6, 8, 9, 10, 11, 12, 13, 14, 15 };
	static const char hex[] = "0123456789ABCDEF";

	if (!len || !build_id)
		return -EINVAL;
	for (size_t i = 0; i < 16; i++) {
		uint8_t b = order[i] < len ? build_id[order[i]] : 0;

		out[2 * i] = hex[b >> 4];
		out[2 * i + 1] = hex[b & 15];
	}
	out[32] = '0';
	out[33] = '\0';
	return 0;
}

static double ns_to_ms(uint64_t t, uint64_t start)
{
	return (double)(int64_t)(t - start) / 1e6;
}

static const char CATEGORIES_JSON[] =
	"[{\"name\":\"Other\",\"color\":\"grey\",\"subcategories\":[\"Other\"]},"
	"{\"name\":\"User\",\"color\":\"yellow\",\"subcategories\":[\"Other\"]},"
	"{\"name\":\"Kernel\",\"color\":\"orange\",\"subcategories\":[\"Other\"]}]";

static const char MARKER_SCHEMA_JSON[] =
	"[{\"name\":\"" SCHEMA_RECORDING "\","
	"\"chartLabel\":\"{marker.data.wallclock}\","
	"\"tableLabel\":\"{marker.data.wallclock}\","
	"\"tooltipLabel\":\"Window {marker.data.seq}: {marker.data.wallclock}\","
	"\"display\":[\"marker-chart\",\"marker-table\",\"timeline-overview\"],"
	"\"fields\":[{\"key\":\"wallclock\",\"label\":\"Wall clock\",\"format\":\"string\"},"
	"{\"key\":\"target\",\"label\":\"Target\",\"format\":\"string\"},"
	"{\"key\":\"seq\",\"label\":\"Window #\",\"format\":\"integer\"},"
	"{\"key\":\"samples\",\"label\":\"Samples\",\"format\":\"integer\"},"
	"{\"key\":\"lost\",\"label\":\"Lost samples\",\"format\":\"integer\"},"
	"{\"key\":\"truncated\",\"label\":\"Truncated stacks\",\"format\":\"integer\"}]},"
	"{\"name\":\"" SCHEMA_LOST "\","
	"\"tableLabel\":\"lost {marker.data.count}\","
	"\"tooltipLabel\":\"Lost samples: {marker.data.count}\","
	"\"display\":[\"marker-chart\",\"marker-table\",\"timeline-overview\"],"
	"\"fields\":[{\"key\":\"count\",\"label\":\"Lost samples\",\"format\":\"integer\"},"
	"{\"key\":\"note\",\"label\":\"Note\",\"format\":\"string\"}]},"
	"{\"name\":\"" SCHEMA_GAP "\","
	"\"chartLabel\":\"{marker.data.target}: {marker.data.missing} missing\","
	"\"tableLabel\":\"{marker.data.target}: no chunk for {marker.data.missing} windows\","
	"\"tooltipLabel\":\"No chunk of {marker.data.target} for about {marker.data.missing} "
	"windows\","
	"\"display\":[\"marker-chart\",\"marker-table\",\"timeline-overview\"],"
	"\"fields\":[{\"key\":\"target\",\"label\":\"Target\",\"format\":\"string\"},"
	"{\"key\":\"missing\",\"label\":\"Windows missing\",\"format\":\"integer\"}]},"
	"{\"name\":\"" SCHEMA_OFFCPU "\","
	"\"chartLabel\":\"{marker.data.summary}\","
	"\"tableLabel\":\"{marker.data.summary}\","
	"\"tooltipLabel\":\"Off-CPU waits: {marker.data.summary}\","
	"\"display\":[\"marker-chart\",\"marker-table\",\"timeline-overview\"],"
	"\"fields\":[{\"key\":\"summary\",\"label\":\"Summary\",\"format\":\"string\"},"
	"{\"key\":\"waits\",\"label\":\"Waits shown\",\"format\":\"integer\"},"
	"{\"key\":\"ms\",\"label\":\"Time of the waits shown\",\"format\":\"milliseconds\"},"
	"{\"key\":\"unstacked\",\"label\":\"Of them without their own stack\","
	"\"format\":\"integer\"},"
	"{\"key\":\"unstackedMs\",\"label\":\"Time of those without\","
	"\"format\":\"milliseconds\"},"
	"{\"key\":\"lost\",\"label\":\"Waits lost\",\"format\":\"integer\"},"
	"{\"key\":\"lostMs\",\"label\":\"Time lost\",\"format\":\"milliseconds\"}]}]";

void fx_profile_meta_common(struct fx_json *j, const char *product, double interval_ms,
			    double start_time_ms, double end_ms)
{
	fx_json_key_int(j, "version", 24);
	fx_json_key_int(j, "preprocessedProfileVersion", FX_PROFILE_VERSION);
	fx_json_key_double(j, "interval", interval_ms);
	fx_json_key_double(j, "startTime", start_time_ms);
	fx_json_key_int(j, "processType", 0);
	fx_json_key_string(j, "product", product);
	fx_json_key_int(j, "stackwalk", 1);
	fx_json_key_raw(j, "symbolicated", "true");
	fx_json_key_raw(j, "pausedRanges", "[]");
	fx_json_key_raw(j, "categories", CATEGORIES_JSON);
	fx_json_key_raw(j, "sampleUnits",
			"{\"time\":\"ms\",\"eventDelay\":\"ms\",\"threadCPUDelta\":\"\xc2\xb5s\"}");
	fx_json_key_raw(j, "usesOnlyOneStackType", "true");
	fx_json_key_raw(j, "sourceCodeIsNotOnSearchfox", "true");
	fx_json_key_raw(j, "markerSchema", MARKER_SCHEMA_JSON);
	fx_json_key_int(j, "profilingStartTime", 0);
	fx_json_key_double(j, "profilingEndTime", end_ms);
}

void fx_profile_no_sources(struct fx_json *j)
{
	fx_json_key_raw(
		j, "sources",
		"{\"length\":0,\"id\":[],\"filename\":[],\"startLine\":[],\"startColumn\":[],"
		"\"sourceMapURL\":[],\"content\":[]}");
	fx_json_key_raw(j, "sourceLocationTable",
			"{\"length\":0,\"source\":[],\"line\":[],\"column\":[]}");
}

void fx_profile_thread_head(struct fx_json *j, const char *name, const char *process_name,
			    bool main, const char *pid, int64_t tid)
{
	fx_json_key_string(j, "name", name);
	fx_json_key_string(j, "processName", process_name);
	fx_json_key_string(j, "processType", "default");
	fx_json_key_raw(j, "isMainThread", main ? "true" : "false");
	fx_json_key_string(j, "pid", pid);
	fx_json_key_int(j, "tid", tid);
	fx_json_key_int(j, "processStartupTime", 0);
	fx_json_key_raw(j, "processShutdownTime", "null");
	fx_json_key_int(j, "registerTime", 0);
	fx_json_key_raw(j, "unregisterTime", "null");
	fx_json_key_raw(j, "pausedRanges", "[]");
	fx_json_key_raw(j, "showMarkersInTimeline", "true");
}

void fx_profile_selected_thread(struct fx_json *j, size_t index)
{
	/* Without it the profiler takes the thread with the most CPU time,
	 * which it reads from threadCPUDelta: a track of few samples can win
	 * over a busier one, and an off-CPU track (no delta) over them all. */
	fx_json_key_array(j, "initialSelectedThreads");
	fx_json_uint(j, index);
	fx_json_array_end(j);
}

void fx_profile_extra_entry(struct fx_json *j, const char *label, const char *value)
{
	fx_json_object_begin(j);
	fx_json_key_string(j, "label", label);
	fx_json_key_string(j, "format", "string");
	fx_json_key_string(j, "value", value);
	fx_json_object_end(j);
}

/* Whether another of the libs is called as lib @i is (two python3.11 of two
 * installs; two builds of one path, one replaced under a running process):
 * their entries must not share a key. With @path, by name and path. */
static bool name_shared(const struct fx_profile_input *in, size_t i, bool path)
{
	const struct fx_profile_lib *l = &in->libs[i];

	for (size_t k = 0; k < in->nlibs; k++) {
		const struct fx_profile_lib *m = &in->libs[k];

		if (k == i || !m->symbols || !m->name || strcmp(m->name, l->name))
			continue;
		if (!path || (m->path && l->path && !strcmp(m->path, l->path)))
			return true;
	}
	return false;
}

/* Each library's source of names, as "name": "status" in meta.fxagent.symbols
 * (@extra false) or as entries of meta.extra (true): keyed by its name, by
 * "NAME (PATH)" where two libs share a name, and by "NAME (PATH, build-id
 * HEX)" where they share the path too. */
static void write_symbols(const struct fx_profile_input *in, struct fx_json *j, bool extra)
{
	for (size_t i = 0; i < in->nlibs; i++) {
		const struct fx_profile_lib *l = &in->libs[i];
		char key[PATH_MAX + 300], hex[2 * FX_BUILD_ID_MAX + 1] = "";
		const char *k = l->name;

		if (!l->symbols || !l->name)
			continue;
		if (l->path && name_shared(in, i, false)) {
			if (name_shared(in, i, true)) {
				if (l->build_id)
					fx_elf_hex(l->build_id,
						   l->build_id_len < FX_BUILD_ID_MAX
							   ? l->build_id_len
							   : FX_BUILD_ID_MAX,
						   hex);
				snprintf(key, sizeof(key), "%s (%s, build-id %s)", l->name, l->path,
					 hex[0] ? hex : "none");
			} else {
				snprintf(key, sizeof(key), "%s (%s)", l->name, l->path);
			}
			k = key;
		}
		if (extra)
			fx_profile_extra_entry(j, k, l->symbols);
		else
			fx_json_key_string(j, k, l->symbols);
	}
}

static void write_meta(const struct tables *t, struct fx_json *j)
{
	const struct fx_profile_input *in = t->in;
	const struct fx_profile_meta *m = &in->meta;

	fx_json_key(j, "meta");
	fx_json_object_begin(j);
	fx_profile_meta_common(j, m->product ? m->product : "fxagent", m->interval_ms,
			       m->start_time_ms,
			       m->end_ns > m->start_ns ? ns_to_ms(m->end_ns, m->start_ns) : 0);
	if (t->any_busy)
		fx_profile_selected_thread(j, t->written[t->busiest]);
	if (m->target) {
		/* For collectors: the chunk's identity in one place. */
		fx_json_key(j, "fxagent");
		fx_json_object_begin(j);
		fx_json_key_string(j, "target", m->target);
		fx_json_key_string(j, "host", m->host);
		fx_json_key_int(j, "seq", m->seq);
		if (m->window_ms)
			fx_json_key_int(j, "windowMs", (int64_t)m->window_ms);
		fx_json_key(j, "windowStart");
		fx_json_double(j, m->start_time_ms);
		fx_json_key(j, "windowEnd");
		fx_json_double(j, m->end_time_ms
					  ? m->end_time_ms
					  : m->start_time_ms +
						    (m->end_ns > m->start_ns
							     ? ns_to_ms(m->end_ns, m->start_ns)
							     : 0));
		fx_json_key_int(j, "samples", (int64_t)m->samples);
		fx_json_key_int(j, "lost", (int64_t)m->lost);
		fx_json_key_int(j, "truncated", (int64_t)m->truncated);
		fx_json_key_int(j, "droppedStacks", (int64_t)m->dropped);
		if (m->off_cpu) {
			fx_json_key(j, "offCpu");
			fx_json_object_begin(j);
			fx_json_key_int(j, "waits", (int64_t)m->waits);
			fx_json_key(j, "ms");
			fx_json_double(j, m->wait_ms);
			fx_json_key_int(j, "unstacked", (int64_t)m->waits_unstacked);
			fx_json_key(j, "unstackedMs");
			fx_json_double(j, m->waits_unstacked_ms);
			fx_json_key_int(j, "lost", (int64_t)m->waits_lost);
			fx_json_key(j, "lostMs");
			fx_json_double(j, m->waits_lost_ms);
			fx_json_object_end(j);
		}
		fx_json_key(j, "labels");
		fx_json_object_begin(j);
		for (size_t i = 0; i < m->nlabels; i++)
			fx_json_key_string(j, m->labels[i].key, m->labels[i].value);
		fx_json_object_end(j);
		fx_json_key(j, "symbols");
		fx_json_object_begin(j);
		write_symbols(in, j, false);
		fx_json_object_end(j);
		fx_json_object_end(j);
	}
	if (m->host || m->target) {
		/* meta.extra is what the profiler shows under "Profile Information". */
		fx_json_key_array(j, "extra");
		fx_json_object_begin(j);
		fx_json_key_string(j, "label", "fxagent");
		fx_json_key_array(j, "entries");
		if (m->host)
			fx_profile_extra_entry(j, "Host name", m->host);
		if (m->target)
			fx_profile_extra_entry(j, "Target", m->target);
		for (size_t i = 0; i < m->nlabels; i++)
			fx_profile_extra_entry(j, m->labels[i].key, m->labels[i].value);
		fx_json_array_end(j);
		fx_json_object_end(j);
		fx_json_object_begin(j);
		fx_json_key_string(j, "label", "Symbols");
		fx_json_key_array(j, "entries");
		write_symbols(in, j, true);
		fx_json_array_end(j);
		fx_json_object_end(j);
		fx_json_array_end(j);
	}
	fx_json_object_end(j);
}

static void write_libs(const struct fx_profile_input *in, struct fx_json *j)
{
	fx_json_key_array(j, "libs");
	for (size_t i = 0; i < in->nlibs; i++) {
		const struct fx_profile_lib *l = &in->libs[i];
		const char *name = l->name ? l->name : "";
		const char *path = l->path ? l->path : "";
		char code_id[2 * FX_BUILD_ID_MAX + 1] = "";
		char breakpad[34] = "";

		if (l->build_id && l->build_id_len) {
			size_t len = l->build_id_len < FX_BUILD_ID_MAX ? l->build_id_len
								       : FX_BUILD_ID_MAX;

			fx_elf_hex(l->build_id, len, code_id);
			fx_profile_breakpad_id(l->build_id, len, breakpad);
		}
		fx_json_object_begin(j);
		fx_json_key_string(j, "name", name);
		fx_json_key_string(j, "path", path);
		fx_json_key_string(j, "debugName", l->debug_name ? l->debug_name : name);
		fx_json_key_string(j, "debugPath", l->debug_path ? l->debug_path : path);
		fx_json_key_string(j, "arch", l->arch ? l->arch : "");
		fx_json_key_string(j, "breakpadId", breakpad);
		fx_json_key_string(j, "codeId", code_id);
		fx_json_object_end(j);
	}
	fx_json_array_end(j);
}

/* Opens a table object under @key with its length. */
static void table_begin(struct fx_json *j, const char *key, size_t length)
{
	fx_json_key(j, key);
	fx_json_object_begin(j);
	fx_json_key_int(j, "length", (int64_t)length);
}

/* A column under @key of the unsigned @value for i from 0 to @n - 1 (most
 * columns are one field of each entry of a table). */
#define UINT_COLUMN(j, key, n, value)                                                              \
	do {                                                                                       \
		fx_json_key_array(j, key);                                                         \
		for (size_t i = 0; i < (n); i++)                                                   \
			fx_json_uint(j, (value));                                                  \
		fx_json_array_end(j);                                                              \
	} while (0)

static void write_resources(const struct tables *t, struct fx_json *j)
{
	table_begin(j, "resourceTable", t->nres);
	UINT_COLUMN(j, "name", t->nres, t->res[i].name);
	fx_json_key_column(j, "host", t->nres, "null");
	UINT_COLUMN(j, "lib", t->nres, t->res[i].lib);
	fx_json_key_column(j, "type", t->nres, "1");
	fx_json_object_end(j);
}

static void write_native_symbols(const struct tables *t, struct fx_json *j)
{
	size_t n = t->nsym_keys.n;

	table_begin(j, "nativeSymbols", n);
	UINT_COLUMN(j, "libIndex", n, t->nsyms[i].lib);
	UINT_COLUMN(j, "address", n, t->nsyms[i].addr);
	UINT_COLUMN(j, "name", n, t->nsyms[i].name);
	fx_json_key_array(j, "functionSize");
	for (size_t i = 0; i < n; i++) {
		if (t->nsyms[i].size)
			fx_json_uint(j, t->nsyms[i].size);
		else
			fx_json_null(j);
	}
	fx_json_array_end(j);
	fx_json_object_end(j);
}

static void write_funcs(const struct tables *t, struct fx_json *j)
{
	size_t n = t->funcs.n;

	table_begin(j, "funcTable", n);
	UINT_COLUMN(j, "name", n, t->funcs.v[i].a);
	fx_json_key_column(j, "isJS", n, "false");
	fx_json_key_column(j, "relevantForJS", n, "false");
	fx_json_key_array(j, "resource");
	for (size_t i = 0; i < n; i++)
		fx_json_int(j, (int64_t)t->funcs.v[i].b - 1);
	fx_json_array_end(j);
	fx_json_key_column(j, "source", n, "null");
	fx_json_key_column(j, "lineNumber", n, "null");
	fx_json_key_column(j, "columnNumber", n, "null");
	fx_json_key_column(j, "originalLocation", n, "null");
	fx_json_object_end(j);
}

/* Profile frames of window frame i: frame_base[i] + inline level. */
static void write_frames(const struct tables *t, struct fx_json *j)
{
	const struct fx_profile_input *in = t->in;
	size_t nframes = in->window->nframes;

	table_begin(j, "frameTable", t->npframes);
	fx_json_key_array(j, "address");
	for (size_t i = 0; i < nframes; i++) {
		const struct fx_profile_frame *f = &in->frames[i];

		for (uint32_t k = 0; k < prof_level_count(f->sym); k++) {
			if (f->lib >= 0)
				fx_json_uint(j, f->sym->rel_addr);
			else
				fx_json_int(j, -1);
		}
	}
	fx_json_array_end(j);
	fx_json_key_array(j, "inlineDepth");
	for (size_t i = 0; i < nframes; i++) {
		for (uint32_t k = 0; k < prof_level_count(in->frames[i].sym); k++)
			fx_json_uint(j, k);
	}
	fx_json_array_end(j);
	fx_json_key_array(j, "category");
	for (size_t i = 0; i < nframes; i++) {
		for (uint32_t k = 0; k < prof_level_count(in->frames[i].sym); k++)
			fx_json_int(j, in->frames[i].category);
	}
	fx_json_array_end(j);
	fx_json_key_column(j, "subcategory", t->npframes, "0");
	UINT_COLUMN(j, "func", t->npframes, t->pframe_func[i]);
	fx_json_key_array(j, "nativeSymbol");
	for (size_t i = 0; i < nframes; i++) {
		for (uint32_t k = 0; k < prof_level_count(in->frames[i].sym); k++) {
			if (t->frame_nsym[i] >= 0)
				fx_json_int(j, t->frame_nsym[i]);
			else
				fx_json_null(j);
		}
	}
	fx_json_array_end(j);
	fx_json_key_column(j, "innerWindowID", t->npframes, "0");
	fx_json_key_array(j, "line");
	for (size_t i = 0; i < nframes; i++) {
		const struct fx_sym_result *r = in->frames[i].sym;

		for (uint32_t k = 0; k < prof_level_count(r); k++) {
			if (prof_level_line(r, k))
				fx_json_uint(j, prof_level_line(r, k));
			else
				fx_json_null(j);
		}
	}
	fx_json_array_end(j);
	fx_json_key_column(j, "column", t->npframes, "null");
	fx_json_key_column(j, "originalLocation", t->npframes, "null");
	fx_json_object_end(j);
}

/* Profile stacks of window stack i: stack_last[i] - n + 1 .. stack_last[i],
 * outermost inline level first, each the parent of the next. */
static void write_stacks(const struct tables *t, struct fx_json *j)
{
	const struct fx_profile_input *in = t->in;
	const struct fx_window *w = in->window;

	table_begin(j, "stackTable", t->npstacks);
	fx_json_key_array(j, "frame");
	for (size_t i = 0; i < w->nstacks; i++) {
		uint32_t f = w->stacks[i].frame;

		for (uint32_t k = 0; k < prof_level_count(in->frames[f].sym); k++)
			fx_json_uint(j, t->frame_base[f] + k);
	}
	fx_json_array_end(j);
	fx_json_key_array(j, "prefixOffset");
	for (size_t i = 0; i < w->nstacks; i++) {
		const struct fx_window_stack *s = &w->stacks[i];
		uint32_t n = prof_level_count(in->frames[s->frame].sym);
		uint32_t first = t->stack_last[i] - n + 1;

		if (s->parent == FX_NONE)
			fx_json_int(j, 0);
		else
			fx_json_uint(j, first - t->stack_last[s->parent]);
		for (uint32_t k = 1; k < n; k++)
			fx_json_int(j, 1);
	}
	fx_json_array_end(j);
	fx_json_object_end(j);
}

static void write_shared(const struct tables *t, struct fx_json *j)
{
	fx_json_key(j, "shared");
	fx_json_object_begin(j);
	fx_json_key_array(j, "stringArray");
	for (size_t i = 0; i < t->strs.n; i++)
		fx_json_string_n(j, t->strs.v[i].s, t->strs.v[i].len);
	fx_json_array_end(j);
	write_resources(t, j);
	write_native_symbols(t, j);
	write_funcs(t, j);
	write_frames(t, j);
	write_stacks(t, j);
	fx_profile_no_sources(j);
	fx_json_object_end(j);
}

static void write_markers(const struct tables *t, bool carrier, struct fx_json *j)
{
	const struct fx_profile_input *in = t->in;
	size_t n = carrier ? in->nmarkers : 0;

	table_begin(j, "markers", n);
	fx_json_key_array(j, "name");
	for (size_t i = 0; i < n; i++)
		fx_json_int(j, t->marker_name[in->markers[i].type]);
	fx_json_array_end(j);
	fx_json_key_array(j, "startTime");
	for (size_t i = 0; i < n; i++)
		fx_json_double(j, in->markers[i].start_ms);
	fx_json_array_end(j);
	fx_json_key_array(j, "endTime");
	for (size_t i = 0; i < n; i++) {
		if (in->markers[i].type == FX_MARKER_LOST)
			fx_json_null(j);
		else
			fx_json_double(j, in->markers[i].end_ms);
	}
	fx_json_array_end(j);
	fx_json_key_array(j, "phase");
	for (size_t i = 0; i < n; i++)
		fx_json_int(j, in->markers[i].type == FX_MARKER_LOST ? 0 : 1);
	fx_json_array_end(j);
	fx_json_key_column(j, "category", n, "0");
	fx_json_key_array(j, "data");
	for (size_t i = 0; i < n; i++) {
		const struct fx_profile_marker *m = &in->markers[i];

		fx_json_object_begin(j);
		if (m->type == FX_MARKER_LOST) {
			fx_json_key_string(j, "type", SCHEMA_LOST);
			fx_json_key_int(j, "count", m->count);
			if (m->outside_ms != 0) {
				char note[128];

				snprintf(note, sizeof(note),
					 "lost %.3f ms %s this window; counted at its %s",
					 m->outside_ms < 0 ? -m->outside_ms : m->outside_ms,
					 m->outside_ms < 0 ? "before" : "after",
					 m->outside_ms < 0 ? "start" : "end");
				fx_json_key_string(j, "note", note);
			}
		} else if (m->type == FX_MARKER_OFFCPU) {
			char sum[256];

			fx_profile_offcpu_summary(m, sum, sizeof(sum));
			fx_json_key_string(j, "type", SCHEMA_OFFCPU);
			fx_json_key_string(j, "summary", sum);
			fx_json_key_int(j, "waits", m->waits);
			fx_json_key(j, "ms");
			fx_json_double(j, m->wait_ms);
			fx_json_key_int(j, "unstacked", m->unstacked);
			fx_json_key(j, "unstackedMs");
			fx_json_double(j, m->unstacked_ms);
			fx_json_key_int(j, "lost", m->waits_lost);
			fx_json_key(j, "lostMs");
			fx_json_double(j, m->lost_ms);
		} else {
			fx_json_key_string(j, "type", SCHEMA_RECORDING);
			fx_json_key_string(j, "wallclock", m->text ? m->text : "");
			if (m->target)
				fx_json_key_string(j, "target", m->target);
			fx_json_key_int(j, "seq", m->seq);
			fx_json_key_int(j, "samples", m->count);
			fx_json_key_int(j, "lost", m->lost);
			fx_json_key_int(j, "truncated", m->truncated);
		}
		fx_json_object_end(j);
	}
	fx_json_array_end(j);
	fx_json_object_end(j);
}

static void write_thread(const struct tables *t, size_t idx, struct fx_json *j)
{
	const struct fx_profile_input *in = t->in;
	const struct fx_profile_thread *th = &in->threads[idx];
	const struct sample_ref *s = t->samples + t->thread_start[idx];
	size_t n = t->thread_start[idx + 1] - t->thread_start[idx];
	char pid[16];

	snprintf(pid, sizeof(pid), "%u", (unsigned int)th->pid);
	fx_json_object_begin(j);
	fx_profile_thread_head(j, th->name ? th->name : "",
			       th->process_name ? th->process_name : "",
			       th->tid == th->pid && !th->off_cpu, pid, th->tid);

	table_begin(j, "samples", n);
	fx_json_key_array(j, "stack");
	for (size_t i = 0; i < n; i++) {
		if (s[i].stack < in->window->nstacks)
			fx_json_uint(j, t->stack_last[s[i].stack]);
		else
			fx_json_null(j);
	}
	fx_json_array_end(j);
	/* Each sample's time after the one before (the first's after the
	 * profile's start), nanoseconds as milliseconds, exactly, without
	 * printf. Deltas, not times: at a 64-CPU host's rate the JSON is a
	 * tenth smaller and its gzip a quarter, for the same times. */
	fx_json_key_array(j, "timeDeltas");
	for (size_t i = 0; i < n; i++)
		fx_json_fixed(
			j, (int64_t)(s[i].time_ns - (i ? s[i - 1].time_ns : in->meta.start_ns)), 6);
	fx_json_array_end(j);
	if (th->off_cpu) {
		/* Each sample is a wait, weighted by the time it stands for:
		 * the call tree and the flame graph show milliseconds. */
		fx_json_key_array(j, "weight");
		for (size_t i = 0; i < n; i++)
			fx_json_fixed(j, (int64_t)s[i].wait_us, 3);
		fx_json_array_end(j);
		fx_json_key_string(j, "weightType", "tracing-ms");
		fx_json_object_end(j);
		write_markers(t, idx == t->marker_thread, j);
		fx_json_object_end(j);
		return;
	}
	fx_json_key_raw(j, "weight", "null");
	fx_json_key_string(j, "weightType", "samples");
	/* Each sample stands for one sampling interval of CPU time on this
	 * thread: this is what the profiler's CPU graph and columns show. */
	fx_json_key_array(j, "threadCPUDelta");
	if (n)
		fx_json_uint(j, 0);
	if (n > 1) {
		/* In whole nanoseconds: 315.657, not 315.65656565656565 (at a
		 * 64-CPU host's rate the 17 digits were half the JSON, and
		 * what gzip read). */
		char delta[40];
		int len = fx_json_format_double(
			delta, sizeof(delta), (double)llround(in->meta.interval_ms * 1e6) / 1000.0);

		for (size_t i = 1; i < n; i++) {
			if (len > 0)
				fx_json_raw(j, delta, (size_t)len);
			else
				fx_json_null(j);
		}
	}
	fx_json_array_end(j);
	fx_json_object_end(j);

	write_markers(t, idx == t->marker_thread, j);
	fx_json_object_end(j);
}

int fx_profile_write_json(const struct fx_profile_input *in, struct fx_json *j,
			  struct fx_profile_stats *stats)
{
	struct tables t = { .in = in };
	int rc = prof_build_tables(&t);

	if (rc < 0)
		goto out;
	fx_json_object_begin(j);
	write_meta(&t, j);
	write_libs(in, j);
	write_shared(&t, j);
	fx_json_key_array(j, "threads");
	for (size_t i = 0; i < in->nthreads; i++) {
		if (prof_thread_written(&t, i))
			write_thread(&t, i, j);
	}
	fx_json_array_end(j);
	fx_json_key_raw(j, "pages", "[]");
	fx_json_key_raw(j, "profilerOverhead", "[]");
	fx_json_key_raw(j, "counters", "[]");
	fx_json_object_end(j);
	rc = fx_json_error(j);
	if (rc < 0)
		goto out;
	if (stats)
		*stats = (struct fx_profile_stats){ .samples = t.nsamples, .threads = t.nwritten };
out:
	prof_tables_free(&t);
	return rc;
}

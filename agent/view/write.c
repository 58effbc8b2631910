/* SPDX-License-Identifier: MIT */
/* The merged profile as a processed profile (v66), streamed through fx_json
 * from the merge's tables: the same shape as a chunk (profile/write.c), with
 * weighted samples once folded, and tracks named by host when there are
 * several. */
#include "view_int.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fxagent/profile.h"

#define NONE64 UINT64_MAX

static void put_index(struct fx_json *j, uint64_t v)
{
	if (v == NONE64)
		fx_json_null(j);
	else
		fx_json_uint(j, v);
}

static double from_bits(uint64_t u)
{
	double d;

	memcpy(&d, &u, sizeof(d));
	return d;
}

static const char *str(const struct merge *m, uint64_t i)
{
	size_t len;

	return view_strtab_at(&m->strs, (uint32_t)i, &len);
}

/* @selected: the rank of the track the profiler selects first; SIZE_MAX:
 * its own choice. */
static void write_meta(const struct merge *m, size_t selected, struct fx_json *j)
{
	char hosts[32], samples[32], bucket[48];

	snprintf(hosts, sizeof(hosts), "%u", m->nhosts);
	snprintf(samples, sizeof(samples), "%llu", (unsigned long long)m->raw_samples);
	if (m->bucket_ms > 0)
		snprintf(bucket, sizeof(bucket), "%g s: samples of one stack folded",
			 m->bucket_ms / 1000);
	else
		snprintf(bucket, sizeof(bucket), "none: every sample as taken");
	fx_json_key_object(j, "meta");
	fx_profile_meta_common(j, "fxagent view", m->interval > 0 ? m->interval : 1000.0 / 99,
			       m->start, m->end > m->start ? m->end - m->start : 0);
	if (selected != SIZE_MAX)
		fx_profile_selected_thread(j, selected);
	fx_json_key_array(j, "extra");
	fx_json_object_begin(j);
	fx_json_key_string(j, "label", "fxagent view");
	fx_json_key_array(j, "entries");
	fx_profile_extra_entry(j, "Hosts", hosts);
	fx_profile_extra_entry(j, "Samples", samples);
	fx_profile_extra_entry(j, "Time buckets", bucket);
	fx_json_array_end(j);
	fx_json_object_end(j);
	fx_json_array_end(j);
	fx_json_object_end(j);
}

static void write_libs(const struct merge *m, struct fx_json *j)
{

	fx_json_key_array(j, "libs");
	for (size_t i = 0; i < m->libs.n; i++) {
		const uint64_t *l = view_rectab_at(&m->libs, i);

		fx_json_object_begin(j);
		for (int f = 0; f < VLIB_NFIELDS; f++)
			fx_json_key_string(j, vlib_keys[f], str(m, l[f]));
		fx_json_object_end(j);
	}
	fx_json_array_end(j);
}

/* Column @field of table @t, each value an index or null. */
static void index_column(struct fx_json *j, const char *key, const struct rectab *t, size_t field)
{
	fx_json_key_array(j, key);
	for (size_t i = 0; i < t->n; i++)
		put_index(j, view_rectab_at(t, i)[field]);
	fx_json_array_end(j);
}

static void table_begin(struct fx_json *j, const char *key, size_t n)
{
	fx_json_key_object(j, key);
	fx_json_key_int(j, "length", (int64_t)n);
}

static void write_frames(const struct merge *m, struct fx_json *j)
{
	const struct rectab *t = &m->frames;

	table_begin(j, "frameTable", t->n);
	fx_json_key_array(j, "address");
	for (size_t i = 0; i < t->n; i++)
		fx_json_int(j, (int64_t)from_bits(view_rectab_at(t, i)[0]));
	fx_json_array_end(j);
	index_column(j, "inlineDepth", t, 1);
	index_column(j, "category", t, 2);
	fx_json_key_array(j, "subcategory");
	for (size_t i = 0; i < t->n; i++)
		put_index(j, view_rectab_at(t, i)[2] == NONE64 ? NONE64 : 0);
	fx_json_array_end(j);
	index_column(j, "func", t, 3);
	index_column(j, "nativeSymbol", t, 4);
	fx_json_key_column(j, "innerWindowID", t->n, "0");
	index_column(j, "line", t, 5);
	fx_json_key_column(j, "column", t->n, "null");
	fx_json_key_column(j, "originalLocation", t->n, "null");
	fx_json_object_end(j);
}

static void write_shared(const struct merge *m, struct fx_json *j)
{
	fx_json_key_object(j, "shared");
	fx_json_key_array(j, "stringArray");
	for (size_t i = 0; i < m->strs.n; i++) {
		size_t len;
		const char *s = view_strtab_at(&m->strs, (uint32_t)i, &len);

		fx_json_string_n(j, s, len);
	}
	fx_json_array_end(j);

	table_begin(j, "resourceTable", m->res.n);
	index_column(j, "name", &m->res, 0);
	fx_json_key_column(j, "host", m->res.n, "null");
	index_column(j, "lib", &m->res, 1);
	fx_json_key_column(j, "type", m->res.n, "1");
	fx_json_object_end(j);

	table_begin(j, "nativeSymbols", m->nsyms.n);
	index_column(j, "libIndex", &m->nsyms, 0);
	index_column(j, "address", &m->nsyms, 1);
	index_column(j, "name", &m->nsyms, 2);
	index_column(j, "functionSize", &m->nsyms, 3);
	fx_json_object_end(j);

	table_begin(j, "funcTable", m->funcs.n);
	index_column(j, "name", &m->funcs, 0);
	fx_json_key_column(j, "isJS", m->funcs.n, "false");
	fx_json_key_column(j, "relevantForJS", m->funcs.n, "false");
	fx_json_key_array(j, "resource");
	for (size_t i = 0; i < m->funcs.n; i++) {
		uint64_t r = view_rectab_at(&m->funcs, i)[1];

		fx_json_int(j, r == NONE64 ? -1 : (int64_t)r);
	}
	fx_json_array_end(j);
	fx_json_key_column(j, "source", m->funcs.n, "null");
	fx_json_key_column(j, "lineNumber", m->funcs.n, "null");
	fx_json_key_column(j, "columnNumber", m->funcs.n, "null");
	fx_json_key_column(j, "originalLocation", m->funcs.n, "null");
	fx_json_object_end(j);

	write_frames(m, j);

	/* Parents were interned before their children: offsets are positive. */
	table_begin(j, "stackTable", m->stacks.n);
	index_column(j, "frame", &m->stacks, 0);
	fx_json_key_array(j, "prefixOffset");
	for (size_t i = 0; i < m->stacks.n; i++) {
		uint64_t p = view_rectab_at(&m->stacks, i)[1];

		fx_json_uint(j, p == NONE64 ? 0 : i - p);
	}
	fx_json_array_end(j);
	fx_json_object_end(j);
	fx_profile_no_sources(j);
	fx_json_object_end(j);
}

static void marker_data(const struct merge *m, const struct mmarker *mk, struct fx_json *j)
{
	char text[64];

	fx_json_object_begin(j);
	switch (mk->type) {
	case MM_WINDOW:
		fx_profile_wallclock(mk->start, mk->end, text, sizeof(text));
		fx_json_key_string(j, "type", FX_SCHEMA_RECORDING);
		fx_json_key_string(j, "wallclock", text);
		fx_json_key_string(j, "target", str(m, mk->target));
		fx_json_key_int(j, "seq", mk->seq);
		fx_json_key_int(j, "samples", mk->count);
		fx_json_key_int(j, "lost", mk->lost);
		fx_json_key_int(j, "truncated", mk->truncated);
		break;
	case MM_LOST:
		fx_json_key_string(j, "type", FX_SCHEMA_LOST);
		fx_json_key_int(j, "count", mk->count);
		break;
	case MM_GAP:
		fx_json_key_string(j, "type", FX_SCHEMA_GAP);
		fx_json_key_string(j, "target", str(m, mk->target));
		fx_json_key_int(j, "missing", mk->count);
		break;
	}
	fx_json_object_end(j);
}

/* The markers of host @host (all on one track of it), or none. */
static void write_markers(const struct merge *m, uint64_t host, bool carrier, struct fx_json *j)
{
	size_t n = 0;

	for (size_t i = 0; carrier && i < m->nmarkers; i++)
		n += m->markers[i].host == host;
	table_begin(j, "markers", n);
	fx_json_key_array(j, "name");
	for (size_t i = 0; n && i < m->nmarkers; i++) {
		if (m->markers[i].host == host)
			fx_json_uint(j, m->marker_name[m->markers[i].type]);
	}
	fx_json_array_end(j);
	fx_json_key_array(j, "startTime");
	for (size_t i = 0; n && i < m->nmarkers; i++) {
		if (m->markers[i].host == host)
			fx_json_double(j, m->markers[i].start - m->start);
	}
	fx_json_array_end(j);
	fx_json_key_array(j, "endTime");
	for (size_t i = 0; n && i < m->nmarkers; i++) {
		if (m->markers[i].host != host)
			continue;
		if (m->markers[i].type == MM_LOST)
			fx_json_null(j);
		else
			fx_json_double(j, m->markers[i].end - m->start);
	}
	fx_json_array_end(j);
	fx_json_key_array(j, "phase");
	for (size_t i = 0; n && i < m->nmarkers; i++) {
		if (m->markers[i].host == host)
			fx_json_int(j, m->markers[i].type == MM_LOST ? 0 : 1);
	}
	fx_json_array_end(j);
	fx_json_key_column(j, "category", n, "0");
	fx_json_key_array(j, "data");
	for (size_t i = 0; n && i < m->nmarkers; i++) {
		if (m->markers[i].host == host)
			marker_data(m, &m->markers[i], j);
	}
	fx_json_array_end(j);
	fx_json_object_end(j);
}

static void write_samples(const struct merge *m, const struct msample *s, size_t n, bool off_cpu,
			  struct fx_json *j)
{
	bool weighted = m->bucket_ms > 0;

	table_begin(j, "samples", n);
	fx_json_key_array(j, "stack");
	for (size_t i = 0; i < n; i++)
		put_index(j, s[i].stack == UINT32_MAX ? NONE64 : s[i].stack);
	fx_json_array_end(j);
	fx_json_key_array(j, "time");
	for (size_t i = 0; i < n; i++)
		fx_json_double(j, s[i].time - m->start);
	fx_json_array_end(j);
	if (off_cpu) {
		/* Waits: their weight is time, in milliseconds. */
		fx_json_key_array(j, "weight");
		for (size_t i = 0; i < n; i++)
			fx_json_double(j, (double)s[i].weight / 1000.0);
		fx_json_array_end(j);
		fx_json_key_string(j, "weightType", "tracing-ms");
		fx_json_object_end(j);
		return;
	}
	if (weighted) {
		fx_json_key_array(j, "weight");
		for (size_t i = 0; i < n; i++)
			fx_json_uint(j, s[i].weight);
		fx_json_array_end(j);
	} else {
		fx_json_key_raw(j, "weight", "null");
	}
	fx_json_key_string(j, "weightType", "samples");
	/* A sample is one interval of CPU time, a folded one its weight's. */
	fx_json_key_array(j, "threadCPUDelta");
	for (size_t i = 0; i < n; i++)
		fx_json_int(j, i ? llround(m->interval * 1000.0 * s[i].weight) : 0);
	fx_json_array_end(j);
	fx_json_object_end(j);
}

/* The track's pid: as recorded, with the host after it when there are
 * several (the same pid on two hosts is two processes); the host alone for
 * one track per host. */
static void track_ids(const struct merge *m, uint32_t t, size_t rank, char *pid, size_t size,
		      int64_t *tid)
{
	const uint64_t *key = view_rectab_at(&m->tracks, t);

	if (m->mode == FX_VIEW_MERGE_ALL || !*str(m, key[1])) {
		snprintf(pid, size, "%s", str(m, key[0]));
		*tid = (int64_t)rank;
		return;
	}
	if (m->nhosts > 1)
		snprintf(pid, size, "%s@%s", str(m, key[1]), str(m, key[0]));
	else
		snprintf(pid, size, "%s", str(m, key[1]));
	*tid = m->mode == FX_VIEW_MERGE_THREADS ? (int64_t)m->tinfo[t].tid
						: (int64_t)strtoll(str(m, key[1]), NULL, 10);
}

void view_track_process(const struct merge *m, uint32_t t, char *out, size_t size)
{
	const char *host = str(m, view_rectab_at(&m->tracks, t)[0]);

	if (m->nhosts > 1 && m->mode != FX_VIEW_MERGE_ALL)
		snprintf(out, size, "%s (%s)", str(m, m->tinfo[t].process_name), host);
	else
		snprintf(out, size, "%s", str(m, m->tinfo[t].process_name));
}

static void write_thread(const struct merge *m, size_t rank, bool carrier, const struct msample *s,
			 size_t n, struct fx_json *j)
{
	uint32_t t = m->order[rank];
	const struct mtrack *ti = &m->tinfo[t];
	char pid[600], pname[600];
	int64_t tid;

	track_ids(m, t, rank, pid, sizeof(pid), &tid);
	view_track_process(m, t, pname, sizeof(pname));
	fx_json_object_begin(j);
	fx_profile_thread_head(j, str(m, ti->name), pname, ti->main, pid, tid);
	write_samples(m, s, n, ti->off_cpu, j);
	write_markers(m, view_rectab_at(&m->tracks, t)[0], carrier, j);
	fx_json_object_end(j);
}

uint64_t *view_track_weights(const struct merge *m)
{
	uint64_t *weight = calloc(m->tracks.n + 1, sizeof(*weight));

	for (size_t i = 0; weight && i < m->nsamples; i++) {
		if (!m->tinfo[m->samples[i].track].off_cpu)
			weight[m->samples[i].track] += m->samples[i].weight;
	}
	return weight;
}

/* Each host's markers go on its on-CPU track with the most samples: the
 * profiler hides tracks with little CPU by default, and markers on a hidden
 * track are not in the marker chart. A host without one: its first track.
 * Fills @carrier (by rank), and @selected with the rank of the track with
 * the most on-CPU samples of all (SIZE_MAX: none has one). Returns 0 or
 * -ENOMEM. */
static int pick_carriers(const struct merge *m, bool *carrier, size_t *selected)
{
	size_t nt = m->tracks.n, first = 0;
	uint64_t *weight = view_track_weights(m), most = 0;

	if (!weight)
		return -ENOMEM;
	/* The track with the most on-CPU samples is the one selected first. */
	*selected = SIZE_MAX;
	for (size_t r = 0; r < nt; r++) {
		if (weight[m->order[r]] > most) {
			most = weight[m->order[r]];
			*selected = r;
		}
	}
	for (size_t r = 0; r < nt; r++) {
		uint64_t host = view_rectab_at(&m->tracks, m->order[r])[0];
		size_t best = first;

		if (r + 1 < nt && view_rectab_at(&m->tracks, m->order[r + 1])[0] == host)
			continue;
		/* tracks [first, r] are this host's */
		for (size_t k = first; k <= r; k++) {
			uint32_t t = m->order[k], b = m->order[best];

			if (m->tinfo[t].off_cpu)
				continue;
			if (m->tinfo[b].off_cpu || weight[t] > weight[b])
				best = k;
		}
		carrier[best] = true;
		first = r + 1;
	}
	free(weight);
	return 0;
}

int view_write_json(const struct merge *m, struct fx_json *j)
{
	size_t nt = m->tracks.n, next = 0, selected;
	bool *carrier = calloc(nt + 1, sizeof(*carrier));

	if (!carrier || pick_carriers(m, carrier, &selected) < 0) {
		free(carrier);
		return -ENOMEM;
	}
	fx_json_object_begin(j);
	write_meta(m, selected, j);
	write_libs(m, j);
	write_shared(m, j);
	fx_json_key_array(j, "threads");
	for (size_t r = 0; r < nt; r++) {
		uint32_t t = m->order[r];
		size_t first = next;

		while (next < m->nsamples && m->samples[next].track == t)
			next++;
		/* A track may have no sample left (all cut by --since): no
		 * samples at all leaves m->samples NULL, and NULL + 0 is
		 * undefined behaviour. */
		write_thread(m, r, carrier[r], m->samples ? m->samples + first : NULL, next - first,
			     j);
	}
	free(carrier);
	fx_json_array_end(j);
	fx_json_key_raw(j, "pages", "[]");
	fx_json_key_raw(j, "profilerOverhead", "[]");
	fx_json_key_raw(j, "counters", "[]");
	fx_json_object_end(j);
	return fx_json_error(j);
}

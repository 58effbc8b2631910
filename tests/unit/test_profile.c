/* SPDX-License-Identifier: MIT */
/* The profile writer on a small hand-made window: the output is read back
 * with jq (a test dependency) and linted with tests/tools/lint_profile.py. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "fxagent/profile.h"

#define START_NS 1000000000ULL
#define MS	 1000000ULL

enum { OBJ_APP = 10, OBJ_LIBC = 11 };
#define KADDR 0xffffffff81000010ULL

static const uint8_t app_id[] = { 0x51, 0x0d, 0x0a, 0x5c, 0x19, 0xea, 0xdf, 0x80, 0x43, 0xf2,
				  0x03, 0xb4, 0x52, 0x5b, 0xe9, 0xbe, 0x3d, 0xcb, 0x95, 0x54 };
static const uint8_t libc_id[] = { 0xf0, 0xfc, 0x29, 0x16, 0x5c, 0xbe, 0x60, 0x88, 0xc0, 0xe1,
				   0xad, 0xf0, 0x3b, 0x00, 0x48, 0xfb, 0xec, 0xbc, 0x00, 0x3a };

static const struct fx_profile_lib libs[] = {
	{ .name = "myapp",
	  .path = "/usr/bin/myapp",
	  .build_id = app_id,
	  .build_id_len = sizeof(app_id),
	  .arch = "x86_64" },
	{ .name = "libc.so.6",
	  .path = "/usr/lib/x86_64-linux-gnu/libc.so.6",
	  .build_id = libc_id,
	  .build_id_len = sizeof(libc_id),
	  .arch = "x86_64" },
	{ .name = "[kernel.kallsyms]", .path = "[kernel.kallsyms]", .arch = "x86_64" },
	{ .name = "libunused.so", .path = "/usr/lib/libunused.so", .arch = "x86_64" },
};

static const struct fx_sym_frame main_frames[] = { { "main", "app.c", 10 } };
static const struct fx_sym_frame main2_frames[] = { { "main", "app.c", 12 } };
static const struct fx_sym_frame compute_frames[] = { { "compute", "app.c", 20 },
						      { "helper_a", "app.c", 30 },
						      { "helper_b", "app.h", 42 } };
static const struct fx_sym_frame write_frames[] = { { "write", NULL, 0 } };
static const struct fx_sym_frame kernel_frames[] = { { "entry_SYSCALL_64", NULL, 0 } };
static const struct fx_sym_frame unknown_frames[] = { { "0x7fff0000", NULL, 0 } };

/* What each (object, address) of the window "resolves" to. */
static const struct fake_sym {
	uint32_t object;
	uint64_t addr;
	int32_t lib;
	enum fx_category cat;
	struct fx_sym_result res;
} fake_syms[] = {
	{ OBJ_APP,
	  0x1010,
	  0,
	  FX_CAT_USER,
	  { 0x1010, "main", 0x1000, 0x80, 1, false, main_frames } },
	{ OBJ_APP,
	  0x1020,
	  0,
	  FX_CAT_USER,
	  { 0x1020, "main", 0x1000, 0x80, 1, false, main2_frames } },
	{ OBJ_APP,
	  0x1150,
	  0,
	  FX_CAT_USER,
	  { 0x1150, "compute", 0x1100, 0x200, 3, false, compute_frames } },
	{ OBJ_LIBC,
	  0xf0010,
	  1,
	  FX_CAT_USER,
	  { 0xf0010, "write", 0xf0000, 0, 1, false, write_frames } },
	{ FX_OBJ_KERNEL,
	  KADDR,
	  2,
	  FX_CAT_KERNEL,
	  { 0x10, "entry_SYSCALL_64", 0, 0x40, 1, false, kernel_frames } },
	{ FX_OBJ_UNKNOWN,
	  0x7fff0000,
	  -1,
	  FX_CAT_USER,
	  { 0x7fff0000, NULL, 0, 0, 1, false, unknown_frames } },
};

static const struct fx_window_frame f_main = { OBJ_APP, 0x1010 };
static const struct fx_window_frame f_main2 = { OBJ_APP, 0x1020 };
static const struct fx_window_frame f_compute = { OBJ_APP, 0x1150 };
static const struct fx_window_frame f_write = { OBJ_LIBC, 0xf0010 };
static const struct fx_window_frame f_kernel = { FX_OBJ_KERNEL, KADDR };
static const struct fx_window_frame f_unknown = { FX_OBJ_UNKNOWN, 0x7fff0000 };

static const struct fx_profile_thread threads[] = {
	{ 1000, 1000, "myapp", "myapp", false },
	{ 1000, 1001, "worker", "myapp", false },
	{ 2000, 2000, "bad\xffname", "bad\xffname", false },
};

struct fixture {
	struct fx_window w;
	struct fx_profile_frame *frames;
	struct fx_profile_marker markers[3];
	struct fx_profile_input in;
};

static uint32_t stack_of(struct fx_window *w, const struct fx_window_frame *f, size_t n)
{
	uint32_t s = fx_window_intern_stack(w, f, n);

	assert_int_not_equal(s, FX_NONE);
	return s;
}

static void add_sample(struct fx_window *w, uint64_t t, uint32_t pid, uint32_t tid, uint32_t s)
{
	assert_int_equal(fx_window_add_sample(w, t, pid, tid, s), 0);
}

static int setup(void **state)
{
	const struct fx_window_frame s1[] = { f_main };
	const struct fx_window_frame s2[] = { f_main, f_compute };
	const struct fx_window_frame s3[] = { f_main, f_compute, f_write, f_kernel };
	const struct fx_window_frame s4[] = { f_main2 };
	const struct fx_window_frame s5[] = { f_unknown };
	struct fixture *fx = calloc(1, sizeof(*fx));
	uint32_t st1, st2, st3, st4, st5;

	assert_non_null(fx);
	fx_window_init(&fx->w, 0);
	st1 = stack_of(&fx->w, s1, 1);
	st2 = stack_of(&fx->w, s2, 2);
	st3 = stack_of(&fx->w, s3, 4);
	st4 = stack_of(&fx->w, s4, 1);
	st5 = stack_of(&fx->w, s5, 1);
	/* Arrival order, as several CPUs would deliver them: not sorted. */
	add_sample(&fx->w, START_NS + 3 * MS, 1000, 1000, st3);
	add_sample(&fx->w, START_NS + 1 * MS, 1000, 1000, st1);
	add_sample(&fx->w, START_NS + 2 * MS, 1000, 1001, st4);
	add_sample(&fx->w, START_NS + 2 * MS, 1000, 1000, st2);
	add_sample(&fx->w, START_NS + 5 * MS, 3000, 3000, st1); /* not listed */
	add_sample(&fx->w, START_NS + 4 * MS, 2000, 2000, FX_NONE);
	add_sample(&fx->w, START_NS + MS / 2, 2000, 2000, st5);
	add_sample(&fx->w, START_NS + 3 * MS / 2, 1000, 1001, st2);

	fx->frames = calloc(fx->w.nframes, sizeof(*fx->frames));
	assert_non_null(fx->frames);
	for (size_t i = 0; i < fx->w.nframes; i++) {
		const struct fake_sym *f = NULL;

		for (size_t k = 0; k < sizeof(fake_syms) / sizeof(fake_syms[0]); k++) {
			if (fake_syms[k].object == fx->w.frames[i].object &&
			    fake_syms[k].addr == fx->w.frames[i].addr)
				f = &fake_syms[k];
		}
		assert_non_null(f);
		fx->frames[i] = (struct fx_profile_frame){ f->lib, f->cat, &f->res };
	}
	fx->markers[0] = (struct fx_profile_marker){ .type = FX_MARKER_RECORDING,
						     .start_ms = 0,
						     .end_ms = 10,
						     .text = "12:00:00-12:00:10",
						     .count = 8,
						     .seq = 7,
						     .lost = 17,
						     .truncated = 3 };
	fx->markers[1] =
		(struct fx_profile_marker){ .type = FX_MARKER_LOST, .start_ms = 2.5, .count = 12 };
	/* Read after the window's end: counted at its end, and said so. */
	fx->markers[2] = (struct fx_profile_marker){
		.type = FX_MARKER_LOST, .start_ms = 10, .count = 5, .outside_ms = 9.784848
	};
	fx->in = (struct fx_profile_input){
		.meta = { .start_time_ms = 1767268800000.0,
			  .start_ns = START_NS,
			  .end_ns = START_NS + 10 * MS,
			  .interval_ms = 1000.0 / 99,
			  .product = "fxagent",
			  .host = "host1" },
		.window = &fx->w,
		.frames = fx->frames,
		.libs = libs,
		.nlibs = sizeof(libs) / sizeof(libs[0]),
		.threads = threads,
		.nthreads = sizeof(threads) / sizeof(threads[0]),
		.markers = fx->markers,
		.nmarkers = 3,
		.marker_thread = 0,
	};
	*state = fx;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *fx = *state;

	fx_window_release(&fx->w);
	free(fx->frames);
	free(fx);
	return 0;
}

struct membuf {
	char *data;
	size_t len, cap;
};

static int mem_write(void *ctx, const void *buf, size_t len)
{
	struct membuf *m = ctx;

	if (m->len + len + 1 > m->cap) {
		m->cap = (m->len + len + 1) * 2;
		m->data = realloc(m->data, m->cap);
		if (!m->data)
			return -ENOMEM;
	}
	memcpy(m->data + m->len, buf, len);
	m->len += len;
	m->data[m->len] = '\0';
	return 0;
}

static int fail_write(void *ctx, const void *buf, size_t len)
{
	(void)ctx;
	(void)buf;
	(void)len;
	return -EIO;
}

/* Writes the profile of @in to a temporary .json file; returns its malloc'ed path. */
static char *write_profile(const struct fx_profile_input *in, struct membuf *m,
			   struct fx_profile_stats *stats)
{
	struct fx_json *j = fx_json_new(mem_write, m);
	char *path = strdup("/tmp/fx-test-profile-XXXXXX.json");
	int fd;

	assert_non_null(j);
	assert_non_null(path);
	assert_int_equal(fx_profile_write_json(in, j, stats), 0);
	assert_int_equal(fx_json_finish(j), 0);
	fx_json_free(j);
	fd = mkstemps(path, 5);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, m->data, m->len), (ssize_t)m->len);
	close(fd);
	return path;
}

/* Runs @cmd and returns its whole stdout without the last newline. */
static char *run(const char *cmd)
{
	FILE *p = popen(cmd, "r");
	char *out = NULL;
	size_t len = 0;
	FILE *mem = open_memstream(&out, &len);
	char buf[4096];
	size_t n;

	assert_non_null(p);
	assert_non_null(mem);
	while ((n = fread(buf, 1, sizeof(buf), p)) > 0)
		fwrite(buf, 1, n, mem);
	fclose(mem);
	if (pclose(p) != 0)
		fail_msg("command failed: %s", cmd);
	if (len && out[len - 1] == '\n')
		out[len - 1] = '\0';
	return out;
}

/* jq -c @filter on @path; the filter must not contain single quotes. */
static void assert_jq(const char *path, const char *filter, const char *want)
{
	char *cmd, *got;

	assert_null(strchr(filter, '\''));
	assert_true(asprintf(&cmd, "jq -c '%s' %s", filter, path) > 0);
	got = run(cmd);
	if (strcmp(got, want))
		fail_msg("jq %s\n got: %s\nwant: %s", filter, got, want);
	free(got);
	free(cmd);
}

static void assert_lint_ok(const char *path)
{
	/* tests/tools beside FX_TEST_DATA (tests/data), which git may not create when empty. */
	const char *slash = strrchr(FX_TEST_DATA, '/');
	char *cmd, *got;

	assert_non_null(slash);
	assert_true(asprintf(&cmd, "python3 %.*s/tools/lint_profile.py %s",
			     (int)(slash - FX_TEST_DATA), FX_TEST_DATA, path) > 0);
	got = run(cmd);
	assert_non_null(strstr(got, "ok: "));
	free(got);
	free(cmd);
}

#define JQ_DEFS                                                                                    \
	".shared as $sh | $sh.frameTable as $f | "                                                 \
	"def fname($i): $sh.stringArray[$sh.funcTable.name[$f.func[$i]]]; "                        \
	"def path($s): [$s | recurse(if $sh.stackTable.prefixOffset[.] == 0 then empty "           \
	"else . - $sh.stackTable.prefixOffset[.] end)] | reverse "                                 \
	"| map(fname($sh.stackTable.frame[.])) | join(\";\"); "

static void test_breakpad_id(void **state)
{
	static const uint8_t short_id[] = { 1, 2, 3, 4, 5, 6, 7, 8 };
	char out[34];

	(void)state;
	assert_int_equal(fx_profile_breakpad_id(libc_id, sizeof(libc_id), out), 0);
	assert_string_equal(out, "1629FCF0BE5C8860C0E1ADF03B0048FB0");
	assert_int_equal(fx_profile_breakpad_id(app_id, sizeof(app_id), out), 0);
	assert_string_equal(out, "5C0A0D51EA1980DF43F203B4525BE9BE0");
	assert_int_equal(fx_profile_breakpad_id(short_id, sizeof(short_id), out), 0);
	assert_string_equal(out, "04030201060508070000000000000000"
				 "0");
	assert_int_equal(fx_profile_breakpad_id(app_id, 0, out), -EINVAL);
}

/* The window's wall-clock text: both ends on the second they are nearest to,
 * and a time no calendar date can hold (another host's chunk) as 1970. */
static void test_wallclock(void **state)
{
	const double start = 1795230600000.0; /* 2026-11-21 03:10:00 UTC */
	char out[48];

	(void)state;
	fx_profile_wallclock(start, start + 10000.0, out, sizeof(out));
	assert_string_equal(out, "2026-11-21T03:10:00Z - 03:10:10Z");
	fx_profile_wallclock(start - 0.0001, start + 9999.9999, out, sizeof(out));
	assert_string_equal(out, "2026-11-21T03:10:00Z - 03:10:10Z");
	fx_profile_wallclock(start + 400.0, start + 1600.0, out, sizeof(out));
	assert_string_equal(out, "2026-11-21T03:10:00Z - 03:10:02Z");
	fx_profile_wallclock(-1.0, 1e300, out, sizeof(out));
	assert_string_equal(out, "1970-01-01T00:00:00Z - 00:00:00Z");
	fx_profile_wallclock(253402300799000.0, 253402300799999.0, out, sizeof(out));
	assert_string_equal(out, "9999-12-31T23:59:59Z - 00:00:00Z");
}

static void test_profile_tables(void **state)
{
	struct fixture *fx = *state;
	struct fx_profile_stats stats;
	struct membuf m = { 0 };
	char *p = write_profile(&fx->in, &m, &stats);

	assert_int_equal(stats.samples, 7); /* the unlisted thread's sample is left out */
	assert_int_equal(stats.threads, 3);
	assert_lint_ok(p);

	/* A sample after the first stands for one interval of CPU (1000/99 ms),
	 * in microseconds to the nanosecond: short, and the same for each. */
	assert_jq(p,
		  "[.threads[].samples | select(.length > 1) | .threadCPUDelta | "
		  "(.[0], .[1:][])] | unique",
		  "[0,10101.01]");
	assert_jq(p,
		  "[.meta.version, .meta.preprocessedProfileVersion, .meta.profilingEndTime, "
		  ".meta.extra[0].entries[0].value, .meta.symbolicated]",
		  "[24,66,10,\"host1\",true]");
	assert_jq(p, "[.libs[] | [.name, .breakpadId, .codeId]]",
		  "[[\"myapp\",\"5C0A0D51EA1980DF43F203B4525BE9BE0\","
		  "\"510d0a5c19eadf8043f203b4525be9be3dcb9554\"],"
		  "[\"libc.so.6\",\"1629FCF0BE5C8860C0E1ADF03B0048FB0\","
		  "\"f0fc29165cbe6088c0e1adf03b0048fbecbc003a\"],"
		  "[\"[kernel.kallsyms]\",\"\",\"\"],[\"libunused.so\",\"\",\"\"]]");
	/* One resource per library in use, pointing back at it. */
	assert_jq(p,
		  ".shared as $sh | $sh.resourceTable as $r | [range($r.length) | "
		  "[$sh.stringArray[$r.name[.]], $r.lib[.], $r.type[.]]]",
		  "[[\"myapp\",0,1],[\"libc.so.6\",1,1],[\"[kernel.kallsyms]\",2,1]]");

	/* Inline levels: same address and native symbol, depths 0..2, own func and line. */
	assert_jq(p,
		  JQ_DEFS
		  "[range($f.length) | select(fname(.) | IN(\"compute\", \"helper_a\", "
		  "\"helper_b\")) | [fname(.), $f.inlineDepth[.], $f.address[.], "
		  "$sh.stringArray[$sh.nativeSymbols.name[$f.nativeSymbol[.]]], $f.line[.]]]",
		  "[[\"compute\",0,4432,\"compute\",20],[\"helper_a\",1,4432,\"compute\",30],"
		  "[\"helper_b\",2,4432,\"compute\",42]]");
	/* Two addresses in main: two frames, one func, one native symbol. */
	assert_jq(p,
		  JQ_DEFS
		  "[range($f.length) | select(fname(.) == \"main\") | "
		  "[$f.address[.], $f.func[.], $f.nativeSymbol[.], $f.line[.]]] "
		  "| [length, (map(.[1]) | unique | length), (map(.[2]) | unique | length), "
		  "map(.[0]), map(.[3])]",
		  "[2,1,1,[4112,4128],[10,12]]");
	assert_jq(p,
		  ".shared as $sh | $sh.nativeSymbols as $n | [range($n.length) | "
		  "[$sh.stringArray[$n.name[.]], $n.libIndex[.], $n.address[.], "
		  "$n.functionSize[.]]] | sort",
		  "[[\"compute\",0,4352,512],[\"entry_SYSCALL_64\",2,0,64],[\"main\",0,4096,128],"
		  "[\"write\",1,983040,null]]");
	/* The kernel frame belongs to the kernel lib; the unmapped one to nothing. */
	assert_jq(p,
		  JQ_DEFS "[range($f.length) | select(fname(.) | IN(\"entry_SYSCALL_64\", "
			  "\"0x7fff0000\")) | [fname(.), $f.category[.], $f.subcategory[.], "
			  "$f.address[.], $sh.funcTable.resource[$f.func[.]], $f.nativeSymbol[.]]]",
		  "[[\"entry_SYSCALL_64\",2,0,16,2,3],[\"0x7fff0000\",1,0,-1,-1,null]]");
	/* Parents come first; every window stack level is there once. */
	assert_jq(p,
		  ".shared.stackTable as $s | [$s.length, ([range($s.length) | "
		  "select($s.prefixOffset[.] > . or $s.prefixOffset[.] < 0)] | length)]",
		  "[8,0]");

	/* Samples, per thread, in time order, with their call paths. */
	assert_jq(p,
		  JQ_DEFS "[.threads[] | [.samples.stack[] | if . == null then null "
			  "else path(.) end]]",
		  "[[\"main\",\"main;compute;helper_a;helper_b\","
		  "\"main;compute;helper_a;helper_b;write;entry_SYSCALL_64\"],"
		  "[\"main;compute;helper_a;helper_b\",\"main\"],[\"0x7fff0000\",null]]");
	/* times 1, 2, 3; 1.5, 2; 0.5, 4 ms: each after the one before */
	assert_jq(p, "[.threads[].samples | [.length, .timeDeltas, .time, .weight, .weightType]]",
		  "[[3,[1,1,1],null,null,\"samples\"],[2,[1.5,0.5],null,null,\"samples\"],"
		  "[2,[0.5,3.5],null,null,\"samples\"]]");
	assert_jq(p, "[.threads[] | [.pid, .tid, .isMainThread, .name, .processName]]",
		  "[[\"1000\",1000,true,\"myapp\",\"myapp\"],[\"1000\",1001,false,\"worker\","
		  "\"myapp\"],"
		  "[\"2000\",2000,true,\"bad\xef\xbf\xbdname\",\"bad\xef\xbf\xbdname\"]]");
	/* The invalid byte itself never reaches the output. */
	assert_null(memchr(m.data, 0xff, m.len));

	/* Markers on the marker thread only, typed by the schemas in meta. */
	assert_jq(p, ".threads[0].markers | [.length, .startTime, .endTime, .phase, .data]",
		  "[3,[0,2.5,10],[10,null,null],[1,0,0],[{\"type\":\"FxRecording\","
		  "\"wallclock\":\"12:00:00-12:00:10\",\"seq\":7,\"samples\":8,\"lost\":17,"
		  "\"truncated\":3},"
		  "{\"type\":\"FxLostSamples\",\"count\":12},"
		  "{\"type\":\"FxLostSamples\",\"count\":5,"
		  "\"note\":\"lost 9.785 ms after this window; counted at its end\"}]]");
	assert_jq(p,
		  ". as $p | .threads[0].markers | [(.name | map($p.shared.stringArray[.])), "
		  "(.data | map(.type) | map(. as $t | $p.meta.markerSchema | map(.name) | "
		  "index($t) != null))]",
		  "[[\"Recording\",\"Lost samples\",\"Lost samples\"],[true,true,true]]");
	assert_jq(p, "[.threads[1:][] | .markers.length]", "[0,0]");
	/* The busiest track is the one the profiler selects first. */
	assert_jq(p, ".meta.initialSelectedThreads", "[0]");

	unlink(p);
	free(p);
	free(m.data);
}

/* meta.fxagent.symbols keys each library by its name; two of one name (a
 * python3.11 of Debian's, one of another install) by "NAME (PATH)", or the
 * second's status would hide the first's. */
static void test_symbols_shared_names(void **state)
{
	struct fixture *fx = *state;
	struct fx_profile_lib l[4];
	struct fx_profile_input in = fx->in;
	struct membuf m = { 0 };
	char *p;

	memcpy(l, libs, sizeof(l));
	l[0].name = "python3.11";
	l[0].path = "/usr/bin/python3.11";
	l[0].symbols = "stripped";
	l[1].symbols = "debug file";
	l[3].name = "python3.11";
	l[3].path = "/opt/py/bin/python3.11";
	l[3].symbols = "symtab";
	in.libs = l;
	in.meta.target = "web";
	p = write_profile(&in, &m, NULL);
	assert_jq(p, ".meta.fxagent.symbols",
		  "{\"python3.11 (/usr/bin/python3.11)\":\"stripped\",\"libc.so.6\":\"debug "
		  "file\",\"python3.11 (/opt/py/bin/python3.11)\":\"symtab\"}");
	unlink(p);
	free(p);
	free(m.data);

	/* Two builds at one path: one replaced under a running process by
	 * the other (a package upgrade). Keyed by build-id too. */
	static const uint8_t old_id[] = { 0xab, 0x01 }, new_id[] = { 0xcd, 0x02 };

	l[3].path = l[0].path;
	l[0].build_id = old_id;
	l[0].build_id_len = sizeof(old_id);
	l[0].symbols = "stripped (the file at its path was deleted or replaced since; named "
		       "from the build that ran)";
	l[3].build_id = new_id;
	l[3].build_id_len = sizeof(new_id);
	l[3].symbols = "stripped";
	memset(&m, 0, sizeof(m));
	p = write_profile(&in, &m, NULL);
	assert_jq(p, ".meta.fxagent.symbols | to_entries | map(.key + \": \" + .value[:8])",
		  "[\"python3.11 (/usr/bin/python3.11, build-id ab01): stripped\",\"libc.so.6: "
		  "debug fi\",\"python3.11 (/usr/bin/python3.11, build-id cd02): stripped\"]");
	assert_jq(p, ".meta.extra[1].entries | length", "3");
	unlink(p);
	free(p);
	free(m.data);
}

static void test_empty_window(void **state)
{
	struct fx_profile_input in = { 0 };
	struct fx_profile_stats stats;
	struct fx_window w;
	struct membuf m = { 0 };
	char *p;

	(void)state;
	fx_window_init(&w, 0);
	in.meta = (struct fx_profile_meta){ .start_ns = START_NS,
					    .end_ns = START_NS,
					    .interval_ms = 1000.0 / 99 };
	in.window = &w;
	in.threads = threads;
	in.nthreads = 1;
	p = write_profile(&in, &m, &stats);
	assert_int_equal(stats.samples, 0);
	assert_lint_ok(p);
	assert_jq(p,
		  "[.threads[0].samples.length, .shared.stackTable.length, .meta.product, "
		  "(.meta | has(\"extra\"))]",
		  "[0,0,\"fxagent\",false]");
	unlink(p);
	free(p);
	free(m.data);
	fx_window_release(&w);
}

/* A thread's off-CPU waits go to the entry listed with off_cpu, weighted in
 * milliseconds ("tracing-ms"), with no CPU delta; its CPU samples stay on
 * the other entry as they were; meta.fxagent.offCpu says what was counted. */
static void test_off_cpu_track(void **state)
{
	struct fixture *fx = *state;
	const struct fx_profile_thread two[] = {
		{ 1000, 1000, "myapp", "myapp", false },
		{ 1000, 1000, "myapp (off-CPU)", "myapp", true },
	};
	const struct fx_window_frame sleep[] = { f_main, f_write, f_kernel };
	struct fx_profile_stats stats;
	struct membuf m = { 0 };
	uint32_t st = stack_of(&fx->w, sleep, 3);
	char *p;

	assert_int_equal(fx_window_add_wait(&fx->w, START_NS + 6 * MS, 1000, 1000, st, 2500000), 0);
	/* rounded to a microsecond, at least one */
	assert_int_equal(fx_window_add_wait(&fx->w, START_NS + 7 * MS, 1000, 1000, st, 400), 0);
	fx->frames = realloc(fx->frames, fx->w.nframes * sizeof(*fx->frames));
	assert_non_null(fx->frames);
	fx->in.frames = fx->frames;
	fx->in.threads = two;
	fx->in.nthreads = 2;
	fx->in.meta.target = "system"; /* meta.fxagent is a chunk's */
	fx->in.meta.off_cpu = true;
	fx->in.meta.waits = fx->w.counters.waits;
	fx->in.meta.wait_ms = (double)fx->w.counters.wait_us / 1000.0;
	fx->in.meta.waits_unstacked = 1;
	fx->in.meta.waits_unstacked_ms = 2.5;
	fx->in.meta.waits_lost = 3;
	fx->in.meta.waits_lost_ms = 12.5;
	assert_int_equal(fx->w.counters.waits, 2);
	assert_int_equal(fx->w.counters.wait_us, 2501);
	p = write_profile(&fx->in, &m, &stats);
	assert_lint_ok(p);
	assert_jq(p,
		  "[.threads[] | [.name, .isMainThread, .samples.length, .samples.weight, "
		  ".samples.weightType, (.samples | has(\"threadCPUDelta\"))]]",
		  "[[\"myapp\",true,3,null,\"samples\",true],"
		  "[\"myapp (off-CPU)\",false,2,[2.5,0.001],\"tracing-ms\",false]]");
	assert_jq(p, JQ_DEFS "[.threads[1].samples.stack[] | path(.)]",
		  "[\"main;write;entry_SYSCALL_64\",\"main;write;entry_SYSCALL_64\"]");
	assert_jq(p, ".meta.fxagent.offCpu",
		  "{\"waits\":2,\"ms\":2.501,\"unstacked\":1,\"unstackedMs\":2.5,\"lost\":3,"
		  "\"lostMs\":12.5}");
	unlink(p);
	free(p);
	free(m.data);
}

/* reuse_threads: threads of one process and name share the track of the
 * first listed, on and off CPU each, samples in time order; a main thread
 * keeps its own track, and so does another process's thread of that name.
 * No sample is lost, and the busiest track is selected first. */
static void test_reuse_threads(void **state)
{
	struct fixture *fx = *state;
	const struct fx_profile_thread list[] = {
		{ 1000, 1000, "myapp", "myapp", false },
		{ 1000, 1001, "worker", "myapp", false },
		{ 1000, 1001, "worker (off-CPU)", "myapp", true },
		{ 1000, 1002, "worker", "myapp", false },
		{ 1000, 1002, "worker (off-CPU)", "myapp", true },
		{ 1000, 1003, "acceptor", "myapp", false },
		{ 2000, 2000, "worker", "other", false },
		{ 2000, 2001, "worker", "other", false },
	};
	const struct fx_window_frame s[] = { f_main, f_write };
	struct fx_profile_stats stats;
	struct membuf m = { 0 };
	uint32_t st = stack_of(&fx->w, s, 2);
	char *p;

	/* fixture: 1000/1001 at 1.5 and 2 ms; 1000/1000 at 1, 2, 3; 2000 at 0.5, 4 */
	add_sample(&fx->w, START_NS + 6 * MS, 1000, 1002, st);
	add_sample(&fx->w, START_NS + 7 * MS / 4, 1000, 1002, st);
	add_sample(&fx->w, START_NS + 5 * MS / 2, 1000, 1002, st);
	add_sample(&fx->w, START_NS + 7 * MS, 1000, 1003, st);
	add_sample(&fx->w, START_NS + 9 * MS, 2000, 2001, st);
	assert_int_equal(fx_window_add_wait(&fx->w, START_NS + 8 * MS, 1000, 1001, st, 2000000), 0);
	assert_int_equal(
		fx_window_add_wait(&fx->w, START_NS + 13 * MS / 2, 1000, 1002, st, 1000000), 0);
	fx->frames = realloc(fx->frames, fx->w.nframes * sizeof(*fx->frames));
	assert_non_null(fx->frames);
	fx->in.frames = fx->frames;
	fx->in.threads = list;
	fx->in.nthreads = sizeof(list) / sizeof(list[0]);
	fx->in.reuse_threads = true;
	p = write_profile(&fx->in, &m, &stats);
	assert_lint_ok(p);
	/* 14 samples listed (the fixture's 3000 is not), all written */
	assert_int_equal(stats.samples, 14);
	assert_int_equal(stats.threads, 6);
	assert_jq(p, "[.threads[] | [.name, .tid, .isMainThread, .samples.length]]",
		  "[[\"myapp\",1000,true,3],[\"worker\",1001,false,5],"
		  "[\"worker (off-CPU)\",1001,false,2],[\"acceptor\",1003,false,1],"
		  "[\"worker\",2000,true,2],[\"worker\",2001,false,1]]");
	/* the two workers' samples, one after the other in time */
	assert_jq(p, "[.threads[1, 2].samples.timeDeltas | [foreach .[] as $d (0; . + $d)]]",
		  "[[1.5,1.75,2,2.5,6],[6.5,8]]");
	assert_jq(p, JQ_DEFS "[.threads[1].samples.stack[] | path(.)]",
		  "[\"main;compute;helper_a;helper_b\",\"main;write\",\"main\",\"main;write\","
		  "\"main;write\"]");
	assert_jq(p, ".threads[2].samples.weight", "[1,2]");
	/* the busiest track: selected first, and it carries the markers */
	assert_jq(p, "[.meta.initialSelectedThreads, [.threads[].markers.length]]",
		  "[[1],[0,3,0,0,0,0]]");
	unlink(p);
	free(p);
	free(m.data);

	/* Off: a track per thread, the same samples. */
	fx->in.reuse_threads = false;
	m = (struct membuf){ 0 };
	p = write_profile(&fx->in, &m, &stats);
	assert_int_equal(stats.samples, 14);
	assert_int_equal(stats.threads, 8);
	assert_jq(p, "[[.threads[].samples.length], .meta.initialSelectedThreads]",
		  "[[3,2,1,3,1,1,2,1],[0]]");
	unlink(p);
	free(p);
	free(m.data);
}

static void test_bad_input_rejected(void **state)
{
	struct fixture *fx = *state;
	struct membuf m = { 0 };
	struct fx_json *j = fx_json_new(mem_write, &m);
	int32_t saved = fx->frames[0].lib;

	fx->frames[0].lib = 4; /* only 4 libs */
	assert_int_equal(fx_profile_write_json(&fx->in, j, NULL), -EINVAL);
	fx->frames[0].lib = saved;
	fx->in.marker_thread = 3;
	assert_int_equal(fx_profile_write_json(&fx->in, j, NULL), -EINVAL);
	fx->in.marker_thread = 0;
	fx_json_free(j);
	free(m.data);
}

static void test_sink_error_reported(void **state)
{
	struct fixture *fx = *state;
	struct fx_json *j = fx_json_new(fail_write, NULL);

	assert_int_equal(fx_profile_write_json(&fx->in, j, NULL), 0);
	assert_int_equal(fx_json_finish(j), -EIO);
	fx_json_free(j);
}

static int count_entries(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	int n = 0;

	assert_non_null(d);
	while ((e = readdir(d))) {
		if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
			n++;
	}
	closedir(d);
	return n;
}

static void test_write_file_gzip(void **state)
{
	struct fixture *fx = *state;
	char dir[] = "/tmp/fx-test-profile-XXXXXX";
	struct fx_profile_stats stats;
	unsigned char magic[2];
	char *path, *cmd, *got;
	const char *dump = getenv("FX_TEST_PROFILE_DUMP");
	struct stat st;
	int fd;

	assert_non_null(mkdtemp(dir));
	assert_true(asprintf(&path, "%s/chunk.json.gz", dir) > 0);
	assert_int_equal(fx_profile_write_file(&fx->in, path, &stats), 0);
	assert_int_equal(stat(path, &st), 0);
	assert_int_equal(stats.bytes, (uint64_t)st.st_size);
	assert_int_equal(stats.samples, 7);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	assert_true(fd >= 0);
	assert_int_equal(read(fd, magic, 2), 2);
	close(fd);
	assert_int_equal(magic[0], 0x1f);
	assert_int_equal(magic[1], 0x8b);
	/* No temporary file is left beside it. */
	assert_int_equal(count_entries(dir), 1);
	assert_lint_ok(path);
	assert_true(asprintf(&cmd, "gzip -dc %s | jq -c \"[.meta.version, (.threads | length)]\"",
			     path) > 0);
	got = run(cmd);
	assert_string_equal(got, "[24,3]");
	free(got);
	free(cmd);
	/* Overwriting an existing chunk replaces it whole. */
	assert_int_equal(fx_profile_write_file(&fx->in, path, &stats), 0);
	assert_int_equal(count_entries(dir), 1);
	if (dump)
		assert_int_equal(fx_profile_write_file(&fx->in, dump, NULL), 0);

	unlink(path);
	rmdir(dir);
	free(path);
}

static void test_write_file_error(void **state)
{
	struct fixture *fx = *state;

	assert_int_equal(fx_profile_write_file(&fx->in, "/nonexistent-fx-dir/chunk.json.gz", NULL),
			 -ENOENT);
}

/* "-" writes the gzip stream to stdout, and a failing stdout is reported. */
static void test_write_stdout(void **state)
{
	struct fixture *fx = *state;
	char path[] = "/tmp/fx-test-stdout-XXXXXX";
	struct fx_profile_stats stats;
	int saved = dup(STDOUT_FILENO), fd = mkstemp(path), full = open("/dev/full", O_WRONLY);
	char *cmd, *got;
	struct stat st;
	int rc;

	assert_true(saved >= 0 && fd >= 0 && full >= 0);
	fflush(stdout);
	dup2(fd, STDOUT_FILENO);
	rc = fx_profile_write_file(&fx->in, "-", &stats);
	dup2(full, STDOUT_FILENO);
	assert_int_equal(fx_profile_write_file(&fx->in, "-", NULL), -ENOSPC);
	dup2(saved, STDOUT_FILENO);
	close(saved);
	close(full);
	assert_int_equal(rc, 0);
	assert_int_equal(fstat(fd, &st), 0);
	assert_int_equal(stats.bytes, (uint64_t)st.st_size);
	close(fd);
	assert_true(asprintf(&cmd, "gzip -dc %s | jq -c .meta.version", path) > 0);
	got = run(cmd);
	assert_string_equal(got, "24");
	free(got);
	free(cmd);
	unlink(path);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_breakpad_id),
		cmocka_unit_test(test_wallclock),
		cmocka_unit_test_setup_teardown(test_profile_tables, setup, teardown),
		cmocka_unit_test_setup_teardown(test_symbols_shared_names, setup, teardown),
		cmocka_unit_test(test_empty_window),
		cmocka_unit_test_setup_teardown(test_off_cpu_track, setup, teardown),
		cmocka_unit_test_setup_teardown(test_reuse_threads, setup, teardown),
		cmocka_unit_test_setup_teardown(test_bad_input_rejected, setup, teardown),
		cmocka_unit_test_setup_teardown(test_sink_error_reported, setup, teardown),
		cmocka_unit_test_setup_teardown(test_write_file_gzip, setup, teardown),
		cmocka_unit_test_setup_teardown(test_write_file_error, setup, teardown),
		cmocka_unit_test_setup_teardown(test_write_stdout, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

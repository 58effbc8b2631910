/* SPDX-License-Identifier: MIT */
/* The chunk spool: names round-trip and bad ones are refused, a restart finds
 * pending chunks oldest first, the bounds drop the oldest and count them, and
 * a publisher and an uploader thread lose nothing. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "fxagent/spool.h"

struct fixture {
	char dir[64];	 /* the temporary directory, removed at teardown */
	char spool[128]; /* the spool directory inside it (created by open) */
	char buf[PATH_MAX];
};

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	return remove(path);
}

static int setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));

	if (!f)
		return -1;
	snprintf(f->dir, sizeof(f->dir), "/tmp/fxspool-test-XXXXXX");
	if (!mkdtemp(f->dir)) {
		free(f);
		return -1;
	}
	/* Two levels below: open creates the parents too. */
	snprintf(f->spool, sizeof(f->spool), "%s/a/spool", f->dir);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *f = *state;

	nftw(f->dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
	free(f);
	return 0;
}

static int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static struct fx_chunk_info make_info(int64_t start, int64_t end, int64_t seq, const char *target)
{
	struct fx_chunk_info info;

	memset(&info, 0, sizeof(info));
	info.start_ms = start;
	info.end_ms = end;
	info.seq = seq;
	fx_spool_new_id(&info);
	snprintf(info.target, sizeof(info.target), "%s", target);
	return info;
}

static void write_file(const char *path, size_t size)
{
	char block[512];
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);

	assert_true(fd >= 0);
	memset(block, 'x', sizeof(block));
	while (size) {
		size_t n = size < sizeof(block) ? size : sizeof(block);

		assert_int_equal(write(fd, block, n), (ssize_t)n);
		size -= n;
	}
	assert_int_equal(close(fd), 0);
}

/* Writes a chunk of @size bytes where the spool wants it and adds it. */
static void put_chunk(struct fx_spool *sp, const struct fx_chunk_info *info, size_t size)
{
	char path[PATH_MAX];

	assert_int_equal(fx_spool_path(sp, info, path, sizeof(path)), 0);
	write_file(path, size);
	assert_int_equal(fx_spool_add(sp, info), 0);
}

static bool exists_at(const char *dir, const char *name)
{
	char path[PATH_MAX];
	struct stat st;
	int n = snprintf(path, sizeof(path), "%s/%s", dir, name);

	assert_true(n > 0 && (size_t)n < sizeof(path));
	return stat(path, &st) == 0;
}

/* Where a chunk lives once added: fx_spool_path() names the incoming/ file
 * it is written to, the spool keeps it one directory up. */
static void spooled_path(struct fx_spool *sp, const struct fx_chunk_info *info, char *path,
			 size_t len)
{
	char *inc;

	assert_int_equal(fx_spool_path(sp, info, path, len), 0);
	inc = strstr(path, "/incoming/");
	assert_non_null(inc);
	memmove(inc, inc + strlen("/incoming"), strlen(inc + strlen("/incoming")) + 1);
}

static bool chunk_exists(struct fx_spool *sp, const struct fx_chunk_info *info)
{
	char path[PATH_MAX];
	struct stat st;

	spooled_path(sp, info, path, sizeof(path));
	return stat(path, &st) == 0;
}

static const char *base_name(const char *path)
{
	const char *s = strrchr(path, '/');

	return s ? s + 1 : path;
}

/* The regular files of @dir (not its subdirectories). */
static int count_files(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	struct stat st;
	int n = 0;

	assert_non_null(d);
	while ((de = readdir(d))) {
		if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
		    S_ISREG(st.st_mode))
			n++;
	}
	closedir(d);
	return n;
}

static void assert_info_equal(const struct fx_chunk_info *a, const struct fx_chunk_info *b)
{
	assert_true(a->start_ms == b->start_ms);
	assert_true(a->end_ms == b->end_ms);
	assert_true(a->seq == b->seq);
	assert_string_equal(a->id, b->id);
	assert_string_equal(a->target, b->target);
}

static struct fx_spool *open_spool(struct fixture *f, uint64_t max_bytes, uint64_t max_age_s)
{
	struct fx_spool_opts opts = { .directory = f->spool,
				      .max_bytes = max_bytes,
				      .max_age_s = max_age_s };
	struct fx_spool *sp = NULL;

	assert_int_equal(fx_spool_open(&opts, &sp), 0);
	assert_non_null(sp);
	return sp;
}

static void test_name_round_trip(void **state)
{
	static const char *targets[] = {
		"web",
		"a",
		"my-service.v2_prod",
		"--..__",
		"0123456789012345678901234567890123456789012345678901234567890123", /* 64 */
	};
	struct fixture *f = *state;
	struct fx_spool *sp = open_spool(f, 0, 0);

	for (size_t i = 0; i < sizeof(targets) / sizeof(targets[0]); i++) {
		struct fx_chunk_info in =
			make_info(1700000000000 + (int64_t)i, INT64_MAX, 0, targets[i]);
		struct fx_chunk_info out;
		char again[PATH_MAX];

		assert_int_equal(fx_spool_path(sp, &in, f->buf, sizeof(f->buf)), 0);
		assert_true(!strncmp(f->buf, f->spool, strlen(f->spool)));
		assert_int_equal(fx_spool_parse_name(base_name(f->buf), &out), 0);
		assert_info_equal(&in, &out);
		assert_int_equal(fx_spool_path(sp, &out, again, sizeof(again)), 0);
		assert_string_equal(again, f->buf);
	}
	/* A name read from disk gives back the same name. */
	{
		const char *name =
			"0-9223372036854775807-42-0123456789abcdef0123456789abcdef-t-1.json.gz";
		struct fx_chunk_info info;

		assert_int_equal(fx_spool_parse_name(name, &info), 0);
		assert_true(info.start_ms == 0);
		assert_true(info.end_ms == INT64_MAX);
		assert_true(info.seq == 42);
		assert_string_equal(info.id, "0123456789abcdef0123456789abcdef");
		assert_string_equal(info.target, "t-1");
		assert_int_equal(fx_spool_path(sp, &info, f->buf, sizeof(f->buf)), 0);
		assert_string_equal(base_name(f->buf), name);
	}
	fx_spool_free(sp);
}

static void test_bad_names(void **state)
{
	static const char *bad[] = {
		"",
		".json.gz",
		"1-2-3-0123456789abcdef0123456789abcdef-web",		      /* no suffix */
		"1-2-3-0123456789abcdef0123456789abcdef-web.json",	      /* suffix */
		"1-2-3-0123456789abcdef0123456789abcdef-web.json.gz.tmpAb12", /* temp */
		"1-2-0123456789abcdef0123456789abcdef-web.json.gz",	      /* no seq */
		"-1-2-3-0123456789abcdef0123456789abcdef-web.json.gz",	      /* sign */
		"+1-2-3-0123456789abcdef0123456789abcdef-web.json.gz",	      /* sign */
		"01-2-3-0123456789abcdef0123456789abcdef-web.json.gz",	      /* zero */
		"1--3-0123456789abcdef0123456789abcdef-web.json.gz",	      /* empty */
		"1-2-3 -0123456789abcdef0123456789abcdef-web.json.gz",	      /* space */
		"9223372036854775808-2-3-0123456789abcdef0123456789abcdef-web.json.gz",
		"1-2-99999999999999999999-0123456789abcdef0123456789abcdef-web.json.gz",
		"1-2-3-0123456789abcdef0123456789abcde-web.json.gz",	      /* 31 */
		"1-2-3-0123456789abcdef0123456789abcdef0-web.json.gz",	      /* 33 */
		"1-2-3-0123456789ABCDEF0123456789abcdef-web.json.gz",	      /* upper */
		"1-2-3-0123456789abcdeg0123456789abcdef-web.json.gz",	      /* not hex */
		"1-2-3-0123456789abcdef0123456789abcdef-.json.gz",	      /* empty */
		"1-2-3-0123456789abcdef0123456789abcdef.json.gz",	      /* none */
		"1-2-3-0123456789abcdef0123456789abcdef-a/b.json.gz",	      /* slash */
		"1-2-3-0123456789abcdef0123456789abcdef-../x.json.gz",	      /* escape */
		"../1-2-3-0123456789abcdef0123456789abcdef-web.json.gz",      /* dir */
		"1-2-3-0123456789abcdef0123456789abcdef-a b.json.gz",	      /* space */
		"1-2-3-0123456789abcdef0123456789abcdef-caf\xc3\xa9.json.gz", /* utf-8 */
		"1-2-3-0123456789abcdef0123456789abcdef-"
		"01234567890123456789012345678901234567890123456789012345678901234.json.gz", /* 65
											      */
	};
	struct fixture *f = *state;
	struct fx_chunk_info info, bad_info;
	struct fx_spool *sp;

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		memset(&info, 0x5a, sizeof(info));
		if (fx_spool_parse_name(bad[i], &info) != -EINVAL)
			fail_msg("accepted '%s'", bad[i]);
		/* Output parameters are written only on success. */
		assert_int_equal(((unsigned char *)&info)[0], 0x5a);
	}
	assert_int_equal(fx_spool_parse_name(NULL, &info), -EINVAL);

	/* The path of fields that would not make a valid name is refused. */
	sp = open_spool(f, 0, 0);
	bad_info = make_info(-5, 10, 0, "web");
	assert_int_equal(fx_spool_path(sp, &bad_info, f->buf, sizeof(f->buf)), -EINVAL);
	bad_info = make_info(5, 10, 0, "a/../../etc");
	assert_int_equal(fx_spool_path(sp, &bad_info, f->buf, sizeof(f->buf)), -EINVAL);
	bad_info = make_info(5, 10, 0, "");
	assert_int_equal(fx_spool_path(sp, &bad_info, f->buf, sizeof(f->buf)), -EINVAL);
	bad_info = make_info(5, 10, 0, "web");
	bad_info.id[3] = 'A';
	assert_int_equal(fx_spool_path(sp, &bad_info, f->buf, sizeof(f->buf)), -EINVAL);
	bad_info = make_info(5, 10, 0, "web");
	memset(bad_info.target, 'a', sizeof(bad_info.target)); /* no terminator */
	assert_int_equal(fx_spool_path(sp, &bad_info, f->buf, sizeof(f->buf)), -EINVAL);
	assert_int_equal(fx_spool_add(sp, &bad_info), -EINVAL);
	/* Too small a buffer is an error, not a cut path. */
	bad_info = make_info(5, 10, 0, "web");
	assert_int_equal(fx_spool_path(sp, &bad_info, f->buf, 20), -ENAMETOOLONG);
	fx_spool_free(sp);
}

/* The bytes of the regular files directly in @dir (chunks, not subdirs). */
static uint64_t dir_bytes(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	uint64_t n = 0;

	assert_non_null(d);
	while ((de = readdir(d))) {
		char path[PATH_MAX];
		struct stat st;

		snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
		if (stat(path, &st) == 0 && S_ISREG(st.st_mode))
			n += (uint64_t)st.st_size;
	}
	closedir(d);
	return n;
}

/* Chunks are written under incoming/ and moved in only once there is room:
 * the spool itself never holds more than max_bytes. An interrupted write
 * left in incoming/ is removed at open, a whole chunk there is kept. */
static void test_never_over_cap(void **state)
{
	struct fixture *f = *state;
	struct fx_spool *sp = open_spool(f, 1000, 0);
	struct fx_chunk_info whole = make_info(1, 2, 3, "w");
	struct fx_spool_stats st;
	char junk[PATH_MAX];

	for (int i = 0; i < 10; i++) {
		struct fx_chunk_info c = make_info(1000 * i, 1000 * i + 500, i, "a");
		char path[PATH_MAX];

		assert_int_equal(fx_spool_path(sp, &c, path, sizeof(path)), 0);
		write_file(path, 300);
		/* Written, not yet added: the spool is still within its cap. */
		assert_true(dir_bytes(f->spool) <= 1000);
		assert_int_equal(fx_spool_add(sp, &c), 0);
		assert_true(dir_bytes(f->spool) <= 1000);
	}
	fx_spool_get_stats(sp, &st);
	assert_int_equal(st.dropped, 7);
	assert_int_equal(st.pending, 3);
	/* A crash between writing and adding: */
	assert_int_equal(fx_spool_path(sp, &whole, f->buf, sizeof(f->buf)), 0);
	write_file(f->buf, 10);
	snprintf(junk, sizeof(junk), "%s/incoming/x.json.gz.tmpABCDEF", f->spool);
	write_file(junk, 10);
	fx_spool_free(sp);
	sp = open_spool(f, 1000, 0);
	fx_spool_get_stats(sp, &st);
	assert_int_equal(st.pending, 4); /* the whole chunk is back in line */
	assert_true(chunk_exists(sp, &whole));
	assert_false(exists_at(f->spool, "incoming/x.json.gz.tmpABCDEF"));
	fx_spool_free(sp);
}

static void test_open_existing(void **state)
{
	struct fixture *f = *state;
	/* Oldest first by end, then start, then seq; created out of order. */
	struct fx_chunk_info c[5] = {
		make_info(1000, 2000, 7, "a"), make_info(1500, 2000, 8, "b"),
		make_info(1500, 2000, 9, "a"), make_info(2000, 3000, 1, "a"),
		make_info(100, 5000, 2, "z"),
	};
	static const int create_order[5] = { 4, 2, 0, 3, 1 };
	struct fx_spool_stats st;
	struct fx_chunk_info got;
	struct fx_spool *sp;
	char tmpname[PATH_MAX + 16];

	/* A first open creates the directories. */
	sp = open_spool(f, 0, 0);
	assert_true(exists_at(f->spool, "rejected"));
	for (int i = 0; i < 5; i++) {
		assert_int_equal(fx_spool_path(sp, &c[create_order[i]], f->buf, sizeof(f->buf)), 0);
		write_file(f->buf, 100 + (size_t)create_order[i]);
	}
	/* What fx_profile_write_file leaves when it is cut short. */
	snprintf(tmpname, sizeof(tmpname), "%s.tmpQx81aZ", f->buf);
	write_file(tmpname, 50);
	snprintf(f->buf, sizeof(f->buf), "%s/notes.txt", f->spool);
	write_file(f->buf, 10);
	snprintf(f->buf, sizeof(f->buf), "%s/other.tmp1234", f->spool);
	write_file(f->buf, 10);
	fx_spool_free(sp);

	sp = open_spool(f, 0, 0);
	assert_false(exists_at(f->spool, base_name(tmpname)));
	assert_true(exists_at(f->spool, "notes.txt"));
	assert_true(exists_at(f->spool, "other.tmp1234"));
	fx_spool_get_stats(sp, &st);
	assert_int_equal(st.pending, 5);
	assert_int_equal(st.bytes, 100 + 101 + 102 + 103 + 104);
	assert_int_equal(st.dropped, 0);
	for (int i = 0; i < 5; i++) {
		char expect[PATH_MAX];

		assert_int_equal(fx_spool_peek(sp, &got, f->buf, sizeof(f->buf)), 1);
		assert_info_equal(&got, &c[i]);
		spooled_path(sp, &c[i], expect, sizeof(expect));
		assert_string_equal(f->buf, expect);
		assert_int_equal(fx_spool_done(sp, &got), 0);
	}
	assert_int_equal(fx_spool_peek(sp, &got, f->buf, sizeof(f->buf)), 0);
	/* Only the unrelated files are left. */
	assert_int_equal(count_files(f->spool), 2);
	fx_spool_free(sp);
}

static void test_add_peek_done_reject(void **state)
{
	struct fixture *f = *state;
	int64_t t = 1700000000000;
	struct fx_chunk_info a = make_info(t, t + 10000, 1, "web");
	struct fx_chunk_info b = make_info(t + 10000, t + 20000, 2, "web");
	struct fx_chunk_info c = make_info(t + 20000, t + 30000, 3, "db");
	struct fx_chunk_info got, ghost = make_info(t, t + 1, 0, "web");
	struct fx_spool_stats st;
	struct fx_spool *sp = open_spool(f, 0, 0);

	assert_int_equal(fx_spool_peek(sp, &got, f->buf, sizeof(f->buf)), 0);
	put_chunk(sp, &b, 200);
	put_chunk(sp, &c, 300);
	/* Added late, it is still the oldest. */
	put_chunk(sp, &a, 100);
	assert_int_equal(fx_spool_peek(sp, &got, f->buf, sizeof(f->buf)), 1);
	assert_info_equal(&got, &a);
	/* Peeking does not take it. */
	assert_int_equal(fx_spool_peek(sp, &got, NULL, 0), 1);
	assert_info_equal(&got, &a);

	assert_int_equal(fx_spool_done(sp, &a), 0);
	assert_false(chunk_exists(sp, &a));
	assert_int_equal(fx_spool_peek(sp, &got, NULL, 0), 1);
	assert_info_equal(&got, &b);

	assert_int_equal(fx_spool_reject(sp, &b), 0);
	assert_false(chunk_exists(sp, &b));
	snprintf(f->buf, sizeof(f->buf), "%s/rejected", f->spool);
	assert_int_equal(count_files(f->buf), 1);
	assert_int_equal(fx_spool_peek(sp, &got, NULL, 0), 1);
	assert_info_equal(&got, &c);

	/* Chunks that are not pending, or files that are not there. */
	assert_int_equal(fx_spool_done(sp, &a), -ENOENT);
	assert_int_equal(fx_spool_reject(sp, &ghost), -ENOENT);
	assert_int_equal(fx_spool_add(sp, &ghost), -ENOENT);

	/* Rewritten and added again: one chunk, its new size. */
	put_chunk(sp, &c, 350);
	fx_spool_get_stats(sp, &st);
	assert_int_equal(st.added, 3);
	assert_int_equal(st.pending, 1);
	assert_int_equal(st.bytes, 350);
	put_chunk(sp, &c, 300);

	fx_spool_get_stats(sp, &st);
	assert_int_equal(st.added, 3);
	assert_int_equal(st.uploaded, 1);
	assert_int_equal(st.rejected, 1);
	assert_int_equal(st.pending, 1);
	assert_int_equal(st.bytes, 300);
	assert_int_equal(st.dropped, 0);
	fx_spool_free(sp);

	/* A restart finds what was pending, not what was rejected. */
	sp = open_spool(f, 0, 0);
	fx_spool_get_stats(sp, &st);
	assert_int_equal(st.pending, 1);
	assert_int_equal(st.bytes, 300);
	assert_int_equal(fx_spool_peek(sp, &got, NULL, 0), 1);
	assert_info_equal(&got, &c);
	/* A chunk file that vanished under the spool can still be forgotten. */
	spooled_path(sp, &c, f->buf, sizeof(f->buf));
	assert_int_equal(unlink(f->buf), 0);
	assert_int_equal(fx_spool_done(sp, &c), 0);
	assert_int_equal(fx_spool_peek(sp, &got, NULL, 0), 0);
	fx_spool_free(sp);
}

static void test_max_bytes(void **state)
{
	struct fixture *f = *state;
	struct fx_chunk_info c[10], got;
	struct fx_spool_stats st;
	struct fx_spool *sp = open_spool(f, 1000, 0);

	for (int i = 0; i < 10; i++) {
		c[i] = make_info(1000 * i, 1000 * (i + 1), i, "web");
		put_chunk(sp, &c[i], 300);
		fx_spool_get_stats(sp, &st);
		assert_true(st.bytes <= 1000);
	}
	fx_spool_get_stats(sp, &st);
	assert_int_equal(st.added, 10);
	assert_int_equal(st.pending, 3);
	assert_int_equal(st.bytes, 900);
	assert_int_equal(st.dropped, 7);
	assert_int_equal(st.dropped_bytes, 2100);
	for (int i = 0; i < 10; i++)
		assert_int_equal(chunk_exists(sp, &c[i]), i >= 7);
	assert_int_equal(fx_spool_peek(sp, &got, NULL, 0), 1);
	assert_info_equal(&got, &c[7]);
	fx_spool_free(sp);

	/* A lower bound at the next start drops the oldest right away. */
	sp = open_spool(f, 600, 0);
	fx_spool_get_stats(sp, &st);
	assert_int_equal(st.pending, 2);
	assert_int_equal(st.bytes, 600);
	assert_int_equal(st.dropped, 1);
	assert_int_equal(st.dropped_bytes, 300);
	assert_false(chunk_exists(sp, &c[7]));
	assert_int_equal(fx_spool_peek(sp, &got, NULL, 0), 1);
	assert_info_equal(&got, &c[8]);
	fx_spool_free(sp);
}

static void test_chunk_larger_than_cap(void **state)
{
	struct fixture *f = *state;
	struct fx_chunk_info small1 = make_info(0, 1000, 0, "web");
	struct fx_chunk_info small2 = make_info(1000, 2000, 1, "web");
	struct fx_chunk_info huge = make_info(2000, 3000, 2, "web");
	struct fx_spool_stats st;
	struct fx_spool *sp = open_spool(f, 1000, 0);

	put_chunk(sp, &small1, 300);
	put_chunk(sp, &small2, 300);
	put_chunk(sp, &huge, 1500);
	/* It goes alone: the older chunks are not sacrificed for it. */
	assert_false(chunk_exists(sp, &huge));
	assert_true(chunk_exists(sp, &small1));
	assert_true(chunk_exists(sp, &small2));
	fx_spool_get_stats(sp, &st);
	assert_int_equal(st.added, 3);
	assert_int_equal(st.pending, 2);
	assert_int_equal(st.bytes, 600);
	assert_int_equal(st.dropped, 1);
	assert_int_equal(st.dropped_bytes, 1500);
	fx_spool_free(sp);

	/* The same at open: a big file left by an earlier run with a larger bound. */
	sp = open_spool(f, 0, 0);
	assert_int_equal(fx_spool_path(sp, &huge, f->buf, sizeof(f->buf)), 0);
	fx_spool_free(sp);
	write_file(f->buf, 1500);
	sp = open_spool(f, 1000, 0);
	assert_false(chunk_exists(sp, &huge));
	fx_spool_get_stats(sp, &st);
	assert_int_equal(st.pending, 2);
	assert_int_equal(st.dropped, 1);
	assert_int_equal(st.dropped_bytes, 1500);
	fx_spool_free(sp);
}

static void test_max_age(void **state)
{
	struct fixture *f = *state;
	int64_t now = now_ms();
	struct fx_chunk_info old = make_info(now - 7260000, now - 7200000, 1, "web");
	struct fx_chunk_info fresh = make_info(now - 60000, now, 2, "web");
	struct fx_chunk_info older = make_info(now - 10860000, now - 10800000, 0, "web");
	struct fx_chunk_info soon_old, later, got;
	struct fx_spool_stats st;
	struct fx_spool *sp;

	sp = open_spool(f, 0, 0);
	put_chunk(sp, &old, 100);
	put_chunk(sp, &fresh, 100);
	fx_spool_free(sp);

	/* At open: two hours old with a one-hour bound. */
	sp = open_spool(f, 0, 3600);
	assert_false(chunk_exists(sp, &old));
	assert_true(chunk_exists(sp, &fresh));
	fx_spool_get_stats(sp, &st);
	assert_int_equal(st.pending, 1);
	assert_int_equal(st.dropped, 1);
	assert_int_equal(st.dropped_bytes, 100);
	/* At add: a chunk already too old goes at once. */
	put_chunk(sp, &older, 200);
	assert_false(chunk_exists(sp, &older));
	fx_spool_get_stats(sp, &st);
	assert_int_equal(st.pending, 1);
	assert_int_equal(st.dropped, 2);
	assert_int_equal(st.dropped_bytes, 300);
	assert_int_equal(fx_spool_peek(sp, &got, NULL, 0), 1);
	assert_info_equal(&got, &fresh);
	fx_spool_free(sp);

	/* At add: a pending chunk that aged meanwhile goes too. */
	sp = open_spool(f, 0, 1);
	now = now_ms();
	soon_old = make_info(now - 1000, now - 500, 3, "web");
	put_chunk(sp, &soon_old, 100);
	assert_true(chunk_exists(sp, &soon_old));
	usleep(700 * 1000);
	now = now_ms();
	later = make_info(now - 100, now, 4, "web");
	put_chunk(sp, &later, 100);
	assert_false(chunk_exists(sp, &soon_old));
	assert_true(chunk_exists(sp, &later));
	fx_spool_free(sp);
}

static void test_rejected_bounded(void **state)
{
	struct fixture *f = *state;
	struct fx_chunk_info c[4];
	char rejdir[PATH_MAX], other[PATH_MAX + 16];
	struct fx_spool_stats st;
	struct fx_spool *sp = open_spool(f, 1000, 0);

	snprintf(rejdir, sizeof(rejdir), "%s/rejected", f->spool);
	snprintf(other, sizeof(other), "%s/README", rejdir);
	write_file(other, 5000);
	for (int i = 0; i < 4; i++) {
		c[i] = make_info(1000 * i, 1000 * (i + 1), i, "web");
		put_chunk(sp, &c[i], 400);
		assert_int_equal(fx_spool_reject(sp, &c[i]), 0);
	}
	/* The two newest fit under max_bytes; a file that is not a chunk stays. */
	assert_int_equal(count_files(rejdir), 3);
	for (int i = 0; i < 4; i++) {
		assert_int_equal(fx_spool_path(sp, &c[i], f->buf, sizeof(f->buf)), 0);
		assert_int_equal(exists_at(rejdir, base_name(f->buf)), i >= 2);
	}
	assert_true(exists_at(rejdir, "README"));
	fx_spool_get_stats(sp, &st);
	assert_int_equal(st.rejected, 4);
	assert_int_equal(st.pending, 0);
	assert_int_equal(st.dropped, 0);
	fx_spool_free(sp);
}

/* A pending chunk dropped for the bounds while the uploader holds it. */
static void test_done_after_drop(void **state)
{
	struct fixture *f = *state;
	struct fx_chunk_info a = make_info(0, 1000, 0, "web");
	struct fx_chunk_info b = make_info(1000, 2000, 1, "web");
	struct fx_chunk_info got;
	struct fx_spool_stats st;
	struct fx_spool *sp = open_spool(f, 500, 0);

	put_chunk(sp, &a, 300);
	assert_int_equal(fx_spool_peek(sp, &got, NULL, 0), 1);
	put_chunk(sp, &b, 300);
	assert_int_equal(fx_spool_done(sp, &got), -ENOENT);
	assert_int_equal(fx_spool_reject(sp, &got), -ENOENT);
	fx_spool_get_stats(sp, &st);
	assert_int_equal(st.uploaded, 0);
	assert_int_equal(st.dropped, 1);
	assert_int_equal(st.pending, 1);
	assert_true(chunk_exists(sp, &b));
	fx_spool_free(sp);
}

#define RACE_CHUNKS 1000

struct race {
	struct fx_spool *sp;
	int failures;
	int uploaded;
	bool producer_done;
	pthread_mutex_t lock; /* failures, producer_done */
};

static void race_fail(struct race *r)
{
	pthread_mutex_lock(&r->lock);
	r->failures++;
	pthread_mutex_unlock(&r->lock);
}

static void *producer(void *arg)
{
	struct race *r = arg;
	char path[PATH_MAX], tmp[PATH_MAX + 8];

	for (int i = 0; i < RACE_CHUNKS; i++) {
		struct fx_chunk_info info = make_info(i * 1000, (i + 1) * 1000, i, "race");
		int fd;

		/* Written and renamed into place like fx_profile_write_file does. */
		if (fx_spool_path(r->sp, &info, path, sizeof(path)) < 0) {
			race_fail(r);
			continue;
		}
		snprintf(tmp, sizeof(tmp), "%s.tmp1", path);
		fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
		if (fd < 0 || write(fd, "chunk", 5) != 5 || close(fd) < 0 ||
		    rename(tmp, path) < 0 || fx_spool_add(r->sp, &info) < 0)
			race_fail(r);
	}
	pthread_mutex_lock(&r->lock);
	r->producer_done = true;
	pthread_mutex_unlock(&r->lock);
	return NULL;
}

static void *uploader(void *arg)
{
	struct race *r = arg;
	char path[PATH_MAX];

	for (;;) {
		struct fx_chunk_info info;
		struct fx_spool_stats st;
		struct stat sb;
		bool done;
		int rc;

		pthread_mutex_lock(&r->lock);
		done = r->producer_done;
		pthread_mutex_unlock(&r->lock);
		rc = fx_spool_peek(r->sp, &info, path, sizeof(path));
		if (rc < 0) {
			race_fail(r);
			break;
		}
		if (rc == 0) {
			if (done)
				break;
			usleep(50);
			continue;
		}
		/* A peeked chunk is complete on disk. */
		if (stat(path, &sb) < 0 || sb.st_size != 5)
			race_fail(r);
		if (fx_spool_done(r->sp, &info) < 0)
			race_fail(r);
		else
			r->uploaded++;
		fx_spool_get_stats(r->sp, &st);
		if (st.added != st.uploaded + st.pending)
			race_fail(r);
	}
	return NULL;
}

static void test_concurrent_add_and_done(void **state)
{
	struct fixture *f = *state;
	struct race r = { .sp = open_spool(f, 0, 0) };
	struct fx_spool_stats st;
	pthread_t tp, tu;

	pthread_mutex_init(&r.lock, NULL);
	assert_int_equal(pthread_create(&tp, NULL, producer, &r), 0);
	assert_int_equal(pthread_create(&tu, NULL, uploader, &r), 0);
	pthread_join(tp, NULL);
	pthread_join(tu, NULL);
	pthread_mutex_destroy(&r.lock);

	assert_int_equal(r.failures, 0);
	assert_int_equal(r.uploaded, RACE_CHUNKS);
	fx_spool_get_stats(r.sp, &st);
	assert_int_equal(st.added, RACE_CHUNKS);
	assert_int_equal(st.uploaded, RACE_CHUNKS);
	assert_int_equal(st.pending, 0);
	assert_int_equal(st.bytes, 0);
	assert_int_equal(st.dropped, 0);
	assert_int_equal(count_files(f->spool), 0);
	fx_spool_free(r.sp);
}

static int cmp_id(const void *a, const void *b)
{
	return strcmp(a, b);
}

static void test_ids_unique(void **state)
{
	enum { N = 10000 };
	char(*ids)[FX_CHUNK_ID_LEN + 1] = calloc(N, sizeof(*ids));
	struct fx_chunk_info info;

	(void)state;
	assert_non_null(ids);
	for (int i = 0; i < N; i++) {
		memset(&info, 0, sizeof(info));
		fx_spool_new_id(&info);
		assert_int_equal(strlen(info.id), FX_CHUNK_ID_LEN);
		assert_int_equal(strspn(info.id, "0123456789abcdef"), FX_CHUNK_ID_LEN);
		memcpy(ids[i], info.id, sizeof(ids[i]));
	}
	qsort(ids, N, sizeof(*ids), cmp_id);
	for (int i = 1; i < N; i++)
		assert_string_not_equal(ids[i - 1], ids[i]);
	free(ids);
}

static void test_open_errors(void **state)
{
	struct fixture *f = *state;
	struct fx_spool_opts opts = { .directory = NULL };
	struct fx_spool *sp = NULL;

	assert_int_equal(fx_spool_open(&opts, &sp), -EINVAL);
	opts.directory = "";
	assert_int_equal(fx_spool_open(&opts, &sp), -EINVAL);
	/* A file where the directory should be. */
	snprintf(f->buf, sizeof(f->buf), "%s/file", f->dir);
	write_file(f->buf, 1);
	opts.directory = f->buf;
	assert_int_equal(fx_spool_open(&opts, &sp), -ENOTDIR);
	assert_null(sp);
	fx_spool_free(NULL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_name_round_trip, setup, teardown),
		cmocka_unit_test_setup_teardown(test_bad_names, setup, teardown),
		cmocka_unit_test_setup_teardown(test_open_existing, setup, teardown),
		cmocka_unit_test_setup_teardown(test_never_over_cap, setup, teardown),
		cmocka_unit_test_setup_teardown(test_add_peek_done_reject, setup, teardown),
		cmocka_unit_test_setup_teardown(test_max_bytes, setup, teardown),
		cmocka_unit_test_setup_teardown(test_chunk_larger_than_cap, setup, teardown),
		cmocka_unit_test_setup_teardown(test_max_age, setup, teardown),
		cmocka_unit_test_setup_teardown(test_rejected_bounded, setup, teardown),
		cmocka_unit_test_setup_teardown(test_done_after_drop, setup, teardown),
		cmocka_unit_test_setup_teardown(test_concurrent_add_and_done, setup, teardown),
		cmocka_unit_test(test_ids_unique),
		cmocka_unit_test_setup_teardown(test_open_errors, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

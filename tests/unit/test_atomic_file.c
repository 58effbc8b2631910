/* SPDX-License-Identifier: MIT */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fxagent/atomic_file.h"

static char dir[] = "/tmp/fx-atomic-XXXXXX";

static int setup(void **state)
{
	(void)state;
	return mkdtemp(dir) ? 0 : -1;
}

static int teardown(void **state)
{
	char cmd[128];

	(void)state;
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	return system(cmd) == 0 ? 0 : -1;
}

static char *slurp(const char *path)
{
	static char buf[8192];
	FILE *f = fopen(path, "r");
	size_t n;

	if (!f)
		return NULL;
	n = fread(buf, 1, sizeof(buf) - 1, f);
	buf[n] = '\0';
	fclose(f);
	return buf;
}

static void put(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");

	assert_non_null(f);
	fputs(text, f);
	fclose(f);
}

/* Names in the test directory that contain ".tmp". */
static int temporaries(void)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	int n = 0;

	assert_non_null(d);
	while ((de = readdir(d)))
		n += strstr(de->d_name, ".tmp") != NULL;
	closedir(d);
	return n;
}

struct job {
	const char *text;
	int fail;	 /* returned after writing text, if nonzero */
	char tmp[256];	 /* the name of the file being written, found in the directory */
	mode_t tmp_mode; /* its mode while being written */
};

static int writer(int fd, void *arg)
{
	struct job *j = arg;
	size_t len = strlen(j->text);
	struct stat fst, st;
	struct dirent *de;
	DIR *d = opendir(dir);

	if (write(fd, j->text, len) != (ssize_t)len)
		return -EIO;
	/* The temporary file is the target's name, ".tmp" and six characters. */
	assert_int_equal(fstat(fd, &fst), 0);
	j->tmp_mode = fst.st_mode & 07777;
	j->tmp[0] = '\0';
	while (d && (de = readdir(d))) {
		char p[300];

		snprintf(p, sizeof(p), "%s/%s", dir, de->d_name);
		if (lstat(p, &st) == 0 && st.st_ino == fst.st_ino && st.st_dev == fst.st_dev)
			snprintf(j->tmp, sizeof(j->tmp), "%s", de->d_name);
	}
	if (d)
		closedir(d);
	return j->fail;
}

/* The target gets the new contents under a new inode, with the mode asked
 * (whatever the umask), written as "NAME.tmpXXXXXX"; nothing is left. */
static void test_replaces(void **state)
{
	struct job j = { .text = "new\n" };
	char path[256];
	struct stat before, after;
	mode_t old = umask(077);

	(void)state;
	snprintf(path, sizeof(path), "%s/out.json.gz", dir);
	put(path, "old\n");
	assert_int_equal(stat(path, &before), 0);
	assert_int_equal(fx_atomic_file_write(path, 0644, FX_LOG_DEBUG, writer, &j), 0);
	umask(old);
	assert_string_equal(slurp(path), "new\n");
	assert_int_equal(stat(path, &after), 0);
	assert_int_not_equal(before.st_ino, after.st_ino);
	assert_int_equal(after.st_mode & 07777, 0644);
	assert_int_equal(j.tmp_mode, 0644);
	assert_int_equal(strlen(j.tmp), strlen("out.json.gz.tmpXXXXXX"));
	assert_memory_equal(j.tmp, "out.json.gz.tmp", strlen("out.json.gz.tmp"));
	assert_int_equal(temporaries(), 0);

	/* A private mode, and a file that was not there. */
	snprintf(path, sizeof(path), "%s/private", dir);
	assert_int_equal(fx_atomic_file_write(path, 0600, FX_LOG_DEBUG, writer, &j), 0);
	assert_int_equal(stat(path, &after), 0);
	assert_int_equal(after.st_mode & 07777, 0600);
	assert_int_equal(temporaries(), 0);
}

/* A writer that fails (after writing part): its error comes back, the
 * target keeps its old contents, the temporary file is gone. */
static void test_writer_fails(void **state)
{
	struct job j = { .text = "half", .fail = -ENOSPC };
	char path[256];

	(void)state;
	snprintf(path, sizeof(path), "%s/keep", dir);
	put(path, "old\n");
	assert_int_equal(fx_atomic_file_write(path, 0644, FX_LOG_DEBUG, writer, &j), -ENOSPC);
	assert_string_equal(slurp(path), "old\n");
	assert_int_equal(temporaries(), 0);
	/* A target that did not exist is not made. */
	snprintf(path, sizeof(path), "%s/never", dir);
	assert_int_equal(fx_atomic_file_write(path, 0644, FX_LOG_DEBUG, writer, &j), -ENOSPC);
	assert_int_equal(access(path, F_OK), -1);
	assert_int_equal(temporaries(), 0);
}

/* A symlink at the target's name is replaced by the file; what it pointed
 * to is not written. */
static void test_symlink_replaced(void **state)
{
	char path[256], victim[256];
	struct stat st;

	(void)state;
	snprintf(path, sizeof(path), "%s/link.prom", dir);
	snprintf(victim, sizeof(victim), "%s/victim", dir);
	put(victim, "precious\n");
	assert_int_equal(symlink(victim, path), 0);
	assert_int_equal(fx_atomic_file_write_buf(path, 0644, FX_LOG_DEBUG, "x 1\n", 4), 0);
	assert_string_equal(slurp(victim), "precious\n");
	assert_int_equal(lstat(path, &st), 0);
	assert_true(S_ISREG(st.st_mode));
	assert_string_equal(slurp(path), "x 1\n");
	assert_int_equal(temporaries(), 0);
}

/* The buffer form writes every byte, NULs and all. */
static void test_buffer(void **state)
{
	static const char bytes[] = "a\0b\0c";
	char path[256], got[8];
	int fd;

	(void)state;
	snprintf(path, sizeof(path), "%s/bytes", dir);
	assert_int_equal(fx_atomic_file_write_buf(path, 0644, FX_LOG_DEBUG, bytes, 5), 0);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	assert_true(fd >= 0);
	assert_int_equal(read(fd, got, sizeof(got)), 5);
	close(fd);
	assert_memory_equal(got, bytes, 5);
	assert_int_equal(fx_atomic_file_write_buf(path, 0644, FX_LOG_DEBUG, "", 0), 0);
	assert_string_equal(slurp(path), "");
}

/* Failures before the writer and at the rename: -errno, nothing left. */
static void test_errors(void **state)
{
	struct job j = { .text = "x" };
	char path[256];

	(void)state;
	snprintf(path, sizeof(path), "%s/missing/x", dir);
	assert_int_equal(fx_atomic_file_write(path, 0644, FX_LOG_DEBUG, writer, &j), -ENOENT);
	/* Renaming a file over a directory fails. */
	snprintf(path, sizeof(path), "%s/adir", dir);
	assert_int_equal(mkdir(path, 0755), 0);
	assert_int_equal(fx_atomic_file_write(path, 0644, FX_LOG_DEBUG, writer, &j), -EISDIR);
	assert_int_equal(temporaries(), 0);
	rmdir(path);
}

/* The directory sync: a name without a slash is in ".", "/x" in "/", a
 * missing directory or a file on the way is an error. A relative target
 * goes through the "." case. */
static void test_sync_dir(void **state)
{
	char path[256], cwd[256];

	(void)state;
	snprintf(path, sizeof(path), "%s/f", dir);
	assert_int_equal(fx_atomic_file_sync_dir(path), 0);
	assert_int_equal(fx_atomic_file_sync_dir("/f"), 0);
	assert_non_null(getcwd(cwd, sizeof(cwd)));
	assert_int_equal(chdir(dir), 0);
	assert_int_equal(fx_atomic_file_sync_dir("f"), 0);
	assert_int_equal(fx_atomic_file_write_buf("relative", 0644, FX_LOG_DEBUG, "r\n", 2), 0);
	assert_int_equal(chdir(cwd), 0);
	snprintf(path, sizeof(path), "%s/relative", dir);
	assert_string_equal(slurp(path), "r\n");
	snprintf(path, sizeof(path), "%s/missing/f", dir);
	assert_int_equal(fx_atomic_file_sync_dir(path), -ENOENT);
	snprintf(path, sizeof(path), "%s/relative/f", dir);
	assert_int_equal(fx_atomic_file_sync_dir(path), -ENOTDIR);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_replaces),	 cmocka_unit_test(test_writer_fails),
		cmocka_unit_test(test_symlink_replaced), cmocka_unit_test(test_buffer),
		cmocka_unit_test(test_errors),		 cmocka_unit_test(test_sync_dir),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}

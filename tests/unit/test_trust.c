/* SPDX-License-Identifier: MIT */
/* trust: what the agent refuses to read or to keep its files in, and what it
 * says. Run as root (the agent's user) and as nobody where ownership matters. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fxagent/trust.h"

static char dir[] = "/tmp/fx-trust-XXXXXX";
static char err[1024];

static int setup(void **state)
{
	(void)state;
	return mkdtemp(dir) ? 0 : -1;
}

static int teardown(void **state)
{
	char cmd[64];

	(void)state;
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	return system(cmd) == 0 ? 0 : -1;
}

static void put(const char *name, const char *text, mode_t mode)
{
	char path[256];
	int fd;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	assert_int_equal(fchmod(fd, mode), 0);
	close(fd);
}

static int open_in(const char *name, const struct fx_trust_rules *r)
{
	int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC), fd;

	assert_true(dfd >= 0);
	err[0] = '\0';
	fd = fx_trust_open(dfd, name, "test file", r, NULL, err, sizeof(err));
	close(dfd);
	return fd;
}

/* A FIFO where a file should be is an error at once, not a hang. */
static void test_fifo_does_not_block(void **state)
{
	const struct fx_trust_rules r = { 0 };
	char path[256];

	(void)state;
	snprintf(path, sizeof(path), "%s/fifo", dir);
	assert_int_equal(mkfifo(path, 0600), 0);
	assert_int_equal(open_in("fifo", &r), -EINVAL);
	assert_non_null(strstr(err, "is a FIFO, not a regular file"));
	assert_int_equal(open_in(".", &r), -EINVAL);
	assert_non_null(strstr(err, "is a directory"));
}

static void test_symlink_and_links(void **state)
{
	const struct fx_trust_rules own = { .nofollow = true, .own = true, .max_size = 8 };
	char path[256], lnk[256];
	int fd;

	(void)state;
	put("real", "data", 0644);
	snprintf(path, sizeof(path), "%s/real", dir);
	snprintf(lnk, sizeof(lnk), "%s/link", dir);
	assert_int_equal(symlink(path, lnk), 0);
	assert_int_equal(open_in("link", &own), -ELOOP);
	assert_non_null(strstr(err, "'link' is a symlink"));
	fd = open_in("real", &own);
	assert_true(fd >= 0);
	/* blocking again: a regular file's reads must not say EAGAIN */
	assert_int_equal(fcntl(fd, F_GETFL) & O_NONBLOCK, 0);
	close(fd);
	snprintf(lnk, sizeof(lnk), "%s/hard", dir);
	assert_int_equal(link(path, lnk), 0);
	assert_int_equal(open_in("real", &own), -EPERM);
	assert_non_null(strstr(err, "2 hard links"));
	unlink(lnk);
	put("big", "123456789", 0644);
	assert_int_equal(open_in("big", &own), -EFBIG);
	assert_int_equal(open_in("missing", &own), -ENOENT);
	assert_non_null(strstr(err, "does not exist"));
}

static void test_secret_modes(void **state)
{
	const struct fx_trust_rules secret = { .secret = true };
	int fd;

	(void)state;
	put("tok", "t", 0600);
	fd = open_in("tok", &secret);
	assert_true(fd >= 0);
	close(fd);
	put("tok", "t", 0640); /* a group the package sets may read it */
	fd = open_in("tok", &secret);
	assert_true(fd >= 0);
	close(fd);
	put("tok", "t", 0644);
	assert_int_equal(open_in("tok", &secret), -EPERM);
	assert_non_null(strstr(err, "readable by others (mode 0644"));
	assert_non_null(strstr(err, "chmod o-rwx"));
	put("tok", "t", 0660);
	assert_int_equal(open_in("tok", &secret), -EPERM);
	assert_non_null(strstr(err, "writable by its group"));
}

static void test_own_directory(void **state)
{
	char path[256], sub[300];
	struct stat st;
	int fd;

	(void)state;
	/* made 0700, with what is missing above it */
	snprintf(path, sizeof(path), "%s/a/b/spool/", dir);
	fd = fx_trust_dir(path, "spool.directory", true, err, sizeof(err));
	assert_true(fd >= 0);
	close(fd);
	snprintf(path, sizeof(path), "%s/a/b/spool", dir);
	assert_int_equal(stat(path, &st), 0);
	assert_int_equal(st.st_mode & 07777, 0700);
	/* open to others: refused, with the fix */
	assert_int_equal(chmod(path, 0777), 0);
	assert_int_equal(fx_trust_dir(path, "spool.directory", true, err, sizeof(err)), -EPERM);
	assert_non_null(strstr(err, "is writable by others (mode 0777"));
	assert_non_null(strstr(err, "chmod go-w"));
	assert_int_equal(chmod(path, 0755), 0);
	assert_int_equal(fx_trust_dir(path, "spool.directory", false, err, sizeof(err)), 0);
	/* below a directory others can write, not sticky */
	snprintf(sub, sizeof(sub), "%s/a", dir);
	assert_int_equal(chmod(sub, 0777), 0);
	assert_int_equal(fx_trust_dir(path, "spool.directory", false, err, sizeof(err)), -EPERM);
	assert_non_null(strstr(err, "which is writable by others and not sticky"));
	assert_int_equal(chmod(sub, 01777), 0); /* /tmp's way */
	assert_int_equal(fx_trust_dir(path, "spool.directory", false, err, sizeof(err)), 0);
	assert_int_equal(chmod(sub, 0755), 0);
	/* a file where the directory should be */
	put("file", "x", 0644);
	snprintf(path, sizeof(path), "%s/file", dir);
	assert_int_equal(fx_trust_dir(path, "output.directory", true, err, sizeof(err)), -ENOTDIR);
	assert_non_null(strstr(err, "is a regular file, not a directory"));
	/* missing, and cannot be made under a file */
	snprintf(path, sizeof(path), "%s/file/x", dir);
	assert_true(fx_trust_dir(path, "output.directory", false, err, sizeof(err)) < 0);
	assert_non_null(strstr(err, "not a directory"));
	assert_int_equal(fx_trust_dir("rel/dir", "output.directory", false, err, sizeof(err)),
			 -EINVAL);
}

/* Owned by someone else: as root, a file of nobody's. */
static void test_other_owner(void **state)
{
	const struct fx_trust_rules own = { .nofollow = true, .own = true };
	const struct fx_trust_rules secret = { .secret = true };
	char path[256];

	(void)state;
	if (geteuid() != 0)
		skip();
	put("theirs", "x", 0600);
	snprintf(path, sizeof(path), "%s/theirs", dir);
	assert_int_equal(chown(path, 65534, 65534), 0);
	assert_int_equal(open_in("theirs", &own), -EPERM);
	assert_non_null(strstr(err, "not by the agent's user root"));
	assert_int_equal(open_in("theirs", &secret), -EPERM);
	assert_non_null(strstr(err, "chown root"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_fifo_does_not_block),
		cmocka_unit_test(test_symlink_and_links),
		cmocka_unit_test(test_secret_modes),
		cmocka_unit_test(test_own_directory),
		cmocka_unit_test(test_other_owner),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}

/* SPDX-License-Identifier: MIT */
/* cgroup: finding the cgroup2 mount in mountinfo files, resolving targets
 * against a fake cgroup tree under /tmp, and (as root) a real cgroup: its id
 * changes when it is re-created, and a process moved into it is seen there. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "fxagent/cgroup.h"
#include "fxagent/log.h"

#define DATA FX_TEST_DATA "/cgroup"

static char root[256]; /* the fake cgroup tree */

static void mkdirs(const char *rel)
{
	char path[PATH_MAX];
	size_t i, n;

	n = (size_t)snprintf(path, sizeof(path), "%s%s", root, rel);
	assert_true(n < sizeof(path));
	for (i = 1; i <= n; i++) {
		if (path[i] != '/' && path[i] != '\0')
			continue;
		path[i] = '\0';
		if (mkdir(path, 0755) && errno != EEXIST)
			fail_msg("mkdir %s: %s", path, strerror(errno));
		if (i < n)
			path[i] = '/';
	}
}

static void make_file(const char *rel)
{
	char path[PATH_MAX];
	FILE *f;

	snprintf(path, sizeof(path), "%s%s", root, rel);
	f = fopen(path, "w");
	assert_non_null(f);
	fclose(f);
}

static int setup_tree(void **state)
{
	char path[PATH_MAX];
	int i;

	(void)state;
	snprintf(root, sizeof(root), "/tmp/fx-test-cgroup-%d", (int)getpid());
	mkdirs("/system.slice/nginx.service");
	mkdirs("/system.slice/system-getty.slice/getty@tty1.service");
	mkdirs("/system.slice/system-systemd\\x2dfsck.slice/systemd-fsck@dev-vda1.service");
	make_file("/system.slice/ghost.service");
	mkdirs("/user.slice/user-1000.slice/user@1000.service/app.slice/pipewire.service");
	mkdirs("/foo.slice/foo-bar.slice/foo-bar-baz.slice");
	mkdirs("/machine.slice/machine-c1.scope/payload/system.slice/redis.service");
	/* The same unit in 16 containers: readdir order must not pick the winner. */
	for (i = 16; i > 0; i--) {
		snprintf(path, sizeof(path),
			 "/machine.slice/machine-c%d.scope/payload/system.slice/postgres.service",
			 i);
		mkdirs(path);
	}
	mkdirs("/machine.slice/machine-c1.scope/payload/system.slice/memcached.service");
	mkdirs("/other.slice/memcached.service");
	mkdirs("/d1/d2/d3/d4/d5/d6/d7/at-depth-8.service");
	mkdirs("/d1/d2/d3/d4/d5/d6/d7/d8/at-depth-9.service");
	mkdirs("/outside/elsewhere");
	/* A link loop and a link named like a unit: neither is a cgroup. */
	snprintf(path, sizeof(path), "%s/machine.slice/loop", root);
	assert_int_equal(symlink("..", path), 0);
	snprintf(path, sizeof(path), "%s/system.slice/evil.service", root);
	assert_int_equal(symlink("../outside/elsewhere", path), 0);
	return 0;
}

static int teardown_tree(void **state)
{
	char cmd[300];

	(void)state;
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", root);
	return system(cmd) == 0 ? 0 : -1;
}

static void expect_mount(const char *file, const char *want)
{
	char out[PATH_MAX];

	assert_int_equal(fx_cgroup_find_mount(file, out, sizeof(out)), 0);
	assert_string_equal(out, want);
}

static void test_mount_v2(void **state)
{
	(void)state;
	expect_mount(DATA "/mountinfo-v2", "/sys/fs/cgroup");
}

static void test_mount_hybrid(void **state)
{
	(void)state;
	/* The bind mount of /system.slice comes first but is a subtree. */
	expect_mount(DATA "/mountinfo-hybrid", "/sys/fs/cgroup/unified");
}

static void test_mount_prefers_sys_fs_cgroup(void **state)
{
	(void)state;
	expect_mount(DATA "/mountinfo-multi", "/sys/fs/cgroup");
}

static void test_mount_escaped(void **state)
{
	(void)state;
	expect_mount(DATA "/mountinfo-escaped", "/mnt/my cgroups\tv2\\x");
}

static void test_mount_subtree_only(void **state)
{
	(void)state;
	expect_mount(DATA "/mountinfo-subtree", "/sys/fs/cgroup");
}

static void test_mount_none(void **state)
{
	char out[PATH_MAX] = "untouched";

	(void)state;
	/* tmpfs with source "cgroup2", a v1 mount with option "cgroup2", a cut line. */
	assert_int_equal(fx_cgroup_find_mount(DATA "/mountinfo-v1", out, sizeof(out)), -ENOENT);
	assert_string_equal(out, "untouched");
	assert_int_equal(fx_cgroup_find_mount(DATA "/no-such-file", out, sizeof(out)), -ENOENT);
}

static void test_mount_small_buffer(void **state)
{
	char out[8];

	(void)state;
	assert_int_equal(fx_cgroup_find_mount(DATA "/mountinfo-v2", out, sizeof(out)),
			 -ENAMETOOLONG);
}

static void expect_unit(const char *unit, const char *want)
{
	char out[PATH_MAX];
	int ret;

	ret = fx_cgroup_resolve_unit(root, unit, out, sizeof(out));
	if (ret)
		fail_msg("unit %s: %s", unit, strerror(-ret));
	assert_string_equal(out, want);
}

static void expect_unit_err(const char *unit, int err)
{
	char out[PATH_MAX] = "untouched";
	int ret;

	ret = fx_cgroup_resolve_unit(root, unit, out, sizeof(out));
	if (ret != err)
		fail_msg("unit %s: got %d (%s), expected %d", unit, ret, out, err);
	assert_string_equal(out, "untouched");
}

static void test_unit_standard_places(void **state)
{
	(void)state;
	expect_unit("nginx.service", "/system.slice/nginx.service");
	expect_unit("nginx", "/system.slice/nginx.service");
	expect_unit("getty@tty1.service", "/system.slice/system-getty.slice/getty@tty1.service");
	expect_unit("systemd-fsck@dev-vda1.service",
		    "/system.slice/system-systemd\\x2dfsck.slice/systemd-fsck@dev-vda1.service");
	expect_unit("user@1000.service", "/user.slice/user-1000.slice/user@1000.service");
	expect_unit("foo-bar-baz.slice", "/foo.slice/foo-bar.slice/foo-bar-baz.slice");
	expect_unit("foo.slice", "/foo.slice");
	expect_unit("-.slice", "/");
}

static void test_unit_search(void **state)
{
	(void)state;
	expect_unit("pipewire.service",
		    "/user.slice/user-1000.slice/user@1000.service/app.slice/pipewire.service");
	expect_unit("redis.service", "/machine.slice/machine-c1.scope/payload/system.slice/"
				     "redis.service");
	/* Several at the same depth: the smallest path, whatever order readdir gives. */
	expect_unit("postgres.service", "/machine.slice/machine-c1.scope/payload/system.slice/"
					"postgres.service");
	expect_unit("machine-c16.scope", "/machine.slice/machine-c16.scope");
	/* The shallower one wins over a deeper one that sorts first. */
	expect_unit("memcached.service", "/other.slice/memcached.service");
	expect_unit("at-depth-8.service", "/d1/d2/d3/d4/d5/d6/d7/at-depth-8.service");
}

static void test_unit_absent(void **state)
{
	(void)state;
	expect_unit_err("absent.service", -ENOENT);
	expect_unit_err("at-depth-9.service", -ENOENT); /* beyond the search depth */
	expect_unit_err("ghost.service", -ENOENT);	/* a file, not a cgroup */
	expect_unit_err("evil.service", -ENOENT);	/* a symbolic link */
	expect_unit_err("bar-baz.slice", -ENOENT);
}

static void test_unit_invalid(void **state)
{
	(void)state;
	expect_unit_err("", -EINVAL);
	expect_unit_err("../nginx.service", -EINVAL);
	expect_unit_err("system.slice/nginx.service", -EINVAL);
	expect_unit_err("..", -EINVAL);
	expect_unit_err("timers.target", -EINVAL);
	expect_unit_err("backup.timer", -EINVAL);
}

static void expect_path(const char *path, const char *want)
{
	char out[PATH_MAX];

	assert_int_equal(fx_cgroup_resolve_path(root, path, out, sizeof(out)), 0);
	assert_string_equal(out, want);
}

static void expect_path_err(const char *path, int err)
{
	char out[PATH_MAX] = "untouched";

	assert_int_equal(fx_cgroup_resolve_path(root, path, out, sizeof(out)), err);
	assert_string_equal(out, "untouched");
}

static void test_path(void **state)
{
	char mistake[PATH_MAX];

	(void)state;
	expect_path("/system.slice/nginx.service", "/system.slice/nginx.service");
	expect_path("//system.slice//nginx.service/", "/system.slice/nginx.service");
	expect_path("/", "/");
	expect_path_err("system.slice/nginx.service", -EINVAL);
	expect_path_err("/system.slice/../outside", -EINVAL);
	expect_path_err("/..", -EINVAL);
	expect_path_err("/system.slice/./nginx.service", -EINVAL);
	expect_path_err("/system.slice/absent.service", -ENOENT);
	expect_path_err("/system.slice/ghost.service", -ENOTDIR);
	/* The mount point written in front of the path is refused with a hint. */
	snprintf(mistake, sizeof(mistake), "%s/system.slice/nginx.service", root);
	expect_path_err(mistake, -EINVAL);
}

static void test_resolve_target(void **state)
{
	struct fx_target t = { .kind = FX_TARGET_SYSTEMD_UNIT, .value = "redis.service" };
	char out[PATH_MAX];

	(void)state;
	assert_int_equal(fx_cgroup_resolve(root, &t, out, sizeof(out)), 0);
	assert_string_equal(out, "/machine.slice/machine-c1.scope/payload/system.slice/"
				 "redis.service");
	t.kind = FX_TARGET_CGROUP;
	t.value = "/other.slice";
	assert_int_equal(fx_cgroup_resolve(root, &t, out, sizeof(out)), 0);
	assert_string_equal(out, "/other.slice");
	t.kind = FX_TARGET_PROCESS;
	t.value = "nginx";
	assert_int_equal(fx_cgroup_resolve(root, &t, out, sizeof(out)), -EINVAL);
}

static void test_open_fake(void **state)
{
	char path[PATH_MAX];
	uint64_t id = 0, id2 = 0;
	struct stat st;
	int fd = -1;

	(void)state;
	assert_int_equal(fx_cgroup_open(root, "/system.slice/nginx.service", &fd, &id), 0);
	assert_true(fd >= 0);
	assert_int_equal(fstat(fd, &st), 0);
	assert_true(S_ISDIR(st.st_mode));
	assert_true((fcntl(fd, F_GETFD) & FD_CLOEXEC) != 0);
	snprintf(path, sizeof(path), "%s/system.slice/nginx.service", root);
	assert_int_equal(stat(path, &st), 0);
	assert_int_equal(id, st.st_ino);
	close(fd);
	assert_int_equal(fx_cgroup_id(root, "/system.slice/nginx.service", &id2), 0);
	assert_int_equal(id2, id);
	fd = -1;
	assert_int_equal(fx_cgroup_open(root, "/system.slice/absent.service", &fd, &id), -ENOENT);
	assert_int_equal(fd, -1);
	assert_int_equal(fx_cgroup_id(root, "/system.slice/absent.service", &id2), -ENOENT);
}

static void expect_pid(uint32_t pid, const char *want)
{
	char out[PATH_MAX];

	assert_int_equal(fx_cgroup_of_pid(DATA "/proc", pid, out, sizeof(out)), 0);
	assert_string_equal(out, want);
}

static void test_of_pid_files(void **state)
{
	char out[PATH_MAX] = "untouched", small[8];

	(void)state;
	expect_pid(100, "/system.slice/nginx.service");
	expect_pid(101, "/user.slice/user-1000.slice/user@1000.service/app.slice/my app.service");
	assert_int_equal(fx_cgroup_of_pid(DATA "/proc", 102, out, sizeof(out)), -ENOENT);
	assert_int_equal(fx_cgroup_of_pid(DATA "/proc", 103, out, sizeof(out)), -ENOENT);
	assert_int_equal(fx_cgroup_of_pid(DATA "/proc", 104, out, sizeof(out)), -EINVAL);
	assert_int_equal(fx_cgroup_of_pid(DATA "/proc", 105, out, sizeof(out)), -ENOENT);
	assert_int_equal(fx_cgroup_of_pid(DATA "/proc", 999, out, sizeof(out)), -ESRCH);
	assert_string_equal(out, "untouched");
	assert_int_equal(fx_cgroup_of_pid(DATA "/proc", 100, small, sizeof(small)), -ENAMETOOLONG);
}

/* The real cgroup2 hierarchy: what the test created, removed at the end. */
static struct {
	char mount[PATH_MAX];
	char name[64]; /* "/fxagent-test-PID" */
	pid_t child;
} real;

static void real_path(char *buf, size_t len, const char *rel)
{
	int n = snprintf(buf, len, "%s%s%s", real.mount, real.name, rel);

	assert_true(n > 0 && (size_t)n < len);
}

static void remove_dir(const char *rel)
{
	char path[PATH_MAX];
	int i;

	real_path(path, sizeof(path), rel);
	/* A cgroup whose last task just exited can be busy for a moment. */
	for (i = 0; i < 100 && rmdir(path) && errno == EBUSY; i++)
		usleep(10000);
}

static int teardown_real(void **state)
{
	(void)state;
	if (real.child > 0) {
		kill(real.child, SIGKILL);
		waitpid(real.child, NULL, 0);
		real.child = 0;
	}
	if (real.name[0]) {
		remove_dir("/sub.slice/fxagent-test.service");
		remove_dir("/sub.slice");
		remove_dir("");
	}
	return 0;
}

static void test_real_cgroup(void **state)
{
	char path[PATH_MAX], rel[PATH_MAX], out[PATH_MAX], unit[64], pidtext[32];
	struct {
		struct file_handle fh;
		uint64_t id;
	} handle;
	uint64_t id1 = 0, id2 = 0, id3 = 0;
	int fd = -1, mount_id, n, wfd, ret;

	(void)state;
	ret = fx_cgroup_find_mount("/proc/self/mountinfo", real.mount, sizeof(real.mount));
	if (ret == -ENOENT) {
		print_message("no cgroup2 mount on this host: real cgroup test skipped\n");
		skip();
	}
	assert_int_equal(ret, 0);
	snprintf(real.name, sizeof(real.name), "/fxagent-test-%d", (int)getpid());
	real_path(path, sizeof(path), "");
	if (mkdir(path, 0755))
		fail_msg("mkdir %s: %s (this test needs root)", path, strerror(errno));

	/* Open it; its id is the kernel's cgroup id (the file handle). */
	assert_int_equal(fx_cgroup_resolve_path(real.mount, real.name, rel, sizeof(rel)), 0);
	assert_string_equal(rel, real.name);
	assert_int_equal(fx_cgroup_open(real.mount, rel, &fd, &id1), 0);
	handle.fh.handle_bytes = sizeof(handle.id);
	assert_int_equal(name_to_handle_at(AT_FDCWD, path, &handle.fh, &mount_id, 0), 0);
	assert_int_equal(handle.fh.handle_bytes, 8);
	memcpy(&id2, handle.fh.f_handle, sizeof(id2));
	assert_int_equal(id1, id2);
	close(fd);

	/* Re-created (a service restart): same path, new id. */
	assert_int_equal(rmdir(path), 0);
	assert_int_equal(fx_cgroup_id(real.mount, rel, &id2), -ENOENT);
	assert_int_equal(mkdir(path, 0755), 0);
	assert_int_equal(fx_cgroup_id(real.mount, rel, &id2), 0);
	assert_int_not_equal(id1, id2);
	assert_int_equal(fx_cgroup_open(real.mount, rel, &fd, &id3), 0);
	assert_int_equal(id3, id2);
	close(fd);

	/* A unit nested in it is found by the search on cgroupfs itself. */
	real_path(path, sizeof(path), "/sub.slice");
	assert_int_equal(mkdir(path, 0755), 0);
	real_path(path, sizeof(path), "/sub.slice/fxagent-test.service");
	assert_int_equal(mkdir(path, 0755), 0);
	snprintf(unit, sizeof(unit), "fxagent-test.service");
	assert_int_equal(fx_cgroup_resolve_unit(real.mount, unit, out, sizeof(out)), 0);
	snprintf(path, sizeof(path), "%s/sub.slice/fxagent-test.service", real.name);
	assert_string_equal(out, path);

	/* A child moved into it is reported there. */
	real.child = fork();
	assert_true(real.child >= 0);
	if (real.child == 0) {
		execlp("sleep", "sleep", "60", (char *)NULL);
		_exit(127);
	}
	real_path(path, sizeof(path), "/cgroup.procs");
	wfd = open(path, O_WRONLY | O_CLOEXEC);
	assert_true(wfd >= 0);
	n = snprintf(pidtext, sizeof(pidtext), "%d\n", (int)real.child);
	assert_int_equal(write(wfd, pidtext, (size_t)n), n);
	close(wfd);
	assert_int_equal(fx_cgroup_of_pid("/proc", (uint32_t)real.child, out, sizeof(out)), 0);
	assert_string_equal(out, real.name);
	teardown_real(NULL);
	real_path(path, sizeof(path), "");
	assert_int_equal(access(path, F_OK), -1);
	real.name[0] = '\0';
}

int main(void)
{
	const struct CMUnitTest files[] = {
		cmocka_unit_test(test_mount_v2),
		cmocka_unit_test(test_mount_hybrid),
		cmocka_unit_test(test_mount_prefers_sys_fs_cgroup),
		cmocka_unit_test(test_mount_escaped),
		cmocka_unit_test(test_mount_subtree_only),
		cmocka_unit_test(test_mount_none),
		cmocka_unit_test(test_mount_small_buffer),
		cmocka_unit_test(test_of_pid_files),
	};
	const struct CMUnitTest tree[] = {
		cmocka_unit_test(test_unit_standard_places),
		cmocka_unit_test(test_unit_search),
		cmocka_unit_test(test_unit_absent),
		cmocka_unit_test(test_unit_invalid),
		cmocka_unit_test(test_path),
		cmocka_unit_test(test_resolve_target),
		cmocka_unit_test(test_open_fake),
	};
	const struct CMUnitTest live[] = {
		cmocka_unit_test_teardown(test_real_cgroup, teardown_real),
	};
	int failed = 0;

	failed += cmocka_run_group_tests_name("cgroup files", files, NULL, NULL);
	failed += cmocka_run_group_tests_name("cgroup fake tree", tree, setup_tree, teardown_tree);
	failed += cmocka_run_group_tests_name("cgroup real", live, NULL, NULL);
	return failed ? 1 : 0;
}

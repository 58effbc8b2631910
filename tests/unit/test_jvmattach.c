/* SPDX-License-Identifier: MIT */
/* jvmattach: the attach listener's replies, and the decision whether a JVM
 * may be signalled, from its command line, environment and /proc files (a
 * made-up /proc here; the real JVMs are integration.jit_java_fresh's). */
#include <errno.h>
#include <limits.h>
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

#include "fxagent/jvmattach.h"

static int parse(const char *s, size_t len, int *code, size_t *body)
{
	return fx_jvmattach_parse_reply(s, len, code, body);
}

static void test_reply(void **state)
{
	int code = 7;
	size_t body = 9;

	(void)state;
	assert_int_equal(parse("0\n", 2, &code, &body), 0);
	assert_int_equal(code, 0);
	assert_int_equal(body, 2);
	assert_int_equal(parse("-1\nUnknown diagnostic command\n", 30, &code, &body), 0);
	assert_int_equal(code, -1);
	assert_int_equal(body, 3);
	assert_int_equal(parse("2147483647\n", 11, &code, &body), 0);
	assert_int_equal(code, INT_MAX);
	assert_int_equal(parse("-2147483648\n", 12, &code, &body), 0);
	assert_int_equal(code, INT_MIN);
	/* Not a whole first line, or not a number that fits: nothing written. */
	code = 5;
	body = 5;
	assert_int_equal(parse("", 0, &code, &body), -EBADMSG);
	assert_int_equal(parse("0", 1, &code, &body), -EBADMSG);
	assert_int_equal(parse("\n", 1, &code, &body), -EBADMSG);
	assert_int_equal(parse("-\n", 2, &code, &body), -EBADMSG);
	assert_int_equal(parse(" 0\n", 3, &code, &body), -EBADMSG);
	assert_int_equal(parse("0x1\n", 4, &code, &body), -EBADMSG);
	assert_int_equal(parse("2147483648\n", 11, &code, &body), -EBADMSG);
	assert_int_equal(parse("99999999999999999999999\n", 24, &code, &body), -EBADMSG);
	assert_int_equal(parse("1\0\n", 3, &code, &body), -EBADMSG);
	assert_int_equal(code, 5);
	assert_int_equal(body, 5);
}

static enum fx_jvm_block cmdline(const char *s, size_t len, struct fx_jvm_verdict *v)
{
	memset(v, 0, sizeof(*v));
	return fx_jvmattach_scan_cmdline(s, len, v);
}

#define CMDLINE(lit, v) cmdline(lit, sizeof(lit) - 1, v)

static void test_cmdline(void **state)
{
	struct fx_jvm_verdict v;

	(void)state;
	assert_int_equal(CMDLINE("java\0-Xmx1g\0-cp\0/srv\0Main\0", &v), FX_JVM_MAY_SIGNAL);
	assert_string_equal(v.option, "");
	assert_int_equal(CMDLINE("java\0-XX:+DisableAttachMechanism\0Main\0", &v),
			 FX_JVM_ATTACH_DISABLED);
	assert_string_equal(v.option, "-XX:+DisableAttachMechanism");
	assert_string_equal(v.where, "command line");
	/* Turned off again: fine; any other spelling: not. */
	assert_int_equal(CMDLINE("java\0-XX:-DisableAttachMechanism\0Main\0", &v),
			 FX_JVM_MAY_SIGNAL);
	assert_int_equal(CMDLINE("java\0-XX:DisableAttachMechanism=true\0Main\0", &v),
			 FX_JVM_ATTACH_DISABLED);
	assert_int_equal(CMDLINE("java\0-Xrs\0Main\0", &v), FX_JVM_NO_SIGNALS);
	assert_string_equal(v.option, "-Xrs");
	assert_int_equal(CMDLINE("java\0-XX:+ReduceSignalUsage\0Main\0", &v), FX_JVM_NO_SIGNALS);
	assert_int_equal(CMDLINE("java\0-XX:-ReduceSignalUsage\0Main\0", &v), FX_JVM_MAY_SIGNAL);
	/* Options the agent cannot read. */
	assert_int_equal(CMDLINE("java\0@/srv/jvm.args\0Main\0", &v), FX_JVM_OPTIONS_HIDDEN);
	assert_int_equal(CMDLINE("java\0-XX:Flags=/srv/flags\0Main\0", &v), FX_JVM_OPTIONS_HIDDEN);
	assert_int_equal(CMDLINE("java\0-XX:VMOptionsFile=/srv/o\0Main\0", &v),
			 FX_JVM_OPTIONS_HIDDEN);
	/* The strongest wins, whatever the order; a last argument without
	 * its NUL counts. */
	assert_int_equal(CMDLINE("java\0-Xrs\0-XX:+DisableAttachMechanism", &v),
			 FX_JVM_ATTACH_DISABLED);
	assert_int_equal(CMDLINE("java\0-XX:+DisableAttachMechanism\0-Xrs\0", &v),
			 FX_JVM_ATTACH_DISABLED);
	assert_int_equal(CMDLINE("java\0@x\0-Xrs", &v), FX_JVM_NO_SIGNALS);
	/* The application's arguments too: the safe side. */
	assert_int_equal(CMDLINE("java\0Main\0-Xrs\0", &v), FX_JVM_NO_SIGNALS);
	/* An option is shown without control bytes, cut. */
	assert_int_equal(CMDLINE("java\0-XX:+DisableAttachMechanism\n"
				 "forged log line that goes on and on and on and on and on\0",
				 &v),
			 FX_JVM_ATTACH_DISABLED);
	assert_null(strchr(v.option, '\n'));
	assert_int_equal(strlen(v.option), sizeof(v.option) - 1);
	/* A block already found stays when a weaker one is found. */
	memset(&v, 0, sizeof(v));
	v.block = FX_JVM_NO_SIGQUIT;
	assert_int_equal(fx_jvmattach_scan_cmdline("@f", 2, &v), FX_JVM_NO_SIGQUIT);
	assert_int_equal(CMDLINE("", &v), FX_JVM_MAY_SIGNAL);
}

static enum fx_jvm_block environ_of(const char *s, size_t len, struct fx_jvm_verdict *v)
{
	memset(v, 0, sizeof(*v));
	return fx_jvmattach_scan_environ(s, len, v);
}

#define ENVIRON(lit, v) environ_of(lit, sizeof(lit) - 1, v)

static void test_environ(void **state)
{
	struct fx_jvm_verdict v;

	(void)state;
	assert_int_equal(ENVIRON("PATH=/bin\0JAVA_TOOL_OPTIONS=-Xmx1g -Dx=y\0", &v),
			 FX_JVM_MAY_SIGNAL);
	assert_int_equal(ENVIRON("PATH=/bin\0JAVA_TOOL_OPTIONS=-Xmx1g\t "
				 "-XX:+DisableAttachMechanism\0",
				 &v),
			 FX_JVM_ATTACH_DISABLED);
	assert_string_equal(v.where, "JAVA_TOOL_OPTIONS");
	assert_string_equal(v.option, "-XX:+DisableAttachMechanism");
	assert_int_equal(ENVIRON("_JAVA_OPTIONS=\"-Xrs\"\0", &v), FX_JVM_NO_SIGNALS);
	assert_string_equal(v.option, "-Xrs");
	assert_string_equal(v.where, "_JAVA_OPTIONS");
	assert_int_equal(ENVIRON("JDK_JAVA_OPTIONS='-XX:+ReduceSignalUsage'", &v),
			 FX_JVM_NO_SIGNALS);
	assert_int_equal(ENVIRON("JDK_JAVA_OPTIONS=@/srv/args\0", &v), FX_JVM_OPTIONS_HIDDEN);
	/* Only those three variables, by their whole name. */
	assert_int_equal(ENVIRON("XJAVA_TOOL_OPTIONS=-Xrs\0JAVA_TOOL_OPTIONSX=-Xrs\0"
				 "JAVA_TOOL_OPTIONS\0OTHER=-XX:+DisableAttachMechanism\0",
				 &v),
			 FX_JVM_MAY_SIGNAL);
	assert_int_equal(ENVIRON("JAVA_TOOL_OPTIONS=\0", &v), FX_JVM_MAY_SIGNAL);
	assert_int_equal(ENVIRON("", &v), FX_JVM_MAY_SIGNAL);
}

static void test_why(void **state)
{
	struct fx_jvm_verdict v = { 0 };
	char buf[256];

	(void)state;
	CMDLINE("java\0-XX:+DisableAttachMechanism\0", &v);
	fx_jvmattach_why(&v, buf, sizeof(buf));
	assert_string_equal(buf, "JVM attach disabled (-XX:+DisableAttachMechanism in its "
				 "command line)");
	ENVIRON("JAVA_TOOL_OPTIONS=-Xrs\0", &v);
	fx_jvmattach_why(&v, buf, sizeof(buf));
	assert_string_equal(buf, "JVM started with -Xrs (in its JAVA_TOOL_OPTIONS): SIGQUIT would "
				 "end it, not signalled");
}

/* ---- a made-up /proc ---- */

struct fakeproc {
	char root[64];
	char dir[96];
};

static void put(const struct fakeproc *f, const char *name, const char *text, size_t len)
{
	char path[160];
	FILE *fp;

	snprintf(path, sizeof(path), "%s/%s", f->dir, name);
	fp = fopen(path, "we");
	assert_non_null(fp);
	assert_int_equal(fwrite(text, 1, len, fp), len);
	fclose(fp);
}

#define PUT(f, name, lit) put(f, name, lit, sizeof(lit) - 1)

static const char jvm_maps[] =
	"55d0c0000000-55d0c0001000 r--p 00000000 08:01 1 /usr/lib/jvm/java-17/bin/java\n"
	"7f0000000000-7f0000100000 rwxp 00000000 00:00 0 \n"
	"7f1000000000-7f1000800000 r-xp 00000000 08:01 2 "
	"/usr/lib/jvm/java-17/lib/server/libjvm.so\n";

/* SigCgt 0x...4: SIGQUIT (3) caught, as HotSpot's handler does. */
static const char jvm_status[] = "Name:\tjava\nUid:\t1000\t1001\t1001\t1001\n"
				 "Gid:\t100\t101\t101\t101\nSigBlk:\t0000000000000000\n"
				 "SigCgt:\t2000000181005ccf\n";

static void fake_jvm(struct fakeproc *f, const char *exe)
{
	char path[160];

	snprintf(f->root, sizeof(f->root), "/tmp/fx-test-jvmattach-XXXXXX");
	assert_non_null(mkdtemp(f->root));
	snprintf(f->dir, sizeof(f->dir), "%s/4242", f->root);
	assert_int_equal(mkdir(f->dir, 0755), 0);
	PUT(f, "maps", jvm_maps);
	PUT(f, "status", jvm_status);
	PUT(f, "cmdline", "java\0-XX:+PreserveFramePointer\0-cp\0/srv\0Main\0");
	PUT(f, "environ", "PATH=/bin\0JAVA_TOOL_OPTIONS=-Xmx1g\0");
	snprintf(path, sizeof(path), "%s/exe", f->dir);
	assert_int_equal(symlink(exe, path), 0);
}

static void fake_free(struct fakeproc *f)
{
	static const char *const files[] = { "maps", "status", "cmdline", "environ", "exe" };
	char path[160];

	for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
		snprintf(path, sizeof(path), "%s/%s", f->dir, files[i]);
		unlink(path);
	}
	rmdir(f->dir);
	rmdir(f->root);
}

static int inspect(const struct fakeproc *f, struct fx_jvm_info *info)
{
	struct fx_perfmap_owner o = { .proc_root = f->root, .pid = 4242, .ns_pid = 4242 };

	memset(info, 0xa5, sizeof(*info));
	return fx_jvmattach_inspect(&o, info);
}

static void test_inspect(void **state)
{
	struct fakeproc f;
	struct fx_jvm_info info;

	(void)state;
	fake_jvm(&f, "/usr/lib/jvm/java-17/bin/java");
	assert_int_equal(inspect(&f, &info), 0);
	assert_true(info.hotspot);
	assert_int_equal(info.euid, 1001);
	assert_int_equal(info.egid, 101);
	assert_int_equal(info.verdict.block, FX_JVM_MAY_SIGNAL);

	/* -Xrs: HotSpot leaves SIGQUIT alone. Either says no. */
	PUT(&f, "status", "Uid:\t0\t0\t0\t0\nGid:\t0\t0\t0\t0\nSigCgt:\t2000000181005ccb\n");
	assert_int_equal(inspect(&f, &info), 0);
	assert_int_equal(info.verdict.block, FX_JVM_NO_SIGQUIT);
	PUT(&f, "cmdline", "java\0-Xrs\0Main\0");
	assert_int_equal(inspect(&f, &info), 0);
	assert_int_equal(info.verdict.block, FX_JVM_NO_SIGNALS);
	PUT(&f, "status", jvm_status);
	PUT(&f, "cmdline", "java\0Main\0");
	PUT(&f, "environ", "JAVA_TOOL_OPTIONS=-XX:+DisableAttachMechanism\0");
	assert_int_equal(inspect(&f, &info), 0);
	assert_int_equal(info.verdict.block, FX_JVM_ATTACH_DISABLED);
	assert_string_equal(info.verdict.where, "JAVA_TOOL_OPTIONS");
	PUT(&f, "environ", "");
	/* A status without SigCgt is not read whole: no. */
	PUT(&f, "status", "Uid:\t0\t0\t0\t0\nGid:\t0\t0\t0\t0\n");
	assert_int_equal(inspect(&f, &info), 0);
	assert_int_equal(info.verdict.block, FX_JVM_UNREADABLE);
	PUT(&f, "status", jvm_status);
	assert_int_equal(inspect(&f, &info), 0);
	assert_int_equal(info.verdict.block, FX_JVM_MAY_SIGNAL);

	/* OpenJ9's libjvm.so, or none: not HotSpot. */
	PUT(&f, "maps",
	    "7f10-7f20 r-xp 0 08:01 2 /opt/j9/lib/default/libjvm.so\n"
	    "7f30-7f40 r-xp 0 08:01 3 /opt/j9/lib/default/libj9vm29.so\n");
	assert_int_equal(inspect(&f, &info), 0);
	assert_false(info.hotspot);
	PUT(&f, "maps", "7f10-7f20 r-xp 0 08:01 2 /usr/bin/node\n");
	assert_int_equal(inspect(&f, &info), 0);
	assert_false(info.hotspot);
	fake_free(&f);

	/* A JVM made through JNI by another program: its options are unknown. */
	fake_jvm(&f, "/opt/app/bin/server (deleted)");
	assert_int_equal(inspect(&f, &info), 0);
	assert_true(info.hotspot);
	assert_int_equal(info.verdict.block, FX_JVM_NOT_LAUNCHER);
	fake_free(&f);
	/* An upgraded java launcher is still one. */
	fake_jvm(&f, "/usr/lib/jvm/java-17/bin/java (deleted)");
	assert_int_equal(inspect(&f, &info), 0);
	assert_int_equal(info.verdict.block, FX_JVM_MAY_SIGNAL);
	fake_free(&f);

	/* Gone. */
	{
		struct fx_perfmap_owner o = { .proc_root = "/nonexistent-proc", .pid = 1 };

		assert_int_equal(fx_jvmattach_inspect(&o, &info), -ESRCH);
	}
}

/* No listener and not allowed to start one: -ENOENT, nothing signalled. */
static void test_no_listener(void **state)
{
	struct fx_perfmap_owner o = { .proc_root = "/proc", .pid = getpid(), .ns_pid = 999999999 };
	struct fx_jvm_info info = { .hotspot = true, .euid = 0 };
	char msg[64];

	(void)state;
	assert_int_equal(fx_jvmattach_perfmap(&o, &info, false, 0, 0, msg, sizeof(msg)), -ENOENT);
	assert_string_equal(msg, "");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_reply),	cmocka_unit_test(test_cmdline),
		cmocka_unit_test(test_environ), cmocka_unit_test(test_why),
		cmocka_unit_test(test_inspect), cmocka_unit_test(test_no_listener),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

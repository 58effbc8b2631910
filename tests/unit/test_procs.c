/* SPDX-License-Identifier: MIT */
/* The process table over a fake /proc tree: names and mappings read lazily,
 * address translation, mmap over existing ranges, fork/exec/exit. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "fxagent/procs.h"
#include "fxagent/window.h"

static char root[256];
static char self[4096];

static void write_file(const char *rel, const char *text)
{
	char path[512];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", root, rel);
	f = fopen(path, "w");
	assert_non_null(f);
	fputs(text, f);
	fclose(f);
}

static void make_dir(const char *rel)
{
	char path[512];

	snprintf(path, sizeof(path), "%s/%s", root, rel);
	assert_true(mkdir(path, 0700) == 0 || errno == EEXIST);
}

static int setup(void **state)
{
	char maps[16384];
	ssize_t n;

	(void)state;
	snprintf(root, sizeof(root), "/tmp/fx-test-procs-%d", (int)getpid());
	mkdir(root, 0700);
	snprintf(maps, sizeof(maps), "%s/100", root);
	mkdir(maps, 0700);
	snprintf(maps, sizeof(maps), "%s/100/task", root);
	mkdir(maps, 0700);
	snprintf(maps, sizeof(maps), "%s/100/task/101", root);
	mkdir(maps, 0700);
	n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	assert_true(n > 0);
	self[n] = '\0';
	write_file("100/comm", "worker\n");
	write_file("100/task/101/comm", "worker-io\n");
	snprintf(maps, sizeof(maps),
		 "00400000-00401000 r--p 00000000 fd:01 1234 %s\n"
		 "00401000-00405000 r-xp 00001000 fd:01 1234 %s\n"
		 "7f0000000000-7f0000010000 r-xp 00000000 00:00 0 \n"
		 "7fff00000000-7fff00001000 r-xp 00000000 00:00 0 [vdso]\n"
		 "garbage line\n",
		 self, self);
	write_file("100/maps", maps);
	return 0;
}

static int teardown(void **state)
{
	char cmd[300];

	(void)state;
	snprintf(cmd, sizeof(cmd), "rm -rf %s", root);
	return system(cmd) == 0 ? 0 : -1;
}

static void test_parse_maps_line(void **state)
{
	char l1[] = "7f12a000-7f12b000 r-xp 00002000 08:01 42 /usr/lib/libz.so.1 (deleted)\n";
	char l2[] = "7f12a000-7f12b000 rw-p 00002000 08:01 42 /usr/lib/libz.so.1\n";
	char l3[] = "nonsense";
	char l4[] = "7f12a000-7f12b000 r-xp 00000000 08:01 42 /opt/my app/bin\n";
	/* The kernel writes a newline in a path as \012, a backslash as itself. */
	char l5[] = "7f12a000-7f12b000 r-xp 00000000 08:01 42 /opt/a\\012b\\c\\01 (deleted)\n";
	uint64_t s, e, off, dev, ino;
	char *path;

	(void)state;
	assert_int_equal(fx_procs_parse_maps_line(l1, &s, &e, &off, &dev, &ino, &path), 1);
	assert_int_equal(s, 0x7f12a000);
	assert_int_equal(e, 0x7f12b000);
	assert_int_equal(off, 0x2000);
	assert_int_equal(ino, 42);
	assert_string_equal(path, "/usr/lib/libz.so.1");
	assert_int_equal(fx_procs_parse_maps_line(l2, &s, &e, &off, &dev, &ino, &path), 0);
	assert_int_equal(fx_procs_parse_maps_line(l3, &s, &e, &off, &dev, &ino, &path), -EINVAL);
	assert_int_equal(fx_procs_parse_maps_line(l4, &s, &e, &off, &dev, &ino, &path), 1);
	assert_string_equal(path, "/opt/my app/bin");
	assert_int_equal(fx_procs_parse_maps_line(l5, &s, &e, &off, &dev, &ino, &path), 1);
	assert_string_equal(path, "/opt/a\nb\\c\\01");
}

/* Names keep every byte: a comm may hold newlines and control bytes (the comm
 * file adds one "\n" of its own), a path newlines (maps escapes them). */
static void test_names_keep_every_byte(void **state)
{
	struct fx_objects *objs = fx_objects_new(root, 16);
	struct fx_procs *p = fx_procs_new(objs, root);
	struct fx_thread_name *v = NULL;
	struct fx_proc *proc;
	struct fx_window w;
	uint32_t obj;
	uint64_t off;
	size_t n = 0;

	(void)state;
	make_dir("110");
	make_dir("110/task");
	make_dir("110/task/111");
	make_dir("120");
	write_file("110/comm", "fx\nnl\x01\t\xc3\xa9\n");
	write_file("110/task/111/comm", "io\n\n");
	write_file("110/maps", "00400000-00401000 r-xp 00000000 fd:01 77 /no/such/a\\012b\\c\n");
	/* A kernel thread's name in the comm file may be longer than a comm. */
	write_file("120/comm", "kworker/u8:2-events_unbound\n");
	write_file("120/maps", "");

	proc = fx_procs_get(p, 110);
	assert_non_null(proc);
	assert_string_equal(proc->comm, "fx\nnl\x01\t\xc3\xa9");
	assert_string_equal(fx_procs_thread(p, 110, 111)->comm, "io\n");
	assert_true(fx_procs_resolve(proc, 0x400010, &obj, &off));
	assert_string_equal(fx_objects_get(objs, obj)->path, "/no/such/a\nb\\c");
	assert_string_equal(fx_objects_get(objs, obj)->name, "a\nb\\c");
	assert_string_equal(fx_procs_get(p, 120)->comm, "kworker/u8:2-ev");
	/* Side-band records carry the bytes as they are. */
	fx_procs_on_comm(p, 110, 111, "io\r\nx", false);
	assert_string_equal(fx_procs_find_thread(p, 111)->comm, "io\r\nx");

	fx_window_init(&w, 1000);
	assert_int_equal(fx_window_add_sample(&w, 1, 110, 111, FX_NONE), 0);
	assert_int_equal(fx_procs_names(p, &w, &v, &n), 0);
	assert_int_equal(n, 2);
	assert_string_equal(v[0].process, "fx\nnl\x01\t\xc3\xa9");
	assert_string_equal(v[0].thread, "fx\nnl\x01\t\xc3\xa9");
	assert_string_equal(v[1].thread, "io\r\nx");
	free(v);
	fx_window_release(&w);
	fx_procs_free(p);
	fx_objects_free(objs);
}

static void test_lazy_load_and_resolve(void **state)
{
	struct fx_objects *objs = fx_objects_new(root, 16);
	struct fx_procs *p = fx_procs_new(objs, root);
	struct fx_proc *proc;
	struct fx_thread *t;
	uint32_t obj;
	uint64_t off;
	const struct fx_object *ob;
	int fd;

	(void)state;
	proc = fx_procs_get(p, 100);
	assert_non_null(proc);
	assert_string_equal(proc->comm, "worker");
	/* The file mapping, anonymous code (a JIT's) and [vdso]. */
	assert_int_equal(proc->nmaps, 3);
	assert_true(fx_procs_resolve(proc, 0x401234, &obj, &off));
	assert_int_equal(off, 0x1234);
	ob = fx_objects_get(objs, obj);
	assert_non_null(ob);
	assert_string_equal(ob->path, self);
	/* Opened through the path (no map_files in the fake tree) and verified. */
	fd = fx_objects_dup_fd(objs, obj);
	assert_true(fd >= 0);
	close(fd);
	/* Anonymous code is the process's JIT object, by absolute address. */
	assert_true(fx_procs_resolve(proc, 0x7f0000000100, &obj, &off));
	assert_int_equal(off, 0x7f0000000100);
	ob = fx_objects_get(objs, obj);
	assert_non_null(ob);
	assert_int_equal(ob->jit_pid, 100);
	assert_string_equal(ob->path, "[jit pid 100]");
	assert_int_equal(fx_objects_dup_fd(objs, obj), -1);
	assert_false(fx_procs_resolve(proc, 0x500000, &obj, &off));
	t = fx_procs_thread(p, 100, 101);
	assert_non_null(t);
	assert_string_equal(t->comm, "worker-io");
	/* A process that is gone still gets a name. */
	proc = fx_procs_get(p, 999);
	assert_non_null(proc);
	assert_string_equal(proc->comm, "pid 999");
	fx_procs_free(p);
	fx_objects_free(objs);
}

/* Every (pid, tid) of a window's samples gets a name, the main thread first
 * in its process, whatever the values: the kernel reports -1 for a task it is
 * tearing down, and such samples must not fall out of the profile. */
static void test_names_of_window(void **state)
{
	struct fx_objects *objs = fx_objects_new(root, 16);
	struct fx_procs *p = fx_procs_new(objs, root);
	struct fx_thread_name *v = NULL;
	struct fx_window w;
	size_t n = 0;

	(void)state;
	assert_non_null(fx_procs_get(p, 100));
	assert_non_null(fx_procs_thread(p, 100, 101));
	fx_window_init(&w, 1000);
	assert_int_equal(fx_window_add_sample(&w, 1, 100, 101, FX_NONE), 0);
	assert_int_equal(fx_window_add_sample(&w, 2, UINT32_MAX, UINT32_MAX, FX_NONE), 0);
	assert_int_equal(fx_window_add_sample(&w, 3, 0x80000001u, 0x80000002u, FX_NONE), 0);
	assert_int_equal(fx_window_add_sample(&w, 4, 100, 101, FX_NONE), 0);
	assert_int_equal(fx_procs_names(p, &w, &v, &n), 0);
	/* 100/100 (added: a process's main thread), 100/101, the two of
	 * 0x80000001, and -1/-1. */
	assert_int_equal(n, 5);
	assert_int_equal(v[0].pid, 100);
	assert_int_equal(v[0].tid, 100);
	assert_string_equal(v[0].process, "worker");
	assert_int_equal(v[1].tid, 101);
	assert_string_equal(v[1].thread, "worker-io");
	assert_int_equal(v[2].pid, 0x80000001u);
	assert_int_equal(v[2].tid, 0x80000001u);
	assert_int_equal(v[3].tid, 0x80000002u);
	assert_int_equal(v[4].pid, UINT32_MAX);
	assert_int_equal(v[4].tid, UINT32_MAX);
	assert_string_equal(v[4].process, "exiting");
	free(v);
	fx_window_release(&w);
	fx_procs_free(p);
	fx_objects_free(objs);
}

static void test_mmap_splits_and_fork_exec(void **state)
{
	struct fx_objects *objs = fx_objects_new(root, 16);
	struct fx_procs *p = fx_procs_new(objs, root);
	struct fx_mapping_info m = { .pid = 100,
				     .start = 0x402000,
				     .end = 0x403000,
				     .path = "/nonexistent/libnew.so",
				     .dev = 1,
				     .ino = 2 };
	struct fx_proc *proc, *child;
	uint32_t obj, obj_new;
	uint64_t off;

	(void)state;
	proc = fx_procs_get(p, 100);
	fx_procs_on_mmap(p, &m, 0);
	/* The old mapping is split around the new one, with offsets kept. */
	assert_true(fx_procs_resolve(proc, 0x401010, &obj, &off));
	assert_int_equal(off, 0x1010);
	assert_true(fx_procs_resolve(proc, 0x402010, &obj_new, &off));
	assert_int_not_equal(obj, obj_new);
	assert_int_equal(off, 0x10);
	assert_true(fx_procs_resolve(proc, 0x404010, &obj, &off));
	assert_int_equal(off, 0x4010);

	fx_procs_on_fork(p, 200, 100, 200, 100);
	child = fx_procs_find(p, 200);
	assert_non_null(child);
	assert_string_equal(child->comm, "worker");
	assert_true(fx_procs_resolve(child, 0x402010, &obj, &off));
	assert_int_equal(obj, obj_new);
	fx_procs_on_comm(p, 200, 200, "fx-short", true);
	assert_string_equal(child->comm, "fx-short");
	assert_false(fx_procs_resolve(child, 0x402010, &obj, &off));
	/* A new thread is named after its creator until it renames itself. */
	fx_procs_on_fork(p, 200, 200, 201, 200);
	assert_string_equal(fx_procs_find_thread(p, 201)->comm, "fx-short");
	fx_procs_on_comm(p, 200, 201, "fx-helper", false);
	assert_string_equal(fx_procs_find_thread(p, 201)->comm, "fx-helper");
	assert_string_equal(child->comm, "fx-short");

	fx_procs_on_exit(p, 200, 201);
	fx_procs_on_exit(p, 200, 200);
	assert_non_null(fx_procs_find(p, 200)); /* kept until the window is written */
	fx_procs_sweep(p);
	assert_null(fx_procs_find(p, 200));
	assert_null(fx_procs_find_thread(p, 201));
	assert_non_null(fx_procs_find(p, 100));
	fx_procs_free(p);
	fx_objects_free(objs);
}

/* libfxfix.so mapped by @pid at 0x7f1000000000. */
static struct fx_mapping_info fixture_lib(uint32_t pid)
{
	return (struct fx_mapping_info){ .pid = pid,
					 .start = 0x7f1000000000,
					 .end = 0x7f1000010000,
					 .path = FX_FIXTURE_DIR "/libfxfix.so" };
}

/* An object (and its fd) stays while a live process maps it or a window not
 * yet written used it; after that it is retired, and a new mapping makes a
 * new object, under the id it had. */
static void test_unused_objects_retired(void **state)
{
	struct fx_objects *objs = fx_objects_new(root, 16);
	struct fx_procs *p = fx_procs_new(objs, root);
	struct fx_mapping_info lib = fixture_lib(300);
	struct fx_objects_stats st0, st;
	char copy[600];
	uint32_t self_id, lib_id, id, obj;
	uint64_t off, e1, e2, e3;
	int fd;

	(void)state;
	assert_true(fx_procs_resolve(fx_procs_get(p, 100), 0x401000, &self_id, &off));
	fx_procs_on_mmap(p, &lib, 0);
	assert_true(fx_procs_resolve(fx_procs_find(p, 300), 0x7f1000000010, &lib_id, &off));
	assert_int_not_equal(self_id, lib_id);
	fx_objects_get_stats(objs, &st0);

	/* Window 1: both processes live. */
	fx_procs_mark_objects(p);
	e1 = fx_objects_end_epoch(objs);
	assert_int_equal(fx_objects_retire_unused(objs, e1), 0);

	/* Window 2: pid 300 ran (its frames use the library) and exited. */
	fx_procs_on_exit(p, 300, 300);
	fx_objects_mark(objs, &lib_id, 1, sizeof(lib_id));
	fx_procs_mark_objects(p);
	e2 = fx_objects_end_epoch(objs);
	fx_procs_sweep(p);
	assert_int_equal(fx_objects_retire_unused(objs, e1), 0);
	/* Until window 2 is written its library must stay readable. */
	assert_int_equal(fx_objects_retire_unused(objs, e2), 0);
	fd = fx_objects_dup_fd(objs, lib_id);
	assert_true(fd >= 0);
	close(fd);

	/* Window 3: nothing maps or used the library; written, it goes. */
	fx_procs_mark_objects(p);
	e3 = fx_objects_end_epoch(objs);
	assert_int_equal(fx_objects_retire_unused(objs, e3), 1);
	assert_null(fx_objects_get(objs, lib_id));
	assert_int_equal(fx_objects_dup_fd(objs, lib_id), -1);
	fd = fx_objects_dup_fd(objs, self_id);
	assert_true(fd >= 0);
	close(fd);
	fx_objects_get_stats(objs, &st);
	assert_int_equal(st.fds, st0.fds - 1);
	assert_int_equal(st.closed_unused, 1);
	assert_int_equal(st.retired, 1);
	assert_int_equal(st.objects, st0.objects - 1);
	assert_int_equal(st.entries, st0.entries - 1);
	assert_true(st.bytes < st0.bytes);

	/* Another process maps it: a new object, under a new id (a cache
	 * keyed by id never sees another file under one it knows), opened
	 * again. */
	lib.pid = 400;
	fx_procs_on_mmap(p, &lib, 0);
	assert_true(fx_procs_resolve(fx_procs_find(p, 400), 0x7f1000000010, &id, &off));
	assert_int_not_equal(id, lib_id);
	assert_null(fx_objects_get(objs, lib_id));
	assert_int_equal(fx_objects_file(objs, lib_id), lib_id);
	assert_string_equal(fx_objects_get(objs, id)->name, "libfxfix.so");
	fd = fx_objects_dup_fd(objs, id);
	assert_true(fd >= 0);
	close(fd);
	fx_objects_get_stats(objs, &st);
	assert_int_equal(st.fds, st0.fds);
	assert_int_equal(st.objects, st0.objects);

	/* A copy at another path, read from /proc/PID/maps (no build-id
	 * given), turns out to be the same build-id: the known file's object
	 * at its own path, its fd shared; both go when nothing uses them. */
	snprintf(copy, sizeof(copy), "cp %s %s/libcopy.so", lib.path, root);
	assert_int_equal(system(copy), 0);
	snprintf(copy, sizeof(copy), "%s/libcopy.so", root);
	lib.pid = 500;
	lib.path = copy;
	fx_procs_on_mmap(p, &lib, 0);
	assert_true(fx_procs_resolve(fx_procs_find(p, 500), 0x7f1000000010, &obj, &off));
	assert_int_not_equal(obj, id);
	assert_string_equal(fx_objects_get(objs, obj)->path, copy);
	assert_string_equal(fx_objects_get(objs, obj)->name, "libcopy.so");
	assert_memory_equal(fx_objects_get(objs, obj)->build_id, fx_objects_get(objs, id)->build_id,
			    fx_objects_get(objs, id)->build_id_len);
	fd = fx_objects_dup_fd(objs, obj);
	assert_true(fd >= 0);
	close(fd);
	fx_objects_get_stats(objs, &st);
	assert_int_equal(st.fds, st0.fds);
	assert_int_equal(st.objects, st0.objects);
	assert_int_equal(st.entries, st0.entries + 1);
	fx_procs_on_exit(p, 400, 400);
	fx_procs_on_exit(p, 500, 500);
	fx_procs_sweep(p);
	fx_objects_end_epoch(objs); /* the window they were mapped in */
	fx_procs_mark_objects(p);
	assert_int_equal(fx_objects_retire_unused(objs, fx_objects_end_epoch(objs)), 2);
	fx_objects_get_stats(objs, &st);
	assert_int_equal(st.fds, st0.fds - 1);
	assert_int_equal(st.entries, st0.entries - 1);
	fx_procs_free(p);
	fx_objects_free(objs);
}

/* Binaries that come and go (a build host runs new ones all day) do not
 * grow the table but by their ids' slots: each is retired once written. */
static void test_objects_do_not_grow(void **state)
{
	struct fx_objects *objs = fx_objects_new(root, 16);
	struct fx_objects_stats st;
	char path[64];
	uint32_t id;

	(void)state;
	for (uint32_t i = 0; i < 1000; i++) {
		/* Three new binaries a window, none of them readable here. */
		for (uint32_t k = 0; k < 3; k++) {
			struct fx_mapping_info m = { .pid = 1,
						     .start = 0x1000,
						     .end = 0x2000,
						     .path = path,
						     .dev = 7,
						     .ino = 3 * i + k };

			snprintf(path, sizeof(path), "/no/such/build-%u-%u", i, k);
			id = fx_objects_intern(objs, &m);
			assert_int_not_equal(id, FX_NONE);
			assert_int_equal(fx_objects_intern(objs, &m), id);
		}
		/* The window is written: what the one before used goes. */
		fx_objects_retire_unused(objs, fx_objects_end_epoch(objs));
	}
	fx_objects_get_stats(objs, &st);
	assert_int_equal(st.entries, 3);
	assert_int_equal(st.retired, 2997);
	fx_objects_retire_unused(objs, fx_objects_end_epoch(objs));
	fx_objects_get_stats(objs, &st);
	assert_int_equal(st.entries, 0);
	assert_int_equal(st.objects, 0);
	assert_int_equal(st.retired, 3000);
	assert_int_equal(fx_objects_count(objs), 3000);
	/* What is left: 8 bytes an id (the slots' array, doubled as it grew),
	 * indexes sized for two windows' binaries. */
	assert_true(st.bytes < 4096 * 8 + 4096);
	fx_objects_free(objs);
}

/* One file (one build-id) at two paths, as perf MMAP2 records report it: an
 * object per path, so each process's frames name its own path, and one fd
 * for both, kept while either is in use. */
static void test_one_file_two_paths(void **state)
{
	struct fx_objects *objs = fx_objects_new(root, 16);
	struct fx_mapping_info a = fixture_lib(600), b;
	struct fx_objects_stats st;
	uint8_t bid[FX_BUILD_ID_MAX];
	char copy[600], deleted[620];
	uint32_t ida, idb;
	int fd, len;

	(void)state;
	fd = fx_elf_open_regular(a.path);
	assert_true(fd >= 0);
	len = fx_elf_build_id_fd(fd, bid, sizeof(bid));
	close(fd);
	assert_true(len > 0);
	snprintf(copy, sizeof(copy), "cp %s %s/libtwo.so", a.path, root);
	assert_int_equal(system(copy), 0);
	snprintf(copy, sizeof(copy), "%s/libtwo.so", root);
	a.build_id = bid;
	a.build_id_len = (size_t)len;
	b = a;
	b.pid = 601;
	b.path = copy;

	ida = fx_objects_intern(objs, &a);
	idb = fx_objects_intern(objs, &b);
	assert_int_not_equal(ida, FX_NONE);
	assert_int_not_equal(idb, FX_NONE);
	assert_int_not_equal(ida, idb);
	assert_string_equal(fx_objects_get(objs, ida)->path, a.path);
	assert_string_equal(fx_objects_get(objs, idb)->path, copy);
	assert_string_equal(fx_objects_get(objs, idb)->name, "libtwo.so");
	assert_int_equal(fx_objects_get(objs, idb)->build_id_len, len);
	/* Seen again, by any process, at either path: the same objects. */
	a.pid = b.pid = 602;
	assert_int_equal(fx_objects_intern(objs, &a), ida);
	assert_int_equal(fx_objects_intern(objs, &b), idb);
	snprintf(deleted, sizeof(deleted), "%s (deleted)", copy);
	b.path = deleted;
	assert_int_equal(fx_objects_intern(objs, &b), idb);
	b.path = copy;
	/* The file is opened once. */
	fx_objects_get_stats(objs, &st);
	assert_int_equal(st.objects, 1);
	assert_int_equal(st.fds, 1);
	assert_int_equal(fx_objects_count(objs), 2);
	fd = fx_objects_dup_fd(objs, idb);
	assert_true(fd >= 0);
	close(fd);

	/* Used at one path only: the file stays (with the object of its first
	 * path, which holds it). */
	fx_objects_end_epoch(objs);
	fx_objects_mark(objs, &idb, 1, sizeof(idb));
	assert_int_equal(fx_objects_retire_unused(objs, fx_objects_end_epoch(objs)), 0);
	fd = fx_objects_dup_fd(objs, idb);
	assert_true(fd >= 0);
	close(fd);
	/* Used at none: both go, the fd with them; mapped again, it is back. */
	assert_int_equal(fx_objects_retire_unused(objs, fx_objects_end_epoch(objs)), 2);
	assert_null(fx_objects_get(objs, ida));
	assert_int_equal(fx_objects_dup_fd(objs, ida), -1);
	assert_int_equal(fx_objects_dup_fd(objs, idb), -1);
	fx_objects_get_stats(objs, &st);
	assert_int_equal(st.fds, 0);
	idb = fx_objects_intern(objs, &b);
	assert_int_not_equal(idb, FX_NONE);
	assert_string_equal(fx_objects_get(objs, idb)->path, copy);
	fd = fx_objects_dup_fd(objs, idb);
	assert_true(fd >= 0);
	close(fd);
	fx_objects_free(objs);
}

/* @src copied to @dst by a rename over it, as dpkg installs a file. */
static void rename_over(const char *src, const char *dst)
{
	char cmd[2200], tmp[1100];

	snprintf(tmp, sizeof(tmp), "%s.new", dst);
	snprintf(cmd, sizeof(cmd), "cp %s %s", src, tmp);
	assert_int_equal(system(cmd), 0);
	assert_int_equal(rename(tmp, dst), 0);
}

/* A file replaced under a process that maps it (a package upgrade): the
 * object still reads the mapped file, and says its path names another now,
 * whether that happened before it was first seen or after. This process is
 * the one mapping it, through the real /proc. */
static void test_replaced_path(void **state)
{
	struct fx_objects *objs = fx_objects_new("/proc", 16);
	char path[600], path2[600], other[600];
	struct fx_mapping_info m = { .pid = (uint32_t)getpid() }, m2;
	void *at, *at2;
	uint32_t id, id2;
	int fd;

	(void)state;
	snprintf(path, sizeof(path), "%s/app", root);
	snprintf(path2, sizeof(path2), "%s/app2", root);
	snprintf(other, sizeof(other), "%s/other", root);
	rename_over(self, path);
	rename_over(self, path2);
	rename_over(FX_FIXTURE_DIR "/libfxfix.so", other);

	fd = open(path, O_RDONLY | O_CLOEXEC);
	assert_true(fd >= 0);
	at = mmap(NULL, 4096, PROT_READ, MAP_PRIVATE, fd, 0);
	close(fd);
	fd = open(path2, O_RDONLY | O_CLOEXEC);
	assert_true(fd >= 0);
	at2 = mmap(NULL, 4096, PROT_READ, MAP_PRIVATE, fd, 0);
	close(fd);
	assert_true(at != MAP_FAILED && at2 != MAP_FAILED);
	m.start = (uint64_t)(uintptr_t)at;
	m.end = m.start + 4096;
	m.path = path;
	m2 = m;
	m2.start = (uint64_t)(uintptr_t)at2;
	m2.end = m2.start + 4096;
	m2.path = path2;

	/* Replaced before it is seen. */
	rename_over(other, path);
	id = fx_objects_intern(objs, &m);
	assert_int_not_equal(id, FX_NONE);
	assert_true(fx_objects_replaced(objs, id));
	/* Read through the mapping: this test binary's build-id, not the
	 * fixture library's that is at the path now. */
	assert_true(fx_objects_get(objs, id)->build_id_len > 0);

	/* Seen, then replaced: told at the next question a second on. */
	id2 = fx_objects_intern(objs, &m2);
	assert_false(fx_objects_replaced(objs, id2));
	rename_over(self, path2); /* a new inode, the same build: not another */
	usleep(1100 * 1000);
	assert_false(fx_objects_replaced(objs, id2));
	rename_over(other, path2);
	assert_false(fx_objects_replaced(objs, id2)); /* asked less than a second ago */
	usleep(1100 * 1000);
	assert_true(fx_objects_replaced(objs, id2));
	/* Deleted: the same. */
	assert_int_equal(unlink(path), 0);
	assert_true(fx_objects_replaced(objs, id));

	munmap(at, 4096);
	munmap(at2, 4096);
	fx_objects_free(objs);
}

static void test_many_processes_and_sweeps(void **state)
{
	struct fx_objects *objs = fx_objects_new(root, 16);
	struct fx_procs *p = fx_procs_new(objs, root);
	struct fx_procs_stats st;

	(void)state;
	/* Churn through removals (each fills its hole with the last entry):
	 * entries stay findable and counts right. */
	for (uint32_t round = 0; round < 20; round++) {
		for (uint32_t i = 0; i < 500; i++) {
			uint32_t pid = 10000 + round * 500 + i;

			fx_procs_on_fork(p, pid, 100, pid, 100);
			if (i % 2)
				fx_procs_on_exit(p, pid, pid);
		}
		fx_procs_sweep(p);
	}
	fx_procs_get_stats(p, &st);
	assert_int_equal(st.procs, 1 + 20 * 250);
	for (uint32_t round = 0; round < 20; round++) {
		for (uint32_t i = 0; i < 500; i += 2) {
			assert_non_null(fx_procs_find(p, 10000 + round * 500 + i));
			assert_non_null(fx_procs_find_thread(p, 10000 + round * 500 + i));
			assert_null(fx_procs_find(p, 10000 + round * 500 + i + 1));
			assert_null(fx_procs_find_thread(p, 10000 + round * 500 + i + 1));
		}
	}
	fx_procs_free(p);
	fx_objects_free(objs);
}

/* A process whose EXIT record was lost (a ring overflowed) is found gone from
 * the proc root, swept with its threads, and the fd of the library only it
 * mapped is closed; live processes stay. A budget of N looks at N live
 * processes a call, taking turns, so each is looked at in time. */
static void test_lost_exit_reaped(void **state)
{
	struct fx_objects *objs = fx_objects_new(root, 16);
	struct fx_procs *p = fx_procs_new(objs, root);
	struct fx_mapping_info lib = fixture_lib(300);
	struct fx_procs_stats st;
	uint32_t lib_id;
	uint64_t off;
	size_t marked;

	(void)state;
	assert_non_null(fx_procs_get(p, 100));
	fx_procs_on_fork(p, 100, 100, 101, 100);
	fx_procs_on_mmap(p, &lib, 0); /* pid 300: no directory in the root */
	fx_procs_on_fork(p, 300, 300, 301, 300);
	assert_true(fx_procs_resolve(fx_procs_find(p, 300), 0x7f1000000010, &lib_id, &off));

	/* Without its EXIT a sweep keeps it, and its library stays open. */
	fx_procs_sweep(p);
	assert_non_null(fx_procs_find(p, 300));
	fx_procs_mark_objects(p);
	assert_int_equal(fx_objects_retire_unused(objs, fx_objects_end_epoch(objs)), 0);

	/* 40 more gone, 42 in all to look at, 8 a call: every one is found in
	 * the 6 calls it takes to look at each once. */
	for (uint32_t pid = 1000; pid < 1040; pid++)
		fx_procs_on_fork(p, pid, 100, pid, 101);
	marked = 0;
	for (int i = 0; i < 6; i++)
		marked += fx_procs_reap_gone(p, 8);
	assert_int_equal(marked, 41);
	assert_int_equal(fx_procs_reap_gone(p, 100), 0); /* nothing more to find */
	fx_procs_get_stats(p, &st);
	assert_int_equal(st.reaped_gone, 41);
	fx_procs_sweep(p);
	assert_null(fx_procs_find(p, 300));
	assert_null(fx_procs_find_thread(p, 301));
	assert_null(fx_procs_find(p, 1039));
	assert_non_null(fx_procs_find(p, 100));
	assert_non_null(fx_procs_find_thread(p, 101));

	/* Nothing maps the library now: its fd goes with the next window. */
	fx_procs_mark_objects(p);
	assert_int_equal(fx_objects_retire_unused(objs, fx_objects_end_epoch(objs)), 1);
	assert_int_equal(fx_objects_dup_fd(objs, lib_id), -1);
	fx_procs_free(p);
	fx_objects_free(objs);
}

/* Processes and threads with no sample or record for a whole round are
 * dropped (and read from /proc again when they run again); a table a burst
 * of processes grew gives its memory back once they are gone. */
static void test_idle_dropped(void **state)
{
	struct fx_objects *objs = fx_objects_new(root, 16);
	struct fx_procs *p = fx_procs_new(objs, root);
	struct fx_procs_stats st0, st1, st;
	uint32_t obj;
	uint64_t off, mark;

	(void)state;
	assert_non_null(fx_procs_thread(p, 100, 101));
	fx_procs_get_stats(p, &st0);
	for (uint32_t pid = 1000; pid < 11000; pid++)
		fx_procs_on_fork(p, pid, 100, pid, 101);
	fx_procs_get_stats(p, &st1);
	assert_int_equal(st1.procs, 10001);
	assert_int_equal(st1.threads, 10001);

	/* A round in which only 100 and its thread 101 run. */
	mark = fx_procs_mark(p);
	assert_non_null(fx_procs_get(p, 100));
	assert_non_null(fx_procs_thread(p, 100, 101));
	assert_int_equal(fx_procs_drop_idle(p, mark), 10000);
	fx_procs_get_stats(p, &st);
	assert_int_equal(st.procs, 1);
	assert_int_equal(st.threads, 1);
	assert_int_equal(st.idle_procs, 10000);
	assert_int_equal(st.idle_threads, 10000);
	assert_null(fx_procs_find(p, 1000));
	assert_null(fx_procs_find_thread(p, 10999));
	assert_non_null(fx_procs_find_thread(p, 101));
	/* The memory of the 10000 is back, but for a small table's. */
	assert_true(st.proc_bytes < st0.proc_bytes + 4096);
	assert_true(st.thread_bytes < st0.thread_bytes + 4096);
	assert_true(st1.proc_bytes > st0.proc_bytes + 10000 * sizeof(struct fx_proc));

	/* Idle for a round itself: dropped, and read again when it runs. */
	mark = fx_procs_mark(p);
	assert_int_equal(fx_procs_drop_idle(p, mark), 1);
	assert_null(fx_procs_find(p, 100));
	assert_null(fx_procs_find_thread(p, 101));
	assert_string_equal(fx_procs_thread(p, 100, 101)->comm, "worker-io");
	assert_string_equal(fx_procs_find(p, 100)->comm, "worker");
	assert_true(fx_procs_resolve(fx_procs_find(p, 100), 0x401000, &obj, &off));
	fx_procs_free(p);
	fx_objects_free(objs);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_parse_maps_line),
		cmocka_unit_test(test_lazy_load_and_resolve),
		cmocka_unit_test(test_names_keep_every_byte),
		cmocka_unit_test(test_names_of_window),
		cmocka_unit_test(test_mmap_splits_and_fork_exec),
		cmocka_unit_test(test_unused_objects_retired),
		cmocka_unit_test(test_objects_do_not_grow),
		cmocka_unit_test(test_one_file_two_paths),
		cmocka_unit_test(test_replaced_path),
		cmocka_unit_test(test_many_processes_and_sweeps),
		cmocka_unit_test(test_lost_exit_reaped),
		cmocka_unit_test(test_idle_dropped),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}

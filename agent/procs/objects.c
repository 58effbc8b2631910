/* SPDX-License-Identifier: MIT */
#include "fxagent/objects.h"

#include <errno.h>
#include <pthread.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fxagent/hash.h"
#include "fxagent/hashtab.h"
#include "fxagent/log.h"
#include "fxagent/util.h"
#include "fxagent/window.h"

/* An object (one file at one path) and what only this module may touch.
 * The file's state is on the entry of the first path it was seen at (its
 * "file" entry, file == ob.id); the entries of its other paths point there.
 * Marking a path's entry marks its file's too, so a file entry is never
 * older than its paths'. Others get copies of the fd: a known file without
 * one may get one later. */
struct fx_file_id {
	uint64_t dev, ino;
};

struct entry {
	struct fx_object ob; /* first: fx_objects_get() hands out &e->ob */
	uint32_t file;	     /* id of the entry that holds the file's state */
	int fd;		     /* of a file entry: open, verified fd; -1 when none */
	uint64_t used;	     /* last epoch it was interned or marked */
	bool dying;	     /* retired by the fx_objects_retire_unused() under way */
	/* Whether the path now names another file (fx_objects_replaced()):
	 * asked through the root of the last process that mapped it, at most
	 * once a second (checked: CLOCK_MONOTONIC ns, 0 never); once replaced,
	 * for good. same: the (dev, ino) the path showed when last found to be
	 * this file under another inode (a container's overlay). */
	uint32_t pid;
	uint64_t checked;
	bool replaced;
	struct fx_file_id same;
};

struct alias {
	uint64_t dev, ino;
	char *path;
	uint32_t id;
};

struct fx_objects {
	/* The sampler thread adds objects while the publisher thread reads them. */
	pthread_mutex_t lock;
	char *proc_root;
	size_t max_open;
	/* By id; NULL: a retired object's. Ids are never given again: others
	 * (the unwinder's tables) map an id to its file for good. */
	struct entry **v;
	size_t n, cap;
	uint64_t epoch; /* the current one; starts at 1 */
	/* A mapping's (dev, ino, path) names one object; several files may
	 * name the same build-id. */
	struct alias *aliases;
	size_t naliases, aliases_cap;
	/* File entries by build-id, aliases by (dev, ino, path), objects by
	 * (file, path). */
	struct fx_hashtab by_bid, by_file, by_path;
	struct fx_objects_stats stats;
};

static uint64_t bid_hash(const uint8_t *bid, size_t len)
{
	return fx_hash_bytes(bid, len);
}

static uint64_t file_hash(uint64_t dev, uint64_t ino, const char *path)
{
	uint64_t h = fx_hash_add(FX_HASH_INIT, &dev, sizeof(dev));

	h = fx_hash_add(h, &ino, sizeof(ino));
	return fx_mix64(fx_hash_add(h, path, strlen(path)));
}

static uint64_t path_hash(uint32_t file, const char *path, size_t len)
{
	return fx_mix64(fx_hash_add(fx_hash_add(FX_HASH_INIT, &file, sizeof(file)), path, len));
}

struct fx_objects *fx_objects_new(const char *proc_root, size_t max_open)
{
	struct fx_objects *o = calloc(1, sizeof(*o));

	if (!o)
		return NULL;
	o->proc_root = strdup(proc_root ? proc_root : "/proc");
	if (!o->proc_root) {
		free(o);
		return NULL;
	}
	o->max_open = max_open;
	o->epoch = 1;
	pthread_mutex_init(&o->lock, NULL);
	return o;
}

void fx_objects_free(struct fx_objects *o)
{
	if (!o)
		return;
	for (size_t i = 0; i < o->n; i++) {
		if (!o->v[i])
			continue;
		if (o->v[i]->fd >= 0)
			close(o->v[i]->fd);
		free(o->v[i]->ob.path);
		free(o->v[i]);
	}
	for (size_t i = 0; i < o->naliases; i++)
		free(o->aliases[i].path);
	free(o->aliases);
	free(o->v);
	fx_hashtab_free(&o->by_bid);
	fx_hashtab_free(&o->by_file);
	fx_hashtab_free(&o->by_path);
	free(o->proc_root);
	pthread_mutex_destroy(&o->lock);
	free(o);
}

/* The keys of look-ups, as the equality callbacks take them. */
struct bid_key {
	const uint8_t *bid;
	size_t len;
};

struct file_key {
	uint64_t dev, ino;
	const char *path;
};

struct path_key {
	uint32_t file;
	const char *path;
	size_t len; /* no NUL among the bytes */
};

static uint64_t bid_hash_at(const void *ctx, uint32_t id)
{
	const struct fx_object *ob = &((const struct fx_objects *)ctx)->v[id]->ob;

	return bid_hash(ob->build_id, ob->build_id_len);
}

static bool bid_eq(const void *ctx, uint32_t id, const void *key)
{
	const struct fx_object *ob = &((const struct fx_objects *)ctx)->v[id]->ob;
	const struct bid_key *k = key;

	return ob->build_id_len == k->len && memcmp(ob->build_id, k->bid, k->len) == 0;
}

static uint64_t file_hash_at(const void *ctx, uint32_t i)
{
	const struct alias *a = &((const struct fx_objects *)ctx)->aliases[i];

	return file_hash(a->dev, a->ino, a->path);
}

static bool file_eq(const void *ctx, uint32_t i, const void *key)
{
	const struct alias *a = &((const struct fx_objects *)ctx)->aliases[i];
	const struct file_key *k = key;

	return a->dev == k->dev && a->ino == k->ino && strcmp(a->path, k->path) == 0;
}

static uint64_t path_hash_at(const void *ctx, uint32_t id)
{
	const struct entry *e = ((const struct fx_objects *)ctx)->v[id];

	return path_hash(e->file, e->ob.path, strlen(e->ob.path));
}

static bool path_eq(const void *ctx, uint32_t id, const void *key)
{
	const struct entry *e = ((const struct fx_objects *)ctx)->v[id];
	const struct path_key *k = key;

	return e->file == k->file && strlen(e->ob.path) == k->len &&
	       !memcmp(e->ob.path, k->path, k->len);
}

static uint32_t find_bid(const struct fx_objects *o, const uint8_t *bid, size_t len)
{
	const struct bid_key k = { .bid = bid, .len = len };

	return fx_hashtab_find(&o->by_bid, bid_hash(bid, len), bid_eq, o, &k);
}

static uint32_t find_file(const struct fx_objects *o, uint64_t dev, uint64_t ino, const char *path)
{
	const struct file_key k = { .dev = dev, .ino = ino, .path = path };
	uint32_t i = fx_hashtab_find(&o->by_file, file_hash(dev, ino, path), file_eq, o, &k);

	return i == FX_HASHTAB_NONE ? FX_NONE : o->aliases[i].id;
}

/* The object of @file at @path (@len bytes, no NUL among them), or FX_NONE. */
static uint32_t find_path(const struct fx_objects *o, uint32_t file, const char *path, size_t len)
{
	const struct path_key k = { .file = file, .path = path, .len = len };

	return fx_hashtab_find(&o->by_path, path_hash(file, path, len), path_eq, o, &k);
}

static void index_object(struct fx_objects *o, const struct entry *e)
{
	const struct fx_object *ob = &e->ob;

	/* Only a file entry answers for a build-id: the others share its file. */
	if (ob->build_id_len && e->file == ob->id)
		fx_hashtab_insert(&o->by_bid, bid_hash(ob->build_id, ob->build_id_len), ob->id);
	fx_hashtab_insert(&o->by_path, path_hash(e->file, ob->path, strlen(ob->path)), ob->id);
}

static void index_alias(struct fx_objects *o, size_t i)
{
	const struct alias *a = &o->aliases[i];

	fx_hashtab_insert(&o->by_file, file_hash(a->dev, a->ino, a->path), (uint32_t)i);
}

/* Makes room for one more object and one more alias. */
static int reserve(struct fx_objects *o)
{
	if (fx_grow(&o->aliases, &o->aliases_cap, o->naliases + 1, sizeof(*o->aliases)) < 0 ||
	    /* o->v is an array of pointers.
	     * NOLINTNEXTLINE(bugprone-sizeof-expression) */
	    fx_grow(&o->v, &o->cap, o->n + 1, sizeof(*o->v)) < 0 ||
	    fx_hashtab_reserve(&o->by_bid, o->by_bid.count + 1, bid_hash_at, o) < 0 ||
	    fx_hashtab_reserve(&o->by_path, o->by_path.count + 1, path_hash_at, o) < 0 ||
	    fx_hashtab_reserve(&o->by_file, o->naliases + 1, file_hash_at, o) < 0)
		return -ENOMEM;
	return 0;
}

/* The length of @path without the " (deleted)" the kernel appends to the
 * path of a file unlinked before the record was made: the binary is still
 * PATH to the user. */
static size_t shown_len(const char *path)
{
	size_t len = strlen(path);

	return len > 10 && strcmp(path + len - 10, " (deleted)") == 0 ? len - 10 : len;
}

static struct entry *new_entry(const char *path)
{
	struct entry *e = calloc(1, sizeof(*e));
	const char *slash;

	if (!e)
		return NULL;
	e->ob.path = strndup(path, shown_len(path));
	if (!e->ob.path) {
		free(e);
		return NULL;
	}
	slash = strrchr(e->ob.path, '/');
	e->ob.name = slash ? slash + 1 : e->ob.path;
	e->fd = -1;
	return e;
}

/* The object of the known file @file at @path: each process's frames name
 * the path it mapped the file at, while the fd (and the symbolizer's state,
 * keyed by build-id) stay shared. FX_NONE on ENOMEM. */
static uint32_t path_object(struct fx_objects *o, uint32_t file, const char *path)
{
	const struct fx_object *fob = &o->v[file]->ob;
	struct entry *e;
	uint32_t id = find_path(o, file, path, shown_len(path));

	if (id != FX_NONE)
		return id;
	if (reserve(o) < 0 || !(e = new_entry(path)))
		return FX_NONE;
	e->file = file;
	e->used = o->epoch;
	e->ob.id = (uint32_t)o->n;
	e->ob.dev = fob->dev;
	e->ob.ino = fob->ino;
	memcpy(e->ob.build_id, fob->build_id, fob->build_id_len);
	e->ob.build_id_len = fob->build_id_len;
	e->ob.special = fob->special;
	o->v[o->n++] = e;
	index_object(o, e);
	return e->ob.id;
}

static int add_alias(struct fx_objects *o, const struct fx_mapping_info *m, uint32_t id)
{
	struct alias *a = &o->aliases[o->naliases];

	a->path = strdup(m->path);
	if (!a->path)
		return -ENOMEM;
	a->dev = m->dev;
	a->ino = m->ino;
	a->id = id;
	index_alias(o, o->naliases++);
	return 0;
}

/* Opens the file as the process sees it. The fd is accepted only if its
 * build-id matches the one the kernel reported, or the one the object already
 * has (a path on the host may name another file than the one a container
 * mapped). */
static int open_object(struct fx_objects *o, const struct fx_mapping_info *m, struct entry *e)
{
	struct fx_object *ob = &e->ob;
	const uint8_t *want = m->build_id_len ? m->build_id : ob->build_id;
	size_t want_len = m->build_id_len ? m->build_id_len : ob->build_id_len;
	const char *tries[3];
	size_t ntries = 0;
	char mf[128], root[4096];

	snprintf(mf, sizeof(mf), "%s/%" PRIu32 "/map_files/%" PRIx64 "-%" PRIx64, o->proc_root,
		 m->pid, m->start, m->end);
	tries[ntries++] = mf;
	if (m->path[0] == '/') {
		snprintf(root, sizeof(root), "%s/%" PRIu32 "/root%s", o->proc_root, m->pid,
			 m->path);
		tries[ntries++] = root;
		tries[ntries++] = m->path;
	}
	for (size_t i = 0; i < ntries; i++) {
		uint8_t bid[FX_BUILD_ID_MAX];
		/* A path of a process that is gone is looked up on the host,
		 * where anything, a FIFO too, may be at it. */
		int fd = fx_elf_open_regular(tries[i]);
		int len;

		if (fd < 0)
			continue;
		len = fx_elf_build_id_fd(fd, bid, sizeof(bid));
		if (want_len && (len != (int)want_len || memcmp(bid, want, want_len))) {
			close(fd);
			continue;
		}
		if (len > 0 && !ob->build_id_len) {
			memcpy(ob->build_id, bid, len);
			ob->build_id_len = len;
		}
		if (!ob->dev && !ob->ino) {
			struct stat st;

			if (fstat(fd, &st) == 0) {
				ob->dev = st.st_dev;
				ob->ino = st.st_ino;
			}
		}
		e->fd = fd;
		return 0;
	}
	return -ENOENT;
}

/* Every 64-bit process of this kernel maps the same vDSO image as we do: a
 * copy of ours in a memfd lets vDSO frames (clock_gettime and friends) be
 * unwound and named. Checked against the build-id the kernel reported. */
static void open_vdso(struct fx_objects *o, const struct fx_mapping_info *m, struct entry *e)
{
	struct fx_object *ob = &e->ob;
	uint8_t bid[FX_BUILD_ID_MAX];
	uint64_t base = getauxval(AT_SYSINFO_EHDR), start = 0, end = 0;
	char line[256];
	FILE *f;
	int fd, len;

	if (!base || !(f = fopen("/proc/self/maps", "re")))
		return;
	while (fgets(line, sizeof(line), f)) {
		unsigned long long a, b;

		if (strstr(line, "[vdso]") && sscanf(line, "%llx-%llx", &a, &b) == 2) {
			start = a;
			end = b;
		}
	}
	fclose(f);
	if (start != base || end <= start)
		return;
	fd = memfd_create("vdso", MFD_CLOEXEC);
	if (fd < 0)
		return;
	/* Our own vDSO image, at the address /proc/self/maps gave.
	 * NOLINTNEXTLINE(performance-no-int-to-ptr) */
	if (write(fd, (const void *)(uintptr_t)start, end - start) != (ssize_t)(end - start)) {
		close(fd);
		return;
	}
	len = fx_elf_build_id_fd(fd, bid, sizeof(bid));
	if (m->build_id_len && (len != (int)m->build_id_len || memcmp(bid, m->build_id, len))) {
		close(fd); /* another image: a 32-bit process's */
		return;
	}
	if (len > 0 && !ob->build_id_len) {
		memcpy(ob->build_id, bid, (size_t)len);
		ob->build_id_len = (size_t)len;
	}
	e->fd = fd;
	o->stats.fds++;
}

/* Whether @path, as process @pid sees it, names another file than @st's
 * (the one the process mapped): 1 when deleted or replaced since (a package
 * upgrade renames a new build over a running binary), 0 when the same file,
 * <0 when it cannot tell (the process is gone). Another (dev, ino) is still
 * the same file when its build-id (without one: size and mtime) is: a
 * container's overlay shows its own inode for the file a mapping holds.
 * *@same is that (dev, ino) once found the same, so that it is not read
 * again at the next question. */
static int path_replaced(const char *proc_root, uint32_t pid, const char *path,
			 const struct stat *st, const uint8_t *bid, size_t bid_len,
			 struct fx_file_id *same)
{
	char root[128], at[4096];
	struct stat now;
	uint8_t got[FX_BUILD_ID_MAX];
	int pfd, len, other;

	/* A memfd's "path" never was on disk. */
	if (path[0] != '/' || !strncmp(path, "/memfd:", 7))
		return -EINVAL;
	snprintf(root, sizeof(root), "%s/%" PRIu32 "/root", proc_root, pid);
	if (snprintf(at, sizeof(at), "%s%s", root, path) >= (int)sizeof(at))
		return -ENAMETOOLONG;
	if (stat(at, &now) < 0) {
		int err = errno;

		/* The process (its root) gone says nothing of the file. */
		if (stat(root, &now) < 0)
			return -ESRCH;
		return err == ENOENT || err == ENOTDIR ? 1 : -err;
	}
	if ((now.st_dev == st->st_dev && now.st_ino == st->st_ino) ||
	    (now.st_dev == same->dev && now.st_ino == same->ino))
		return 0;
	if (!bid_len) {
		other = now.st_size != st->st_size || now.st_mtim.tv_sec != st->st_mtim.tv_sec ||
			now.st_mtim.tv_nsec != st->st_mtim.tv_nsec;
	} else {
		pfd = fx_elf_open_regular(at);
		if (pfd < 0)
			return 1; /* not a regular ELF file now: not what ran */
		len = fx_elf_build_id_fd(pfd, got, sizeof(got));
		close(pfd);
		other = len != (int)bid_len || memcmp(got, bid, bid_len) != 0;
	}
	if (!other)
		*same = (struct fx_file_id){ now.st_dev, now.st_ino };
	return other;
}

/* What it changes is a cache of the file system's answer: readers see the
 * table as const. The file system is asked without the lock held. */
bool fx_objects_replaced(const struct fx_objects *objs, uint32_t id)
{
	struct fx_objects *o = (struct fx_objects *)objs;
	uint64_t now = fx_now_ns(CLOCK_MONOTONIC);
	uint8_t bid[FX_BUILD_ID_MAX];
	struct fx_file_id same;
	struct entry *e, *f;
	struct stat st;
	size_t bid_len;
	uint32_t pid;
	char *path;
	bool known;
	int r;

	pthread_mutex_lock(&o->lock);
	e = id < o->n ? o->v[id] : NULL;
	f = e ? o->v[e->file] : NULL;
	/* At most once a second (a window is one or more). */
	if (!e || e->replaced || e->ob.special || !e->pid || f->fd < 0 ||
	    (e->checked && now - e->checked < 1000000000ULL) || fstat(f->fd, &st) < 0) {
		known = e && e->replaced;
		pthread_mutex_unlock(&o->lock);
		return known;
	}
	e->checked = now;
	pid = e->pid;
	path = strdup(e->ob.path);
	bid_len = e->ob.build_id_len;
	memcpy(bid, e->ob.build_id, bid_len);
	same = e->same;
	pthread_mutex_unlock(&o->lock);
	r = path ? path_replaced(o->proc_root, pid, path, &st, bid, bid_len, &same) : -ENOMEM;
	free(path);
	pthread_mutex_lock(&o->lock);
	/* Retired meanwhile: its slot is NULL, and stays so. */
	e = o->v[id];
	if (e) {
		e->replaced = r == 1;
		e->same = same;
	}
	pthread_mutex_unlock(&o->lock);
	return r == 1;
}

static uint32_t intern(struct fx_objects *o, const struct fx_mapping_info *m)
{
	struct entry *e;
	struct fx_object *ob;
	uint32_t id, at;

	if (!m->path || !m->path[0])
		return FX_NONE;
	if (m->build_id_len) {
		id = find_bid(o, m->build_id, m->build_id_len);
		if (id != FX_NONE) {
			o->v[id]->used = o->epoch;
			at = path_object(o, id, m->path);
			/* Out of memory: named by the file's first path. */
			return at != FX_NONE ? at : id;
		}
	}
	if (m->dev || m->ino || !m->build_id_len) {
		id = find_file(o, m->dev, m->ino, m->path);
		if (id != FX_NONE)
			return id;
	}
	if (reserve(o) < 0 || !(e = new_entry(m->path)))
		return FX_NONE;
	ob = &e->ob;
	e->used = o->epoch;
	ob->id = (uint32_t)o->n;
	e->file = ob->id;
	ob->dev = m->dev;
	ob->ino = m->ino;
	if (m->build_id_len && m->build_id_len <= FX_BUILD_ID_MAX) {
		memcpy(ob->build_id, m->build_id, m->build_id_len);
		ob->build_id_len = m->build_id_len;
	}
	ob->special = m->path[0] == '[';
	if (!strncmp(m->path, "[jit pid ", 9))
		ob->jit_pid = m->pid;
	if (!strcmp(m->path, "[vdso]")) {
		open_vdso(o, m, e);
	} else if (!ob->special) {
		if (o->stats.fds < o->max_open && open_object(o, m, e) == 0)
			o->stats.fds++;
		else
			o->stats.open_failed++;
	}
	/* A file first seen by dev/ino may turn out to be a known build-id: it
	 * is that file, at this path. */
	if (ob->build_id_len && !m->build_id_len) {
		id = find_bid(o, ob->build_id, ob->build_id_len);
		if (id != FX_NONE) {
			struct entry *known = o->v[id];

			/* The fd just opened serves the known file if it had
			 * none (it could not be opened, or not under max_open). */
			if (e->fd >= 0 && known->fd < 0) {
				known->fd = e->fd;
			} else if (e->fd >= 0) {
				close(e->fd);
				o->stats.fds--;
			}
			known->used = o->epoch;
			free(ob->path);
			free(e);
			at = path_object(o, id, m->path);
			if (at == FX_NONE)
				return id; /* out of memory: named by the file's first path */
			add_alias(o, m, at);
			return at;
		}
	}
	o->v[o->n++] = e;
	o->stats.objects++;
	index_object(o, e);
	add_alias(o, m, ob->id);
	return ob->id;
}

uint32_t fx_objects_intern(struct fx_objects *o, const struct fx_mapping_info *m)
{
	uint32_t id;
	bool fresh;

	pthread_mutex_lock(&o->lock);
	id = intern(o, m);
	/* In use from now on, at its path and as a file: an object found at a
	 * known path is not retired under the mapping just made of it. */
	if (id != FX_NONE) {
		o->v[id]->used = o->v[o->v[id]->file]->used = o->epoch;
		o->v[id]->pid = m->pid;
	}
	fresh = id != FX_NONE && !o->v[id]->checked;
	pthread_mutex_unlock(&o->lock);
	/* Asked now too, while the process that mapped it is surely there: a
	 * short-lived one is gone when its window is written. */
	if (fresh)
		fx_objects_replaced(o, id);
	return id;
}

uint32_t fx_objects_intern_jit(struct fx_objects *o, uint32_t pid)
{
	char path[32];

	snprintf(path, sizeof(path), "[jit pid %" PRIu32 "]", pid);
	return fx_objects_intern(o, &(struct fx_mapping_info){ .pid = pid, .path = path });
}

const struct fx_object *fx_objects_get(const struct fx_objects *o, uint32_t id)
{
	const struct fx_object *ob;

	pthread_mutex_lock((pthread_mutex_t *)&o->lock);
	ob = id < o->n && o->v[id] ? &o->v[id]->ob : NULL;
	pthread_mutex_unlock((pthread_mutex_t *)&o->lock);
	return ob;
}

int fx_objects_dup_fd(const struct fx_objects *o, uint32_t id)
{
	int fd = -1;

	pthread_mutex_lock((pthread_mutex_t *)&o->lock);
	if (id < o->n && o->v[id] && o->v[o->v[id]->file]->fd >= 0)
		fd = fcntl(o->v[o->v[id]->file]->fd, F_DUPFD_CLOEXEC, 3);
	pthread_mutex_unlock((pthread_mutex_t *)&o->lock);
	return fd;
}

uint32_t fx_objects_file(const struct fx_objects *o, uint32_t id)
{
	uint32_t file = id;

	pthread_mutex_lock((pthread_mutex_t *)&o->lock);
	if (id < o->n && o->v[id])
		file = o->v[id]->file;
	pthread_mutex_unlock((pthread_mutex_t *)&o->lock);
	return file;
}

void fx_objects_mark(struct fx_objects *o, const uint32_t *ids, size_t n, size_t stride)
{
	const unsigned char *p = (const unsigned char *)ids;

	pthread_mutex_lock(&o->lock);
	for (size_t i = 0; i < n; i++, p += stride) {
		uint32_t id;

		memcpy(&id, p, sizeof(id));
		if (id < o->n && o->v[id])
			o->v[id]->used = o->v[o->v[id]->file]->used = o->epoch;
	}
	pthread_mutex_unlock(&o->lock);
}

uint64_t fx_objects_end_epoch(struct fx_objects *o)
{
	uint64_t e;

	pthread_mutex_lock(&o->lock);
	e = o->epoch++;
	pthread_mutex_unlock(&o->lock);
	return e;
}

/* Removes alias @i from the index; the last one takes its place. */
static void remove_alias(struct fx_objects *o, size_t i)
{
	size_t last = o->naliases - 1;
	struct alias *a = &o->aliases[i];

	fx_hashtab_remove(&o->by_file, file_hash(a->dev, a->ino, a->path), (uint32_t)i,
			  file_hash_at, o);
	free(a->path);
	if (i != last) {
		const struct alias *l = &o->aliases[last];

		fx_hashtab_renumber(&o->by_file, file_hash(l->dev, l->ino, l->path), (uint32_t)last,
				    (uint32_t)i);
		*a = *l;
	}
	o->naliases--;
}

/* Takes the dying entry @id out of the indexes, closes its fd and frees it.
 * The indexes' callbacks read the other entries, which are all still there. */
static void retire(struct fx_objects *o, uint32_t id)
{
	struct entry *e = o->v[id];
	const struct fx_object *ob = &e->ob;

	if (ob->build_id_len && e->file == id)
		fx_hashtab_remove(&o->by_bid, bid_hash(ob->build_id, ob->build_id_len), id,
				  bid_hash_at, o);
	fx_hashtab_remove(&o->by_path, path_hash(e->file, ob->path, strlen(ob->path)), id,
			  path_hash_at, o);
	if (e->fd >= 0) {
		close(e->fd);
		o->stats.fds--;
		o->stats.closed_unused++;
	}
	if (e->file == id)
		o->stats.objects--;
	free(e->ob.path);
	free(e);
	o->v[id] = NULL;
	o->stats.retired++;
}

size_t fx_objects_retire_unused(struct fx_objects *o, uint64_t epoch)
{
	size_t n = 0;

	pthread_mutex_lock(&o->lock);
	/* Files first: the paths of a file that goes go with it (marking keeps
	 * a file at least as recent as its paths: this is only a safeguard).
	 * [vdso] and the like stay: a few names, and the vDSO copy is ours;
	 * a process's JIT object goes (one per pid). */
	for (size_t i = 0; i < o->n; i++) {
		struct entry *e = o->v[i];

		if (e && e->file == i)
			e->dying = e->used < epoch && (!e->ob.special || e->ob.jit_pid);
	}
	for (size_t i = 0; i < o->n; i++) {
		struct entry *e = o->v[i];

		if (e && e->file != i)
			e->dying = o->v[e->file]->dying ||
				   (e->used < epoch && (!e->ob.special || e->ob.jit_pid));
	}
	/* Backwards: the alias moved into a hole has been looked at. */
	for (size_t i = o->naliases; i-- > 0;)
		if (o->v[o->aliases[i].id]->dying)
			remove_alias(o, i);
	for (size_t i = 0; i < o->n; i++) {
		if (o->v[i] && o->v[i]->dying) {
			retire(o, (uint32_t)i);
			n++;
		}
	}
	pthread_mutex_unlock(&o->lock);
	return n;
}

size_t fx_objects_count(const struct fx_objects *o)
{
	size_t n;

	pthread_mutex_lock((pthread_mutex_t *)&o->lock);
	n = o->n;
	pthread_mutex_unlock((pthread_mutex_t *)&o->lock);
	return n;
}

void fx_objects_get_stats(const struct fx_objects *o, struct fx_objects_stats *out)
{
	uint64_t entries = 0, bytes;

	pthread_mutex_lock((pthread_mutex_t *)&o->lock);
	*out = o->stats;
	/* The arrays and indexes as allocated, then each entry, alias and path. */
	bytes = sizeof(*o) + o->cap * sizeof(struct entry *) +
		o->aliases_cap * sizeof(*o->aliases) + fx_hashtab_bytes(&o->by_bid) +
		fx_hashtab_bytes(&o->by_file) + fx_hashtab_bytes(&o->by_path);
	for (size_t i = 0; i < o->n; i++) {
		if (o->v[i]) {
			entries++;
			bytes += sizeof(*o->v[i]) + strlen(o->v[i]->ob.path) + 1;
		}
	}
	for (size_t i = 0; i < o->naliases; i++)
		bytes += strlen(o->aliases[i].path) + 1;
	pthread_mutex_unlock((pthread_mutex_t *)&o->lock);
	out->entries = entries;
	out->bytes = bytes;
}

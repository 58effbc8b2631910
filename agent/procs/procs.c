/* SPDX-License-Identifier: MIT */
#include "fxagent/procs.h"
#include "fxagent/search.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "fxagent/hash.h"
#include "fxagent/hashtab.h"
#include "fxagent/util.h"
#include "fxagent/window.h"

/* A u32-keyed table of pointers: the entries in an array (removal moves
 * the last one into the hole), found through a hash index. */
struct table_entry {
	void *val;
	uint32_t key;
};

struct table {
	struct table_entry *v;
	size_t n, cap;
	struct fx_hashtab index;
};

struct fx_procs {
	struct fx_objects *objs;
	char *proc_root;
	struct table procs;   /* pid -> struct fx_proc */
	struct table threads; /* tid -> struct fx_thread */
	struct fx_procs_stats stats;
	uint64_t gen;	    /* source of fx_proc.image and .generation */
	uint64_t round;	    /* fx_procs_mark()'s, for fx_proc.used and fx_thread.used */
	size_t reap_cursor; /* where fx_procs_reap_gone() goes on */
};

static uint64_t key_hash_at(const void *ctx, uint32_t i)
{
	return fx_mix64(((const struct table *)ctx)->v[i].key);
}

static bool key_eq(const void *ctx, uint32_t i, const void *key)
{
	return ((const struct table *)ctx)->v[i].key == *(const uint32_t *)key;
}

static void *table_get(const struct table *t, uint32_t key)
{
	uint32_t i = fx_hashtab_find(&t->index, fx_mix64(key), key_eq, t, &key);

	return i == FX_HASHTAB_NONE ? NULL : t->v[i].val;
}

static int table_put(struct table *t, uint32_t key, void *val)
{
	size_t pos;
	uint32_t i;

	if (fx_hashtab_reserve(&t->index, t->n + 1, key_hash_at, t) < 0)
		return -ENOMEM;
	pos = fx_hashtab_probe(&t->index, fx_mix64(key), key_eq, t, &key);
	i = fx_hashtab_at(&t->index, pos);
	if (i != FX_HASHTAB_NONE) {
		t->v[i].val = val;
		return 0;
	}
	if (fx_grow(&t->v, &t->cap, t->n + 1, sizeof(*t->v)) < 0)
		return -ENOMEM;
	t->v[t->n] = (struct table_entry){ .val = val, .key = key };
	fx_hashtab_put(&t->index, pos, (uint32_t)t->n++);
	return 0;
}

/* Removes entry @i; the last entry takes its place. */
static void table_remove(struct table *t, size_t i)
{
	size_t last = t->n - 1;

	fx_hashtab_remove(&t->index, fx_mix64(t->v[i].key), (uint32_t)i, key_hash_at, t);
	if (i != last) {
		fx_hashtab_renumber(&t->index, fx_mix64(t->v[last].key), (uint32_t)last,
				    (uint32_t)i);
		t->v[i] = t->v[last];
	}
	t->n--;
}

/* After a burst of processes has gone: gives back the memory of a table a
 * quarter full or less, down to twice its entries. Left as it is when
 * memory runs out. */
static void table_shrink(struct table *t)
{
	struct fx_hashtab index = { 0 };
	size_t cap = t->n * 2 > 64 ? t->n * 2 : 64;
	struct table_entry *v;

	if (t->cap <= 64 || t->n > t->cap / 4)
		return;
	if (fx_hashtab_reserve(&index, t->n, key_hash_at, t) < 0)
		return;
	v = realloc(t->v, cap * sizeof(*v));
	if (!v) {
		fx_hashtab_free(&index);
		return;
	}
	t->v = v;
	t->cap = cap;
	for (size_t i = 0; i < t->n; i++)
		fx_hashtab_insert(&index, fx_mix64(t->v[i].key), (uint32_t)i);
	fx_hashtab_free(&t->index);
	t->index = index;
}

static void table_free(struct table *t, void (*free_val)(void *))
{
	for (size_t i = 0; i < t->n; i++)
		free_val(t->v[i].val);
	free(t->v);
	fx_hashtab_free(&t->index);
	memset(t, 0, sizeof(*t));
}

static void proc_free(void *v)
{
	struct fx_proc *proc = v;

	free(proc->maps);
	free(proc);
}

struct fx_procs *fx_procs_new(struct fx_objects *objs, const char *proc_root)
{
	struct fx_procs *p = calloc(1, sizeof(*p));

	if (!p)
		return NULL;
	p->objs = objs;
	p->round = 1;
	p->proc_root = strdup(proc_root ? proc_root : "/proc");
	if (!p->proc_root) {
		free(p);
		return NULL;
	}
	return p;
}

void fx_procs_free(struct fx_procs *p)
{
	if (!p)
		return;
	table_free(&p->procs, proc_free);
	table_free(&p->threads, free);
	free(p->proc_root);
	free(p);
}

/* The kernel writes a newline in a maps path as the four bytes \012 and
 * escapes nothing else (a backslash stays as it is): turns each \012 back
 * into a newline, in place. Returns the new length. */
static size_t unescape_newlines(char *s)
{
	size_t r = 0, w = 0;

	while (s[r]) {
		if (s[r] == '\\' && strncmp(s + r + 1, "012", 3) == 0) {
			s[w++] = '\n';
			r += 4;
		} else {
			s[w++] = s[r++];
		}
	}
	s[w] = '\0';
	return w;
}

int fx_procs_parse_maps_line(char *line, uint64_t *start, uint64_t *end, uint64_t *pgoff,
			     uint64_t *dev, uint64_t *ino, char **path)
{
	unsigned long long s, e, off, in;
	unsigned maj, min;
	char perms[8];
	int pos = 0;
	char *pth;
	size_t len;

	if (sscanf(line, "%llx-%llx %7s %llx %x:%x %llu %n", &s, &e, perms, &off, &maj, &min, &in,
		   &pos) < 7 ||
	    pos == 0 || e <= s)
		return -EINVAL;
	if (strlen(perms) < 4 || perms[2] != 'x')
		return 0;
	pth = line + pos;
	len = strcspn(pth, "\n");
	pth[len] = '\0';
	len = unescape_newlines(pth);
	if (len >= 10 && strcmp(pth + len - 10, " (deleted)") == 0)
		pth[len - 10] = '\0';
	*start = s;
	*end = e;
	*pgoff = off;
	*dev = makedev(maj, min);
	*ino = in;
	*path = pth;
	return 1;
}

/* Removes [start, end) from the map list, trimming maps that overlap it. */
static int unmap_range(struct fx_proc *proc, uint64_t start, uint64_t end)
{
	size_t i = 0;

	while (i < proc->nmaps) {
		struct fx_map m = proc->maps[i];

		if (m.end <= start || m.start >= end) {
			i++;
			continue;
		}
		if (m.start < start && m.end > end) {
			/* Split in two: needs one more slot. */
			struct fx_map right = m;

			if (fx_grow(&proc->maps, &proc->maps_cap, proc->nmaps + 1,
				    sizeof(*proc->maps)) < 0)
				return -ENOMEM;
			right.pgoff += end - m.start;
			right.start = end;
			proc->maps[i].end = start;
			memmove(&proc->maps[i + 2], &proc->maps[i + 1],
				(proc->nmaps - i - 1) * sizeof(struct fx_map));
			proc->maps[i + 1] = right;
			proc->nmaps++;
			return 0;
		}
		if (m.start < start) {
			proc->maps[i].end = start;
			i++;
		} else if (m.end > end) {
			proc->maps[i].pgoff += end - m.start;
			proc->maps[i].start = end;
			i++;
		} else {
			memmove(&proc->maps[i], &proc->maps[i + 1],
				(proc->nmaps - i - 1) * sizeof(struct fx_map));
			proc->nmaps--;
		}
	}
	return 0;
}

static int add_map(struct fx_procs *p, struct fx_proc *proc, uint64_t start, uint64_t end,
		   uint64_t pgoff, uint32_t object)
{
	size_t lo = 0, hi;

	if (unmap_range(proc, start, end) < 0)
		return -ENOMEM;
	if (fx_grow(&proc->maps, &proc->maps_cap, proc->nmaps + 1, sizeof(*proc->maps)) < 0)
		return -ENOMEM;
	hi = proc->nmaps;
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;

		if (proc->maps[mid].start < start)
			lo = mid + 1;
		else
			hi = mid;
	}
	memmove(&proc->maps[lo + 1], &proc->maps[lo], (proc->nmaps - lo) * sizeof(struct fx_map));
	proc->maps[lo] =
		(struct fx_map){ .start = start, .end = end, .pgoff = pgoff, .object = object };
	proc->nmaps++;
	proc->generation = ++p->gen;
	return 0;
}

/* The object of mapping @m, and the file offset of its start in *@pgoff. */
static uint32_t object_for(struct fx_procs *p, const struct fx_mapping_info *m, uint64_t *pgoff)
{
	uint32_t id;

	if (strcmp(m->path, "[heap]") == 0 || strcmp(m->path, "[stack]") == 0)
		return FX_OBJ_UNKNOWN;
	/* Anonymous code ("" in maps, "//anon" in records, "[anon:NAME]"):
	 * a JIT's, named from the process's jitdump or perf map by absolute address. */
	if (!m->path[0] || strncmp(m->path, "//anon", 6) == 0 ||
	    strncmp(m->path, "[anon", 5) == 0) {
		id = fx_objects_intern_jit(p->objs, m->pid);
		if (id == FX_NONE)
			return FX_OBJ_UNKNOWN;
		*pgoff = m->start;
		return id;
	}
	return fx_objects_intern(p->objs, m);
}

/* The comm file is the name and one "\n". The name may hold any byte but
 * NUL (PR_SET_NAME takes them all), newlines too: only that last "\n" goes.
 * A kernel thread's name there may be longer than a comm (up to 64 bytes);
 * it is cut to FX_COMM_LEN - 1 like any comm. */
static void read_comm(const char *path, char comm[FX_COMM_LEN])
{
	char buf[64 + 1];
	FILE *f = fopen(path, "re");
	size_t n;

	if (!f)
		return;
	n = fread(buf, 1, sizeof(buf), f);
	fclose(f);
	if (n == 0)
		return;
	if (buf[n - 1] == '\n')
		n--;
	if (n > FX_COMM_LEN - 1)
		n = FX_COMM_LEN - 1;
	memcpy(comm, buf, n);
	comm[n] = '\0';
}

/* A maps path with a newline may have been a literal \012 in the name: the
 * mapping's map_files link holds the exact bytes (readable by root). Keeps
 * @path when the link cannot be read or names another file than the one
 * the maps line named (the mapping changed meanwhile). */
static const char *exact_path(const struct fx_procs *p, uint32_t pid, uint64_t start, uint64_t end,
			      const char *path, char link[PATH_MAX])
{
	char mf[128], seen[PATH_MAX];
	ssize_t n;

	snprintf(mf, sizeof(mf), "%s/%" PRIu32 "/map_files/%" PRIx64 "-%" PRIx64, p->proc_root, pid,
		 start, end);
	n = readlink(mf, link, PATH_MAX - 1);
	if (n <= 0)
		return path;
	link[n] = '\0';
	if ((size_t)n >= 10 && strcmp(link + n - 10, " (deleted)") == 0)
		link[n - 10] = '\0';
	/* What the maps line would show for it, unescaped the same way. */
	memcpy(seen, link, strlen(link) + 1);
	unescape_newlines(seen);
	return strcmp(seen, path) == 0 ? link : path;
}

static void load_maps(struct fx_procs *p, struct fx_proc *proc)
{
	char path[128], link[PATH_MAX], *line = NULL;
	size_t cap = 0;
	FILE *f;

	snprintf(path, sizeof(path), "%s/%" PRIu32 "/maps", p->proc_root, proc->pid);
	f = fopen(path, "re");
	if (!f) {
		p->stats.proc_missing++;
		return;
	}
	p->stats.proc_reads++;
	while (getline(&line, &cap, f) > 0) {
		struct fx_mapping_info m = { .pid = proc->pid };
		uint64_t pgoff;
		uint32_t object;
		char *pth;

		if (fx_procs_parse_maps_line(line, &m.start, &m.end, &pgoff, &m.dev, &m.ino,
					     &pth) <= 0)
			continue;
		m.path = strchr(pth, '\n') ? exact_path(p, proc->pid, m.start, m.end, pth, link)
					   : pth;
		object = object_for(p, &m, &pgoff);
		add_map(p, proc, m.start, m.end, pgoff, object);
	}
	free(line);
	fclose(f);
}

static struct fx_proc *new_proc(struct fx_procs *p, uint32_t pid)
{
	struct fx_proc *proc = calloc(1, sizeof(*proc));

	if (!proc)
		return NULL;
	proc->pid = pid;
	proc->image = proc->generation = ++p->gen;
	proc->used = p->round;
	if (table_put(&p->procs, pid, proc) < 0) {
		free(proc);
		return NULL;
	}
	p->stats.procs++;
	return proc;
}

struct fx_proc *fx_procs_find(const struct fx_procs *p, uint32_t pid)
{
	return table_get(&p->procs, pid);
}

struct fx_thread *fx_procs_find_thread(const struct fx_procs *p, uint32_t tid)
{
	return table_get(&p->threads, tid);
}

struct fx_proc *fx_procs_get(struct fx_procs *p, uint32_t pid)
{
	struct fx_proc *proc = table_get(&p->procs, pid);
	char path[128];

	if (proc) {
		proc->used = p->round;
		return proc;
	}
	/* 0 is the idle task, -1 a task being torn down: neither is tracked. */
	if (pid == 0 || pid == UINT32_MAX)
		return NULL;
	proc = new_proc(p, pid);
	if (!proc)
		return NULL;
	snprintf(proc->comm, sizeof(proc->comm), "pid %" PRIu32, pid);
	snprintf(path, sizeof(path), "%s/%" PRIu32 "/comm", p->proc_root, pid);
	read_comm(path, proc->comm);
	load_maps(p, proc);
	proc->loaded = true;
	return proc;
}

static struct fx_thread *new_thread(struct fx_procs *p, uint32_t pid, uint32_t tid,
				    const char *comm)
{
	struct fx_thread *t = table_get(&p->threads, tid);

	if (!t) {
		t = calloc(1, sizeof(*t));
		if (!t)
			return NULL;
		if (table_put(&p->threads, tid, t) < 0) {
			free(t);
			return NULL;
		}
		p->stats.threads++;
	}
	t->tid = tid;
	t->pid = pid;
	t->exited = false;
	t->used = p->round;
	snprintf(t->comm, sizeof(t->comm), "%s", comm);
	return t;
}

struct fx_thread *fx_procs_thread(struct fx_procs *p, uint32_t pid, uint32_t tid)
{
	struct fx_thread *t = table_get(&p->threads, tid);
	struct fx_proc *proc;
	char path[160], comm[FX_COMM_LEN];

	if (t && t->pid == pid) {
		t->used = p->round;
		return t;
	}
	if (tid == 0 || tid == UINT32_MAX)
		return NULL;
	proc = fx_procs_get(p, pid);
	snprintf(comm, sizeof(comm), "%s", proc ? proc->comm : "?");
	snprintf(path, sizeof(path), "%s/%" PRIu32 "/task/%" PRIu32 "/comm", p->proc_root, pid,
		 tid);
	read_comm(path, comm);
	return new_thread(p, pid, tid, comm);
}

void fx_procs_on_mmap(struct fx_procs *p, const struct fx_mapping_info *m, uint64_t pgoff)
{
	struct fx_proc *proc = fx_procs_get(p, m->pid);
	uint32_t object;

	if (!proc || m->end <= m->start)
		return;
	object = object_for(p, m, &pgoff);
	add_map(p, proc, m->start, m->end, pgoff, object);
}

void fx_procs_on_comm(struct fx_procs *p, uint32_t pid, uint32_t tid, const char *comm, bool exec)
{
	struct fx_proc *proc = fx_procs_get(p, pid);

	if (!proc)
		return;
	if (exec) {
		/* The old image is gone; its new mappings follow as MMAP2 records. */
		proc->nmaps = 0;
		proc->image = proc->generation = ++p->gen;
	}
	if (exec || tid == pid)
		snprintf(proc->comm, sizeof(proc->comm), "%s", comm);
	new_thread(p, pid, tid, comm);
}

void fx_procs_on_fork(struct fx_procs *p, uint32_t pid, uint32_t ppid, uint32_t tid, uint32_t ptid)
{
	struct fx_thread *parent_thread;
	struct fx_proc *proc, *parent;

	if (pid == 0 || tid == 0)
		return;
	if (pid == ppid) {
		/* A new thread: it starts with its creator's name. */
		parent_thread = fx_procs_thread(p, ppid, ptid);
		new_thread(p, pid, tid, parent_thread ? parent_thread->comm : "?");
		return;
	}
	/* A new process: a copy of its parent's mappings until it execs. */
	parent = fx_procs_get(p, ppid);
	proc = table_get(&p->procs, pid);
	if (proc) {
		proc->nmaps = 0;
		proc->exited = false;
		proc->used = p->round;
	} else {
		proc = new_proc(p, pid);
		if (!proc)
			return;
	}
	proc->loaded = true;
	snprintf(proc->comm, sizeof(proc->comm), "%s", parent ? parent->comm : "?");
	if (parent && parent->nmaps) {
		struct fx_map *v = malloc(parent->nmaps * sizeof(*v));

		if (v) {
			memcpy(v, parent->maps, parent->nmaps * sizeof(*v));
			free(proc->maps);
			proc->maps = v;
			proc->nmaps = proc->maps_cap = parent->nmaps;
		}
	}
	proc->image = proc->generation = ++p->gen;
	new_thread(p, pid, tid, proc->comm);
}

void fx_procs_on_exit(struct fx_procs *p, uint32_t pid, uint32_t tid)
{
	struct fx_thread *t = table_get(&p->threads, tid);
	struct fx_proc *proc;

	if (t)
		t->exited = true;
	if (pid == tid) {
		proc = table_get(&p->procs, pid);
		if (proc)
			proc->exited = true;
	}
}

bool fx_procs_resolve(const struct fx_proc *proc, uint64_t addr, uint32_t *object, uint64_t *offset)
{
	/* The maps do not overlap: the last one starting at or below @addr is
	 * the only one that can hold it. */
	size_t lo = FX_SEARCH_LAST_LE(proc->maps, proc->nmaps, start, addr);

	if (lo == SIZE_MAX || proc->maps[lo].end <= addr || proc->maps[lo].object == FX_OBJ_UNKNOWN)
		return false;
	*object = proc->maps[lo].object;
	*offset = addr - proc->maps[lo].start + proc->maps[lo].pgoff;
	return true;
}

static bool proc_exited(const void *v, uint64_t mark)
{
	(void)mark;
	return ((const struct fx_proc *)v)->exited;
}

static bool thread_exited(const void *v, uint64_t mark)
{
	(void)mark;
	return ((const struct fx_thread *)v)->exited;
}

static bool proc_idle(const void *v, uint64_t mark)
{
	return ((const struct fx_proc *)v)->used < mark;
}

static bool thread_idle(const void *v, uint64_t mark)
{
	return ((const struct fx_thread *)v)->used < mark;
}

/* Drops the entries of @t that @gone says are (given @mark); returns how
 * many. */
static size_t sweep(struct table *t, bool (*gone)(const void *, uint64_t), uint64_t mark,
		    void (*free_val)(void *))
{
	size_t n = 0;

	/* Backwards: the entry moved into a hole has been looked at. */
	for (size_t i = t->n; i-- > 0;) {
		if (gone(t->v[i].val, mark)) {
			free_val(t->v[i].val);
			table_remove(t, i);
			n++;
		}
	}
	table_shrink(t);
	return n;
}

void fx_procs_sweep(struct fx_procs *p)
{
	sweep(&p->procs, proc_exited, 0, proc_free);
	sweep(&p->threads, thread_exited, 0, free);
	p->stats.procs = p->procs.n;
	p->stats.threads = p->threads.n;
}

uint64_t fx_procs_mark(struct fx_procs *p)
{
	return ++p->round;
}

size_t fx_procs_drop_idle(struct fx_procs *p, uint64_t mark)
{
	size_t n = sweep(&p->procs, proc_idle, mark, proc_free);

	p->stats.idle_procs += n;
	p->stats.idle_threads += sweep(&p->threads, thread_idle, mark, free);
	p->stats.procs = p->procs.n;
	p->stats.threads = p->threads.n;
	return n;
}

/* Marks exited the entries of @t, from entry *@cursor on, whose id is gone
 * from @root; looks at @budget live entries at most. */
static size_t reap(struct table *t, size_t exited_off, const char *root, size_t *cursor,
		   size_t budget)
{
	size_t marked = 0, start = *cursor;
	char path[PATH_MAX];

	for (size_t k = 0; k < t->n && budget; k++) {
		size_t i = (start + k) % t->n;
		bool *exited = (bool *)((char *)t->v[i].val + exited_off);

		if (*exited)
			continue;
		budget--;
		snprintf(path, sizeof(path), "%s/%" PRIu32, root, t->v[i].key);
		if (access(path, F_OK) != 0 && errno == ENOENT) {
			*exited = true;
			marked++;
		}
		*cursor = (i + 1) % t->n;
	}
	return marked;
}

size_t fx_procs_reap_gone(struct fx_procs *p, size_t budget)
{
	size_t n = reap(&p->procs, offsetof(struct fx_proc, exited), p->proc_root, &p->reap_cursor,
			budget);

	/* The threads of a process found gone are gone too: no access() each. */
	for (size_t i = 0; n && i < p->threads.n; i++) {
		struct fx_thread *t = p->threads.v[i].val;
		const struct fx_proc *proc;

		if (t->exited)
			continue;
		proc = table_get(&p->procs, t->pid);
		if (proc && proc->exited)
			t->exited = true;
	}
	p->stats.reaped_gone += n;
	return n;
}

void fx_procs_mark_objects(const struct fx_procs *p)
{
	for (size_t i = 0; i < p->procs.n; i++) {
		/* Exited but not swept yet: its threads may still run. */
		const struct fx_proc *proc = p->procs.v[i].val;

		if (proc->nmaps)
			fx_objects_mark(p->objs, &proc->maps[0].object, proc->nmaps,
					sizeof(proc->maps[0]));
	}
}

struct pidtid {
	uint32_t pid, tid;
};

/* By process, its main thread first. All 32 bits of each count: the kernel
 * reports pid and tid -1 for a task that is being torn down. */
static int cmp_pidtid(const void *a, const void *b)
{
	const struct pidtid *x = a, *y = b;
	bool mx = x->tid == x->pid, my = y->tid == y->pid;

	if (x->pid != y->pid)
		return x->pid < y->pid ? -1 : 1;
	if (mx != my)
		return mx ? -1 : 1;
	return x->tid < y->tid ? -1 : x->tid > y->tid;
}

int fx_procs_names(const struct fx_procs *p, const struct fx_window *w, struct fx_thread_name **out,
		   size_t *n)
{
	/* Pairs seen lately, by tid: a window's samples come from few threads,
	 * so most never reach the sort (a window at a big host's rate holds
	 * hundreds of thousands). */
	struct pidtid seen[256];
	bool used[256] = { false };
	struct pidtid *keys = NULL;
	struct fx_thread_name *v;
	size_t k = 0, u = 0, cap = 0;

	for (size_t i = 0; i < w->nsamples; i++) {
		uint32_t pid = w->samples[i].pid, tid = w->samples[i].tid;
		size_t at = fx_mix64(tid) % 256;

		if (used[at] && seen[at].pid == pid && seen[at].tid == tid)
			continue;
		used[at] = true;
		seen[at] = (struct pidtid){ pid, tid };
		if (fx_grow(&keys, &cap, k + 2, sizeof(*keys)) < 0) {
			free(keys);
			return -ENOMEM;
		}
		keys[k++] = (struct pidtid){ pid, tid };
		keys[k++] = (struct pidtid){ pid, pid };
	}
	if (k)
		qsort(keys, k, sizeof(*keys), cmp_pidtid);
	for (size_t i = 0; i < k; i++)
		if (u == 0 || cmp_pidtid(&keys[u - 1], &keys[i]))
			keys[u++] = keys[i];
	v = calloc(u + 1, sizeof(*v));
	if (!v) {
		free(keys);
		return -ENOMEM;
	}
	for (size_t i = 0; i < u; i++) {
		uint32_t pid = keys[i].pid, tid = keys[i].tid;
		const struct fx_proc *proc = fx_procs_find(p, pid);
		const struct fx_thread *t = fx_procs_find_thread(p, tid);

		v[i].pid = pid;
		v[i].tid = tid;
		if (proc)
			snprintf(v[i].process, sizeof(v[i].process), "%s", proc->comm);
		else if (pid == 0)
			snprintf(v[i].process, sizeof(v[i].process), "idle");
		else if (pid == UINT32_MAX)
			snprintf(v[i].process, sizeof(v[i].process), "exiting");
		else
			snprintf(v[i].process, sizeof(v[i].process), "pid %" PRIu32, pid);
		snprintf(v[i].thread, sizeof(v[i].thread), "%s",
			 t && t->pid == pid ? t->comm : v[i].process);
	}
	free(keys);
	*out = v;
	*n = u;
	return 0;
}

void fx_procs_get_stats(const struct fx_procs *p, struct fx_procs_stats *out)
{
	*out = p->stats;
	out->procs = p->procs.n;
	out->threads = p->threads.n;
	out->proc_bytes = sizeof(*p) + p->procs.cap * sizeof(struct table_entry) +
			  fx_hashtab_bytes(&p->procs.index);
	for (size_t i = 0; i < p->procs.n; i++) {
		const struct fx_proc *proc = p->procs.v[i].val;

		out->proc_bytes += sizeof(*proc) + proc->maps_cap * sizeof(*proc->maps);
	}
	out->thread_bytes = p->threads.cap * sizeof(struct table_entry) +
			    fx_hashtab_bytes(&p->threads.index) +
			    p->threads.n * sizeof(struct fx_thread);
}

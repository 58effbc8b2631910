/* SPDX-License-Identifier: MIT */
#include "fxagent/perfmap.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* A name shared by the hits one line covers: one copy a line, freed with
 * its last hit. */
struct name_ref {
	size_t refs;
	char s[];
};

static struct name_ref *ref_of(char *name)
{
	return (struct name_ref *)(name - offsetof(struct name_ref, s));
}

static void name_put(char *name)
{
	struct name_ref *r;

	if (!name)
		return;
	r = ref_of(name);
	if (--r->refs == 0)
		free(r);
}

void fx_perfmap_hits_free(struct fx_perfmap_hit *hits, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		name_put(hits[i].name);
		hits[i].name = NULL;
	}
}

/* Hex digits, a "0x" before them allowed, at most 16; *@p past them. */
static bool parse_hex(const char **p, const char *end, uint64_t *out)
{
	const char *s = *p;
	uint64_t v = 0;
	int digits = 0;

	if (end - s > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X'))
		s += 2;
	for (; s < end; s++, digits++) {
		unsigned d;

		if (*s >= '0' && *s <= '9')
			d = (unsigned)(*s - '0');
		else if (*s >= 'a' && *s <= 'f')
			d = (unsigned)(*s - 'a' + 10);
		else if (*s >= 'A' && *s <= 'F')
			d = (unsigned)(*s - 'A' + 10);
		else
			break;
		if (digits == 16)
			return false;
		v = v << 4 | d;
	}
	if (!digits)
		return false;
	*p = s;
	*out = v;
	return true;
}

static const char *skip_blanks(const char *p, const char *end)
{
	while (p < end && (*p == ' ' || *p == '\t'))
		p++;
	return p;
}

/* The first of the @n sorted @addrs at or above @a. */
static size_t lower_bound(const uint64_t *addrs, size_t n, uint64_t a)
{
	size_t lo = 0, hi = n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (addrs[mid] < a)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

int fx_perfmap_cover(const uint64_t *addrs, size_t n, struct fx_perfmap_hit *out, uint64_t start,
		     uint64_t size, const char *name, size_t len)
{
	struct name_ref *r = NULL;
	uint64_t last;

	if (!size)
		return 0;
	last = size - 1 > UINT64_MAX - start ? UINT64_MAX : start + (size - 1);
	for (size_t i = lower_bound(addrs, n, start); i < n && addrs[i] <= last; i++) {
		if (!r) {
			r = malloc(sizeof(*r) + len + 1);
			if (!r)
				return -ENOMEM;
			r->refs = 0;
			memcpy(r->s, name, len);
			r->s[len] = '\0';
		}
		name_put(out[i].name);
		r->refs++;
		out[i] = (struct fx_perfmap_hit){ .start = start, .size = size, .name = r->s };
	}
	return 0;
}

/* One line without its newline. Returns 0 or -ENOMEM. */
static int take_line(const char *s, size_t len, const uint64_t *addrs, size_t n,
		     struct fx_perfmap_hit *out, struct fx_perfmap_stats *st)
{
	const char *p = s, *end = s + len, *name;
	uint64_t start, size;

	st->lines++;
	if (len && end[-1] == '\r')
		end--;
	if (!parse_hex(&p, end, &start) || p == end || (*p != ' ' && *p != '\t'))
		goto bad;
	p = skip_blanks(p, end);
	if (!parse_hex(&p, end, &size) || p == end || (*p != ' ' && *p != '\t'))
		goto bad;
	name = skip_blanks(p, end);
	if (name == end || memchr(name, '\0', (size_t)(end - name)))
		goto bad;
	return fx_perfmap_cover(addrs, n, out, start, size, name, (size_t)(end - name));
bad:
	st->skipped++;
	return 0;
}

int fx_perfmap_parse(const char *buf, size_t len, const uint64_t *addrs, size_t n,
		     struct fx_perfmap_hit *out, struct fx_perfmap_stats *st)
{
	const char *p = buf, *end = buf + len;

	while (p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		int ret;

		if (!nl) {
			st->partial++;
			break;
		}
		if ((size_t)(nl - p) > FX_PERFMAP_MAX_LINE) {
			st->lines++;
			st->skipped++;
		} else if ((ret = take_line(p, (size_t)(nl - p), addrs, n, out, st)) < 0) {
			return ret;
		}
		p = nl + 1;
	}
	return 0;
}

int fx_perfmap_read(int fd, const uint64_t *addrs, size_t n, struct fx_perfmap_hit *out,
		    struct fx_perfmap_stats *st)
{
	/* A block and a line carried over from the one before. */
	enum { BLOCK = 64 * 1024 };
	char *buf = malloc(BLOCK + FX_PERFMAP_MAX_LINE + 1);
	size_t have = 0;
	uint64_t total = 0;
	bool overlong = false; /* inside a line too long to keep */
	int ret = 0;

	if (!buf)
		return -ENOMEM;
	for (;;) {
		ssize_t got = pread(fd, buf + have, BLOCK, (off_t)total);
		const char *p = buf, *end, *nl;

		if (got < 0 && errno == EINTR)
			continue;
		if (got < 0) {
			ret = -errno;
			break;
		}
		if (got == 0 || total >= FX_PERFMAP_MAX_BYTES) {
			if (have && !overlong)
				st->partial++;
			break;
		}
		total += (uint64_t)got;
		end = buf + have + (size_t)got;
		while ((nl = memchr(p, '\n', (size_t)(end - p)))) {
			if (overlong || (size_t)(nl - p) > FX_PERFMAP_MAX_LINE) {
				st->lines++;
				st->skipped++;
				overlong = false;
			} else if ((ret = take_line(p, (size_t)(nl - p), addrs, n, out, st)) < 0) {
				goto out;
			}
			p = nl + 1;
		}
		have = (size_t)(end - p);
		if (have > FX_PERFMAP_MAX_LINE) {
			/* The rest of this line is skipped up to its newline. */
			overlong = true;
			have = 0;
		} else {
			memmove(buf, p, have);
		}
	}
out:
	free(buf);
	return ret;
}

/* The boot time, CLOCK_REALTIME seconds ("btime" of /proc/stat). */
static int64_t boot_time(const char *proc_root)
{
	char path[PATH_MAX], line[256];
	long long bt = -1;
	FILE *f;

	snprintf(path, sizeof(path), "%s/stat", proc_root);
	f = fopen(path, "re");
	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "btime %lld", &bt) == 1)
			break;
	fclose(f);
	return bt;
}

int fx_perfmap_owner_of(const char *proc_root, pid_t pid, struct fx_perfmap_owner *out)
{
	char path[PATH_MAX], line[512], *paren;
	unsigned long long ticks = 0;
	long long ns = -1, uid = -1;
	int64_t bt = boot_time(proc_root);
	FILE *f;

	snprintf(path, sizeof(path), "%s/%d/status", proc_root, (int)pid);
	f = fopen(path, "re");
	if (!f)
		return errno == ENOENT ? -ESRCH : -errno;
	while (fgets(line, sizeof(line), f)) {
		if (!strncmp(line, "Uid:", 4)) {
			uid = strtoll(line + 4, NULL, 10);
		} else if (!strncmp(line, "NStgid:", 7)) {
			char *p = line + 7, *end;

			/* The innermost namespace's pid is the last one. */
			for (long long v; (v = strtoll(p, &end, 10)), end != p; p = end)
				ns = v;
		}
	}
	fclose(f);
	snprintf(path, sizeof(path), "%s/%d/stat", proc_root, (int)pid);
	f = fopen(path, "re");
	if (!f)
		return -errno;
	/* "pid (comm) S ppid ...": starttime is the 22nd field, the 20th
	 * after the comm, whose parentheses may hold anything. */
	if (fgets(line, sizeof(line), f) && (paren = strrchr(line, ')'))) {
		char *p = paren + 1;

		for (int field = 3; field < 22 && p; field++)
			p = strchr(p + 1, ' ');
		if (p)
			ticks = strtoull(p + 1, NULL, 10);
	}
	fclose(f);
	if (uid < 0 || ns <= 0 || bt < 0 || !ticks)
		return -EINVAL;
	*out = (struct fx_perfmap_owner){
		.proc_root = proc_root,
		.pid = pid,
		.ns_pid = (pid_t)ns,
		.uid = (uid_t)uid,
		.start_s = bt + (int64_t)(ticks / (unsigned long long)sysconf(_SC_CLK_TCK)),
	};
	return 0;
}

const char *fx_perfmap_why(int err)
{
	switch (err) {
	case -ELOOP:
		return "a symlink (at the file or at tmp/)";
	case -EINVAL:
		return "not a regular file";
	case -EPERM:
		return "not the process's own (another owner than its user or root, or writable "
		       "by others)";
	case -ESTALE:
		return "older than the process (a reused pid's)";
	case -EFBIG:
		return "over 512 MiB";
	case -ESRCH:
		return "the process exited before its window was written";
	default:
		return strerror(-err);
	}
}

int fx_perfmap_check_fd(int fd, const struct fx_perfmap_owner *o)
{
	struct stat st;

	if (fstat(fd, &st) < 0)
		return -errno;
	if (!S_ISREG(st.st_mode))
		return -EINVAL;
	if ((st.st_uid != o->uid && st.st_uid != 0) || (st.st_mode & S_IWOTH))
		return -EPERM;
	if ((int64_t)st.st_mtime + 1 < o->start_s)
		return -ESTALE;
	if ((uint64_t)st.st_size > FX_PERFMAP_MAX_BYTES)
		return -EFBIG;
	return 0;
}

int fx_perfmap_open(const struct fx_perfmap_owner *o)
{
	char path[PATH_MAX], name[64];
	int root, tmp, fd, err = 0;

	/* The process's root, then its tmp/ without following a symlink there
	 * (the process owns its root: a link could point anywhere in ours). */
	snprintf(path, sizeof(path), "%s/%d/root", o->proc_root, (int)o->pid);
	root = open(path, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (root < 0)
		return -errno;
	tmp = openat(root, "tmp", O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (tmp < 0) {
		err = -errno;
		close(root);
		return err == -ENOTDIR ? -ELOOP : err;
	}
	close(root);
	snprintf(name, sizeof(name), "perf-%d.map", (int)o->ns_pid);
	fd = openat(tmp, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0) {
		err = -errno;
		close(tmp);
		return err;
	}
	close(tmp);
	err = fx_perfmap_check_fd(fd, o);
	if (err) {
		close(fd);
		return err;
	}
	return fd;
}

/* SPDX-License-Identifier: MIT */
#include "fxagent/jvmattach.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "fxagent/util.h"

/* The JVM's options in its environment (the VM's two, the launcher's one). */
static const char *const option_vars[] = { "JAVA_TOOL_OPTIONS", "JDK_JAVA_OPTIONS",
					   "_JAVA_OPTIONS" };

/* ---- options ---- */

static bool has(const char *t, size_t n, const char *s)
{
	return memmem(t, n, s, strlen(s)) != NULL;
}

static bool is(const char *t, size_t n, const char *s)
{
	return n == strlen(s) && !memcmp(t, s, n);
}

static bool starts(const char *t, size_t n, const char *s)
{
	return n >= strlen(s) && !memcmp(t, s, strlen(s));
}

/* What one option says. Flags are matched in any spelling but the one that
 * turns them off; -Xrs as a prefix: the safe side. */
static enum fx_jvm_block option_block(const char *t, size_t n)
{
	if (has(t, n, "DisableAttachMechanism") && !is(t, n, "-XX:-DisableAttachMechanism"))
		return FX_JVM_ATTACH_DISABLED;
	if (starts(t, n, "-Xrs") ||
	    (has(t, n, "ReduceSignalUsage") && !is(t, n, "-XX:-ReduceSignalUsage")))
		return FX_JVM_NO_SIGNALS;
	if ((n && t[0] == '@') || has(t, n, "-XX:Flags=") || has(t, n, "-XX:VMOptionsFile="))
		return FX_JVM_OPTIONS_HIDDEN;
	return FX_JVM_MAY_SIGNAL;
}

static void raise_block(struct fx_jvm_verdict *v, enum fx_jvm_block b, const char *opt, size_t n,
			const char *where)
{
	if (b <= v->block)
		return;
	v->block = b;
	if (n >= sizeof(v->option))
		n = sizeof(v->option) - 1;
	memcpy(v->option, opt, n);
	v->option[n] = '\0';
	/* An option is shown as text: a control byte would forge a log line. */
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)v->option[i] < 0x20 || v->option[i] == 0x7f)
			v->option[i] = '?';
	snprintf(v->where, sizeof(v->where), "%s", where);
}

enum fx_jvm_block fx_jvmattach_scan_cmdline(const char *buf, size_t len, struct fx_jvm_verdict *v)
{
	const char *p = buf, *end = buf + len;

	while (p < end) {
		const char *nul = memchr(p, '\0', (size_t)(end - p));
		size_t n = nul ? (size_t)(nul - p) : (size_t)(end - p);

		raise_block(v, option_block(p, n), p, n, "command line");
		p += n + 1;
	}
	return v->block;
}

/* One word of an options variable, quotes dropped. */
static void scan_word(const char *w, size_t n, const char *var, struct fx_jvm_verdict *v)
{
	char buf[1024];
	size_t k = 0;

	if (!memchr(w, '"', n) && !memchr(w, '\'', n)) {
		raise_block(v, option_block(w, n), w, n, var);
		return;
	}
	for (size_t i = 0; i < n; i++) {
		if (w[i] == '"' || w[i] == '\'')
			continue;
		if (k == sizeof(buf)) {
			raise_block(v, FX_JVM_UNREADABLE, w, n, var);
			return;
		}
		buf[k++] = w[i];
	}
	raise_block(v, option_block(buf, k), buf, k, var);
}

static bool blank(char c)
{
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

static void scan_value(const char *s, size_t n, const char *var, struct fx_jvm_verdict *v)
{
	size_t i = 0;

	while (i < n) {
		size_t j;

		while (i < n && blank(s[i]))
			i++;
		j = i;
		while (j < n && !blank(s[j]))
			j++;
		if (j > i)
			scan_word(s + i, j - i, var, v);
		i = j;
	}
}

enum fx_jvm_block fx_jvmattach_scan_environ(const char *buf, size_t len, struct fx_jvm_verdict *v)
{
	const char *p = buf, *end = buf + len;

	while (p < end) {
		const char *nul = memchr(p, '\0', (size_t)(end - p));
		size_t n = nul ? (size_t)(nul - p) : (size_t)(end - p);

		for (size_t k = 0; k < sizeof(option_vars) / sizeof(option_vars[0]); k++) {
			size_t vl = strlen(option_vars[k]);

			if (n > vl && !memcmp(p, option_vars[k], vl) && p[vl] == '=')
				scan_value(p + vl + 1, n - vl - 1, option_vars[k], v);
		}
		p += n + 1;
	}
	return v->block;
}

void fx_jvmattach_why(const struct fx_jvm_verdict *v, char *buf, size_t size)
{
	switch (v->block) {
	case FX_JVM_MAY_SIGNAL:
		snprintf(buf, size, "the JVM may be signalled");
		break;
	case FX_JVM_UNREADABLE:
		snprintf(buf, size,
			 "the JVM's options could not be read whole (%s%s%s), not signalled",
			 v->option, *v->option ? " in its " : "", v->where);
		break;
	case FX_JVM_NOT_LAUNCHER:
		snprintf(buf, size,
			 "JVM not started by the java launcher (its options cannot be read), "
			 "not signalled");
		break;
	case FX_JVM_OPTIONS_HIDDEN:
		snprintf(buf, size, "JVM options in a file (%s in its %s), not signalled",
			 v->option, v->where);
		break;
	case FX_JVM_NO_SIGQUIT:
		snprintf(buf, size,
			 "the JVM does not catch SIGQUIT (it would end it), not signalled");
		break;
	case FX_JVM_NO_SIGNALS:
		snprintf(buf, size,
			 "JVM started with %s (in its %s): SIGQUIT would end it, not signalled",
			 v->option, v->where);
		break;
	case FX_JVM_ATTACH_DISABLED:
		snprintf(buf, size, "JVM attach disabled (%s in its %s)", v->option, v->where);
		break;
	}
}

/* ---- replies ---- */

int fx_jvmattach_parse_reply(const char *buf, size_t len, int *code, size_t *body)
{
	const char *nl = memchr(buf, '\n', len), *p = buf;
	bool neg = false;
	long long v = 0;

	if (!nl)
		return -EBADMSG;
	if (p < nl && *p == '-') {
		neg = true;
		p++;
	}
	if (p == nl)
		return -EBADMSG;
	for (; p < nl; p++) {
		if (*p < '0' || *p > '9' || v > (long long)INT_MAX)
			return -EBADMSG;
		v = v * 10 + (*p - '0');
	}
	if (v > (long long)INT_MAX + neg)
		return -EBADMSG;
	*code = neg ? (int)-v : (int)v;
	*body = (size_t)(nl + 1 - buf);
	return 0;
}

/* ---- a process ---- */

/* @path's first bytes, at most @max; -EFBIG when there are more. */
static int read_all(const char *path, char *buf, size_t max, size_t *len)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	size_t have = 0;
	int ret = 0;

	if (fd < 0)
		return errno == ENOENT ? -ESRCH : -errno;
	for (;;) {
		ssize_t got = read(fd, buf + have, max + 1 - have);

		if (got < 0 && errno == EINTR)
			continue;
		if (got < 0) {
			ret = -errno;
			break;
		}
		if (got == 0)
			break;
		have += (size_t)got;
		if (have > max) {
			ret = -EFBIG;
			break;
		}
	}
	close(fd);
	*len = have > max ? max : have;
	return ret;
}

/* The status lines that decide: effective ids, and whether SIGQUIT is caught. */
static int read_status(const struct fx_perfmap_owner *o, struct fx_jvm_info *out, bool *caught)
{
	char path[PATH_MAX], *buf = malloc(16384), *line, *save = NULL;
	size_t len = 0;
	int ret, seen = 0;

	if (!buf)
		return -ENOMEM;
	snprintf(path, sizeof(path), "%s/%d/status", o->proc_root, (int)o->pid);
	ret = read_all(path, buf, 16383, &len);
	buf[len] = '\0';
	for (line = strtok_r(buf, "\n", &save); ret == 0 && line;
	     line = strtok_r(NULL, "\n", &save)) {
		unsigned long r, e;
		unsigned long long mask;

		if (sscanf(line, "Uid: %lu %lu", &r, &e) == 2) {
			out->euid = (uid_t)e;
			seen |= 1;
		} else if (sscanf(line, "Gid: %lu %lu", &r, &e) == 2) {
			out->egid = (gid_t)e;
			seen |= 2;
		} else if (sscanf(line, "SigCgt: %llx", &mask) == 1) {
			*caught = mask & (1ull << (SIGQUIT - 1));
			seen |= 4;
		}
	}
	free(buf);
	if (ret == 0 && seen != 7)
		ret = -EINVAL;
	return ret;
}

/* Whether HotSpot's libjvm.so is mapped (OpenJ9's comes with its libj9*). */
static int read_maps(const struct fx_perfmap_owner *o, bool *hotspot)
{
	char path[PATH_MAX], line[4096 + 64];
	bool jvm = false, j9 = false;
	FILE *f;

	snprintf(path, sizeof(path), "%s/%d/maps", o->proc_root, (int)o->pid);
	f = fopen(path, "re");
	if (!f)
		return errno == ENOENT ? -ESRCH : -errno;
	for (unsigned n = 0; n < (1u << 20) && fgets(line, sizeof(line), f); n++) {
		const char *slash = strrchr(line, '/');

		if (!slash)
			continue;
		if (!strcmp(slash, "/libjvm.so\n") || !strcmp(slash, "/libjvm.so"))
			jvm = true;
		if (!strncmp(slash, "/libj9", 6))
			j9 = true;
	}
	fclose(f);
	*hotspot = jvm && !j9;
	return 0;
}

/* Whether the executable is the java launcher. */
static bool is_launcher(const struct fx_perfmap_owner *o)
{
	char path[PATH_MAX], exe[PATH_MAX];
	ssize_t n;
	const char *base;

	snprintf(path, sizeof(path), "%s/%d/exe", o->proc_root, (int)o->pid);
	n = readlink(path, exe, sizeof(exe) - 1);
	if (n <= 0)
		return false;
	exe[n] = '\0';
	if (n > 10 && !strcmp(exe + n - 10, " (deleted)"))
		exe[n - 10] = '\0';
	base = strrchr(exe, '/');
	return base && !strcmp(base + 1, "java");
}

/* The command line and the environment's options. */
static void read_options(const struct fx_perfmap_owner *o, struct fx_jvm_verdict *v)
{
	static const char *const files[] = { "cmdline", "environ" };
	static const size_t max[] = { FX_JVMATTACH_MAX_CMDLINE, FX_JVMATTACH_MAX_ENVIRON };
	char path[PATH_MAX];

	for (int k = 0; k < 2; k++) {
		char *buf = malloc(max[k] + 1);
		size_t len = 0;
		int ret = buf ? 0 : -ENOMEM;

		snprintf(path, sizeof(path), "%s/%d/%s", o->proc_root, (int)o->pid, files[k]);
		if (ret == 0)
			ret = read_all(path, buf, max[k], &len);
		if (ret < 0)
			raise_block(v, FX_JVM_UNREADABLE, files[k], strlen(files[k]),
				    strerror(-ret));
		else if (k == 0)
			fx_jvmattach_scan_cmdline(buf, len, v);
		else
			fx_jvmattach_scan_environ(buf, len, v);
		free(buf);
	}
}

int fx_jvmattach_inspect(const struct fx_perfmap_owner *o, struct fx_jvm_info *out)
{
	struct fx_jvm_info info = { 0 };
	bool caught = true; /* unless the status, read whole, says not */
	int ret = read_maps(o, &info.hotspot);

	if (ret == 0)
		ret = read_status(o, &info, &caught);
	if (ret == -EINVAL || ret == -EFBIG) {
		raise_block(&info.verdict, FX_JVM_UNREADABLE, "status", 6, "/proc");
		caught = true;
		ret = 0;
	}
	if (ret < 0)
		return ret;
	if (info.hotspot) {
		if (!is_launcher(o))
			raise_block(&info.verdict, FX_JVM_NOT_LAUNCHER, "", 0, "");
		read_options(o, &info.verdict);
		if (!caught)
			raise_block(&info.verdict, FX_JVM_NO_SIGQUIT, "", 0, "");
	}
	*out = info;
	return 0;
}

/* ---- the listener ---- */

static uint64_t now_ns(void)
{
	return fx_now_ns(CLOCK_MONOTONIC);
}

/* Milliseconds to @deadline_ns for poll(), at least 1 while it is ahead. */
static int ms_left(uint64_t deadline_ns)
{
	uint64_t now = now_ns();

	if (now >= deadline_ns)
		return 0;
	return (int)((deadline_ns - now + 999999) / 1000000 > 60000
			     ? 60000
			     : (deadline_ns - now + 999999) / 1000000);
}

/* The process's tmp/, not through a symlink. */
static int open_tmp(const struct fx_perfmap_owner *o)
{
	char path[PATH_MAX];
	int root, tmp;

	snprintf(path, sizeof(path), "%s/%d/root", o->proc_root, (int)o->pid);
	root = open(path, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (root < 0)
		return errno == ENOENT ? -ESRCH : -errno;
	tmp = openat(root, "tmp", O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (tmp < 0)
		tmp = errno == ENOTDIR ? -ELOOP : -errno;
	close(root);
	return tmp;
}

/* 0: @name in @dir is a socket of @uid or root; -ENOENT, -EPERM, -errno. */
static int socket_there(int dir, const char *name, uid_t uid)
{
	struct stat st;

	if (fstatat(dir, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return -errno;
	if (!S_ISSOCK(st.st_mode) || (st.st_uid != uid && st.st_uid != 0))
		return -EPERM;
	return 0;
}

static int send_all(int s, const char *buf, size_t len, uint64_t deadline_ns)
{
	while (len) {
		struct pollfd pfd = { .fd = s, .events = POLLOUT };
		ssize_t n;
		int ms = ms_left(deadline_ns);

		if (!ms)
			return -ETIMEDOUT;
		if (poll(&pfd, 1, ms) < 0 && errno != EINTR)
			return -errno;
		n = send(s, buf, len, MSG_NOSIGNAL);
		if (n < 0 && (errno == EAGAIN || errno == EINTR))
			continue;
		if (n < 0)
			return -errno;
		buf += n;
		len -= (size_t)n;
	}
	return 0;
}

/* The reply up to the end of the stream; its first @size - 1 bytes kept. */
static int recv_all(int s, char *buf, size_t size, size_t *len, uint64_t deadline_ns)
{
	char sink[4096];

	*len = 0;
	for (;;) {
		struct pollfd pfd = { .fd = s, .events = POLLIN };
		bool keep = *len < size - 1;
		ssize_t n;
		int ms = ms_left(deadline_ns);

		if (!ms)
			return -ETIMEDOUT;
		if (poll(&pfd, 1, ms) < 0 && errno != EINTR)
			return -errno;
		n = keep ? recv(s, buf + *len, size - 1 - *len, 0) : recv(s, sink, sizeof(sink), 0);
		if (n < 0 && (errno == EAGAIN || errno == EINTR))
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			break;
		if (keep)
			*len += (size_t)n;
	}
	buf[*len] = '\0';
	return 0;
}

/* Connects to @name in @tmp and checks the peer is @o's process. */
static int connect_jvm(const struct fx_perfmap_owner *o, int tmp, const char *name)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct ucred cred;
	socklen_t cl = sizeof(cred);
	int s, n;

	/* Through the directory opened without following a link. */
	n = snprintf(sa.sun_path, sizeof(sa.sun_path), "/proc/self/fd/%d/%s", tmp, name);
	if (n < 0 || (size_t)n >= sizeof(sa.sun_path))
		return -ENAMETOOLONG;
	s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (s < 0)
		return -errno;
	if (connect(s, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		/* Gone since it was seen: refused, not "no listener". */
		n = errno == ENOENT ? -ECONNREFUSED : -errno;
		close(s);
		return n;
	}
	if (getsockopt(s, SOL_SOCKET, SO_PEERCRED, &cred, &cl) < 0 || cred.pid != o->pid) {
		close(s);
		return -EPERM;
	}
	return s;
}

static int talk(const struct fx_perfmap_owner *o, int tmp, const char *name, uint64_t deadline_ns,
		char *msg, size_t size)
{
	static const char req[] = "1\0jcmd\0Compiler.perfmap\0\0"; /* and the literal's NUL */
	char *reply = calloc(1, FX_JVMATTACH_MAX_REPLY);
	size_t len = 0, body = 0;
	int s = connect_jvm(o, tmp, name), ret = 0, code = 0;

	if (size)
		msg[0] = '\0';
	if (!reply) {
		if (s >= 0)
			close(s);
		return -ENOMEM;
	}
	ret = s < 0 ? s : send_all(s, req, sizeof(req), deadline_ns);
	if (ret == 0)
		ret = recv_all(s, reply, FX_JVMATTACH_MAX_REPLY, &len, deadline_ns);
	if (ret == 0)
		ret = fx_jvmattach_parse_reply(reply, len, &code, &body);
	if (ret == 0 && code != 0) {
		const char *b = reply + body;
		size_t n = strcspn(b, "\n");

		if (size)
			snprintf(msg, size, "%d: %.*s", code, (int)n, b);
		for (size_t i = 0; i < size && msg[i]; i++)
			if ((unsigned char)msg[i] < 0x20 || msg[i] == 0x7f)
				msg[i] = '?';
		ret = -EPROTO;
	}
	if (s >= 0)
		close(s);
	free(reply);
	return ret;
}

/* The file that tells the JVM a SIGQUIT is an attach: in its cwd, else
 * its tmp/. */
struct trigger {
	int dir; /* -1: none of ours to remove */
	char name[32];
	dev_t dev;
	ino_t ino;
};

/* One attempt in @dir: 0 when a file the JVM takes is there (ours, or one
 * already there of its user or root), -EEXIST when one it would refuse is,
 * another -errno when none could be made. */
static int trigger_in(int dir, const struct fx_jvm_info *info, struct trigger *t)
{
	struct stat st;
	int fd = openat(dir, t->name,
			O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0600);

	if (fd < 0 && errno == EEXIST) {
		/* Another attach under way (jcmd's): the JVM takes that file. */
		if (fstatat(dir, t->name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode) &&
		    (st.st_uid == info->euid || st.st_uid == 0))
			return 0;
		return -EEXIST;
	}
	if (fd < 0)
		return -errno;
	/* Owned as jcmd, run as the JVM's user, would leave it. */
	if (fchown(fd, info->euid, info->egid) < 0 || fstat(fd, &st) < 0) {
		close(fd);
		unlinkat(dir, t->name, 0);
		return -EACCES;
	}
	close(fd);
	t->dev = st.st_dev;
	t->ino = st.st_ino;
	t->dir = dup(dir);
	return t->dir < 0 ? -errno : 0;
}

/* Makes the file, in the JVM's cwd or else its tmp/, the order in which it
 * looks. Returns 0 when a file it takes is there, or why not: then a
 * SIGQUIT would make it print a thread dump, and none is sent. */
static int trigger_make(const struct fx_perfmap_owner *o, const struct fx_jvm_info *info, int tmp,
			struct trigger *t)
{
	char path[PATH_MAX];
	int cwd, ret;

	t->dir = -1;
	snprintf(t->name, sizeof(t->name), ".attach_pid%d", (int)o->ns_pid);
	snprintf(path, sizeof(path), "%s/%d/cwd", o->proc_root, (int)o->pid);
	cwd = open(path, O_PATH | O_DIRECTORY | O_CLOEXEC);
	ret = cwd < 0 ? -errno : trigger_in(cwd, info, t);
	if (cwd >= 0)
		close(cwd);
	/* A file there it refuses stops it looking in tmp/. */
	if (ret == 0 || ret == -EEXIST)
		return ret;
	return trigger_in(tmp, info, t);
}

static void trigger_remove(struct trigger *t)
{
	struct stat st;

	if (t->dir < 0)
		return;
	/* Only the file made, not what took its name since. */
	if (fstatat(t->dir, t->name, &st, AT_SYMLINK_NOFOLLOW) == 0 && st.st_dev == t->dev &&
	    st.st_ino == t->ino)
		unlinkat(t->dir, t->name, 0);
	close(t->dir);
	t->dir = -1;
}

/* Starts the listener of @o's JVM and waits for its socket until @wait_ns. */
static int start_listener(const struct fx_perfmap_owner *o, int tmp, const char *name,
			  uint64_t wait_ns)
{
	struct fx_perfmap_owner again;
	struct fx_jvm_info now;
	struct trigger t = { .dir = -1 };
	int pfd = (int)syscall(SYS_pidfd_open, o->pid, 0), ret;

	if (pfd < 0)
		return errno == ESRCH ? -ESRCH : -errno;
	/* The pidfd holds the process the pid names now: it is the one
	 * inspected (same start) and still may be signalled. */
	ret = fx_perfmap_owner_of(o->proc_root, o->pid, &again);
	if (ret == 0 && (again.start_s != o->start_s || again.ns_pid != o->ns_pid))
		ret = -ESRCH;
	if (ret == 0)
		ret = fx_jvmattach_inspect(o, &now);
	if (ret == 0 && (!now.hotspot || now.verdict.block != FX_JVM_MAY_SIGNAL))
		ret = -ENOENT;
	if (ret == 0)
		ret = trigger_make(o, &now, tmp, &t);
	if (ret == 0 && syscall(SYS_pidfd_send_signal, pfd, SIGQUIT, NULL, 0) < 0)
		ret = errno == EPERM ? -EACCES : -errno;
	while (ret == 0 && (ret = socket_there(tmp, name, now.euid)) == -ENOENT) {
		struct pollfd p = { .fd = pfd, .events = POLLIN };
		int ms = ms_left(wait_ns);

		if (!ms) {
			ret = -ETIMEDOUT;
			break;
		}
		/* A pidfd is readable once its process has ended. */
		if (poll(&p, 1, ms < 20 ? ms : 20) > 0) {
			ret = -ESRCH;
			break;
		}
		ret = 0;
	}
	trigger_remove(&t);
	close(pfd);
	return ret;
}

int fx_jvmattach_perfmap(const struct fx_perfmap_owner *o, const struct fx_jvm_info *info,
			 bool may_signal, uint64_t wait_ns, uint64_t deadline_ns, char *msg,
			 size_t size)
{
	char name[32];
	int tmp = open_tmp(o), ret;

	if (size)
		msg[0] = '\0';
	if (tmp < 0)
		return tmp;
	snprintf(name, sizeof(name), ".java_pid%d", (int)o->ns_pid);
	ret = socket_there(tmp, name, info->euid);
	if (ret == -ENOENT && may_signal)
		ret = start_listener(o, tmp, name, wait_ns < deadline_ns ? wait_ns : deadline_ns);
	if (ret == 0)
		ret = talk(o, tmp, name, deadline_ns, msg, size);
	close(tmp);
	return ret;
}

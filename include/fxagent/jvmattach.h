/* SPDX-License-Identifier: MIT */
/* jvmattach: a client of HotSpot's attach listener, the channel jcmd uses,
 * for one thing: asking a JVM to write its perf map again
 * (Compiler.perfmap), so that the code it compiled since is named.
 *
 * The protocol (HotSpot on Linux, JDK 9 and later): the listener is a Unix
 * socket, tmp/.java_pid<NSPID> under the JVM's own root (its mount
 * namespace; NSPID is its pid there). The JVM starts it when it receives
 * SIGQUIT while a file .attach_pid<NSPID> owned by its user (or root) is in
 * its cwd or tmp/. A request is "1" (the protocol's version), the command
 * ("jcmd") and three arguments, each NUL-terminated; the reply is the
 * command's return code in decimal on its first line ("0": done), then the
 * command's output, up to the end of the stream.
 *
 * Safety. SIGQUIT ends a JVM started with -Xrs or -XX:+ReduceSignalUsage
 * (no handler: the default action, a core dump), and makes one started with
 * -XX:+DisableAttachMechanism print a thread dump on its stdout. So a
 * process is signalled only when all of this holds, read right after a
 * pidfd of it was opened (the signal goes through that pidfd, so a reused
 * pid is never signalled): HotSpot's libjvm.so is mapped (not OpenJ9's);
 * the executable is the java launcher (a JVM made through JNI has options
 * nobody can read); the process catches SIGQUIT (SigCgt of its status: with
 * -Xrs it does not); and neither its command line nor JAVA_TOOL_OPTIONS,
 * JDK_JAVA_OPTIONS or _JAVA_OPTIONS of its environment holds -Xrs,
 * ReduceSignalUsage or DisableAttachMechanism in any form but "-XX:-...",
 * nor options the agent cannot read (an @argfile, -XX:Flags=,
 * -XX:VMOptionsFile=). Anything unreadable or too long counts as a "no".
 * Every argument is looked at, the application's too: one that looks like
 * such an option also means "no" (the safe side). A listener that is
 * already there is used whatever the options say.
 *
 * Trust: the socket is checked without following a symlink (a socket, owned
 * by the JVM's effective user or root), connected through the tmp/ directory
 * opened without following one, and after connecting the peer must be the
 * JVM itself (SO_PEERCRED), before a byte is written. The attach file is
 * created with O_CREAT|O_EXCL|O_NOFOLLOW, given to the JVM's user, and
 * removed afterwards only if it is still the file created.
 *
 * Threads: the parsers are pure; fx_jvmattach_inspect() and
 * fx_jvmattach_perfmap() block (bounded by their deadline) and may run on
 * any thread; the agent calls them from the publisher's (jvmrefresh.h).
 */
#ifndef FXAGENT_JVMATTACH_H
#define FXAGENT_JVMATTACH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "fxagent/perfmap.h"

/* Why a JVM may not be signalled, weakest first; FX_JVM_MAY_SIGNAL: it may. */
enum fx_jvm_block {
	FX_JVM_MAY_SIGNAL = 0,
	FX_JVM_UNREADABLE,	/* its status, command line or environment not read whole */
	FX_JVM_NOT_LAUNCHER,	/* not started by the java launcher (JNI: options unknown) */
	FX_JVM_OPTIONS_HIDDEN,	/* options in a file: @argfile, -XX:Flags=, -XX:VMOptionsFile= */
	FX_JVM_NO_SIGQUIT,	/* SIGQUIT not caught: it would end the JVM */
	FX_JVM_NO_SIGNALS,	/* -Xrs or -XX:+ReduceSignalUsage */
	FX_JVM_ATTACH_DISABLED, /* -XX:+DisableAttachMechanism */
};

/* What decided a JVM's block, for the messages. */
struct fx_jvm_verdict {
	enum fx_jvm_block block;
	char option[64]; /* the option (cut), or "" */
	char where[24];	 /* "command line", "JAVA_TOOL_OPTIONS", ..., or "" */
};

/* What fx_jvmattach_inspect() found of a process. */
struct fx_jvm_info {
	bool hotspot;		       /* HotSpot's libjvm.so is mapped */
	uid_t euid;		       /* its effective user and group: the socket's */
	gid_t egid;		       /* owner, and the attach file's */
	struct fx_jvm_verdict verdict; /* whether it may be signalled */
};

/* Bounds of what is read of a process. */
#define FX_JVMATTACH_MAX_CMDLINE (256u << 10)
#define FX_JVMATTACH_MAX_ENVIRON (1u << 20)
/* Of a reply, what is kept for messages. */
#define FX_JVMATTACH_MAX_REPLY 4096

/* Looks at the options of a JVM's command line: @buf, @len bytes of
 * /proc/PID/cmdline (arguments each NUL-terminated; a last one without its
 * NUL is taken too). Raises @v->block to what an option says, with the
 * option and "command line", when that is stronger than what @v holds.
 * Returns the new @v->block. */
enum fx_jvm_block fx_jvmattach_scan_cmdline(const char *buf, size_t len, struct fx_jvm_verdict *v);

/* The same for the JVM's options in an environment: @len bytes of
 * /proc/PID/environ ("NAME=value", each NUL-terminated). The values of
 * JAVA_TOOL_OPTIONS, JDK_JAVA_OPTIONS and _JAVA_OPTIONS are split at white
 * space, quotes dropped. */
enum fx_jvm_block fx_jvmattach_scan_environ(const char *buf, size_t len, struct fx_jvm_verdict *v);

/* Parses a reply: the return code (decimal, a '-' allowed, on the first
 * line, ended by '\n') into *@code and where the output starts into
 * *@body. Returns 0, or -EBADMSG (no complete first line, or not a number
 * that fits an int). */
int fx_jvmattach_parse_reply(const char *buf, size_t len, int *code, size_t *body);

/* Why a JVM may not be signalled, in words ("attach disabled
 * (-XX:+DisableAttachMechanism in its command line)"), into @buf. */
void fx_jvmattach_why(const struct fx_jvm_verdict *v, char *buf, size_t size);

/* Reads what decides about process @o->pid (under @o->proc_root): whether
 * it is a HotSpot JVM, its effective ids, and whether it may be signalled.
 * Returns 0 (the rest of a verdict that could not be read is
 * FX_JVM_UNREADABLE), or -ESRCH (gone) or another -errno (its status or
 * maps unreadable). Logs nothing. */
int fx_jvmattach_inspect(const struct fx_perfmap_owner *o, struct fx_jvm_info *out);

/* Asks @o's JVM to write its perf map: connects to its listener, or, when
 * there is none and @may_signal, starts it (attach file, SIGQUIT through a
 * pidfd, re-checked as fx_jvmattach_inspect() does just before) and waits
 * for it, polling, until @wait_ns (CLOCK_MONOTONIC) at the latest. Every
 * step ends by @deadline_ns (CLOCK_MONOTONIC; @wait_ns <= @deadline_ns).
 * @info is what fx_jvmattach_inspect() said of the process.
 * Returns 0 when the JVM answered "0"; -ENOENT: no listener and not
 * allowed to start one; -ETIMEDOUT: no listener by @wait_ns, or no whole
 * reply by @deadline_ns; -EPERM: the socket or its peer is not the JVM's;
 * -EPROTO: the JVM answered another code (its first line of output in
 * @msg, @size bytes, NUL-terminated); -EBADMSG: a reply that does not
 * parse; -EACCES: the agent may not connect, make the attach file as the
 * JVM's user, or signal (it is neither root nor the JVM's user); -EEXIST:
 * an attach file of another user is where the JVM looks (a SIGQUIT would
 * print a thread dump); -ESRCH: the process is gone; or another -errno.
 * No SIGQUIT is sent without an attach file the JVM takes. Logs nothing. */
int fx_jvmattach_perfmap(const struct fx_perfmap_owner *o, const struct fx_jvm_info *info,
			 bool may_signal, uint64_t wait_ns, uint64_t deadline_ns, char *msg,
			 size_t size);

#endif

/* SPDX-License-Identifier: MIT */
/* jitdump: the records a runtime writes of the code it compiles, jit-PID.dump
 * (Node --perf-prof, CPython 3.13 -X perf_jit, .NET, Julia): names
 * (CODE_LOAD, CODE_MOVE) and the .eh_frame that unwinds each piece of code
 * (CODE_UNWINDING_INFO, written before the load it describes).
 *
 * The file: a header {magic "JiTD" 0x4A695444, version, header size, ...,
 * pid, ...}, then records {id, total_size, timestamp} and a body. Runtimes
 * append while they run, so the last record may be incomplete: it is left for
 * the next read. Records are read through a cursor that holds one block of
 * the file: a code load's code bytes (up to megabytes) are skipped, not read.
 *
 * Finding it: a runtime maps a page of its dump executable so that
 * profilers see it. The file is found among /proc/PID/maps as
 * "jit-NSPID.dump" and opened through /proc/PID/map_files/START-END: the very
 * file the process mapped, wherever its path points now. It is checked on
 * the fd as a perf map is (perfmap.h: regular, the process's own, not older
 * than the process, bounded), and its header must name the process.
 *
 * Timestamps: runtimes stamp records with CLOCK_MONOTONIC, the samples'
 * clock. A window's frames are named from the records stamped up to its last
 * sample, later records winning (as the perf map's lines do): code loaded
 * after the window, into a range it reused, does not rename the window's
 * frames. A stamp more than FX_JITDUMP_CLOCK_SLACK_NS after that is another
 * clock's (a dump stamped with the CPU's counter, flag bit 0): no cutoff.
 */
#ifndef FXAGENT_JITDUMP_H
#define FXAGENT_JITDUMP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "fxagent/perfmap.h"

#define FX_JITDUMP_MAGIC 0x4A695444u
/* A name longer than this is cut. */
#define FX_JITDUMP_MAX_NAME 4096
/* A CODE_UNWINDING_INFO larger than this is skipped (CPython's: 68 bytes). */
#define FX_JITDUMP_MAX_UNWIND (64u << 10)
/* See "Timestamps" above. */
#define FX_JITDUMP_CLOCK_SLACK_NS (3600ull * 1000000000ull)
/* A record larger than this ends the file: it is not one. */
#define FX_JITDUMP_MAX_RECORD (64u << 20)

enum fx_jitdump_id {
	FX_JITDUMP_CODE_LOAD = 0,
	FX_JITDUMP_CODE_MOVE = 1,
	FX_JITDUMP_CODE_DEBUG_INFO = 2,
	FX_JITDUMP_CODE_CLOSE = 3,
	FX_JITDUMP_CODE_UNWINDING_INFO = 4,
};

/* One record, as far as it is used. Pointers are into the cursor's block:
 * valid until the next fx_jitdump_next(). */
struct fx_jitdump_record {
	uint32_t id;
	uint64_t timestamp;
	/* CODE_LOAD: the code's range and index (the runtime's id of it), its
	 * name (not NUL-terminated; cut at FX_JITDUMP_MAX_NAME). CODE_MOVE: the
	 * new range, the index, and the old address. */
	uint64_t addr, size, index, old_addr;
	const char *name;
	size_t name_len;
	/* CODE_UNWINDING_INFO: .eh_frame then .eh_frame_hdr, as the runtime
	 * laid them out right after the code of the next load. */
	const uint8_t *eh_frame;
	size_t eh_frame_len;
	const uint8_t *eh_frame_hdr;
	size_t eh_frame_hdr_len;
};

struct fx_jitdump_stats {
	uint64_t records; /* records read */
	uint64_t loads;	  /* CODE_LOAD */
	uint64_t moves;	  /* CODE_MOVE */
	uint64_t unwinds; /* CODE_UNWINDING_INFO */
	uint64_t skipped; /* malformed or over a bound (the record is passed over) */
	uint64_t partial; /* a last record not yet whole (0 or 1 a read) */
	uint64_t later;	  /* loads and moves stamped after the names' cutoff */
};

/* A place in a jitdump: the file (an fd) or a buffer (fd < 0). */
struct fx_jitdump_cursor {
	int fd;
	uint64_t size; /* the file's size when the read began */
	uint64_t off;  /* the next record */
	const uint8_t *mem;
	uint8_t *buf; /* one block of the file */
	uint64_t buf_off;
	size_t buf_len;
	bool bad; /* the header or a record's frame is not jitdump's: stop */
};

/* Starts reading @fd (or @mem, @len bytes, when @fd < 0) at its header.
 * Checks the header; *@pid gets the pid it names. Returns 0, -EAGAIN (the
 * header is not whole yet), -EBADMSG (not a jitdump), -ENOMEM or -errno. */
int fx_jitdump_begin(struct fx_jitdump_cursor *c, int fd, const void *mem, size_t len,
		     uint32_t *pid);

/* Goes on reading @fd (or @mem) from @off, a value of c->off after an
 * earlier read, up to its size now. @c is new (or ended). Returns 0 or
 * -errno. */
int fx_jitdump_resume(struct fx_jitdump_cursor *c, int fd, const void *mem, size_t len,
		      uint64_t off);

/* The next whole record into @r. Returns 1, 0 at the end of what is whole,
 * or -EBADMSG (the file's records cannot be followed further; c->bad).
 * Records malformed within their frame are passed over and counted. */
int fx_jitdump_next(struct fx_jitdump_cursor *c, struct fx_jitdump_record *r,
		    struct fx_jitdump_stats *st);

void fx_jitdump_end(struct fx_jitdump_cursor *c);

/* Opens and checks the jitdump process @o maps (see above). Returns the fd,
 * -ENOENT (it maps none), or what fx_perfmap_open() returns for a file it
 * refuses; -EBADMSG when the file's header is not a jitdump of the
 * process. */
int fx_jitdump_open(const struct fx_perfmap_owner *o);

/* For each of the @n sorted @addrs, the name of the last CODE_LOAD or
 * CODE_MOVE of the dump read from @fd (or @mem) that covers it, into @out
 * (zeroed by the caller). Records stamped after @until (CLOCK_MONOTONIC ns;
 * UINT64_MAX: none) are left out, as "Timestamps" above says, and counted
 * in st->later. Returns 0 or -errno. */
int fx_jitdump_names(int fd, const void *mem, size_t len, const uint64_t *addrs, size_t n,
		     uint64_t until, struct fx_perfmap_hit *out, struct fx_jitdump_stats *st);

#endif

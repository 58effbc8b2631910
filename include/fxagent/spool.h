/* SPDX-License-Identifier: MIT */
/* spool: the on-disk queue of finished chunks waiting to be uploaded.
 *
 * A chunk is written into the spool (write, fsync, rename: see
 * fx_profile_write_file) before its first upload try, and deleted only when
 * the collector acknowledged it. Everything the uploader needs is in the file
 * name, so a restarted agent finds its pending chunks by listing the
 * directory, oldest first:
 *   <start ms>-<end ms>-<seq>-<id>-<target>.json.gz
 * A chunk is written under incoming/ (fx_spool_path) and moved in by
 * fx_spool_add once the oldest chunks made room for it, so the spool never
 * holds more than max_bytes (the dropped chunks are counted and logged); it
 * is bounded by max_age too. Chunks the collector refused go to rejected/.
 * The directory is the agent's alone (fx_trust_dir: made 0700, refused if
 * others can write it), and a chunk is opened for sending only through
 * fx_spool_open_chunk, which checks the file on its fd first: a file that is
 * not a chunk of ours goes to rejected/ unsent.
 * Thread-safe: the publisher adds while the uploader takes.
 */
#ifndef FXAGENT_SPOOL_H
#define FXAGENT_SPOOL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define FX_CHUNK_ID_LEN	   32 /* hex characters of a chunk id (128 bits) */
#define FX_TARGET_NAME_MAX 64

/* What a chunk is, as its file name says. */
struct fx_chunk_info {
	int64_t start_ms, end_ms;     /* window, Unix epoch milliseconds */
	int64_t seq;		      /* window sequence number */
	char id[FX_CHUNK_ID_LEN + 1]; /* unique, lower-case hex */
	char target[FX_TARGET_NAME_MAX + 1];
};

struct fx_spool_opts {
	const char *directory; /* created if missing, with rejected/ below it */
	uint64_t max_bytes;    /* 0 = no limit */
	uint64_t max_age_s;    /* chunks older than this (by end_ms) are dropped; 0 = none */
};

struct fx_spool_stats {
	uint64_t pending; /* chunks waiting */
	uint64_t bytes;	  /* their size */
	uint64_t added;
	uint64_t uploaded; /* fx_spool_done() */
	uint64_t rejected; /* fx_spool_reject() */
	uint64_t dropped;  /* removed for max_bytes or max_age */
	uint64_t dropped_bytes;
};

struct fx_spool;

/* Opens (creating) the spool and takes stock of the chunks already there
 * (a file whose name does not parse is left alone, logged once; leftover
 * temporary files of an interrupted write are removed). Returns 0 or -errno
 * (logged). */
int fx_spool_open(const struct fx_spool_opts *opts, struct fx_spool **out);
void fx_spool_free(struct fx_spool *sp);

/* Fills @info->id with a fresh random id. */
void fx_spool_new_id(struct fx_chunk_info *info);

/* The path to write the chunk @info to (under incoming/). */
int fx_spool_path(const struct fx_spool *sp, const struct fx_chunk_info *info, char *out,
		  size_t len);

/* Takes a chunk just written (renamed into place) at fx_spool_path(): drops
 * the oldest chunks until it fits under max_bytes, moves it into the spool,
 * then enforces max_age. Returns 0 or -errno. */
int fx_spool_add(struct fx_spool *sp, const struct fx_chunk_info *info);

/* The oldest pending chunk: fills @info and @path and returns 1; 0 when the
 * spool is empty. The chunk stays pending until done or reject. */
int fx_spool_peek(struct fx_spool *sp, struct fx_chunk_info *info, char *path, size_t len);

/* The chunk was acknowledged: delete it. */
int fx_spool_done(struct fx_spool *sp, const struct fx_chunk_info *info);
/* The collector refused it: move it to rejected/ (kept for a person to look at;
 * rejected/ is bounded by max_bytes too). */
int fx_spool_reject(struct fx_spool *sp, const struct fx_chunk_info *info);

/* Opens the pending chunk @info for sending, relative to the spool's
 * directory fd and without following a symlink, and checks it on the fd: a
 * regular file owned by the agent's user with one link, at most
 * FX_CHUNK_MAX_BYTES, and a whole chunk of ours (fx_chunk_check_fd). Returns
 * the fd (the caller closes it) and its @size; -ENOENT when it is gone;
 * -EBADMSG when it must not be sent (@why says why: give it to
 * fx_spool_quarantine); -ENOMEM. */
int fx_spool_open_chunk(struct fx_spool *sp, const struct fx_chunk_info *info, uint64_t *size,
			char *why, size_t whylen);

/* A pending file that failed fx_spool_open_chunk: logs @why once and moves
 * it to rejected/ (or leaves it alone where it cannot be moved); it is no
 * longer pending. */
int fx_spool_quarantine(struct fx_spool *sp, const struct fx_chunk_info *info, const char *why);

void fx_spool_get_stats(struct fx_spool *sp, struct fx_spool_stats *out);

/* Parses a spool file name (the base name). Returns 0, or -EINVAL. */
int fx_spool_parse_name(const char *name, struct fx_chunk_info *info);

#endif

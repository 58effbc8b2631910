/* SPDX-License-Identifier: MIT */
/* ring: reading one perf mmap ring buffer.
 *
 * Four steps, as libperf does: fx_ring_begin() takes data_head (acquire),
 * fx_ring_next() returns records one by one (a record that wraps around the end
 * of the ring is copied into a bounce buffer), fx_ring_end() publishes data_tail
 * (release) so the kernel may reuse the space. A record whose header.size is
 * impossible ends the read and is counted in `corrupt`: the rest of the ring
 * is skipped rather than misread.
 */
#ifndef FXAGENT_RING_H
#define FXAGENT_RING_H

#include <linux/perf_event.h>
#include <stddef.h>
#include <stdint.h>

struct fx_ring {
	struct perf_event_mmap_page *meta;
	uint8_t *data;	  /* data area, `size` bytes */
	uint64_t size;	  /* power of two */
	uint64_t head;	  /* as read by fx_ring_begin */
	uint64_t tail;	  /* next byte to read */
	uint8_t *bounce;  /* for records that wrap; 64 KiB (max header.size) */
	uint64_t corrupt; /* reads ended by an impossible record size */
};

/* Sets up a reader over @meta, whose data area is meta->data_offset /
 * meta->data_size (as the kernel fills them), or, when those are 0 (old
 * kernels, tests), the @data_size bytes after the first page of @page_size.
 * Returns 0 or -ENOMEM / -EINVAL (size not a power of two). */
int fx_ring_init(struct fx_ring *r, struct perf_event_mmap_page *meta, size_t page_size,
		 size_t data_size);
void fx_ring_release(struct fx_ring *r);

void fx_ring_begin(struct fx_ring *r);
/* Where the next record begins, when @len bytes from there do not wrap
 * (NULL otherwise): for prefetching, the bytes may not be written yet. */
const uint8_t *fx_ring_ahead(const struct fx_ring *r, size_t len);
/* The next record, or NULL when none is left. The pointer is valid until the
 * next call of fx_ring_next() or fx_ring_end(). */
const struct perf_event_header *fx_ring_next(struct fx_ring *r);
/* Puts back @h, the record fx_ring_next() just returned: the next call
 * returns it again. */
void fx_ring_unread(struct fx_ring *r, const struct perf_event_header *h);
/* Gives the space of the records read so far back to the kernel. May be
 * called after every record: the next fx_ring_next() goes on from there. */
void fx_ring_end(struct fx_ring *r);

#endif

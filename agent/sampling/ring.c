/* SPDX-License-Identifier: MIT */
#include "fxagent/ring.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define BOUNCE_SIZE 65536 /* header.size is a u16 */

int fx_ring_init(struct fx_ring *r, struct perf_event_mmap_page *meta, size_t page_size,
		 size_t data_size)
{
	memset(r, 0, sizeof(*r));
	r->meta = meta;
	if (meta->data_size) {
		r->data = (uint8_t *)meta + meta->data_offset;
		r->size = meta->data_size;
	} else {
		r->data = (uint8_t *)meta + page_size;
		r->size = data_size;
	}
	if (r->size == 0 || (r->size & (r->size - 1)))
		return -EINVAL;
	r->bounce = malloc(BOUNCE_SIZE);
	if (!r->bounce)
		return -ENOMEM;
	r->tail = __atomic_load_n(&meta->data_tail, __ATOMIC_RELAXED);
	r->head = r->tail;
	return 0;
}

void fx_ring_release(struct fx_ring *r)
{
	free(r->bounce);
	r->bounce = NULL;
}

void fx_ring_begin(struct fx_ring *r)
{
	/* Pairs with the kernel's write barrier: record bytes before data_head
	 * are visible once we see data_head. */
	r->head = __atomic_load_n(&r->meta->data_head, __ATOMIC_ACQUIRE);
}

const uint8_t *fx_ring_ahead(const struct fx_ring *r, size_t len)
{
	uint64_t off = r->tail & (r->size - 1);

	return len <= r->size - off ? r->data + off : NULL;
}

const struct perf_event_header *fx_ring_next(struct fx_ring *r)
{
	uint64_t avail = r->head - r->tail;
	uint64_t off, first;
	struct perf_event_header hdr;

	if (avail < sizeof(hdr))
		return NULL;
	off = r->tail & (r->size - 1);
	first = r->size - off;
	/* Even the header may wrap. */
	if (first >= sizeof(hdr)) {
		memcpy(&hdr, r->data + off, sizeof(hdr));
	} else {
		memcpy(&hdr, r->data + off, first);
		memcpy((uint8_t *)&hdr + first, r->data, sizeof(hdr) - first);
	}
	/* The kernel writes whole u64s: any other size would also leave the
	 * next record misaligned. */
	if (hdr.size < sizeof(hdr) || (hdr.size & 7) || hdr.size > avail || hdr.size > r->size) {
		/* The ring is not what we think it is: skip everything we have. */
		r->corrupt++;
		r->tail = r->head;
		return NULL;
	}
	r->tail += hdr.size;
	if (first >= hdr.size)
		return (const struct perf_event_header *)(r->data + off);
	memcpy(r->bounce, r->data + off, first);
	memcpy(r->bounce + first, r->data, hdr.size - first);
	return (const struct perf_event_header *)r->bounce;
}

void fx_ring_unread(struct fx_ring *r, const struct perf_event_header *h)
{
	r->tail -= h->size;
}

void fx_ring_end(struct fx_ring *r)
{
	/* Our reads of the records happen before the kernel may overwrite them. */
	__atomic_store_n(&r->meta->data_tail, r->tail, __ATOMIC_RELEASE);
}

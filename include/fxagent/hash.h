/* SPDX-License-Identifier: MIT */
/* hash: the agent's one hash of bytes and one integer mix, for its hash
 * tables (hashtab.h) and for telling contents apart.
 *
 * Bytes: FNV-1a 64, finalized with fx_mix64 so that the low bits a
 * power-of-two table uses depend on every input byte. Integers: fx_mix64
 * (murmur3's finalizer). Neither is meant to resist chosen collisions: a
 * table keyed by outside input bounds its size instead.
 */
#ifndef FXAGENT_HASH_H
#define FXAGENT_HASH_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* The start of a running byte hash (FNV-1a 64's offset basis). */
#define FX_HASH_INIT 0xcbf29ce484222325ULL

/* A 64-bit finalizer (murmur3's fmix64): each input bit flips about half of
 * the output bits. A bijection: distinct inputs give distinct outputs. */
static inline uint64_t fx_mix64(uint64_t x)
{
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdULL;
	x ^= x >> 33;
	x *= 0xc4ceb9fe1a85ec53ULL;
	x ^= x >> 33;
	return x;
}

/* Two integers as one hash: a key of two fields that do not pack into 64 bits. */
static inline uint64_t fx_mix64_pair(uint64_t a, uint64_t b)
{
	return fx_mix64(a * 0x9e3779b97f4a7c15ULL ^ fx_mix64(b));
}

/* Folds @n bytes at @p into the running hash @h (FNV-1a 64, not finalized).
 * For data in pieces: h = FX_HASH_INIT, h = fx_hash_add(h, piece, len) for
 * each, then fx_mix64(h) equals fx_hash_bytes() of the pieces joined. */
static inline uint64_t fx_hash_add(uint64_t h, const void *p, size_t n)
{
	const unsigned char *b = p;

	for (size_t i = 0; i < n; i++)
		h = (h ^ b[i]) * 0x100000001b3ULL;
	return h;
}

/* The hash of @n bytes at @p. */
static inline uint64_t fx_hash_bytes(const void *p, size_t n)
{
	return fx_mix64(fx_hash_add(FX_HASH_INIT, p, n));
}

/* The hash of the string @s, its NUL excluded: fx_hash_bytes(s, strlen(s)). */
static inline uint64_t fx_hash_str(const char *s)
{
	return fx_hash_bytes(s, strlen(s));
}

#endif

/* FNV-1a (32 bits): a cheap, stable spread of names over a fixed number of
 * buckets or locks. Not for anything a tenant could aim at for more than an
 * uneven spread. */
#ifndef SBX_BASE_FNV_H
#define SBX_BASE_FNV_H

#include <stdint.h>

#define FNV1A_START 2166136261u

/* h (FNV1A_START for a new hash) carried on over the bytes of s (NULL: none). */
static inline uint32_t fnv1a(uint32_t h, const char *s)
{
	for (const unsigned char *p = (const unsigned char *)s; p && *p; p++)
		h = (h ^ *p) * 16777619u;
	return h;
}

#endif

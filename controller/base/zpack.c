#include "base/zpack.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <zlib.h>

#include "base/xmalloc.h"

/* A 4 KiB window holds a whole trimmed object and the dictionary; memLevel 6
 * keeps the per-text reset (which clears the match hash table) to 16 KiB.
 * Level 6 packs a trimmed Sandbox about 1.3x smaller than level 1. */
#define WINDOW_BITS 12
#define MEM_LEVEL 6
#define LEVEL 6

struct zpack {
	z_stream def;
	unsigned char *dict;
	size_t dict_len;
};

static void zfail(const char *what, int rc)
{
	fprintf(stderr, "zlib %s failed (%d): out of memory\n", what, rc);
	abort();
}

struct zpack *zpack_new(const char *dict, size_t dict_len)
{
	struct zpack *z = xcalloc(1, sizeof *z);
	/* Only the window's worth at the end of a dictionary is ever used. */
	size_t max = ((size_t)1 << WINDOW_BITS) - 262;
	if (dict && dict_len > max) {
		dict += dict_len - max;
		dict_len = max;
	}
	if (dict && dict_len) {
		z->dict = xmalloc(dict_len);
		memcpy(z->dict, dict, dict_len);
		z->dict_len = dict_len;
	}
	int rc = deflateInit2(&z->def, LEVEL, Z_DEFLATED, -WINDOW_BITS, MEM_LEVEL, Z_DEFAULT_STRATEGY);
	if (rc != Z_OK)
		zfail("deflateInit2", rc);
	return z;
}

void zpack_free(struct zpack *z)
{
	if (!z)
		return;
	deflateEnd(&z->def);
	free(z->dict);
	free(z);
}

unsigned char *zpack_pack(struct zpack *z, const char *text, size_t len, size_t *zlen)
{
	int rc = deflateReset(&z->def);
	if (rc == Z_OK && z->dict)
		rc = deflateSetDictionary(&z->def, z->dict, (uInt)z->dict_len);
	if (rc != Z_OK)
		zfail("deflate setup", rc);
	size_t cap = deflateBound(&z->def, (uLong)len);
	unsigned char *out = xmalloc(cap);
	z->def.next_in = (Bytef *)text;
	z->def.avail_in = (uInt)len;
	z->def.next_out = out;
	z->def.avail_out = (uInt)cap;
	rc = deflate(&z->def, Z_FINISH);
	if (rc != Z_STREAM_END) /* deflateBound guarantees room */
		zfail("deflate", rc);
	*zlen = cap - z->def.avail_out;
	/* Trim to size: the bound is larger than the result, and what stays in
	 * the cache should cost what it holds. */
	return xrealloc(out, *zlen ? *zlen : 1);
}

char *zpack_unpack(const struct zpack *z, const unsigned char *p, size_t plen, size_t len)
{
	z_stream s = { 0 };
	int rc = inflateInit2(&s, -WINDOW_BITS);
	if (rc != Z_OK)
		zfail("inflateInit2", rc);
	if (z->dict && inflateSetDictionary(&s, z->dict, (uInt)z->dict_len) != Z_OK) {
		inflateEnd(&s);
		return NULL;
	}
	char *out = xmalloc(len + 1);
	s.next_in = (Bytef *)p;
	s.avail_in = (uInt)plen;
	s.next_out = (Bytef *)out;
	s.avail_out = (uInt)len;
	rc = inflate(&s, Z_FINISH);
	int ok = rc == Z_STREAM_END && s.avail_out == 0 && s.avail_in == 0;
	if (rc == Z_MEM_ERROR)
		zfail("inflate", rc);
	inflateEnd(&s);
	if (!ok) {
		free(out);
		return NULL;
	}
	out[len] = '\0';
	return out;
}

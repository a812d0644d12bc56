/* Deflated copies of short texts, such as the informer cache's trimmed
 * objects: a cache of 10,000 Sandboxes and their pods held 21 MB of compact
 * JSON, most of it the same keys and label names in every object. Raw deflate
 * (zlib) with a small window and an optional preset dictionary of those
 * common strings keeps each text in about a fifth of its size. */
#ifndef SBX_BASE_ZPACK_H
#define SBX_BASE_ZPACK_H

#include <stddef.h>

struct zpack;

/* A packer with the preset dictionary dict (dict_len bytes, copied; NULL or
 * 0 for none). Texts packed with it unpack only with the same dictionary.
 * Returns a new packer (caller frees with zpack_free); aborts when out of
 * memory (base/xmalloc.h). */
struct zpack *zpack_new(const char *dict, size_t dict_len);
void zpack_free(struct zpack *z);

/* Deflates text[0..len) into a new buffer (caller frees) of *zlen bytes.
 * Uses z's compressor state: one caller at a time per packer. Aborts when
 * zlib fails, which it does only when out of memory. */
unsigned char *zpack_pack(struct zpack *z, const char *text, size_t len, size_t *zlen);

/* Inflates what zpack_pack made (plen bytes) back into a NUL-terminated text
 * of len bytes (caller frees). Safe from any thread at once. Returns NULL when
 * the data is not a deflated text of exactly len bytes. */
char *zpack_unpack(const struct zpack *z, const unsigned char *p, size_t plen, size_t len);

#endif

/* The length-prefixed messages the scope digest, the pod seal, the owner
 * authorization record and the claim record are built from, and their hex
 * encoding. */
#ifndef SBX_SANDBOX_MAC_H
#define SBX_SANDBOX_MAC_H

#include <stddef.h>

#include "base/buf.h"

/* Appends lp(x) = uint32 big-endian byte length of x || bytes of x, the
 * unambiguous encoding the digest and the seal are built from. Returns 0 or
 * -1 (b's cap, or x longer than 4 GiB). */
int sbx_lp_append(struct buf *b, const void *x, size_t len);

/* Writes the lowercase hex of n bytes into out (size >= 2n + 1). */
void sbx_hex(const unsigned char *p, size_t n, char *out);

#endif

/* The length-prefixed messages the scope digest, the pod seal, the owner
 * authorization record and the claim record are built from, their hex
 * encoding, and the one HMAC the last three are: HMAC-SHA256 under a key of
 * the seal key list, in lowercase hex. */
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

/* Appends lp(s) for the string s. */
int sbx_lp_str(struct buf *b, const char *s);

/* Writes the lowercase hex HMAC-SHA256 of the message m under key into out
 * (64 hex digits and a NUL); the binary MAC is wiped. Returns 0, or -1 when
 * key is NULL or HMAC fails (out is "" then). Callers refuse keys shorter
 * than SBX_SEAL_KEY_MIN (sandbox/seal.h) first. */
int sbx_mac_hex(const unsigned char *key, size_t keylen, const struct buf *m, char out[65]);

#endif

/* The pod seal: proof that a pod was written by this controller, so a pod
 * that merely copies the reserved labels and annotations is never adopted
 * (contract sections 4 and 5). It is the lowercase hex HMAC-SHA256, under a
 * secret key only the controller holds, of
 *   lp("sandbox.dev/seal/v1") || lp(namespace) || lp(pod name) ||
 *   lp(scope digest) || owner || lp(fingerprint) || lp(claimedAt)
 * where owner is 0x00 when absent and 0x01 || lp(owner) when present, and lp
 * is the length prefix of the scope digest (uint32 big-endian || bytes). */
#ifndef SBX_SANDBOX_SEAL_H
#define SBX_SANDBOX_SEAL_H

#include <stddef.h>

/* Shortest key accepted: a guessable key would let anyone forge seals. */
#define SBX_SEAL_KEY_MIN 16

/* Computes the seal into out (64 hex digits and a NUL). owner NULL means no
 * owner, which differs from every owner including "". Returns 0, or -1 when
 * an argument other than owner is NULL, the key is shorter than
 * SBX_SEAL_KEY_MIN bytes or HMAC fails; on error out is "". */
int sbx_seal_compute(const unsigned char *key, size_t keylen, const char *ns, const char *pod_name,
		     const char *digest, const char *owner, const char *fingerprint,
		     const char *claimed_at, char out[65]);

/* Compares two seals in constant time. Returns 1 iff both are 64 lowercase
 * hex digits and equal; 0 otherwise (including either being NULL). */
int sbx_seal_equal(const char *a, const char *b);

#endif

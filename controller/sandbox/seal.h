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

/* ---- key rotation ----
 * The controller holds a list of keys, newest first: it seals new pods with
 * the newest and accepts a seal made with any of them, so pods sealed before
 * a rotation stay adoptable. A key file holds one key per line, newest first
 * (keys are text, e.g. base64 of random bytes; blank lines are skipped, a
 * trailing CR is dropped); several files are read in the order given. */

/* Shortest key accepted from a key file (a real secret, not a password). */
#define SBX_SEAL_FILE_KEY_MIN 32
/* Longest key line, and most keys held. */
#define SBX_SEAL_KEY_MAX 1024
#define SBX_SEAL_MAX_KEYS 16
/* Largest key file read. */
#define SBX_SEAL_FILE_MAX (SBX_SEAL_MAX_KEYS * (SBX_SEAL_KEY_MAX + 2))

struct sbx_seal_keys {
	unsigned char *key[SBX_SEAL_MAX_KEYS]; /* owned; key[0] signs */
	size_t len[SBX_SEAL_MAX_KEYS];
	size_t n;
};

/* Fills a caller-owned, empty key list. */
void sbx_seal_keys_init(struct sbx_seal_keys *k);
/* Wipes every key (OPENSSL_cleanse) and frees it; k is empty afterwards. */
void sbx_seal_keys_release(struct sbx_seal_keys *k);
/* Appends a copy of key[0..len) as the oldest key. Returns 0, or -1 with a
 * message when it is shorter than min, longer than SBX_SEAL_KEY_MAX, or the
 * list is full; on error k is unchanged. */
int sbx_seal_keys_add(struct sbx_seal_keys *k, const unsigned char *key, size_t len, size_t min,
		      char *err, size_t errlen);
/* Appends the keys of text[0..len) (one per line, newest first, each at least
 * SBX_SEAL_FILE_KEY_MIN bytes); what names the source in messages. Returns
 * the number of keys added (>= 1), or -1 with a message; on error k is
 * unchanged. */
int sbx_seal_keys_parse(struct sbx_seal_keys *k, const char *text, size_t len, const char *what,
			char *err, size_t errlen);
/* The same from the file at path (at most SBX_SEAL_FILE_MAX bytes; the
 * buffer is wiped before it is freed). */
int sbx_seal_keys_load(struct sbx_seal_keys *k, const char *path, char *err, size_t errlen);
/* Seals with the newest key (see sbx_seal_compute). Returns 0 or -1. */
int sbx_seal_sign(const struct sbx_seal_keys *k, const char *ns, const char *pod_name,
		  const char *digest, const char *owner, const char *fingerprint,
		  const char *claimed_at, char out[65]);
/* Returns the index of the key that made seal (0 = newest), or -1 when none
 * did, the list is empty or seal is malformed. Every key is tried, so the
 * time taken does not depend on which one matched. */
int sbx_seal_check(const struct sbx_seal_keys *k, const char *ns, const char *pod_name,
		   const char *digest, const char *owner, const char *fingerprint,
		   const char *claimed_at, const char *seal);

/* The name a pod's seal covers: pod_name, or "<pod_name>=<claim>" when the
 * pod carries a claim name other than its own (a warm pod bound to a scope,
 * sandbox.dev/claim): '=' is in no pod name, so neither form passes for the
 * other. Writes into out (n bytes; truncated names never verify). */
void sbx_seal_pod_name(const char *pod_name, const char *claim, char *out, size_t n);

/* Compares two seals in constant time. Returns 1 iff both are 64 lowercase
 * hex digits and equal; 0 otherwise (including either being NULL). */
int sbx_seal_equal(const char *a, const char *b);

#endif

#include "sandbox/seal.h"

#include <limits.h>
#include <string.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include "base/buf.h"
#include "sandbox/scope.h"

/* Cap on the sealed message; its fields are names, hashes and a timestamp. */
#define SEAL_MSG_CAP (64 * 1024)

/* Returns 1 iff s is exactly 64 lowercase hex digits. */
static int is_seal_hex(const char *s)
{
	size_t i;
	for (i = 0; s[i]; i++)
		if (i >= 64 || !((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
			return 0;
	return i == 64;
}

/* Appends lp(s). */
static int lp_str(struct buf *b, const char *s)
{
	return sbx_lp_append(b, s, strlen(s));
}

int sbx_seal_compute(const unsigned char *key, size_t keylen, const char *ns, const char *pod_name,
		     const char *digest, const char *owner, const char *fingerprint,
		     const char *claimed_at, char out[65])
{
	static const unsigned char absent = 0x00, present = 0x01;
	unsigned char mac[EVP_MAX_MD_SIZE];
	unsigned int maclen = 0;
	struct buf m;
	int rc = -1;

	out[0] = '\0';
	if (!key || keylen < SBX_SEAL_KEY_MIN || keylen > (size_t)INT_MAX || !ns || !pod_name ||
	    !digest || !fingerprint || !claimed_at)
		return -1;
	buf_init(&m, SEAL_MSG_CAP);
	int e = lp_str(&m, "sandbox.dev/seal/v1") | lp_str(&m, ns) | lp_str(&m, pod_name) |
		lp_str(&m, digest);
	if (owner)
		e |= buf_append(&m, &present, 1) | lp_str(&m, owner);
	else
		e |= buf_append(&m, &absent, 1);
	e |= lp_str(&m, fingerprint) | lp_str(&m, claimed_at);
	if (!e &&
	    HMAC(EVP_sha256(), key, (int)keylen, (const unsigned char *)m.data, m.len, mac,
		 &maclen) &&
	    maclen == 32) {
		sbx_hex(mac, 32, out);
		rc = 0;
	}
	OPENSSL_cleanse(mac, sizeof mac);
	buf_release(&m);
	return rc;
}

int sbx_seal_equal(const char *a, const char *b)
{
	if (!a || !b || !is_seal_hex(a) || !is_seal_hex(b))
		return 0;
	return CRYPTO_memcmp(a, b, 64) == 0;
}
